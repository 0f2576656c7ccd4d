/** Which ranking found a hit. */
export type RankingName = 'vector' | 'keyword';

export interface FusedItem<T> {
  item: T;
  /** Σ 1 / (k + rank) over the rankings that hold the item; ranks start at 1. */
  score: number;
  /** The rankings that found it, in the order given. */
  sources: RankingName[];
  /** Its 1-based rank in each ranking that found it. */
  ranks: Partial<Record<RankingName, number>>;
}

/**
 * Reciprocal rank fusion (Cormack et al., 2009): every item of every ranking scores
 * `1 / (k + rank)`, summed per item. An item found by only one ranking keeps its score
 * from that ranking, so nothing is dropped for being missing from the other; ties go to
 * the item with the best single rank, then to the first ranking's order.
 */
export function reciprocalRankFusion<T>(
  rankings: Array<{ name: RankingName; items: T[] }>,
  keyOf: (item: T) => string,
  k = 60,
): FusedItem<T>[] {
  const fused = new Map<string, FusedItem<T> & { best: number; order: number }>();
  let order = 0;
  for (const { name, items } of rankings) {
    items.forEach((item, i) => {
      const key = keyOf(item);
      const rank = i + 1;
      let entry = fused.get(key);
      if (!entry) {
        entry = { item, score: 0, sources: [], ranks: {}, best: rank, order: order++ };
        fused.set(key, entry);
      }
      if (entry.ranks[name] !== undefined) return; // a ranking lists each item once
      entry.score += 1 / (k + rank);
      entry.sources.push(name);
      entry.ranks[name] = rank;
      entry.best = Math.min(entry.best, rank);
    });
  }
  return [...fused.values()]
    .sort((a, b) => b.score - a.score || a.best - b.best || a.order - b.order)
    .map(({ item, score, sources, ranks }) => ({ item, score, sources, ranks }));
}

/**
 * The standard score of a value among `scores`: how many (population) standard deviations
 * it lies above their mean; 0 when they do not spread (fewer than two, or all equal).
 * `recall`'s hybrid mode puts its two rankings on one scale with it.
 */
export function standardScore(scores: number[]): (score: number) => number {
  const n = scores.length;
  const mean = scores.reduce((a, b) => a + b, 0) / (n || 1);
  const sd = Math.sqrt(scores.reduce((a, s) => a + (s - mean) ** 2, 0) / (n || 1));
  return (score) => (sd > 0 ? (score - mean) / sd : 0);
}
