import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@cairn/core';
import type { MemoryHit } from '@cairn/store';
import { normalizeNewMessages, planMessageBatch } from '@cairn/store/adapter';
import { createSqliteStore } from '@cairn/store-sqlite';
import Database from 'better-sqlite3';
import {
  type Comparison,
  compare,
  comparisonTable,
  loop,
  measure,
  type Suite,
} from '../harness.js';
import { appendChain, chainRows, type Row } from '../messages.js';
import { rng } from '../random.js';
import { rawSqliteChain } from '../sqlite-chain.js';

/** A raw connection set up like the store's: WAL, synchronous NORMAL. */
function rawDb(path: string): Database.Database {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  return db;
}

const BARE_TABLE = `CREATE TABLE IF NOT EXISTS bare (
  id TEXT PRIMARY KEY, thread_id TEXT, parent_id TEXT, role TEXT, type TEXT, data TEXT, created_at INTEGER, depth INTEGER
)`;

/** Reciprocal rank fusion of two rankings (k = 60), the top `limit`. */
function fuse(a: MemoryHit[], b: MemoryHit[], limit: number): string[] {
  const score = new Map<string, number>();
  for (const list of [a, b]) {
    for (const [rank, h] of list.entries()) {
      score.set(h.memory.id, (score.get(h.memory.id) ?? 0) + 1 / (60 + rank + 1));
    }
  }
  return [...score.entries()]
    .sort((x, y) => y[1] - x[1])
    .slice(0, limit)
    .map(([id]) => id);
}

/** The exact top `limit` by cosine over a flat Float32Array of unit-normalised rows. */
function bruteForce(
  matrix: Float32Array,
  norms: Float64Array,
  dims: number,
  q: Float32Array,
  limit: number,
): number[] {
  let qn = 0;
  for (let j = 0; j < dims; j++) qn += q[j]! * q[j]!;
  qn = Math.sqrt(qn);
  const n = norms.length;
  const topIdx: number[] = [];
  const topScore: number[] = [];
  for (let i = 0; i < n; i++) {
    let dot = 0;
    const off = i * dims;
    for (let j = 0; j < dims; j++) dot += matrix[off + j]! * q[j]!;
    const s = dot / (norms[i]! * qn);
    if (topIdx.length < limit || s > topScore[topScore.length - 1]!) {
      let k = topScore.length - 1;
      if (topIdx.length < limit) {
        topIdx.push(i);
        topScore.push(s);
        k = topScore.length - 1;
      }
      while (k > 0 && topScore[k - 1]! < s) {
        topScore[k] = topScore[k - 1]!;
        topIdx[k] = topIdx[k - 1]!;
        k--;
      }
      topScore[k] = s;
      topIdx[k] = i;
    }
  }
  return topIdx;
}

const WORDS = Array.from({ length: 2000 }, (_, i) => `w${i.toString(36)}`);

