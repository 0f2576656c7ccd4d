import { createMemory, hashingEmbedder, type RecallMode } from '@cairn/memory';
import { keywordTokens, type NewMemory, type Store } from '@cairn/store';
import { createSqliteStore } from '@cairn/store-sqlite';
import { memories as labelled, queries } from '../data/memory-retrieval.js';
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

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
}

/** recall@5 and MRR@10 of each mode, over all queries and by whether a query shares a word with its answers. */
async function retrievalQuality(log: (line: string) => void) {
  const byId = new Map(labelled.map((m) => [m.id, m]));
  for (const q of queries) {
    for (const id of q.relevant)
      if (!byId.has(id)) throw new Error(`query ${JSON.stringify(q.query)}: unknown id ${id}`);
  }
  const store = createSqliteStore({ path: ':memory:' });
  const memory = createMemory({ store, agentId: 'bench' });
  const stored = await memory.rememberMany(
    labelled.map((m) => ({ text: m.text, metadata: { label: m.id } })),
  );
  const labelOf = new Map(stored.map((m) => [m.id, m.metadata.label as string]));
  const classes = queries.map((q) => {
    const qw = contentWords(q.query);
    return q.relevant.some((id) => [...contentWords(byId.get(id)!.text)].some((w) => qw.has(w)))
      ? 'shared'
      : 'none';
  });
  const result: Record<string, Record<'all' | 'shared' | 'none', Scores>> = {};
  for (const mode of MODES) {
    const r5: Record<string, number[]> = { all: [], shared: [], none: [] };
    const rr: Record<string, number[]> = { all: [], shared: [], none: [] };
    for (const [i, q] of queries.entries()) {
      const hits = await memory.recall(q.query, { mode, limit: 10 });
      const labels = hits.map((h) => labelOf.get(h.memory.id)!);
      const top5 = new Set(labels.slice(0, 5));
      const recall5 = q.relevant.filter((id) => top5.has(id)).length / q.relevant.length;
      const first = labels.findIndex((l) => q.relevant.includes(l));
      const reciprocal = first < 0 ? 0 : 1 / (first + 1);
      for (const c of ['all', classes[i]!]) {
        r5[c]!.push(recall5);
        rr[c]!.push(reciprocal);
      }
    }
    result[mode] = {
      all: { recall5: mean(r5.all!), mrr: mean(rr.all!), n: r5.all!.length },
      shared: { recall5: mean(r5.shared!), mrr: mean(rr.shared!), n: r5.shared!.length },
      none: { recall5: mean(r5.none!), mrr: mean(rr.none!), n: r5.none!.length },
    };
    log(
      `${mode}: recall@5 ${result[mode]!.all.recall5.toFixed(3)}, MRR ${result[mode]!.all.mrr.toFixed(3)}`,
    );
  }
  await store.close();
  const nNone = classes.filter((c) => c === 'none').length;
  const f = (x: number) => x.toFixed(3);
  const lines = [
    `| mode | recall@5 (all ${queries.length}) | MRR@10 (all) | recall@5 (${queries.length - nNone} sharing a word) | recall@5 (${nNone} sharing none) | MRR@10 (sharing none) |`,
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    ...MODES.map((m) => {
      const r = result[m]!;
      return `| ${m} | ${f(r.all.recall5)} | ${f(r.all.mrr)} | ${f(r.shared.recall5)} | ${f(r.none.recall5)} | ${f(r.none.mrr)} |`;
    }),
  ];
  const best = Math.max(result.keyword!.all.recall5, result.vector!.all.recall5);
  const hybridOk = result.hybrid!.all.recall5 >= best;
  return {
    table: lines.join('\n'),
    hybridOk,
    best,
    hybrid: result.hybrid!.all.recall5,
    memories: labelled.length,
  };
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

async function ingestRate(): Promise<Comparison & { rates: { embedder: number; memory: number } }> {
  const N = 2000;
  const embedder = hashingEmbedder({ dimensions: 384 });
  let round = 0;
  let texts: string[] = [];
  let store: Store | null = null;
  const row = await compare({
    name: `ingest ${N} short texts (rememberMany, SQLite file in memory)`,
    baseline: {
      name: 'hashingEmbedder.embed alone, batches of 64',
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
    runs: 5,
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
    const quality = await retrievalQuality(log);
    const ingest = await ingestRate();
    const ingestStore = await ingestAgainstStore();
    log(
      `ingest: embedder ${ingest.rates.embedder.toFixed(0)}/s, rememberMany ${ingest.rates.memory.toFixed(0)}/s`,
    );
    const latency = await recallLatency(log);
    const verdict = quality.hybridOk
      ? `Hybrid recall@5 (${quality.hybrid.toFixed(3)}) is at least the better of keyword and vector (${quality.best.toFixed(3)}).`
      : `**Hybrid recall@5 (${quality.hybrid.toFixed(3)}) is below the better of keyword and vector (${quality.best.toFixed(3)}).**`;
    return {
      markdown: `### Retrieval quality (bench/src/data/memory-retrieval.ts: ${quality.memories} memories in 10 topics, ${queries.length} labelled queries; SQLite store, default hashing embedder, 384 dimensions)

${quality.table}

${verdict} Hybrid is reciprocal rank fusion (k = 60) of the two rankings, each fetched 40 deep. "Sharing none"
means no content word of the query (stop words aside) occurs in any of its answers: keyword search cannot find those,
and the hashing embedder (words and their parts, not meaning) finds them only through shared character n-grams
("vaccination"/"vaccines"). A semantic embedder (\`openAIEmbedder\` or any \`Embedder\`) is what those queries need.

### Ingest rate

${comparisonTable([ingest, ingestStore])}

Embedder alone: ${ingest.rates.embedder.toFixed(0)} texts/s; \`rememberMany\`: ${ingest.rates.memory.toFixed(0)} texts/s. Most of the
gap is the store's insert (memories with their FTS and vector columns); the second row isolates what @cairn/memory
adds on top of a hand-written "embed, then addMemories": hashing each text, the duplicate check and the
embedding-cache lookup (in chunks of 500 hashes), and writing the cache, all in one transaction.

### Recall latency on ${latency.n.toLocaleString('en')} memories (SQLite, exact vector scan; the viewer may see ${latency.visible.toLocaleString('en')})

${comparisonTable(latency.rows)}

The first three rows compare \`recall\` with the one raw store call of the same kind (limit 10): the extra is query
embedding, scoping (the viewer filter is inside both), fusion and hydration. Hybrid makes two store calls 40 deep,
so its honest floor is the last row.`,
    };
  },
};
export default suite;
