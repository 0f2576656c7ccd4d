import { ident } from './migrations.js';
import { isPGlite, type PGliteLike, type PgClientLike } from './queryable.js';

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
 * LISTENs on the schema's channel over one connection and hands every payload on it
 * (from any process, or from other stores on the same PGlite) to `deliver`. `run`
 * executes LISTEN/UNLISTEN (through the store's queue when the connection is shared).
 * Returns the stop, which UNLISTENs when asked to (a pg connection that stays open for
 * its owner; a PGlite instance is one session for every store on it, so it keeps
 * listening).
 */
export async function listenForChanges(
  client: PgClientLike | PGliteLike,
  run: (sql: string) => Promise<unknown>,
  channel: string,
  deliver: (payload: string) => void,
): Promise<(unlisten: boolean) => Promise<void>> {
  const off = onNotification(client, (ch, payload) => {
    if (ch === channel && payload) deliver(payload);
  });
  await run(`LISTEN ${ident(channel)}`);
  return async (unlisten) => {
    off();
    if (unlisten && !isPGlite(client))
      await run(`UNLISTEN ${ident(channel)}`).catch(() => undefined);
  };
}
