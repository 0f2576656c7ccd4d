import { createStore, type Driver, memoryDriver } from '../src/adapter.js';
import { localKeyring, type Store } from '../src/index.js';
import { describeEncryptionConformance, describeStoreConformance } from '../src/testing/index.js';

// The in-memory store keeps nothing at rest: no raw text to audit, no bytes to tamper
// with. A second store on the same driver plays a second process on the same data.
const drivers = new WeakMap<Store, Driver>();

describeEncryptionConformance({
  name: 'memory',
  create: async (encryption) => {
    const driver = memoryDriver();
    const store = createStore(driver, encryption ? { encryption } : {});
    drivers.set(store, driver);
    return store;
  },
  reopen: async (store, encryption) =>
    createStore(drivers.get(store)!, encryption ? { encryption } : {}),
});

// The whole conformance suite on a store that seals, but for what needs plaintext.
describeStoreConformance({
  name: 'memory (encrypted)',
  create: async () =>
    createStore(memoryDriver(), {
      encryption: { keyring: localKeyring('the conformance run’s secret, 32 bytes or more') },
    }),
  encrypted: true,
});
