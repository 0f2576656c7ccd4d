import { existsSync } from 'node:fs';
import { createCairnServer, loadAuth, loadConfig, type ServerAuth } from '@cairn/server';
import { CliError, type OpenOptions, openStore, type Target } from '../database.js';
import type { Io } from '../output.js';

export interface ServeOptions {
  config: string;
  port: number;
  host: string;
  concurrency: number;
  leaseMs?: number;
  token?: string;
  corsOrigins: string[];
  testEndpoints: boolean;
  /** The keyring of an encrypted database. */
  open?: OpenOptions;
}

/**
 * Serves the graphs of a `langgraph.json` over the LangGraph Agent Protocol on the
 * database until SIGINT or SIGTERM, then stops the worker (its runs go back to the
 * queue) and closes the store.
 */
export async function serve(t: Target, o: ServeOptions, io: Io): Promise<number> {
  if (!existsSync(o.config))
    throw new CliError(`no such file: ${o.config} (a langgraph.json naming the graphs)`);
  const config = loadConfig(o.config);
  for (const [k, v] of Object.entries(config.env)) process.env[k] ??= v;
  let graphConfig: Record<string, Record<string, unknown>> | undefined;
  if (process.env.LANGGRAPH_CONFIG) {
    try {
      graphConfig = JSON.parse(process.env.LANGGRAPH_CONFIG);
    } catch {
      throw new CliError('LANGGRAPH_CONFIG is not JSON');
    }
  }
  const auth: ServerAuth | undefined = o.token
    ? { tokens: { [o.token]: 'default' } }
    : config.authPath
      ? await loadAuth(config.authPath, config.cwd).catch((e: Error) => {
          throw new CliError(e.message);
        })
      : undefined;
  const loopback = /^(localhost|127(\.\d{1,3}){3}|::1)$/.test(o.host);
  if (!loopback && !auth && process.env.CAIRN_SERVE_INSECURE !== '1')
    throw new CliError(
      `--host ${o.host} lets other machines call the server: set --token (or CAIRN_SERVE_TOKEN) or auth.path in langgraph.json, or CAIRN_SERVE_INSECURE=1 to serve without auth`,
    );
  const store = await openStore(t, t.kind === 'sqlite' ? 'create' : 'migrate', o.open);
  try {
    const server = await createCairnServer({
      store,
      graphs: config.graphs,
      cwd: config.cwd,
      concurrency: o.concurrency,
      corsOrigins: o.corsOrigins,
      testEndpoints: o.testEndpoints,
      ...(auth ? { auth } : {}),
      ...(graphConfig ? { graphConfig } : {}),
      ...(o.leaseMs === undefined ? {} : { leaseMs: o.leaseMs }),
    });
    const { url } = await server.listen(o.port, o.host);
    io.stdout.write(
      `serving ${Object.keys(config.graphs).join(', ')} on ${t.label} at ${url}${auth ? ' (auth required)' : ''}; Ctrl-C stops it\n`,
    );
    await new Promise<void>((done) => {
      process.once('SIGINT', done);
      process.once('SIGTERM', done);
    });
    await server.close();
    return 0;
  } finally {
    await store.close();
  }
}
