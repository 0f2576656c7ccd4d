import { afterAll, beforeAll } from 'vitest';
import type { Store, StoreCapabilities } from '../store.js';

/** How a store under test is made and disposed of. See `describeStoreConformance`. */
export interface StoreConformanceOptions {
  /** Shown in the suite's title. Never used to decide what runs. */
  name: string;
  /**
   * Returns a new store with no data of its own: no threads, no memories, no recorded
   * embedding space. Called once per area (a `describe` block, in `beforeAll`) and once
   * per test in the areas that need an untouched store (embedding space, lifecycle).
   */
  create: () => Promise<Store>;
  /**
   * Disposes of a store made by `create` (drop its schema, delete its file). It may get
   * a store that the suite already closed. Default: `store.close()`.
   */
  destroy?: (store: Store) => Promise<void>;
  /** When given, the store must report exactly these values for these keys. */
  capabilities?: Partial<StoreCapabilities>;
  /**
   * Opens a second store on the same data as `store` (a second connection, as another
   * process would). When given, the suite also checks what two stores on one database
   * must do: see each other's writes, and — as the capabilities promise — keep data
   * after close (`durable`), lose nothing when both write (`multiProcess`), and hear
   * each other's changes (`notifications: 'cluster'`). The suite closes the second
   * store itself and disposes of the first with `destroy`.
   */
  reopen?: (store: Store) => Promise<Store>;
  /**
   * The store was created with `encryption` (see `CreateStoreOptions`): the suite leaves
   * out `metadataPrefix` filters, which a store that seals metadata refuses
   * (`describeEncryptionConformance` checks the refusal), expects the embedding cache to
   * keep nothing, and expects `forget` to count the data keys it destroys. Keyword and
   * vector search run as on any store (scored in the process over the opened memories).
   */
  encrypted?: boolean;
}

/** Generous limits, so a real database on a slow CI machine does not time out. */
export const HOOK_TIMEOUT = 60_000;
/** Any one test, including the ones that open a store of their own. */
export const TEST_TIMEOUT = 30_000;
export const SLOW_TEST_TIMEOUT = 60_000;

/** Releases a store the way the options say. */
export async function disposeStore(options: StoreConformanceOptions, store: Store): Promise<void> {
  if (options.destroy) await options.destroy(store);
  else await store.close();
}

/**
 * Registers `beforeAll`/`afterAll` hooks in the current `describe` that create one store
 * for the block and dispose of it afterwards. Returns a getter for the store.
 */
export function useStore(options: StoreConformanceOptions): () => Store {
  let store: Store | undefined;
  beforeAll(async () => {
    store = await options.create();
  }, HOOK_TIMEOUT);
  afterAll(async () => {
    if (store) await disposeStore(options, store);
    store = undefined;
  }, HOOK_TIMEOUT);
  return () => {
    if (!store) throw new Error(`${options.name}: the store for this block was not created`);
    return store;
  };
}

/** Runs `fn` with a store of its own, disposing of it afterwards even on failure. */
export async function withFreshStore<T>(
  options: StoreConformanceOptions,
  fn: (store: Store) => Promise<T>,
): Promise<T> {
  const store = await options.create();
  try {
    return await fn(store);
  } finally {
    await disposeStore(options, store);
  }
}
