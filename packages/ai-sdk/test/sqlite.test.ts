import { sqliteTestStore } from '@cairn/test-support';
import { describeChatStore } from './chat-suite.js';

describeChatStore(sqliteTestStore());
