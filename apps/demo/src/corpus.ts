import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { terms } from './text.js';

/** One document of the research corpus shipped with the demo (apps/demo/corpus/*.md). */
export interface CorpusDocument {
  /** The file name without `.md`, e.g. `nfix-03-nitrate-inhibition`. */
  id: string;
  /** The topic prefix of the id: `soil`, `nfix` or `cover`. */
  topic: string;
  title: string;
  /** The body, without the title line. */
  text: string;
}

export const TOPIC_NAMES: Readonly<Record<string, string>> = {
  soil: 'soil microbiomes',
  nfix: 'nitrogen fixation',
  cover: 'cover crops',
};

/** The folder the corpus ships in (next to dist/ and src/). */
export const CORPUS_DIR = fileURLToPath(new URL('../corpus/', import.meta.url));

/**
 * Reads every `*.md` file of the corpus folder: the first line `# Title`, then the body.
 *
 * @example
 * ```ts
 * const docs = loadCorpus();
 * docs[0]; // { id: 'cover-01-why-cover-crops', topic: 'cover', title: 'Why farmers plant cover crops', text: '...' }
 * ```
 */
export function loadCorpus(dir: string = CORPUS_DIR): CorpusDocument[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((file) => {
      const raw = readFileSync(join(dir, file), 'utf8').replace(/\r\n/g, '\n').trim();
      const newline = raw.indexOf('\n');
      const first = newline === -1 ? raw : raw.slice(0, newline);
      if (!first.startsWith('# '))
        throw new Error(`corpus file ${file} must start with a "# Title" line`);
      const id = file.slice(0, -3);
      return {
        id,
        topic: id.split('-')[0] ?? 'misc',
        title: first.slice(2).trim(),
        text: newline === -1 ? '' : raw.slice(newline + 1).trim(),
      };
    });
}

/** A document found for a query, and how it was found. */
export interface SearchHit {
  docId: string;
  title: string;
  /** The passage that matched (a fragment, or the whole document). */
  text: string;
  score: number;
  /** Which rankings found it. */
  via: Array<'vector' | 'keyword'>;
}

/** Anything that finds passages for a query: memory recall, or the local keyword index. */
export type Searcher = (query: string, limit: number) => Promise<SearchHit[]>;

/**
 * A plain BM25 keyword index over the corpus documents, in memory. The agent uses it
 * next to memory recall to pick the documents a literature task reads.
 *
 * @example
 * ```ts
 * const search = keywordSearcher(loadCorpus());
 * const hits = await search('legume nitrate', 5);
 * ```
 */
export function keywordSearcher(docs: readonly CorpusDocument[]): Searcher {
  const k1 = 1.2;
  const b = 0.75;
  const indexed = docs.map((doc) => {
    const words = terms(`${doc.title} ${doc.text}`);
    const tf = new Map<string, number>();
    for (const w of words) tf.set(w, (tf.get(w) ?? 0) + 1);
    return { doc, tf, length: words.length };
  });
  const avg = indexed.reduce((sum, d) => sum + d.length, 0) / Math.max(1, indexed.length);
  const df = new Map<string, number>();
  for (const d of indexed) for (const w of d.tf.keys()) df.set(w, (df.get(w) ?? 0) + 1);
  return async (query, limit) => {
    const q = [...new Set(terms(query))];
    const scored: SearchHit[] = [];
    for (const d of indexed) {
      let score = 0;
      for (const w of q) {
        const f = d.tf.get(w);
        if (!f) continue;
        const n = df.get(w) ?? 0;
        const idf = Math.log(1 + (indexed.length - n + 0.5) / (n + 0.5));
        score += (idf * f * (k1 + 1)) / (f + k1 * (1 - b + (b * d.length) / avg));
      }
      if (score > 0) {
        scored.push({
          docId: d.doc.id,
          title: d.doc.title,
          text: d.doc.text,
          score,
          via: ['keyword'],
        });
      }
    }
    scored.sort((x, y) => y.score - x.score || x.docId.localeCompare(y.docId));
    return scored.slice(0, limit);
  };
}
