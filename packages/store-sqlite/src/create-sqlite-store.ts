import { CairnError } from '@cairn/core';
import type { Store } from '@cairn/store';
import Database from 'better-sqlite3';
import * as sqliteVec from 'sqlite-vec';
import { readSchemaVersion, runMigrations, SCHEMA_VERSION, schemaTooNew } from './migrations.js';
import type { SqliteDatabase } from './sqlite-driver.js';
import { RootRunner, Shared, SqliteStoreView } from './sqlite-store.js';

/** Where the store keeps its data: a file path (`:memory:` allowed) or an open database. */
export type SqliteStoreSource =
  | {
      /** Created if missing. `:memory:` keeps everything in this process. */
      path: string;
    }
  | {
      /** An open better-sqlite3 `Database`. The store configures it, and `close()` leaves it open. */
      database: SqliteDatabase;
    };

export interface SqliteStoreOptions {
  /**
   * `NORMAL` (default): in WAL mode a commit survives a process crash, and the last
   * commits may be lost on power failure. `FULL`: every commit is on disk when it returns.
   */
  synchronous?: 'NORMAL' | 'FULL';
  /** How long a write waits for another process's lock before failing with TIMEOUT. Default 5000. */
  busyTimeoutMs?: number;
}

/**
 * Opens a Cairn store on SQLite (better-sqlite3): WAL, foreign keys, a busy timeout,
 * recursive-CTE chains, FTS5 keyword search and sqlite-vec vector search. The schema is
 * migrated on open; a file written by a newer version fails with `SCHEMA_TOO_NEW` and is
 * left untouched. Several processes may share one file.
 *
 * @example
 * ```ts
 * import { createSqliteStore } from '@cairn/store-sqlite';
 *
 * const store = createSqliteStore({ path: 'agent.db' });
 * const thread = await store.createThread({ resourceId: 'user-1' });
 * const [m] = await store.addMessages([{ threadId: thread.id, parentId: null, role: 'user', data: 'hi' }]);
 * await store.createBranch({ threadId: thread.id, name: 'main', headMessageId: m!.id });
 * await store.close();
 * ```
 */
export function createSqliteStore(
  source: SqliteStoreSource,
  options: SqliteStoreOptions = {},
): Store {
  if (typeof source !== 'object' || source === null) {
    throw new CairnError('INVALID_ARGUMENT', 'createSqliteStore expects { path } or { database }');
  }
  const synchronous = options.synchronous ?? 'NORMAL';
  if (synchronous !== 'NORMAL' && synchronous !== 'FULL') {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `synchronous must be NORMAL or FULL, got ${JSON.stringify(synchronous)}`,
    );
  }
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  if (!Number.isInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `busyTimeoutMs must be an integer >= 0, got ${JSON.stringify(busyTimeoutMs)}`,
    );
  }
  let db: SqliteDatabase;
  let owns: boolean;
  if ('database' in source) {
    db = source.database;
    owns = false;
    if (!db || typeof db.prepare !== 'function' || !db.open) {
      throw new CairnError(
        'INVALID_ARGUMENT',
        'createSqliteStore: `database` must be an open better-sqlite3 Database',
      );
    }
  } else {
    if (typeof source.path !== 'string' || source.path.length === 0) {
      throw new CairnError(
        'INVALID_ARGUMENT',
        `createSqliteStore: path must be a non-empty string, got ${JSON.stringify(source.path)}`,
      );
    }
    db = new Database(source.path, { timeout: busyTimeoutMs }) as unknown as SqliteDatabase;
    owns = true;
  }
  try {
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    // Before anything that could write (even switching to WAL): a newer file stays as it was.
    const found = readSchemaVersion(db);
    if (found > SCHEMA_VERSION) throw schemaTooNew(found);
    sqliteVec.load(db);
    if (!db.memory) db.pragma('journal_mode = WAL');
    db.pragma('foreign_keys = ON');
    db.pragma(`synchronous = ${synchronous}`);
    if (owns && !db.memory) {
      // Vector search scans the embeddings; reading them through a memory map and a
      // larger page cache halves its time. Only for a connection the store opened itself.
      db.pragma(`mmap_size = ${256 * 1024 * 1024}`);
      db.pragma('cache_size = -32768');
    }
    runMigrations(db);
  } catch (e) {
    if (owns && db.open) db.close();
    throw e;
  }
  const durable = !db.memory;
  const shared = new Shared(db, owns, {
    vectorSearch: 'exact',
    notifications: 'process',
    multiProcess: durable,
    durable,
  });
  return new SqliteStoreView(shared, new RootRunner(shared));
}
