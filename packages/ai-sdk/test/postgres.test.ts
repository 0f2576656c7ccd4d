import { postgresServerTestStore } from '@cairn/store-postgres/testing';
import { describeChatStore } from './chat-suite.js';

describeChatStore(await postgresServerTestStore('ai-sdk', 'cairn_ai_sdk'));
