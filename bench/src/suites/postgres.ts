import { newId } from '@cairn/core';
import { cosineSimilarity } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite/vector';
import pg from 'pg';
import { type Comparison, compare, comparisonTable, median, type Suite } from '../harness.js';
import { chainRows, type Row } from '../messages.js';
import { postgresUnreachable, POSTGRES_URL as URL } from '../postgres.js';
import { clusteredVectors, rng } from '../random.js';

/** Raw pg, the ceiling: the same rows through plain statements on a pool of its own. */
async function serverRows(log: (line: string) => void): Promise<Comparison[]> {
  const schema = `cairn_bench_${newId().replaceAll('-', '').slice(-12)}`;
  const store = await createPostgresStore({ connectionString: URL }, { schema });
  const pool = new pg.Pool({ connectionString: URL, max: 10 });
  const s = `"${schema}"`;
  try {
    await pool.query(`CREATE TABLE ${s}.raw_messages (
      id text PRIMARY KEY, thread_id text NOT NULL, parent_id text, role text NOT NULL, type text,
      data jsonb NOT NULL, created_at double precision NOT NULL, depth integer NOT NULL)`);
    await pool.query(
      `CREATE TABLE ${s}.raw_branches (id text PRIMARY KEY, version integer NOT NULL)`,
    );
    await pool.query(`CREATE TABLE ${s}.raw_commits (
      branch_id text NOT NULL, version integer NOT NULL, "update" jsonb NOT NULL, created_at double precision NOT NULL,
      PRIMARY KEY (branch_id, version))`);
    const inTx = async (fn: (c: pg.PoolClient) => Promise<unknown>) => {
      const c = await pool.connect();
      try {
        await c.query('BEGIN');
        await fn(c);
        await c.query('COMMIT');
      } finally {
        c.release();
      }
    };

    const rows: Comparison[] = [];

    // 1. addMessages, 100 per call, 10 calls a run.
    log('addMessages: 10 batches of 100 a run');
    let storeBatches: Row[][] = [];
    let rawBatches: Row[][] = [];
    const batchesFor = async (thread: string) => {
      const all = chainRows(thread, 1000, null);
      return Array.from({ length: 10 }, (_, b) => all.slice(b * 100, b * 100 + 100));
    };
    rows.push(
      await compare({
        name: 'addMessages, 100 per call (1,000 messages a run)',
        baseline: {
          name: 'pg: multi-row INSERT in a transaction',
          before: async () => {
            rawBatches = await batchesFor(newId());
          },
          run: async () => {
            let depth = 0;
            for (const batch of rawBatches) {
              const params: unknown[] = [];
              const values = batch.map((m) => {
                params.push(
                  m.id,
                  m.threadId,
                  m.parentId,
                  m.role,
                  null,
                  JSON.stringify(m.data),
                  Date.now(),
                  depth++,
                );
                const n = params.length;
                return `($${n - 7}, $${n - 6}, $${n - 5}, $${n - 4}, $${n - 3}, $${n - 2}::jsonb, $${n - 1}, $${n})`;
              });
              await inTx((c) =>
                c.query(
                  `INSERT INTO ${s}.raw_messages (id, thread_id, parent_id, role, type, data, created_at, depth) VALUES ${values.join(', ')}`,
                  params,
                ),
              );
            }
          },
        },
        subject: {
          name: 'store.addMessages',
          before: async () => {
            const thread = await store.createThread({});
            storeBatches = await batchesFor(thread.id);
          },
          run: async () => {
            for (const batch of storeBatches) await store.addMessages(batch);
          },
        },
        runs: 9,
        ops: 1000,
        target: { maxRatio: 2, label: '>= 0.5x raw (time <= 2x)' },
      }),
    );

    // 2. One state commit per call.
    log('appendStateCommit: 200 commits a run, one per call');
    const thread = await store.createThread({});
    const branch = await store.createBranch({
      threadId: thread.id,
      name: 'main',
      headMessageId: null,
    });
    let version = 0;
    await pool.query(`INSERT INTO ${s}.raw_branches (id, version) VALUES ('b', 0)`);
    let rawVersion = 0;
    rows.push(
      await compare({
        name: 'one state commit per call (200 a run)',
        baseline: {
          name: 'pg: INSERT commit + UPDATE branch in a transaction',
          run: async () => {
            for (let i = 0; i < 200; i++) {
              rawVersion++;
              await inTx(async (c) => {
                await c.query(
                  `INSERT INTO ${s}.raw_commits (branch_id, version, "update", created_at) VALUES ('b', $1, $2::jsonb, $3)`,
                  [rawVersion, JSON.stringify({ n: i }), Date.now()],
                );
                await c.query(`UPDATE ${s}.raw_branches SET version = $1 WHERE id = 'b'`, [
                  rawVersion,
                ]);
              });
            }
          },
        },
        subject: {
          name: 'store.appendStateCommit',
          run: async () => {
            for (let i = 0; i < 200; i++) {
              await store.appendStateCommit(
                { branchId: branch.id, messageId: null, update: { n: i } },
                version,
              );
              version++;
            }
          },
        },
        runs: 9,
        ops: 200,
        target: { maxRatio: 2, label: '>= 0.5x raw (time <= 2x)' },
      }),
    );

    // 3. A whole 10,000-message chain.
    log('getChain: a 10,000-message chain');
    const chainThread = await store.createThread({});
    const chain = chainRows(chainThread.id, 10_000, null);
    for (let i = 0; i < chain.length; i += 1000) await store.addMessages(chain.slice(i, i + 1000));
    const head = chain[chain.length - 1]!.id;
    rows.push(
      await compare({
        name: 'whole 10,000-message chain read',
        baseline: {
          name: 'pg: recursive CTE on the same table',
          run: () =>
            pool.query(
              `WITH RECURSIVE c AS (
                 SELECT * FROM ${s}.messages WHERE id = $1
                 UNION ALL SELECT m.* FROM ${s}.messages m JOIN c ON m.id = c.parent_id)
               SELECT id, thread_id, parent_id, role, type, data, created_at, depth FROM c ORDER BY depth`,
              [head],
            ),
        },
        subject: { name: 'store.getChain', run: () => store.getChain(head) },
        runs: 9,
        target: { maxRatio: 1.5, label: '<= 1.5x' },
      }),
    );
    return rows;
  } finally {
    await store.close();
    await pool.query(`DROP SCHEMA ${s} CASCADE`).catch(() => undefined);
    await pool.end();
  }
}

