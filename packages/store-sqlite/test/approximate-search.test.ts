import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@cairn/core';
import type { MemorySearch, NewMemory, Store } from '@cairn/store';
import Database from 'better-sqlite3';
import * as sqliteVec from 'sqlite-vec';
import { afterAll, describe, expect, it } from 'vitest';
import { CodeIndex } from '../src/code-index.js';
import { createSqliteStore } from '../src/index.js';
import { runMigrations } from '../src/migrations.js';

const dir = mkdtempSync(join(tmpdir(), 'cairn-approximate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const tempPath = () => join(dir, `${newId()}.db`);

/** mulberry32: the same data on every run. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Clustered vectors (centres plus noise), as embeddings are. */
function vectors(seed: number, dims: number, topics = 12): () => number[] {
  const r = rng(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  const centres = Array.from({ length: topics }, () => Array.from({ length: dims }, gauss));
  return () => centres[Math.floor(r() * topics)]!.map((x) => x + gauss() * 0.8);
}

const ROOMS = ['r0', 'r1', 'r2', 'r3'];
function memories(n: number, dims: number, seed: number, from = 0): NewMemory[] {
  const next = vectors(seed, dims);
  return Array.from({ length: n }, (_, j) => {
    const i = from + j;
    return {
      id: `m${i}`,
      agentId: i % 7 === 0 ? 'other' : 'a',
      roomId: ROOMS[i % 4]!,
      content: { text: `memory ${i}` },
      metadata: { path: ['p', String(i % 3)] },
      embedding: next(),
    };
  });
}

async function load(store: Store, rows: NewMemory[]): Promise<void> {
  for (let i = 0; i < rows.length; i += 500) await store.addMemories(rows.slice(i, i + 500));
}

const ids = async (store: Store, search: MemorySearch) =>
  (await store.searchMemories(search)).map((h) => h.memory.id);

/** An approximate and an exact store on one file (two connections: two processes' views). */
function pair(path: string) {
  const approximate = createSqliteStore({ path });
  const other = new Database(path);
  const exact = createSqliteStore({ database: other }, { vectorSearch: 'exact' });
  return {
    approximate,
    exact,
    close: async () => {
      await approximate.close();
      await exact.close();
      other.close();
    },
  };
}

describe('approximate vector search (sign-bit candidates, exact rescoring)', {
  timeout: 60_000,
}, () => {
  it('reports approximate by default and exact when asked, and refuses another value', async () => {
    const path = tempPath();
    const s = pair(path);
    expect(s.approximate.capabilities.vectorSearch).toBe('approximate');
    expect(s.exact.capabilities.vectorSearch).toBe('exact');
    expect(() => createSqliteStore({ path }, { vectorSearch: 'hnsw' as 'exact' })).toThrowError(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
    await s.close();
  });

  it('answers as the exact scan does when the candidates cover every code', async () => {
    const s = pair(tempPath());
    // 20 dimensions: codes padded to whole bytes. Fewer memories than the candidates.
    const rows = memories(300, 20, 1);
    await load(s.approximate, rows);
    const queries = vectors(99, 20);
    const filters = [
      undefined,
      { agentId: 'a' },
      { roomId: 'r2' },
      { ids: ['m3', 'm40', 'm41', 'm299'] },
    ];
    for (let i = 0; i < 12; i++) {
      const search = { vector: queries(), limit: 25, filter: filters[i % filters.length] };
      const got = await s.approximate.searchMemories(search);
      expect(got).toEqual(await s.exact.searchMemories(search));
      expect(got.length).toBe(search.filter?.ids ? 4 : 25);
    }
    await s.close();
  });

  it('finds most of the exact top 10 over more memories than it rescores, within the filter', async () => {
    const s = pair(tempPath());
    await load(s.approximate, memories(4000, 64, 2));
    const queries = vectors(98, 64);
    let found = 0;
    let total = 0;
    for (let i = 0; i < 20; i++) {
      const vector = queries();
      for (const filter of [
        undefined,
        { roomId: 'r1' },
        { agentId: 'a', roomId: 'r3' },
        { metadataPrefix: { path: ['p', '2'] } },
      ]) {
        const got = await s.approximate.searchMemories({ vector, limit: 10, filter });
        const truth = await s.exact.searchMemories({ vector, limit: 10, filter });
        // The filter holds and the limit is filled; scores are the exact ones.
        expect(got.length).toBe(10);
        for (const h of got) {
          if (filter?.roomId) expect(h.memory.roomId).toBe(filter.roomId);
          if (filter?.agentId) expect(h.memory.agentId).toBe(filter.agentId);
          if (filter?.metadataPrefix) expect(h.memory.metadata.path).toEqual(['p', '2']);
        }
        const exactScore = new Map(truth.map((h) => [h.memory.id, h.score]));
        for (const h of got)
          if (exactScore.has(h.memory.id)) expect(h.score).toBe(exactScore.get(h.memory.id));
        found += got.filter((h) => exactScore.has(h.memory.id)).length;
        total += 10;
      }
    }
    expect(found / total).toBeGreaterThanOrEqual(0.95);
    await s.close();
  });

  it('fills the limit through a filter that admits few memories (the exact scan of those)', async () => {
    const s = pair(tempPath());
    await load(s.approximate, memories(3000, 32, 3));
    // m0, m7, m14, ...: agent 'other'; of those, room r1 (i % 4 = 1): 1 in 28.
    const search = {
      vector: vectors(97, 32)(),
      limit: 50,
      filter: { agentId: 'other', roomId: 'r1' },
    };
    const got = await ids(s.approximate, search);
    expect(got).toEqual(await ids(s.exact, search));
    expect(got.length).toBe(50);
    // One admitted memory in all: found however far it is.
    const one = { vector: search.vector, limit: 5, filter: { ids: ['m2999'] } };
    expect(await ids(s.approximate, one)).toEqual(['m2999']);
    await s.close();
  });

  it('never returns a deleted or forgotten memory, and sees vectors changed by another connection', async () => {
    const s = pair(tempPath());
    const rows = memories(2000, 32, 4);
    await load(s.approximate, rows);
    const vector = vectors(96, 32)();
    const first = await ids(s.approximate, { vector, limit: 10 });
    expect(first.length).toBe(10);
    // Deleted through the other connection: this one's codes still hold them until it reads on.
    await s.exact.deleteMemories(first.slice(0, 5));
    const after = await ids(s.approximate, { vector, limit: 10 });
    expect(after.length).toBe(10);
    expect(after.filter((id) => first.slice(0, 5).includes(id))).toEqual([]);
    expect(await ids(s.approximate, { vector, limit: 10, filter: { ids: first } })).toEqual(
      first.slice(5),
    );
    // A vector moved onto the query by the other connection is the nearest at once.
    await s.exact.updateMemory('m1234', { embedding: vector });
    expect((await ids(s.approximate, { vector, limit: 1 }))[0]).toBe('m1234');
    // And moved away (a vector no longer there), and then removed (no vector at all).
    await s.exact.updateMemory('m1234', { embedding: vector.map((x) => -x) });
    expect(await ids(s.approximate, { vector, limit: 10 })).toEqual(after);
    await s.exact.updateMemory('m1234', { embedding: null });
    expect(await ids(s.approximate, { vector: vector.map((x) => -x), limit: 20 })).not.toContain(
      'm1234',
    );
    // Added by the other connection: found.
    await s.exact.addMemories([
      { id: 'late', agentId: 'a', content: { text: 'late' }, embedding: vector },
    ]);
    expect((await ids(s.approximate, { vector, limit: 1 }))[0]).toBe('late');
    // Forgotten (an entity's memories) through the other connection: gone here too.
    await s.approximate.addMemories([
      { id: 'secret', agentId: 'a', entityId: 'e1', content: { text: 's' }, embedding: vector },
    ]);
    expect(await ids(s.approximate, { vector, limit: 2 })).toContain('secret');
    await s.exact.forget({ entityId: 'e1' });
    expect(await ids(s.approximate, { vector, limit: 10 })).not.toContain('secret');
    await s.close();
  });

  it('searches what a transaction wrote, and a rollback leaves nothing behind', async () => {
    const s = pair(tempPath());
    await load(s.approximate, memories(1000, 32, 5));
    const vector = vectors(95, 32)();
    await expect(
      s.approximate.transaction(async (tx) => {
        await tx.addMemories([
          { id: 'inside', agentId: 'a', content: { text: 'x' }, embedding: vector },
        ]);
        expect((await tx.searchMemories({ vector, limit: 1 }))[0]!.memory.id).toBe('inside');
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await ids(s.approximate, { vector, limit: 10 })).not.toContain('inside');
    // The next write gets the codes' next number again: still seen.
    await s.approximate.addMemories([
      { id: 'after', agentId: 'a', content: { text: 'y' }, embedding: vector },
    ]);
    expect((await ids(s.approximate, { vector, limit: 1 }))[0]).toBe('after');
    expect(await ids(s.approximate, { vector, limit: 10 })).toEqual(
      await ids(s.exact, { vector, limit: 10 }),
    );
    await s.close();
  });

  it('gives the memories of a file from before the codes their codes on migration', async () => {
    const path = tempPath();
    const old = new Database(path);
    runMigrations(old, 10);
    const rows = memories(600, 16, 6);
    const insert = old.prepare(
      `INSERT INTO cairn_memories (id, type, agent_id, scope, content, text, metadata, content_hash, created_at, lineage_id, embedding)
       VALUES (?, 'custom', 'a', 'shared', '{"text":"x"}', 'x', '{}', 'h', 0, ?, ?)`,
    );
    for (const m of rows)
      insert.run(m.id, m.id, Buffer.from(Float32Array.from(m.embedding!).buffer));
    old
      .prepare('INSERT INTO cairn_settings (key, value) VALUES (?, ?)')
      .run('embedding_space', JSON.stringify({ embedderId: null, dimensions: 16 }));
    old.close();
    const s = pair(path);
    const queries = vectors(94, 16);
    for (let i = 0; i < 5; i++) {
      const vector = queries();
      const got = await ids(s.approximate, { vector, limit: 10 });
      expect(got.length).toBe(10);
      expect(got).toEqual(await ids(s.exact, { vector, limit: 10 }));
    }
    await s.close();
  });
});

describe('CodeIndex', () => {
  it('encodes a query as sqlite-vec quantizes a stored vector', () => {
    const db = new Database(':memory:');
    sqliteVec.load(db);
    runMigrations(db);
    const r = rng(7);
    for (const dims of [1, 3, 8, 20, 33, 64, 512]) {
      const v = Array.from({ length: dims }, () => (r() < 0.1 ? 0 : r() - 0.5));
      db.prepare(
        `INSERT INTO cairn_memories (id, type, agent_id, scope, content, text, metadata, content_hash, created_at, lineage_id, embedding)
         VALUES (?, 'custom', 'a', 'private', '{}', '', '{}', 'h', 0, ?, ?)`,
      ).run(`d${dims}`, `d${dims}`, Buffer.from(Float32Array.from(v).buffer));
      const { code } = db
        .prepare(
          'SELECT code FROM cairn_memory_codes WHERE seq = (SELECT seq FROM cairn_memories WHERE id = ?)',
        )
        .get(`d${dims}`) as { code: Buffer };
      const words = Math.ceil(dims / 32);
      const padded = new Uint8Array(words * 4);
      padded.set(code);
      const query = CodeIndex.query(v, words);
      expect(new Uint8Array(query.code.buffer)).toEqual(padded);
      // The score of a code is the query's values, each negated where its bit is clear.
      const signs = (code: Uint8Array) =>
        v.reduce((sum, x, i) => sum + ((code[i >> 3]! >> (i & 7)) & 1 ? x : -x), 0);
      const other = Uint8Array.from(padded, (b) => b ^ 0x5a);
      const table = (code: Uint8Array) =>
        Array.from(code).reduce((sum, b, j) => sum + query.table[j * 256 + b]!, 0);
      expect(table(padded)).toBeCloseTo(signs(padded), 4);
      expect(table(other)).toBeCloseTo(signs(other), 4);
    }
    db.close();
  });

  it('keeps each seq once, in order, through puts, removals and a put before the end', () => {
    const index = new CodeIndex();
    const code = (b: number) => Uint8Array.of(b, 0, 0, 0);
    index.apply([
      [1, 10, code(0x80)],
      [2, 20, code(2)],
      [3, 30, code(3)],
      [4, 20, null],
      [5, 15, code(4)],
      [6, 30, code(5)],
    ]);
    expect(index.size).toBe(3);
    expect(index.lastN).toBe(6);
    const query = (v: number[]) => CodeIndex.query(v, 1);
    expect(index.nearest(query([1]), 10).sort()).toEqual([10, 15, 30]);
    // Best for a query positive in dimensions 0 and 2: 30 (code 5: both), then 15 (code 4).
    expect(index.nearest(query([1, -0.1, 2, -0.1]), 2).sort()).toEqual([15, 30]);
    index.apply([[7, 20, code(5)]]);
    expect(index.size).toBe(4);
    expect(index.nearest(query([1, -0.1, 2, -0.1]), 2).sort()).toEqual([20, 30]);
  });
});
