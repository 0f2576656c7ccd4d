// What a LangGraph turn costs on the Postgres server, in round trips: the bench's workers turn
// (a run lease taken and released on the Cairn store, the input and three nodes: four
// checkpoints, four tasks' writes) on CairnSaver against the same turn on PostgresSaver.
import { createRequire } from 'node:module';
import type { Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import {
  dropSchema,
  freshSchema,
  POSTGRES_TEST_URL,
  postgresTestSkip,
  roundTrips,
} from '@cairn/store-postgres/testing';
import { HumanMessage } from '@langchain/core/messages';
import type { BaseCheckpointSaver } from '@langchain/langgraph';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { CairnSaver } from '../src/index.js';
import { turnGraph } from './turn-graph.js';

// The pg the Postgres store uses (not a dependency of this package).
const storePostgres = createRequire(import.meta.url).resolve('@cairn/store-postgres');
const pg = createRequire(storePostgres)('pg') as {
  Pool: new (config: {
    connectionString: string;
    max: number;
  }) => ConstructorParameters<typeof PostgresSaver>[0];
};

/** Round trips of a thread's second turn (its first made the thread). */
async function secondTurn(store: Store, saver: BaseCheckpointSaver): Promise<number> {
  const graph = turnGraph(saver);
  const turn = async () => {
    await store.acquireLease({ key: 'run:t', owner: 'w', ttlMs: 30_000, waitMs: 10_000 });
    await graph.invoke(
      { messages: [new HumanMessage('question')] },
      { configurable: { thread_id: 't' } },
    );
    await store.releaseLease('run:t', 'w');
  };
  await turn();
  return roundTrips(turn);
}

const skip = await postgresTestSkip('langgraph round trips');
const schemas: string[] = [];
afterAll(async () => {
  for (const s of schemas) await dropSchema(s);
});

describe.skipIf(skip)('a LangGraph turn on the PostgreSQL server', () => {
  it('takes fewer round trips on CairnSaver than on PostgresSaver', async () => {
    const schema = freshSchema('langgraph_trips');
    schemas.push(schema, `${schema}_lg`);
    const store = await createPostgresStore(
      { connectionString: POSTGRES_TEST_URL },
      { schema, maxConnections: 2 },
    );
    const pool = new pg.Pool({ connectionString: POSTGRES_TEST_URL, max: 2 });
    try {
      const pgSaver = new PostgresSaver(pool, undefined, { schema: `${schema}_lg` });
      await pgSaver.setup();
      const theirs = await secondTurn(store, pgSaver);
      const ours = await secondTurn(store, new CairnSaver(store));
      // 78 before CairnSaver wrote against the log version it holds, 43 before it stored a
      // checkpoint with the writes that arrived with it (30 since); PostgresSaver: 49.
      expect(ours).toBeLessThan(theirs);
      expect(ours).toBeLessThanOrEqual(30);
    } finally {
      await pool.end();
      await store.close();
    }
  });
});
