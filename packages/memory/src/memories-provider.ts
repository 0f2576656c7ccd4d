import {
  CairnError,
  type ComposeMessage,
  checkKeys,
  keysOf,
  type MemoryType,
  type Provider,
  type ProviderContext,
  type Viewer,
} from '@cairn/core';
import type { BranchView } from '@cairn/store';
import type { AgentMemory, RecallHit, RecallMode } from './agent-memory.js';

/** What `memoriesProvider` puts in `data.memories`. */
export interface RecalledMemory {
  id: string;
  text: string;
  score: number;
  sources: string[];
}

export interface MemoriesProviderOptions<M extends ComposeMessage = ComposeMessage, S = unknown> {
  /** Memories to recall (default 5). */
  limit?: number;
  /** Who is asking, from the composer's context (the user's room and world). Required: there is no safe guess. */
  viewerFrom: (ctx: ProviderContext<M, S>) => Viewer;
  /**
   * Where the conversation stands, from the context (a thread and branch): branch-scoped
   * memories are recalled only from branches that hold their message (see
   * `RecallOptions.branch`). Default: none, so no branch-scoped memory is recalled.
   */
  branchFrom?: (ctx: ProviderContext<M, S>) => BranchView | null | undefined;
  /** The query, from the context (default: the message's text: `message` itself when a string, else its `text`, `content` or `data` (or their `.text`) when strings). */
  queryFrom?: (ctx: ProviderContext<M, S>) => string | null | undefined;
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
 * A context provider for @cairn/compose that recalls the
 * memories relevant to the message being answered, as the viewer `viewerFrom` returns
 * may see them. Text: a heading and one line per memory; values: `{ memories }` (that
 * text); data: `{ memories: [{ id, text, score, sources }] }` ({@link RecalledMemory}).
 * With no query text it returns nothing. Use `memory.version` in the composer's cache
 * `version`. Name your message type (`memoriesProvider<ChatMessage>`) to read its fields
 * in `viewerFrom`.
 *
 * @example
 * ```ts
 * const composer = createComposer<ChatMessage>({
 *   providers: [
 *     memoriesProvider<ChatMessage>(memory, {
 *       viewerFrom: (ctx) => ({ agentId: 'assistant', roomId: ctx.message.roomId }),
 *     }),
 *   ],
 * });
 * await composer.compose(message, { version: `${threadVersion}:${memory.version}` });
 * ```
 */
export function memoriesProvider<M extends ComposeMessage = ComposeMessage, S = unknown>(
  memory: AgentMemory,
  options: MemoriesProviderOptions<M, S>,
): Provider<M, S> {
  if (typeof options !== 'object' || options === null || typeof options.viewerFrom !== 'function') {
    throw new CairnError(
      'INVALID_ARGUMENT',
      'memoriesProvider needs { viewerFrom(ctx) => viewer }',
    );
  }
  checkKeys(
    options,
    'memoriesProvider options',
    keysOf<MemoriesProviderOptions>()([
      'limit',
      'viewerFrom',
      'branchFrom',
      'queryFrom',
      'name',
      'mode',
      'types',
      'threshold',
      'recencyHalfLifeMs',
      'heading',
      'position',
      'timeoutMs',
    ]),
    { viewer: 'memoriesProvider takes viewerFrom: (ctx) => viewer' },
  );
  const limit = options.limit ?? 5;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
    throw new CairnError(
      'INVALID_ARGUMENT',
      `limit must be an integer from 1 to 1000, got ${String(limit)}`,
    );
  const queryFrom = options.queryFrom ?? ((ctx: ProviderContext<M, S>) => messageText(ctx.message));
  const heading = options.heading ?? '# Relevant memories';
  const provider: Provider<M, S> = {
    name: options.name ?? 'MEMORIES',
    description: 'Long-term memories relevant to the current message',
    dynamic: false,
    async get(ctx) {
      const query = queryFrom(ctx);
      if (typeof query !== 'string' || query.trim() === '')
        return { text: '', values: { memories: '' }, data: { memories: [] } };
      const branch = options.branchFrom?.(ctx);
      const hits: RecallHit[] = await memory.recall(query, {
        viewer: options.viewerFrom(ctx),
        ...(branch ? { branch } : {}),
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
          memories: hits.map(
            (h): RecalledMemory => ({
              id: h.memory.id,
              text: h.memory.content.text,
              score: h.score,
              sources: [...h.sources],
            }),
          ),
        },
      };
    },
  };
  if (options.position !== undefined) provider.position = options.position;
  if (options.timeoutMs !== undefined) provider.timeoutMs = options.timeoutMs;
  return provider;
}
