import {
  CairnError,
  type ComposeMessage,
  checkKeys,
  keysOf,
  type Provider,
  type ProviderContext,
  type ProviderKeyContext,
  type ProviderResult,
  setOwn,
} from '@cairn/core';
import { LRUCache } from 'lru-cache';
import { checkBudget, checkProvider } from './check-provider.js';
import { freezeCopy, isPlainObject } from './freeze-copy.js';

/** A provider that failed without failing the composition. */
export type ProviderDiagnostic =
  | {
      readonly name: string;
      readonly outcome: 'error';
      readonly error: unknown;
      readonly durationMs: number;
    }
  | {
      readonly name: string;
      readonly outcome: 'timeout';
      readonly timeoutMs: number;
      readonly durationMs: number;
    };

/**
 * The context for one message. Deeply frozen: a cache hit returns the very object the
 * cache holds, so nobody can change it under another caller.
 */
export interface Composed {
  /** The selected providers' non-empty texts, in order, joined with "\n". */
  readonly text: string;
  /** The providers' `values`, merged in order; later providers win. */
  readonly values: Readonly<Record<string, unknown>>;
  /**
   * The providers' `data`, merged in order (later wins), plus `providers`: each
   * successful provider's whole result by name (that key is reserved).
   */
  readonly data: Readonly<Record<string, unknown>> & {
    readonly providers: Readonly<Record<string, Readonly<ProviderResult>>>;
  };
  /** Providers that threw or timed out, in provider order. Empty when all succeeded. */
  readonly diagnostics: readonly ProviderDiagnostic[];
}

/** What the composer uses when `cache` or `timeoutMs` is left out. */
export const COMPOSER_DEFAULTS = Object.freeze({
  /**
   * Every key holds the version token, so entries never go stale; the bound only caps
   * memory. No ttl: a version that does not change is served from the cache.
   */
  cache: Object.freeze({ max: 1000 }),
  /** Long enough for a database query or an embedding call, short enough that a hung provider does not stall a turn. */
  timeoutMs: 5000,
});

/**
 * What the composer needs of a store to hear its forgets: a Cairn `Store` has it
 * (`subscribeForgets`). Declared here by shape, so the composer depends on no store.
 */
export interface ForgetSource {
  subscribeForgets(listener: () => void): () => void;
}

export interface ComposerOptions<M extends ComposeMessage = ComposeMessage, S = unknown> {
  providers?: Iterable<Provider<M, S>>;
  /**
   * The store the providers read. Each `store.forget` (or `destroyDataKeys`) empties the
   * composer's caches, so that no composition holding the forgotten subject's data is
   * served afterwards: in this process before `forget` returns; from another process as
   * far as the store hears it (see `Store.subscribeForgets`; bound the rest with
   * `cache.ttlMs`). `close()` stops listening.
   */
  store?: ForgetSource;
  /**
   * The composition cache: at most `max` entries (LRU), each living at most `ttlMs`.
   * Default `{ max: 1000 }` with no ttl.
   */
  cache?: { max: number; ttlMs?: number };
  /** Default budget for each provider, in ms. Default 5000. */
  timeoutMs?: number;
}

export interface ComposeOptions<S = unknown> {
  /** Also run these providers (the way to run `dynamic` and `private` ones). */
  include?: readonly string[];
  /** Run exactly these providers. Cannot be combined with `include`. */
  only?: readonly string[];
  /** Run every selected provider now, ignoring both caches; the fresh result refreshes them. */
  skipCache?: boolean;
  /**
   * Whatever the providers read besides the message has a version (the thread's state
   * version, the memory version); pass it here. It is part of every cache key, so a
   * new version is never served an entry computed under an old one.
   */
  version?: string | number;
  /** Handed to every provider as `ctx.state`. Not part of the cache key: that is `version`'s job. */
  state?: S;
}

export interface ComposerStats {
  /** Compositions served from the cache. */
  hits: number;
  /** Compositions computed (including `skipCache` calls). */
  misses: number;
  /** Calls that joined a computation already running for the same key. */
  joined: number;
  /** Entries in the composition cache now. */
  size: number;
}

interface Registered<M extends ComposeMessage, S> {
  provider: Provider<M, S>;
  /** Name plus registration number: a provider registered again under the same name gets new cache keys. */
  token: string;
  position: number;
}

