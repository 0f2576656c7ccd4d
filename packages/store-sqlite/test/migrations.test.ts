import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isCairnError, newId } from '@cairn/core';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { createSqliteStore, SCHEMA_VERSION } from '../src/index.js';
import { MIGRATIONS, runMigrations } from '../src/migrations.js';

const dir = mkdtempSync(join(tmpdir(), 'cairn-migrations-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const versions = (db: Database.Database) =>
  (
    db.prepare('SELECT version FROM cairn_migrations ORDER BY version').all() as Array<{
      version: number;
    }>
  ).map((r) => r.version);
const hash = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

describe('migrations', () => {
  it('numbers its steps by position and records every one in the file', async () => {
    expect(SCHEMA_VERSION).toBe(MIGRATIONS.length);
    expect(SCHEMA_VERSION).toBeGreaterThanOrEqual(2);
    const db = new Database(join(dir, `${newId()}.db`));
    const store = createSqliteStore({ database: db });
    expect(versions(db)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
    await store.migrate();
    await store.migrate();
    expect(versions(db)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
    await store.close();
    db.close();
  });

  it('migrates a file written at version 1, keeping its data', async () => {
    const path = join(dir, `${newId()}.db`);
    const old = new Database(path);
    runMigrations(old, 1);
    expect(versions(old)).toEqual([1]);
    old
      .prepare(
        "INSERT INTO cairn_threads (id, resource_id, title, metadata, created_at, updated_at) VALUES ('t1', 'r', 'old', '{}', 1, 1)",
      )
      .run();
    old
      .prepare(
        "INSERT INTO cairn_messages (id, thread_id, parent_id, role, type, data, created_at, depth) VALUES ('m1', 't1', NULL, 'user', NULL, '\"hi\"', 1, 0)",
      )
      .run();
    // Version 1 has no memories yet.
    expect(
      old.prepare("SELECT 1 FROM sqlite_master WHERE name = 'cairn_memories'").get(),
    ).toBeUndefined();
    old.close();

    const store = createSqliteStore({ path });
    expect((await store.getThread('t1'))?.title).toBe('old');
    expect((await store.getChain('m1')).map((m) => m.data)).toEqual(['hi']);
    const [m] = await store.addMemories([
      { agentId: 'a', content: { text: 'after the upgrade' }, embedding: [1, 0] },
    ]);
    expect((await store.searchMemories({ text: 'upgrade' })).map((h) => h.memory.id)).toEqual([
      m!.id,
    ]);
    await store.close();
    const check = new Database(path, { readonly: true });
    expect(versions(check)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
    check.close();
  });

  it('gives messages stored before version 3 the jump pointers new ones get', async () => {
    // The same tree (a chain of 300 with a fork at 100) stored by a version-2 file and
    // by the current code: after the upgrade both hold the same pointers.
    const tree = Array.from({ length: 360 }, (_, i) => ({
      id: `m${i}`,
      parentId: i === 0 ? null : i === 300 ? 'm100' : `m${i - 1}`,
    }));
    const path = join(dir, `${newId()}.db`);
    const old = new Database(path);
    runMigrations(old, 2);
    old.exec(
      "INSERT INTO cairn_threads (id, resource_id, title, metadata, created_at, updated_at) VALUES ('t1', NULL, NULL, '{}', 1, 1)",
    );
    const insert = old.prepare(
      "INSERT INTO cairn_messages (id, thread_id, parent_id, role, type, data, created_at, depth) VALUES (?, 't1', ?, 'user', NULL, '0', 1, ?)",
    );
    const depth = new Map<string, number>();
    old.transaction(() => {
      for (const m of tree) {
        const d = m.parentId === null ? 0 : depth.get(m.parentId)! + 1;
        depth.set(m.id, d);
        insert.run(m.id, m.parentId, d);
      }
    })();
    old.close();
    const upgraded = createSqliteStore({ path });
    const freshPath = join(dir, `${newId()}.db`);
    const fresh = createSqliteStore({ path: freshPath });
    await fresh.createThread({ id: 't1' });
    await fresh.addMessages(tree.map((m) => ({ ...m, threadId: 't1', role: 'user', data: 0 })));
    expect(await upgraded.isAncestor('m100', 'm359')).toBe(true);
    expect(await upgraded.isAncestor('m101', 'm359')).toBe(false);
    expect(
      (await upgraded.getChain('m359', { limit: 2, beforeDepth: 51 })).map((m) => m.id),
    ).toEqual(['m49', 'm50']);
    await Promise.all([upgraded.close(), fresh.close()]);
    const jumps = (file: string) => {
      const db = new Database(file, { readonly: true });
      const rows = db
        .prepare('SELECT id, jump_id, jump_depth FROM cairn_messages ORDER BY id')
        .all();
      db.close();
      return rows;
    };
    expect(jumps(path)).toEqual(jumps(freshPath));
    expect(
      new Set(jumps(path).map((r) => (r as { jump_id: unknown }).jump_id)).size,
    ).toBeGreaterThan(50);
  });

  it('gives memories stored before version 7 their own lineage, open and current', async () => {
    const path = join(dir, `${newId()}.db`);
    const old = new Database(path);
    runMigrations(old, 6);
    old.exec(`INSERT INTO cairn_memories (id, type, agent_id, scope, content, text, metadata, content_hash, created_at)
      VALUES ('old', 'custom', 'a', 'private', '{"text":"Ada lives in Paris"}', 'Ada lives in Paris', '{}', 'h', 5)`);
    old.close();
    const store = createSqliteStore({ path });
    const before = await store.getMemory('old');
    expect(before).toMatchObject({
      createdAt: 5,
      validFrom: null,
      validTo: null,
      supersededAt: null,
      supersedes: null,
      lineageId: 'old',
      source: null,
    });
    const next = await store.supersedeMemory('old', {
      content: { text: 'Ada lives in Berlin' },
      validFrom: 10,
    });
    expect(
      (await store.listMemories({ lineageIds: ['old'] }, { order: 'oldest' })).map((m) => m.id),
    ).toEqual(['old', next.id]);
    expect(
      (await store.searchMemories({ text: 'Ada', filter: { validAt: 9 } })).map((h) => h.memory.id),
    ).toEqual(['old']);
    await store.close();
  });

  it('adds its tables to a file that holds other tables', async () => {
    const path = join(dir, `${newId()}.db`);
    const other = new Database(path);
    other.exec("CREATE TABLE app_data (x TEXT); INSERT INTO app_data VALUES ('mine')");
    other.close();
    const store = createSqliteStore({ path });
    await store.createThread({});
    await store.close();
    const check = new Database(path, { readonly: true });
    expect(check.prepare('SELECT x FROM app_data').get()).toEqual({ x: 'mine' });
    check.close();
  });

  for (const journal of ['delete', 'wal'] as const) {
    it(`refuses a file from a newer version with SCHEMA_TOO_NEW and leaves it untouched (${journal} journal)`, async () => {
      const path = join(dir, `${newId()}.db`);
      const first = createSqliteStore({ path });
      const t = await first.createThread({ title: 'from the future' });
      await first.close();
      const future = new Database(path);
      future
        .prepare('INSERT INTO cairn_migrations (version, applied_at) VALUES (?, ?)')
        .run(SCHEMA_VERSION + 1, Date.now());
      future.pragma('wal_checkpoint(TRUNCATE)');
      if (journal === 'delete') future.pragma('journal_mode = DELETE');
      future.close();
      const before = hash(path);
      const filesBefore = readdirSync(dir).sort();

      let error: unknown;
      try {
        createSqliteStore({ path });
      } catch (e) {
        error = e;
      }
      expect(isCairnError(error, 'SCHEMA_TOO_NEW')).toBe(true);
      expect((error as Error).message).toContain(String(SCHEMA_VERSION + 1));

      expect(hash(path)).toBe(before);
      expect(readdirSync(dir).sort()).toEqual(filesBefore);
      const check = new Database(path, { readonly: true });
      expect(check.pragma('journal_mode', { simple: true })).toBe(journal);
      expect(versions(check)).toEqual([
        ...Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1),
        SCHEMA_VERSION + 1,
      ]);
      expect(check.prepare('SELECT title FROM cairn_threads WHERE id = ?').get(t.id)).toEqual({
        title: 'from the future',
      });
      check.close();
    });
  }

  it('refuses an injected database from a newer version and leaves it open', () => {
    const db = new Database(':memory:');
    db.exec(
      'CREATE TABLE cairn_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)',
    );
    db.prepare('INSERT INTO cairn_migrations VALUES (?, 0)').run(SCHEMA_VERSION + 5);
    expect(() => createSqliteStore({ database: db })).toThrow(/schema version/);
    expect(db.open).toBe(true);
    expect(
      db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name LIKE 'cairn_%'").get(),
    ).toEqual({ n: 1 });
    db.close();
  });
});
