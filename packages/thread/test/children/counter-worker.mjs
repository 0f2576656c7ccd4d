// One worker process of the contention test: `turns` turns, each saving a message on its
// own thread and adding 1 to a counter on one shared thread. With maxRetries: 1 an update
// gets one optimistic attempt and one under the branch's lock: a refused update fails it.
// Prints { latencies } (ms per turn) as JSON.
import { defineState, field } from '@cairn/core';
import { createPostgresStore } from '@cairn/store-postgres';
import { openThread } from '@cairn/thread';

const [target, schemaName, sharedId, worker, turns] = process.argv.slice(2);
const Counter = defineState({
  counter: field({ reducer: (a, b) => (a ?? 0) + (b ?? 0), default: () => 0 }),
});

const store = await createPostgresStore(
  { connectionString: target },
  { schema: schemaName, maxConnections: 2 },
);
const shared = await openThread(store, { schema: Counter, threadId: sharedId, maxRetries: 1 });
const own = await openThread(store, { schema: Counter, maxRetries: 1 });
const latencies = [];
for (let i = 0; i < Number(turns); i++) {
  const start = performance.now();
  own.add({ role: 'user', data: `w${worker} turn ${i}` });
  await own.save();
  await shared.update({ counter: 1 });
  shared.add({ role: 'assistant', data: `w${worker}-${i}` });
  await shared.save();
  latencies.push(performance.now() - start);
}
await shared.close();
await own.close();
await store.close();
process.stdout.write(JSON.stringify({ latencies }));
