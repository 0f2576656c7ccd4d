import { createMemoryStore } from '@cairn/store';
import { describeThreadEngine } from './engine-suite.js';

describeThreadEngine({
  name: 'the in-memory store',
  create: async () => createMemoryStore(),
  destroy: (s) => s.close(),
});
