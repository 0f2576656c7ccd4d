import { createMemoryStore } from '@cairn/store';
import { describeMemorySuite } from './memory-suite.js';

describeMemorySuite('the in-memory store', { create: async () => createMemoryStore() });
