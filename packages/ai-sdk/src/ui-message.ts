import { invalidArgument, type JsonObject, type JsonValue } from '@cairn/core';
import type { UIMessage } from 'ai';

/** The roles the AI SDK gives a `UIMessage`. */
const ROLES: ReadonlySet<string> = new Set(['system', 'user', 'assistant']);

/**
 * Checks the shape the AI SDK requires of a `UIMessage` (a non-empty string id, a known
 * role, parts an array) without reading its content: cheap enough for every message of a
 * long list. `INVALID_ARGUMENT` names the position.
 */
export function checkShape(m: unknown, i: number): asserts m is UIMessage {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) {
    throw invalidArgument(`messages[${i}] must be a UIMessage object`, { index: i });
  }
  const { id, role, parts } = m as Partial<UIMessage>;
  if (typeof id !== 'string' || id.length === 0) {
    throw invalidArgument(`messages[${i}].id must be a non-empty string, got ${String(id)}`, {
      index: i,
    });
  }
  if (typeof role !== 'string' || !ROLES.has(role)) {
    throw invalidArgument(
      `messages[${i}].role must be 'system', 'user' or 'assistant', got ${JSON.stringify(role)}`,
      { index: i, id },
    );
  }
  if (!Array.isArray(parts)) {
    throw invalidArgument(`messages[${i}].parts must be an array`, { index: i, id });
  }
}

/**
 * The message as the JSON the client would receive: object keys whose value is
 * `undefined` are left out (as `JSON.stringify` does; the AI SDK's own objects carry
 * some), anything else that is not plain JSON (a Date, a function, NaN, a class
 * instance, a cycle) is `INVALID_ARGUMENT` naming its path, e.g. `messages[3].metadata.at`.
 */
export function toJson(m: UIMessage, i: number): JsonObject {
  return plain(m, `messages[${i}]`, new Set()) as JsonObject;
}

function plain(v: unknown, path: string, seen: Set<object>): JsonValue {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return v;
    case 'number':
      if (Number.isFinite(v)) return v;
      throw invalidArgument(`${path}: ${v} is not a JSON number`, { path });
    case 'object':
      break;
    default:
      throw invalidArgument(
        `${path}: ${typeof v === 'undefined' ? 'undefined' : `a ${typeof v}`} is not JSON`,
        {
          path,
        },
      );
  }
  if (v === null) return null;
  if (seen.has(v)) throw invalidArgument(`${path}: a cycle is not JSON`, { path });
  seen.add(v);
  let out: JsonValue;
  if (Array.isArray(v)) {
    out = v.map((x, k) => plain(x, `${path}[${k}]`, seen));
  } else {
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) {
      const name = (v as { constructor?: { name?: string } }).constructor?.name ?? 'object';
      throw invalidArgument(`${path}: an instance of ${name} is not plain JSON`, { path });
    }
    const o: JsonObject = {};
    for (const [k, x] of Object.entries(v)) {
      if (x !== undefined) o[k] = plain(x, `${path}.${k}`, seen);
    }
    out = o;
  }
  seen.delete(v);
  return out;
}
