import { createHash } from 'node:crypto';
import { CairnError, newId } from '@cairn/core';
import { ChangeEmitter, type Store, type StoreCapabilities, type StoreChange } from '@cairn/store';
import pg from 'pg';
import { ChangeListener } from './change-listener.js';
import { Gate } from './gate.js';
import { ident, migrate } from './migrations.js';
import { PostgresStore, type StoreCore } from './postgres-store.js';
import {
  driverFailure,
  isPGlite,
  type PGliteLike,
  type PgClientLike,
  type PgPoolLike,
  poolQueryable,
  type Queryable,
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
}

const MAX_IDENTIFIER = 63;

/** The listeners of the open stores on each PGlite instance, by schema. */
const pgliteEmitters = new WeakMap<object, Map<string, Set<ChangeEmitter>>>();

/**
 * Opens a Cairn store on PostgreSQL (node-postgres) or PGlite, migrating its schema.
 * On a server, `subscribe` also hears other processes' changes (LISTEN/NOTIFY over a
 * connection the store opens for that) and several processes may share the database.
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
  const schema = options.schema ?? 'cairn';
  if (
    typeof schema !== 'string' ||
    schema.length === 0 ||
    Buffer.byteLength(schema) > MAX_IDENTIFIER
  ) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `schema must be a name of 1 to ${MAX_IDENTIFIER} bytes, got ${JSON.stringify(schema)}`,
    );
  }
  const vectorMode = options.vectorSearch ?? 'auto';
  if (vectorMode !== 'auto' && vectorMode !== 'exact') {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `vectorSearch must be 'auto' or 'exact', got ${JSON.stringify(vectorMode)}`,
    );
  }
  if (typeof connection !== 'object' || connection === null) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      'createPostgresStore needs { connectionString }, { pool } or { client }',
    );
  }

  // What the store opened itself, and so must close.
  let ownedPool: pg.Pool | null = null;
  let ownedListenClient: pg.Client | null = null;
  let db: Queryable;
  let pglite = false;
  let durable = true;
  let listenVia: { client: PgClientLike; run: (sql: string) => Promise<unknown> } | null = null;
  let listenConfig: pg.ClientConfig | null = null;

  if ('connectionString' in connection) {
    if (typeof connection.connectionString !== 'string' || connection.connectionString === '') {
      throw new CairnError('INVALID_ARGUMENT', 'connectionString must be a non-empty string');
    }
    ownedPool = new pg.Pool({
      connectionString: connection.connectionString,
      max: options.maxConnections ?? 10,
    });
    // An idle connection dropped by the server must not crash the process.
    ownedPool.on('error', () => undefined);
    db = poolQueryable(ownedPool as unknown as PgPoolLike);
    listenConfig = { connectionString: connection.connectionString };
  } else if ('pool' in connection) {
    db = poolQueryable(connection.pool);
    listenConfig = { ...(connection.pool.options ?? {}) } as pg.ClientConfig;
  } else if ('client' in connection) {
    const client = connection.client;
    db = sessionQueryable(client);
    if (isPGlite(client)) {
      pglite = true;
      durable =
        client.dataDir !== undefined &&
        client.dataDir !== '' &&
        !client.dataDir.startsWith('memory://');
    } else {
      listenVia = { client, run: (sql) => db.exec(sql) };
    }
  } else {
    throw new CairnError(
      'INVALID_ARGUMENT',
      'createPostgresStore needs { connectionString }, { pool } or { client }',
    );
  }

  const s = ident(schema);
  const channel = pglite
    ? null
    : Buffer.byteLength(`cairn:${schema}`) <= MAX_IDENTIFIER
      ? `cairn:${schema}`
      : `cairn:${createHash('sha256').update(schema).digest('hex').slice(0, 32)}`;
  const emitter = new ChangeEmitter();
  // On PGlite every store of one instance and schema shares the database, so a change
  // made through one is told to the listeners of all of them (a server uses NOTIFY).
  let siblings: Set<ChangeEmitter> | null = null;
  if (pglite && 'client' in connection) {
    let bySchema = pgliteEmitters.get(connection.client);
    if (!bySchema) {
      bySchema = new Map();
      pgliteEmitters.set(connection.client, bySchema);
    }
    siblings = bySchema.get(schema) ?? new Set();
    bySchema.set(schema, siblings);
  }
  let listener: ChangeListener | null = null;

  const deliver = (change: StoreChange) => emitter.emit(change);
  let closing = false;
  /**
   * LISTENs on a connection of the store's own. Should that connection drop (a server
   * restart, a network blip), it reconnects after a second, until the store closes;
   * changes made while it was down are not heard.
   */
  const listenOwned = async (config: pg.ClientConfig, ch: string): Promise<void> => {
    const client = new pg.Client(config);
    let retried = false;
    const retry = () => {
      if (retried || closing) return;
      retried = true;
      if (ownedListenClient === client) ownedListenClient = null;
      client.end().catch(() => undefined);
      setTimeout(() => {
        if (!closing) listenOwned(config, ch).catch(retry);
      }, 1000).unref();
    };
    client.on('error', retry);
    client.on('end', retry);
    await client.connect();
    ownedListenClient = client;
    listener = new ChangeListener(
      client as unknown as PgClientLike,
      (sql) => client.query(sql),
      ch,
      core.origin,
      deliver,
    );
    await listener.start();
  };

  const closeOwned = async () => {
    closing = true;
    if (listener) await listener.stop(ownedListenClient === null).catch(() => undefined);
    listener = null;
    if (ownedListenClient) await ownedListenClient.end().catch(() => undefined);
    ownedListenClient = null;
    if (ownedPool) await ownedPool.end().catch(() => undefined);
    ownedPool = null;
  };

  const capabilities: StoreCapabilities = Object.freeze({
    vectorSearch: 'exact',
    notifications: pglite ? 'process' : 'cluster',
    multiProcess: !pglite,
    durable,
  });
  const core: StoreCore = {
    db,
    gate: new Gate(),
    s,
    vector: null,
    channel,
    origin: newId(),
    emitter,
    broadcast: (change) => {
      if (!siblings) emitter.emit(change);
      else for (const e of siblings) e.emit(change);
    },
    capabilities,
    closed: false,
    indexedWidth: null,
    migrate: async () => {
      const support = await migrate(db, schema, vectorMode === 'auto');
      core.vector = vectorMode === 'auto' ? support : null;
      core.indexedWidth = null;
    },
    close: async () => {
      if (core.closed) return;
      core.closed = true;
      emitter.clear();
      siblings?.delete(emitter);
      await core.gate.exclusive(closeOwned);
    },
  };

  try {
    await core.migrate();
    if (channel) {
      if (listenConfig) {
        await listenOwned(listenConfig, channel);
      } else {
        listener = new ChangeListener(
          listenVia!.client,
          listenVia!.run,
          channel,
          core.origin,
          deliver,
        );
        await listener.start();
      }
    }
  } catch (e) {
    await closeOwned();
    throw driverFailure(e);
  }
  core.capabilities = Object.freeze({
    ...capabilities,
    vectorSearch: core.vector ? 'approximate' : 'exact',
  });
  siblings?.add(emitter);
  return new PostgresStore(core);
}
