import { CairnError, checkKeys, keysOf } from '@cairn/core';
import type { Embedder } from './embedder.js';

export interface HashingEmbedderOptions {
  /** Width of the vectors (default 384). More dimensions, fewer hash collisions. */
  dimensions?: number;
}

// Words so common they say nothing about a text; they are left out so short texts are
// not matched on "the" and "of".
const STOP_WORDS = new Set(
  (
    'a an and are as at be been but by can could did do does for from had has have he her his how i if in into is it its ' +
    'me my no not of on or our she so than that the their them then there these they this those to too us was we were ' +
    'what when where which who why will with would you your'
  ).split(' '),
);

/** FNV-1a, 32 bits. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The finaliser of MurmurHash3: spreads the bits so the sign is independent of the index. */
function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * A local, deterministic embedder: no model, no network, the same vector for the same
 * text on every machine. It hashes each word, each pair of neighbouring words and the
 * character 3- and 4-grams of each word into a signed vector (feature hashing) and
 * L2-normalises it; common English stop words are left out.
 *
 * What it captures: **words and their parts** — shared words, shared word stems
 * ("garden" and "gardening" share most of their n-grams) and shared phrases. What it
 * does not capture: **meaning**. "car" and "automobile" are as far apart as "car" and
 * "banana". Use it for tests, offline work, and as the default; plug in a real model
 * (`openAIEmbedder`, or any `Embedder`) for semantic recall.
 *
 * @example
 * ```ts
 * const embedder = hashingEmbedder({ dimensions: 384 });
 * const [v] = await embedder.embed(['Gardening in spring']);
 * ```
 */
export function hashingEmbedder(options: HashingEmbedderOptions = {}): Embedder<number[]> {
  checkKeys(options, 'hashingEmbedder options', keysOf<HashingEmbedderOptions>()(['dimensions']));
  const dimensions = options.dimensions ?? 384;
  if (!Number.isInteger(dimensions) || dimensions < 8 || dimensions > 65536) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `hashingEmbedder: dimensions must be an integer from 8 to 65536, got ${String(dimensions)}`,
    );
  }
  const embedOne = (text: string): number[] => {
    const v = new Float64Array(dimensions);
    const add = (feature: string, weight: number) => {
      const h = fnv1a(feature);
      v[h % dimensions]! += mix(h) & 1 ? weight : -weight;
    };
    const words = (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter(
      (w) => !STOP_WORDS.has(w),
    );
    for (let i = 0; i < words.length; i++) {
      const w = words[i]!;
      add(`w:${w}`, 1);
      if (i > 0) add(`b:${words[i - 1]} ${w}`, 0.5);
      // The word's parts weigh as much as the word itself: n-grams of `<word>`.
      const padded = `<${w}>`;
      const grams: string[] = [];
      for (const n of [3, 4]) {
        for (let j = 0; j + n <= padded.length; j++) grams.push(padded.slice(j, j + n));
      }
      const gw = grams.length ? 1 / Math.sqrt(grams.length) : 0;
      for (const g of grams) add(`g:${g}`, gw);
    }
    let norm = 0;
    for (let i = 0; i < dimensions; i++) norm += v[i]! * v[i]!;
    norm = Math.sqrt(norm);
    const out = new Array<number>(dimensions);
    for (let i = 0; i < dimensions; i++) out[i] = norm === 0 ? 0 : v[i]! / norm;
    return out;
  };
  return {
    id: 'cairn-hashing-v1',
    dimensions,
    async embed(texts, { signal } = {}) {
      signal?.throwIfAborted();
      return texts.map(embedOne);
    },
  };
}
