import { pgliteTestStore } from '@cairn/store-postgres/testing';
import { describeThreadEngine } from './engine-suite.js';

describeThreadEngine(pgliteTestStore());
