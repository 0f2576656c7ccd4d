import { createCairnServer } from '@cairn/server';
import { createSqliteStore } from '@cairn/store-sqlite';
import { Client } from '@langchain/langgraph-sdk';

const store = createSqliteStore({ path: '/tmp/h.db' });
const server = await createCairnServer({
  store,
  graphs: { agent: './test/graphs/agent.mjs:graph' },
});
const { url } = await server.listen(0);
const client = new Client({ apiUrl: url });
const t = await client.threads.create();
await client.runs.wait(t.thread_id, 'agent', {
  input: { messages: [{ role: 'user', content: 'hi' }] },
  metadata: { run_metadata: 'x' },
});
const h = await client.threads.getHistory(t.thread_id);
console.log('history', h.length, JSON.stringify(h[0].metadata));
const f = await client.threads.getHistory(t.thread_id, { metadata: { run_metadata: 'x' } });
console.log('filtered', f.length);
await server.close();
await store.close();
