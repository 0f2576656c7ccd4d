import { jsonEqual } from './equal.js';
import { CairnError } from './errors.js';
import { findNonJson, type JsonValue } from './json.js';
import { checkKeys, keysOf } from './known-keys.js';
import { checkMigrationChain, runMigrations } from './migrations.js';
import { type Reducer, reducers } from './reducers.js';
import type { StandardSchemaV1 } from './standard-schema.js';

/** `thread` fields live with the branch; `turn` fields reset at every new turn. */
export type FieldScope = 'thread' | 'turn';

/**
 * One field of a state schema: how updates merge (`reducer`), its starting value
 * (`default`), where it lives (`scope`) and, optionally, a validator for its value.
 */
export interface FieldDef<
  T,
  U = T,
  D extends boolean = boolean,
  S extends FieldScope = FieldScope,
> {
  readonly reducer: Reducer<T, U>;
  readonly default: D extends true ? () => T : undefined;
  readonly scope: S;
  readonly schema: StandardSchemaV1<unknown, T> | undefined;
}

export interface FieldOptions<T, U> {
  /** How an update merges into the value; `reducers.replace` when omitted. */
  reducer?: Reducer<T, U>;
  /** A factory for the starting value (a function, so each state gets its own). */
  default?: () => T;
  /** `'thread'` (the default) or `'turn'`. */
  scope?: FieldScope;
  /** Any Standard Schema v1 validator (zod, valibot, ...) for the field's value. */
  schema?: StandardSchemaV1<unknown, T>;
}

type AnyField = FieldDef<any, any, boolean, FieldScope>;

/**
 * Declares a state field.
 *
 * @example
 * ```ts
 * field<string>();                                                   // replace, no default
 * field<string[]>({ reducer: reducers.appendUnique, default: () => [] });
 * field<FileRef[]>({ scope: 'turn', default: () => [] });
 * field({ schema: z.string().min(1) });                              // type from the validator
 * ```
 */
export function field<T, U = T>(
  options: FieldOptions<T, U> & { default: () => T; scope: 'turn' },
): FieldDef<T, U, true, 'turn'>;
export function field<T, U = T>(
  options: FieldOptions<T, U> & { default: () => T },
): FieldDef<T, U, true, 'thread'>;
export function field<T, U = T>(
  options: FieldOptions<T, U> & { scope: 'turn' },
): FieldDef<T, U, false, 'turn'>;
export function field<T, U = T>(options?: FieldOptions<T, U>): FieldDef<T, U, false, 'thread'>;
export function field<T, U = T>(options: FieldOptions<T, U> = {}): AnyField {
  checkKeys(options, 'field options', ['reducer', 'default', 'scope', 'schema']);
  if (options.scope !== undefined && options.scope !== 'thread' && options.scope !== 'turn') {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `field scope must be 'thread' or 'turn', got ${String(options.scope)}`,
    );
  }
  return Object.freeze({
    reducer: (options.reducer ?? reducers.replace) as Reducer<T, U>,
    default: options.default,
    scope: options.scope ?? 'thread',
    schema: options.schema,
  });
}

export type Fields = Record<string, AnyField>;

type ValueOf<F> =
  F extends FieldDef<infer T, any, infer D, any> ? (D extends true ? T : T | undefined) : never;
type UpdateValueOf<F> = F extends FieldDef<any, infer U, any, any> ? U : never;
type KeysOfScope<F extends Fields, S extends FieldScope> = {
  [K in keyof F]: F[K] extends FieldDef<any, any, any, S> ? K : never;
}[keyof F];

/**
 * One step of a schema's migration chain: turns a thread state written under version
 * `from` into one of version `to` (= `from + 1`). `migrate` gets a copy it may change and
 * returns the new state (plain JSON); fields it leaves out get their default.
 */
export interface StateMigration {
  readonly from: number;
  readonly to: number;
  migrate(state: Record<string, any>): Record<string, any>;
  /**
   * The schema of version `from` (its `defineState`): its defaults start a branch written
   * under that version and its reducers fold that version's stored updates. Without it, a
   * stored update of that version folds each field it names through the reducer of the
   * same-named field of the newest schema (unvalidated), or replaces a field that schema
   * lacks, from an empty state. Give it when a reducer or a default changed.
   */
  readonly schema?: StateSchema<any>;
}

/** The second argument of `defineState`. */
export interface DefineStateOptions {
  /** The version of the state's shape, a positive integer. Default 1. */
  version?: number;
  /**
   * The chain that brings an older thread state up to `version`: consecutive steps
   * `{ from: n, to: n + 1 }` from the oldest version still readable up to `version`.
   */
  migrations?: readonly StateMigration[];
}

const DEFINE_STATE_KEYS = keysOf<DefineStateOptions>()(['version', 'migrations']);
const MIGRATION_KEYS = keysOf<StateMigration>()(['from', 'to', 'migrate', 'schema']);

/**
 * The key under which a stored snapshot of a state of version 2 or more records that
 * version (a state of version 1 is stored as it always was). No field may take this name.
 */
export const SCHEMA_VERSION_KEY = '$schemaVersion';

