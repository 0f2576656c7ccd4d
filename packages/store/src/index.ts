// What users of a store need. An adapter's tools (`createStore`, the driver types, the
// checks the front door runs) are in `@cairn/store/adapter`.
export { type EncryptionOptions, type Keyring, localKeyring } from './encryption.js';
export { createMemoryStore, type MemoryStoreOptions } from './memory-driver.js';
export { cosineSimilarity } from './memory-search.js';
export * from './store.js';
export { contentHash, DEFAULT_LOCK_TIMEOUT_MS, MAX_MEMORY_TEXT_LENGTH } from './validate.js';
