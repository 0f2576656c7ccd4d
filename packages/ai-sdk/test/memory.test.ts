import { createMemoryStore } from '@cairn/store';
import { describeChatStore } from './chat-suite.js';

describeChatStore({
  name: 'the in-memory store',
  create: async () => createMemoryStore(),
  destroy: (s) => s.close(),
});
