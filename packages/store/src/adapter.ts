/**
 * `@cairn/store/adapter`: what an adapter needs to make a store of a driver. Users
 * import from `@cairn/store`; adapters import `createStore` and the driver types here.
 */
export type {
  Driver,
  DriverSession,
  KeywordCandidate,
  LatestCommitConditions,
  MaybePromise,
  MemoryRow,
  MessageBatchLookup,
  MessageJump,
  MessageLink,
  SessionOptions,
  StateCommitDraft,
  ThreadRow,
} from './driver.js';
export { ChangeEmitter } from './emitter.js';
export { type CreateStoreOptions, createStore } from './front-door.js';
export { Gate } from './gate.js';
export { AsyncLock } from './lock.js';
export { memoryDriver } from './memory-driver.js';
export {
  cosineSimilarity,
  keywordTokens,
  matchesMemoryFilter,
  STOP_WORDS,
  searchTerms,
} from './memory-search.js';
export { backfillJumps, decodeCursor, encodeCursor } from './validate.js';
