import { createMemoryStore } from '../src/index.js';
import { describeFrontDoorConformance, describeStoreConformance } from '../src/testing/index.js';

const options = {
  name: 'memory',
  create: async () => createMemoryStore(),
  capabilities: {
    vectorSearch: 'exact',
    notifications: 'process',
    multiProcess: false,
    durable: false,
  },
} as const;

describeStoreConformance(options);
describeFrontDoorConformance(options);
