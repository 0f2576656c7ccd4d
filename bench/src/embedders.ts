import { type Embedder, hashingEmbedder } from '@cairn/memory';

/** An embedder the bench compares; `dispose` frees a model. */
export interface BenchEmbedder {
  name: string;
  embedder: Embedder;
  dispose?: () => void;
}

/** The default hashing embedder, and @cairn/embedder-use when it is installed. */
export async function benchEmbedders(log: (line: string) => void): Promise<BenchEmbedder[]> {
  const list: BenchEmbedder[] = [
    { name: 'hashing (default, 384-d)', embedder: hashingEmbedder({ dimensions: 384 }) },
  ];
  try {
    const { useEmbedder } = await import('@cairn/embedder-use');
    const embedder = useEmbedder();
    await embedder.load();
    list.push({
      name: 'USE Lite (@cairn/embedder-use, 512-d)',
      embedder,
      dispose: () => embedder.dispose(),
    });
  } catch (e) {
    log(`@cairn/embedder-use not available (${(e as Error).message}): hashing embedder only`);
  }
  return list;
}
