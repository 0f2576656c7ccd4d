export {
  createPostgresStore,
  type PostgresConnection,
  type PostgresStoreOptions,
} from './create-postgres-store.js';
export { LATEST_VERSION as SCHEMA_VERSION } from './migrations.js';
export type { PGliteLike, PgClientLike, PgPoolLike } from './queryable.js';
