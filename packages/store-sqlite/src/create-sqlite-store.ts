import { CairnError } from '@cairn/core';
import type { Store } from '@cairn/store';
import { connect } from './connection.js';
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
  /**
   * How long a call waits for another process's lock before failing with TIMEOUT. Default
   * 5000. The wait yields to the event loop (retries on timers), except while the store
   * opens a file another process is migrating.
   */
  busyTimeoutMs?: number;
}

/**
 * Opens a Cairn store on SQLite (better-sqlite3): WAL, foreign keys, lock waits on timers,
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
  if ('database' in source) {
    const db = source.database;
    if (!db || typeof db.prepare !== 'function' || !db.open) {
      throw new CairnError(
        'INVALID_ARGUMENT',
        'createSqliteStore: `database` must be an open better-sqlite3 Database',
      );
    }
  } else if (typeof source.path !== 'string' || source.path.length === 0) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `createSqliteStore: path must be a non-empty string, got ${JSON.stringify(source.path)}`,
    );
  }
  const conn = connect(source, { synchronous, openTimeoutMs: busyTimeoutMs });
  const durable = !conn.db.memory;
  const shared = new Shared(
    conn,
    { vectorSearch: 'exact', notifications: 'process', multiProcess: durable, durable },
    busyTimeoutMs,
  );
  return new SqliteStoreView(shared, new RootRunner(shared));
}
