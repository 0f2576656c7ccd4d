import { type JsonObject, type Memory, newId } from '@cairn/core';
import { beforeAll, describe, expect, it } from 'vitest';
import { matchesMemoryFilter } from '../../memory-search.js';
import type { MemoryFilter, MemorySearch, NewMemory } from '../../store.js';
import { SLOW_TEST_TIMEOUT, type StoreConformanceOptions, useStore } from '../context.js';
import { expectCode } from '../helpers.js';

const sortIds = (memories: Memory[]) => memories.map((m) => m.id).sort();

/**
 * `filter.metadataPrefix`: paths kept in metadata, matched by whole labels from the start,
 * inside the query, so that a search's top `limit` is taken among the memories under the
 * path only (a tenant's items are found however many other tenants' items outrank them).
 */
export function describeMetadataPrefix(options: StoreConformanceOptions): void {
  describe('metadata prefix filter', () => {
    const store = useStore(options);
    const agentId = `mp-${newId()}`;
    let data: Memory[] = [];
    let exact = true;

    beforeAll(async () => {
      exact = store().capabilities.vectorSearch === 'exact';
      const batch: NewMemory[] = [];
      const add = (metadata: JsonObject, text: string, embedding: number[]) =>
        batch.push({ agentId, content: { text }, metadata, embedding });
      // Other tenants, each a better match for "apple" (by words and by vector) than u1's.
      for (let i = 0; i < 40; i++)
        add({ namespace: ['users', `other${i}`] }, 'apple apple apple apple', [1, 0, 0, i / 100]);
      for (let i = 0; i < 3; i++)
        add(
          { namespace: ['users', 'u1'], ...(i === 0 ? { path: ['a', 'b'] } : {}) },
          `apple pie recipe number ${i} with many other words in it`,
          [0.2, 1, i / 10, 0],
        );
      add({ namespace: ['users', 'u1', 'notes'] }, 'apple notes', [0.3, 1, 0, 0.1]);
      add({ namespace: ['users', 'u10'] }, 'apple apple apple', [0.9, 0.1, 0, 0]);
      // Not arrays of those labels: a string, an object with index keys, nested arrays, numbers.
      add({ namespace: 'users' }, 'apple string', [1, 0, 0, 0]);
      add({ namespace: { 0: 'users', 1: 'u1' } }, 'apple object', [1, 0, 0, 0]);
      add({ namespace: [['users', 'u1']] }, 'apple nested', [1, 0, 0, 0]);
      add({ namespace: [1, 'u1'] }, 'apple number', [1, 0, 0, 0]);
      add({ elsewhere: ['users', 'u1'] }, 'apple elsewhere', [1, 0, 0, 0]);
      data = await store().addMemories(batch);
    }, SLOW_TEST_TIMEOUT);

    const cases: Array<[string, Record<string, string[]>]> = [
      ["a tenant's path", { namespace: ['users', 'u1'] }],
      ['a one-label path', { namespace: ['users'] }],
      ['an empty path (any array)', { namespace: [] }],
      ['a whole path', { namespace: ['users', 'u1', 'notes'] }],
      ['a later label alone', { namespace: ['u1'] }],
      ['a label written as a number', { namespace: ['1', 'u1'] }],
      ['the JSON text of a nested array', { namespace: ['["users","u1"]'] }],
      ['a key of Object.prototype', { constructor: [] }],
      ['two paths at once', { namespace: ['users', 'u1'], path: ['a'] }],
    ];
    const admitted = (paths: Record<string, string[]>) =>
      data.filter((m) => matchesMemoryFilter(m, { metadataPrefix: paths }));

    it('the reference admits what the paths name, by whole labels', () => {
      expect(admitted({ namespace: ['users', 'u1'] })).toHaveLength(4);
      expect(admitted({ namespace: ['users'] })).toHaveLength(45);
      expect(admitted({ namespace: [] })).toHaveLength(47);
      expect(admitted({ namespace: ['users', 'u1'], path: ['a'] })).toHaveLength(1);
      expect(admitted({ namespace: ['1', 'u1'] })).toHaveLength(0);
    });

    it.each(cases)('lists and counts exactly the memories under %s', async (_label, paths) => {
      const filter: MemoryFilter = { agentId, metadataPrefix: paths };
      expect(sortIds(await store().listMemories(filter, { limit: 1000 }))).toEqual(
        sortIds(admitted(paths)),
      );
      expect(await store().countMemories(filter)).toBe(admitted(paths).length);
    });

    it('keyword search takes its top hits among the memories under the path', async () => {
      const mine = admitted({ namespace: ['users', 'u1'] });
      const filter = { agentId, metadataPrefix: { namespace: ['users', 'u1'] } };
      const hits = await store().searchMemories({ text: 'apple', filter, limit: 3 });
      expect(hits).toHaveLength(3);
      for (const h of hits) expect(mine.map((m) => m.id)).toContain(h.memory.id);
      // The same ranking as a search restricted to those ids.
      const byIds = await store().searchMemories({
        text: 'apple',
        filter: { agentId, ids: mine.map((m) => m.id) },
        limit: 3,
      });
      expect(hits.map((h) => h.memory.id)).toEqual(byIds.map((h) => h.memory.id));
    });

    it('vector search takes its top hits among the memories under the path', async () => {
      const mine = admitted({ namespace: ['users', 'u1'] });
      const search = (filter: MemoryFilter): MemorySearch => ({
        vector: [1, 0, 0, 0],
        filter: { agentId, ...filter },
        limit: 3,
      });
      const hits = await store().searchMemories(
        search({ metadataPrefix: { namespace: ['users', 'u1'] } }),
      );
      expect(hits).toHaveLength(3);
      for (const h of hits) expect(mine.map((m) => m.id)).toContain(h.memory.id);
      if (exact) {
        const byIds = await store().searchMemories(search({ ids: mine.map((m) => m.id) }));
        expect(hits.map((h) => h.memory.id)).toEqual(byIds.map((h) => h.memory.id));
      }
    });

    it.each([
      ['an array', []],
      ['a path that is a string', { namespace: 'users' }],
      ['a label that is a number', { namespace: [1] }],
      ['a key with a dot', { 'a.b': [] }],
      ['a key with a quote', { 'a"': [] }],
      ['an empty key', { '': [] }],
      ['a label holding a NUL', { namespace: ['a\u0000b'] }],
      ['101 labels', { namespace: Array.from({ length: 101 }, (_, i) => `l${i}`) }],
    ])('rejects a metadataPrefix with %s (INVALID_ARGUMENT)', async (_label, paths) => {
      const filter = { agentId, metadataPrefix: paths } as unknown as MemoryFilter;
      await expectCode(() => store().listMemories(filter), 'INVALID_ARGUMENT');
      await expectCode(() => store().countMemories(filter), 'INVALID_ARGUMENT');
      await expectCode(() => store().searchMemories({ text: 'apple', filter }), 'INVALID_ARGUMENT');
    });
  });
}
