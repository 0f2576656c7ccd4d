import type { CairnError } from '@cairn/core';
import type { StoreCapabilities } from '@cairn/store';
import {
  type Driver,
  type DriverSession,
  deadlocked,
  goneMeanwhile,
  lockTimeout,
  type SessionOptions,
  takenMeanwhile,
} from '@cairn/store/adapter';
import pg from 'pg';
import { listenForChanges } from './change-listener.js';
import { migrate } from './migrations.js';
import { PostgresSession, type SessionContext } from './postgres-session.js';
import { type PGliteLike, type PgClientLike, type Queryable, sqlState } from './queryable.js';

/** How the driver reaches the database, and what it opened itself (and so must close). */
export interface DriverConnection {
  db: Queryable;
  schema: string;
  /** The quoted schema. */
  s: string;
  channel: string;
  tryVector: boolean;
  pglite: boolean;
  durable: boolean;
  /** A pool: every session on a connection of its own, so transactions may run side by side. */
  pooled: boolean;
  /** A pool the store opened: ended on close. */
  ownedPool: pg.Pool | null;
  /** Where to LISTEN: a connection of the store's own (`config`), or the given client. */
  listen: { config: pg.ClientConfig } | { client: PgClientLike | PGliteLike };
}

/**
 * The Postgres driver: SQL over a pg pool, a pg client or PGlite. Write sessions are
 * transactions; read sessions run each statement on whatever connection is free.
 */
export class PostgresDriver implements Driver {
  readonly #c: DriverConnection;
  readonly #context: SessionContext;
  #onPayload: ((payload: string) => void) | null = null;
  #stopListening: ((unlisten: boolean) => Promise<void>) | null = null;
  #listenClient: pg.Client | null = null;
  #closing = false;

  constructor(c: DriverConnection) {
    this.#c = c;
    this.#context = {
      s: c.s,
      vector: null,
      indexedWidth: null,
      channel: c.channel,
    };
  }

  get capabilities(): StoreCapabilities {
    return Object.freeze({
      vectorSearch: this.#context.vector ? 'approximate' : 'exact',
      notifications: this.#c.pglite ? 'process' : 'cluster',
      multiProcess: !this.#c.pglite,
      concurrentTransactions: this.#c.pooled,
      durable: this.#c.durable,
    });
  }

  queuedSessions(): number {
    return this.#c.db.queued?.() ?? 0;
  }

  /** Migrates and starts listening; on failure releases what it opened and rethrows. */
  async open(): Promise<void> {
    try {
      await this.migrate();
      const l = this.#c.listen;
      if ('config' in l) await this.#listenOwned(l.config);
      else await this.#startListener(l.client, (sql) => this.#c.db.exec(sql));
    } catch (e) {
      await this.close();
      throw e;
    }
  }

  run<T>(fn: (session: DriverSession) => Promise<T>, options: SessionOptions): Promise<T> {
    if (!options.write) return fn(new PostgresSession(this.#c.db, this.#context));
    return this.#c.db.transaction((q) => fn(new PostgresSession(q, this.#context)));
  }

  async migrate(): Promise<void> {
    const support = await migrate(this.#c.db, this.#c.schema, this.#c.tryVector);
    this.#context.vector = this.#c.tryVector ? support : null;
    this.#context.indexedWidth = null;
  }

  /** A unique violation is another writer taking the same id between check and insert. */
  translateError(error: unknown): CairnError | undefined {
    if (sqlState(error) === '55P03') return lockTimeout(error);
    if (sqlState(error) === '40P01') return deadlocked(error);
    const { constraint, detail } = error as { constraint?: string; detail?: string };
    if (sqlState(error) === '23503') {
      // `Key (thread_id)=(…) is not present in table "threads".`: a row deleted meanwhile.
      const m = /^Key \((\w+)\)=\((.*)\) is not present/.exec(detail ?? '');
      return goneMeanwhile(error, m?.[1], m?.[2]);
    }
    return sqlState(error) === '23505' ? takenMeanwhile(error, { constraint }) : undefined;
  }

  listen(onPayload: (payload: string) => void): () => void {
    this.#onPayload = onPayload;
    return () => {
      this.#onPayload = null;
    };
  }

  async close(): Promise<void> {
    this.#closing = true;
    await this.#stopListening?.(this.#listenClient === null).catch(() => undefined);
    this.#stopListening = null;
    await this.#listenClient?.end().catch(() => undefined);
    this.#listenClient = null;
    await this.#c.ownedPool?.end().catch(() => undefined);
  }

  async #startListener(
    client: PgClientLike | PGliteLike,
    run: (sql: string) => Promise<unknown>,
  ): Promise<void> {
    const deliver = (payload: string) => this.#onPayload?.(payload);
    this.#stopListening = await listenForChanges(client, run, this.#context.channel, deliver);
  }

  /**
   * LISTENs on a connection of the store's own. Should it drop (a server restart, a
   * network blip), it reconnects after a second, until the store closes; changes made
   * while it was down are not heard.
   */
  async #listenOwned(config: pg.ClientConfig): Promise<void> {
    const client = new pg.Client(config);
    let retried = false;
    const retry = () => {
      if (retried || this.#closing) return;
      retried = true;
      if (this.#listenClient === client) this.#listenClient = null;
      client.end().catch(() => undefined);
      setTimeout(() => {
        if (!this.#closing) this.#listenOwned(config).catch(retry);
      }, 1000).unref();
    };
    client.on('error', retry);
    client.on('end', retry);
    await client.connect();
    this.#listenClient = client;
    await this.#startListener(client as unknown as PgClientLike, (sql) => client.query(sql));
  }
}
