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
export function clusteredVectors(seed: number, dims: number, topics = 200): () => number[] {
  const r = rng(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  const centers = Array.from({ length: topics }, () => Array.from({ length: dims }, gauss));
  return () => {
    const c = centers[Math.floor(r() * centers.length)]!;
    return c.map((x) => x + gauss() * 0.9);
  };
}
