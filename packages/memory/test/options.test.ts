import { isCairnError } from '@cairn/core';
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

/** The INVALID_ARGUMENT of `call` (sync or async), its message checked against `message`. */
async function refused(call: () => unknown, message: string | RegExp): Promise<void> {
  let error: unknown;
  try {
    await call();
  } catch (e) {
    error = e;
  }
  expect(isCairnError(error, 'INVALID_ARGUMENT'), String(error)).toBe(true);
  if (typeof message === 'string') expect((error as Error).message).toBe(message);
  else expect((error as Error).message).toMatch(message);
}

describe('options: an unknown or misplaced key is INVALID_ARGUMENT naming it', () => {
  it('createMemory names a misspelled embedder or agentId instead of using a default', async () => {
    const store = createMemoryStore();
    await refused(
      () => createMemory({ store, agentId: 'a', embeder: hashingEmbedder() } as never),
      'createMemory options: unknown key "embeder" (did you mean "embedder"?)',
    );
    await refused(
      () => createMemory({ store, agentID: 'a' } as never),
      'createMemory options: unknown key "agentID" (did you mean "agentId"?)',
    );
  });

  it('remember, rememberMany and ingestDocument check the input and the options before embedding', async () => {
    const store = createMemoryStore();
    const embedder = countingEmbedder();
    const memory = createMemory({ store, embedder, agentId: 'a' });
    await refused(
      () => memory.remember({ text: 'x', roomID: 'r' } as never),
      'remember: unknown key "roomID" (did you mean "roomId"?)',
    );
    await refused(
      () => memory.remember({ text: 'x', allowDuplicate: true } as never),
      'remember: unknown key "allowDuplicate"; allowDuplicate is an option: pass it in the second argument',
    );
    await refused(
      () => memory.remember({ text: 'x' }, { allowDuplicates: true } as never),
      'remember options: unknown key "allowDuplicates" (did you mean "allowDuplicate"?)',
    );
    await refused(
      () => memory.rememberMany([{ text: 'x' }, { text: 'y', scop: 'room' } as never]),
      'memories[1]: unknown key "scop" (did you mean "scope"?)',
    );
    await refused(
      () => memory.rememberMany([{ text: 'x' }], { onprogress: () => {} } as never),
      'rememberMany options: unknown key "onprogress" (did you mean "onProgress"?)',
    );
    await refused(
      () => memory.ingestDocument({ text: 'x', chunkSize: 100 } as never),
      'ingestDocument: unknown key "chunkSize"; chunkSize is an option: pass it in the second argument',
    );
    await refused(
      () => memory.ingestDocument({ text: 'x' }, { chunksize: 100 } as never),
      'ingestDocument options: unknown key "chunksize" (did you mean "chunkSize"?)',
    );
    expect(embedder.calls).toEqual([]);
    expect(await store.countMemories()).toBe(0);
  });

  it('recall, recent and update name a misspelled key, the viewer’s included', async () => {
    const store = createMemoryStore();
    const memory = createMemory({ store, agentId: 'a' });
    const m = await memory.remember({ text: 'the deadline is Friday' });
    await refused(
      () => memory.recall('deadline', { veiwer: { agentId: 'b' } } as never),
      'recall options: unknown key "veiwer" (did you mean "viewer"?)',
    );
    await refused(
      () => memory.recall('deadline', { viewer: { agentId: 'a', roomID: 'r' } } as never),
      'viewer: unknown key "roomID" (did you mean "roomId"?)',
    );
    await refused(
      () => memory.recent({ limt: 1 } as never),
      'recent options: unknown key "limt" (did you mean "limit"?)',
    );
    await refused(
      () => memory.update(m.id, { txt: 'changed' } as never),
      'update: unknown key "txt" (did you mean "text"?)',
    );
    expect((await memory.get(m.id))!.content.text).toBe('the deadline is Friday');
  });

  it('chunkText, the embedders and memoriesProvider name an unknown option', async () => {
    await refused(
      () => chunkText('a b c', { size: 2 } as never),
      /^chunkText options: unknown key "size"; expected one of chunkSize, overlap$/,
    );
    await refused(
      () => hashingEmbedder({ dims: 64 } as never),
      /^hashingEmbedder options: unknown key "dims"/,
    );
    await refused(
      () => openAIEmbedder({ apiKey: 'k', modle: 'text-embedding-3-large' } as never),
      'openAIEmbedder options: unknown key "modle" (did you mean "model"?)',
    );
    const memory = createMemory({ store: createMemoryStore(), agentId: 'a' });
    await refused(
      () =>
        memoriesProvider(memory, {
          viewerFrom: () => ({ agentId: 'a' }),
          viewer: { agentId: 'a' },
        } as never),
      'memoriesProvider options: unknown key "viewer"; memoriesProvider takes viewerFrom: (ctx) => viewer',
    );
  });
});
