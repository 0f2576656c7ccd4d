import { createHash } from 'node:crypto';
import type { CorpusDocument, SearchHit } from './corpus.js';
import { capitalize, clip, distinctTerms, sentences, terms } from './text.js';

/**
 * The research agent's reasoning, as plain deterministic functions: the same question
 * over the same corpus always gives the same plan, findings, hypothesis and reply.
 * Persistence (thread, memory, compose) lives in scenario.ts; nothing here does I/O.
 */

/** One literature task of a plan. */
export interface ResearchTask {
  id: string;
  kind: 'literature';
  /** The angle the task takes on the objective. */
  facet: string;
  /** What the task searches for. */
  query: string;
  /** The objective's terms (required in an extracted sentence). */
  core: string[];
  /** The facet's terms (preferred in an extracted sentence). */
  facetTerms: string[];
}

/** A quote, and the document it comes from. */
export interface Evidence {
  docId: string;
  title: string;
  quote: string;
}

/** A sentence a literature task extracted, with how well it matched. */
export interface Finding extends Evidence {
  taskId: string;
  score: number;
  matched: string[];
}

/** A claim the agent recorded, with the evidence it rests on. */
export interface Discovery {
  id: string;
  claim: string;
  objective: string;
  iteration: number;
  evidence: Evidence[];
}

export interface Reflection {
  keyInsights: string[];
  methodology: string;
  /** The objective the next iteration pursues. */
  nextObjective: string;
  /** Other objectives worth exploring (the demo explores the first on a second branch). */
  alternatives: string[];
  /** A short title for the conversation. */
  title: string;
}

const FACETS: ReadonlyArray<{ id: string; label: string; words: string }> = [
  { id: 'mechanism', label: 'mechanisms', words: 'microbial process release supply' },
  { id: 'evidence', label: 'evidence and methods', words: 'measure method trial meta-analysis' },
  { id: 'management', label: 'management and timing', words: 'timing termination management rate' },
  { id: 'tradeoffs', label: 'trade-offs and losses', words: 'loss leaching yield emission' },
];

/** Words that mark a sentence as saying why or how much: preferred for a hypothesis. */
const CAUSAL =
  /\b(because|therefore|so that|reduces?|increases?|raises?|lowers?|depends?|falls?|rises?|leads?|improves?|suppress(es)?)\b/i;

/** The core terms of an objective, at most `max`, in order of appearance. */
export function coreTerms(objective: string, max = 5): string[] {
  return distinctTerms(objective).slice(0, max);
}

/**
 * Plans the literature tasks of one iteration: one task per facet (mechanisms, evidence,
 * management, trade-offs), each searching for the objective's terms plus the facet's.
 *
 * @example
 * ```ts
 * planTasks('How do cover crops change nitrogen fixation?', 1).map((t) => t.facet);
 * // ['mechanisms', 'evidence and methods', 'management and timing', 'trade-offs and losses']
 * ```
 */
export function planTasks(objective: string, iteration: number): ResearchTask[] {
  const core = coreTerms(objective);
  return FACETS.map((facet) => ({
    id: `i${iteration}-${facet.id}`,
    kind: 'literature' as const,
    facet: facet.label,
    query: `${core.join(' ')} ${facet.words}`,
    core,
    facetTerms: terms(facet.words),
  }));
}

/**
 * Extracts the sentences of the found passages that speak to the task: each must hold
 * at least one of the objective's terms and two task terms in all. Best first; at most
 * one sentence per document, `max` in all.
 */
export function extractFindings(
  task: ResearchTask,
  hits: readonly SearchHit[],
  max = 4,
): Finding[] {
  const candidates: Finding[] = [];
  const seen = new Set<string>();
  for (const [rank, hit] of hits.entries()) {
    for (const sentence of sentences(hit.text)) {
      if (seen.has(sentence) || sentence.length < 40) continue;
      seen.add(sentence);
      const words = new Set(terms(sentence));
      const core = task.core.filter((t) => words.has(t));
      const facet = task.facetTerms.filter((t) => words.has(t));
      if (core.length === 0 || core.length + facet.length < 2) continue;
      // Objective terms count double; a higher-ranked passage breaks ties.
      const score =
        core.length * 2 + facet.length + (CAUSAL.test(sentence) ? 0.5 : 0) + 1 / (rank + 2);
      candidates.push({
        taskId: task.id,
        docId: hit.docId,
        title: hit.title,
        quote: sentence,
        score: Math.round(score * 1000) / 1000,
        matched: [...core, ...facet],
      });
    }
  }
  candidates.sort(
    (a, b) => b.score - a.score || a.docId.localeCompare(b.docId) || a.quote.localeCompare(b.quote),
  );
  const perDoc = new Set<string>();
  const out: Finding[] = [];
  for (const f of candidates) {
    if (perDoc.has(f.docId)) continue;
    perDoc.add(f.docId);
    out.push(f);
    if (out.length === max) break;
  }
  return out;
}

