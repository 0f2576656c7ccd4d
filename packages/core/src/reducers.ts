import { jsonKey } from './equal.js';
import { CairnError } from './errors.js';

/**
 * A reducer merges an update into the existing value of one state field. It is pure:
 * it returns a new value and never mutates its arguments. Either side may be missing.
 */
export type Reducer<T, U = T> = (existing: T | undefined, update: U | undefined) => T;

/** An update item for the `messages` reducer that deletes the item with that id. */
export interface RemoveMessage {
  remove: string;
}
export type MessagesUpdate<M extends { id: string }> = Array<M | RemoveMessage>;

function expectArray(value: unknown, reducer: string): unknown[] {
  if (!Array.isArray(value)) {
    throw new CairnError('INVALID_UPDATE', `${reducer} expects an array, got ${describe(value)}`);
  }
  return value;
}

function expectRecord(value: unknown, reducer: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CairnError('INVALID_UPDATE', `${reducer} expects an object, got ${describe(value)}`);
  }
  return value as Record<string, unknown>;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

function dedupe<T>(items: Iterable<T>): T[] {
  const seen = new Set<string>();
  const out: T[] = [];
  for (const item of items) {
    const key = jsonKey(item);
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(item);
  }
  return out;
}

/** Last write wins; an `undefined` update keeps the existing value. */
function replace<T>(existing: T | undefined, update: T | undefined): T {
  return (update === undefined ? existing : update) as T;
}

/** Plain concatenation. */
function append<T>(existing: T[] | undefined, update: T[] | undefined): T[] {
  if (existing === undefined)
    return update === undefined ? [] : (expectArray(update, 'append') as T[]);
  if (update === undefined) return existing;
  expectArray(update, 'append');
  return update.length === 0 ? existing : [...existing, ...update];
}

/**
 * Concatenation with duplicates (equal JSON values) removed, keeping the first
 * occurrence and the order. A missing existing value takes the update as it is.
 */
function appendUnique<T>(existing: T[] | undefined, update: T[] | undefined): T[] {
  if (existing === undefined) {
    return update === undefined ? [] : (expectArray(update, 'appendUnique') as T[]);
  }
  if (update === undefined) return existing;
  expectArray(update, 'appendUnique');
  return dedupe([...existing, ...update]);
}

/** Set union: never removes, keeps insertion order, holds each value once. */
function union<T>(existing: T[] | undefined, update: T[] | undefined): T[] {
  if (update === undefined) return existing ?? [];
  expectArray(update, 'union');
  return dedupe([...(existing ?? []), ...update]);
}

/**
 * Shallow merge of records. An update with no keys clears the record to `{}`.
 */
function mergeRecord<T extends Record<string, unknown>>(
  existing: T | undefined,
  update: Partial<T> | undefined,
): T {
  if (update === undefined) return existing ?? ({} as T);
  const u = expectRecord(update, 'mergeRecord');
  if (existing === undefined) return u as T;
  if (Object.keys(u).length === 0) return {} as T;
  return { ...existing, ...u } as T;
}

/**
 * A list of items with ids: new items are appended, an item whose id is already there
 * replaces it in place, and `{ remove: id }` deletes that id.
 */
function messages<M extends { id: string }>(
  existing: M[] | undefined,
  update: MessagesUpdate<M> | undefined,
): M[] {
  if (update === undefined) return existing ?? [];
  expectArray(update, 'messages');
  const out = [...(existing ?? [])];
  const index = new Map<string, number>();
  for (const [i, m] of out.entries()) index.set(m.id, i);
  let removed = false;
  for (const item of update) {
    if (typeof item !== 'object' || item === null) {
      throw new CairnError(
        'INVALID_UPDATE',
        `messages expects items with an id, got ${describe(item)}`,
      );
    }
    if ('remove' in item && !('id' in item)) {
      const at = index.get(item.remove);
      if (at !== undefined) {
        out[at] = undefined as unknown as M;
        index.delete(item.remove);
        removed = true;
      }
      continue;
    }
    const m = item as M;
    if (typeof m.id !== 'string') {
      throw new CairnError('INVALID_UPDATE', 'messages expects every item to have a string id');
    }
    const at = index.get(m.id);
    if (at === undefined) {
      index.set(m.id, out.length);
      out.push(m);
    } else {
      out[at] = m;
    }
  }
  return removed ? out.filter((m) => m !== undefined) : out;
}

/**
 * The built-in reducers. A reducer is a plain function, so your own work the same way.
 *
 * @example
 * ```ts
 * reducers.appendUnique(['a', 'b'], ['b', 'c']); // ['a', 'b', 'c']
 * reducers.mergeRecord({ a: 1 }, {});            // {}
 * reducers.messages([{ id: '1', text: 'hi' }], [{ remove: '1' }]); // []
 * ```
 */
export const reducers = { replace, append, appendUnique, union, mergeRecord, messages } as const;
