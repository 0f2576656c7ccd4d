import { isDeepStrictEqual } from 'node:util';
import { type JsonObject, type JsonValue, setOwn } from '@cairn/core';
import { JsonPlusSerializer, type SerializerProtocol } from '@langchain/langgraph-checkpoint';
import { isJsonObject } from './message-data.js';
import type { CachedNode } from './thread-log.js';

/** A LangChain class `load` instantiates: `new builder(fields)`. */
type Builder = new (fields: Record<string, unknown>) => object;

/** Nesting deeper than this goes to the serde (`load` refuses 50 levels). */
const MAX_DEPTH = 40;

const SEPARATORS = /[-_\s]+/g;

/** `camelCase` of @langchain/core's load/map_keys: a key of `kwargs` as a constructor field. */
function camelCase(key: string): string {
  const trimmed = key.trim();
  if (!/[-_\s]/.test(trimmed)) return trimmed;
  return trimmed
    .replace(SEPARATORS, '_')
    .toLowerCase()
    .replace(/_+([a-z0-9])/g, (_, char: string) => char.toUpperCase());
}

/** `combineAliasesAndInvert` of @langchain/core's load: a class's `lc_aliases`, inverted. */
function invertedAliases(builder: Builder): Record<string, string> {
  const aliases: Record<string, string> = {};
  for (
    let current: unknown = builder;
    typeof current === 'function' && current.prototype;
    current = Object.getPrototypeOf(current)
  ) {
    Object.assign(aliases, Reflect.get(current.prototype as object, 'lc_aliases'));
  }
  return Object.entries(aliases).reduce(
    (acc, [key, value]) => {
      acc[value] = key;
      return acc;
    },
    {} as Record<string, string>,
  );
}

/** `{lc: 2, type: 'undefined'}`: how the default serde writes `undefined`. */
function isUndefinedRecord(value: JsonValue): boolean {
  return (
    isJsonObject(value) &&
    value.lc === 2 &&
    value.type === 'undefined' &&
    Object.keys(value).length === 2
  );
}

/**
 * Whether JSON data holds nothing either reviver of the default serde treats specially but
 * `undefined` (`isUndefinedRecord`: the serde drops the key, or writes null in a list): no other
 * object with an `lc` key (a LangChain record of any kind), `__lc_escaped__` or `__proto__`, no
 * -0 (JSON text drops its sign), nested less than `MAX_DEPTH` deep. 1: it holds `undefined`s.
 */
function scan(value: JsonValue, depth: number): 0 | 1 | null {
  if (typeof value === 'number') return Object.is(value, -0) ? null : 0;
  if (typeof value !== 'object' || value === null) return 0;
  if (depth > MAX_DEPTH) return null;
  let found: 0 | 1 = 0;
  if (Array.isArray(value)) {
    for (const v of value) {
      const s = scan(v, depth + 1);
      if (s === null) return null;
      if (s === 1) found = 1;
    }
    return found;
  }
  for (const key in value) {
    if (key === 'lc') return isUndefinedRecord(value) ? 1 : null;
    if (key === '__lc_escaped__' || key === '__proto__') return null;
    const s = scan(value[key]!, depth + 1);
    if (s === null) return null;
    if (s === 1) found = 1;
  }
  return found;
}

/** A deep copy of JSON data that `scan` accepts, as the serde revives it: without `undefined`s. */
function copy(value: JsonValue): JsonValue {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    return value.map((v) => (isUndefinedRecord(v) ? null : copy(v)));
  }
  const out: JsonObject = {};
  for (const key in value) {
    const v = value[key]!;
    if (isUndefinedRecord(v)) continue;
    setOwn(out, key, copy(v));
  }
  return out;
}

/**
 * What identifies a serialized LangChain message the fast path can build: its class id and its
 * `kwargs` keys, after a flag ('1': its data holds `undefined`s, see `scan`); or null when the
 * serde must revive it (anything but `{lc: 1, type: 'constructor', id, kwargs}` with kwargs
 * `scan` accepts).
 */
function signature(value: JsonValue): string | null {
  if (!isJsonObject(value)) return null;
  const { lc, type, id, kwargs } = value;
  if (lc !== 1 || type !== 'constructor' || Object.keys(value).length !== 4) return null;
  if (!Array.isArray(id) || !id.every((s) => typeof s === 'string')) return null;
  if (!isJsonObject(kwargs)) return null;
  const undefineds = scan(kwargs, 1);
  if (undefineds === null || (undefineds === 1 && isUndefinedRecord(kwargs))) return null;
  return `${undefineds}${id.join('\u0000')}\u0001${Object.keys(kwargs).join('\u0000')}`;
}

