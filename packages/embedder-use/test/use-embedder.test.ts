import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createMemory, hashingEmbedder } from '@cairn/memory';
import { createSqliteStore } from '@cairn/store-sqlite';
import { afterAll, describe, expect, it } from 'vitest';
import { USE_EMBEDDER_ID, useEmbedder } from '../src/index.js';

const embedder = useEmbedder();
afterAll(() => embedder.dispose());

const dot = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i]!, 0);

describe('useEmbedder', { timeout: 60_000 }, () => {
  it('gives one 512-wide unit vector per text, the same whatever the batch', async () => {
    const texts = ['I bought a new car', 'The weather is nice today', '', 'x'];
    const vectors = await embedder.embed(texts);
    expect(vectors).toHaveLength(4);
    for (const v of vectors) {
      expect(v).toHaveLength(512);
      expect(Math.hypot(...v)).toBeCloseTo(1, 5);
    }
    const oneByOne = useEmbedder({ batchSize: 1 });
    const again = await oneByOne.embed(texts);
    oneByOne.dispose();
    for (const [i, v] of again.entries()) {
      expect(Math.max(...v.map((x, j) => Math.abs(x - vectors[i]![j]!)))).toBeLessThan(1e-5);
    }
    expect(await embedder.embed([])).toEqual([]);
  });

  it('places paraphrases close and unrelated texts far', async () => {
    const [car, automobile, weather] = await embedder.embed([
      'I bought a new car',
      'automobile purchase',
      'the forecast says rain tomorrow',
    ]);
    expect(dot(car!, automobile!)).toBeGreaterThan(dot(car!, weather!) + 0.2);
  });

  it('lets memory recall by meaning what the hashing embedder cannot find', async () => {
    const texts = [
      'I bought a new car last week',
      'Maria feeds her sourdough starter twice a day',
      'The climbing roses get pruned in late winter',
      'Tom always asks for a window seat on flights',
      'The dishwasher must not take the cast iron pan',
    ];
    const top = async (e: typeof embedder | ReturnType<typeof hashingEmbedder>) => {
      const store = createSqliteStore({ path: ':memory:' });
      const memory = createMemory({ store, agentId: 'a', embedder: e });
      await memory.rememberMany(texts.map((text) => ({ text })));
      const hits = await memory.recall('automobile purchase', { mode: 'vector', limit: 1 });
      await store.close();
      return hits[0]?.memory.content.text;
    };
    expect(await top(embedder)).toBe(texts[0]);
    expect(await top(hashingEmbedder())).not.toBe(texts[0]);
    expect(embedder.id).toBe(USE_EMBEDDER_ID);
  });

  it('honours an abort before loading and between batches', async () => {
    const before = new AbortController();
    before.abort(new Error('gave up'));
    await expect(useEmbedder().embed(['a'], { signal: before.signal })).rejects.toThrow('gave up');

    const slow = useEmbedder({ batchSize: 1 });
    await slow.load();
    const during = new AbortController();
    const texts = Array.from({ length: 200 }, (_, i) => `sentence number ${i}`);
    const pending = slow.embed(texts, { signal: during.signal });
    setTimeout(() => during.abort(new Error('stop now')), 0);
    await expect(pending).rejects.toThrow('stop now');
    slow.dispose();
  });

  it('refuses a silly batch size', () => {
    expect(() => useEmbedder({ batchSize: 0 })).toThrow(/batchSize/);
    expect(() => useEmbedder({ batchsize: 8 } as never)).toThrow(
      'useEmbedder options: unknown key "batchsize" (did you mean "batchSize"?)',
    );
  });
});

// The child loads the built package (turbo builds it before `test`) and embeds; a blocked
// network makes any download attempt fail the child.
const child = `
  import { useEmbedder } from '../dist/index.js';
  const [v] = await useEmbedder().embed(['automobile purchase']);
  if (v.length !== 512) throw new Error('width ' + v.length);
  console.log('embedded offline');
`;
const cwd = fileURLToPath(new URL('.', import.meta.url));
const sandbox = spawnSync('unshare', ['-n', 'true']).status === 0;
const requireSandbox = process.env.CAIRN_REQUIRE_OFFLINE_SANDBOX === '1';

describe('no network', { timeout: 60_000 }, () => {
  it('loads and embeds with every network API blocked in the process', async () => {
    const blocked = spawnSync(
      process.execPath,
      ['--input-type=module', '--import', './block-network.mjs', '-e', child],
      { cwd, encoding: 'utf8' },
    );
    expect(blocked.stderr).toBe('');
    expect(blocked.stdout).toContain('embedded offline');
    expect(blocked.status).toBe(0);
  });

  it("the block is real: the library's default source (TF Hub) fails under it", () => {
    const remote = `
      import { initModel } from '@energetic-ai/embeddings';
      await initModel();
    `;
    const blocked = spawnSync(
      process.execPath,
      ['--input-type=module', '--import', './block-network.mjs', '-e', remote],
      { cwd, encoding: 'utf8' },
    );
    expect(blocked.status).not.toBe(0);
    expect(blocked.stderr).toContain('network blocked');
  });

  it.skipIf(!sandbox && !requireSandbox)(
    'loads and embeds in a network namespace with no interfaces (unshare -n)',
    () => {
      const run = spawnSync(
        'unshare',
        ['-n', process.execPath, '--input-type=module', '-e', child],
        {
          cwd,
          encoding: 'utf8',
        },
      );
      expect(run.stdout).toContain('embedded offline');
      expect(run.status).toBe(0);
    },
  );
});
