import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '@cairn/store-sqlite';
import { describeSession } from './session-suite.js';

const dir = mkdtempSync(join(tmpdir(), 'cairn-agents-'));

describeSession({
  name: 'the SQLite store (file)',
  create: async () => createSqliteStore({ path: join(dir, 'sessions.db') }),
  destroy: async (s) => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  },
});
