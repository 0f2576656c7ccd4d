import { sqliteTestStore } from '@cairn/test-support';
import { describeSession } from './session-suite.js';

describeSession(sqliteTestStore());
