import { CairnError, checkKeys, keysOf } from '@cairn/core';
import type { Embedder } from './embedder.js';

export interface OpenAIEmbedderOptions {
  /**
   * The API root, e.g. `http://127.0.0.1:11434/v1`. Default: the `OPENAI_BASE_URL`
   * environment variable, else `https://api.openai.com/v1` (as the OpenAI SDK does).
   */
  baseURL?: string;
  /**
   * Sent as `Authorization: Bearer <apiKey>` when there is one. Default: the
   * `OPENAI_API_KEY` environment variable. Required for OpenAI's own API.
   */
  apiKey?: string;
  /** Default `text-embedding-3-small`. */
  model?: string;
  /**
   * The vector width. Needed unless the model is one of OpenAI's known ones; when given
   * it is also sent as the request's `dimensions` (models that can shorten their vectors
   * honour it).
   */
  dimensions?: number;
  /** Texts per request (default 96). */
  batchSize?: number;
  /** Per request, including the reading of the body (default 30 000). */
  timeoutMs?: number;
  /** Retries of a request after a 429, a 5xx, a network error or a timeout (default 4). */
  maxRetries?: number;
  /** First back-off delay; it doubles on each retry, with jitter (default 500). */
  retryBaseMs?: number;
  /** The longest wait between retries, also for a `Retry-After` header (default 30 000). */
  maxRetryDelayMs?: number;
  /** The embedding space's name (default `openai:<model>:<dimensions>`). */
  id?: string;
}

const OPENAI_API = 'https://api.openai.com/v1';

const KNOWN_WIDTHS: Record<string, number> = {
  'text-embedding-3-small': 1536,
  'text-embedding-3-large': 3072,
  'text-embedding-ada-002': 1536,
};

class RetryableError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs: number | null,
    readonly timedOut = false,
  ) {
    super(message);
  }
}

