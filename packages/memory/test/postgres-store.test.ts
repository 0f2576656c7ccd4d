import { createPostgresStore } from '@cairn/store-postgres';
import {
  dropSchema,
  freshSchema,
  POSTGRES_TEST_URL,
  postgresTestSkip,
} from '@cairn/store-postgres/testing';
import { afterAll, describe } from 'vitest';
import { describeConsolidationSuite } from './consolidation-suite.js';
import { describeMemorySuite } from './memory-suite.js';

// The exact-scan vector path (no pgvector on this server) and tsvector keyword search.
const skip = await postgresTestSkip('memory');
const schemas: string[] = [];
afterAll(async () => {
  if (!skip) for (const s of schemas) await dropSchema(s);
});

describe.skipIf(skip)('PostgreSQL server', () => {
  describeMemorySuite('the Postgres store on a server', {
    create: async () => {
      const schema = freshSchema('memory_test');
      schemas.push(schema);
      return createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema });
    },
    timeoutMs: 30_000,
  });
  const fresh = () => {
    const schema = freshSchema('memory_consolidation');
    schemas.push(schema);
    return schema;
  };
  describeConsolidationSuite('the Postgres store on a server', {
    create: async () =>
      createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema: fresh() }),
    twins: async () => {
      const schema = fresh();
      const first = await createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema });
      await first.migrate();
      return [
        first,
        await createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema }),
      ];
    },
    timeoutMs: 30_000,
  });
});
