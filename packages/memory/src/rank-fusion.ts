import { cosineSimilarity, type MemoryHit } from '@cairn/store';
import type { RecallHit } from './agent-memory.js';

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
 */
function standardScore(scores: number[]): (score: number) => number {
  const n = scores.length;
  const mean = scores.reduce((a, b) => a + b, 0) / (n || 1);
  const sd = Math.sqrt(scores.reduce((a, s) => a + (s - mean) ** 2, 0) / (n || 1));
  return (score) => (sd > 0 ? (score - mean) / sd : 0);
}

/**
 * `recall`'s hybrid ranking of a vector search's hits and a keyword search's: each
 * candidate scores by the search in which it stands out most, its standard score there
 * (standard deviations above the mean of that search's hits: cosine, or the store's
 * keyword relevance; a keyword-only hit's cosine comes from its embedding), as
 * `1 / (1 + e^-z)`. Ties keep the vector ranking's order, then the keyword ranking's.
 */
export function hybridFusion(
  vectorHits: MemoryHit[],
  keywordHits: MemoryHit[],
  queryVector: readonly number[] | null,
): RecallHit[] {
  const byId = new Map<string, RecallHit>();
  vectorHits.forEach((h, i) => {
    byId.set(h.memory.id, {
      memory: h.memory,
      score: 0,
      sources: ['vector'],
      ranks: { vector: i + 1 },
      similarity: h.score,
      keywordScore: null,
    });
  });
  keywordHits.forEach((h, i) => {
    let hit = byId.get(h.memory.id);
    if (!hit) {
      const e = h.memory.embedding;
      hit = {
        memory: h.memory,
        score: 0,
        sources: [],
        ranks: {},
        similarity:
          queryVector && e && e.length === queryVector.length
            ? cosineSimilarity(queryVector, e)
            : null,
        keywordScore: null,
      };
      byId.set(h.memory.id, hit);
    }
    hit.sources.push('keyword');
    hit.ranks.keyword = i + 1;
    hit.keywordScore = h.score;
  });
  const vectorZ = standardScore(vectorHits.map((h) => h.score));
  const keywordZ = standardScore(keywordHits.map((h) => h.score));
  const hits = [...byId.values()];
  for (const h of hits) {
    const z = Math.max(
      h.similarity === null ? Number.NEGATIVE_INFINITY : vectorZ(h.similarity),
      h.keywordScore === null ? Number.NEGATIVE_INFINITY : keywordZ(h.keywordScore),
    );
    h.score = 1 / (1 + Math.exp(-z));
  }
  return hits.sort((a, b) => b.score - a.score);
}