function parseRetryAfter(value: string | null): number | null {
  if (value === null) return null;
  const seconds = Number(value);
  if (value.trim() !== '' && Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * An embedder for any OpenAI-compatible `POST {baseURL}/embeddings` endpoint (OpenAI,
 * Azure-style proxies, Ollama, vLLM, LM Studio, ...), on the global `fetch`.
 *
 * It sends at most `batchSize` texts per request, one request at a time; retries 429,
 * 5xx, network errors and timeouts with exponential back-off and jitter, waiting what a
 * `Retry-After` header asks (capped by `maxRetryDelayMs`); and gives each request
 * `timeoutMs`. Errors: `EMBEDDER_FAILED` (with the HTTP status in `details`) for a
 * refused request, retries spent, or a response of the wrong shape or width; `TIMEOUT`
 * when the last attempt timed out; `ABORTED` when the caller's signal fired.
 *
 * With no options it reads `OPENAI_API_KEY` (and `OPENAI_BASE_URL`, if set) from the
 * environment and uses `text-embedding-3-small`, as the OpenAI SDK would.
 *
 * @example
 * ```ts
 * const memory = createMemory({ store, embedder: openAIEmbedder(), agentId: 'researcher' });
 * // a local server: no key needed
 * const local = openAIEmbedder({ baseURL: 'http://127.0.0.1:11434/v1', model: 'nomic-embed-text', dimensions: 768 });
 * ```
 */
export function openAIEmbedder(options: OpenAIEmbedderOptions = {}): Embedder<number[]> {
  const invalid = (m: string) => new CairnError('INVALID_ARGUMENT', `openAIEmbedder: ${m}`);
  if (typeof options !== 'object' || options === null) throw invalid('options must be an object');
  checkKeys(
    options,
    'openAIEmbedder options',
    keysOf<OpenAIEmbedderOptions>()([
      'baseURL',
      'apiKey',
      'model',
      'dimensions',
      'batchSize',
      'timeoutMs',
      'maxRetries',
      'retryBaseMs',
      'maxRetryDelayMs',
      'id',
    ]),
  );
  const env = (name: string) => {
    const value = process.env[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  };
  const baseURL = options.baseURL ?? env('OPENAI_BASE_URL') ?? OPENAI_API;
  const apiKey = options.apiKey ?? env('OPENAI_API_KEY');
  const model = options.model ?? 'text-embedding-3-small';
  if (typeof baseURL !== 'string' || !/^https?:\/\//.test(baseURL))
    throw invalid(`baseURL must be an http(s) URL, got ${JSON.stringify(baseURL)}`);
  if (apiKey === undefined && baseURL.replace(/\/+$/, '') === OPENAI_API)
    throw invalid(
      `no API key for ${OPENAI_API}: pass apiKey or set the OPENAI_API_KEY environment variable`,
    );
  if (typeof model !== 'string' || model.trim() === '')
    throw invalid('model must be a non-empty string');
  const dimensions = options.dimensions ?? KNOWN_WIDTHS[model];
  if (dimensions === undefined)
    throw invalid(
      `dimensions is required for model ${JSON.stringify(model)} (its width is not known)`,
    );
  const positive = (name: string, value: number | undefined, fallback: number, min = 1) => {
    const v = value ?? fallback;
    if (!Number.isInteger(v) || v < min)
      throw invalid(`${name} must be an integer >= ${min}, got ${String(v)}`);
    return v;
  };
  positive('dimensions', dimensions, dimensions);
  const batchSize = positive('batchSize', options.batchSize, 96);
  const timeoutMs = positive('timeoutMs', options.timeoutMs, 30_000);
  const maxRetries = positive('maxRetries', options.maxRetries, 4, 0);
  const retryBaseMs = positive('retryBaseMs', options.retryBaseMs, 500, 0);
  const maxRetryDelayMs = positive('maxRetryDelayMs', options.maxRetryDelayMs, 30_000, 0);
  const url = `${baseURL.replace(/\/+$/, '')}/embeddings`;
  const id = options.id ?? `openai:${model}:${dimensions}`;

  const requestOnce = async (
    texts: string[],
    signal: AbortSignal | undefined,
  ): Promise<number[][]> => {
    const timeout = AbortSignal.timeout(timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (apiKey) headers.authorization = `Bearer ${apiKey}`;
    const body: Record<string, unknown> = { model, input: texts, encoding_format: 'float' };
    if (options.dimensions !== undefined) body.dimensions = options.dimensions;
    let res: Response;
    let payload: unknown;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: combined,
      });
      if (res.status === 429 || res.status >= 500) {
        const retryAfter = parseRetryAfter(res.headers.get('retry-after'));
        await res.body?.cancel().catch(() => undefined);
        throw new RetryableError(`HTTP ${res.status} from ${url}`, retryAfter);
      }
      if (!res.ok) {
        const text = (await res.text().catch(() => '')).slice(0, 300);
        throw new CairnError(
          'EMBEDDER_FAILED',
          `embeddings request to ${url} was refused: HTTP ${res.status} ${text}`,
          {
            details: { status: res.status, embedderId: id },
          },
        );
      }
      payload = await res.json();
    } catch (e) {
      if (e instanceof RetryableError || e instanceof CairnError) throw e;
      if (signal?.aborted) throw e;
      if (timeout.aborted)
        throw new RetryableError(`no response from ${url} within ${timeoutMs} ms`, null, true);
      // fetch rejects with a TypeError on network failures (refused, reset).
      throw new RetryableError(
        `request to ${url} failed: ${e instanceof Error ? e.message : String(e)}`,
        null,
      );
    }
    const data = (payload as { data?: unknown } | null)?.data;
    if (!Array.isArray(data) || data.length !== texts.length) {
      throw new CairnError(
        'EMBEDDER_FAILED',
        `embeddings response from ${url} has ${Array.isArray(data) ? data.length : 'no'} items for ${texts.length} input(s)`,
        {
          details: { embedderId: id },
        },
      );
    }
    const out = new Array<number[]>(texts.length);
    data.forEach((item: { index?: unknown; embedding?: unknown }, i) => {
      const at = typeof item?.index === 'number' ? item.index : i;
      const v = item?.embedding;
      if (
        !Array.isArray(v) ||
        v.length !== dimensions ||
        !v.every((x) => typeof x === 'number' && Number.isFinite(x))
      ) {
        const width = Array.isArray(v) ? `${v.length} dimensions` : 'no vector';
        throw new CairnError(
          'EMBEDDER_FAILED',
          `embeddings response from ${url} has ${width} at index ${at}; expected ${dimensions}`,
          {
            details: {
              embedderId: id,
              expected: dimensions,
              actual: Array.isArray(v) ? v.length : null,
            },
          },
        );
      }
      if (at < 0 || at >= texts.length || out[at] !== undefined) {
        throw new CairnError(
          'EMBEDDER_FAILED',
          `embeddings response from ${url} has a bad or repeated index ${at}`,
          { details: { embedderId: id } },
        );
      }
      out[at] = v as number[];
    });
    return out;
  };

  const request = async (texts: string[], signal: AbortSignal | undefined): Promise<number[][]> => {
    for (let attempt = 0; ; attempt++) {
      try {
        return await requestOnce(texts, signal);
      } catch (e) {
        if (signal?.aborted) {
          throw new CairnError('ABORTED', `embeddings request to ${url} was aborted`, {
            cause: e,
            details: { embedderId: id },
          });
        }
        if (!(e instanceof RetryableError)) throw e;
        if (attempt >= maxRetries) {
          const attempts = attempt + 1;
          if (e.timedOut)
            throw new CairnError('TIMEOUT', `${e.message} (${attempts} attempt(s))`, {
              details: { embedderId: id, attempts, timeoutMs },
            });
          throw new CairnError('EMBEDDER_FAILED', `${e.message} (${attempts} attempt(s))`, {
            cause: e,
            details: { embedderId: id, attempts },
          });
        }
        const backoff = retryBaseMs * 2 ** attempt * (0.5 + Math.random() / 2);
        await sleep(Math.min(maxRetryDelayMs, e.retryAfterMs ?? backoff), signal).catch(
          (reason) => {
            throw new CairnError('ABORTED', `embeddings request to ${url} was aborted`, {
              cause: reason,
              details: { embedderId: id },
            });
          },
        );
      }
    }
  };

  return {
    id,
    dimensions,
    async embed(texts, { signal } = {}) {
      const out: number[][] = [];
      for (let i = 0; i < texts.length; i += batchSize) {
        out.push(...(await request(texts.slice(i, i + batchSize), signal)));
      }
      return out;
    },
  };
}
