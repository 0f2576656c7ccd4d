import { CairnError, type CairnErrorCode, invalidArgument } from './errors.js';

export type JsonPrimitive = string | number | boolean | null;
/** A value that survives `JSON.stringify` / `JSON.parse` unchanged. */
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** The deepest nesting of arrays and objects a stored JSON value may have. */
export const MAX_JSON_DEPTH = 512;

/**
 * What is wrong with a text that a store must not hold: a NUL character (U+0000) or a
 * lone UTF-16 surrogate (half of a pair, as `'😀'.slice(0, 1)` gives), with its position
 * in UTF-16 code units. Null when the text is fine.
 *
 * @example
 * ```ts
 * textProblem('Great work \ud83d'); // { position: 11, reason: 'a lone surrogate (U+D83D)' }
 * ```
 */
export function textProblem(text: string): { position: number; reason: string } | null {
  // Hot path: two native scans; the position is looked for only when one fails.
  if (text.isWellFormed() && !text.includes('\u0000')) return null;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0) return { position: i, reason: 'a NUL character' };
    if (c < 0xd800 || c > 0xdfff) continue;
    const next = text.charCodeAt(i + 1);
    if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      i++;
      continue;
    }
    return { position: i, reason: `a lone surrogate (U+${c.toString(16).toUpperCase()})` };
  }
  return null;
}

/** Where and why a value is not storable JSON. */
export interface JsonProblem {
  /** `$` (or the label given) followed by the keys and indexes down to the bad value. */
  path: string;
  reason: string;
  /** For a bad text: the position of the bad character in it. */
  position?: number;
}

const textReason = (p: { position: number; reason: string }, what: string) =>
  `${what} holds ${p.reason} at position ${p.position}; stored text cannot`;

/**
 * Finds the first place where `value` is not plain, storable JSON and describes it, or
 * returns null when it is. Rejects `undefined` (present, not absent), functions,
 * symbols, BigInt, NaN and ±Infinity, cycles, objects whose prototype is not
 * `Object.prototype` or `null` (class instances, Dates, Maps), texts and keys holding a
 * NUL or a lone surrogate (see `textProblem`), and nesting deeper than `MAX_JSON_DEPTH`.
 * It walks with its own stack, so no depth overflows the call stack.
 */
export function findNonJson(value: unknown, path = '$'): JsonProblem | null {
  // Hot path (every stored message and state update passes here): no strings are built
  // unless something is wrong; the path is assembled from the stack only on failure.
  const leaf = leafProblem(value);
  if (leaf === null) return null;
  if (typeof leaf === 'object') return { path, ...leaf };
  if (leaf !== OBJECT) return { path, reason: leaf };
  return visitJson(value as object, path);
}

const OBJECT = '';
const tooDeep = `it nests deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`;

