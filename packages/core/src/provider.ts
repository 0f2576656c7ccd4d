/**
 * The context-provider contract, shared by @cairn/compose (which runs providers) and the
 * packages that offer them (@cairn/thread, @cairn/memory), so none restates it.
 */

/** The least a message must have to be composed for: an id, which keys the caches. */
export interface ComposeMessage {
  id: string;
}

/** What a provider gives back. Every part is optional; `undefined` contributes nothing. */
export interface ProviderResult {
  /** A block of context text. Empty or whitespace-only text is skipped. */
  text?: string;
  /** Template values, merged across providers in order (later wins). */
  values?: Record<string, unknown>;
  /** Structured data, merged across providers in order (later wins). */
  data?: Record<string, unknown>;
}

/** What a provider's `cache.key` sees. */
export interface ProviderKeyContext<M extends ComposeMessage = ComposeMessage, S = unknown> {
  message: M;
  /** Whatever the caller passed as `state` to `compose`. */
  state: S | undefined;
  /** The caller's version token, if any. */
  version: string | number | undefined;
}

/** What a provider's `get` receives. */
export interface ProviderContext<M extends ComposeMessage = ComposeMessage, S = unknown>
  extends ProviderKeyContext<M, S> {
  /**
   * Aborted when the provider exceeds its budget (reason: a `TIMEOUT` CairnError) or
   * when a required provider fails and the composition is abandoned (reason: `ABORTED`).
   * Pass it on to fetch, database calls and the like.
   */
  signal: AbortSignal;
}

/**
 * A source of context. `get` runs once per composition that selects it (unless its own
 * `cache` has a fresh entry), in parallel with the other providers.
 *
 * @example
 * ```ts
 * const clock: Provider = {
 *   name: 'CLOCK',
 *   position: 100,
 *   get: () => ({ text: `Now: ${new Date().toISOString()}`, values: { now: Date.now() } }),
 * };
 * ```
 */
export interface Provider<M extends ComposeMessage = ComposeMessage, S = unknown> {
  /** Unique within a composer; selected by this name in `include` and `only`. */
  name: string;
  description?: string;
  /** Sort key, ascending; ties are broken by name. Default 0. */
  position?: number;
  /** Dynamic providers run only when named in `include` or `only`. */
  dynamic?: boolean;
  /** Private providers run only when named in `include` or `only`. */
  private?: boolean;
  /** This provider's budget in ms; default the composer's `timeoutMs`. */
  timeoutMs?: number;
  /** When it throws or times out, the whole composition fails instead of skipping it. */
  required?: boolean;
  /**
   * Reuse this provider's result across compositions for `ttlMs`. Entries are keyed by
   * `key(ctx)`, by default the message id and the version token.
   */
  cache?: { ttlMs: number; key?: (ctx: ProviderKeyContext<M, S>) => string };
  get(ctx: ProviderContext<M, S>): ProviderResult | undefined | Promise<ProviderResult | undefined>;
}
