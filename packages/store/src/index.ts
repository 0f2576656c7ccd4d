export { ChangeEmitter } from './emitter.js';
export { AsyncLock } from './lock.js';
export { cosineSimilarity, keywordTokens, matchesMemoryFilter } from './memory-search.js';
export { createMemoryStore, type MemoryStoreOptions } from './memory-store.js';
export * from './store.js';
export * from './validate.js';