/** Orders findings best first, deterministically, without repeating a quote. */
export function rankFindings(findings: readonly Finding[]): Finding[] {
  const byQuote = new Map<string, Finding>();
  for (const f of findings) {
    const prior = byQuote.get(f.quote);
    if (!prior || f.score > prior.score) byQuote.set(f.quote, f);
  }
  return [...byQuote.values()].sort(
    (a, b) => b.score - a.score || a.docId.localeCompare(b.docId) || a.quote.localeCompare(b.quote),
  );
}

/**
 * Forms the working hypothesis: the best-supported sentence that states a cause or an
 * amount, with how many passages and documents back the same terms.
 */
export function formHypothesis(objective: string, findings: readonly Finding[]): string {
  const ranked = rankFindings(findings);
  if (ranked.length === 0) {
    return `No passage in the corpus speaks to "${clip(objective, 80)}" yet; the question needs other sources.`;
  }
  const best = ranked.find((f) => CAUSAL.test(f.quote)) ?? ranked[0]!;
  const key = new Set(best.matched);
  const support = ranked.filter((f) => f.matched.some((t) => key.has(t)));
  const docs = new Set(support.map((f) => f.docId)).size;
  return `${best.quote.replace(/\.$/, '')} (${support.length} passages from ${docs} documents agree on ${[...key].slice(0, 3).join(', ')}).`;
}

/**
 * Reflects on an iteration: key insights (the best quote of each of the first three
 * documents), the methodology followed, the next objective (the term the findings
 * mention most that the objectives so far did not), alternatives, and a short title.
 */
export function reflect(input: {
  question: string;
  objective: string;
  tasks: readonly ResearchTask[];
  findings: readonly Finding[];
  /** Objectives already pursued, so the next one is new. */
  explored: readonly string[];
  passagesSearched: number;
}): Reflection {
  const ranked = rankFindings(input.findings);
  const insights: string[] = [];
  const docs = new Set<string>();
  for (const f of ranked) {
    if (docs.has(f.docId)) continue;
    docs.add(f.docId);
    insights.push(clip(f.quote, 180));
    if (insights.length === 3) break;
  }
  const used = new Set(
    [...input.explored, input.question, input.objective].flatMap((o) => terms(o)),
  );
  const facetWords = new Set(input.tasks.flatMap((t) => t.facetTerms));
  // Candidate subjects are nouns the sources name in their titles, counted over the quotes.
  const titleWords = new Set(ranked.flatMap((f) => terms(f.title)));
  const counts = new Map<string, number>();
  const surface = new Map<string, string>();
  for (const f of ranked) {
    for (const word of f.quote.toLowerCase().split(/[^a-z0-9-]+/)) {
      const t = terms(word)[0];
      if (t && !surface.has(t)) surface.set(t, word);
    }
    for (const t of new Set(terms(f.quote))) {
      if (used.has(t) || facetWords.has(t) || !titleWords.has(t) || t.length < 5) continue;
      counts.set(t, (counts.get(t) ?? 0) + 1);
    }
  }
  const candidates = [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([t]) => t);
  const subject = subjectOf(input.question);
  const alternatives = candidates.slice(0, 4).map((t) => {
    const word = surface.get(t) ?? t;
    return `How ${word.endsWith('s') && !word.endsWith('ss') ? 'do' : 'does'} ${word} shape ${subject}?`;
  });
  const allDocs = new Set(input.findings.map((f) => f.docId));
  return {
    keyInsights: insights,
    methodology:
      `${input.tasks.length} literature tasks in parallel (${input.tasks.map((t) => t.facet).join(', ')}); ` +
      `hybrid recall (vector + keyword) over ${input.passagesSearched} passages; ` +
      `sentences kept when they contain an objective term and two task terms; ` +
      `${input.findings.length} passages kept from ${allDocs.size} documents.`,
    nextObjective: alternatives[0] ?? `What is still unknown about ${subject}?`,
    alternatives: alternatives.slice(1),
    title: titleFor(input.question),
  };
}

/** Two-word phrases of the corpus's field that read as one subject. */
const PHRASES = new Set([
  'cover crop',
  'soil nitrogen',
  'soil microbe',
  'soil microbiome',
  'nitrogen fixation',
  'soil nitrate',
  'nitrate leaching',
  'soil carbon',
  'organic matter',
  'organic carbon',
  'legume cover',
  'microbial biomass',
  'nitrous oxide',
  'carbon storage',
  'nitrogen credit',
  'weed suppression',
  'disease suppression',
]);

/** Verbs that make poor subjects for a title. */
const VERBS = new Set([
  'fix',
  'reduce',
  'increase',
  'add',
  'lower',
  'raise',
  'improve',
  'feed',
  'help',
  'work',
  'matter',
  'cause',
  'need',
]);

