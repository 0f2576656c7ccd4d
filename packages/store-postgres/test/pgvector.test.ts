import type { Memory, MemoryType } from '@cairn/core';
import { cosineSimilarity, type Store } from '@cairn/store';
import { Rng } from '@cairn/store/testing';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite/vector';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresStore } from '../src/index.js';
import { hnswSearchSql } from '../src/postgres-session.js';

/** The same data on every run. */
const rng = (seed: number) => new Rng(seed);

const DIMS = 8;

describe('pgvector (HNSW) on PGlite against the exact scan and brute force', () => {
  let db: PGlite;
  let hnsw: Store;
  let exact: Store;
  const stored: Memory[] = [];

  beforeAll(async () => {
    db = await PGlite.create({ extensions: { vector } });
    hnsw = await createPostgresStore({ client: db }, { schema: 'vec_hnsw' });
    exact = await createPostgresStore(
      { client: db },
      { schema: 'vec_exact', vectorSearch: 'exact' },
    );
    // The conformance suite's shape: 300 random 8-dim vectors, a rare room of 12, and a
    // rare type (2%) that no btree index helps with, so the HNSW scan must iterate.
    const r = rng(424_242);
    const batch = Array.from({ length: 3000 }, (_, i) => ({
      id: `m${String(i).padStart(4, '0')}`,
      agentId: i < 300 ? 'small' : 'large',
      roomId: i % 25 === 0 ? 'rare-room' : `room-${i % 5}`,
      type: (i % 50 === 7 ? 'description' : 'document') as MemoryType,
      content: { text: `memory ${i}` },
      embedding: r.vector(DIMS),
    }));
    for (let i = 0; i < batch.length; i += 500) {
      const part = batch.slice(i, i + 500);
      stored.push(...(await hnsw.addMemories(part)));
      await exact.addMemories(part);
    }
  });
  afterAll(async () => {
    await hnsw?.close();
    await exact?.close();
    await db?.close();
  });

  function bruteForce(query: number[], admit: (m: Memory) => boolean, limit: number) {
    return stored
      .filter(admit)
      .map((m) => ({ id: m.id, score: cosineSimilarity(query, m.embedding!) }))
      .sort((a, b) => b.score - a.score)
      .slice(0, limit);
  }

  it('says which path it takes and builds the index (on the first search) only for pgvector', async () => {
    expect(hnsw.capabilities.vectorSearch).toBe('approximate');
    expect(exact.capabilities.vectorSearch).toBe('exact');
    const query = rng(5).vector(DIMS);
    await hnsw.searchMemories({ vector: query, limit: 3 });
    await exact.searchMemories({ vector: query, limit: 3 });
    const idx = await db.query<{ schemaname: string }>(
      `SELECT schemaname FROM pg_indexes WHERE indexname = 'memories_embedding_hnsw' ORDER BY 1`,
    );
    expect(idx.rows.map((r) => r.schemaname)).toEqual(['vec_hnsw']);
  });

  it('gives the same ids, in order, as brute force on the conformance-sized data, on both paths', async () => {
    const r = rng(1);
    for (let q = 0; q < 20; q++) {
      const query = r.vector(DIMS);
      const expected = bruteForce(query, (m) => m.agentId === 'small', 10);
      for (const store of [hnsw, exact]) {
        const hits = await store.searchMemories({
          vector: query,
          filter: { agentId: 'small' },
          limit: 10,
        });
        expect(hits.map((h) => h.memory.id)).toEqual(expected.map((e) => e.id));
        // Scores are rescored in float64: exactly the reference cosine.
        expect(hits.map((h) => h.score)).toEqual(expected.map((e) => e.score));
      }
    }
  });

  it('returns `limit` results for a filter that rejects 98% of the neighbours, all admitted, nearly all the true top', async () => {
    const r = rng(2);
    let found = 0;
    for (let q = 0; q < 10; q++) {
      const query = r.vector(DIMS);
      const expected = bruteForce(query, (m) => m.type === 'description', 10);
      const hits = await hnsw.searchMemories({
        vector: query,
        filter: { types: ['description'] },
        limit: 10,
      });
      expect(hits).toHaveLength(10);
      for (const h of hits) expect(h.memory.type).toBe('description');
      found += hits.filter((h) => expected.some((e) => e.id === h.memory.id)).length;
      const exactHits = await exact.searchMemories({
        vector: query,
        filter: { types: ['description'] },
        limit: 10,
      });
      expect(exactHits.map((h) => h.memory.id)).toEqual(expected.map((e) => e.id));
    }
    expect(found / 100).toBeGreaterThanOrEqual(0.95);
  });

  it('finds at least 95% of the true top 10 over all 3,000 through the index, with exact scores', async () => {
    const r = rng(4);
    let found = 0;
    for (let q = 0; q < 20; q++) {
      const query = r.vector(DIMS);
      const expected = bruteForce(query, () => true, 10);
      const hits = await hnsw.searchMemories({ vector: query, limit: 10 });
      expect(hits).toHaveLength(10);
      for (const h of hits) expect(h.score).toBe(cosineSimilarity(query, h.memory.embedding!));
      found += hits.filter((h) => expected.some((e) => e.id === h.memory.id)).length;
    }
    expect(found / 200).toBeGreaterThanOrEqual(0.95);
  });

  it('returns every match when fewer than `limit` pass the filter', async () => {
    const query = rng(3).vector(DIMS);
    const admit = (m: Memory) => m.roomId === 'rare-room' && m.agentId === 'small';
    const expected = bruteForce(query, admit, 50);
    expect(expected).toHaveLength(12);
    const hits = await hnsw.searchMemories({
      vector: query,
      filter: { roomId: 'rare-room', agentId: 'small' },
      limit: 50,
    });
    expect(hits.map((h) => h.memory.id)).toEqual(expected.map((e) => e.id));
  });

  it('runs the candidate query as a scan of the HNSW index', async () => {
    const query = rng(7).vector(DIMS);
    const sql = hnswSearchSql('"vec_hnsw"', '"public"', DIMS, query, {}, 26);
    // An HNSW index scan yields at most ef_search rows when iterative scans are off; a
    // sequential scan would yield all 26 asked for. (EXPLAIN would say so directly, but
    // crashes PGlite 0.3.16's WASM here.)
    const rows = await db.transaction(async (tx) => {
      await tx.query(
        "SELECT set_config('hnsw.ef_search', '1', true), set_config('hnsw.iterative_scan', 'off', true)",
      );
      return (await tx.query(sql.text, sql.params)).rows;
    });
    expect(sql.params[1]).toBe(26);
    expect(rows.length).toBeLessThanOrEqual(1);
    // The same query with the store's settings fills the limit.
    expect(await hnsw.searchMemories({ vector: query, limit: 10 })).toHaveLength(10);
  });
});
