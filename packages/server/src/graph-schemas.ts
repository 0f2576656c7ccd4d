import type { Json } from './model.js';

/** What a graph's builder holds of its schemas (internal fields of LangGraph's StateGraph). */
interface Builder {
  _schemaRuntimeDefinition?: unknown;
  _inputRuntimeDefinition?: unknown;
  _outputRuntimeDefinition?: unknown;
  _configRuntimeSchema?: unknown;
}

interface StateSchemaLike {
  getJsonSchema(): unknown;
  getInputJsonSchema(): unknown;
}

const isStateSchema = (v: unknown): v is StateSchemaLike =>
  typeof v === 'object' &&
  v !== null &&
  typeof (v as StateSchemaLike).getJsonSchema === 'function' &&
  typeof (v as StateSchemaLike).getInputJsonSchema === 'function';

interface Schemas {
  state?: unknown;
  input?: unknown;
  output?: unknown;
  config?: unknown;
}

/** From `StateSchema` definitions, which describe themselves. */
function fromStateSchema(b: Builder): Schemas | null {
  const {
    _schemaRuntimeDefinition: s,
    _inputRuntimeDefinition: i,
    _outputRuntimeDefinition: o,
  } = b;
  if (!isStateSchema(s) && !isStateSchema(i) && !isStateSchema(o)) return null;
  return {
    state: isStateSchema(s) ? s.getJsonSchema() : undefined,
    input: isStateSchema(i)
      ? i.getInputJsonSchema()
      : isStateSchema(s)
        ? s.getInputJsonSchema()
        : undefined,
    output: isStateSchema(o) ? o.getJsonSchema() : undefined,
  };
}

/** From Zod schemas registered with `withLangGraph` (LangGraph's own reading of them). */
async function fromZodRegistry(graph: unknown): Promise<Schemas | null> {
  try {
    const zod = (await import('@langchain/langgraph/zod/schema' as string)) as Record<
      string,
      (g: unknown) => unknown
    >;
    const out = {
      state: zod.getUpdateTypeSchema?.(graph),
      input: zod.getInputTypeSchema?.(graph),
      output: zod.getOutputTypeSchema?.(graph),
      config: zod.getConfigTypeSchema?.(graph),
    };
    return Object.values(out).some((x) => x != null) ? out : null;
  } catch {
    return null;
  }
}

/** From any Zod schema, converted by LangChain's `toJsonSchema`. */
async function fromPlainZod(b: Builder): Promise<Schemas | null> {
  try {
    const { toJsonSchema } = (await import('@langchain/core/utils/json_schema')) as {
      toJsonSchema(s: unknown): unknown;
    };
    const types = (await import('@langchain/core/utils/types' as string)) as Record<
      string,
      (s: unknown) => boolean
    >;
    const convert = (s: unknown) => {
      if (!s || !(types.isZodSchemaV4?.(s) || types.isZodSchemaV3?.(s))) return undefined;
      try {
        return toJsonSchema(s);
      } catch {
        return undefined;
      }
    };
    const state = convert(b._schemaRuntimeDefinition) as Json | undefined;
    const out = {
      state,
      input:
        convert(b._inputRuntimeDefinition) ??
        (state ? { ...state, required: undefined } : undefined),
      output: convert(b._outputRuntimeDefinition),
      config: convert(b._configRuntimeSchema),
    };
    return Object.values(out).some((x) => x != null) ? out : null;
  } catch {
    return null;
  }
}

/**
 * A graph's JSON schemas as `/assistants/{id}/schemas` shows them, read from the graph at
 * run time: `StateSchema`, Zod with `withLangGraph`, or plain Zod. A graph declared with
 * `Annotation` only gets nulls (the LangGraph API server reads those from the TypeScript
 * source, which this server does not).
 */
export async function graphSchemas(graph: unknown): Promise<Json> {
  const builder = (graph as { builder?: Builder }).builder;
  const found = builder
    ? (fromStateSchema(builder) ?? (await fromZodRegistry(graph)) ?? (await fromPlainZod(builder)))
    : null;
  return {
    input_schema: found?.input ?? null,
    output_schema: found?.output ?? null,
    state_schema: found?.state ?? null,
    config_schema: found?.config ?? null,
    // LangGraph.js does not tell a config schema from a context schema: both are shown.
    context_schema: found?.config ?? null,
  };
}
