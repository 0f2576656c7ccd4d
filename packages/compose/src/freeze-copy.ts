import { setOwn } from '@cairn/core';

/**
 * True for objects made by `{}` literals, `Object.create(null)` or JSON.parse: the
 * ones this package copies. Class instances, Maps, Dates and errors are left alone.
 */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * A deep copy of the plain objects and arrays in `value`, frozen at every level.
 * What a provider returns is copied (never frozen in place), so a provider may keep and
 * mutate its own objects without touching cached compositions, and callers cannot mutate
 * what the cache holds. Objects that are not plain (Date, Map, class instances) are
 * shared as they are.
 */
export function freezeCopy<T>(value: T, seen: WeakMap<object, unknown> = new WeakMap()): T {
  if (typeof value !== 'object' || value === null) return value;
  const done = seen.get(value);
  if (done !== undefined) return done as T;
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    seen.set(value, out);
    for (const item of value) out.push(freezeCopy(item, seen));
    return Object.freeze(out) as T;
  }
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  seen.set(value, out);
  for (const key of Object.keys(value)) setOwn(out, key, freezeCopy(value[key], seen));
  return Object.freeze(out) as T;
}
