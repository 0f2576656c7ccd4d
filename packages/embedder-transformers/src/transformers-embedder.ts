import { readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { CairnError, checkKeys, keysOf } from '@cairn/core';

/** What this package needs of a transformers.js feature-extraction pipeline. */
export type FeatureExtractor = (
  texts: string[],
  options: { pooling: 'mean' | 'cls'; normalize: boolean },
) => Promise<{ data: ArrayLike<number>; dims: readonly number[] }>;

export interface TransformersEmbedderOptions {
  /**
   * A local model directory as transformers.js expects it (`config.json`,
   * `tokenizer.json`, `tokenizer_config.json`, `onnx/model.onnx`): only local files are
   * read, never a hub. Give this or `pipeline`.
   */
  model?: string;
  /** A feature-extraction pipeline you created (e.g. with a hub or a custom `env`). */
  pipeline?: FeatureExtractor;
  /** The vector width. Default: `hidden_size` from the model's `config.json`. */
  dimensions?: number;
  /** How token vectors become one vector (default `mean`, as sentence-transformers do). */
  pooling?: 'mean' | 'cls';
  /** L2-normalise each vector (default true). */
  normalize?: boolean;
  /** The ONNX weights to load from `onnx/` (default `fp32`: `model.onnx`). */
  dtype?: 'fp32' | 'fp16' | 'q8' | 'int8' | 'uint8' | 'q4' | 'bnb4' | 'q4f16';
  /** Texts per pipeline call (default 32). */
  batchSize?: number;
  /** The embedding space's name. Default `transformers:<model directory name>:<pooling>`. */
  id?: string;
}

/** @cairn/memory's `Embedder`, structurally, with the vectors transformers.js gives. */
export interface TransformersEmbedder {
  readonly id: string;
  readonly dimensions: number;
  embed(texts: string[], options?: { signal?: AbortSignal }): Promise<Float32Array[]>;
}

const invalid = (message: string, details?: Record<string, unknown>) =>
  new CairnError(
    'INVALID_ARGUMENT',
    `transformersEmbedder: ${message}`,
    details ? { details } : {},
  );

function hiddenSize(dir: string): number {
  let config: { hidden_size?: unknown; d_model?: unknown; dim?: unknown };
  try {
    config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
  } catch (cause) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `transformersEmbedder: cannot read ${join(dir, 'config.json')}: is "model" a local model directory?`,
      { cause, details: { model: dir } },
    );
  }
  const width = config.hidden_size ?? config.d_model ?? config.dim;
  if (!Number.isInteger(width) || (width as number) < 1)
    throw invalid(`${join(dir, 'config.json')} has no hidden_size: pass dimensions`, {
      model: dir,
    });
  return width as number;
}

/**
 * An embedder for @cairn/memory on a `@huggingface/transformers` feature-extraction
 * pipeline: the usual choice where a model hub is reachable, here loaded from a model
 * directory you provide (`local_files_only`: nothing is downloaded). Any ONNX sentence
 * model transformers.js can run works (all-MiniLM-L6-v2, bge-small, e5, ...); the
 * pipeline loads on the first `embed`. `@huggingface/transformers` is a peer dependency.
 *
 * @example
 * ```ts
 * import { transformersEmbedder } from '@cairn/embedder-transformers';
 *
 * const embedder = transformersEmbedder({ model: './models/all-MiniLM-L6-v2' }); // 384-d, from config.json
 * const memory = createMemory({ store, agentId: 'assistant', embedder });
 * ```
 */
export function transformersEmbedder(options: TransformersEmbedderOptions): TransformersEmbedder {
  if (typeof options !== 'object' || options === null)
    throw invalid('options must be an object { model } or { pipeline }');
  checkKeys(
    options,
    'transformersEmbedder options',
    keysOf<TransformersEmbedderOptions>()([
      'model',
      'pipeline',
      'dimensions',
      'pooling',
      'normalize',
      'dtype',
      'batchSize',
      'id',
    ]),
  );
  const { model, pipeline: given } = options;
  if ((model === undefined) === (given === undefined))
    throw invalid('give exactly one of model (a local directory) and pipeline');
  if (model !== undefined && (typeof model !== 'string' || model.trim() === ''))
    throw invalid('model must be a local directory path', { model });
  if (given !== undefined && typeof given !== 'function')
    throw invalid('pipeline must be a transformers.js feature-extraction pipeline');
  const dir = model === undefined ? null : resolve(model);
  const dimensions = options.dimensions ?? (dir ? hiddenSize(dir) : undefined);
  if (!Number.isInteger(dimensions) || (dimensions as number) < 1)
    throw invalid(`dimensions must be a positive integer, got ${String(dimensions)}`);
  const pooling = options.pooling ?? 'mean';
  if (pooling !== 'mean' && pooling !== 'cls')
    throw invalid(`pooling must be mean or cls, got ${JSON.stringify(pooling)}`);
  const normalize = options.normalize ?? true;
  const batchSize = options.batchSize ?? 32;
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 4096)
    throw invalid(`batchSize must be an integer from 1 to 4096, got ${String(batchSize)}`);
  const id =
    options.id ??
    `transformers:${dir ? basename(dir) : 'pipeline'}:${pooling}${normalize ? '' : ':raw'}`;

  let loading: Promise<FeatureExtractor> | null = given ? Promise.resolve(given) : null;
  const extractor = () => {
    if (loading === null) {
      const started = (async () => {
        const { pipeline } = await import('@huggingface/transformers');
        const p = await pipeline('feature-extraction', dir!, {
          local_files_only: true,
          dtype: options.dtype ?? 'fp32',
        });
        return p as unknown as FeatureExtractor;
      })();
      loading = started;
      // A failed load is not kept: the next call tries again.
      started.catch(() => {
        if (loading === started) loading = null;
      });
    }
    return loading;
  };

  return {
    id,
    dimensions: dimensions as number,
    async embed(texts, { signal } = {}) {
      signal?.throwIfAborted();
      if (texts.length === 0) return [];
      const extract = await extractor();
      const out: Float32Array[] = [];
      for (let i = 0; i < texts.length; i += batchSize) {
        if (i > 0) await new Promise((r) => setImmediate(r));
        signal?.throwIfAborted();
        const batch = texts.slice(i, i + batchSize);
        const tensor = await extract(batch, { pooling, normalize });
        const width = dimensions as number;
        if (tensor.dims[0] !== batch.length || tensor.dims[1] !== width) {
          throw new CairnError(
            'EMBEDDER_FAILED',
            `transformersEmbedder: the pipeline returned shape [${tensor.dims.join(', ')}] for ${batch.length} text(s) of ${dimensions} dimensions`,
            { details: { embedderId: id, dims: [...tensor.dims] } },
          );
        }
        const data = Float32Array.from(tensor.data);
        for (let r = 0; r < batch.length; r++) out.push(data.subarray(r * width, (r + 1) * width));
      }
      return out;
    },
  };
}