/**
 * A thread grown from empty in one process, as a new deployment grows one: a few short
 * threads read first (the store's prepared statements get their plans while the tables
 * are tiny and have no statistics: autovacuum is off here, as on a fresh or bulk-loaded
 * database), then a 20,000-message thread written and read whole. The baseline is the
 * same database after ANALYZE (which also throws the cached plans away).
 */
async function grownFromEmpty(log: (line: string) => void): Promise<Comparison> {
  const MESSAGES = 20_000;
  const open = async () => {
    const schema = `cairn_bench_${newId().replaceAll('-', '').slice(-12)}`;
    const store = await createPostgresStore({ connectionString: URL }, { schema });
    for (let t = 0; t < 3; t++) {
      const thread = await store.createThread({});
      const short = chainRows(thread.id, 6, null);
      await store.addMessages(short);
      for (let i = 0; i < 8; i++) await store.getChain(short.at(-1)!.id);
    }
    const thread = await store.createThread({});
    const rows = chainRows(thread.id, MESSAGES, null);
    for (let i = 0; i < rows.length; i += 100) await store.addMessages(rows.slice(i, i + 100));
    return { store, schema, head: rows.at(-1)!.id };
  };
  log(`history after growth from empty: two schemas of ${MESSAGES} messages`);
  const grown = await open();
  const analyzed = await open();
  const pool = new pg.Pool({ connectionString: URL, max: 1 });
  try {
    await pool.query(`ANALYZE "${analyzed.schema}".messages`);
    return await compare({
      name: `${MESSAGES.toLocaleString('en')}-message history after growth from empty, before ANALYZE`,
      baseline: {
        name: 'the same read after ANALYZE',
        run: () => analyzed.store.getChain(analyzed.head),
      },
      subject: { name: 'store.getChain', run: () => grown.store.getChain(grown.head) },
      warmup: 1,
      runs: 5,
      target: { maxRatio: 2, label: '<= 2x' },
    });
  } finally {
    for (const { store, schema } of [grown, analyzed]) {
      await store.close();
      await pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
    }
    await pool.end();
  }
}

/** Clustered vectors, as sentence embeddings are: 200 topics plus noise. */
function embeddings(count: number, dims: number, seed: number): number[][] {
  const next = clusteredVectors(seed, dims);
  return Array.from({ length: count }, next);
}

