import { createMemoryStore, MAX_MEMORY_TEXT_LENGTH } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import {
  chunkText,
  createMemory,
  hashingEmbedder,
  memoriesProvider,
  openAIEmbedder,
} from '../src/index.js';
import { countingEmbedder } from './helpers.js';

/** An INVALID_ARGUMENT error with this message (a string, or `expect.stringMatching`). */
const invalid = (message: unknown) =>
  expect.objectContaining({ code: 'INVALID_ARGUMENT', message });

describe('options: an unknown or misplaced key is INVALID_ARGUMENT naming it', () => {
  it('createMemory names a misspelled embedder or agentId instead of using a default', async () => {
    const store = createMemoryStore();
    await expect(async () =>
      createMemory({ store, agentId: 'a', embeder: hashingEmbedder() } as never),
    ).rejects.toEqual(
      invalid('createMemory options: unknown key "embeder" (did you mean "embedder"?)'),
    );
    await expect(async () => createMemory({ store, agentID: 'a' } as never)).rejects.toEqual(
      invalid('createMemory options: unknown key "agentID" (did you mean "agentId"?)'),
    );
  });

  it('remember, rememberMany and ingestDocument check the input and the options before embedding', async () => {
    const store = createMemoryStore();
    const embedder = countingEmbedder();
    const memory = createMemory({ store, embedder, agentId: 'a' });
    await expect(async () => memory.remember({ text: 'x', roomID: 'r' } as never)).rejects.toEqual(
      invalid('remember: unknown key "roomID" (did you mean "roomId"?)'),
    );
    await expect(async () =>
      memory.remember({ text: 'x', allowDuplicate: true } as never),
    ).rejects.toEqual(
      invalid(
        'remember: unknown key "allowDuplicate"; allowDuplicate is an option: pass it in the second argument',
      ),
    );
    await expect(async () =>
      memory.remember({ text: 'x' }, { allowDuplicates: true } as never),
    ).rejects.toEqual(
      invalid('remember options: unknown key "allowDuplicates" (did you mean "allowDuplicate"?)'),
    );
    await expect(async () =>
      memory.rememberMany([{ text: 'x' }, { text: 'y', scop: 'room' } as never]),
    ).rejects.toEqual(invalid('memories[1]: unknown key "scop" (did you mean "scope"?)'));
    await expect(async () =>
      memory.rememberMany([{ text: 'x' }], { onprogress: () => {} } as never),
    ).rejects.toEqual(
      invalid('rememberMany options: unknown key "onprogress" (did you mean "onProgress"?)'),
    );
    await expect(async () =>
      memory.ingestDocument({ text: 'x', chunkSize: 100 } as never),
    ).rejects.toEqual(
      invalid(
        'ingestDocument: unknown key "chunkSize"; chunkSize is an option: pass it in the second argument',
      ),
    );
    await expect(async () =>
      memory.ingestDocument({ text: 'x' }, { chunksize: 100 } as never),
    ).rejects.toEqual(
      invalid('ingestDocument options: unknown key "chunksize" (did you mean "chunkSize"?)'),
    );
    expect(embedder.calls).toEqual([]);
    expect(await store.countMemories()).toBe(0);
  });

  it('input the store would refuse fails before the embedder is called, with the store’s error', async () => {
    const store = createMemoryStore();
    const embedder = countingEmbedder();
    const memory = createMemory({ store, embedder, agentId: 'a' });
    const stored = await memory.remember({ text: 'kept' });
    const before = embedder.texts();
    /** What the store itself says to the same memory. */
    const storeSays = async (m: Record<string, unknown>) => {
      try {
        await store.addMemories([{ agentId: 'a', ...m } as never]);
      } catch (e) {
        return expect.objectContaining({
          code: (e as { code: string }).code,
          message: (e as Error).message,
        });
      }
      throw new Error('the store took it');
    };
    const bad: Array<[string, Record<string, unknown>]> = [
      ['text too long', { text: 'x'.repeat(MAX_MEMORY_TEXT_LENGTH + 1) }],
      ['NUL in the text', { text: 'a\u0000b' }],
      ['lone surrogate in the text', { text: 'cut \ud83d' }],
      ['500-character roomId', { text: 'x', roomId: 'r'.repeat(500) }],
      ['Date in metadata', { text: 'x', metadata: { when: new Date(0) } }],
      ['500-character id', { text: 'x', id: 'i'.repeat(500) }],
      ['createdAt not a number', { text: 'x', createdAt: 'today' }],
    ];
    for (const [what, { text, ...rest }] of bad) {
      const expected = await storeSays({ content: { text }, ...rest });
      await expect(memory.remember({ text, ...rest } as never), what).rejects.toEqual(expected);
      // In a batch, the item is named by its position in the caller's list.
      await expect(
        memory.rememberMany([{ text: 'fine' }, { text, ...rest } as never]),
        what,
      ).rejects.toEqual(
        expect.objectContaining({
          code: 'INVALID_ARGUMENT',
          message: expect.stringMatching(/^memories\[1\]/),
        }),
      );
    }
    await expect(
      memory.ingestDocument({ text: 'a document', metadata: { when: new Date(0) } as never }),
    ).rejects.toEqual(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    await expect(memory.update(stored.id, { text: 'a\u0000b' })).rejects.toEqual(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
    await expect(
      memory.update(stored.id, { text: 'x'.repeat(MAX_MEMORY_TEXT_LENGTH + 1) }),
    ).rejects.toEqual(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(embedder.texts()).toBe(before);
    expect(await store.countMemories()).toBe(1);
  });

  it('recall, recent and update name a misspelled key, the viewer’s included', async () => {
    const store = createMemoryStore();
    const memory = createMemory({ store, agentId: 'a' });
    const m = await memory.remember({ text: 'the deadline is Friday' });
    await expect(async () =>
      memory.recall('deadline', { veiwer: { agentId: 'b' } } as never),
    ).rejects.toEqual(invalid('recall options: unknown key "veiwer" (did you mean "viewer"?)'));
    await expect(async () =>
      memory.recall('deadline', { viewer: { agentId: 'a', roomID: 'r' } } as never),
    ).rejects.toEqual(invalid('viewer: unknown key "roomID" (did you mean "roomId"?)'));
    await expect(async () => memory.recent({ limt: 1 } as never)).rejects.toEqual(
      invalid('recent options: unknown key "limt" (did you mean "limit"?)'),
    );
    await expect(async () => memory.update(m.id, { txt: 'changed' } as never)).rejects.toEqual(
      invalid('update: unknown key "txt" (did you mean "text"?)'),
    );
    expect((await memory.get(m.id))!.content.text).toBe('the deadline is Friday');
  });

  it('chunkText, the embedders and memoriesProvider name an unknown option', async () => {
    await expect(async () => chunkText('a b c', { size: 2 } as never)).rejects.toEqual(
      invalid(
        expect.stringMatching(
          /^chunkText options: unknown key "size"; expected one of chunkSize, overlap$/,
        ),
      ),
    );
    await expect(async () => hashingEmbedder({ dims: 64 } as never)).rejects.toEqual(
      invalid(expect.stringMatching(/^hashingEmbedder options: unknown key "dims"/)),
    );
    await expect(async () =>
      openAIEmbedder({ apiKey: 'k', modle: 'text-embedding-3-large' } as never),
    ).rejects.toEqual(
      invalid('openAIEmbedder options: unknown key "modle" (did you mean "model"?)'),
    );
    const memory = createMemory({ store: createMemoryStore(), agentId: 'a' });
    await expect(async () =>
      memoriesProvider(memory, {
        viewerFrom: () => ({ agentId: 'a' }),
        viewer: { agentId: 'a' },
      } as never),
    ).rejects.toEqual(
      invalid(
        'memoriesProvider options: unknown key "viewer"; memoriesProvider takes viewerFrom: (ctx) => viewer',
      ),
    );
  });
});
