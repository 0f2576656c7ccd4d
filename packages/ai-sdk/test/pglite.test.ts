import { createPostgresStore } from '@cairn/store-postgres';
import { PGlite } from '@electric-sql/pglite';
import { describeChatStore } from './chat-suite.js';

let db: PGlite | undefined;

describeChatStore({
  name: 'the Postgres store (PGlite)',
  create: async () => {
    db = new PGlite();
    return createPostgresStore({ client: db });
  },
  destroy: async (s) => {
    await s.close();
    await db?.close();
  },
});
