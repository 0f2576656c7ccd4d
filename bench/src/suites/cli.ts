import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { copyStore, exportDump } from '@cairn/cli';
import { newId } from '@cairn/core';
import type { NewMemory, NewMessage, Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import { createSqliteStore } from '@cairn/store-sqlite';
import Database from 'better-sqlite3';
import pg from 'pg';
import { type Comparison, compare, comparisonTable, median, type Suite } from '../harness.js';
import { POSTGRES_URL as URL } from '../postgres.js';
import { clusteredVectors, rng } from '../random.js';

/** `CAIRN_BENCH_CLI_SCALE=0.05` for a quick run while developing; 1 is the size. */
const SCALE = Number(process.env.CAIRN_BENCH_CLI_SCALE ?? 1);
const THREADS = Math.round(2000 * SCALE);
const PER_THREAD = 50;
const MEMORIES = Math.round(20_000 * SCALE);
const DIMS = 384;
/**
 * `copy` runs on a tenth of the data, five times each way (one run each at full size took
 * 2 to 5 minutes and its ratio moved from 0.52x to 1.92x between two runs on a shared machine).
 */
const COPY_PART = 10;
const COPY_RUNS = 5;

/** The data set, made once: every thread's messages, and the memories. */
function dataSet() {
  const r = rng(13);
  const vector = clusteredVectors(13, DIMS);
  const threads = Array.from({ length: THREADS }, (_, t) => {
    const id = newId();
    let parent: string | null = null;
    const messages: NewMessage[] = Array.from({ length: PER_THREAD }, (_, i) => {
      const m: NewMessage = {
        id: newId(),
        threadId: id,
        parentId: parent,
        role: i % 2 === 0 ? 'user' : 'assistant',
        data: {
          text: `message ${i} of thread ${t}: ${'the quick brown fox jumps over the lazy dog '.repeat(1 + Math.floor(r() * 4))}`,
          i,
        },
      };
      parent = m.id!;
      return m;
    });
    return { id, messages };
  });
  const memories: NewMemory[] = Array.from({ length: MEMORIES }, (_, i) => ({
    agentId: `agent-${i % 10}`,
    scope: 'shared',
    worldId: 'w',
    content: { text: `memory ${i}: a fact about topic ${Math.floor(r() * 200)}` },
    embedding: vector(),
  }));
  return { threads, memories };
}

type DataSet = ReturnType<typeof dataSet>;

/** The first `1/part` of the threads and of the memories. */
const partOf = (data: DataSet, part: number): DataSet => ({
  threads: data.threads.slice(0, Math.round(data.threads.length / part)),
  memories: data.memories.slice(0, Math.round(data.memories.length / part)),
});

/** Writes the data set through the store's own batched calls (the baseline of `copy`). */
async function writeThrough(store: Store, data: DataSet): Promise<void> {
  await store.ensureEmbeddingSpace({ embedderId: 'bench', dimensions: DIMS });
  for (let i = 0; i < data.threads.length; i += 20) {
    const group = data.threads.slice(i, i + 20);
    for (const t of group) await store.createThread({ id: t.id, title: `thread ${t.id}` });
    await store.addMessages(group.flatMap((t) => t.messages)); // 1,000 messages a call
    for (const t of group)
      await store.createBranch({
        threadId: t.id,
        name: 'main',
        headMessageId: t.messages.at(-1)!.id!,
      });
  }
  for (let i = 0; i < data.memories.length; i += 1000)
    await store.addMemories(data.memories.slice(i, i + 1000));
}

const schemaName = () => `cairn_bench_cli_${newId().replaceAll('-', '').slice(-12)}`;

async function dropSchema(schema: string): Promise<void> {
  const c = new pg.Client({ connectionString: URL });
  await c.connect();
  await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await c.end();
}

/** A sink that counts the bytes written to it. */
function counter() {
  let bytes = 0;
  const stream = new Writable({
    write(chunk: Buffer | string, _enc, done) {
      bytes += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
      done();
    },
  });
  return { stream, bytes: () => bytes };
}

/**
 * How many more bytes dump format 1 wrote than format 2: each embedding as JSON numbers
 * instead of its float32 blob in base64 between quotes.
 */
function formatOneExtraBytes(raw: Database.Database): number {
  let extra = 0;
  for (const blob of raw
    .prepare('SELECT embedding FROM cairn_memories WHERE embedding IS NOT NULL')
    .pluck()
    .iterate() as Iterable<Buffer>) {
    const numbers = Array.from(new Float32Array(Uint8Array.from(blob).buffer));
    extra += JSON.stringify(numbers).length - (blob.toString('base64').length + 2);
  }
  return extra;
}

const suite: Suite = {
  id: 'cli',
  title: '@cairn/cli: copy into Postgres, export as JSONL',
  async run(log) {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-cli-'));
    const sourcePath = join(dir, 'source.db');
    const data = dataSet();
    const part = partOf(data, COPY_PART);
    const partThreads = part.threads.length;
    const partMemories = part.memories.length;
    log(
      `source: ${THREADS} threads, ${THREADS * PER_THREAD} messages, ${MEMORIES} memories (${DIMS}-d) in a SQLite file; a tenth of it in another for copy`,
    );
    const source = createSqliteStore({ path: sourcePath });
    await writeThrough(source, data);
    const copySource = createSqliteStore({ path: join(dir, 'copy-source.db') });
    await writeThrough(copySource, part);
    const rows: Comparison[] = [];
    const schemas: string[] = [];
    let target: Store | null = null;
    /** Each run writes into a new schema, dropped after it (untimed). */
    const pgStore = async () => {
      const schema = schemaName();
      schemas.push(schema);
      target = await createPostgresStore({ connectionString: URL }, { schema, maxConnections: 4 });
    };
    const dropTarget = async () => {
      await target!.close();
      await dropSchema(schemas.pop()!);
    };
    try {
      let verified = '';
      const copyRow = await compare({
        name: `copy SQLite → Postgres (${partThreads * PER_THREAD} messages, ${partThreads} threads, ${partMemories} memories), verification included`,
        warmup: 1,
        runs: COPY_RUNS,
        baseline: {
          name: "the store's batched createThread/addMessages/createBranch/addMemories",
          before: pgStore,
          run: () => writeThrough(target!, part),
          after: dropTarget,
        },
        subject: {
          name: 'copyStore (cairn copy)',
          before: pgStore,
          run: async () => {
            const r = await copyStore(copySource, target!);
            verified = r.verified.every((c) => c.ok)
              ? 'every table verified'
              : 'VERIFICATION FAILED';
          },
          after: dropTarget,
        },
        target: { maxRatio: 2, label: '≥ 0.5× the rate (≤ 2× the time)' },
      });
      rows.push(copyRow);
      // The runs alternate sides: each pair ran back to back, under about the same load.
      const pairRates = copyRow.baseline.samples.map((b, i) => b / copyRow.subject.samples[i]!);
      log(`copy: ${verified}; rate per pair ${pairRates.map((r) => r.toFixed(2)).join(', ')}`);

      // Export: the dump's MB/s, against reading the same rows raw and serializing them
      // (embeddings as format 2 writes SQLite's: its float32 blob in base64).
      let bytes = 0;
      let rawBytes = 0;
      const raw = new Database(sourcePath, { readonly: true });
      const exportRow = await compare({
        name: 'export the SQLite database as JSONL',
        warmup: 1,
        runs: SCALE >= 1 ? 3 : 5,
        baseline: {
          name: 'better-sqlite3: SELECT * of every table, JSON.stringify per row, blobs in base64',
          run: () => {
            const out = counter();
            for (const t of [
              'cairn_threads',
              'cairn_messages',
              'cairn_branches',
              'cairn_memories',
            ]) {
              for (const row of raw.prepare(`SELECT * FROM ${t}`).iterate()) {
                const r = row as Record<string, unknown>;
                if (r.embedding instanceof Buffer) r.embedding = r.embedding.toString('base64');
                out.stream.write(`${JSON.stringify(r)}\n`);
              }
            }
            rawBytes = out.bytes();
          },
        },
        subject: {
          name: 'exportDump (cairn export)',
          run: async () => {
            const out = counter();
            await exportDump(source, out.stream);
            bytes = out.bytes();
          },
        },
      });
      const v1Bytes = bytes + formatOneExtraBytes(raw);
      raw.close();
      rows.push(exportRow);
      const seconds = exportRow.subject.medianMs / 1000;
      const mbps = bytes / 1e6 / seconds;
      const rawMbps = rawBytes / 1e6 / (exportRow.baseline.medianMs / 1000);
      const range = (xs: number[]) =>
        `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}×`;
      return {
        markdown: [
          comparisonTable(rows),
          '',
          `- copy: ${verified}; rate ${(1 / copyRow.ratio).toFixed(2)}× the store's own batched writes (ratio of the medians; target ≥ 0.5×); per back-to-back pair of runs ${median(pairRates).toFixed(2)}× (median), ${range(pairRates)} (range) over ${COPY_RUNS} pairs.`,
          `- export: ${(bytes / 1e6).toFixed(1)} MB of JSONL (dump format 2) in ${seconds.toFixed(2)} s = **${mbps.toFixed(1)} MB/s** (target ≥ 50 MB/s; ${mbps >= 50 ? 'met' : '**missed**'}); the raw read + stringify baseline wrote ${(rawBytes / 1e6).toFixed(1)} MB at ${rawMbps.toFixed(1)} MB/s. Format 1 wrote the same database as ${(v1Bytes / 1e6).toFixed(1)} MB (embeddings as JSON numbers): that is ${(v1Bytes / 1e6 / seconds).toFixed(1)} MB/s of format-1 bytes.`,
          `- Data: ${THREADS} threads of ${PER_THREAD} messages (one branch each), ${MEMORIES} memories with ${DIMS}-d embeddings (float32 in SQLite), Postgres 15 on this machine; copy on the first tenth of it, ${COPY_RUNS} runs each way after one warm-up pair, alternating sides, each into a fresh schema. Load average (1 min) at the end of the run: ${loadavg()[0]!.toFixed(1)}, on 2 cores shared with other work.`,
        ].join('\n'),
      };
    } finally {
      await source.close();
      await copySource.close();
      for (const s of schemas) await dropSchema(s);
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default suite;
