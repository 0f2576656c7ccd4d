import { createMemoryStore } from '@cairn/store';
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
