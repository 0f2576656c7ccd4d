import { createPostgresStore } from '@cairn/store-postgres';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite/vector';
import { afterAll } from 'vitest';
import { describeConsolidationSuite } from './consolidation-suite.js';
import { describeMemorySuite } from './memory-suite.js';

// One in-process Postgres (with pgvector) for the file; every store gets its own schema.
const db = new PGlite({ extensions: { vector } });
let n = 0;
afterAll(async () => {
  await db.close();
});

describeMemorySuite('the Postgres store on PGlite (pgvector)', {
  create: () => createPostgresStore({ client: db }, { schema: `memory_test_${++n}` }),
  timeoutMs: 30_000,
});

describeConsolidationSuite('the Postgres store on PGlite (pgvector)', {
  create: () => createPostgresStore({ client: db }, { schema: `memory_test_${++n}` }),
  twins: async () => {
    const schema = `memory_test_${++n}`;
    const first = await createPostgresStore({ client: db }, { schema });
    await first.migrate();
    return [first, await createPostgresStore({ client: db }, { schema })];
  },
  timeoutMs: 30_000,
});
