import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '@cairn/store-sqlite';
import { describeChatStore } from './chat-suite.js';

const dir = mkdtempSync(join(tmpdir(), 'cairn-ai-sdk-'));

describeChatStore({
  name: 'the SQLite store (file)',
  create: async () => createSqliteStore({ path: join(dir, 'chats.db') }),
  destroy: async (s) => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  },
});
