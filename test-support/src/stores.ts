import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestStoreKind, testStoreKind } from '@cairn/store-postgres/testing';
import { createSqliteStore } from '@cairn/store-sqlite';

/** The SQLite store on a file of its own, in a new temporary directory, for each `create`. */
export function sqliteTestStore(): TestStoreKind {
  return testStoreKind('the SQLite store (file)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-test-'));
    return {
      store: createSqliteStore({ path: join(dir, 'test.db') }),
      dispose: () => rmSync(dir, { recursive: true, force: true }),
    };
  });
}
