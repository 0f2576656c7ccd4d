/**
 * One process of the serve bench: with `cairn`, a `@cairn/server` on a Postgres schema
 * (argv: url, schema, runs at once; 0 serves the API only); with `langgraph-api`, the
 * LangGraph API server (`@langchain/langgraph-api`, in memory) with that many in-process
 * workers, its files in a directory of its own. Both serve the demo graph of
 * `@cairn/server`, print `ready <url>` and run until killed.
 */
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { createCairnServer } from '@cairn/server';
import { createPostgresStore } from '@cairn/store-postgres';

const [kind, a, b, c] = process.argv.slice(2);
const graph = createRequire(import.meta.url).resolve('@cairn/server/examples/agent.mjs');

if (kind === 'cairn') {
  const store = await createPostgresStore({ connectionString: a! }, { schema: b! });
  const server = await createCairnServer({
    store,
    graphs: { agent: './agent.mjs:graph' },
    cwd: dirname(graph),
    concurrency: Number(c),
  });
  const { url } = await server.listen(0);
  console.log(`ready ${url}`);
} else {
  // The reference keeps its state in files of the directory it runs in.
  process.chdir(a!);
  const { startServer } = (await import('@langchain/langgraph-api/server' as string)) as {
    startServer(o: Record<string, unknown>): Promise<{ host: string }>;
  };
  const port = Number(c);
  await startServer({
    port,
    nWorkers: Number(b),
    host: '127.0.0.1',
    cwd: a!,
    graphs: { agent: `${graph}:graph` },
  });
  console.log(`ready http://127.0.0.1:${port}`);
}
