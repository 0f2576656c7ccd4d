import { createPostgresStore } from '@cairn/store-postgres';
import { describeThreadEngine } from './engine-suite.js';
import { dropSchema, freshSchema, POSTGRES_URL, SKIP_SERVER } from './postgres-support.js';

const schema = freshSchema();

describeThreadEngine({
  name: 'the Postgres store (server)',
  skip: SKIP_SERVER,
  create: () => createPostgresStore({ connectionString: POSTGRES_URL }, { schema }),
  destroy: async (s) => {
    await s.close();
    await dropSchema(schema);
  },
});
