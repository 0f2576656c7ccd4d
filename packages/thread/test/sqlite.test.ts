import { sqliteTestStore } from '@cairn/test-support';
import { describeThreadEngine } from './engine-suite.js';

describeThreadEngine(sqliteTestStore());
