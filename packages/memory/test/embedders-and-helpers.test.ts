import { isCairnError } from '@cairn/core';
import { cosineSimilarity, createMemoryStore } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import {
  chunkText,
  createMemory,
  type Embedder,
  embedChecked,
  hashingEmbedder,
  reciprocalRankFusion,
} from '../src/index.js';
import { rejects } from './helpers.js';

describe('embedChecked', () => {
  it('accepts typed arrays and other array-likes of finite numbers, and returns plain arrays', async () => {
    const inner = hashingEmbedder({ dimensions: 16 });
    // As transformers.js, onnxruntime and fastembed return them.
    const float32: Embedder<Float32Array> = {
      id: inner.id,
      dimensions: 16,
      embed: async (texts) => (await inner.embed(texts)).map((v) => Float32Array.from(v)),
    };
    const [v] = await embedChecked(float32, ['stones mark the trail']);
    expect(Array.isArray(v)).toBe(true);
    expect(v).toEqual(
      Array.from(Float32Array.from((await inner.embed(['stones mark the trail']))[0]!)),
    );
    const arrayLike: Embedder = {
      id: 'x',
      dimensions: 2,
      embed: async (texts) => texts.map(() => ({ length: 2, 0: 0.6, 1: 0.8 })),
    };
    expect(await embedChecked(arrayLike, ['a'])).toEqual([[0.6, 0.8]]);

    const memory = createMemory({ store: createMemoryStore(), agentId: 'a', embedder: float32 });
    const m = await memory.remember({ text: 'stones mark the trail' });
    expect(m.embedding).toEqual(v);
    expect((await memory.recall('trail stones', { mode: 'vector' }))[0]!.memory.id).toBe(m.id);
  });

  it('still refuses non-finite values, wrong widths and things that are not array-like', async () => {
    const returning = (vector: unknown): Embedder => ({
      id: 'bad',
      dimensions: 2,
      embed: async () => [vector as number[]],
    });
    for (const [vector, message] of [
      [Float32Array.of(1, Number.NaN), /non-finite/],
      [Float64Array.of(1, 2, 3), /3 dimensions/],
      ['ab', /string \(not array-like\)/],
      [new DataView(new ArrayBuffer(2)), /not array-like/],
      [{ length: 2, 0: 1, 1: '2' }, /non-finite/],
      [null, /null/],
    ] as const) {
      const e = await rejects(embedChecked(returning(vector), ['a']));
      expect(isCairnError(e, 'EMBEDDER_FAILED')).toBe(true);
      expect((e as Error).message).toMatch(message);
    }
  });
});

describe('hashingEmbedder', () => {
  it('is deterministic, L2-normalised and of the asked width', async () => {
    const e = hashingEmbedder({ dimensions: 96 });
    expect(e.dimensions).toBe(96);
    const [a, b] = await e.embed(['Stones mark the trail', 'Stones mark the trail']);
    expect(a).toEqual(b);
    expect(a).toHaveLength(96);
    expect(Math.hypot(...a!)).toBeCloseTo(1, 12);
    const [again] = await hashingEmbedder({ dimensions: 96 }).embed(['Stones mark the trail']);
    expect(again).toEqual(a);
  });

  it('captures shared words and word parts, not meaning', async () => {
    const e = hashingEmbedder({ dimensions: 384 });
    const [q, stem, unrelated, synonym] = await e.embed([
      'gardening',
      'garden',
      'banana',
      'horticulture',
    ]);
    expect(cosineSimilarity(q!, stem!)).toBeGreaterThan(0.3);
    expect(Math.abs(cosineSimilarity(q!, unrelated!))).toBeLessThan(0.2);
    // A synonym sharing no letters' n-grams is no closer than an unrelated word.
    expect(Math.abs(cosineSimilarity(q!, synonym!))).toBeLessThan(0.2);
  });

  it('gives a zero vector to a text of stop words only, and rejects a silly width', async () => {
    const [v] = await hashingEmbedder({ dimensions: 16 }).embed(['the of and']);
    expect(v!.every((x) => x === 0)).toBe(true);
    expect(() => hashingEmbedder({ dimensions: 0 })).toThrow(/dimensions/);
  });
});

describe('chunkText', () => {
  it('cuts on whitespace within chunkSize and repeats about `overlap` characters', () => {
    const text = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
    const chunks = chunkText(text, { chunkSize: 50, overlap: 12 });
    expect(chunks.length).toBeGreaterThan(5);
    for (const c of chunks) {
      expect(c.length).toBeLessThanOrEqual(50);
      expect(c).toMatch(/^word\d+( word\d+)*$/); // no word was split
    }
    for (let i = 1; i < chunks.length; i++) {
      const firstWord = chunks[i]!.split(' ')[0]!;
      expect(chunks[i - 1]!.split(' ')).toContain(firstWord); // overlapped
    }
    const words = new Set(chunks.flatMap((c) => c.split(' ')));
    expect(words.size).toBe(60); // nothing lost
  });

  it('returns the whole text when it fits, prefers sentence ends, and checks options', () => {
    expect(chunkText('short text', { chunkSize: 100 })).toEqual(['short text']);
    const chunks = chunkText('One sentence here. Another sentence follows it here.', {
      chunkSize: 30,
      overlap: 0,
    });
    expect(chunks[0]).toBe('One sentence here.');
    expect(() => chunkText('x', { chunkSize: 10, overlap: 10 })).toThrow(/overlap/);
    expect(() => chunkText('x', { chunkSize: 0 })).toThrow(/chunkSize/);
    expect(chunkText('a'.repeat(25), { chunkSize: 10, overlap: 0 })).toEqual([
      'a'.repeat(10),
      'a'.repeat(10),
      'a'.repeat(5),
    ]);
  });

  it('cuts a word longer than the chunk, but never between the halves of a surrogate pair', () => {
    const word = '😀'.repeat(20); // 40 UTF-16 code units, no whitespace
    const chunks = chunkText(word, { chunkSize: 7, overlap: 0 });
    expect(chunks.join('')).toBe(word);
    for (const c of chunks) {
      expect(c.length).toBeLessThanOrEqual(7);
      expect((c as string & { isWellFormed(): boolean }).isWellFormed()).toBe(true);
    }
  });
});

describe('reciprocalRankFusion', () => {
  it('sums 1/(k+rank), keeps items found by one ranking, and records sources and ranks', () => {
    const fused = reciprocalRankFusion(
      [
        { name: 'vector', items: ['a', 'b', 'c'] },
        { name: 'keyword', items: ['b', 'd'] },
      ],
      (x) => x,
      60,
    );
    expect(fused.map((f) => f.item)).toEqual(['b', 'a', 'd', 'c']);
    expect(fused[0]).toEqual({
      item: 'b',
      score: 1 / 62 + 1 / 61,
      sources: ['vector', 'keyword'],
      ranks: { vector: 2, keyword: 1 },
    });
    expect(fused.find((f) => f.item === 'c')).toEqual({
      item: 'c',
      score: 1 / 63,
      sources: ['vector'],
      ranks: { vector: 3 },
    });
    // a (vector 1) and d (keyword 2): a wins on score.
    expect(fused[1]!.score).toBeGreaterThan(fused[2]!.score);
  });
});
