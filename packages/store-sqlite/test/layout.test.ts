import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@cairn/core';
import type { Store } from '@cairn/store';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../src/index.js';
import { runMigrations } from '../src/migrations.js';

const dir = mkdtempSync(join(tmpdir(), 'cairn-sqlite-layout-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A payload larger than a page, so that it overflows wherever it is stored. */
const LARGE = 'x'.repeat(200_000);

/** Writes one large message, entry and cached embedding, each followed by small ones. */
async function writeLargeAndSmall(store: Store): Promise<void> {
  const big = (await store.createThread({})).id;
  await store.addMessages([{ threadId: big, parentId: null, role: 'user', data: LARGE }]);
  const small = (await store.createThread({})).id;
  let parentId: string | null = null;
  for (let i = 0; i < 20; i++) {
    const [m] = await store.addMessages([{ threadId: small, parentId, role: 'user', data: i }]);
    parentId = m!.id;
  }
  await store.putEntries([{ collection: 'runs', id: 'big', data: { text: LARGE } }]);
  await store.putEntries(
    Array.from({ length: 20 }, (_, i) => ({ collection: 'runs', id: `r${i}`, data: { i } })),
  );
  await store.putCachedEmbeddings('e', [
    { contentHash: 'big', embedding: Array.from({ length: 4096 }, (_, i) => i) },
  ]);
  await store.putCachedEmbeddings(
    'e',
    Array.from({ length: 20 }, (_, i) => ({ contentHash: `h${i}`, embedding: [i] })),
  );
}

/**
 * Every b-tree SQLite searches by comparing keys (each index, and each WITHOUT ROWID
 * table, whose rows live in one), with the largest cell on any of its pages. SQLite reads
 * a cell's whole record to compare it with a key when the cell overflows its page.
 */
function keyBtrees(db: Database.Database): Array<{ name: string; largestCell: number }> {
  return db
    .prepare(
      `SELECT s.name AS name, max(d.mx_payload) AS largestCell
         FROM sqlite_master s JOIN dbstat d ON d.name = s.name
        WHERE s.name LIKE 'cairn\\_%' ESCAPE '\\'
          AND (s.type = 'index' OR (s.type = 'table' AND s.sql LIKE '%WITHOUT ROWID%'))
        GROUP BY s.name ORDER BY s.name`,
    )
    .all() as Array<{ name: string; largestCell: number }>;
}

const plan = (db: Database.Database, sql: string) =>
  (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as Array<{ detail: string }>)
    .map((r) => r.detail)
    .join('; ');

describe('layout: payloads stay out of the key b-trees', () => {
  it('a large message, entry or cached embedding leaves every key b-tree with key-sized cells', async () => {
    const path = join(dir, `${newId()}.db`);
    const store = createSqliteStore({ path });
    await writeLargeAndSmall(store);
    await store.close();
    const db = new Database(path, { readonly: true });
    const btrees = keyBtrees(db);
    // The key b-trees of messages, entries and the embedding cache are among them.
    for (const table of ['cairn_messages', 'cairn_entries', 'cairn_embedding_cache'])
      expect(btrees.some((b) => b.name.startsWith(table))).toBe(true);
    // Ids and names: a few dozen bytes, nowhere near the 200,000 written.
    expect(btrees.filter((b) => b.largestCell > 1000)).toEqual([]);
    db.close();
  });

  it('finds a message, an entry and a cached embedding by key through an index, not a scan', async () => {
    const path = join(dir, `${newId()}.db`);
    await createSqliteStore({ path }).close();
    const db = new Database(path, { readonly: true });
    expect(plan(db, "SELECT data FROM cairn_messages WHERE id = 'm'")).toMatch(
      /^SEARCH cairn_messages USING INDEX cairn_messages_id \(id=\?\)$/,
    );
    expect(plan(db, "SELECT data FROM cairn_entries WHERE collection = 'c' AND id = 'i'")).toMatch(
      /^SEARCH cairn_entries USING INDEX cairn_entries_key \(collection=\? AND id=\?\)$/,
    );
    expect(
      plan(
        db,
        "SELECT embedding FROM cairn_embedding_cache WHERE embedder_id = 'e' AND content_hash = 'h'",
      ),
    ).toMatch(
      /^SEARCH cairn_embedding_cache USING INDEX cairn_embedding_cache_key \(embedder_id=\? AND content_hash=\?\)$/,
    );
    db.close();
  });

  it('moves the payloads of a version-4 file out, keeping every row and every key rule', async () => {
    const path = join(dir, `${newId()}.db`);
    const old = new Database(path);
    runMigrations(old, 4);
    old.exec(
      "INSERT INTO cairn_threads (id, resource_id, title, metadata, created_at, updated_at) VALUES ('t1', NULL, NULL, '{}', 1, 1)",
    );
    const message = old.prepare(
      "INSERT INTO cairn_messages (id, thread_id, parent_id, role, type, data, created_at, depth) VALUES (?, 't1', ?, 'user', NULL, ?, 1, ?)",
    );
    for (let i = 0; i < 30; i++)
      message.run(`m${i}`, i === 0 ? null : `m${i - 1}`, JSON.stringify(i === 3 ? LARGE : i), i);
    const entry = old.prepare(
      "INSERT INTO cairn_entries (collection, id, group_id, data, version, created_at, updated_at) VALUES ('runs', ?, 'g', ?, 1, 1, 1)",
    );
    entry.run('big', JSON.stringify({ text: LARGE }));
    entry.run('small', JSON.stringify({ i: 1 }));
    old
      .prepare("INSERT INTO cairn_embedding_cache VALUES ('e', 'h', ?)")
      .run(Buffer.from(new Float64Array([1, 2, 3]).buffer));
    old.close();

    const store = createSqliteStore({ path });
    const chain = await store.getChain('m29');
    expect(chain.map((m) => m.data)).toEqual(
      Array.from({ length: 30 }, (_, i) => (i === 3 ? LARGE : i)),
    );
    expect((await store.getEntry('runs', 'big'))?.data).toEqual({ text: LARGE });
    expect((await store.listEntries('runs', { group: 'g' })).map((e) => e.id)).toEqual([
      'big',
      'small',
    ]);
    expect(await store.getCachedEmbeddings('e', ['h'])).toEqual(new Map([['h', [1, 2, 3]]]));
    // The keys are still unique.
    await expect(
      store.addMessages([{ id: 'm5', threadId: 't1', parentId: 'm29', role: 'user', data: 0 }]),
    ).rejects.toMatchObject({ code: 'CONFLICT' });
    await expect(
      store.putEntries([{ collection: 'runs', id: 'small', data: {}, expectedVersion: null }]),
    ).rejects.toMatchObject({ code: 'CONFLICT' });
    await store.putCachedEmbeddings('e', [{ contentHash: 'h', embedding: [4] }]);
    expect(await store.getCachedEmbeddings('e', ['h'])).toEqual(new Map([['h', [4]]]));
    await store.addMessages([
      { id: 'm30', threadId: 't1', parentId: 'm29', role: 'user', data: 30 },
    ]);
    expect((await store.getChain('m30', { limit: 2 })).map((m) => m.id)).toEqual(['m29', 'm30']);
    await writeLargeAndSmall(store);
    await store.close();

    const db = new Database(path, { readonly: true });
    expect(keyBtrees(db).filter((b) => b.largestCell > 1000)).toEqual([]);
    expect(db.prepare('SELECT count(*) AS n FROM cairn_messages').get()).toEqual({ n: 52 });
    db.close();
  });
});