/** A typed state schema: its fields, and the state a new thread starts with. */
export interface StateSchema<F extends Fields = Fields> {
  readonly fields: Readonly<F>;
  /** The version of the state's shape (1 unless `defineState` was given one). */
  readonly version: number;
  /** The steps from older versions up to `version`, oldest first. */
  readonly migrations: readonly StateMigration[];
  /** The names of the fields of one scope, or of all when no scope is given. */
  keys(scope?: FieldScope): string[];
  /** A new state with every default filled in (of one scope, or of all). */
  initial(scope?: FieldScope): StateOf<StateSchema<F>>;
}

/** The value type of a schema's state. Fields without a default may be `undefined`. */
export type StateOf<S extends StateSchema<any>> =
  S extends StateSchema<infer F> ? { [K in keyof F]: ValueOf<F[K]> } : never;
/** The partial update a schema accepts: each field takes its reducer's update type. */
export type UpdateOf<S extends StateSchema<any>> =
  S extends StateSchema<infer F> ? { [K in keyof F]?: UpdateValueOf<F[K]> } : never;
/** Only the thread-scoped part of a state. */
export type ThreadStateOf<S extends StateSchema<any>> =
  S extends StateSchema<infer F> ? { [K in KeysOfScope<F, 'thread'>]: ValueOf<F[K]> } : never;
export type ThreadUpdateOf<S extends StateSchema<any>> =
  S extends StateSchema<infer F>
    ? { [K in KeysOfScope<F, 'thread'>]?: UpdateValueOf<F[K]> }
    : never;
/** Only the turn-scoped part of a state. */
export type TurnStateOf<S extends StateSchema<any>> =
  S extends StateSchema<infer F> ? { [K in KeysOfScope<F, 'turn'>]: ValueOf<F[K]> } : never;
export type TurnUpdateOf<S extends StateSchema<any>> =
  S extends StateSchema<infer F> ? { [K in KeysOfScope<F, 'turn'>]?: UpdateValueOf<F[K]> } : never;

/**
 * Declares a typed state schema from its fields.
 *
 * @example
 * ```ts
 * const Research = defineState({
 *   objective: field<string>(),
 *   keyInsights: field<string[]>({ reducer: reducers.appendUnique, default: () => [] }),
 * });
 * type S = StateOf<typeof Research>;
 * const s0 = Research.initial(); // { keyInsights: [] }
 * ```
 */
export function defineState<F extends Fields>(
  fields: F,
  options: DefineStateOptions = {},
): StateSchema<F> {
  checkKeys(options, 'defineState options', DEFINE_STATE_KEYS);
  const { version, migrations } = checkMigrationChain<StateMigration>(
    'defineState',
    options.version,
    options.migrations,
    MIGRATION_KEYS,
    ({ from, schema }, i) => {
      if (
        schema !== undefined &&
        (typeof schema !== 'object' ||
          schema === null ||
          typeof schema.initial !== 'function' ||
          schema.version !== from)
      ) {
        throw new CairnError(
          'INVALID_ARGUMENT',
          `defineState: migrations[${i}].schema must be the defineState schema of version ${from}, got ${
            typeof schema?.version === 'number' ? `version ${schema.version}` : String(schema)
          }`,
          { details: { index: i } },
        );
      }
    },
  );
  for (const [name, def] of Object.entries(fields)) {
    // A state is a plain object: assigning "__proto__" would replace its prototype.
    if (name === '__proto__') {
      throw new CairnError('INVALID_ARGUMENT', 'a state field cannot be named "__proto__"');
    }
    if (name === SCHEMA_VERSION_KEY) {
      throw new CairnError(
        'INVALID_ARGUMENT',
        `a state field cannot be named "${SCHEMA_VERSION_KEY}": snapshots record the schema version under it`,
      );
    }
    if (typeof def !== 'object' || def === null || typeof def.reducer !== 'function') {
      throw new CairnError('INVALID_ARGUMENT', `state field "${name}" must be made with field()`);
    }
  }
  const frozen = Object.freeze({ ...fields });
  return Object.freeze({
    fields: frozen,
    version,
    migrations,
    keys(scope?: FieldScope) {
      return Object.keys(frozen).filter((k) => scope === undefined || frozen[k]!.scope === scope);
    },
    initial(scope?: FieldScope) {
      const state: Record<string, unknown> = {};
      for (const [name, def] of Object.entries(frozen)) {
        if (scope !== undefined && def.scope !== scope) continue;
        if (def.default) state[name] = def.default();
      }
      return state as StateOf<StateSchema<F>>;
    },
  });
}

/**
 * Brings a thread state written under `schema` version `from` up to `schema.version`
 * through its migrations, then fills each thread field the result lacks with its default.
 * `SCHEMA_TOO_NEW` when `from` is newer than the schema (the state must not be read or
 * written by this code); `INVALID_ARGUMENT` when no migration starts that old;
 * `INVALID_UPDATE` (naming the field) when a migration returns something that is not a
 * state of the schema.
 *
 * @example
 * ```ts
 * const state = migrateState(ResearchV2, { name: 'stones' }, 1);
 * ```
 */