/** The first noun phrases of a question: ["cover crops", "soil nitrogen", "microbes"]. */
export function phrasesOf(question: string, max = 3): string[] {
  const words: Array<{ raw: string; term: string }> = [];
  const seen = new Set<string>();
  for (const raw of question.split(/[^A-Za-z0-9-]+/)) {
    const term = terms(raw)[0];
    if (!term || seen.has(term) || VERBS.has(term)) continue;
    seen.add(term);
    words.push({ raw: raw.toLowerCase(), term });
  }
  const phrases: string[] = [];
  for (let i = 0; i < words.length && phrases.length < max; i++) {
    const w = words[i]!;
    const next = words[i + 1];
    if (next && PHRASES.has(`${w.term} ${next.term}`)) {
      phrases.push(`${w.raw} ${next.raw}`);
      i++;
    } else phrases.push(w.raw);
  }
  return phrases;
}

function listOf(phrases: readonly string[]): string {
  if (phrases.length <= 1) return phrases[0] ?? '';
  return `${phrases.slice(0, -1).join(', ')} and ${phrases[phrases.length - 1]}`;
}

/** What a question is about, as a phrase: "cover crops and soil nitrogen". */
export function subjectOf(question: string): string {
  return listOf(phrasesOf(question, 2)) || 'the question';
}

/** A short conversation title from the question: "Cover crops, soil nitrogen & microbes". */
export function titleFor(question: string): string {
  const phrases = phrasesOf(question, 3);
  if (phrases.length === 0) return 'Research';
  const text =
    phrases.length === 1
      ? phrases[0]!
      : `${phrases.slice(0, -1).join(', ')} & ${phrases[phrases.length - 1]}`;
  return clip(capitalize(text), 60);
}

/**
 * Records the iteration's discoveries: one per key insight, with every finding that
 * shares at least three terms with it as evidence. Ids are content hashes, so the same
 * claim recorded twice merges into one entry.
 */
export function recordDiscoveries(input: {
  objective: string;
  iteration: number;
  insights: readonly string[];
  findings: readonly Finding[];
}): Discovery[] {
  const ranked = rankFindings(input.findings);
  const core = new Set(coreTerms(input.objective));
  return input.insights.map((claim) => {
    const claimTerms = new Set(terms(claim).filter((t) => !core.has(t)));
    const own = ranked.filter((f) => clip(f.quote, 180) === claim);
    const related = ranked.filter(
      (f) =>
        clip(f.quote, 180) !== claim && terms(f.quote).filter((t) => claimTerms.has(t)).length >= 2,
    );
    const evidence = [...own, ...related]
      .slice(0, 3)
      .map(({ docId, title, quote }) => ({ docId, title, quote }));
    return {
      id: `d-${createHash('sha256').update(claim).digest('hex').slice(0, 10)}`,
      claim,
      objective: input.objective,
      iteration: input.iteration,
      evidence,
    };
  });
}

/** The reply to the user, in plain text with light markdown. */
export function composeReply(input: {
  objective: string;
  hypothesis: string;
  reflection: Reflection;
  discoveries: readonly Discovery[];
}): string {
  const lines = [
    `On "${clip(input.objective, 100)}":`,
    '',
    `Working hypothesis: ${input.hypothesis}`,
    '',
  ];
  if (input.discoveries.length > 0) {
    lines.push('What the sources say:');
    for (const d of input.discoveries) {
      const ids = [...new Set(d.evidence.map((e) => e.docId))].join(', ');
      lines.push(`- ${d.claim} [${ids}]`);
    }
    lines.push('');
  }
  lines.push(`Next I would look at: ${input.reflection.nextObjective}`);
  return lines.join('\n');
}

/** Picks the documents to read for a task from several searches (memory recall, keyword). */
export function mergeHits(
  lists: ReadonlyArray<readonly SearchHit[]>,
  docs: ReadonlyMap<string, CorpusDocument>,
  max: number,
): SearchHit[] {
  const merged = new Map<string, SearchHit>();
  for (const list of lists) {
    for (const [rank, hit] of list.entries()) {
      const doc = docs.get(hit.docId);
      const prior = merged.get(hit.docId);
      const score = 1 / (60 + rank + 1);
      if (prior) {
        prior.score += score;
        prior.via = [...new Set([...prior.via, ...hit.via])];
      } else {
        // Read the whole document: a fragment hit points at the document it came from.
        merged.set(hit.docId, {
          ...hit,
          text: doc?.text ?? hit.text,
          title: doc?.title ?? hit.title,
          score,
          via: [...hit.via],
        });
      }
    }
  }
  return [...merged.values()]
    .sort((a, b) => b.score - a.score || a.docId.localeCompare(b.docId))
    .slice(0, max);
}
