import {
  CairnError,
  type JsonObject,
  type JsonValue,
  type MemoryType,
  type Viewer,
} from '@cairn/core';
import type { AgentMemory, RecallHit, RecallMode } from './agent-memory.js';

/** The part of a composer's context this provider reads (structurally @cairn/compose's `ProviderContext`). */
export interface MemoriesProviderContext {
  message: unknown;
  state?: unknown;
  signal?: AbortSignal;
}

/** What the provider returns: the shape @cairn/compose expects of a provider. */
export interface MemoriesProviderResult {
  text: string;
  values: Record<string, JsonValue>;
  data: {
    memories: Array<{ id: string; text: string; score: number; sources: string[] }>;
  } & JsonObject;
}

export interface MemoriesProviderOptions<
  C extends MemoriesProviderContext = MemoriesProviderContext,
> {
  /** Memories to recall (default 5). */
  limit?: number;
  /** Who is asking, from the composer's context (the user's room and world). Required: there is no safe guess. */
  viewerFrom: (ctx: C) => Viewer;
  /** The query, from the context (default: the message's text: `message` itself when a string, else its `text`, `content` or `data` (or their `.text`) when strings). */
  queryFrom?: (ctx: C) => string | null | undefined;
  /** Default `MEMORIES`. */
  name?: string;
  mode?: RecallMode;
  types?: MemoryType[];
  threshold?: number;
  recencyHalfLifeMs?: number;
  /** Heading above the list (default `# Relevant memories`). */
  heading?: string;
  position?: number;
  timeoutMs?: number;
}

export interface MemoriesProvider<C extends MemoriesProviderContext = MemoriesProviderContext> {
  name: string;
  description: string;
  dynamic: boolean;
  position?: number;
  timeoutMs?: number;
  get(ctx: C): Promise<MemoriesProviderResult>;
}

/** The text of a message: a string, or `data.text`, `data.content` or `content.text` when they are strings. */
function messageText(message: unknown): string | null {
  if (typeof message === 'string') return message;
  if (typeof message !== 'object' || message === null) return null;
  const m = message as { data?: unknown; text?: unknown; content?: unknown };
  for (const candidate of [m.text, m.content, m.data]) {
    if (typeof candidate === 'string') return candidate;
    if (typeof candidate === 'object' && candidate !== null) {
      const inner = candidate as { text?: unknown; content?: unknown };
      if (typeof inner.text === 'string') return inner.text;
      if (typeof inner.content === 'string') return inner.content;
    }
  }
  return null;
}

/**
 * A context provider for @cairn/compose (structurally its `Provider`) that recalls the
 * memories relevant to the message being answered, as the viewer `viewerFrom` returns
 * may see them. Text: a heading and one line per memory; values: `{ memories }` (that
 * text); data: `{ memories: [{ id, text, score, sources }] }`. With no query text it
 * returns nothing. Use `memory.version` in the composer's cache `version`.
 *
 * @example
 * ```ts
 * const composer = createComposer({
 *   providers: [memoriesProvider(memory, { limit: 5, viewerFrom: (ctx) => ({ agentId: 'assistant', roomId: roomOf(ctx) }) })],
 * });
 * await composer.compose(message, { version: `${threadVersion}:${memory.version}` });
 * ```
 */
export function memoriesProvider<C extends MemoriesProviderContext = MemoriesProviderContext>(
  memory: AgentMemory,
  options: MemoriesProviderOptions<C>,
): MemoriesProvider<C> {
  if (typeof options !== 'object' || options === null || typeof options.viewerFrom !== 'function') {
    throw new CairnError(
      'INVALID_ARGUMENT',
      'memoriesProvider needs { viewerFrom(ctx) => viewer }',
    );
  }
  const limit = options.limit ?? 5;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
    throw new CairnError(
      'INVALID_ARGUMENT',
      `limit must be an integer from 1 to 1000, got ${String(limit)}`,
    );
  const queryFrom = options.queryFrom ?? ((ctx: C) => messageText(ctx.message));
  const heading = options.heading ?? '# Relevant memories';
  const provider: MemoriesProvider<C> = {
    name: options.name ?? 'MEMORIES',
    description: 'Long-term memories relevant to the current message',
    dynamic: false,
    async get(ctx) {
      const query = queryFrom(ctx);
      if (typeof query !== 'string' || query.trim() === '')
        return { text: '', values: { memories: '' }, data: { memories: [] } };
      const hits: RecallHit[] = await memory.recall(query, {
        viewer: options.viewerFrom(ctx),
        limit,
        ...(options.mode === undefined ? {} : { mode: options.mode }),
        ...(options.types === undefined ? {} : { types: options.types }),
        ...(options.threshold === undefined ? {} : { threshold: options.threshold }),
        ...(options.recencyHalfLifeMs === undefined
          ? {}
          : { recencyHalfLifeMs: options.recencyHalfLifeMs }),
        ...(ctx.signal ? { signal: ctx.signal } : {}),
      });
      const lines = hits.map((h) => `- ${h.memory.content.text.replace(/\s+/g, ' ').trim()}`);
      const text = lines.length ? `${heading}\n${lines.join('\n')}` : '';
      return {
        text,
        values: { memories: text },
        data: {
          memories: hits.map((h) => ({
            id: h.memory.id,
            text: h.memory.content.text,
            score: h.score,
            sources: [...h.sources],
          })),
        },
      };
    },
  };
  if (options.position !== undefined) provider.position = options.position;
  if (options.timeoutMs !== undefined) provider.timeoutMs = options.timeoutMs;
  return provider;
}
