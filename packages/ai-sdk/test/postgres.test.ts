import { createPostgresStore } from '@cairn/store-postgres';
import {
  dropSchema,
  freshSchema,
  POSTGRES_TEST_URL,
  postgresTestSkip,
} from '@cairn/store-postgres/testing';
import { describeChatStore } from './chat-suite.js';

const schema = freshSchema('cairn_ai_sdk');

describeChatStore({
  name: 'the Postgres store (server)',
  skip: await postgresTestSkip('ai-sdk'),
  create: async () => createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema }),
  destroy: async (s) => {
    await s.close();
    await dropSchema(schema);
  },
});