async function pgliteVectors(log: (line: string) => void): Promise<string> {
  const COUNT = 20_000;
  const DIMS = 384;
  const QUERIES = 20;
  const db = await PGlite.create({ extensions: { vector } });
  try {
    const hnsw = await createPostgresStore({ client: db }, { schema: 'bench' });
    // The same schema without the index: the store's exact scan over the same rows.
    const exact = await createPostgresStore(
      { client: db },
      { schema: 'bench', vectorSearch: 'exact' },
    );
    const vectors = embeddings(COUNT + QUERIES, DIMS, 2024);
    let t = performance.now();
    for (let i = 0; i < COUNT; i += 500) {
      await hnsw.addMemories(
        vectors.slice(i, i + 500).map((embedding, j) => ({
          agentId: 'bench',
          content: { text: `memory ${i + j}` },
          embedding,
        })),
      );
    }
    const loadS = (performance.now() - t) / 1000;
    log(`loaded ${COUNT} memories of ${DIMS} dims in ${loadS.toFixed(1)} s`);
    const queries = vectors.slice(COUNT);
    t = performance.now();
    await hnsw.searchMemories({ vector: queries[0]!, limit: 10 });
    const buildS = (performance.now() - t) / 1000;
    log(`first search (builds the HNSW index over ${COUNT}) in ${buildS.toFixed(1)} s`);
    const hnswMs: number[] = [];
    const exactMs: number[] = [];
    let found = 0;
    for (const q of queries) {
      t = performance.now();
      const approx = await hnsw.searchMemories({ vector: q, limit: 10 });
      hnswMs.push(performance.now() - t);
      t = performance.now();
      const truth = await exact.searchMemories({ vector: q, limit: 10 });
      exactMs.push(performance.now() - t);
      const ids = new Set(truth.map((h) => h.memory.id));
      found += approx.filter((h) => ids.has(h.memory.id)).length;
    }
    const recall = found / (QUERIES * 10);
    log(`recall@10 ${recall.toFixed(3)}`);
    await hnsw.close();
    await exact.close();
    // The hard case for any HNSW index: uniform random vectors, with no clusters to
    // follow. Informational; the truth is a brute-force scan in JavaScript.
    const uniform = await createPostgresStore({ client: db }, { schema: 'bench_uniform' });
    const u = rng(99);
    const uniformVectors = Array.from({ length: COUNT + QUERIES }, () =>
      Array.from({ length: DIMS }, () => u() * 2 - 1),
    );
    for (let i = 0; i < COUNT; i += 500) {
      await uniform.addMemories(
        uniformVectors.slice(i, i + 500).map((embedding, j) => ({
          id: `u${i + j}`,
          agentId: 'bench',
          content: { text: `uniform ${i + j}` },
          embedding,
        })),
      );
    }
    let uniformFound = 0;
    for (const q of uniformVectors.slice(COUNT)) {
      const truth = new Set(
        uniformVectors
          .slice(0, COUNT)
          .map((v, i) => ({ id: `u${i}`, score: cosineSimilarity(q, v) }))
          .sort((a, b) => b.score - a.score)
          .slice(0, 10)
          .map((h) => h.id),
      );
      const hits = await uniform.searchMemories({ vector: q, limit: 10 });
      uniformFound += hits.filter((h) => truth.has(h.memory.id)).length;
    }
    const uniformRecall = uniformFound / (QUERIES * 10);
    log(`recall@10 on uniform random vectors ${uniformRecall.toFixed(3)}`);
    await uniform.close();
    return [
      `PGlite with pgvector, ${COUNT.toLocaleString('en')} memories of ${DIMS} dimensions (clustered synthetic embeddings: 200 topics plus noise), ${QUERIES} queries, top 10:`,
      '',
      '| measure | HNSW (capabilities: approximate) | exact scan (vectorSearch: exact) | target | |',
      '| --- | ---: | ---: | --- | --- |',
      `| recall@10 against the exact scan | ${recall.toFixed(3)} | 1 | >= 0.95 | ${recall >= 0.95 ? 'met' : '**missed**'} |`,
      `| median search latency, ms | ${median(hnswMs).toFixed(1)} | ${median(exactMs).toFixed(1)} | reported | |`,
      `| recall@10 on ${COUNT.toLocaleString('en')} uniform random vectors (against brute force in JS) | ${uniformRecall.toFixed(3)} | 1 | informational | |`,
      '',
      `Loading took ${loadS.toFixed(1)} s; the first vector search built the HNSW index in bulk in ${buildS.toFixed(1)} s.`,
    ].join('\n');
  } finally {
    await db.close();
  }
}

const suite: Suite = {
  id: 'postgres',
  title: '@cairn/store-postgres: against raw pg, and pgvector on PGlite',
  async run(log) {
    const parts: string[] = [];
    const down = await postgresUnreachable();
    if (down) {
      log(`PostgreSQL at ${URL} unreachable (${down}): server comparisons skipped`);
      parts.push(`_Server comparisons skipped: PostgreSQL at ${URL} was unreachable (${down})._`);
    } else {
      const rows = await serverRows(log);
      rows.push(await grownFromEmpty(log));
      parts.push(
        `Local PostgreSQL server (${URL.replace(/\/\/[^@]*@/, '//')}), each side on a pool of its own:\n\n${comparisonTable(rows)}\n\n` +
          'The store does more per call than the raw statements: addMessages checks threads and parents and computes depths (one lookup query) and sends a NOTIFY; ' +
          "appendStateCommit reads the branch's tail segment under its row lock and writes it back with the commit packed in (two statements, and its NOTIFY), " +
          'where the raw baseline needs BEGIN, INSERT, UPDATE, COMMIT and stores a row per commit.',
      );
    }
    parts.push(await pgliteVectors(log));
    return { markdown: parts.join('\n\n') };
  },
};
export default suite;
