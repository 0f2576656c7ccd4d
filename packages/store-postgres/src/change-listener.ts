import type { StoreChange } from '@cairn/store';
import { ident } from './migrations.js';
import { isPGlite, type PGliteLike, type PgClientLike } from './queryable.js';

/** The NOTIFY payload: one change, and the store instance that made it. */
export function encodeChange(origin: string, change: StoreChange): string {
  const { threadId: t, kind: k, branchId: b } = change;
  return JSON.stringify({ o: origin, t, k, ...(b ? { b } : {}) });
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
  const h = (msg: { channel: string; payload?: string | undefined }) =>
    handler(msg.channel, msg.payload);
  client.on('notification', h);
  return () =>
    client.off ? client.off('notification', h) : client.removeListener?.('notification', h);
}

/**
 * LISTENs on the schema's channel over one connection and hands other store instances'
 * changes (from any process, or from other stores on the same PGlite) to `deliver`;
 * this instance's own (`origin`) are delivered locally at commit, so they are skipped.
 * `run` executes LISTEN/UNLISTEN (through the store's queue when the connection is
 * shared). Returns the stop, which UNLISTENs when asked to (a pg connection that stays
 * open for its owner; a PGlite instance is one session for every store on it, so it
 * keeps listening).
 */
export async function listenForChanges(
  client: PgClientLike | PGliteLike,
  run: (sql: string) => Promise<unknown>,
  channel: string,
  origin: string,
  deliver: (change: StoreChange) => void,
): Promise<(unlisten: boolean) => Promise<void>> {
  const off = onNotification(client, (ch, payload) => {
    const decoded = ch === channel && payload ? decodeChange(payload) : null;
    if (decoded && decoded.origin !== origin) deliver(decoded.change);
  });
  await run(`LISTEN ${ident(channel)}`);
  return async (unlisten) => {
    off();
    if (unlisten && !isPGlite(client))
      await run(`UNLISTEN ${ident(channel)}`).catch(() => undefined);
  };
}
