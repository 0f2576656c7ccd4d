export { ChangeEmitter } from './emitter.js';
export { AsyncLock } from './lock.js';
export {
  BM25_B,
  BM25_K1,
  cosineSimilarity,
  keywordTokens,
  matchesMemoryFilter,
} from './memory-search.js';
export { createMemoryStore, type MemoryStoreOptions } from './memory-store.js';
export * from './store.js';
export * from './validate.js';
