import { checkKeys, invalidArgument, keysOf } from '@cairn/core';
import type { EncryptionOptions, Store } from '@cairn/store';
import { checkEncryptionOptions, checkOneOf, createStore } from '@cairn/store/adapter';
import { connect } from './connection.js';
import type { SqliteDatabase } from './sqlite-driver.js';
import { SqliteDriver } from './sqlite-store.js';

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
  /**
   * Seals message data, state, memory content and metadata with a data key per tenant,
   * wrapped by `keyring` (see `@cairn/store`'s `localKeyring`). Open a file written with
   * encryption with the same keyring: without it, sealed rows are refused.
   */
  encryption?: EncryptionOptions;
  /**
   * `auto` (default): approximate vector search (`capabilities.vectorSearch` is
   * `approximate`): each memory's vector has a sign-bit code, a scan of the codes by Hamming
   * distance picks candidates, and those are scored exactly; a filter that admits too few of
   * them falls back to the exact scan of the rows it admits. `exact`: always the exact scan.
   * Stores on one file may differ: open a second one with `exact` for exact answers.
   */
  vectorSearch?: 'auto' | 'exact';
}

const SOURCE_KEYS = ['path', 'database'];
const OPTION_KEYS = keysOf<SqliteStoreOptions>()([
  'synchronous',
  'busyTimeoutMs',
  'encryption',
  'vectorSearch',
]);
const inOptions = Object.fromEntries(
  OPTION_KEYS.map((k) => [k, `${k} is an option: createSqliteStore({ path }, { ${k} })`]),
);
const inSource = Object.fromEntries(
  SOURCE_KEYS.map((k) => [k, `${k} goes in the first argument: createSqliteStore({ ${k} })`]),
);

/**
 * Opens a Cairn store on SQLite (better-sqlite3): WAL, foreign keys, lock waits on timers,
 * recursive-CTE chains, FTS5 keyword search and sqlite-vec vector search. The schema is
 * migrated on open; a file written by a newer version fails with `SCHEMA_TOO_NEW` and is
 * left untouched. Several processes may share one file; stores of one process on one
 * file share one connection.
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
  if (typeof source === 'object' && source !== null)
    checkKeys(source, 'createSqliteStore source', SOURCE_KEYS, inOptions);
  checkKeys(options, 'createSqliteStore options', OPTION_KEYS, inSource);
  const { busyTimeoutMs = 5000 } = options;
  const synchronous = checkOneOf('synchronous', options.synchronous ?? 'NORMAL', [
    'NORMAL',
    'FULL',
  ] as const);
  const vectorSearch = checkOneOf('vectorSearch', options.vectorSearch ?? 'auto', [
    'auto',
    'exact',
  ] as const);
  if (!Number.isInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
    throw invalidArgument(
      `busyTimeoutMs must be an integer >= 0, got ${JSON.stringify(busyTimeoutMs)}`,
    );
  }
  if (typeof source === 'object' && source !== null && 'path' in source && 'database' in source)
    throw invalidArgument('createSqliteStore takes { path } or { database }, not both');
  const valid =
    typeof source === 'object' && source !== null && 'database' in source
      ? typeof source.database?.prepare === 'function' && source.database.open
      : typeof source?.path === 'string' && source.path.length > 0;
  if (!valid) {
    throw invalidArgument(
      'createSqliteStore expects { path } (a non-empty string) or { database } (an open better-sqlite3 Database)',
    );
  }
  const encryption =
    options.encryption === undefined
      ? {}
      : { encryption: checkEncryptionOptions(options.encryption) };
  const conn = connect(source, { synchronous, openTimeoutMs: busyTimeoutMs });
  return createStore(new SqliteDriver(conn, busyTimeoutMs, vectorSearch), encryption);
}