const suite: Suite = {
  id: 'sqlite',
  title: '@cairn/store-sqlite against raw better-sqlite3',
  async run(log) {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-sqlite-'));
    const rows: Comparison[] = [];
    const notes: string[] = [];
    try {
      const storePath = join(dir, 'store.db');
      const store = createSqliteStore({ path: storePath });
      const raw = rawDb(join(dir, 'raw.db'));
      raw.exec(BARE_TABLE);
      const insertBare = raw.prepare('INSERT INTO bare VALUES (?, ?, ?, ?, NULL, ?, ?, ?)');
      const insertAll = (batch: Row[]) => {
        const now = Date.now();
        batch.forEach((m, i) => {
          insertBare.run(m.id, m.threadId, m.parentId, m.role, JSON.stringify(m.data), now, i);
        });
      };

      // 1. addMessages, 10,000 in batches of 100, vs one raw transaction of the same rows.
      log('appending 10,000 messages in batches of 100');
      {
        let storeRows: Row[] = [];
        let rawRows: Row[] = [];
        let threadId = '';
        rows.push(
          await compare({
            name: 'append 10,000 messages, addMessages in batches of 100',
            baseline: {
              name: 'raw INSERTs, one transaction, bare table',
              before: () => {
                rawRows = chainRows(newId(), 10_000);
              },
              run: () => raw.transaction(insertAll)(rawRows),
            },
            subject: {
              name: 'addMessages x 100',
              before: async () => {
                threadId = (await store.createThread({})).id;
                storeRows = chainRows(threadId, 10_000);
              },
              run: async () => {
                for (let i = 0; i < storeRows.length; i += 100)
                  await store.addMessages(storeRows.slice(i, i + 100));
              },
            },
            warmup: 2,
            runs: 9,
            ops: 10_000,
            target: { maxRatio: 2, label: '>= 0.5x the rate (time <= 2x)' },
          }),
        );
      }

      // Where the append time goes, against the same baseline (no targets: a breakdown).
      log('breaking the batch append down');
      {
        const costs: Comparison[] = [];
        let rawRows: Row[] = [];
        let batched: Row[] = [];
        const baseline = {
          name: 'raw INSERTs, one transaction, bare table',
          before: () => {
            rawRows = chainRows(newId(), 10_000);
          },
          run: () => raw.transaction(insertAll)(rawRows),
        };
        costs.push(
          await compare({
            name: '- of which: the same raw INSERTs in transactions of 100 (commits, WAL checkpoints)',
            baseline,
            subject: {
              name: 'raw INSERTs, 100 transactions',
              before: () => {
                batched = chainRows(newId(), 10_000);
              },
              run: () => {
                for (let i = 0; i < batched.length; i += 100)
                  raw.transaction(insertAll)(batched.slice(i, i + 100));
              },
            },
            warmup: 2,
            runs: 9,
          }),
        );
        costs.push(
          await compare({
            name: "- of which: @cairn/store's shared checks alone (normalizeNewMessages + planMessageBatch)",
            baseline,
            subject: {
              name: 'checks, 100 batches, no SQL',
              before: () => {
                batched = chainRows('t', 10_000);
              },
              run: () => {
                for (let i = 0; i < batched.length; i += 100) {
                  const drafts = normalizeNewMessages(batched.slice(i, i + 100), Date.now());
                  const prev = batched[i - 1];
                  planMessageBatch(drafts, {
                    threadIds: new Set(['t']),
                    messages: new Map(
                      prev
                        ? [[prev.id, { threadId: 't', depth: i - 1, jumpId: null, jumpDepth: 0 }]]
                        : [],
                    ),
                  });
                }
              },
            },
            warmup: 2,
            runs: 9,
          }),
        );
        rows.push(...costs);
      }

      // 2. One message per transaction vs raw autocommit inserts.
      log('appending 1,000 messages one per call');
      {
        const N = 1_000;
        let storeRows: Row[] = [];
        let rawRows: Row[] = [];
        rows.push(
          await compare({
            name: `append ${N.toLocaleString('en')} messages one per call (save per message)`,
            baseline: {
              name: 'raw autocommit INSERT per row, bare table',
              before: () => {
                rawRows = chainRows(newId(), N);
              },
              run: () => {
                const now = Date.now();
                rawRows.forEach((m, i) => {
                  insertBare.run(
                    m.id,
                    m.threadId,
                    m.parentId,
                    m.role,
                    JSON.stringify(m.data),
                    now,
                    i,
                  );
                });
              },
            },
            subject: {
              name: 'addMessages([one])',
              before: async () => {
                storeRows = chainRows((await store.createThread({})).id, N);
              },
              run: async () => {
                for (const m of storeRows) await store.addMessages([m]);
              },
            },
            warmup: 2,
            runs: 9,
            ops: N,
            target: { maxRatio: 2, label: '>= 0.5x the rate (time <= 2x)' },
          }),
        );
      }

      // 3 and 4: reads, with a raw connection on the store's own file as the baseline.
      const reader = new Database(storePath, { readonly: true });
      log('reading a whole 10,000-message chain');
      {
        const thread = await store.createThread({});
        const head = await appendChain(store, thread.id, 10_000);
        rows.push(
          await compare({
            name: 'read a whole 10,000-message chain',
            baseline: rawSqliteChain(reader, head),
            subject: { name: 'getChain(head)', run: () => store.getChain(head) },
            runs: 9,
            target: { maxRatio: 1.5 },
          }),
        );
      }

      log('reading the last 50 of a 100,000-message chain');
      {
        const thread = await store.createThread({});
        const head = await appendChain(store, thread.id, 100_000);
        const last50 = (await store.getChain(head, { limit: 50 })).map((m) => m.id);
        const byId = reader
          .prepare(
            'SELECT id, thread_id, parent_id, role, type, data, created_at, depth FROM cairn_messages WHERE id = ?',
          )
          .raw(true);
        const REPEAT = 200;
        rows.push(
          await compare({
            name: `read the last 50 of a 100,000-message chain (${REPEAT} x)`,
            baseline: {
              name: '50 rows by primary key + JSON.parse',
              run: loop(REPEAT, () => {
                const out = [];
                for (const id of last50) {
                  const r = byId.get(id) as unknown[];
                  r[5] = JSON.parse(r[5] as string);
                  out.push(r);
                }
                return out;
              }),
            },
            subject: {
              name: 'getChain(head, { limit: 50 })',
              run: async () => {
                let last: unknown;
                for (let i = 0; i < REPEAT; i++) last = await store.getChain(head, { limit: 50 });
                return last;
              },
            },
            runs: 9,
            target: { maxRatio: 2 },
          }),
        );
      }
      reader.close();

      // 5. Vector and hybrid search over 100,000 memories of 384 dimensions.
      const N = 100_000;
      const DIMS = 384;
      log(`writing ${N.toLocaleString('en')} memories of ${DIMS} dimensions`);
      const next = rng(42);
      const matrix = new Float32Array(N * DIMS);
      const norms = new Float64Array(N);
      const ids: string[] = [];
      const written = performance.now();
      for (let start = 0; start < N; start += 2_000) {
        const batch = [];
        for (let i = start; i < start + 2_000; i++) {
          const v = new Array<number>(DIMS);
          let n2 = 0;
          for (let j = 0; j < DIMS; j++) {
            const x = Math.fround(next() * 2 - 1);
            v[j] = x;
            matrix[i * DIMS + j] = x;
            n2 += x * x;
          }
          norms[i] = Math.sqrt(n2);
          const words = Array.from(
            { length: 12 },
            () => WORDS[Math.floor(next() ** 2 * WORDS.length)]!,
          );
          const id = newId();
          ids.push(id);
          batch.push({
            id,
            agentId: `agent-${i % 10}`,
            type: 'fragment' as const,
            content: { text: words.join(' ') },
            embedding: v,
          });
        }
        await store.addMemories(batch);
      }
      notes.push(
        `Writing the ${N.toLocaleString('en')} memories (addMemories in batches of 2,000, FTS5 index and all) took ${((performance.now() - written) / 1000).toFixed(1)} s.`,
      );
      const queries = Array.from({ length: 16 }, () =>
        Float32Array.from({ length: DIMS }, () => next() * 2 - 1),
      );
      const texts = Array.from({ length: 16 }, () =>
        Array.from({ length: 3 }, () => WORDS[Math.floor(next() * WORDS.length)]!).join(' '),
      );
      // The store's answer is the exact answer: check it before timing anything.
      for (let q = 0; q < 3; q++) {
        const hits = await store.searchMemories({ vector: Array.from(queries[q]!), limit: 10 });
        const expected = bruteForce(matrix, norms, DIMS, queries[q]!, 10).map((i) => ids[i]!);
        if (JSON.stringify(hits.map((h) => h.memory.id)) !== JSON.stringify(expected)) {
          throw new Error(`vector search differs from the brute-force scan for query ${q}`);
        }
      }
      let qi = 0;
      log('vector search, limit 10');
      const vectorRow = await compare({
        name: `vector search, ${N.toLocaleString('en')} x ${DIMS} dims, limit 10`,
        baseline: {
          name: 'exact brute-force scan over a Float32Array in JS',
          run: () => bruteForce(matrix, norms, DIMS, queries[qi++ % queries.length]!, 10),
        },
        subject: {
          name: 'searchMemories({ vector })',
          run: () =>
            store.searchMemories({
              vector: Array.from(queries[qi++ % queries.length]!),
              limit: 10,
            }),
        },
        warmup: 1,
        runs: 7,
      });
      rows.push(vectorRow);
      log('hybrid search, limit 10');
      const hybridRow = await compare({
        name: `hybrid search (vector + keyword, RRF), ${N.toLocaleString('en')} x ${DIMS} dims, limit 10`,
        baseline: {
          name: 'exact brute-force scan over a Float32Array in JS',
          run: () => bruteForce(matrix, norms, DIMS, queries[qi++ % queries.length]!, 10),
        },
        subject: {
          name: 'searchMemories vector + text, fused',
          run: async () => {
            const q = qi++ % queries.length;
            const [v, t] = await Promise.all([
              store.searchMemories({ vector: Array.from(queries[q]!), limit: 20 }),
              store.searchMemories({ text: texts[q]!, limit: 20 }),
            ]);
            return fuse(v, t, 10);
          },
        },
        warmup: 1,
        runs: 7,
      });
      rows.push(hybridRow);
      const keyword = await measure(
        {
          name: 'keyword',
          run: () => store.searchMemories({ text: texts[qi++ % texts.length]!, limit: 20 }),
        },
        1,
        7,
      );
      notes.push(
        `Vector search median ${vectorRow.subject.medianMs.toFixed(1)} ms (brute force in JS ${vectorRow.baseline.medianMs.toFixed(1)} ms); hybrid median ${hybridRow.subject.medianMs.toFixed(1)} ms, of which the keyword half alone is ${keyword.medianMs.toFixed(1)} ms.`,
      );
      await store.close();
      raw.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    return {
      markdown: `${comparisonTable(rows)}

Both sides use a file in WAL mode with \`synchronous = NORMAL\`. Appends: the baseline
inserts the same rows into a bare table (text primary key, no other index, no checks);
\`addMessages\` also validates every message (JSON, ids, roles), looks up the thread and the
parents, computes depths and keeps the thread index. The two "of which" rows split the
batch append against the same baseline: committing every 100 rows (with the WAL
checkpoints the extra page writes bring) is one part; the input checks of \`@cairn/store\`
that every store runs (no SQL at all) are the other; the rest is the store's own lookups,
its thread index and its transaction handling. Chain reads: the baseline runs a
recursive CTE on the store's own file through a second, raw connection. The last-50 read
walks 50 parent links from the head, so its cost does not depend on the chain's length.
Vector search is an exact scan with sqlite-vec's \`vec_distance_cosine\` over the rows the
filter admits (checked equal to the brute-force answer before timing); the JS baseline
holds all vectors in memory, the store reads them from SQLite. Hybrid runs a vector and a
keyword (FTS5, bm25) search, 20 each, and fuses them by reciprocal rank; its baseline is
the same brute-force vector scan. No targets were set for search: the issue asks for the
numbers.

${notes.join('\n')}`,
    };
  },
};
export default suite;
