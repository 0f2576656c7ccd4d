import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { localKeyring } from '@cairn/store';
import { createSqliteStore } from '@cairn/store-sqlite';
import { afterAll } from 'vitest';
import { describeConsolidationSuite } from './consolidation-suite.js';
import { describeMemorySuite } from './memory-suite.js';

describeMemorySuite('the SQLite store', {
  create: async () => createSqliteStore({ path: ':memory:' }),
});

// Memories and their embeddings sealed per tenant: search scored in the process.
const encryption = { keyring: localKeyring('the memory suite secret, 32 bytes or more') };
describeMemorySuite('the SQLite store with encryption', {
  create: async () => createSqliteStore({ path: ':memory:' }, { encryption }),
  cachesEmbeddings: false,
});

const dir = mkdtempSync(join(tmpdir(), 'cairn-memory-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
describeConsolidationSuite('the SQLite store', {
  create: async () => createSqliteStore({ path: ':memory:' }),
  // Two stores on one file: two processes' view of one database.
  twins: async () => {
    const path = join(dir, `twins-${++files}.db`);
    const first = createSqliteStore({ path });
    await first.migrate();
    return [first, createSqliteStore({ path })];
  },
});
