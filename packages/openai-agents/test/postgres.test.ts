import { postgresServerTestStore } from '@cairn/store-postgres/testing';
import { describeSession } from './session-suite.js';

describeSession(await postgresServerTestStore('openai-agents', 'cairn_agents'));