/** null: fine; '' (OBJECT): an object or array to walk; else the reason it is not JSON. */
function leafProblem(v: unknown): string | { reason: string; position: number } | null {
  switch (typeof v) {
    case 'string': {
      const p = textProblem(v);
      return p && { reason: textReason(p, 'the text'), position: p.position };
    }
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
  return v === null ? null : OBJECT;
}

/** Why an object (not an array) is not plain JSON: its prototype is not Object's or null. */
function notPlain(node: object): string | null {
  const proto = Object.getPrototypeOf(node);
  if (proto === Object.prototype || proto === null) return null;
  const name = (node as { constructor?: { name?: string } }).constructor?.name ?? 'object';
  return `an instance of ${name} is not plain JSON`;
}

interface Frame {
  node: object;
  /** The object's keys; null for an array. */
  keys: string[] | null;
  /** The next child to visit. */
  next: number;
}

function visitJson(root: object, label: string): JsonProblem | null {
  const stack: Frame[] = [];
  const seen = new Set<object>();
  // The path to the child the top frame visits last, built only on failure.
  const fail = (reason: string, position?: number): JsonProblem => {
    let path = label;
    for (const f of stack) path += f.keys ? `.${f.keys[f.next - 1]}` : `[${f.next - 1}]`;
    return position === undefined ? { path, reason } : { path, reason, position };
  };
  const enter = (node: object): string | null => {
    if (seen.has(node)) return 'a cycle is not JSON';
    if (stack.length >= MAX_JSON_DEPTH) return tooDeep;
    let keys: string[] | null = null;
    if (!Array.isArray(node)) {
      const why = notPlain(node);
      if (why !== null) return why;
      keys = Object.keys(node);
    }
    seen.add(node);
    stack.push({ node, keys, next: 0 });
    return null;
  };
  const bad = enter(root);
  if (bad !== null) return { path: label, reason: bad };
  while (stack.length > 0) {
    const f = stack[stack.length - 1]!;
    const keys = f.keys;
    const size = keys ? keys.length : (f.node as unknown[]).length;
    if (f.next >= size) {
      seen.delete(f.node);
      stack.pop();
      continue;
    }
    const i = f.next++;
    let child: unknown;
    if (keys) {
      const key = keys[i]!;
      const p = textProblem(key);
      if (p) return fail(textReason(p, 'the key'), p.position);
      child = (f.node as Record<string, unknown>)[key];
    } else {
      child = (f.node as unknown[])[i];
    }
    const leaf = leafProblem(child);
    if (leaf === null) continue;
    if (typeof leaf === 'object') return fail(leaf.reason, leaf.position);
    if (leaf !== OBJECT) return fail(leaf);
    const why = enter(child as object);
    if (why !== null) return fail(why);
  }
  return null;
}

/**
 * Throws a CairnError (`INVALID_ARGUMENT` unless another code is given) when `value`
 * is not plain, storable JSON, naming the path and the reason (`details`: `path`, and
 * `position` for a bad text).
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
    const { reason: _reason, ...details } = bad;
    throw new CairnError(code, `${bad.path}: ${bad.reason}`, { details });
  }
}

/**
 * Sets `key` on `target` as an own, enumerable data property, as `JSON.parse` and
 * `structuredClone` do. A plain `target[key] = value` with the key `"__proto__"` replaces
 * the prototype instead (and the key is lost): every copy or merge of JSON whose keys come
 * from data goes through this.
 *
 * @example
 * ```ts
 * const copy: Record<string, unknown> = {};
 * setOwn(copy, '__proto__', { isAdmin: true });
 * Object.keys(copy); // ['__proto__']; Object.getPrototypeOf(copy) === Object.prototype
 * ```
 */
export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(target, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else {
    target[key] = value;
  }
}

/**
 * A copy of `value` as the JSON a client would receive: object keys whose value is
 * `undefined` are left out, as `JSON.stringify` does (SDK objects built in process carry
 * some); anything else a store would refuse (see `findNonJson`: a Date, a function, NaN, a
 * class instance, a cycle, `undefined` in an array, a bad text or key, nesting deeper than
 * `MAX_JSON_DEPTH`) is `INVALID_ARGUMENT` naming its path under `label`. Every key is
 * copied as an own property (a `"__proto__"` key too, see `setOwn`).
 *
 * @example
 * ```ts
 * toJson({ id: 'm1', metadata: undefined }, 'messages[0]'); // { id: 'm1' }
 * toJson({ at: new Date() }, 'messages[0].metadata'); // throws: messages[0].metadata.at: an instance of Date is not plain JSON
 * ```
 */
export function toJson(value: unknown, label: string): JsonValue {
  return copyJson(value, label, new Set(), 0);
}

/** `depth`: the objects and arrays around `v`; the recursion stops at `MAX_JSON_DEPTH`. */
function copyJson(v: unknown, path: string, seen: Set<object>, depth: number): JsonValue {
  const leaf = leafProblem(v);
  if (leaf === null) return v as JsonValue;
  if (typeof leaf === 'object') throw notJson(path, leaf.reason, leaf.position);
  if (leaf !== OBJECT) throw notJson(path, leaf);
  const node = v as object;
  if (seen.has(node)) throw notJson(path, 'a cycle is not JSON');
  if (depth >= MAX_JSON_DEPTH) throw notJson(path, tooDeep);
  let out: JsonValue;
  seen.add(node);
  if (Array.isArray(node)) {
    out = node.map((x, k) => copyJson(x, `${path}[${k}]`, seen, depth + 1));
  } else {
    const why = notPlain(node);
    if (why !== null) throw notJson(path, why);
    const o: JsonObject = {};
    for (const [k, x] of Object.entries(node)) {
      if (x === undefined) continue;
      const p = textProblem(k);
      if (p) throw notJson(`${path}.${k}`, textReason(p, 'the key'), p.position);
      setOwn(o, k, copyJson(x, `${path}.${k}`, seen, depth + 1));
    }
    out = o;
  }
  seen.delete(node);
  return out;
}

function notJson(path: string, reason: string, position?: number): CairnError {
  return invalidArgument(
    `${path}: ${reason}`,
    position === undefined ? { path } : { path, position },
  );
}
