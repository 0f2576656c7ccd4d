import { type JsonObject, type JsonValue, jsonEqual } from '@cairn/core';

const BASE: JsonObject = { additional_kwargs: {}, response_metadata: {} };
const AI: JsonObject = { tool_calls: [], invalid_tool_calls: [], ...BASE };

/**
 * What the default serde writes in a message's `kwargs` for the fields a message of each class
 * (`@langchain/core` 1.x, `langchain_core.messages`) leaves at their defaults, in its order: a
 * message made with its own fields (`new AIMessage({ id, content })`) expands to the serde's
 * very text; one whose id LangGraph set afterwards (the serde writes it last) to the same value
 * with its keys in another order.
 *
 * Compact data is read back through this table, so an entry must never change: stored messages
 * would read back with a field more or less. A `@langchain/core` that writes other defaults only
 * leaves its messages less compact (`compactMessage` checks that they expand back).
 */
const DEFAULTS: Record<string, JsonObject> = {
  HumanMessage: BASE,
  HumanMessageChunk: BASE,
  SystemMessage: BASE,
  SystemMessageChunk: BASE,
  ToolMessage: BASE,
  ToolMessageChunk: BASE,
  FunctionMessage: BASE,
  FunctionMessageChunk: BASE,
  ChatMessage: BASE,
  ChatMessageChunk: BASE,
  AIMessage: AI,
  AIMessageChunk: { tool_calls: [], invalid_tool_calls: [], tool_call_chunks: [], ...BASE },
};

function defaultsOf(type: string | null): JsonObject | undefined {
  return type !== null && Object.hasOwn(DEFAULTS, type) ? DEFAULTS[type] : undefined;
}

/** A JSON object (not an array, not null). */
export function isJsonObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A serialized LangChain message as a Cairn message's data: its `kwargs` without the fields at
 * their class's defaults (`{id, content}` for a plain chat message), since the Cairn message's
 * `type` names the class. Anything else, or a message that would not expand back to exactly
 * `full`, is stored as it is.
 */
export function compactMessage(type: string | null, full: JsonValue): JsonValue {
  const defaults = defaultsOf(type);
  if (!defaults || !isJsonObject(full) || Object.keys(full).length !== 4) return full;
  const { lc, type: kind, id, kwargs } = full;
  if (lc !== 1 || kind !== 'constructor' || !isJsonObject(kwargs) || Object.hasOwn(kwargs, 'lc')) {
    return full;
  }
  if (!jsonEqual(id, ['langchain_core', 'messages', type])) return full;
  const data = Object.fromEntries(
    Object.entries(kwargs).filter(
      ([key, value]) => !Object.hasOwn(defaults, key) || !jsonEqual(value, defaults[key]),
    ),
  );
  return jsonEqual(expandMessage(type, data), full) ? data : full;
}

/**
 * The serialized message a Cairn message's data stands for: data with an `lc` key (stored
 * whole, as earlier versions stored every message) as it is, compact data with its class's
 * defaults put back.
 */
export function expandMessage(type: string | null, data: JsonValue): JsonValue {
  const defaults = defaultsOf(type);
  if (!defaults || !isJsonObject(data) || Object.hasOwn(data, 'lc')) return data;
  const kwargs: JsonObject = { ...data };
  for (const [key, value] of Object.entries(defaults)) {
    if (!Object.hasOwn(kwargs, key)) kwargs[key] = structuredClone(value);
  }
  return { lc: 1, type: 'constructor', id: ['langchain_core', 'messages', type!], kwargs };
}
