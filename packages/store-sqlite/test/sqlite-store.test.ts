import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isCairnError, type Memory, newId } from '@cairn/core';
import { cosineSimilarity, type MemoryFilter, type Store, type StoreChange } from '@cairn/store';
import { matchesMemoryFilter } from '@cairn/store/adapter';
import { Rng } from '@cairn/store/testing';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'cairn-sqlite-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const tempPath = () => join(dir, `${newId()}.db`);

async function code(call: () => Promise<unknown> | unknown): Promise<string> {
  try {
    await call();
  } catch (e) {
    if (isCairnError(e)) return e.code;
    throw e;
  }
  return 'no error';
}

describe('opening', () => {
  it('reports its capabilities: durable and multi-process on a file, neither in memory', async () => {
    const file = createSqliteStore({ path: tempPath() });
    const mem = createSqliteStore({ path: ':memory:' }, { vectorSearch: 'exact' });
    expect(file.capabilities).toEqual({
      vectorSearch: 'approximate',
      notifications: 'process',
      multiProcess: true,
      durable: true,
      concurrentTransactions: false,
    });
    expect(mem.capabilities).toEqual({
      vectorSearch: 'exact',
      notifications: 'process',
      multiProcess: false,
      durable: false,
      concurrentTransactions: false,
    });
    await file.close();
    await mem.close();
  });

  it('sets WAL, foreign keys, synchronous NORMAL by default (FULL on request), and no blocking busy wait', async () => {
    const db = new Database(tempPath());
    const store = createSqliteStore({ database: db }, { busyTimeoutMs: 1234 });
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('foreign_keys', { simple: true })).toBe(1);
    // Lock waits are the store's own, on timers: SQLite's would freeze the event loop.
    expect(db.pragma('busy_timeout', { simple: true })).toBe(0);
    expect(db.pragma('synchronous', { simple: true })).toBe(1); // NORMAL
    await store.close();
    const full = createSqliteStore({ database: db }, { synchronous: 'FULL' });
    expect(db.pragma('synchronous', { simple: true })).toBe(2); // FULL
    await full.close();
    db.close();
  });

  it('rejects bad options before opening anything', async () => {
    expect(await code(() => createSqliteStore({ path: '' }))).toBe('INVALID_ARGUMENT');
    expect(
      await code(() => createSqliteStore({ path: ':memory:' }, { synchronous: 'OFF' as 'FULL' })),
    ).toBe('INVALID_ARGUMENT');
    expect(await code(() => createSqliteStore({ path: ':memory:' }, { busyTimeoutMs: -1 }))).toBe(
      'INVALID_ARGUMENT',
    );
  });

  it('names an option given in the wrong argument or misspelled, and opens no file', () => {
    const path = tempPath();
    const message = (call: () => unknown) => {
      try {
        call();
      } catch (e) {
        expect(isCairnError(e, 'INVALID_ARGUMENT'), String(e)).toBe(true);
        return (e as Error).message;
      }
      return 'no error';
    };
    expect(
      message(() => createSqliteStore({ path, busyTimeoutMs: 100, synchronous: 'FULL' } as never)),
    ).toBe(
      'createSqliteStore source: unknown key "busyTimeoutMs"; busyTimeoutMs is an option: createSqliteStore({ path }, { busyTimeoutMs })',
    );
    expect(message(() => createSqliteStore({ path }, { busyTimeout: 100 } as never))).toBe(
      'createSqliteStore options: unknown key "busyTimeout" (did you mean "busyTimeoutMs"?)',
    );
    expect(message(() => createSqliteStore({ path }, { path } as never))).toBe(
      'createSqliteStore options: unknown key "path"; path goes in the first argument: createSqliteStore({ path })',
    );
    expect(message(() => createSqliteStore({ path, filename: path } as never))).toMatch(
      /^createSqliteStore source: unknown key "filename"; expected one of path, database$/,
    );
    expect(
      message(() => createSqliteStore({ path, database: new Database(':memory:') } as never)),
    ).toBe('createSqliteStore takes { path } or { database }, not both');
    expect(existsSync(path)).toBe(false);
  });

  it('leaves an injected database open on close, with the data in it', async () => {
    const db = new Database(tempPath());
    const store = createSqliteStore({ database: db });
    const t = await store.createThread({ title: 'kept' });
    await store.close();
    expect(db.open).toBe(true);
    expect(db.prepare('SELECT title FROM cairn_threads WHERE id = ?').get(t.id)).toEqual({
      title: 'kept',
    });
    expect(await code(() => store.getThread(t.id))).toBe('CLOSED');
    db.close();
  });

  it('closes a database it opened itself, and keeps the data in the file', async () => {
    const path = tempPath();
    const store = createSqliteStore({ path });
    const t = await store.createThread({ title: 'durable' });
    await store.close();
    expect(await code(() => store.createThread({}))).toBe('CLOSED');
    const again = createSqliteStore({ path });
    expect((await again.getThread(t.id))?.title).toBe('durable');
    await again.close();
  });
});

