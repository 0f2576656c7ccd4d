import { realpathSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { AsyncLock } from '@cairn/core';
import { asCairnError, lockTimeout } from '@cairn/store/adapter';
import Database from 'better-sqlite3';
import * as sqliteVec from 'sqlite-vec';
import { CodeIndex } from './code-index.js';
import { readSchemaVersion, runMigrations, SCHEMA_VERSION, schemaTooNew } from './migrations.js';
import type { SqliteDatabase, SqliteStatement } from './sqlite-driver.js';

/**
 * One better-sqlite3 connection and what goes with it, shared by every store this process
 * opens on the same file (or the same injected `Database`). better-sqlite3 is synchronous:
 * two connections of one process on one file would wait for each other's locks with the
 * event loop frozen, so one process has one connection per file, and its stores take turns
 * on its lock as calls of one store do (and, sharing it as their change scope, hear each
 * other's changes).
 */
export class Connection {
  readonly db: SqliteDatabase;
  /** Calls run one at a time: a transaction holds this across its awaits. */
  readonly lock = new AsyncLock();
  /** The file's vector codes, as this process last read them (approximate vector search). */
  readonly codes = new CodeIndex();
  readonly #owns: boolean;
  readonly #key: string | SqliteDatabase;
  #refs = 0;
  #synchronous: 'NORMAL' | 'FULL' = 'NORMAL';
  #statements = new Map<string, SqliteStatement>();

  constructor(db: SqliteDatabase, owns: boolean, key: string | SqliteDatabase) {
    this.db = db;
    this.#owns = owns;
    this.#key = key;
  }

  /** A cached prepared statement; with `raw`, one returning rows as arrays. */
  sql(source: string, raw = false): SqliteStatement {
    const key = raw ? `raw:${source}` : source;
    let s = this.#statements.get(key);
    if (!s) {
      s = raw ? this.db.prepare(source).raw(true) : this.db.prepare(source);
      this.#statements.set(key, s);
    }
    return s;
  }

  rows(source: string): SqliteStatement {
    return this.sql(source, true);
  }

  /** One more store uses this connection; `FULL` from any of them holds for all. */
  retain(synchronous: 'NORMAL' | 'FULL'): this {
    if (this.#refs === 0 || (synchronous === 'FULL' && this.#synchronous !== 'FULL')) {
      this.db.pragma(`synchronous = ${synchronous}`);
      this.#synchronous = synchronous;
    }
    this.#refs++;
    return this;
  }

  /** A store is done with it; the last one closes a connection the store opened itself. */
  release(): void {
    if (--this.#refs > 0) return;
    if (typeof this.#key === 'string') byPath.delete(this.#key);
    else byDatabase.delete(this.#key);
    this.#statements.clear();
    this.codes.reset();
    if (this.#owns && this.db.open) this.db.close();
  }
}

const byPath = new Map<string, Connection>();
const byDatabase = new WeakMap<SqliteDatabase, Connection>();

/** The file's identity in this process: one path however it was spelled or linked. */
function fileKey(path: string): string {
  const full = resolve(path);
  try {
    return realpathSync(full);
  } catch {
    // Not created yet: its directory names it (and a missing directory fails the open).
    try {
      return resolve(realpathSync(dirname(full)), basename(full));
    } catch {
      return full;
    }
  }
}

export interface ConnectOptions {
  synchronous: 'NORMAL' | 'FULL';
  /** How long opening waits, synchronously, for a lock held by another process. */
  openTimeoutMs: number;
}

/**
 * The process's connection to a file or injected database, opened, configured and
 * migrated on first use. Failures of the driver (a missing directory, a file that is not
 * a database) become `UNAVAILABLE`; a newer schema stays `SCHEMA_TOO_NEW`.
 */
export function connect(
  source: { path: string } | { database: SqliteDatabase },
  options: ConnectOptions,
): Connection {
  const injected = 'database' in source ? source.database : null;
  // `:memory:` (and the empty path) is a new database on every open: never shared.
  const path = injected === null ? (source as { path: string }).path : null;
  const key = injected ?? (path === ':memory:' ? null : fileKey(path!));
  const existing =
    key === null ? undefined : typeof key === 'string' ? byPath.get(key) : byDatabase.get(key);
  if (existing) return existing.retain(options.synchronous);

  let db: SqliteDatabase | undefined = injected ?? undefined;
  try {
    db ??= new Database(path!, { timeout: options.openTimeoutMs }) as unknown as SqliteDatabase;
    // Opening may wait for another process (a migration, the switch to WAL): briefly, once.
    db.pragma(`busy_timeout = ${options.openTimeoutMs}`);
    // Before anything that could write (even switching to WAL): a newer file stays as it was.
    const found = readSchemaVersion(db);
    if (found > SCHEMA_VERSION) throw schemaTooNew(found);
    sqliteVec.load(db);
    if (!db.memory) db.pragma('journal_mode = WAL');
    db.pragma('foreign_keys = ON');
    // Deleted content is overwritten with zeros, not left in free pages: what
    // `Store.forget` deletes (and anything deleted before it) is gone from the file.
    db.pragma('secure_delete = ON');
    if (!injected && !db.memory) {
      // Vector search scans the embeddings, one page per memory at 512 dimensions: read
      // through a memory map, a page costs a pointer, not a read() call. As large as
      // SQLite allows (it clamps to its compile-time limit, 2 GiB for better-sqlite3): a
      // map costs address space, not memory. Only for a connection the store opened itself.
      db.pragma(`mmap_size = ${2 ** 40}`);
      db.pragma('cache_size = -32768');
    }
    runMigrations(db);
    // From here on, lock waits are the store's: asynchronous, see `untilUnlocked`.
    db.pragma('busy_timeout = 0');
  } catch (e) {
    if (!injected && db?.open) db.close();
    const where = injected ? 'the injected database' : JSON.stringify(path);
    throw isBusy(e) ? lockTimeout(e) : asCairnError(e, `cannot open SQLite database ${where}`);
  }
  const conn = new Connection(db, !injected, key ?? db);
  if (typeof key === 'string') byPath.set(key, conn);
  else if (key !== null) byDatabase.set(key, conn);
  return conn.retain(options.synchronous);
}

/** Another connection holds the lock a statement needs. */
export function isBusy(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return (
    typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'))
  );
}

/** The first waits are short (a commit takes about a millisecond), then they grow. */
const FIRST_WAIT_MS = 1;
const LONGEST_WAIT_MS = 20;

/**
 * Runs `attempt` until no other connection's lock stops it, waiting between tries on
 * timers so the event loop keeps running; after `timeoutMs` the lock error becomes
 * `TIMEOUT`. `attempt` must change nothing when it fails with a lock error (a
 * `BEGIN IMMEDIATE` that did not begin, a read).
 */
export async function untilUnlocked<T>(
  attempt: () => T | Promise<T>,
  timeoutMs: number,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  let wait = FIRST_WAIT_MS;
  for (;;) {
    try {
      return await attempt();
    } catch (e) {
      const left = deadline - performance.now();
      if (!isBusy(e)) throw e;
      if (left <= 0) throw lockTimeout(e);
      // Jitter, so that processes waiting on one lock do not retry in step.
      await sleep(Math.min(left, wait * (0.5 + Math.random())));
      wait = Math.min(wait * 2, LONGEST_WAIT_MS);
    }
  }
}
