import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { type CairnError, isCairnError, newId } from '@cairn/core';
import type { StoreChange } from '@cairn/store';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../src/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'cairn-sharing-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const tempPath = () => join(dir, `${newId()}.db`);
// Child processes start slowly on a loaded machine.
const SLOW = 30_000;

async function failure(call: () => Promise<unknown> | unknown): Promise<CairnError> {
  try {
    await call();
  } catch (e) {
    if (isCairnError(e)) return e;
    throw e;
  }
  throw new Error('expected a CairnError');
}

/** Counts event-loop turns: it only moves while the loop is free to run timers. */
function ticker(): { count: () => number; stop: () => void } {
  let n = 0;
  const t = setInterval(() => n++, 1);
  return { count: () => n, stop: () => clearInterval(t) };
}

/** Another process holding the file's write lock until `release()`. */
async function holdLock(path: string) {
  const child = spawn(process.execPath, [join(here, 'fixtures', 'hold-lock.mjs'), path], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr!.on('data', (d) => {
    err += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('locked')) resolve();
    });
    child.on('exit', () => reject(new Error(`hold-lock exited early: ${err}`)));
  });
  return {
    release: async () => {
      child.stdin!.write('release\n');
      expect(await exited, err).toBe(0);
    },
  };
}

describe('two stores on one file in one process', () => {
  it(
    'share one connection: a write waits for the other store’s transaction, and the loop runs meanwhile',
    async () => {
      const path = tempPath();
      const a = createSqliteStore({ path }, { busyTimeoutMs: 2000 });
      const b = createSqliteStore({ path: join(dir, '.', path.slice(dir.length + 1)) });
      const seen: StoreChange[] = [];
      const thread = await a.createThread({ title: 'one' });
      b.subscribe(thread.id, (c) => seen.push(c));

      const ticks = ticker();
      let inside = 0;
      const tx = a.transaction(async (t) => {
        await t.updateThread(thread.id, { title: 'two' });
        // Awaits timers while holding the lock: a frozen loop could never get past this.
        await sleep(30);
        inside = ticks.count();
        await t.updateThread(thread.id, { title: 'three' });
      });
      const write = b.createThread({ title: 'from b' });
      const [, other] = await Promise.all([tx, write]);
      ticks.stop();
      expect(inside).toBeGreaterThan(0);
      expect((await b.getThread(thread.id))?.title).toBe('three');
      expect((await a.getThread(other.id))?.title).toBe('from b');
      // A write through one store is a change for listeners of the other.
      expect(seen).toEqual([
        { threadId: thread.id, kind: 'thread' },
        { threadId: thread.id, kind: 'thread' },
      ]);

      // Closing one leaves the other working, and its listeners are gone with it.
      await b.close();
      expect((await failure(() => b.getThread(thread.id))).code).toBe('CLOSED');
      await a.updateThread(thread.id, { title: 'four' });
      expect(seen).toHaveLength(2);
      expect((await a.getThread(thread.id))?.title).toBe('four');
      await a.close();
      // The last close closed the file: another connection may switch it out of WAL.
      const db = new Database(path);
      expect(db.pragma('journal_mode = DELETE', { simple: true })).toBe('delete');
      db.close();
    },
    SLOW,
  );

  it('keeps `FULL` when either store asked for it', async () => {
    const db = new Database(tempPath());
    const normal = createSqliteStore({ database: db });
    const full = createSqliteStore({ database: db }, { synchronous: 'FULL' });
    expect(db.pragma('synchronous', { simple: true })).toBe(2);
    const again = createSqliteStore({ database: db });
    expect(db.pragma('synchronous', { simple: true })).toBe(2);
    await Promise.all([normal.close(), full.close(), again.close()]);
    expect(db.open).toBe(true);
    db.close();
  });

  it('never shares `:memory:`: each is its own database', async () => {
    const one = createSqliteStore({ path: ':memory:' });
    const two = createSqliteStore({ path: ':memory:' });
    const t = await one.createThread({});
    expect(await two.getThread(t.id)).toBeNull();
    await Promise.all([one.close(), two.close()]);
  });
});

describe('another process holding the write lock', () => {
  it(
    'makes a write wait on timers, not by freezing the loop, and go through once it lets go',
    async () => {
      const path = tempPath();
      const store = createSqliteStore({ path }, { busyTimeoutMs: 20_000 });
      const thread = await store.createThread({});
      const other = await holdLock(path);
      const ticks = ticker();
      let settled = false;
      const write = store.updateThread(thread.id, { title: 'after the wait' }).finally(() => {
        settled = true;
      });
      while (ticks.count() < 20) await sleep(5);
      expect(settled).toBe(false);
      await other.release();
      expect((await write).title).toBe('after the wait');
      ticks.stop();
      await store.close();
    },
    SLOW,
  );

  it(
    'ends a wait past busyTimeoutMs with TIMEOUT, the loop running throughout, and nothing written',
    async () => {
      const path = tempPath();
      const store = createSqliteStore({ path }, { busyTimeoutMs: 150 });
      const thread = await store.createThread({});
      const other = await holdLock(path);
      const ticks = ticker();
      const e = await failure(() => store.updateThread(thread.id, { title: 'never' }));
      const during = ticks.count();
      ticks.stop();
      expect(e.code).toBe('TIMEOUT');
      expect((e.cause as { code?: string }).code).toMatch(/^SQLITE_BUSY/);
      expect(during).toBeGreaterThan(0);
      const e2 = await failure(() => store.transaction(async (tx) => tx.createThread({})));
      expect(e2.code).toBe('TIMEOUT');
      await other.release();
      expect((await store.getThread(thread.id))?.title).toBeNull();
      expect((await store.listThreads()).items).toHaveLength(1);
      await store.close();
    },
    SLOW,
  );
});

describe('driver failures', () => {
  it('are UNAVAILABLE, with the driver error as cause', () => {
    const missing = (() => {
      try {
        createSqliteStore({ path: join(dir, 'no-such-dir', 'x.db') });
      } catch (e) {
        return e;
      }
    })();
    expect(isCairnError(missing, 'UNAVAILABLE')).toBe(true);
    expect((missing as Error).cause).toBeInstanceOf(Error);
    expect((missing as Error).message).toContain('no-such-dir');

    const notADb = join(dir, 'not-a-database.db');
    writeFileSync(notADb, 'hello, this is not a SQLite file\n'.repeat(200));
    let e: unknown;
    try {
      createSqliteStore({ path: notADb });
    } catch (x) {
      e = x;
    }
    expect(isCairnError(e, 'UNAVAILABLE')).toBe(true);
    expect(((e as Error).cause as { code?: string }).code).toBe('SQLITE_NOTADB');

    const aDirectory = join(dir, 'a-directory');
    mkdirSync(aDirectory);
    let e2: unknown;
    try {
      createSqliteStore({ path: aDirectory });
    } catch (x) {
      e2 = x;
    }
    expect(isCairnError(e2, 'UNAVAILABLE')).toBe(true);
    expect(((e2 as Error).cause as { code?: string }).code).toBe('SQLITE_CANTOPEN');
  });
});
