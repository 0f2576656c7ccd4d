export { type AuthFilters, type LangGraphAuth, loadAuth, type ServerAuth } from './auth.js';
export { COLLECTIONS } from './collection.js';
export { loadConfig, type ServeConfig } from './config.js';
export { planClaim, type QueueItem } from './run-queue.js';
export { CairnServer, type CairnServerOptions, createCairnServer } from './server.js';
