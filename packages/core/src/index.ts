export { CairnError, isCairnError, type CairnErrorCode } from './errors.js';
export { assertJson, findNonJson, type JsonObject, type JsonPrimitive, type JsonValue } from './json.js';
export { jsonEqual } from './equal.js';
export { newId } from './ids.js';
export * from './model.js';
export { reducers, type MessagesUpdate, type Reducer, type RemoveMessage } from './reducers.js';
export {
  applyUpdate,
  asState,
  defineState,
  field,
  type ApplyOptions,
  type ApplyResult,
  type FieldDef,
  type FieldOptions,
  type FieldScope,
  type Fields,
  type StateOf,
  type StateSchema,
  type ThreadStateOf,
  type ThreadUpdateOf,
  type TurnStateOf,
  type TurnUpdateOf,
  type UpdateOf,
} from './schema.js';
export type { StandardSchemaV1 } from './standard-schema.js';