type Outcome =
  | { kind: 'ok'; result: Readonly<ProviderResult> }
  | { kind: 'error'; error: unknown; durationMs: number }
  | { kind: 'timeout'; error: CairnError; timeoutMs: number; durationMs: number };

interface CacheEntry {
  composed: Composed;
  tokens: readonly string[];
}

const EMPTY: readonly string[] = Object.freeze([]);

function byPositionThenName<M extends ComposeMessage, S>(
  a: Registered<M, S>,
  b: Registered<M, S>,
): number {
  if (a.position !== b.position) return a.position - b.position;
  const x = a.provider.name;
  const y = b.provider.name;
  return x < y ? -1 : x > y ? 1 : 0;
}

function checkNames(value: unknown, what: string): readonly string[] {
  if (value === undefined) return EMPTY;
  if (!Array.isArray(value) || value.some((n) => typeof n !== 'string')) {
    throw new CairnError('INVALID_ARGUMENT', `${what} must be an array of provider names`, {
      details: { [what]: value },
    });
  }
  return value as string[];
}

function checkResult(name: string, value: unknown): Readonly<ProviderResult> {
  if (value === undefined || value === null) return Object.freeze({});
  const bad = (why: string): never => {
    throw new CairnError('PROVIDER_FAILED', `provider "${name}" returned ${why}`, {
      details: { provider: name },
    });
  };
  if (typeof value !== 'object' || Array.isArray(value))
    bad('something other than an object { text?, values?, data? }');
  const r = value as Record<string, unknown>;
  if (r.text !== undefined && typeof r.text !== 'string') bad('a text that is not a string');
  if (r.values !== undefined && !isPlainObject(r.values)) bad('values that are not a plain object');
  if (r.data !== undefined && !isPlainObject(r.data)) bad('data that is not a plain object');
  const out: ProviderResult = {};
  if (r.text !== undefined) out.text = r.text as string;
  if (r.values !== undefined) out.values = freezeCopy(r.values as Record<string, unknown>);
  if (r.data !== undefined) out.data = freezeCopy(r.data as Record<string, unknown>);
  return Object.freeze(out);
}

/**
 * Runs context providers for a message and caches what they compose. Create one with
 * {@link createComposer}.
 */
export class Composer<M extends ComposeMessage = ComposeMessage, S = unknown> {
  readonly #timeoutMs: number;
  readonly #registry = new Map<string, Registered<M, S>>();
  /** The registry sorted by position then name; rebuilt on (un)registration. */
  #ordered: Registered<M, S>[] = [];
  #seq = 0;
  readonly #cache: LRUCache<string, CacheEntry>;
  readonly #providerCache: LRUCache<string, Readonly<ProviderResult>>;
  readonly #inflight = new Map<string, Promise<Composed>>();
  #hits = 0;
  #misses = 0;
  #joined = 0;
  /** Bumped by `clear()`: a computation that began before it caches nothing. */
  #epoch = 0;
  #unsubscribe: (() => void) | null = null;
  #closed = false;

