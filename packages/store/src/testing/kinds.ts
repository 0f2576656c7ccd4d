import type { Store } from '../store.js';

/** One kind of store a test suite runs on: its name, why it is skipped, how to make and dispose of one. */
export interface TestStoreKind {
  name: string;
  /** Why the suite is skipped (the server is unreachable, say); runs when absent or false. */
  skip?: string | false;
  create(): Promise<Store>;
  /** Closes the store and removes its data. */
  destroy(store: Store): Promise<void>;
}

/**
 * A kind of store from `open`, which makes a store and says how to remove its data
 * (`dispose`, run by `destroy` after the store is closed).
 */
export function testStoreKind(
  name: string,
  open: () => Promise<{ store: Store; dispose: () => unknown }>,
  skip: string | false = false,
): TestStoreKind {
  const disposers = new Map<Store, () => unknown>();
  return {
    name,
    skip,
    async create() {
      const { store, dispose } = await open();
      disposers.set(store, dispose);
      return store;
    },
    async destroy(store) {
      await store.close();
      const dispose = disposers.get(store);
      disposers.delete(store);
      await dispose?.();
    },
  };
}
