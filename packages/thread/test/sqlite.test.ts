import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '@cairn/store-sqlite';
import { describeThreadEngine } from './engine-suite.js';

const dir = mkdtempSync(join(tmpdir(), 'cairn-thread-'));

describeThreadEngine({
  name: 'the SQLite store (file)',
  create: async () => createSqliteStore({ path: join(dir, 'engine.db') }),
  destroy: async (s) => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  },
});
