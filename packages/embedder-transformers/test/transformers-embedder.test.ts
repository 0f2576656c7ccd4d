import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isCairnError } from '@cairn/core';
import { createMemory, embedChecked } from '@cairn/memory';
import { createMemoryStore } from '@cairn/store';
import { pipeline } from '@huggingface/transformers';
import { afterAll, describe, expect, it } from 'vitest';
import { type FeatureExtractor, transformersEmbedder } from '../src/index.js';
import { TINY_DIMS, writeTinyModel } from './tiny-model.js';

// A real transformers.js pipeline on onnxruntime-node, over a tiny model made here: no
// hub is reachable, and no sentence model ships on npm.
const dir = mkdtempSync(join(tmpdir(), 'cairn-tiny-model-'));
const model = writeTinyModel(join(dir, 'tiny-bert'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const dot = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
};

describe('transformersEmbedder', { timeout: 120_000 }, () => {
  const embedder = transformersEmbedder({ model, batchSize: 2 });

  it('reads its width from config.json and embeds in batches, one unit vector per text', async () => {
    expect(embedder.dimensions).toBe(TINY_DIMS);
    expect(embedder.id).toBe('transformers:tiny-bert:mean');
    const texts = ['I bought a new car', 'automobile purchase', 'rain tomorrow', 'my dog'];
    const vectors = await embedder.embed(texts);
    expect(vectors).toHaveLength(4);
    for (const v of vectors) {
      expect(v).toBeInstanceOf(Float32Array);
      expect(v).toHaveLength(TINY_DIMS);
      expect(Math.hypot(...v)).toBeCloseTo(1, 5);
    }
    expect(dot(vectors[0]!, vectors[1]!)).toBeGreaterThan(0.9);
    expect(dot(vectors[0]!, vectors[2]!)).toBeLessThan(0.3);
    // The same text gives the same vector whatever its batch.
    const [alone] = await embedder.embed(['rain tomorrow']);
    expect([...alone!]).toEqual([...vectors[2]!]);
    expect(await embedder.embed([])).toEqual([]);
  });

  it('serves @cairn/memory: Float32Array vectors are stored, recall finds by meaning', async () => {
    const memory = createMemory({ store: createMemoryStore(), agentId: 'a', embedder });
    const car = await memory.remember({ text: 'I bought a new car last week' });
    await memory.remember({ text: 'The roses in the garden' });
    await memory.remember({ text: 'The train to the hotel' });
    expect(car.embedding).toHaveLength(TINY_DIMS);
    const [top] = await memory.recall('automobile purchase', { mode: 'vector', limit: 1 });
    expect(top!.memory.id).toBe(car.id);
  });

  it('takes a pipeline you made, and checks the shape it returns', async () => {
    const made = (await pipeline('feature-extraction', model, {
      local_files_only: true,
      dtype: 'fp32',
    })) as unknown as FeatureExtractor;
    const own = transformersEmbedder({ pipeline: made, dimensions: TINY_DIMS, id: 'tiny' });
    const [a] = await own.embed(['my dog']);
    const [b] = await embedder.embed(['my dog']);
    expect([...a!]).toEqual([...b!]);
    const wrong = transformersEmbedder({ pipeline: made, dimensions: 16 });
    const e = await embedChecked(wrong, ['my dog']).catch((x: unknown) => x);
    expect(isCairnError(e, 'EMBEDDER_FAILED')).toBe(true);
    expect((e as Error).message).toMatch(/shape \[1, 8\]/);
  });

  it('stops between batches when aborted, and refuses bad options before loading anything', async () => {
    const controller = new AbortController();
    controller.abort(new Error('enough'));
    await expect(embedder.embed(['a'], { signal: controller.signal })).rejects.toThrow('enough');
    const made = (await pipeline('feature-extraction', model, {
      local_files_only: true,
      dtype: 'fp32',
    })) as unknown as FeatureExtractor;
    const during = new AbortController();
    let calls = 0;
    const counting = transformersEmbedder({
      pipeline: (texts, o) => {
        if (++calls === 2) during.abort(new Error('stop now'));
        return made(texts, o);
      },
      dimensions: TINY_DIMS,
      batchSize: 1,
    });
    const pending = counting.embed(['car', 'dog', 'rain', 'bank'], { signal: during.signal });
    await expect(pending).rejects.toThrow('stop now');
    expect(calls).toBe(2);

    const bad = (o: object) => () => transformersEmbedder(o);
    expect(bad({})).toThrow(/exactly one of model/);
    expect(bad({ model: join(dir, 'missing') })).toThrow(/cannot read .*config\.json/);
    expect(bad({ model, pooling: 'max' })).toThrow(/pooling/);
    expect(bad({ model, batchSize: 0 })).toThrow(/batchSize/);
    expect(bad({ model, pool: 'cls' })).toThrow(
      'transformersEmbedder options: unknown key "pool" (did you mean "pooling"?)',
    );
  });
});
