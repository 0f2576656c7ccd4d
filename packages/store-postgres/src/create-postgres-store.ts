import { createHash } from 'node:crypto';
import { checkKeys, invalidArgument, keysOf } from '@cairn/core';
import type { EncryptionOptions, Store } from '@cairn/store';
import {
  asCairnError,
  checkEncryptionOptions,
  checkOneOf,
  createStore,
} from '@cairn/store/adapter';
import pg from 'pg';
import { ident } from './migrations.js';
import { type DriverConnection, PostgresDriver } from './postgres-driver.js';
import {
  isPGlite,
  type PGliteLike,
  type PgClientLike,
  type PgPoolLike,
  poolQueryable,
  sessionQueryable,
} from './queryable.js';

/** Where the store's data lives. The store closes only what it opened itself. */
export type PostgresConnection =
  /** The store opens (and closes) a pg pool of its own. */
  | { connectionString: string }
  /** A pg `Pool` you own: the store borrows connections and never ends it. */
  | { pool: PgPoolLike }
  /** A connected pg `Client`/`PoolClient`, or a PGlite instance, that you own. */
  | { client: PgClientLike | PGliteLike };

export interface PostgresStoreOptions {
  /** The schema holding Cairn's tables, created when missing. Default `cairn`. */
  schema?: string;
  /**
   * `auto` (default): pgvector's HNSW index when the extension can be created, else an
   * exact scan. `exact`: always the exact scan.
   */
  vectorSearch?: 'auto' | 'exact';
  /** Connections of the pool opened for `connectionString`. Default 10. */
  maxConnections?: number;
  /**
   * Seals message data, state, memory content and metadata with a data key per tenant,
   * wrapped by `keyring` (see `@cairn/store`'s `localKeyring`). Open a schema written with
   * encryption with the same keyring: without it, sealed rows are refused.
   */
  encryption?: EncryptionOptions;
}

const MAX_IDENTIFIER = 63;

const CONNECTION_KEYS = ['connectionString', 'pool', 'client'];
const OPTION_KEYS = keysOf<PostgresStoreOptions>()([
  'schema',
  'vectorSearch',
  'maxConnections',
  'encryption',
]);
/** Keys of pg's own pool config, which the store does not take: a pool made with them does. */
const PG_SETTINGS = ['host', 'port', 'user', 'password', 'database', 'ssl', 'max', 'options'];
const inConnection = {
  ...Object.fromEntries(
    OPTION_KEYS.map((k) => [
      k,
      `${k} is an option: createPostgresStore(connection, { ${k} }), the second argument`,
    ]),
  ),
  ...Object.fromEntries(
    PG_SETTINGS.map((k) => [k, `for pg's ${k}, pass a pool: { pool: new pg.Pool({ ${k}, … }) }`]),
  ),
};
const inOptions = Object.fromEntries(
  CONNECTION_KEYS.map((k) => [k, `${k} goes in the first argument: createPostgresStore({ ${k} })`]),
);

/**
 * Opens a Cairn store on PostgreSQL (node-postgres) or PGlite, migrating its schema.
 * On a server, `subscribe` also hears other processes' changes (LISTEN/NOTIFY over a
 * connection the store opens for that) and several processes may share the database.
 * A database that cannot be reached fails with `UNAVAILABLE`.
 *
 * @example
 * ```ts
 * import { createPostgresStore } from '@cairn/store-postgres';
 * const store = await createPostgresStore({ connectionString: process.env.DATABASE_URL! });
 * const thread = await store.createThread({ title: 'Soil carbon' });
 * await store.close();
 *
 * // In-process, with pgvector:
 * import { PGlite } from '@electric-sql/pglite';
 * import { vector } from '@electric-sql/pglite/vector';
 * const local = await createPostgresStore({ client: new PGlite({ extensions: { vector } }) });
 * ```
 */
export async function createPostgresStore(
  connection: PostgresConnection,
  options: PostgresStoreOptions = {},
): Promise<Store> {
  const kind = CONNECTION_KEYS.filter((k) => k in Object(connection));
  if (kind.length !== 1)
    throw invalidArgument(
      kind.length === 0
        ? 'createPostgresStore needs { connectionString }, { pool } or { client }'
        : `createPostgresStore takes one of { connectionString }, { pool } or { client }, got ${kind.join(' and ')}`,
    );
  checkKeys(connection, 'createPostgresStore connection', CONNECTION_KEYS, inConnection);
  checkKeys(options, 'createPostgresStore options', OPTION_KEYS, inOptions);
  const { schema = 'cairn', maxConnections = 10 } = options;
  const encryption =
    options.encryption === undefined
      ? {}
      : { encryption: checkEncryptionOptions(options.encryption) };
  if (!Number.isSafeInteger(maxConnections) || maxConnections < 1)
    throw invalidArgument(
      `maxConnections must be an integer >= 1, got ${JSON.stringify(maxConnections)}`,
    );
  if (options.maxConnections !== undefined && !('connectionString' in connection))
    throw invalidArgument(
      'maxConnections sizes the pool the store opens for { connectionString }; size your own pool or client instead',
    );
  if (typeof schema !== 'string' || !schema || Buffer.byteLength(schema) > MAX_IDENTIFIER)
    throw invalidArgument(`schema must be a name of 1 to ${MAX_IDENTIFIER} bytes`, { schema });
  const vectorSearch = checkOneOf('vectorSearch', options.vectorSearch ?? 'auto', [
    'auto',
    'exact',
  ] as const);
  const channelName = `cairn:${schema}`;
  const base = {
    schema,
    s: ident(schema),
    channel:
      Buffer.byteLength(channelName) <= MAX_IDENTIFIER
        ? channelName
        : `cairn:${createHash('sha256').update(schema).digest('hex').slice(0, 32)}`,
    tryVector: vectorSearch === 'auto',
    pglite: false,
    durable: true,
    pooled: true,
    ownedPool: null,
  };

  let c: DriverConnection;
  if ('connectionString' in connection) {
    const { connectionString } = connection;
    if (typeof connectionString !== 'string' || connectionString === '')
      throw invalidArgument('connectionString must be a non-empty string');
    // Pipelining: a transaction's BEGIN travels with its first statement, and a write
    // whose answer is not needed (a batch of messages) with the next one.
    const pool = new pg.Pool({ connectionString, max: maxConnections, pipeline: true });
    // An idle connection dropped by the server must not crash the process.
    pool.on('error', () => undefined);
    c = {
      ...base,
      db: poolQueryable(pool as unknown as PgPoolLike),
      ownedPool: pool,
      listen: { config: { connectionString } },
    };
  } else if ('pool' in connection) {
    const config = { ...(connection.pool.options ?? {}) } as pg.ClientConfig;
    c = { ...base, db: poolQueryable(connection.pool), listen: { config } };
  } else {
    const { client } = connection;
    const dir = isPGlite(client) ? client.dataDir : undefined;
    c = {
      ...base,
      db: sessionQueryable(client),
      pooled: false,
      pglite: isPGlite(client),
      durable: !isPGlite(client) || (!!dir && !dir.startsWith('memory://')),
      listen: { client },
    };
  }

  const driver = new PostgresDriver(c);
  try {
    await driver.open();
  } catch (e) {
    throw asCairnError(e, 'could not open the Postgres store');
  }
  return createStore(driver, encryption);
}
