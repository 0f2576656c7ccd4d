/**
 * Recall latency at scale, at the width of @cairn/embedder-use (512): SQLite at 100,000 and
 * 1,000,000 memories, its approximate search (the default: sign-bit candidates scored
 * exactly) beside its exact scan (a store on the same file opened with `vectorSearch:
 * 'exact'`) in the same run, with recall@10 of the one against the other; PGlite's HNSW
 * index (pgvector) at 100,000 with its recall@10 against the exact answer. The vectors are synthetic (clustered, as sentence
 * embeddings are): embedding a million texts with USE Lite would take hours on two cores,
 * and search latency depends on the vectors' width and count, not on where they came from.
 *
 *   CAIRN_BENCH_SCALE=100000,1000000   the SQLite sizes (default both)
 *   CAIRN_BENCH_SCALE_BUDGET_S=1800    stop growing the SQLite store past this many seconds
 *   CAIRN_BENCH_PGLITE_BUDGET_S=1200   stop loading PGlite past this many seconds (0: skip PGlite)
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { createMemory } from '@cairn/memory';
import type { NewMemory, Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import { createSqliteStore } from '@cairn/store-sqlite';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite/vector';
import { median, type Suite } from '../harness.js';
import { clusteredVectors } from '../random.js';

const DIMS = 512;
const QUERIES = 20;
/** Queries timed on the approximate path (the first QUERIES are those of the exact scan). */
const APPROXIMATE_QUERIES = 200;
const SEED = 512;

const count = (n: number) => n.toLocaleString('en');
/** Memories per second, of a load of `n` that took `seconds`. */
const rate = (n: number, seconds: number) => `${count(Math.round(n / seconds))} memories/s`;

function memoryRow(i: number, embedding: number[]): NewMemory {
  return { id: `m${i}`, agentId: 'bench', content: { text: `memory number ${i}` }, embedding };
}

/** Top-10 ids by cosine, by brute force in JavaScript (float64): the ground truth. */
function bruteForceTop10(vectors: Float32Array[], norms: Float64Array, q: number[]): Set<string> {
  let qn = 0;
  for (const x of q) qn += x * x;
  qn = Math.sqrt(qn);
  const best: Array<{ i: number; s: number }> = [];
  for (let i = 0; i < vectors.length; i++) {
    const v = vectors[i]!;
    let dot = 0;
    for (let d = 0; d < DIMS; d++) dot += v[d]! * q[d]!;
    const s = dot / (norms[i]! * qn);
    if (best.length < 10 || s > best[best.length - 1]!.s) {
      best.push({ i, s });
      best.sort((a, b) => b.s - a.s);
      if (best.length > 10) best.pop();
    }
  }
  return new Set(best.map((b) => `m${b.i}`));
}

/** The 95th percentile (nearest rank). */
function p95(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(0.95 * s.length) - 1)]!;
}

const times = (ms: number[]) =>
  `${median(ms).toFixed(1)} | ${p95(ms).toFixed(1)} | ${Math.max(...ms).toFixed(1)}`;

/**
 * Each search's wall time and this process's CPU time in it (user + system: what the
 * search itself cost, less sensitive than wall time to other processes on the machine).
 */
async function timeSearches(store: Store, queries: number[][]) {
  const ms: number[] = [];
  const cpuMs: number[] = [];
  const results: string[][] = [];
  for (const q of queries) {
    const t = performance.now();
    const cpu = process.cpuUsage();
    const hits = await store.searchMemories({ vector: q, limit: 10 });
    const used = process.cpuUsage(cpu);
    ms.push(performance.now() - t);
    cpuMs.push((used.user + used.system) / 1000);
    results.push(hits.map((h) => h.memory.id));
  }
  return { ms, cpuMs, results };
}

/** A relation's size on disk in bytes (with its TOAST data and, for a table, its indexes). */
async function relationBytes(db: PGlite, name: string): Promise<number> {
  const r = await db.query<{ n: string }>(
    'SELECT pg_total_relation_size($1::regclass)::text AS n',
    [name],
  );
  return Number(r.rows[0]!.n);
}