export function migrateState<S extends StateSchema<any>>(
  schema: S,
  state: Record<string, unknown>,
  from: number,
): ThreadStateOf<S> {
  // A schema of version Infinity (a viewer's, built by hand) reads every version as stored.
  if (schema.version === Number.POSITIVE_INFINITY) return state as ThreadStateOf<S>;
  if (from === schema.version) return state as ThreadStateOf<S>;
  const current = runMigrations('state', schema.version, schema.migrations, state, from, (v) =>
    structuredClone(v),
  );
  const result: Record<string, unknown> = {};
  for (const name of Object.keys(current)) {
    const value = current[name];
    if (value === undefined) continue;
    const def = Object.hasOwn(schema.fields, name) ? (schema.fields as Fields)[name] : undefined;
    if (def?.scope !== 'thread') {
      throw new CairnError(
        'INVALID_UPDATE',
        `the migrations to version ${schema.version} returned "${name}", which is not a thread field of that version`,
        { details: { field: name } },
      );
    }
    const bad = findNonJson(value, name);
    if (bad) {
      throw new CairnError('INVALID_UPDATE', `state field "${name}": ${bad.path}: ${bad.reason}`, {
        details: { field: name, path: bad.path },
      });
    }
    result[name] = def.schema ? validate(def.schema, value, name) : value;
  }
  for (const [name, def] of Object.entries(schema.fields as Fields)) {
    if (def.scope === 'thread' && !Object.hasOwn(result, name) && def.default)
      result[name] = def.default();
  }
  return result as ThreadStateOf<S>;
}

export interface ApplyResult<State> {
  /** The new state. Fields the update did not change keep their identity. */
  state: State;
  /** The names of the fields whose value changed. */
  changed: string[];
}

export interface ApplyOptions {
  /** Reject fields of the other scope (the engine uses this for thread vs turn updates). */
  scope?: FieldScope;
}

/**
 * Merges `update` into `state` through each field's reducer. Pure: neither input is
 * mutated. Throws `INVALID_UPDATE` (naming the field and path) for an unknown field,
 * a field of another scope, a value that is not JSON, or one the field's validator
 * rejects; nothing is applied then.
 *
 * @example
 * ```ts
 * const { state, changed } = applyUpdate(Research, s0, { keyInsights: ['a'] });
 * ```
 */
export function applyUpdate<S extends StateSchema<any>>(
  schema: S,
  state: StateOf<S>,
  update: UpdateOf<S>,
  options: ApplyOptions = {},
): ApplyResult<StateOf<S>> {
  if (typeof update !== 'object' || update === null || Array.isArray(update)) {
    throw new CairnError('INVALID_UPDATE', 'a state update must be a plain object of fields');
  }
  const current = state as Record<string, JsonValue | undefined>;
  let next: Record<string, unknown> | undefined;
  const changed: string[] = [];
  for (const name of Object.keys(update)) {
    const value = (update as Record<string, unknown>)[name];
    if (value === undefined) continue;
    // Own fields only: "constructor" or "toString" must not find Object.prototype's.
    const def = Object.hasOwn(schema.fields, name) ? (schema.fields as Fields)[name] : undefined;
    if (!def) {
      throw new CairnError('INVALID_UPDATE', `unknown state field "${name}"`, {
        details: { field: name },
      });
    }
    if (options.scope !== undefined && def.scope !== options.scope) {
      throw new CairnError(
        'INVALID_UPDATE',
        `state field "${name}" is ${def.scope}-scoped and cannot be updated here`,
        { details: { field: name } },
      );
    }
    const bad = findNonJson(value, name);
    if (bad) {
      throw new CairnError('INVALID_UPDATE', `state field "${name}": ${bad.path}: ${bad.reason}`, {
        details: { field: name, path: bad.path },
      });
    }
    const before = Object.hasOwn(current, name) ? current[name] : undefined;
    let after = def.reducer(before, value);
    if (def.schema) after = validate(def.schema, after, name);
    if (after === before || jsonEqual(after as JsonValue, before)) continue;
    next ??= { ...current };
    next[name] = after;
    changed.push(name);
  }
  return { state: (next ?? current) as StateOf<S>, changed };
}

function validate<T>(schema: StandardSchemaV1<unknown, T>, value: unknown, name: string): T {
  const result = schema['~standard'].validate(value);
  if (result instanceof Promise) {
    throw new CairnError(
      'INVALID_UPDATE',
      `state field "${name}": asynchronous validators are not supported`,
    );
  }
  if (result.issues) {
    const issue = result.issues[0];
    const path = (issue?.path ?? [])
      .map((p) => String(typeof p === 'object' && p !== null && 'key' in p ? p.key : p))
      .join('.');
    throw new CairnError(
      'INVALID_UPDATE',
      `state field "${name}"${path ? ` at ${path}` : ''}: ${issue?.message ?? 'rejected by its validator'}`,
      { details: { field: name, path, issues: result.issues.map((i) => i.message) } },
    );
  }
  return result.value;
}
