import { contentHash, createMemoryStore, localKeyring } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import { createMemory, normalizeText } from '../src/index.js';
import { describeConsolidationSuite } from './consolidation-suite.js';
import { describeMemorySuite } from './memory-suite.js';

describeMemorySuite('the in-memory store', { create: async () => createMemoryStore() });
describeConsolidationSuite('the in-memory store', { create: async () => createMemoryStore() });

// Everything again on a store that seals memories and their embeddings per tenant.
const encryption = { keyring: localKeyring('the memory suite secret, 32 bytes or more') };
describeMemorySuite('the in-memory store with encryption', {
  create: async () => createMemoryStore({ encryption }),
  cachesEmbeddings: false,
});
describeConsolidationSuite('the in-memory store with encryption', {
  create: async () => createMemoryStore({ encryption }),
});

describe('texts that differ only in a lone surrogate', () => {
  it('hash apart, and remember refuses both, storing nothing', async () => {
    // UTF-8 turns either lone half of 😀 into U+FFFD: hashing those bytes made them one text.
    const [high, low] = ['Great work \ud83d', 'Great work \ude00'];
    expect(contentHash(high)).not.toBe(contentHash(low));
    // A well-formed text keeps the hash it always had: SHA-256 of its UTF-8 bytes.
    expect(contentHash('Great work 😀')).toBe(
      'b07746a3c9001f87e0d4c1313f4ea4ee810250040e15c1c90ce4b7074b86f360',
    );
    // Stores refuse a lone surrogate (one text rule for every store), before any write.
    const store = createMemoryStore();
    const memory = createMemory({ store, agentId: 'a' });
    for (const text of [high, low])
      await expect(memory.remember({ text })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(await store.countMemories()).toBe(0);
  });
});

describe('normalizeText', () => {
  it('folds case, Unicode forms, white space and end punctuation, nothing else', () => {
    expect(normalizeText('  Ada\tlikes  TEA!! ')).toBe('ada likes tea');
    expect(normalizeText('ﬁne.')).toBe('fine');
    expect(normalizeText('Ada likes tea, not coffee')).toBe('ada likes tea, not coffee');
    expect(normalizeText('Ada likes tea')).not.toBe(normalizeText('Ada liked tea'));
  });
});
