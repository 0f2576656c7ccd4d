/**
 * A worker process of the `schema-versions` suite: runs turns with one version of the state
 * schema (see ../schema-states.ts) on random threads of a shared Postgres store until its time
 * is up, and prints one JSON line (`WorkerResult`).
 *
 *   node schema-turns.js '<WorkerConfig as JSON>'
 */
import { readFileSync } from 'node:fs';
import { createPostgresStore } from '@cairn/store-postgres';
import { schemaTurn, type WorkerConfig, type WorkerResult } from '../schema-states.js';

const c = JSON.parse(process.argv[2]!) as WorkerConfig;
const store = await createPostgresStore(
  { connectionString: c.url },
  { schema: c.schema, maxConnections: 2 },
);
const threads = readFileSync(c.threadsFile, 'utf8').split('\n').filter(Boolean);
const owner = `v${c.version}-worker-${c.worker}`;
const result: WorkerResult = { turns: 0, refused: 0, errors: 0, errorSamples: [], tags: {} };
process.stdout.write('ready\n');
await new Promise<void>((resolve) => {
  process.stdin.on('data', (d) => {
    if (String(d).includes('go')) resolve();
  });
});
const deadline = Date.now() + c.seconds * 1000;
for (let n = 0; Date.now() < deadline; n++) {
  const threadId = threads[Math.floor(Math.random() * threads.length)]!;
  const tag = `${owner}-${n}`;
  try {
    if ((await schemaTurn(store, c.version, threadId, owner, tag, n)) === 'refused') {
      result.refused++;
      continue;
    }
    result.turns++;
    result.tags[threadId] = [...(result.tags[threadId] ?? []), tag];
  } catch (e) {
    result.errors++;
    if (result.errorSamples.length < 5) result.errorSamples.push(String((e as Error).message));
  }
}
await store.close();
// Exit once the line is out: a pipe takes a long line in parts.
process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
