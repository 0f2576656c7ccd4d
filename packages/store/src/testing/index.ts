import { describe } from 'vitest';
import { type StoreConformanceOptions, TEST_TIMEOUT } from './context.js';
import { describeBranchMemories } from './specs/branch-memories.js';
import { describeBranches } from './specs/branches.js';
import { describeCheckpoints } from './specs/checkpoints.js';
import { describeDifferential } from './specs/differential.js';
import { describeEmbeddingSpace } from './specs/embedding-space.js';
import { describeEntries } from './specs/entries.js';
import { describeForget } from './specs/forget.js';
import { describeKeywordSearch } from './specs/keyword-search.js';
import { describeLeases } from './specs/leases.js';
import { describeLifecycle } from './specs/lifecycle.js';
import { describeLineage } from './specs/lineage.js';
import { describeMemories } from './specs/memories.js';
import { describeMemoryVersions } from './specs/memory-versions.js';
import { describeMessages } from './specs/messages.js';
import { describeMetadataPrefix } from './specs/metadata-prefix.js';
import { describeNotifications } from './specs/notifications.js';
import { describeOneRule } from './specs/one-rule.js';
import { describeRecords } from './specs/records.js';
import { describeRetention } from './specs/retention.js';
import { describeScopeIsolation } from './specs/scope-isolation.js';
import { describeSharedData } from './specs/shared-data.js';
import { describeStateCommits } from './specs/state-commits.js';
import { describeThreads } from './specs/threads.js';
import { describeTransactions } from './specs/transactions.js';
import { describeTurns } from './specs/turns.js';
import { describeVectorSearch } from './specs/vector-search.js';

export type { StoreConformanceOptions } from './context.js';
export {
  makeChain,
  Rng,
  SWEEPABLE_FREED,
  SWEEPABLE_POLICY,
  writeSweepable,
} from './helpers.js';
export { type TestStoreKind, testStoreKind } from './kinds.js';
export {
  describeEncryptionConformance,
  type EncryptionConformanceOptions,
  type RawTamper,
} from './specs/encryption.js';

/** The areas of the suite, in the order they run. */
const AREAS: ReadonlyArray<(options: StoreConformanceOptions) => void> = [
  describeThreads,
  describeMessages,
  describeLineage,
  describeBranches,
  describeCheckpoints,
  describeStateCommits,
  describeTurns,
  describeLeases,
  describeEntries,
  describeMemories,
  describeMetadataPrefix,
  describeMemoryVersions,
  describeBranchMemories,
  describeRecords,
  describeScopeIsolation,
  describeVectorSearch,
  describeKeywordSearch,
  describeEmbeddingSpace,
  describeTransactions,
  describeNotifications,
  describeLifecycle,
  describeSharedData,
  describeForget,
  describeRetention,
  describeOneRule,
  describeDifferential,
];

/**
 * Registers the Store conformance suite with vitest: every method of the `Store`
 * contract, its happy paths, orderings, paging, uniqueness rules, compare-and-set
 * conflicts, error codes for bad input (with nothing written), scope isolation, exact
 * search results against a brute-force reference, transactions, notifications and
 * `close()`; the rules the front door writes once (ended transactions, batch checks
 * before writes, compare-and-set `details`, foreign cursors, the text rule for NUL and
 * lone surrogates, index-sized ids, memory text and JSON depth limits, keyword stop
 * words and score scale); and a differential spec that runs random call sequences on
 * the reference store and on this one and compares every result, errors included.
 * Call it at the top level of a test file.
 *
 * Stores: each area (a `describe` block: threads, messages, ... lifecycle) calls
 * `create()` once in `beforeAll` and `destroy()` in `afterAll`; the embedding-space,
 * lifecycle and differential areas (and a few other tests) call them once per test,
 * since they need a store with nothing recorded or close the store. `create()` must return a store with no data; `destroy()` may get a
 * store that is already closed. Every test makes its own threads and ids, so areas never
 * depend on each other.
 *
 * With `reopen`, an area opens a second store on the same data and checks what two
 * processes sharing a database rely on.
 *
 * Differences between stores are `capabilities`, never names: with `vectorSearch:
 * 'approximate'` the vector tests check no leaks, true scores and recall instead of
 * exact order. When `options.capabilities` is given, the store must report those values.
 *
 * Data is random from fixed seeds, so a failure reproduces run after run. Each test may
 * take up to 30 seconds (a few make a store of their own), so keep `create()` cheap: a
 * new schema or file rather than a new server.
 *
 * @example
 * ```ts
 * // test/memory-store.test.ts
 * import { createMemoryStore } from '@cairn/store';
 * import { describeStoreConformance } from '@cairn/store/testing';
 *
 * describeStoreConformance({
 *   name: 'memory',
 *   create: async () => createMemoryStore(),
 *   capabilities: { vectorSearch: 'exact', notifications: 'process', durable: false },
 * });
 *
 * // an adapter: a new database per area, a second connection for the shared-data tests
 * const files = new WeakMap<Store, string>();
 * describeStoreConformance({
 *   name: 'sqlite',
 *   create: async () => {
 *     const path = join(dir, `${newId()}.db`);
 *     const store = createSqliteStore({ path });
 *     files.set(store, path);
 *     return store;
 *   },
 *   destroy: async (store) => {
 *     await store.close();
 *     rmSync(files.get(store)!, { force: true });
 *   },
 *   reopen: async (store) => createSqliteStore({ path: files.get(store)! }),
 *   capabilities: { durable: true, multiProcess: true },
 * });
 * ```
 */
export function describeStoreConformance(options: StoreConformanceOptions): void {
  describe(`${options.name} store conformance`, { timeout: TEST_TIMEOUT }, () => {
    for (const area of AREAS)
      if (!(options.encrypted && NEEDS_PLAINTEXT.includes(area))) area(options);
  });
}

/**
 * The areas built on memory metadata in the clear: left out for a store with encryption,
 * which refuses `metadataPrefix` filters (it keeps no index of sealed metadata).
 */
const NEEDS_PLAINTEXT: ReadonlyArray<(options: StoreConformanceOptions) => void> = [
  describeMetadataPrefix,
];
