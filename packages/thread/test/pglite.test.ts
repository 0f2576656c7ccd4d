import { pgliteTestStore } from '@cairn/store-postgres/testing';
import { describeThreadEngine } from './engine-suite.js';

// PGlite runs in this process: fewer stored threads keep its schema-version test fast.
describeThreadEngine(pgliteTestStore(), { storedThreads: 8 });
