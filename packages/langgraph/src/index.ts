export { CairnSaver, type CairnSaverOptions, namespaceBranch } from './cairn-saver.js';
export { CairnStore, type CairnStoreOptions } from './cairn-store.js';
