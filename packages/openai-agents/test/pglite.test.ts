import { createPostgresStore } from '@cairn/store-postgres';
import { PGlite } from '@electric-sql/pglite';
import { describeSession } from './session-suite.js';

let db: PGlite | undefined;

describeSession({
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
