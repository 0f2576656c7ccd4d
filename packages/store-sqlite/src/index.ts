export {
  createSqliteStore,
  type SqliteStoreOptions,
  type SqliteStoreSource,
} from './create-sqlite-store.js';
export { SCHEMA_VERSION } from './migrations.js';
export type { SqliteDatabase, SqliteRunResult, SqliteStatement } from './sqlite-driver.js';
