import { createPostgresStore } from '@cairn/store-postgres';
import {
  dropSchema,
  freshSchema,
  POSTGRES_TEST_URL,
  postgresTestSkip,
} from '@cairn/store-postgres/testing';
import { describeSession } from './session-suite.js';

const schema = freshSchema('cairn_agents');

describeSession({
  name: 'the Postgres store (server)',
  skip: await postgresTestSkip('openai-agents'),
  create: async () => createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema }),
  destroy: async (s) => {
    await s.close();
    await dropSchema(schema);
  },
});
