import { CairnError } from '@cairn/core';

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

/** The largest delay setTimeout honours; longer ones fire at once. */
const MAX_TIMER_MS = 2_147_483_647;

export function checkBudget(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_TIMER_MS) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `${what} must be a positive number of milliseconds up to ${MAX_TIMER_MS}, got ${String(value)}`,
      {
        details: { value },
      },
    );
  }
  return value;
}

/** Checks a provider's shape before it is registered. */
export function checkProvider(
  provider: unknown,
): asserts provider is Provider<ComposeMessage, unknown> {
  if (typeof provider !== 'object' || provider === null) {
    throw new CairnError('INVALID_ARGUMENT', 'a provider must be an object');
  }
  const p = provider as Partial<Record<keyof Provider, unknown>>;
  if (typeof p.name !== 'string' || p.name.length === 0) {
    throw new CairnError('INVALID_ARGUMENT', 'a provider needs a non-empty string name', {
      details: { name: p.name },
    });
  }
  const name = p.name;
  const fail = (message: string): never => {
    throw new CairnError('INVALID_ARGUMENT', `provider "${name}": ${message}`, {
      details: { provider: name },
    });
  };
  if (typeof p.get !== 'function') fail('get must be a function');
  if (
    p.position !== undefined &&
    (typeof p.position !== 'number' || !Number.isFinite(p.position))
  ) {
    fail('position must be a finite number');
  }
  if (p.timeoutMs !== undefined) checkBudget(p.timeoutMs, `provider "${name}": timeoutMs`);
  if (p.cache !== undefined) {
    if (typeof p.cache !== 'object' || p.cache === null)
      fail('cache must be an object { ttlMs, key? }');
    const c = p.cache as { ttlMs?: unknown; key?: unknown };
    checkBudget(c.ttlMs, `provider "${name}": cache.ttlMs`);
    if (c.key !== undefined && typeof c.key !== 'function') fail('cache.key must be a function');
  }
}
