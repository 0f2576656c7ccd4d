import { createMemoryStore } from '../src/index.js';
import { describeStoreConformance } from '../src/testing/index.js';

describeStoreConformance({
  name: 'memory',
  create: async () => createMemoryStore(),
  capabilities: {
    vectorSearch: 'exact',
    notifications: 'process',
    multiProcess: false,
    durable: false,
    concurrentTransactions: false,
  },
});
