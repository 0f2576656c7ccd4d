import { postgresServerTestStore } from '@cairn/store-postgres/testing';
import { describeThreadEngine } from './engine-suite.js';

describeThreadEngine(await postgresServerTestStore('thread'), { storedThreads: 100 });
