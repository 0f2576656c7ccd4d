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

function initializer(
  name: string,
  create: () => Store | Promise<Store>,
  hooks: { beforeAll?: () => Promise<void>; afterAll?: () => Promise<void> } = {},
): CheckpointSaverTestInitializer<CairnSaver> {
  return {
    checkpointerName: `@cairn/langgraph on ${name}`,
    beforeAllTimeout: 30_000,
    ...hooks,
    createCheckpointer: async () => new CairnSaver(await create()),
    destroyCheckpointer: (saver) => saver.store.close(),
  };
}

function run(init: CheckpointSaverTestInitializer<CairnSaver>) {
  validate(init);
  deltaChannelHistoryTests(init);
}

run(initializer('the in-memory store', () => createMemoryStore()));
run(initializer('SQLite', () => createSqliteStore({ path: ':memory:' })));

let pglite: PGlite | undefined;
let n = 0;
run(
  initializer(
    'PGlite',
    () => createPostgresStore({ client: pglite! }, { schema: `langgraph_validation_${++n}` }),
    {
      beforeAll: async () => {
        pglite ??= new PGlite();
      },
      afterAll: async () => {
        await pglite?.close();
        pglite = undefined;
      },
    },
  ),
);

const skip = await postgresTestSkip('langgraph-validation');
if (!skip) {
  const schemas: string[] = [];
  run(
    initializer(
      'the PostgreSQL server',
      () => {
        const schema = freshSchema('langgraph_validation');
        schemas.push(schema);
        return createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema });
      },
      {
        afterAll: async () => {
          for (const s of schemas.splice(0)) await dropSchema(s);
        },
      },
    ),
  );
}
