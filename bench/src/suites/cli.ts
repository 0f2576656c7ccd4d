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
import { type Comparison, compare, comparisonTable, type Suite } from '../harness.js';
import { POSTGRES_URL as URL } from '../postgres.js';
import { clusteredVectors, rng } from '../random.js';

/** `CAIRN_BENCH_CLI_SCALE=0.05` for a quick run while developing; 1 is the size. */
const SCALE = Number(process.env.CAIRN_BENCH_CLI_SCALE ?? 1);
const THREADS = Math.round(2000 * SCALE);
const PER_THREAD = 50;
const MEMORIES = Math.round(20_000 * SCALE);
const DIMS = 384;

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

const suite: Suite = {
  id: 'cli',
  title: '@cairn/cli: copy into Postgres, export as JSONL',
  async run(log) {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-cli-'));
    const sourcePath = join(dir, 'source.db');
    const data = dataSet();
    log(
      `source: ${THREADS} threads, ${THREADS * PER_THREAD} messages, ${MEMORIES} memories (${DIMS}-d) in a SQLite file`,
    );
    const source = createSqliteStore({ path: sourcePath });
    await writeThrough(source, data);
    const rows: Comparison[] = [];
    const schemas: string[] = [];
    const pgStore = async () => {
      const schema = schemaName();
      schemas.push(schema);
      return createPostgresStore({ connectionString: URL }, { schema, maxConnections: 4 });
    };
    try {
      let target: Store | null = null;
      let verified = '';
      rows.push(
        await compare({
          name: `copy SQLite → Postgres (${THREADS * PER_THREAD} messages, ${THREADS} threads, ${MEMORIES} memories), verification included`,
          warmup: 0,
          runs: SCALE >= 1 ? 1 : 3,
          baseline: {
            name: "the store's batched createThread/addMessages/createBranch/addMemories",
            before: async () => {
              target = await pgStore();
            },
            run: () => writeThrough(target!, data),
            after: () => target!.close(),
          },
          subject: {
            name: 'copyStore (cairn copy)',
            before: async () => {
              target = await pgStore();
            },
            run: async () => {
              const r = await copyStore(source, target!);
              verified = r.verified.every((c) => c.ok)
                ? 'every table verified'
                : 'VERIFICATION FAILED';
            },
            after: () => target!.close(),
          },
          target: { maxRatio: 2, label: '≥ 0.5× the rate (≤ 2× the time)' },
        }),
      );
      log(`copy: ${verified}`);

      // Export: the dump's MB/s, against reading the same rows raw and serializing them.
      let bytes = 0;
      let rawBytes = 0;
      const raw = new Database(sourcePath, { readonly: true });
      const exportRow = await compare({
        name: 'export the SQLite database as JSONL',
        warmup: 1,
        runs: SCALE >= 1 ? 3 : 5,
        baseline: {
          name: 'better-sqlite3: SELECT * of every table, JSON.stringify per row',
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
                if (r.embedding instanceof Buffer)
                  r.embedding = Array.from(
                    new Float32Array(
                      r.embedding.buffer,
                      r.embedding.byteOffset,
                      r.embedding.length / 4,
                    ),
                  );
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
      raw.close();
      rows.push(exportRow);
      const mbps = bytes / 1e6 / (exportRow.subject.medianMs / 1000);
      const rawMbps = rawBytes / 1e6 / (exportRow.baseline.medianMs / 1000);
      const copyRow = rows[0]!;
      return {
        markdown: [
          comparisonTable(rows),
          '',
          `- copy: ${verified}; rate ${(1 / copyRow.ratio).toFixed(2)}× the store's own batched writes (target ≥ 0.5×).`,
          `- export: ${(bytes / 1e6).toFixed(1)} MB of JSONL in ${(exportRow.subject.medianMs / 1000).toFixed(2)} s = **${mbps.toFixed(1)} MB/s** (target ≥ 50 MB/s; ${mbps >= 50 ? 'met' : '**missed**'}); the raw read + stringify baseline wrote ${(rawBytes / 1e6).toFixed(1)} MB at ${rawMbps.toFixed(1)} MB/s.`,
          `- Data: ${THREADS} threads of ${PER_THREAD} messages (one branch each), ${MEMORIES} memories with ${DIMS}-d embeddings (float32 in SQLite), Postgres 15 on this machine; one run each way at full size. Load average (1 min) at the end of the run: ${loadavg()[0]!.toFixed(1)}, on 2 cores shared with other work.`,
        ].join('\n'),
      };
    } finally {
      await source.close();
      for (const s of schemas) await dropSchema(s);
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default suite;
