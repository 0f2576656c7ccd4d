import type { Store } from '@cairn/store';
import { describeStoreConformance } from '@cairn/store/testing';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite/vector';
import { afterAll } from 'vitest';
import { createPostgresStore } from '../src/index.js';
import { freshSchema } from './support.js';

// The whole conformance suite on PGlite with pgvector (the HNSW path), one schema per store.
const db = await PGlite.create({ extensions: { vector } });
afterAll(() => db.close());
const schemas = new WeakMap<Store, string>();

describeStoreConformance({
  name: 'postgres (PGlite + pgvector)',
  create: async () => {
    const schema = freshSchema();
    const store = await createPostgresStore({ client: db }, { schema });
    schemas.set(store, schema);
    return store;
  },
  destroy: async (store) => {
    await store.close();
    await db.exec(`DROP SCHEMA IF EXISTS "${schemas.get(store)!}" CASCADE`);
  },
  reopen: async (store) => createPostgresStore({ client: db }, { schema: schemas.get(store)! }),
  capabilities: {
    vectorSearch: 'approximate',
    notifications: 'process',
    multiProcess: false,
    durable: false,
    concurrentTransactions: false,
  },
});
