import { CairnError, type CairnErrorCode, invalidArgument } from './errors.js';

export type JsonPrimitive = string | number | boolean | null;
/** A value that survives `JSON.stringify` / `JSON.parse` unchanged. */
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/**
 * Finds the first place where `value` is not plain JSON and describes it, or returns
 * null when it is JSON. Rejects `undefined` (anywhere but as an absent object key is
 * still rejected when present), functions, symbols, BigInt, NaN and ±Infinity, cycles,
 * and objects whose prototype is not `Object.prototype` or `null` (class instances,
 * Dates, Maps).
 */
export function findNonJson(value: unknown, path = '$'): { path: string; reason: string } | null {
  // Hot path (every stored message and state update passes here): no strings are built
  // unless something is wrong; the path is assembled while unwinding from the bad value.
  if (typeof value === 'string' || typeof value === 'boolean' || value === null) return null;
  const trail: string[] = [];
  const reason = visitJson(value, new Set(), trail);
  return reason === null ? null : { path: path + trail.reverse().join(''), reason };
}

function visitJson(v: unknown, seen: Set<object>, trail: string[]): string | null {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return null;
    case 'number':
      return Number.isFinite(v) ? null : `${v} is not a JSON number`;
    case 'undefined':
      return 'undefined is not JSON';
    case 'bigint':
      return 'BigInt is not JSON';
    case 'function':
      return 'a function is not JSON';
    case 'symbol':
      return 'a symbol is not JSON';
  }
  if (v === null) return null;
  const obj = v as object;
  if (seen.has(obj)) return 'a cycle is not JSON';
  seen.add(obj);
  if (Array.isArray(obj)) {
    for (let i = 0; i < obj.length; i++) {
      const bad = visitJson(obj[i], seen, trail);
      if (bad) {
        trail.push(`[${i}]`);
        return bad;
      }
    }
  } else {
    const proto = Object.getPrototypeOf(obj);
    if (proto !== Object.prototype && proto !== null) {
      const name = (obj as { constructor?: { name?: string } }).constructor?.name ?? 'object';
      return `an instance of ${name} is not plain JSON`;
    }
    for (const key in obj) {
      if (!Object.hasOwn(obj, key)) continue;
      const bad = visitJson((obj as Record<string, unknown>)[key], seen, trail);
      if (bad) {
        trail.push(`.${key}`);
        return bad;
      }
    }
  }
  seen.delete(obj);
  return null;
}

/**
 * Throws a CairnError (`INVALID_ARGUMENT` unless another code is given) when `value`
 * is not plain JSON, naming the path and the reason.
 *
 * @example
 * ```ts
 * assertJson({ a: [1, undefined] }, 'data'); // throws: data.a[1]: undefined is not JSON
 * ```
 */
export function assertJson(
  value: unknown,
  label: string,
  code: CairnErrorCode = 'INVALID_ARGUMENT',
): asserts value is JsonValue {
  const bad = findNonJson(value, label);
  if (bad) {
    throw new CairnError(code, `${bad.path}: ${bad.reason}`, { details: { path: bad.path } });
  }
}

/**
 * A copy of `value` as the JSON a client would receive: object keys whose value is
 * `undefined` are left out, as `JSON.stringify` does (SDK objects built in process carry
 * some); anything else that is not plain JSON (a Date, a function, NaN, a class instance,
 * a cycle, `undefined` in an array) is `INVALID_ARGUMENT` naming its path.
 *
 * @example
 * ```ts
 * toJson({ id: 'm1', metadata: undefined }, 'messages[0]'); // { id: 'm1' }
 * toJson({ at: new Date() }, 'messages[0].metadata'); // throws: messages[0].metadata.at: an instance of Date is not plain JSON
 * ```
 */
export function toJson(value: unknown, label: string): JsonValue {
  return copyJson(value, label, new Set());
}

function copyJson(v: unknown, path: string, seen: Set<object>): JsonValue {
  if (typeof v !== 'object' || v === null) {
    const bad = findNonJson(v, path);
    if (bad) throw invalidArgument(`${bad.path}: ${bad.reason}`, { path: bad.path });
    return v as JsonValue;
  }
  if (seen.has(v)) throw invalidArgument(`${path}: a cycle is not JSON`, { path });
  seen.add(v);
  let out: JsonValue;
  if (Array.isArray(v)) {
    out = v.map((x, k) => copyJson(x, `${path}[${k}]`, seen));
  } else {
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) {
      const name = (v as { constructor?: { name?: string } }).constructor?.name ?? 'object';
      throw invalidArgument(`${path}: an instance of ${name} is not plain JSON`, { path });
    }
    const o: JsonObject = {};
    for (const [k, x] of Object.entries(v))
      if (x !== undefined) o[k] = copyJson(x, `${path}.${k}`, seen);
    out = o;
  }
  seen.delete(v);
  return out;
}
