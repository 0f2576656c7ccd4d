import type { StoreChange } from '@cairn/store';
import { ident } from './migrations.js';
import { isPGlite, type PGliteLike, type PgClientLike } from './queryable.js';

/** The NOTIFY payload: one change, and the store instance that made it. */
export function encodeChange(origin: string, change: StoreChange): string {
  return JSON.stringify({
    o: origin,
    t: change.threadId,
    k: change.kind,
    ...(change.branchId ? { b: change.branchId } : {}),
  });
}

function decodeChange(payload: string): { origin: string; change: StoreChange } | null {
  try {
    const p = JSON.parse(payload) as { o?: unknown; t?: unknown; k?: unknown; b?: unknown };
    if (typeof p.o !== 'string' || typeof p.t !== 'string' || typeof p.k !== 'string') return null;
    const change = { threadId: p.t, kind: p.k as StoreChange['kind'] } as StoreChange;
    if (typeof p.b === 'string') change.branchId = p.b;
    return { origin: p.o, change };
  } catch {
    return null;
  }
}

type Handler = (channel: string, payload: string | undefined) => void;

/** Adds a notification handler to a pg client or PGlite; returns its removal. */
function onNotification(client: PgClientLike | PGliteLike, handler: Handler): () => void {
  if (isPGlite(client)) return client.onNotification(handler);
  const h = (msg: { channel: string; payload?: string }) => handler(msg.channel, msg.payload);
  client.on('notification', h);
  return () =>
    client.off ? client.off('notification', h) : client.removeListener?.('notification', h);
}

/**
 * LISTENs on the schema's channel over one connection and hands other store instances'
 * changes (from any process, or from other stores on the same PGlite) to `deliver`.
 * Changes this instance made are delivered locally at commit, so its own are skipped.
 */
export class ChangeListener {
  #client: PgClientLike | PGliteLike;
  #run: (sql: string) => Promise<unknown>;
  #channel: string;
  #off: (() => void) | null = null;

  /** `run` executes LISTEN/UNLISTEN (through the store's queue when the connection is shared). */
  constructor(
    client: PgClientLike | PGliteLike,
    run: (sql: string) => Promise<unknown>,
    channel: string,
    origin: string,
    deliver: (change: StoreChange) => void,
  ) {
    this.#client = client;
    this.#run = run;
    this.#channel = channel;
    const handler: Handler = (ch, payload) => {
      if (ch !== channel || !payload) return;
      const decoded = decodeChange(payload);
      if (decoded && decoded.origin !== origin) deliver(decoded.change);
    };
    this.#off = onNotification(client, handler);
  }

  start(): Promise<unknown> {
    return this.#run(`LISTEN ${ident(this.#channel)}`);
  }

  /**
   * Stops listening; UNLISTENs a pg connection that stays open for its owner (a PGlite
   * instance is one session for every store on it, so it keeps listening).
   */
  async stop(unlisten: boolean): Promise<void> {
    this.#off?.();
    this.#off = null;
    if (unlisten && !isPGlite(this.#client))
      await this.#run(`UNLISTEN ${ident(this.#channel)}`).catch(() => undefined);
  }
}
