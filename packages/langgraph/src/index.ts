export {
  CairnSaver,
  type CairnSaverOptions,
  namespaceBranch,
  type PruneOptions,
  type PruneResult,
} from './cairn-saver.js';
export { CairnStore, type CairnStoreOptions } from './cairn-store.js';
export type { ChannelMigration, SaverSchema } from './channel-migrations.js';
