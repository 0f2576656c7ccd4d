/**
 * `@cairn/store/adapter`: what an adapter needs to make a store of a driver
 * (`createStore`, the driver types, the in-memory driver to delegate to or compare
 * with, the search helpers), and the checks the front door runs, for packages that
 * check input by the store's rules before it reaches a store (`@cairn/thread`). Users
 * import from `@cairn/store`.
 */
export type {
  BranchCommitQuery,
  DataKeyRow,
  Driver,
  DriverMemoryFilter,
  DriverSession,
  KeywordCandidate,
  LatestCommitConditions,
  LeaseWaiter,
  MaybePromise,
  MemoryRow,
  MessageBatchLookup,
  MessageJump,
  MessageLink,
  SessionOptions,
  StateCommitDraft,
  StoredLease,
  SweepDeleted,
  SweepDeletes,
  SweepFacts,
  ThreadRow,
  ThreadRowCounts,
  Tombstone,
  TombstoneKey,
  TombstoneKind,
} from './driver.js';
export {
  checkEncryptionOptions,
  type EncryptionOptions,
  type Tenant,
  type TenantKind,
} from './encryption.js';
export {
  asCairnError,
  checkOneOf,
  deadlocked,
  goneMeanwhile,
  lockTimeout,
  schemaTooNew,
  takenMeanwhile,
} from './failures.js';
export { type CreateStoreOptions, createStore } from './front-door.js';
export { memoryDriver } from './memory-driver.js';
export {
  BM25,
  branchAnchor,
  cosineSimilarity,
  holdsAt,
  keywordTokens,
  matchesMemoryFilter,
  STOP_WORDS,
  searchTerms,
  termCounts,
} from './memory-search.js';
export {
  chainSql,
  memoryFilterSql,
  type SqlFilterDialect,
  SqlTable,
  withSavepoint,
} from './sql.js';
export * from './validate.js';