  constructor(options: ComposerOptions<M, S> = {}) {
    if (typeof options !== 'object' || options === null) {
      throw new CairnError(
        'INVALID_ARGUMENT',
        'createComposer takes options { providers?, cache?: { max, ttlMs? }, timeoutMs? }',
      );
    }
    checkKeys(
      options,
      'createComposer options',
      keysOf<ComposerOptions>()(['providers', 'cache', 'timeoutMs', 'store']),
    );
    const store = options.store;
    if (
      store !== undefined &&
      (typeof store !== 'object' ||
        store === null ||
        typeof (store as Partial<ForgetSource>).subscribeForgets !== 'function')
    ) {
      throw new CairnError(
        'INVALID_ARGUMENT',
        'store must be a Cairn store (an object with subscribeForgets)',
      );
    }
    this.#timeoutMs = checkBudget(options.timeoutMs ?? COMPOSER_DEFAULTS.timeoutMs, 'timeoutMs');
    const cache = (options.cache ?? COMPOSER_DEFAULTS.cache) as
      | { max?: unknown; ttlMs?: unknown }
      | undefined;
    if (typeof cache !== 'object' || cache === null) {
      throw new CairnError('INVALID_ARGUMENT', 'cache must be an object { max, ttlMs? }');
    }
    checkKeys(cache, 'createComposer cache', ['max', 'ttlMs']);
    if (typeof cache.max !== 'number' || !Number.isSafeInteger(cache.max) || cache.max < 1) {
      throw new CairnError(
        'INVALID_ARGUMENT',
        `cache.max must be a positive integer, got ${String(cache.max)}`,
        {
          details: { max: cache.max },
        },
      );
    }
    const ttl = cache.ttlMs === undefined ? undefined : checkBudget(cache.ttlMs, 'cache.ttlMs');
    this.#cache = new LRUCache<string, CacheEntry>(
      ttl === undefined ? { max: cache.max } : { max: cache.max, ttl },
    );
    this.#providerCache = new LRUCache<string, Readonly<ProviderResult>>({ max: cache.max });
    const initial = [...(options.providers ?? [])];
    const names = new Set<string>();
    for (const p of initial) {
      checkProvider(p);
      if (names.has(p.name)) {
        throw new CairnError('INVALID_ARGUMENT', `two providers are named "${p.name}"`, {
          details: { provider: p.name },
        });
      }
      names.add(p.name);
    }
    for (const p of initial) this.#add(p);
    this.#reorder();
    if (store !== undefined) this.#unsubscribe = store.subscribeForgets(() => this.clear());
  }

  /**
   * Composes the context for `message`: runs the selected providers in parallel (or
   * serves a cached composition), orders and merges what they return.
   *
   * Rejects with `INVALID_ARGUMENT` (before running anything) for a bad message, an
   * unknown provider name or bad options; with `PROVIDER_FAILED` or `TIMEOUT` when a
   * `required` provider throws or exceeds its budget. Other providers that fail are
   * left out and listed in `diagnostics`.
   *
   * @example
   * ```ts
   * const composed = await composer.compose(message, {
   *   include: ['SEARCH_RESULTS'],
   *   version: `${thread.stateVersion}:${memory.version}`,
   *   state,
   * });
   * const prompt = renderTemplate('{{persona}}\n\n{{recentMessages}}', composed);
   * ```
   */
  async compose(message: M, options: ComposeOptions<S> = {}): Promise<Composed> {
    if (this.#closed) throw new CairnError('CLOSED', 'this composer is closed');
    if (
      typeof message !== 'object' ||
      message === null ||
      typeof message.id !== 'string' ||
      message.id.length === 0
    ) {
      throw new CairnError(
        'INVALID_ARGUMENT',
        'compose needs a message with a non-empty string id',
      );
    }
    if (typeof options !== 'object' || options === null) {
      throw new CairnError('INVALID_ARGUMENT', 'compose options must be an object');
    }
    checkKeys(
      options,
      'compose options',
      keysOf<ComposeOptions>()(['include', 'only', 'skipCache', 'version', 'state']),
    );
    const { version } = options;
    if (
      version !== undefined &&
      typeof version !== 'string' &&
      !(typeof version === 'number' && Number.isFinite(version))
    ) {
      throw new CairnError('INVALID_ARGUMENT', 'version must be a string or a finite number', {
        details: { version },
      });
    }
    const selected = this.#select(options);
    const tokens = selected.map((r) => r.token);
    const key = JSON.stringify([message.id, tokens, version ?? null]);
    const skipCache = options.skipCache === true;
    if (!skipCache) {
      const entry = this.#cache.get(key);
      if (entry !== undefined) {
        this.#hits++;
        return entry.composed;
      }
      const running = this.#inflight.get(key);
      if (running !== undefined) {
        this.#joined++;
        return running;
      }
    }
    this.#misses++;
    const epoch = this.#epoch;
    const run = this.#run(message, selected, options.state, version, skipCache, epoch).then(
      (composed) => {
        // A composition with a failed provider is not cached, so the next call retries it;
        // nor is one whose providers were unregistered or replaced while it ran, nor one
        // that began before the caches were cleared (it may hold what a forget deleted).
        if (composed.diagnostics.length === 0 && this.#current(tokens) && this.#epoch === epoch)
          this.#cache.set(key, { composed, tokens });
        return composed;
      },
    );
    this.#inflight.set(key, run);
    try {
      return await run;
    } finally {
      if (this.#inflight.get(key) === run) this.#inflight.delete(key);
    }
  }

  /**
   * Adds a provider at run time. A name already registered is `INVALID_ARGUMENT`.
   *
   * @example
   * ```ts
   * composer.registerProvider({ name: 'WEATHER', dynamic: true, get: async ({ signal }) => ({ text: await weather(signal) }) });
   * ```
   */
  registerProvider(provider: Provider<M, S>): void {
    checkProvider(provider);
    if (this.#registry.has(provider.name)) {
      throw new CairnError(
        'INVALID_ARGUMENT',
        `a provider named "${provider.name}" is already registered`,
        {
          details: { provider: provider.name },
        },
      );
    }
    this.#add(provider);
    this.#reorder();
  }

  /**
   * Removes a provider and every cached composition and cached result that used it.
   * Returns false when no provider had that name.
   *
   * @example
   * ```ts
   * composer.unregisterProvider('WEATHER');
   * ```
   */
  unregisterProvider(name: string): boolean {
    const reg = this.#registry.get(name);
    if (reg === undefined) return false;
    this.#registry.delete(name);
    this.#reorder();
    const stale: string[] = [];
    for (const [key, entry] of this.#cache.entries())
      if (entry.tokens.includes(reg.token)) stale.push(key);
    for (const key of stale) this.#cache.delete(key);
    const prefix = `${reg.token}\u0000`;
    const staleResults: string[] = [];
    for (const key of this.#providerCache.keys())
      if (key.startsWith(prefix)) staleResults.push(key);
    for (const key of staleResults) this.#providerCache.delete(key);
    return true;
  }

  /**
   * Empties the composition cache and every provider's cached results. A composition
   * running now still answers its callers but caches nothing, and later calls do not join
   * it: from here on every composition is computed afresh. With the `store` option, each
   * forget of the store calls this.
   *
   * @example
   * ```ts
   * await store.forget({ resourceId: 'user-1' }); // with createComposer({ store }), done already
   * composer.clear();
   * ```
   */
  clear(): void {
    this.#epoch++;
    this.#cache.clear();
    this.#providerCache.clear();
    this.#inflight.clear();
  }

  /**
   * Stops hearing the store's forgets and empties the caches; `compose` is `CLOSED`
   * afterwards. Closing again does nothing.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unsubscribe?.();
    this.#unsubscribe = null;
    this.clear();
  }

  /** The registered providers, in composition order (position, then name). */
  get providers(): readonly Provider<M, S>[] {
    return this.#ordered.map((r) => r.provider);
  }

  /** Cache counters since the composer was created. */
  get stats(): ComposerStats {
    return { hits: this.#hits, misses: this.#misses, joined: this.#joined, size: this.#cache.size };
  }

  #add(provider: Provider<M, S>): void {
    this.#registry.set(provider.name, {
      provider,
      token: `${provider.name}#${++this.#seq}`,
      position: provider.position ?? 0,
    });
  }

  #reorder(): void {
    this.#ordered = [...this.#registry.values()].sort(byPositionThenName);
  }

  #current(tokens: readonly string[]): boolean {
    for (const token of tokens) {
      const name = token.slice(0, token.lastIndexOf('#'));
      if (this.#registry.get(name)?.token !== token) return false;
    }
    return true;
  }

  #select(options: ComposeOptions<S>): Registered<M, S>[] {
    const only = options.only === undefined ? undefined : checkNames(options.only, 'only');
    const include = checkNames(options.include, 'include');
    if (only !== undefined && options.include !== undefined) {
      throw new CairnError('INVALID_ARGUMENT', 'pass either only or include, not both');
    }
    const named = only ?? include;
    const unknown = named.filter((n) => !this.#registry.has(n));
    if (unknown.length > 0) {
      throw new CairnError(
        'INVALID_ARGUMENT',
        `no provider is registered as ${unknown.map((n) => `"${n}"`).join(', ')}`,
        {
          details: { unknown },
        },
      );
    }
    if (only !== undefined) {
      const wanted = new Set(only);
      return this.#ordered.filter((r) => wanted.has(r.provider.name));
    }
    if (include.length === 0)
      return this.#ordered.filter((r) => !r.provider.dynamic && !r.provider.private);
    const extra = new Set(include);
    return this.#ordered.filter(
      (r) => extra.has(r.provider.name) || (!r.provider.dynamic && !r.provider.private),
    );
  }

  /**
   * Runs the selected providers (or reads their caches) in parallel. Providers that share
   * a budget share one timer, and a provider's AbortController is made only when it reads
   * `ctx.signal`: both keep the cost of a miss close to that of a bare Promise.all.
   */
  #run(
    message: M,
    selected: Registered<M, S>[],
    state: S | undefined,
    version: string | number | undefined,
    skipCache: boolean,
    epoch: number,
  ): Promise<Composed> {
    return new Promise<Composed>((resolve, reject) => {
      const count = selected.length;
      const outcomes = new Array<Outcome | undefined>(count);
      const calls = new Array<ProviderCall<M, S> | undefined>(count);
      const timers: ReturnType<typeof setTimeout>[] = [];
      const started = performance.now();
      const keyCtx: ProviderKeyContext<M, S> = { message, state, version };
      let pending = count;
      let settled = false;

      const stop = () => {
        settled = true;
        for (const t of timers) clearTimeout(t);
      };
      const finish = (i: number, outcome: Outcome) => {
        if (settled || outcomes[i] !== undefined) return;
        outcomes[i] = outcome;
        const reg = selected[i]!;
        if (outcome.kind !== 'ok' && reg.provider.required) {
          stop();
          const name = reg.provider.name;
          const reason = new CairnError(
            'ABORTED',
            `composition abandoned: required provider "${name}" failed`,
            {
              details: { provider: name },
            },
          );
          for (let j = 0; j < count; j++) if (outcomes[j] === undefined) calls[j]?.abort(reason);
          reject(requiredFailure(name, outcome));
          return;
        }
        if (--pending === 0) {
          stop();
          resolve(this.#build(selected, outcomes as Outcome[]));
        }
      };

      if (count === 0) {
        resolve(this.#build(selected, []));
        return;
      }
      const byBudget = new Map<number, number[]>();
      for (let i = 0; i < count && !settled; i++) {
        const reg = selected[i]!;
        const { provider } = reg;
        let cacheKey: string | undefined;
        if (provider.cache !== undefined) {
          try {
            const own = provider.cache.key
              ? provider.cache.key(keyCtx)
              : JSON.stringify([message.id, version ?? null]);
            if (typeof own !== 'string') {
              throw new CairnError(
                'PROVIDER_FAILED',
                `provider "${provider.name}": cache.key returned a non-string`,
              );
            }
            cacheKey = `${reg.token}\u0000${own}`;
          } catch (error) {
            finish(i, { kind: 'error', error, durationMs: performance.now() - started });
            continue;
          }
          if (!skipCache) {
            const hit = this.#providerCache.get(cacheKey);
            if (hit !== undefined) {
              finish(i, { kind: 'ok', result: hit });
              continue;
            }
          }
        }
        const budget = provider.timeoutMs ?? this.#timeoutMs;
        const group = byBudget.get(budget);
        if (group === undefined) byBudget.set(budget, [i]);
        else group.push(i);
        const call = new ProviderCall<M, S>(message, state, version);
        calls[i] = call;
        const onValue = (value: unknown) => {
          if (settled || outcomes[i] !== undefined) return;
          let result: Readonly<ProviderResult>;
          try {
            result = checkResult(provider.name, value);
          } catch (error) {
            finish(i, { kind: 'error', error, durationMs: performance.now() - started });
            return;
          }
          if (
            cacheKey !== undefined &&
            this.#registry.get(provider.name) === reg &&
            this.#epoch === epoch
          ) {
            this.#providerCache.set(cacheKey, result, { ttl: provider.cache!.ttlMs });
          }
          finish(i, { kind: 'ok', result });
        };
        const onError = (error: unknown) =>
          finish(i, { kind: 'error', error, durationMs: performance.now() - started });
        let value: unknown;
        try {
          value = provider.get(call);
        } catch (error) {
          onError(error);
          continue;
        }
        if (typeof (value as PromiseLike<unknown> | undefined)?.then === 'function') {
          (value as PromiseLike<unknown>).then(onValue, onError);
        } else {
          onValue(value);
        }
      }
      if (settled) return;
      for (const [budget, group] of byBudget) {
        timers.push(
          setTimeout(() => {
            for (const i of group) {
              if (settled) return;
              if (outcomes[i] !== undefined) continue;
              const name = selected[i]!.provider.name;
              const error = new CairnError(
                'TIMEOUT',
                `provider "${name}" exceeded its ${budget} ms budget`,
                {
                  details: { provider: name, timeoutMs: budget },
                },
              );
              calls[i]?.abort(error);
              finish(i, {
                kind: 'timeout',
                error,
                timeoutMs: budget,
                durationMs: performance.now() - started,
              });
            }
          }, budget),
        );
      }
    });
  }

  #build(selected: Registered<M, S>[], outcomes: Outcome[]): Composed {
    const texts: string[] = [];
    const values: Record<string, unknown> = {};
    const data: Record<string, unknown> = {};
    const providers: Record<string, Readonly<ProviderResult>> = {};
    const diagnostics: ProviderDiagnostic[] = [];
    selected.forEach((reg, i) => {
      const name = reg.provider.name;
      const o = outcomes[i]!;
      if (o.kind === 'ok') {
        const r = o.result;
        if (r.text !== undefined && r.text.trim() !== '') texts.push(r.text);
        if (r.values) for (const k of Object.keys(r.values)) setOwn(values, k, r.values[k]);
        if (r.data) for (const k of Object.keys(r.data)) setOwn(data, k, r.data[k]);
        setOwn(providers, name, r);
      } else if (o.kind === 'timeout') {
        diagnostics.push(
          Object.freeze({
            name,
            outcome: 'timeout',
            timeoutMs: o.timeoutMs,
            durationMs: o.durationMs,
          }),
        );
      } else {
        diagnostics.push(
          Object.freeze({ name, outcome: 'error', error: o.error, durationMs: o.durationMs }),
        );
      }
    });
    data.providers = Object.freeze(providers);
    return Object.freeze({
      text: texts.join('\n'),
      values: Object.freeze(values),
      data: Object.freeze(data) as Composed['data'],
      diagnostics: Object.freeze(diagnostics),
    });
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Creates a composer: a set of context providers, run in parallel with budgets, and a
 * bounded LRU cache of their compositions keyed by message id, provider set and version.
 * `cache` defaults to `{ max: 1000 }` and `timeoutMs` to 5000 ({@link COMPOSER_DEFAULTS}).
 *
 * @example
 * ```ts
 * const composer = createComposer({
 *   providers: [
 *     { name: 'PERSONA', position: -10, get: () => ({ text: 'You are terse.', values: { persona: 'terse' } }) },
 *     { name: 'RECENT', get: async ({ message, signal }) => ({ text: await recent(message, signal) }) },
 *   ],
 * });
 * const composed = await composer.compose(message, { version: thread.stateVersion });
 * ```
 */
export function createComposer<M extends ComposeMessage = ComposeMessage, S = unknown>(
  options: ComposerOptions<M, S> = {},
): Composer<M, S> {
  return new Composer<M, S>(options);
}

function requiredFailure(name: string, outcome: Exclude<Outcome, { kind: 'ok' }>): CairnError {
  return outcome.kind === 'timeout'
    ? new CairnError(
        'TIMEOUT',
        `required provider "${name}" timed out after ${outcome.timeoutMs} ms`,
        {
          cause: outcome.error,
          details: { provider: name, timeoutMs: outcome.timeoutMs, durationMs: outcome.durationMs },
        },
      )
    : new CairnError(
        'PROVIDER_FAILED',
        `required provider "${name}" failed: ${describe(outcome.error)}`,
        {
          cause: outcome.error,
          details: { provider: name, durationMs: outcome.durationMs },
        },
      );
}

/**
 * The context one provider call receives. Its AbortController is created on the first
 * read of `signal` (most providers never read it); an abort that happened before then
 * is applied at that moment.
 */
class ProviderCall<M extends ComposeMessage, S> implements ProviderContext<M, S> {
  readonly message: M;
  readonly state: S | undefined;
  readonly version: string | number | undefined;
  #controller: AbortController | undefined;
  #reason: unknown;
  #aborted = false;

  constructor(message: M, state: S | undefined, version: string | number | undefined) {
    this.message = message;
    this.state = state;
    this.version = version;
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
  }
}