const recallAt10 = (results: string[][], truth: Set<string>[]) =>
  results.reduce((n, ids, i) => n + ids.filter((id) => truth[i]!.has(id)).length, 0) /
  (results.length * 10);

const suite: Suite = {
  id: 'memory-scale',
  title: '@cairn/memory at scale: recall latency over 100,000 and 1,000,000 memories',
  async run(log) {
    const sizes = (process.env.CAIRN_BENCH_SCALE ?? '100000,1000000')
      .split(',')
      .map(Number)
      .filter((n) => Number.isInteger(n) && n > 0)
      .sort((a, b) => a - b);
    const budgetS = Number(process.env.CAIRN_BENCH_SCALE_BUDGET_S ?? 1800);
    const pgliteBudgetS = Number(process.env.CAIRN_BENCH_PGLITE_BUDGET_S ?? 1200);
    const next = clusteredVectors(SEED, DIMS);
    const queries = Array.from({ length: QUERIES }, next);
    // More queries around the same topics, from a stream of their own.
    const more = clusteredVectors(SEED, DIMS, 200, SEED + 1);
    const approximateQueries = [
      ...queries,
      ...Array.from({ length: APPROXIMATE_QUERIES - QUERIES }, more),
    ];
    const rows: string[] = [];
    const notes: string[] = [];

    // Ground truth for the first size, kept as float32 (a million would not fit comfortably).
    const truthSize = sizes[0]!;
    const kept: Float32Array[] = [];
    const norms = new Float64Array(truthSize);

    // SQLite: a file on disk, grown from one size to the next.
    const dir = mkdtempSync(join(os.tmpdir(), 'cairn-scale-'));
    const path = join(dir, 'scale.db');
    const sqlite = createSqliteStore({ path });
    // The same file (and connection), always the exact scan.
    const exactStore = createSqliteStore({ path }, { vectorSearch: 'exact' });
    let truth: Set<string>[] = [];
    try {
      await sqlite.ensureEmbeddingSpace({ embedderId: 'synthetic-512', dimensions: DIMS });
      const started = performance.now();
      let loaded = 0;
      for (const size of sizes) {
        const stepFrom = loaded;
        let stepMs = 0; // in addMemories: the vectors are made in between
        while (loaded < size) {
          if ((performance.now() - started) / 1000 > budgetS) break;
          const batch: NewMemory[] = [];
          for (let j = 0; j < 2000 && loaded < size; j++, loaded++) {
            const v = next();
            if (loaded < truthSize) {
              const f = Float32Array.from(v);
              kept.push(f);
              let n = 0;
              for (const x of f) n += x * x;
              norms[loaded] = Math.sqrt(n);
            }
            batch.push(memoryRow(loaded, v));
          }
          const t = performance.now();
          await sqlite.addMemories(batch);
          stepMs += performance.now() - t;
          if (loaded % 100_000 === 0) log(`sqlite: ${count(loaded)} memories loaded`);
        }
        const loadS = (performance.now() - started) / 1000;
        const stepRate = rate(loaded - stepFrom, stepMs / 1000);
        const partial = loaded < size;
        if (partial) {
          notes.push(
            `SQLite stopped at ${count(loaded)} of ${count(size)} memories: loading passed the ${budgetS} s budget (CAIRN_BENCH_SCALE_BUDGET_S) on this machine; the row says what was measured at ${count(loaded)}.`,
          );
        }
        if (loaded === truthSize) truth = queries.map((q) => bruteForceTop10(kept, norms, q));
        const exact = await timeSearches(exactStore, queries);
        const recall = loaded === truthSize ? recallAt10(exact.results, truth).toFixed(3) : 'exact';
        const bytes = statSync(path).size;
        rows.push(
          `| SQLite (sqlite-vec exact scan, \`vectorSearch: 'exact'\`) | ${count(loaded)} | ${times(exact.ms)} | ${recall} | loaded in ${loadS.toFixed(0)} s (cumulative; this step ${stepRate} in addMemories, codes kept by triggers), file ${(bytes / 1e9).toFixed(2)} GB; ${QUERIES} queries |`,
        );
        // The first approximate search reads the file's codes into this process.
        const t0 = performance.now();
        await sqlite.searchMemories({ vector: approximateQueries[0]!, limit: 10 });
        const firstS = (performance.now() - t0) / 1000;
        const approx = await timeSearches(sqlite, approximateQueries);
        const exactTop = exact.results.map((ids) => new Set(ids));
        const againstExact = recallAt10(approx.results.slice(0, QUERIES), exactTop);
        const againstTruth =
          loaded === truthSize
            ? `; against the brute-force top 10: ${recallAt10(approx.results.slice(0, QUERIES), truth).toFixed(3)}`
            : '';
        rows.push(
          `| SQLite (sign-bit candidates + exact rescoring, capabilities: ${sqlite.capabilities.vectorSearch}) | ${count(loaded)} | ${times(approx.ms)} | ${againstExact.toFixed(3)} | ${APPROXIMATE_QUERIES} queries; recall@10 against the exact scan's top 10 of the first ${QUERIES} in this run${againstTruth}; p95 ${(p95(approx.ms) / median(exact.ms)).toFixed(4)}× the exact scan's median; CPU time a search median ${median(approx.cpuMs).toFixed(1)} ms, p95 ${p95(approx.cpuMs).toFixed(1)} ms (exact scan: median ${median(exact.cpuMs).toFixed(1)} ms); the first search read the codes in ${firstS.toFixed(1)} s (RSS ${(process.memoryUsage().rss / 1e9).toFixed(2)} GB after), load average ${os.loadavg()[0]!.toFixed(1)} |`,
        );
        const ms = approx.ms;
        log(
          `sqlite ${loaded}: exact median ${median(exact.ms).toFixed(1)} ms; approximate median ${median(ms).toFixed(1)} ms, p95 ${p95(ms).toFixed(1)} ms, recall@10 ${againstExact.toFixed(3)}`,
        );
        if (partial) break;
      }
      // What recall() adds on top: query embedding is the embedder's; the rest is measured here.
      const fixed = new Map(queries.map((q, i) => [`query ${i}`, q]));
      const memory = createMemory({
        store: sqlite,
        agentId: 'bench',
        embedder: {
          id: 'synthetic-512',
          dimensions: DIMS,
          embed: async (texts) => texts.map((t) => fixed.get(t)!),
        },
      });
      const recallMs: number[] = [];
      for (let i = 0; i < QUERIES; i++) {
        const t = performance.now();
        await memory.recall(`query ${i}`, { mode: 'vector', limit: 10 });
        recallMs.push(performance.now() - t);
      }
      notes.push(
        `memory.recall (vector, limit 10) over the ${count(loaded)} SQLite memories (approximate), with query vectors handed over by a stub embedder: median ${median(recallMs).toFixed(1)} ms, p95 ${p95(recallMs).toFixed(1)} ms (scoping, re-scoring and hydration on top of the search; the query's embedding is the embedder's cost, below).`,
      );
    } finally {
      await exactStore.close();
      await sqlite.close();
      rmSync(dir, { recursive: true, force: true });
    }

    // PGlite with pgvector: HNSW at the first size (or what loads within its budget),
    // against the same ground truth.
    let pgSize = 0;
    const db = pgliteBudgetS > 0 ? await PGlite.create({ extensions: { vector } }) : null;
    if (!db) notes.push('PGlite was skipped (CAIRN_BENCH_PGLITE_BUDGET_S=0).');
    else
      try {
        const store = await createPostgresStore({ client: db }, { schema: 'scale' });
        await store.ensureEmbeddingSpace({ embedderId: 'synthetic-512', dimensions: DIMS });
        const started = performance.now();
        let storeMs = 0;
        const again = clusteredVectors(SEED, DIMS);
        for (let i = 0; i < QUERIES; i++) again(); // the same stream: skip the queries
        while (pgSize < kept.length && (performance.now() - started) / 1000 < pgliteBudgetS) {
          const batch: NewMemory[] = [];
          for (let j = 0; j < 1000 && pgSize < kept.length; j++, pgSize++)
            batch.push(memoryRow(pgSize, again()));
          const t = performance.now();
          await store.addMemories(batch);
          storeMs += performance.now() - t;
        }
        const loadS = storeMs / 1000;
        log(`pglite: ${pgSize} loaded in ${loadS.toFixed(0)} s`);
        const tableBytes = await relationBytes(db, 'scale.memories');
        if (pgSize < truthSize) {
          notes.push(
            `PGlite stopped at ${count(pgSize)} of ${count(truthSize)} memories: loading passed the ${pgliteBudgetS} s budget (CAIRN_BENCH_PGLITE_BUDGET_S) on this machine; its recall@10 is against the brute-force top 10 of those ${count(pgSize)}.`,
          );
        }
        const pgTruth =
          pgSize === truthSize
            ? truth
            : queries.map((q) => bruteForceTop10(kept.slice(0, pgSize), norms, q));
        const t = performance.now();
        await store.searchMemories({ vector: queries[0]!, limit: 10 });
        const buildS = (performance.now() - t) / 1000;
        const indexBytes = await relationBytes(db, 'scale.memories_embedding_hnsw');
        const { ms, results } = await timeSearches(store, queries);
        rows.push(
          `| PGlite (pgvector HNSW, capabilities: ${store.capabilities.vectorSearch}) | ${count(pgSize)} | ${times(ms)} | ${recallAt10(results, pgTruth).toFixed(3)} | loaded in ${loadS.toFixed(0)} s (${rate(pgSize, loadS)}); the first search built the index in ${buildS.toFixed(0)} s |`,
        );
        await store.close();
        // PGlite at a million, from what was measured here rather than tried: the load at
        // this rate, and the table and index it would hold in this process's memory.
        const scale = 1_000_000 / pgSize;
        const gb = (bytes: number) => `${((bytes * scale) / 1e9).toFixed(1)} GB`;
        notes.push(
          `PGlite at 1,000,000 was not measured. Scaled from the ${count(pgSize)} above: loading at ${rate(pgSize, loadS)} takes ${((loadS * scale) / 60).toFixed(0)} min; the table (float8[] vectors, keyword index) would be ${gb(tableBytes)} and the HNSW index ${gb(indexBytes)}, all inside this one process (PGlite keeps the database in memory; its RSS was ${(process.memoryUsage().rss / 1e9).toFixed(1)} GB after this build), and the build, which took ${buildS.toFixed(0)} s here, grows faster than the count (each insertion searches a larger graph): well over ${((buildS * scale) / 60).toFixed(0)} min. Load average ${os.loadavg()[0]!.toFixed(1)} at this point, on 2 cores.`,
        );
      } finally {
        await db.close();
      }

    try {
      const { useEmbedder } = await import('@cairn/embedder-use');
      const use = useEmbedder();
      await use.load();
      const ms: number[] = [];
      for (let i = 0; i < QUERIES; i++) {
        const t = performance.now();
        await use.embed([`what did we decide about the trip number ${i}?`]);
        ms.push(performance.now() - t);
      }
      use.dispose();
      notes.push(
        `Embedding one query with USE Lite (\`@cairn/embedder-use\`): median ${median(ms).toFixed(1)} ms; \`recall\` caches each query's vector per instance.`,
      );
    } catch (e) {
      notes.push(`@cairn/embedder-use not available: ${(e as Error).message}`);
    }

    return {
      markdown: `${DIMS}-dimensional clustered synthetic vectors (the width of \`@cairn/embedder-use\`; 200 topics plus noise), ${QUERIES} queries, top 10, no filter. recall@10 of an exact path is against a brute-force float64 scan in JavaScript over the same vectors (computed at ${count(truthSize)}; at larger sizes the SQLite scan is exact by construction); SQLite's approximate search (its default) is measured against its exact scan on the same file in the same run, and timed over ${APPROXIMATE_QUERIES} queries (the exact scan's ${QUERIES} and more around the same topics).

| store | memories | median ms | p95 ms | max ms | recall@10 | notes |
| --- | ---: | ---: | ---: | ---: | ---: | --- |
${rows.join('\n')}

${notes.join('\n\n')}`,
    };
  },
};
export default suite;
