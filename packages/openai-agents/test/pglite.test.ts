import { pgliteTestStore } from '@cairn/store-postgres/testing';
import { describeSession } from './session-suite.js';

describeSession(pgliteTestStore());
