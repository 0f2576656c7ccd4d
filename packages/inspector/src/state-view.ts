import { field, type JsonObject, type JsonValue, jsonEqual, type StateSchema } from '@cairn/core';

/** One field that differs between two states. */
export interface FieldChange {
  field: string;
  kind: 'added' | 'changed' | 'removed';
  before: JsonValue | null;
  after: JsonValue | null;
}

/** The fields that differ between two states. */
export function diffStates(before: JsonObject, after: JsonObject): FieldChange[] {
  const changes: FieldChange[] = [];
  for (const name of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const a = Object.hasOwn(before, name) ? before[name] : undefined;
    const b = Object.hasOwn(after, name) ? after[name] : undefined;
    if (a !== undefined && b !== undefined && jsonEqual(a, b)) continue;
    changes.push({
      field: name,
      kind: a === undefined ? 'added' : b === undefined ? 'removed' : 'changed',
      before: a ?? null,
      after: b ?? null,
    });
  }
  return changes;
}

const replaceField = field<JsonValue>();

/**
 * The schema used when the inspector is not given the application's: every field is
 * known and merges by replacing its value, no field has a default. A state read with it
 * equals the real one wherever the last commit carries a snapshot or the fields' reducers
 * replace; the page says which schema it read with. ("__proto__" stays unknown: a state is
 * a plain object.)
 */
export const REPLACE_EVERY_FIELD: StateSchema = {
  fields: new Proxy(
    {},
    {
      getOwnPropertyDescriptor: (_target, key) =>
        typeof key === 'string' && key !== '__proto__'
          ? { value: replaceField, enumerable: true, configurable: true, writable: false }
          : undefined,
      get: (_target, key) =>
        typeof key === 'string' && key !== '__proto__' ? replaceField : undefined,
    },
  ),
  // Any stored schema version is shown as stored: this view has no shape to migrate to.
  version: Number.POSITIVE_INFINITY,
  migrations: [],
  keys: () => [],
  initial: () => ({}),
};
