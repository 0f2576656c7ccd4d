import { canSee, type Memory } from '@cairn/core';
import type { DriverMemoryFilter } from './driver.js';

/** The parameters of keyword search's BM25 ranking, in every store that computes it. */
export const BM25 = Object.freeze({ k1: 1.2, b: 0.75 });

/** Cosine similarity of two vectors of equal length; 0 when either is all zeros. */
export function cosineSimilarity(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}

/**
 * The message a branch-scoped memory hangs on: the last of its source's messages (null
 * when it is not branch-scoped). It counts from a branch whose chain holds this message.
 */
export function branchAnchor(memory: Pick<Memory, 'source'>): string | null {
  const { source } = memory;
  return source?.branchScoped ? (source.messageIds.at(-1) ?? null) : null;
}

/**
 * The reference filter: true when `memory` meets every condition of `filter`, with
 * `visibleFrom` resolved to `visibleAnchors` (as the front door does).
 */
export function matchesMemoryFilter(memory: Memory, filter: DriverMemoryFilter = {}): boolean {
  if (
    filter.branchThreadId !== undefined &&
    (branchAnchor(memory) === null || memory.source!.threadId !== filter.branchThreadId)
  )
    return false;
  if (filter.visibleAnchors) {
    const anchor = branchAnchor(memory);
    if (anchor !== null && !filter.visibleAnchors.includes(anchor)) return false;
  }
  if (filter.viewer && !canSee(filter.viewer, memory)) return false;
  if (filter.agentId !== undefined && memory.agentId !== filter.agentId) return false;
  if (filter.types && !filter.types.includes(memory.type)) return false;
  if (filter.scopes && !filter.scopes.includes(memory.scope)) return false;
  if (filter.entityId !== undefined && memory.entityId !== filter.entityId) return false;
  if (filter.roomId !== undefined && memory.roomId !== filter.roomId) return false;
  if (filter.worldId !== undefined && memory.worldId !== filter.worldId) return false;
  if (filter.contentHashes && !filter.contentHashes.includes(memory.contentHash)) return false;
  if (filter.ids && !filter.ids.includes(memory.id)) return false;
  if (filter.createdAfter !== undefined && !(memory.createdAt > filter.createdAfter)) return false;
  if (filter.createdBefore !== undefined && !(memory.createdAt < filter.createdBefore))
    return false;
  if (filter.lineageIds && !filter.lineageIds.includes(memory.lineageId)) return false;
  if (!holdsAt(memory, filter.validAt, filter.knownAt)) return false;
  if (filter.metadataPrefix) {
    for (const [key, labels] of Object.entries(filter.metadataPrefix)) {
      const path = Object.hasOwn(memory.metadata, key) ? memory.metadata[key] : undefined;
      if (!Array.isArray(path) || !labels.every((label, i) => path[i] === label)) return false;
    }
  }
  return true;
}

/**
 * The time rule of `MemoryFilter`'s `validAt` and `knownAt` (either may be undefined):
 * recorded by `knownAt`; holding at `validAt`, where a version superseded after `knownAt`
 * counts as open (as it was then); with `knownAt` alone, not superseded by then.
 */
export function holdsAt(
  memory: Pick<Memory, 'createdAt' | 'validFrom' | 'validTo' | 'supersededAt'>,
  validAt: number | undefined,
  knownAt: number | undefined,
): boolean {
  const { createdAt, validFrom, validTo, supersededAt } = memory;
  const supersededLater = supersededAt !== null && knownAt !== undefined && supersededAt > knownAt;
  if (knownAt !== undefined) {
    if (!(createdAt <= knownAt)) return false;
    if (validAt === undefined && supersededAt !== null && !supersededLater) return false;
  }
  if (validAt !== undefined) {
    if (validFrom !== null && !(validFrom <= validAt)) return false;
    if (validTo !== null && !(validTo > validAt) && !supersededLater) return false;
  }
  return true;
}

/**
 * The words of a text for keyword search: lower-cased runs of letters and digits.
 * Adapters use it to build their full-text queries from user input safely.
 */
export function keywordTokens(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/**
 * A text's words as BM25 counts them: how often each occurs (`keywordTokens`, in order
 * of first occurrence) and how many there are in all.
 */
export function termCounts(text: string): { counts: Map<string, number>; length: number } {
  const tokens = keywordTokens(text);
  const counts = new Map<string, number>();
  for (const t of tokens) counts.set(t, (counts.get(t) ?? 0) + 1);
  return { counts, length: tokens.length };
}

/**
 * BM25 (`BM25`'s parameters) of a text for `terms`, with the collection statistics (how
 * many texts, their average length, how many hold each term) taken over `collection`:
 * the one relevance rule of the stores that score keyword search in the process (the
 * in-memory store over every memory, a store with encryption over the opened texts of the
 * memories a search's filter selects). 0 when the text holds none of the terms.
 */
export function bm25Scorer(
  collection: Iterable<string>,
  terms: string[],
): (text: string) => number {
  const docs = [...collection].map(termCounts);
  const n = docs.length;
  const avgdl = docs.reduce((s, t) => s + t.length, 0) / Math.max(1, n);
  const idf = new Map(
    terms.map((t) => {
      const d = docs.filter((doc) => doc.counts.has(t)).length;
      return [t, Math.log(1 + (n - d + 0.5) / (d + 0.5))];
    }),
  );
  return (text) => {
    const { counts, length } = termCounts(text);
    let relevance = 0;
    for (const t of terms) {
      const tf = counts.get(t) ?? 0;
      if (tf === 0) continue;
      relevance +=
        (idf.get(t)! * tf * (BM25.k1 + 1)) /
        (tf + BM25.k1 * (1 - BM25.b + (BM25.b * length) / avgdl));
    }
    return relevance;
  };
}

/**
 * English stop words (the Snowball list PostgreSQL's `english` configuration uses):
 * too common to say anything about relevance, so keyword search leaves them out of the
 * query in every store.
 */
export const STOP_WORDS: ReadonlySet<string> = new Set(
  (
    'i me my myself we our ours ourselves you your yours yourself yourselves he him his ' +
    'himself she her hers herself it its itself they them their theirs themselves what ' +
    'which who whom this that these those am is are was were be been being have has had ' +
    'having do does did doing a an the and but if or because as until while of at by for ' +
    'with about against between into through during before after above below to from up ' +
    'down in out on off over under again further then once here there when where why how ' +
    'all any both each few more most other some such no nor not only own same so than too ' +
    'very s t can will just don should now'
  ).split(' '),
);

/**
 * The terms a keyword search looks for: the query's distinct words (`keywordTokens`)
 * without stop words, in query order. Empty when the query holds only stop words.
 */
export function searchTerms(text: string): string[] {
  return [...new Set(keywordTokens(text))].filter((t) => !STOP_WORDS.has(t));
}
