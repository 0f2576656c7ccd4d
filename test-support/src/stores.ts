import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Store } from '@cairn/store';
import type { TestStoreKind } from '@cairn/store-postgres/testing';
import { createSqliteStore } from '@cairn/store-sqlite';

/** The SQLite store on a file of its own, in a new temporary directory, for each `create`. */
export function sqliteTestStore(): TestStoreKind {
  const dirs = new Map<Store, string>();
  return {
    name: 'the SQLite store (file)',
    async create() {
      const dir = mkdtempSync(join(tmpdir(), 'cairn-test-'));
      const store = createSqliteStore({ path: join(dir, 'test.db') });
      dirs.set(store, dir);
      return store;
    },
    async destroy(store) {
      await store.close();
      const dir = dirs.get(store);
      dirs.delete(store);
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
}