describe('transactions', () => {
  let store: Store;
  beforeAll(() => {
    store = createSqliteStore({ path: tempPath() });
  });
  afterAll(() => store.close());

  it('commits calls across awaits together, and rolls all of them back on a throw', async () => {
    const a = newId();
    const b = newId();
    await store.transaction(async (tx) => {
      await tx.createThread({ id: a });
      await new Promise((r) => setTimeout(r, 5));
      await tx.createThread({ id: b });
    });
    expect(await store.getThread(b)).not.toBeNull();
    const c = newId();
    await expect(
      store.transaction(async (tx) => {
        await tx.createThread({ id: c });
        await tx.addMessages([{ threadId: c, parentId: null, role: 'user', data: 'x' }]);
        throw new Error('abandon');
      }),
    ).rejects.toThrow('abandon');
    expect(await store.getThread(c)).toBeNull();
  });

  it('makes other calls wait until it ends', async () => {
    const id = newId();
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const tx = store.transaction(async (t) => {
      await t.createThread({ id, title: 'inside' });
      await gate;
      await t.updateThread(id, { title: 'done' });
    });
    await new Promise((r) => setTimeout(r, 5));
    const outside = store.getThread(id);
    let seen: string | null | undefined;
    void outside.then((t) => {
      seen = t?.title;
    });
    await new Promise((r) => setTimeout(r, 5));
    expect(seen).toBeUndefined();
    release();
    await tx;
    expect((await outside)?.title).toBe('done');
  });

  it('joins a nested transaction to the outer one', async () => {
    const id = newId();
    await expect(
      store.transaction(async (tx) => {
        await tx.transaction(async (inner) => {
          await inner.createThread({ id });
        });
        expect(await tx.getThread(id)).not.toBeNull();
        throw new Error('outer fails');
      }),
    ).rejects.toThrow('outer fails');
    expect(await store.getThread(id)).toBeNull();
  });

  it('undoes only a failed call inside a transaction; the rest still commits', async () => {
    const t = await store.createThread({});
    const root = await store.addMessages([
      { threadId: t.id, parentId: null, role: 'user', data: 1 },
    ]);
    await store.transaction(async (tx) => {
      await tx.addMessages([{ threadId: t.id, parentId: root[0]!.id, role: 'a', data: 2 }]);
      const failed = await code(() =>
        tx.addMessages([
          { id: 'good-then-bad-1', threadId: t.id, parentId: root[0]!.id, role: 'a', data: 3 },
          { threadId: t.id, parentId: 'missing', role: 'a', data: 4 },
        ]),
      );
      expect(failed).toBe('NOT_FOUND');
    });
    expect(await store.getMessage('good-then-bad-1')).toBeNull();
    const chainHeads = (await store.getChain(root[0]!.id)).length;
    expect(chainHeads).toBe(1);
  });

  it('tells listeners only after commit, and nothing after a rollback', async () => {
    const t = await store.createThread({});
    const heard: StoreChange[] = [];
    const stop = store.subscribe(t.id, (c) => heard.push(c));
    await store.transaction(async (tx) => {
      await tx.addMessages([{ threadId: t.id, parentId: null, role: 'user', data: 1 }]);
      expect(heard).toEqual([]);
    });
    expect(heard).toEqual([{ threadId: t.id, kind: 'messages' }]);
    await store
      .transaction(async (tx) => {
        await tx.addMessages([{ threadId: t.id, parentId: null, role: 'user', data: 2 }]);
        throw new Error('no');
      })
      .catch(() => undefined);
    expect(heard).toHaveLength(1);
    stop();
  });

  it('refuses calls on a transaction after it ended', async () => {
    let leaked: Store | undefined;
    await store.transaction(async (tx) => {
      leaked = tx;
    });
    expect(await code(() => leaked!.createThread({}))).toBe('CLOSED');
  });
});

