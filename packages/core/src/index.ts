export { jsonEqual } from './equal.js';
export {
  CairnError,
  type CairnErrorCode,
  conflict,
  invalidArgument,
  isCairnError,
  notFound,
  unavailable,
} from './errors.js';
export { newId } from './ids.js';
export {
  assertJson,
  findNonJson,
  type JsonObject,
  type JsonPrimitive,
  type JsonProblem,
  type JsonValue,
  MAX_JSON_DEPTH,
  setOwn,
  textProblem,
  toJson,
} from './json.js';
export { checkKeys, keysOf } from './known-keys.js';
export { AsyncLock } from './lock.js';
export {
  checkMigrationChain,
  type MigrationStep,
  runMigrations,
  schemaVersionTooNew,
} from './migrations.js';
export * from './model.js';
export { checkOwner } from './owner.js';
export type {
  ComposeMessage,
  Provider,
  ProviderContext,
  ProviderKeyContext,
  ProviderResult,
} from './provider.js';
export { type MessagesUpdate, type Reducer, type RemoveMessage, reducers } from './reducers.js';
export {
  type ApplyOptions,
  type ApplyResult,
  applyUpdate,
  type DefineStateOptions,
  defineState,
  type FieldDef,
  type FieldOptions,
  type FieldScope,
  type Fields,
  field,
  migrateState,
  SCHEMA_VERSION_KEY,
  type StateMigration,
  type StateOf,
  type StateSchema,
  type ThreadStateOf,
  type ThreadUpdateOf,
  type TurnStateOf,
  type TurnUpdateOf,
  type UpdateOf,
} from './schema.js';
export type { StandardSchemaV1 } from './standard-schema.js';
