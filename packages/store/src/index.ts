// Adapter helpers (ChangeEmitter, AsyncLock, the check* and plan* functions) are still
// exported here until every adapter imports them from `@cairn/store/adapter`.
export { ChangeEmitter } from './emitter.js';
export { AsyncLock } from './lock.js';
export { createMemoryStore, type MemoryStoreOptions } from './memory-driver.js';
export { cosineSimilarity, keywordTokens, matchesMemoryFilter } from './memory-search.js';
export * from './store.js';
export * from './validate.js';
