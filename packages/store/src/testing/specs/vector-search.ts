import { type Memory, newId } from '@cairn/core';
import { beforeAll, describe, expect, it } from 'vitest';
import type { MemoryHit, MemorySearch, NewMemory } from '../../store.js';
import { SLOW_TEST_TIMEOUT, type StoreConformanceOptions, useStore } from '../context.js';
import { cosine, expectClose, expectCode, Rng } from '../helpers.js';

const DIMS = 8;
const COUNT = 300;

export function describeVectorSearch(options: StoreConformanceOptions): void {
  describe('vector search', () => {
    const store = useStore(options);
    const run = newId();
    const agentId = `vec-${run}`;
    const rareRoom = `rare-${run}`;
    const data: Memory[] = [];
    let exact = true;

    beforeAll(async () => {
      exact = store().capabilities.vectorSearch === 'exact';
      const rng = new Rng(424_242);
      const batch: NewMemory[] = [];
      for (let i = 0; i < COUNT; i++) {
        batch.push({
          agentId,
          // 12 memories sit in a rare room; the filter tests look for them among many.
          roomId: i % 25 === 0 ? rareRoom : `room-${i % 5}-${run}`,
          type: i % 3 === 0 ? 'fragment' : 'document',
          content: { text: `vector memory ${i}` },
          embedding: rng.vector(DIMS),
        });
      }
      // Some memories without embeddings: vector search never returns them.
      for (let i = 0; i < 10; i++)
        batch.push({ agentId, roomId: rareRoom, content: { text: `no vector ${i}` } });
      for (let i = 0; i < batch.length; i += 100)
        data.push(...(await store().addMemories(batch.slice(i, i + 100))));
    }, SLOW_TEST_TIMEOUT);

    /** Brute force: cosine against every admitted memory with an embedding, best first. */
    function reference(
      query: number[],
      admit: (m: Memory) => boolean,
      limit: number,
      threshold?: number,
    ) {
      return data
        .filter((m) => m.embedding !== null && admit(m))
        .map((m) => ({ id: m.id, score: cosine(query, m.embedding!) }))
        .filter((h) => threshold === undefined || h.score >= threshold)
        .sort((a, b) => b.score - a.score)
        .slice(0, limit);
    }

    /** Exact stores: the same ids in the same order with the same scores. Approximate: no
     * foreign ids, true scores, best first, and most of the true top found. */
    function expectMatches(
      hits: MemoryHit[],
      expected: Array<{ id: string; score: number }>,
      admit: (m: Memory) => boolean,
    ) {
      for (const h of hits) {
        expect(admit(h.memory), `hit ${h.memory.id} fails the filter`).toBe(true);
        expect(h.score).toBeCloseTo(cosine(h.memory.embedding ?? [], queryOf(h)), 4);
      }
      const scores = hits.map((h) => h.score);
      expect(scores).toEqual([...scores].sort((a, b) => b - a));
      if (exact) {
        expect(hits.map((h) => h.memory.id)).toEqual(expected.map((e) => e.id));
        expectClose(
          hits.map((h) => h.score),
          expected.map((e) => e.score),
          4,
        );
      } else {
        expect(hits.length).toBeLessThanOrEqual(expected.length);
        const found = hits.filter((h) => expected.some((e) => e.id === h.memory.id)).length;
        expect(found).toBeGreaterThanOrEqual(Math.floor(expected.length * 0.7));
      }
    }

    // The query of the search currently checked, so `expectMatches` can recompute scores.
    let currentQuery: number[] = [];
    const queryOf = (_h: MemoryHit) => currentQuery;
    async function search(s: MemorySearch): Promise<MemoryHit[]> {
      currentQuery = s.vector!;
      return store().searchMemories(s);
    }

    it(
      'returns the same top 10 as a brute-force cosine scan, best first, for 20 queries',
      async () => {
        const rng = new Rng(1);
        for (let q = 0; q < 20; q++) {
          const query = rng.vector(DIMS);
          const hits = await search({ vector: query, filter: { agentId }, limit: 10 });
          expect(hits).toHaveLength(10);
          expectMatches(
            hits,
            reference(query, () => true, 10),
            () => true,
          );
        }
      },
      SLOW_TEST_TIMEOUT,
    );

    it('returns whole memories with their embeddings', async () => {
      const query = new Rng(2).vector(DIMS);
      const [hit] = await search({ vector: query, filter: { agentId }, limit: 1 });
      const stored = data.find((m) => m.id === hit!.memory.id)!;
      expect({ ...hit!.memory, embedding: null }).toEqual({ ...stored, embedding: null });
      expectClose(hit!.memory.embedding, stored.embedding!);
    });

    it('finds a stored vector as its own best match with a score of 1', async () => {
      const target = data[137]!;
      const [hit] = await search({ vector: target.embedding!, filter: { agentId }, limit: 1 });
      expect(hit!.memory.id).toBe(target.id);
      expect(hit!.score).toBeCloseTo(1, 5);
    });

    it('uses cosine, not distance: a scaled query ranks the same', async () => {
      const query = new Rng(3).vector(DIMS);
      const a = await search({ vector: query, filter: { agentId }, limit: 10 });
      const b = await search({
        vector: query.map((x) => x * 37.5),
        filter: { agentId },
        limit: 10,
      });
      expect(b.map((h) => h.memory.id)).toEqual(a.map((h) => h.memory.id));
      expectClose(
        b.map((h) => h.score),
        a.map((h) => h.score),
        5,
      );
    });

    it('applies a filter that admits 12 of 300 inside the search, returning the true top among them', async () => {
      const rng = new Rng(4);
      const admit = (m: Memory) => m.roomId === rareRoom;
      for (let q = 0; q < 5; q++) {
        const query = rng.vector(DIMS);
        const all = await search({
          vector: query,
          filter: { agentId, roomId: rareRoom },
          limit: 50,
        });
        expect(all).toHaveLength(12);
        expectMatches(all, reference(query, admit, 50), admit);
        const top3 = await search({
          vector: query,
          filter: { agentId, roomId: rareRoom },
          limit: 3,
        });
        expectMatches(top3, reference(query, admit, 3), admit);
      }
    });

    it('finds the true top among a handful of ids', async () => {
      const rng = new Rng(5);
      const chosen = rng
        .sample(
          data.filter((m) => m.embedding),
          6,
        )
        .map((m) => m.id);
      const admit = (m: Memory) => chosen.includes(m.id);
      const query = rng.vector(DIMS);
      const hits = await search({ vector: query, filter: { ids: chosen }, limit: 4 });
      expectMatches(hits, reference(query, admit, 4), admit);
    });

    it('combines type and room filters', async () => {
      const query = new Rng(6).vector(DIMS);
      const room = `room-2-${run}`;
      const admit = (m: Memory) => m.type === 'fragment' && m.roomId === room;
      const hits = await search({
        vector: query,
        filter: { agentId, types: ['fragment'], roomId: room },
        limit: 7,
      });
      expectMatches(hits, reference(query, admit, 7), admit);
    });

    it('drops hits below the threshold', async () => {
      const rng = new Rng(7);
      for (const threshold of [0.9, 0.5, 0, -0.3]) {
        const query = rng.vector(DIMS);
        const hits = await search({ vector: query, filter: { agentId }, limit: 1000, threshold });
        for (const h of hits) expect(h.score).toBeGreaterThanOrEqual(threshold - 1e-9);
        expectMatches(
          hits,
          reference(query, () => true, 1000, threshold),
          () => true,
        );
      }
    });

    it('returns nothing when no memory reaches the threshold', async () => {
      const target = data[5]!;
      const opposite = target.embedding!.map((x) => -x);
      const hits = await search({
        vector: opposite,
        filter: { ids: [target.id] },
        limit: 10,
        threshold: 0,
      });
      expect(hits).toEqual([]);
    });

    it('never returns memories without an embedding', async () => {
      const query = new Rng(8).vector(DIMS);
      const hits = await search({
        vector: query,
        filter: { agentId, roomId: rareRoom },
        limit: 1000,
      });
      for (const h of hits) expect(h.memory.embedding).not.toBeNull();
      expect(hits.some((h) => h.memory.content.text.startsWith('no vector'))).toBe(false);
    });

    it('defaults to 10 hits', async () => {
      const hits = await search({ vector: new Rng(9).vector(DIMS), filter: { agentId } });
      expect(hits).toHaveLength(10);
    });

    it('sees added, updated and deleted vectors at once', async () => {
      const rng = new Rng(10);
      const query = rng.vector(DIMS);
      const [fresh] = await store().addMemories([
        { agentId, content: { text: 'fresh' }, embedding: query },
      ]);
      let [top] = await search({ vector: query, filter: { agentId }, limit: 1 });
      expect(top!.memory.id).toBe(fresh!.id);
      await store().updateMemory(fresh!.id, { embedding: query.map((x) => -x) });
      [top] = await search({ vector: query, filter: { agentId }, limit: 1 });
      expect(top!.memory.id).not.toBe(fresh!.id);
      const worst = await search({ vector: query.map((x) => -x), filter: { agentId }, limit: 1 });
      expect(worst[0]!.memory.id).toBe(fresh!.id);
      await store().deleteMemories([fresh!.id]);
      const after = await search({
        vector: query.map((x) => -x),
        filter: { agentId },
        limit: 1000,
      });
      expect(after.some((h) => h.memory.id === fresh!.id)).toBe(false);
    });

    describe('bad input', () => {
      it('rejects a query vector of the wrong width (EMBEDDING_MISMATCH)', async () => {
        await expectCode(
          () => store().searchMemories({ vector: [1, 2, 3], filter: { agentId } }),
          'EMBEDDING_MISMATCH',
        );
        await expectCode(
          () =>
            store().searchMemories({ vector: new Array(DIMS + 1).fill(0.5), filter: { agentId } }),
          'EMBEDDING_MISMATCH',
        );
      });

      it('rejects a new memory with a vector of the wrong width (EMBEDDING_MISMATCH), storing none of the batch', async () => {
        const ids = [newId(), newId()];
        await expectCode(
          () =>
            store().addMemories([
              {
                id: ids[0]!,
                agentId,
                content: { text: 'ok' },
                embedding: new Array(DIMS).fill(0.1),
              },
              {
                id: ids[1]!,
                agentId,
                content: { text: 'wide' },
                embedding: new Array(DIMS * 2).fill(0.1),
              },
            ]),
          'EMBEDDING_MISMATCH',
        );
        for (const id of ids) expect(await store().getMemory(id)).toBeNull();
      });

      it('rejects a batch whose only vector has the wrong width (EMBEDDING_MISMATCH)', async () => {
        const id = newId();
        await expectCode(
          () =>
            store().addMemories([
              { id, agentId, content: { text: 'narrow' }, embedding: [0.1, 0.2] },
            ]),
          'EMBEDDING_MISMATCH',
        );
        expect(await store().getMemory(id)).toBeNull();
      });

      it('rejects an update to a vector of the wrong width (EMBEDDING_MISMATCH) and keeps the old one', async () => {
        const target = data[11]!;
        await expectCode(
          () => store().updateMemory(target.id, { embedding: [1, 2, 3] }),
          'EMBEDDING_MISMATCH',
        );
        const read = await store().getMemory(target.id);
        expect(read!.embedding).toHaveLength(DIMS);
      });

      it.each([
        ['both a vector and a text', { vector: new Array(DIMS).fill(1), text: 'x' }],
        ['neither a vector nor a text', {}],
        ['an empty vector', { vector: [] }],
        ['a vector with NaN', { vector: [Number.NaN, ...new Array(DIMS - 1).fill(1)] }],
        ['a zero limit', { vector: new Array(DIMS).fill(1), limit: 0 }],
        ['a limit over 1000', { vector: new Array(DIMS).fill(1), limit: 1001 }],
        ['a fractional limit', { vector: new Array(DIMS).fill(1), limit: 2.5 }],
        ['a threshold over 1', { vector: new Array(DIMS).fill(1), threshold: 1.5 }],
        ['a NaN threshold', { vector: new Array(DIMS).fill(1), threshold: Number.NaN }],
        ['a threshold on a text search', { text: 'memory', threshold: 0.5 }],
      ] as Array<[string, MemorySearch]>)('rejects %s (INVALID_ARGUMENT)', async (_l, search) => {
        await expectCode(() => store().searchMemories(search), 'INVALID_ARGUMENT');
      });
    });
  });
}
