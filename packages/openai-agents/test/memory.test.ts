import { createMemoryStore } from '@cairn/store';
import { describeSession } from './session-suite.js';

describeSession({
  name: 'the in-memory store',
  create: async () => createMemoryStore(),
  destroy: (s) => s.close(),
});
