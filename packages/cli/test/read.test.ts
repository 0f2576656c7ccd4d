import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMMANDS } from '../src/index.js';
import { cairn, kinds, seed, skipPostgres, type TestDb, tempDir, testDb } from './support.js';

describe('usage', () => {
  it('prints help for the command line and for every command', async () => {
    const main = await cairn(['--help']);
    expect(main.code).toBe(0);
    for (const name of Object.keys(COMMANDS)) {
      expect(main.stdout).toContain(`  ${name}`);
      const r = await cairn([name, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(
        new RegExp(`^usage: cairn ${name} ${COMMANDS[name]!.args.join(' ')} \\[options\\]\n`),
      );
    }
  });

  it('answers bad arguments with one line and exit code 2', async () => {
    for (const args of [
      [],
      ['nope'],
      ['threads'],
      ['threads', 'a.db', 'b.db'],
      ['threads', 'a.db', '--bogus'],
      ['threads', 'a.db', '--limit', '0'],
    ]) {
      const r = await cairn(args);
      expect(r.code, args.join(' ')).toBe(2);
      if (args.length > 0) expect(r.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
    }
  });
});

describe('a file that is not a Cairn database', () => {
  const dir = tempDir();
  const commands = (db: string) => [
    ['threads', db],
    ['show', db, 't'],
    ['doctor', db],
    ['migrate', db],
  ];

  it('refuses a missing file without creating it', async () => {
    const db = join(dir, 'missing.db');
    for (const args of commands(db)) {
      const r = await cairn(args);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`cairn: no such file: ${db}\n`);
    }
    expect(readdirSync(dir)).toEqual([]);
  });

  it('refuses a file that is not SQLite, or SQLite without Cairn, writing nothing', async () => {
    const text = join(dir, 'notes.txt');
    writeFileSync(text, 'not a database at all, just some words\n');
    const other = join(dir, 'other.db');
    const d = new Database(other);
    d.exec('CREATE TABLE people (name TEXT); INSERT INTO people VALUES (1)');
    d.close();
    const before = readFileSync(other);
    for (const [file, why] of [
      [text, 'is not a SQLite database'],
      [other, 'is not a Cairn database'],
    ] as const) {
      for (const args of commands(file)) {
        const r = await cairn(args);
        expect(r.code, args.join(' ')).toBe(1);
        expect(r.stderr.trim().split('\n')).toHaveLength(1);
        expect(r.stderr).toContain(why);
      }
    }
    expect(readFileSync(other).equals(before)).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(['notes.txt', 'other.db']);
  });
});

describe.skipIf(skipPostgres)('an unreachable or empty Postgres database', () => {
  it('reports an unreachable server in one line', async () => {
    const r = await cairn(['threads', 'postgres://postgres@127.0.0.1:1/test']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^cairn: cannot reach Postgres at postgres:\/\/postgres@127\.0\.0\.1:1\/test: .*\n$/,
    );
  });

  it('refuses a schema without Cairn and does not create it', async () => {
    const db = testDb('postgres');
    for (const args of [
      ['threads', db.arg],
      ['doctor', db.arg],
    ]) {
      const r = await cairn(args);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('is not a Cairn database');
    }
    const schema = new URL(db.arg).searchParams.get('schema');
    const client = new pg.Client({ connectionString: db.arg.replace(/\?.*$/, '') });
    await client.connect();
    const { rows } = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    await client.end();
    expect(rows).toEqual([]);
  });
});

describe.each(kinds)('on %s', (kind) => {
  let db: TestDb;
  let seeded: Awaited<ReturnType<typeof seed>>;

  beforeAll(async () => {
    db = testDb(kind);
    const store = await db.open();
    seeded = await seed(store);
    await store.createThread({ title: 'second', resourceId: 'user-2' });
    await store.close();
  });
  afterAll(() => db.drop());

  it('threads: a table, JSON, a resource filter and a limit', async () => {
    const table = await cairn(['threads', db.arg]);
    expect(table.code).toBe(0);
    const lines = table.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^ID +RESOURCE +TITLE +CREATED +UPDATED$/);
    expect(lines).toHaveLength(3);
    expect(lines[2]).toContain(seeded.thread.id);
    const json = JSON.parse((await cairn(['threads', db.arg, '--json'])).stdout);
    expect(json.map((t: { title: string }) => t.title)).toEqual(['second', 'Soil carbon']);
    expect(json[1]).toEqual(seeded.thread);
    const mine = JSON.parse(
      (await cairn(['threads', db.arg, '--json', '--resource', 'user-1'])).stdout,
    );
    expect(mine).toEqual([seeded.thread]);
    const one = JSON.parse((await cairn(['threads', db.arg, '--json', '--limit', '1'])).stdout);
    expect(one).toHaveLength(1);
  });

  it('show: the active branch by default, another with --branch', async () => {
    const { thread, main, messages } = seeded;
    const active = JSON.parse((await cairn(['show', db.arg, thread.id, '--json'])).stdout);
    expect(active.thread).toEqual(thread);
    expect(active.branch.id).toBe(main.id);
    expect(active.messages.map((m: { id: string }) => m.id)).toEqual([
      messages.a.id,
      messages.b2.id,
    ]);
    expect(active.branches.map((b: { name: string }) => b.name)).toEqual(['main', 'alt']);
    expect(active.checkpoints.map((c: { name: string }) => c.name)).toEqual(['start']);
    const alt = JSON.parse(
      (await cairn(['show', db.arg, thread.id, '--branch', 'alt', '--json'])).stdout,
    );
    expect(alt.messages.map((m: { id: string }) => m.id)).toEqual([messages.b.id]);
    const text = await cairn(['show', db.arg, thread.id]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('messages of branch "main"');
    expect(text.stdout).toContain(messages.b2.id);
    expect(text.stdout).toContain('reply');
  });

  it('show: an unknown thread or branch is one line and exit 1', async () => {
    const r = await cairn(['show', db.arg, 'no-such-thread']);
    expect([r.code, r.stderr]).toEqual([1, 'cairn: thread "no-such-thread" not found\n']);
    const b = await cairn(['show', db.arg, seeded.thread.id, '--branch', 'nope']);
    expect(b.code).toBe(1);
    expect(b.stderr).toContain('has no branch "nope" (it has "main", "alt")');
  });

  it('migrate: already current', async () => {
    const r = await cairn(['migrate', db.arg]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^already at schema version \d+\n$/);
  });

  it('doctor: a clean database passes, with sizes per table', async () => {
    const r = await cairn(['doctor', db.arg, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.problems).toEqual([]);
    expect(report.schema.pending).toEqual([]);
    const rows = Object.fromEntries(
      report.tables.map((t: { table: string; rows: number }) => [t.table, t.rows]),
    );
    expect(rows).toMatchObject({
      threads: 2,
      messages: 3,
      branches: 2,
      checkpoints: 1,
      // One commit: its own row on SQLite, its branch's tail segment on Postgres.
      ...(kind === 'sqlite' ? { state_commits: 1 } : { state_segments: 0, state_tail: 1 }),
    });
    for (const t of report.tables) expect(t.bytes).toBeGreaterThan(0);
    const text = await cairn(['doctor', db.arg]);
    expect(text.stdout).toContain('no problems found');
  });
});

describe('migrate and doctor on a file that needs them', () => {
  it('migrates an empty SQLite file', async () => {
    const file = join(tempDir(), 'empty.db');
    writeFileSync(file, '');
    const r = await cairn(['migrate', file]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^migrated from schema version 0 to \d+\n$/);
    expect((await cairn(['threads', file, '--json'])).stdout).toBe('[]\n');
  });

  it('doctor reports orphans and pending migrations with exit 1; threads asks for migrate', async () => {
    const db = testDb('sqlite');
    const store = await db.open();
    await seed(store);
    await store.close();
    const raw = new Database(db.arg);
    raw.exec(
      "INSERT INTO cairn_messages (id, thread_id, parent_id, role, type, data, created_at, depth) VALUES ('lost', 'gone', 'also-gone', 'user', NULL, '1', 0, 1)",
    );
    raw.close();
    const orphans = await cairn(['doctor', db.arg, '--json']);
    expect(orphans.code).toBe(1);
    expect(JSON.parse(orphans.stdout).orphans).toEqual({
      'messages without their thread': 1,
      'messages without their parent': 1,
    });
    expect(orphans.stderr).toBe('cairn: 2 problem(s) found\n');
    const old = new Database(db.arg);
    const latest = old.prepare('SELECT max(version) FROM cairn_migrations').pluck().get() as number;
    old.prepare('DELETE FROM cairn_migrations WHERE version = ?').run(latest);
    old.close();
    const pending = await cairn(['doctor', db.arg]);
    expect(pending.code).toBe(1);
    expect(pending.stdout).toContain(`pending migrations: ${latest}`);
    const threads = await cairn(['threads', db.arg]);
    expect(threads.code).toBe(1);
    expect(threads.stderr).toContain('run `cairn migrate` first');
    expect(existsSync(db.arg)).toBe(true);
  });
});
