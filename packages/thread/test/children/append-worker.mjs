// One writer process of the multi-process test: appends `count` distinct items to the
// thread state with `appendUnique`, one update at a time, through the built packages.
import { defineState, field, reducers } from '@cairn/core';
import { openThread } from '@cairn/thread';

const [kind, target, schemaName, threadId, worker, count] = process.argv.slice(2);
const Items = defineState({ items: field({ reducer: reducers.appendUnique, default: () => [] }) });

async function openStore() {
  if (kind === 'sqlite') {
    const { createSqliteStore } = await import('@cairn/store-sqlite');
    return createSqliteStore({ path: target });
  }
  const { createPostgresStore } = await import('@cairn/store-postgres');
  return createPostgresStore(
    { connectionString: target },
    { schema: schemaName, maxConnections: 3 },
  );
}

const store = await openStore();
const thread = await openThread(store, { schema: Items, threadId, maxRetries: 200 });
for (let i = 0; i < Number(count); i++) {
  await thread.update({ items: [`w${worker}-${i}`] });
}
await thread.close();
await store.close();
