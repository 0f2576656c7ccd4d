import { canSee, MEMORY_SCOPES, MEMORY_TYPES, type Memory, newId, type Viewer } from '@cairn/core';
import { beforeAll, describe, expect, it } from 'vitest';
import type { NewMemory } from '../../store.js';
import { SLOW_TEST_TIMEOUT, type StoreConformanceOptions, useStore } from '../context.js';
import { cosine, Rng } from '../helpers.js';

const DIMS = 8;
const MEMORIES = 200;
const VIEWERS = 50;
/** Words every memory's text draws from; each stems to itself. */
const WORDS = ['granite', 'harbor', 'lantern', 'meadow', 'orchid', 'pepper'];

/**
 * A property test of the scope rule: for random memories and random viewers, every read
 * path returns exactly what `canSee` allows — never a memory outside the viewer's scope,
 * and (where the limit allows and the search is exact) never fewer.
 */
export function describeScopeIsolation(options: StoreConformanceOptions): void {
  describe('scope isolation', () => {
    const store = useStore(options);
    const run = newId();
    const agents = ['a1', 'a2', 'a3', 'a4'].map((a) => `${a}-${run}`);
    const rooms = ['r1', 'r2', 'r3', 'r4'].map((r) => `${r}-${run}`);
    const worlds = ['w1', 'w2', 'w3'].map((w) => `${w}-${run}`);
    const data: Memory[] = [];
    let viewers: Viewer[] = [];

    beforeAll(async () => {
      const rng = new Rng(7_031_977);
      const batch: NewMemory[] = [];
      for (let i = 0; i < MEMORIES; i++) {
        const scope = rng.pick(MEMORY_SCOPES);
        const roomId =
          scope === 'room' ? rng.pick(rooms) : rng.next() < 0.5 ? rng.pick(rooms) : null;
        const worldId =
          scope === 'shared' ? rng.pick(worlds) : rng.next() < 0.5 ? rng.pick(worlds) : null;
        batch.push({
          type: rng.pick(MEMORY_TYPES),
          agentId: rng.pick(agents),
          roomId,
          worldId,
          scope,
          content: { text: `${rng.pick(WORDS)} ${rng.pick(WORDS)} note ${i}` },
          embedding: rng.vector(DIMS),
        });
      }
      for (let i = 0; i < batch.length; i += 50)
        data.push(...(await store().addMemories(batch.slice(i, i + 50))));
      viewers = Array.from({ length: VIEWERS }, () => {
        const v: Viewer = { agentId: rng.next() < 0.9 ? rng.pick(agents) : `stranger-${run}` };
        const r = rng.next();
        if (r < 0.7) v.roomId = rng.pick(rooms);
        else if (r < 0.85) v.roomId = null;
        const w = rng.next();
        if (w < 0.7) v.worldId = rng.pick(worlds);
        else if (w < 0.85) v.worldId = null;
        return v;
      });
    }, SLOW_TEST_TIMEOUT);

    const allowed = (v: Viewer) => data.filter((m) => canSee(v, m));
    const ids = (ms: Array<{ id: string }>) => ms.map((m) => m.id).sort();

    it('has viewers that see some memories but not all, and every scope in play', () => {
      const sizes = viewers.map((v) => allowed(v).length);
      expect(Math.min(...sizes)).toBeGreaterThanOrEqual(0);
      expect(sizes.filter((n) => n > 0).length).toBeGreaterThan(VIEWERS / 2);
      expect(Math.max(...sizes)).toBeLessThan(MEMORIES);
      for (const scope of MEMORY_SCOPES) expect(data.some((m) => m.scope === scope)).toBe(true);
    });

    it(
      'listMemories and countMemories return exactly what canSee allows, for 50 viewers',
      async () => {
        for (const viewer of viewers) {
          const expected = allowed(viewer);
          const listed = await store().listMemories({ viewer }, { limit: 10_000 });
          expect(ids(listed), JSON.stringify(viewer)).toEqual(ids(expected));
          expect(await store().countMemories({ viewer })).toBe(expected.length);
        }
      },
      SLOW_TEST_TIMEOUT,
    );

    it(
      'vector search never leaks, and when exact returns the true top among what canSee allows',
      async () => {
        const exact = store().capabilities.vectorSearch === 'exact';
        const queries = new Rng(1_234);
        for (const viewer of viewers) {
          const query = queries.vector(DIMS);
          const expected = allowed(viewer)
            .map((m) => ({ id: m.id, score: cosine(query, m.embedding!) }))
            .sort((a, b) => b.score - a.score);
          const hits = await store().searchMemories({
            vector: query,
            filter: { viewer },
            limit: 1000,
          });
          const allowedIds = new Set(expected.map((e) => e.id));
          for (const h of hits)
            expect(allowedIds.has(h.memory.id), `leak to ${JSON.stringify(viewer)}`).toBe(true);
          if (exact) expect(hits.map((h) => h.memory.id)).toEqual(expected.map((e) => e.id));
          const limited = await store().searchMemories({
            vector: query,
            filter: { viewer },
            limit: 5,
          });
          for (const h of limited) expect(allowedIds.has(h.memory.id)).toBe(true);
          if (exact)
            expect(limited.map((h) => h.memory.id)).toEqual(expected.slice(0, 5).map((e) => e.id));
        }
      },
      SLOW_TEST_TIMEOUT,
    );

    it(
      'keyword search returns exactly the allowed memories that contain a word',
      async () => {
        const words = new Rng(5_678);
        for (const viewer of viewers) {
          const word = words.pick(WORDS);
          const expected = allowed(viewer).filter((m) => m.content.text.split(' ').includes(word));
          const hits = await store().searchMemories({
            text: word,
            filter: { viewer },
            limit: 1000,
          });
          expect(ids(hits.map((h) => h.memory)), `${word} for ${JSON.stringify(viewer)}`).toEqual(
            ids(expected),
          );
        }
      },
      SLOW_TEST_TIMEOUT,
    );

    it('combines the viewer with other filters without widening it', async () => {
      for (const viewer of viewers.slice(0, 10)) {
        for (const scope of MEMORY_SCOPES) {
          const expected = allowed(viewer).filter(
            (m) => m.scope === scope && m.agentId === agents[0],
          );
          const listed = await store().listMemories(
            { viewer, scopes: [scope], agentId: agents[0]! },
            { limit: 1000 },
          );
          expect(ids(listed)).toEqual(ids(expected));
        }
      }
    });
  });
}