describe('memory search', () => {
  let store: Store;
  beforeAll(() => {
    store = createSqliteStore({ path: ':memory:' });
  });
  afterAll(() => store.close());

  it('returns exactly the brute-force top hits among what the filter admits, even when it admits few', async () => {
    const random = new Rng(7);
    const next = () => random.next();
    const dims = 16;
    const made: Memory[] = [];
    for (let batch = 0; batch < 4; batch++) {
      made.push(
        ...(await store.addMemories(
          Array.from({ length: 500 }, (_, i) => ({
            agentId: `agent-${(batch * 500 + i) % 5}`,
            roomId: `room-${i % 7}`,
            scope: 'room' as const,
            type: i % 3 === 0 ? ('document' as const) : ('fragment' as const),
            content: { text: `memory ${batch}-${i}` },
            embedding: Array.from({ length: dims }, () => next() * 2 - 1),
          })),
        )),
      );
    }
    made.push(
      ...(await store.addMemories([
        { agentId: 'rare', content: { text: 'rare one' }, embedding: Array(dims).fill(0.5) },
      ])),
    );
    const filters: MemoryFilter[] = [
      {},
      { agentId: 'agent-2' },
      { types: ['document'], roomId: 'room-3' },
      { viewer: { agentId: 'nobody', roomId: 'room-5' } },
      { agentId: 'rare' },
      { ids: made.slice(0, 3).map((m) => m.id) },
    ];
    for (const filter of filters) {
      for (let q = 0; q < 3; q++) {
        const vector = Array.from({ length: dims }, () => next() * 2 - 1);
        const hits = await store.searchMemories({ vector, filter, limit: 10 });
        const expected = made
          .filter((m) => matchesMemoryFilter(m, filter))
          .map((m) => ({ id: m.id, score: cosineSimilarity(vector, m.embedding!) }))
          .sort((a, b) => b.score - a.score)
          .slice(0, 10);
        expect(hits.map((h) => h.memory.id)).toEqual(expected.map((e) => e.id));
        for (const [i, h] of hits.entries()) expect(h.score).toBeCloseTo(expected[i]!.score, 6);
      }
    }
  });

  it('fixes the width with the first vector and refuses any other as EMBEDDING_MISMATCH', async () => {
    const s = createSqliteStore({ path: ':memory:' });
    await s.addMemories([{ agentId: 'a', content: { text: 'x' }, embedding: [1, 2, 3] }]);
    expect(await s.getEmbeddingSpace()).toEqual({ embedderId: null, dimensions: 3 });
    expect(
      await code(() =>
        s.addMemories([{ agentId: 'a', content: { text: 'y' }, embedding: [1, 2] }]),
      ),
    ).toBe('EMBEDDING_MISMATCH');
    expect(await code(() => s.searchMemories({ vector: [1, 2, 3, 4] }))).toBe('EMBEDDING_MISMATCH');
    const [m] = await s.listMemories();
    expect(await code(() => s.updateMemory(m!.id, { embedding: [1] }))).toBe('EMBEDDING_MISMATCH');
    expect(await s.countMemories()).toBe(1);
    await s.close();
  });

  it('keeps the keyword index in step with inserts, updates and deletes', async () => {
    const s = createSqliteStore({ path: ':memory:' });
    const [m] = await s.addMemories([{ agentId: 'a', content: { text: 'the aardvark sleeps' } }]);
    expect((await s.searchMemories({ text: 'aardvark' })).map((h) => h.memory.id)).toEqual([m!.id]);
    await s.updateMemory(m!.id, { content: { text: 'the pangolin sleeps' } });
    expect(await s.searchMemories({ text: 'aardvark' })).toEqual([]);
    expect((await s.searchMemories({ text: 'pangolin' })).map((h) => h.memory.id)).toEqual([m!.id]);
    await s.deleteMemories([m!.id]);
    expect(await s.searchMemories({ text: 'pangolin' })).toEqual([]);
    await s.close();
  });

  it('reads FTS5 syntax in user text as plain words, matching any of them', async () => {
    const s = createSqliteStore({ path: ':memory:' });
    const [a, b] = await s.addMemories([
      { agentId: 'a', content: { text: 'near the river bank' } },
      { agentId: 'a', content: { text: 'quoted "words" and stars*' } },
      { agentId: 'a', content: { text: 'nothing in common' } },
    ]);
    const cases: Array<[string, string[]]> = [
      ['"river', [a!.id]],
      ['NEAR(river words)', [a!.id, b!.id]],
      ['river OR', [a!.id]],
      ['stars* AND -bank', [a!.id, b!.id]],
      ["words' ^river {x}:", [a!.id, b!.id]],
    ];
    for (const [text, expected] of cases) {
      const ids = (await s.searchMemories({ text })).map((h) => h.memory.id).sort();
      expect(ids, text).toEqual([...expected].sort());
    }
    expect(await s.searchMemories({ text: '*** ((( ' })).toEqual([]);
    await s.close();
  });

  it('ranks the better keyword match first, with the filter inside the search', async () => {
    const s = createSqliteStore({ path: ':memory:' });
    const [strong, weak, other] = await s.addMemories([
      { agentId: 'a', content: { text: 'soil carbon soil carbon' } },
      {
        agentId: 'a',
        content: { text: 'soil erosion and many other unrelated words in a long text' },
      },
      { agentId: 'b', content: { text: 'soil carbon soil carbon soil' } },
    ]);
    const hits = await s.searchMemories({
      text: 'soil carbon',
      filter: { agentId: 'a' },
      limit: 1,
    });
    expect(hits.map((h) => h.memory.id)).toEqual([strong!.id]);
    const all = await s.searchMemories({ text: 'soil carbon', filter: { agentId: 'a' } });
    expect(all.map((h) => h.memory.id)).toEqual([strong!.id, weak!.id]);
    expect(all[0]!.score).toBeGreaterThan(all[1]!.score);
    expect(all.some((h) => h.memory.id === other!.id)).toBe(false);
    await s.close();
  });
});
