import { newId } from '@cairn/core';
import type { Store } from '@cairn/store';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../src/index.js';

const LENGTH = 150_000;

describe('a 150,000-message chain', () => {
  const db = new Database(':memory:');
  let store: Store;
  let ids: string[];

  beforeAll(async () => {
    store = createSqliteStore({ database: db });
    const thread = await store.createThread({});
    ids = Array.from({ length: LENGTH }, () => newId());
    for (let start = 0; start < LENGTH; start += 25_000) {
      await store.addMessages(
        ids.slice(start, start + 25_000).map((id, k) => {
          const i = start + k;
          return {
            id,
            threadId: thread.id,
            parentId: i === 0 ? null : ids[i - 1]!,
            role: 'user',
            data: { i },
          };
        }),
      );
    }
  }, 60_000);

  afterAll(async () => {
    await store.close();
    db.close();
  });

  it('reads back whole, root first, with every depth', async () => {
    const chain = await store.getChain(ids[LENGTH - 1]!);
    expect(chain).toHaveLength(LENGTH);
    for (let i = 0; i < LENGTH; i++) {
      if (
        chain[i]!.id !== ids[i] ||
        chain[i]!.depth !== i ||
        (chain[i]!.data as { i: number }).i !== i
      ) {
        expect.fail(`message ${i} is ${JSON.stringify(chain[i])}`);
      }
    }
  }, 60_000);

  it('reads pages toward the root with beforeDepth', async () => {
    const head = ids[LENGTH - 1]!;
    const page1 = await store.getChain(head, { limit: 50 });
    const page2 = await store.getChain(head, { limit: 50, beforeDepth: page1[0]!.depth });
    expect(page2.map((m) => m.depth)).toEqual(
      Array.from({ length: 50 }, (_, k) => LENGTH - 100 + k),
    );
    const nearRoot = await store.getChain(head, { limit: 50, beforeDepth: 20 });
    expect(nearRoot.map((m) => m.id)).toEqual(ids.slice(0, 20));
  }, 60_000);

  it('reads the last 50 without walking the rest: a hole further down does not touch them', async () => {
    const head = ids[LENGTH - 1]!;
    const before = await store.getChain(head, { limit: 50 });
    expect(before.map((m) => m.id)).toEqual(ids.slice(LENGTH - 50));
    // Cut the chain 51 steps below the head, behind the store's back. A read that walked
    // the whole chain (or a fixed depth, then cut) would see the hole; a bounded one cannot.
    const cut = ids[LENGTH - 52]!;
    const row = db.prepare('SELECT * FROM cairn_messages WHERE id = ?').get(cut);
    db.prepare('DELETE FROM cairn_messages WHERE id = ?').run(cut);
    try {
      expect((await store.getChain(head, { limit: 50 })).map((m) => m.id)).toEqual(
        ids.slice(LENGTH - 50),
      );
      expect((await store.getChain(head, { limit: 51 })).map((m) => m.id)).toEqual(
        ids.slice(LENGTH - 51),
      );
      // The unbounded read does stop at the hole: the check above is one that could fail.
      expect(await store.getChain(head)).toHaveLength(51);
    } finally {
      const cols = Object.keys(row as object);
      db.prepare(
        `INSERT INTO cairn_messages (${cols.join(', ')}) VALUES (${cols.map((c) => `@${c}`).join(', ')})`,
      ).run(row);
    }
    expect(await store.getChain(head)).toHaveLength(LENGTH);
  }, 60_000);
});
