import { startInspector } from '@cairn/inspector';
import { openStore, type Target } from '../database.js';
import type { Io } from '../output.js';

export interface InspectOptions {
  port?: number;
  host?: string;
  allowWrites: boolean;
}

/**
 * Serves the inspector (`@cairn/inspector`) on the database until SIGINT or SIGTERM, then
 * closes it and the store. Read-only unless `allowWrites`.
 */
export async function inspect(t: Target, o: InspectOptions, io: Io): Promise<number> {
  const store = await openStore(t, 'current');
  try {
    const inspector = await startInspector({
      store,
      allowWrites: o.allowWrites,
      title: t.label,
      ...(o.port === undefined ? {} : { port: o.port }),
      ...(o.host === undefined ? {} : { host: o.host }),
    });
    io.stdout.write(
      `inspecting ${t.label} at ${inspector.url} (${o.allowWrites ? 'writes allowed' : 'read-only'}); Ctrl-C stops it\n`,
    );
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
