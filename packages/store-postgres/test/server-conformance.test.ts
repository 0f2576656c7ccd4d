import type { Store } from '@cairn/store';
import { describeStoreConformance } from '@cairn/store/testing';
import { createPostgresStore } from '../src/index.js';
import { describeServer, dropSchema, freshSchema, POSTGRES_URL } from './support.js';

// The whole conformance suite on the PostgreSQL server: the exact vector path (no
// pgvector there), LISTEN/NOTIFY notifications. Each store gets a schema of its own.
describeServer('PostgreSQL server', () => {
  const schemas = new WeakMap<Store, string>();
  describeStoreConformance({
    name: 'postgres (server)',
    create: async () => {
      const schema = freshSchema();
      const store = await createPostgresStore(
        { connectionString: POSTGRES_URL },
        { schema, maxConnections: 4 },
      );
      schemas.set(store, schema);
      return store;
    },
    destroy: async (store) => {
      await store.close();
      await dropSchema(schemas.get(store)!);
    },
    reopen: async (store) =>
      createPostgresStore(
        { connectionString: POSTGRES_URL },
        { schema: schemas.get(store)!, maxConnections: 4 },
      ),
    capabilities: {
      vectorSearch: 'exact',
      notifications: 'cluster',
      multiProcess: true,
      durable: true,
      concurrentTransactions: true,
    },
  });
});
