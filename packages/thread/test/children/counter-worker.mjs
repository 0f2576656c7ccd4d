// One worker process of the contention tests: `turns` turns. Mode `race` (no lease): save a
// message on its own thread, add 1 to a counter on one shared thread and save a message
// there. Mode `leased`: a turn on the shared thread holding its run lease (taken again after
// a short wait while another worker holds it): save a question, add 1 to the counter, set
// `last`, save a reply, release. With maxRetries: 1 an update gets one optimistic attempt
// and one under the branch's lock: a refused update fails the process.
// Prints { latencies } (ms per turn) as JSON.
import { setTimeout as sleep } from 'node:timers/promises';
import { defineState, field, isCairnError } from '@cairn/core';
import { createPostgresStore } from '@cairn/store-postgres';
import { openThread } from '@cairn/thread';

const [target, schemaName, sharedId, worker, turns, mode = 'race'] = process.argv.slice(2);
const Counter = defineState({
  counter: field({ reducer: (a, b) => (a ?? 0) + (b ?? 0), default: () => 0 }),
  last: field(),
});

const store = await createPostgresStore(
  { connectionString: target },
  { schema: schemaName, maxConnections: 2 },
);
const shared = await openThread(store, { schema: Counter, threadId: sharedId, maxRetries: 1 });
const own = mode === 'race' ? await openThread(store, { schema: Counter, maxRetries: 1 }) : null;

async function acquireRun() {
  for (;;) {
    try {
      return await shared.acquireRun({ owner: `w${worker}`, ttlMs: 60_000 });
    } catch (e) {
      if (!isCairnError(e, 'CONFLICT')) throw e;
      await sleep(1 + Math.random() * 3);
    }
  }
}

const latencies = [];
for (let i = 0; i < Number(turns); i++) {
  const start = performance.now();
  if (mode === 'leased') {
    const run = await acquireRun();
    shared.add({ role: 'user', data: `w${worker}-${i}?` });
    await shared.save();
    await shared.update({ counter: 1 });
    await shared.update({ last: `w${worker}-${i}` });
    shared.add({ role: 'assistant', data: `w${worker}-${i}` });
    await shared.save();
    await run.release({ result: 'completed' });
  } else {
    own.add({ role: 'user', data: `w${worker} turn ${i}` });
    await own.save();
    await shared.update({ counter: 1 });
    shared.add({ role: 'assistant', data: `w${worker}-${i}` });
    await shared.save();
  }
  latencies.push(performance.now() - start);
}
await shared.close();
await own?.close();
await store.close();
process.stdout.write(JSON.stringify({ latencies }));
