// LangGraph's official checkpointer suite on CairnSaver, over every Cairn store. Run with
// `vitest run --globals` (the suite's specs use global describe/it/expect). The names are
// Cairn's own: the suite skips a test for three stock saver names.
import { CairnSaver } from '@cairn/langgraph';
import { createMemoryStore, type Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import {
  dropSchema,
  freshSchema,
  POSTGRES_TEST_URL,
  postgresTestSkip,
} from '@cairn/store-postgres/testing';
import { createSqliteStore } from '@cairn/store-sqlite';
import { PGlite } from '@electric-sql/pglite';
import {
  type CheckpointSaverTestInitializer,
  deltaChannelHistoryTests,
  validate,
} from '@langchain/langgraph-checkpoint-validation';

/** Every instance must see empty storage: a database kept for the run is emptied after each one. */
async function emptied(store: Store): Promise<void> {
  for (;;) {
    const { items } = await store.listThreads({ limit: 1000 });
    if (items.length === 0) break;
    for (const t of items) await store.deleteThread(t.id);
  }
  await store.close();
}

function initializer(
  name: string,
  create: () => Store | Promise<Store>,
  hooks: { beforeAll?: () => Promise<void>; afterAll?: () => Promise<void> } = {},
  keep = false,
): CheckpointSaverTestInitializer<CairnSaver> {
  return {
    checkpointerName: `@cairn/langgraph on ${name}`,
    beforeAllTimeout: 120_000,
    ...hooks,
    createCheckpointer: async () => new CairnSaver(await create()),
    destroyCheckpointer: (saver) => (keep ? emptied(saver.store) : saver.store.close()),
  };
}

function run(init: CheckpointSaverTestInitializer<CairnSaver>) {
  validate(init);
  deltaChannelHistoryTests(init);
}

run(initializer('the in-memory store', () => createMemoryStore()));
run(initializer('SQLite', () => createSqliteStore({ path: ':memory:' })));

// The Postgres stores share one schema for the run (migrating a new schema per test is slow).
let pglite: PGlite | undefined;
run(
  initializer(
    'PGlite',
    () => createPostgresStore({ client: pglite! }, { schema: 'langgraph_validation' }),
    {
      beforeAll: async () => {
        pglite ??= new PGlite();
        await pglite.waitReady;
      },
      afterAll: async () => {
        await pglite?.close();
        pglite = undefined;
      },
    },
    true,
  ),
);

const skip = await postgresTestSkip('langgraph-validation');
if (!skip) {
  const schema = freshSchema('langgraph_validation');
  run(
    initializer(
      'the PostgreSQL server',
      () => createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema }),
      { afterAll: () => dropSchema(schema) },
      true,
    ),
  );
}