/**
 * Whether `serde` is LangGraph's default serde (`JsonPlusSerializer`) with these methods as
 * its class has them, none overridden: what the saver's own fast paths stand in for.
 */
export function isStockSerde(serde: SerializerProtocol, methods: readonly string[]): boolean {
  const stock = JsonPlusSerializer.prototype as unknown as Record<string, unknown>;
  const own = serde as unknown as Record<string, unknown>;
  return serde instanceof JsonPlusSerializer && methods.every((m) => own[m] === stock[m]);
}

/**
 * LangChain messages revived as LangGraph's default serde (`JsonPlusSerializer`) revives them,
 * without its detour: it walks the parsed value with an async reviver, writes each LangChain
 * record back to text and hands it to @langchain/core's `load`, which parses it and walks it
 * again (a promise per value), then calls `new Class(fields)`, the fields being `kwargs` with
 * each key as the class's `lc_aliases` or `camelCase` map it. For a message whose `kwargs` hold
 * nothing either walk changes but `undefined`s (`scan`), that last call is the whole result, and the fast
 * path makes only it, on a fresh copy of `kwargs`.
 *
 * The class comes from the serde itself: the first message of each class and set of keys is
 * revived by the serde, built again by the fast path, and the fast path is used for that
 * signature only if the two are deeply equal. A custom serde is used as it is.
 */
export class MessageReviver {
  #serde: SerializerProtocol | undefined;
  #stock = false;
  /** By signature: the class the serde instantiated, null when the fast path differed. */
  readonly #builders = new Map<
    string,
    { builder: Builder; aliases: Record<string, string> } | null
  >();

  /** Whether `serde` is the default serde, whose messages `revive` builds. */
  covers(serde: SerializerProtocol): boolean {
    if (serde !== this.#serde) {
      this.#serde = serde;
      this.#stock = isStockSerde(serde, ['loadsTyped', '_loads']);
    }
    return this.#stock;
  }

  /**
   * One message node as the default serde's `loadsTyped('json', text)` gives it, each call a
   * new value; `slow` is that call. Only for a serde it `covers`.
   */
  async revive(node: CachedNode, slow: () => Promise<unknown>): Promise<unknown> {
    if (node.sig === undefined) node.sig = signature(this.#data(node));
    if (node.sig === null) return slow();
    const known = this.#builders.get(node.sig);
    if (known) return this.#build(node, known.builder, known.aliases);
    if (known === null) return slow();
    const revived = await slow();
    const builder =
      typeof revived === 'object' && revived !== null
        ? (Object.getPrototypeOf(revived) as { constructor?: unknown } | null)?.constructor
        : undefined;
    let learned: { builder: Builder; aliases: Record<string, string> } | null = null;
    if (typeof builder === 'function') {
      const candidate = {
        builder: builder as Builder,
        aliases: invertedAliases(builder as Builder),
      };
      try {
        if (isDeepStrictEqual(this.#build(node, candidate.builder, candidate.aliases), revived)) {
          learned = candidate;
        }
      } catch {
        // Not buildable this way: the serde keeps reviving this signature.
      }
    }
    this.#builders.set(node.sig, learned);
    return revived;
  }

  /** The node's data, parsed (the cache holds its text, its value, or both). */
  #data(node: CachedNode): JsonValue {
    return node.value ?? (JSON.parse(node.json!) as JsonValue);
  }

  #build(node: CachedNode, builder: Builder, aliases: Record<string, string>): object {
    // A fresh kwargs each call: the message owns it, as the serde's would.
    const sig = node.sig!;
    const data = (
      node.json === undefined
        ? copy(node.value!)
        : sig[0] === '1'
          ? copy(JSON.parse(node.json) as JsonValue)
          : JSON.parse(node.json)
    ) as JsonObject;
    const kwargs = data.kwargs as JsonObject;
    const id = data.id as string[];
    const fields: Record<string, unknown> = {};
    for (const key in kwargs) fields[aliases[key] || camelCase(key)] = kwargs[key];
    const instance = new builder(fields);
    Object.defineProperty(instance.constructor, 'name', { value: id[id.length - 1] });
    return instance;
  }
}
