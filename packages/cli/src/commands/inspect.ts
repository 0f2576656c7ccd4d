import { hostname } from 'node:os';
import { isLoopback, startInspector } from '@cairn/inspector';
import { type OpenOptions, openStore, type Target } from '../database.js';
import type { Io } from '../output.js';

export interface InspectOptions {
  port?: number;
  host?: string;
  accessToken?: string;
  allowWrites: boolean;
  /** The keyring of an encrypted database. */
  open?: OpenOptions;
}

/**
 * Serves the inspector (`@cairn/inspector`) on the database until SIGINT or SIGTERM, then
 * closes it and the store. Read-only unless `allowWrites`.
 */
export async function inspect(t: Target, o: InspectOptions, io: Io): Promise<number> {
  const store = await openStore(t, 'current', o.open);
  try {
    const inspector = await startInspector({
      store,
      allowWrites: o.allowWrites,
      title: t.label,
      ...(o.port === undefined ? {} : { port: o.port }),
      ...(o.host === undefined ? {} : { host: o.host }),
      ...(o.accessToken === undefined ? {} : { accessToken: o.accessToken }),
    });
    const mode = o.allowWrites ? 'writes allowed' : 'read-only';
    if (inspector.accessToken === null)
      io.stdout.write(`inspecting ${t.label} at ${inspector.url} (${mode}); Ctrl-C stops it\n`);
    else {
      // A wildcard address is no address to open: the machine's name is.
      const wildcard = o.host === '0.0.0.0' || o.host === '::' || o.host === '[::]';
      const base = wildcard ? `http://${hostname()}:${inspector.port}` : inspector.url;
      io.stdout.write(
        `inspecting ${t.label} at ${base}/?token=${inspector.accessToken} (${mode}); Ctrl-C stops it\n`,
      );
      if (!isLoopback(o.host ?? '127.0.0.1'))
        io.stderr.write(
          `cairn: other machines can reach this inspector on ${o.host}: every request needs the token in that address; it is plain HTTP, so use it on a network you trust\n`,
        );
    }
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
    await inspector.close();
    return 0;
  } finally {
    await store.close();
  }
}
