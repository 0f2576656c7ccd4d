import { pgliteTestStore } from '@cairn/store-postgres/testing';
import { describeChatStore } from './chat-suite.js';

describeChatStore(pgliteTestStore());
