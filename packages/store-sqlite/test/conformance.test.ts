import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@cairn/core';
import type { Store } from '@cairn/store';
import { describeStoreConformance } from '@cairn/store/testing';
import { afterAll } from 'vitest';
import { createSqliteStore } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'cairn-conformance-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const files = new WeakMap<Store, string>();

describeStoreConformance({
  name: 'sqlite (temp file)',
  create: async () => {
    const path = join(dir, `${newId()}.db`);
    const store = createSqliteStore({ path });
    files.set(store, path);
    return store;
  },
  destroy: async (store) => {
    await store.close();
    for (const suffix of ['', '-wal', '-shm'])
      rmSync(`${files.get(store)!}${suffix}`, { force: true });
  },
  reopen: async (store) => createSqliteStore({ path: files.get(store)! }),
  capabilities: {
    vectorSearch: 'approximate',
    notifications: 'process',
    multiProcess: true,
    durable: true,
    concurrentTransactions: false,
  },
});

// The exact scan, as a store opened with `vectorSearch: 'exact'` does it.
describeStoreConformance({
  name: 'sqlite (:memory:, exact vector search)',
  create: async () => createSqliteStore({ path: ':memory:' }, { vectorSearch: 'exact' }),
  capabilities: {
    vectorSearch: 'exact',
    notifications: 'process',
    multiProcess: false,
    durable: false,
    concurrentTransactions: false,
  },
});
