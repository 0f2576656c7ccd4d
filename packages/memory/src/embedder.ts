import { CairnError, isCairnError } from '@cairn/core';

/** Options passed to every `embed` call. */
export interface EmbedOptions {
  /** Aborted when the caller gives up; an embedder should stop its work and reject. */
  signal?: AbortSignal;
}

/**
 * Turns texts into vectors. `id` names the embedding space (model and settings) and
 * `dimensions` its width: a store holds vectors of one embedder only, and an embedder
 * whose id or width differs is refused with `EMBEDDING_MISMATCH`.
 *
 * @example
 * ```ts
 * const embedder: Embedder = {
 *   id: 'my-model-v1',
 *   dimensions: 768,
 *   embed: async (texts, { signal } = {}) => callMyModel(texts, signal),
 * };
 * ```
 */
export interface Embedder<V extends ArrayLike<number> = ArrayLike<number>> {
  readonly id: string;
  readonly dimensions: number;
  /**
   * One vector per text, in the same order, each `dimensions` long: an array or any
   * array-like of finite numbers (a `Float32Array`, as transformers.js, onnxruntime and
   * fastembed return).
   */
  embed(texts: string[], options?: EmbedOptions): Promise<V[]>;
}

/** The length of an array or array-like object (a typed array), or null for anything else. */
function arrayLikeLength(value: unknown): number | null {
  if (Array.isArray(value)) return value.length;
  if (typeof value !== 'object' || value === null || value instanceof DataView) return null;
  const length = (value as { length?: unknown }).length;
  return Number.isSafeInteger(length) && (length as number) >= 0 ? (length as number) : null;
}

/**
 * Calls the embedder and checks what it returned: one finite vector of the right width
 * per text, copied into a plain array. Any failure becomes `EMBEDDER_FAILED` with the original error as `cause`
 * (an abort by the caller stays `ABORTED`), so no caller ever stores a made-up vector.
 */
export async function embedChecked(
  embedder: Embedder,
  texts: string[],
  signal?: AbortSignal,
): Promise<number[][]> {
  if (texts.length === 0) return [];
  let vectors: unknown;
  try {
    signal?.throwIfAborted();
    vectors = await embedder.embed(texts, signal ? { signal } : {});
  } catch (e) {
    if (isCairnError(e, 'EMBEDDER_FAILED')) throw e;
    if (signal?.aborted) {
      throw new CairnError('ABORTED', `embedding was aborted by the caller`, {
        cause: e,
        details: { embedderId: embedder.id },
      });
    }
    const why = e instanceof Error ? e.message : String(e);
    throw new CairnError(
      'EMBEDDER_FAILED',
      `embedder ${JSON.stringify(embedder.id)} failed on ${texts.length} text(s): ${why}`,
      {
        cause: e,
        details: { embedderId: embedder.id },
      },
    );
  }
  if (!Array.isArray(vectors) || vectors.length !== texts.length) {
    const got = Array.isArray(vectors) ? `${vectors.length} vectors` : typeof vectors;
    throw new CairnError(
      'EMBEDDER_FAILED',
      `embedder ${JSON.stringify(embedder.id)} returned ${got} for ${texts.length} text(s)`,
      {
        details: { embedderId: embedder.id },
      },
    );
  }
  const out: number[][] = [];
  for (let i = 0; i < vectors.length; i++) {
    const v: unknown = vectors[i];
    const length = arrayLikeLength(v);
    if (length !== embedder.dimensions) {
      const width =
        length !== null
          ? `${length} dimensions`
          : v === null
            ? 'null'
            : `${typeof v} (not array-like)`;
      throw new CairnError(
        'EMBEDDER_FAILED',
        `embedder ${JSON.stringify(embedder.id)} returned a vector of ${width} for text ${i}; it declares ${embedder.dimensions}`,
        { details: { embedderId: embedder.id, expected: embedder.dimensions, index: i } },
      );
    }
    const vector = Array.from(v as ArrayLike<unknown>);
    for (const x of vector) {
      if (typeof x !== 'number' || !Number.isFinite(x)) {
        throw new CairnError(
          'EMBEDDER_FAILED',
          `embedder ${JSON.stringify(embedder.id)} returned a non-finite value in vector ${i}`,
          {
            details: { embedderId: embedder.id, index: i },
          },
        );
      }
    }
    out.push(vector as number[]);
  }
  return out;
}

/** Checks an embedder's shape when it is handed to `createMemory`. */
export function checkEmbedder(embedder: unknown): Embedder {
  const e = embedder as Partial<Embedder> | null;
  if (typeof e !== 'object' || e === null || typeof e.embed !== 'function') {
    throw new CairnError(
      'INVALID_ARGUMENT',
      'embedder must be an object with an embed(texts) method',
    );
  }
  if (typeof e.id !== 'string' || e.id.trim() === '')
    throw new CairnError('INVALID_ARGUMENT', 'embedder.id must be a non-empty string');
  if (!Number.isInteger(e.dimensions) || (e.dimensions as number) < 1) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `embedder.dimensions must be a positive integer, got ${String(e.dimensions)}`,
    );
  }
  return e as Embedder;
}
