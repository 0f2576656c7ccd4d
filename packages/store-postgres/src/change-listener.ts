import type { StoreChange } from '@cairn/store';
import { ident } from './migrations.js';
import type { PgClientLike } from './queryable.js';

type Notification = { channel: string; payload?: string | undefined };

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

/**
 * LISTENs on the schema's channel over one connection and hands other store instances'
 * changes (from any process) to `deliver`. Changes this instance made are delivered
 * locally at commit, so its own notifications are skipped here.
 */
export class ChangeListener {
  #client: PgClientLike;
  #run: (sql: string) => Promise<unknown>;
  #channel: string;
  #origin: string;
  #handler: (msg: Notification) => void;

  /** `run` executes LISTEN/UNLISTEN (through the store's queue when the connection is shared). */
  constructor(
    client: PgClientLike,
    run: (sql: string) => Promise<unknown>,
    channel: string,
    origin: string,
    deliver: (change: StoreChange) => void,
  ) {
    this.#client = client;
    this.#run = run;
    this.#channel = channel;
    this.#origin = origin;
    this.#handler = (msg) => {
      if (msg.channel !== this.#channel || !msg.payload) return;
      const decoded = decodeChange(msg.payload);
      if (decoded && decoded.origin !== this.#origin) deliver(decoded.change);
    };
  }

  async start(): Promise<void> {
    this.#client.on('notification', this.#handler);
    await this.#run(`LISTEN ${ident(this.#channel)}`);
  }

  /** Stops listening; `unlisten` when the connection stays open for someone else. */
  async stop(unlisten: boolean): Promise<void> {
    const c = this.#client;
    if (c.off) c.off('notification', this.#handler);
    else c.removeListener?.('notification', this.#handler);
    if (unlisten) await this.#run(`UNLISTEN ${ident(this.#channel)}`).catch(() => undefined);
  }
}
