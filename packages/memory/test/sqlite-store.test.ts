import { createSqliteStore } from '@cairn/store-sqlite';
import { describeMemorySuite } from './memory-suite.js';

describeMemorySuite('the SQLite store', {
  create: async () => createSqliteStore({ path: ':memory:' }),
});
