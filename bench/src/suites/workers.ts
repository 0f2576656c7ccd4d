/**
 * Many worker processes on one Postgres server: 1, 2, 4 and 8 processes running turns on their
 * own threads and two shared ones (see ../workers/pg-turns.ts), with Cairn's thread engine and
 * with a LangGraph graph on PostgresSaver and on CairnSaver. Every thread is read back at the
 * end and compared with the turns the workers completed on it.
 */

import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newId } from '@cairn/core';
import { CairnSaver } from '@cairn/langgraph';
import { createPostgresStore } from '@cairn/store-postgres';
import { openThread } from '@cairn/thread';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import pg from 'pg';
import { type Case, type Comparison, compare, comparisonTable, type Suite } from '../harness.js';
import { POSTGRES_URL, postgresUnreachable, roundTrips } from '../postgres.js';
import { runProcesses } from '../processes.js';
import { type Config, type Mode, type Result, TurnState, turnGraph } from '../turns.js';

const script = join(dirname(fileURLToPath(import.meta.url)), '..', 'workers', 'pg-turns.js');
const TURNS = Number(process.env.CAIRN_BENCH_WORKER_TURNS ?? 100);
const COUNTS = [1, 2, 4, 8];
const OWN = 3;
const SHARED = 2;
const MODES: { mode: Mode; label: string }[] = [
  { mode: 'cairn', label: 'Cairn thread engine' },
  { mode: 'pg-saver', label: 'LangGraph, PostgresSaver 1.0.5' },
  { mode: 'cairn-saver', label: 'LangGraph, CairnSaver (Cairn Postgres)' },
];

interface Row {
  label: string;
  workers: number;
  turns: number;
  turnsPerSecond: number;
  p50: number;
  p99: number;
  leaseWaits: number;
  lostUpdates: number;
  lostMessages: number;
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

/** What a thread holds, read back once the workers are done, against the `turns` run on it. */
type Lost = (turns: number) => { updates: number; messages: number };

async function readBack(c: Config, ids: string[]): Promise<Map<string, Lost>> {
  const store = await createPostgresStore({ connectionString: c.url }, { schema: c.schema });
  const pool = c.mode === 'pg-saver' ? new pg.Pool({ connectionString: c.url, max: 2 }) : null;
  const found = new Map<string, Lost>();
  try {
    if (c.mode === 'cairn') {
      for (const threadId of ids) {
        const t = await openThread(store, { schema: TurnState, threadId });
        const commits = (await store.getStateCommits(t.branchId)).length;
        const messages = (await t.history()).length;
        const counter = t.state.counter;
        // Two updates a turn (two commits): +1 on the counter, and `last`.
        found.set(threadId, (n) => ({
          updates: Math.abs(2 * n - commits) + Math.abs(n - counter),
          messages: Math.abs(2 * n - messages),
        }));
        await t.close();
      }
    } else {
      const saver = pool
        ? new PostgresSaver(pool, undefined, { schema: c.saverSchema })
        : new CairnSaver(store);
      const graph = turnGraph(saver);
      for (const id of ids) {
        const { values } = await graph.getState({ configurable: { thread_id: id } });
        const messages: number = values.messages?.length ?? 0;
        const counter: number = values.counter ?? 0;
        // `count` adds 1 a turn; `note` writes a value, which cannot be counted.
        found.set(id, (n) => ({
          updates: Math.abs(n - counter),
          messages: Math.abs(2 * n - messages),
        }));
      }
    }
  } finally {
    await pool?.end();
    await store.close();
  }
  return found;
}

async function scenario(mode: Mode, label: string, workers: number): Promise<Row> {
  const stamp = newId().replaceAll('-', '').slice(-10);
  const c: Omit<Config, 'worker' | 'own'> = {
    mode,
    url: POSTGRES_URL,
    schema: `bench_workers_${stamp}`,
    saverSchema: `bench_workers_lg_${stamp}`,
    shared: Array.from({ length: SHARED }, () => newId()),
    turns: TURNS,
  };
  // Migrations (and PostgresSaver's setup) once, before the workers start.
  const store = await createPostgresStore({ connectionString: c.url }, { schema: c.schema });
  if (mode === 'cairn') {
    for (const threadId of c.shared) await (await openThread(store, { threadId })).close();
  }
  await store.close();
  if (mode === 'pg-saver') {
    const saver = PostgresSaver.fromConnString(c.url, { schema: c.saverSchema });
    await saver.setup();
    await saver.end();
  }
  try {
    const configs: Config[] = Array.from({ length: workers }, (_, worker) => ({
      ...c,
      worker,
      own: Array.from({ length: OWN }, () => newId()),
    }));
    const results = await runProcesses<Result>(
      script,
      configs.map((w) => [JSON.stringify(w)]),
    );
    const turnsOn = new Map<string, number>();
    for (const r of results)
      for (const [id, n] of Object.entries(r.turnsOn)) turnsOn.set(id, (turnsOn.get(id) ?? 0) + n);
    const found = await readBack(configs[0]!, [...turnsOn.keys()]);
    let lostUpdates = 0;
    let lostMessages = 0;
    for (const [id, n] of turnsOn) {
      const lost = found.get(id)!(n);
      lostUpdates += lost.updates;
      lostMessages += lost.messages;
    }
    const latencies = results.flatMap((r) => r.latencies).sort((a, b) => a - b);
    return {
      label,
      workers,
      turns: latencies.length,
      turnsPerSecond: latencies.length / (Math.max(...results.map((r) => r.ms)) / 1000),
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      leaseWaits: results.reduce((a, r) => a + r.leaseWaits, 0),
      lostUpdates,
      lostMessages,
    };
  } finally {
    const admin = new pg.Client({ connectionString: c.url });
    await admin.connect();
    for (const s of [c.schema, c.saverSchema])
      await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    await admin.end();
  }
}

/**
 * `openThread` of a new thread and `save` of its first message against one raw pg
 * transaction inserting the same rows (thread, message, active branch at it).
 */
async function newThread(): Promise<{ row: Comparison; trips: { cairn: number; raw: number } }> {
  const schema = `bench_workers_new_${newId().replaceAll('-', '').slice(-10)}`;
  const store = await createPostgresStore({ connectionString: POSTGRES_URL }, { schema });
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 });
  const s = `"${schema}"`;
  try {
    const raw: Case = {
      name: 'pg: one transaction, the three INSERTs',
      run: async () => {
        const [t, m, b] = [newId(), newId(), newId()];
        const now = Date.now();
        const c = await pool.connect();
        try {
          await c.query('BEGIN');
          await c.query(
            `INSERT INTO ${s}.threads (id, resource_id, title, metadata, created_at, updated_at) VALUES ($1, NULL, NULL, '{}', $2, $2)`,
            [t, now],
          );
          await c.query(
            `INSERT INTO ${s}.messages (id, thread_id, parent_id, role, type, data, created_at, depth) VALUES ($1, $2, NULL, 'user', NULL, $3, $4, 0)`,
            [m, t, JSON.stringify({ text: 'hello' }), now],
          );
          await c.query(
            `INSERT INTO ${s}.branches (id, thread_id, name, head_message_id, is_active, created_at) VALUES ($1, $2, 'main', $3, true, $4)`,
            [b, t, m, now],
          );
          await c.query('COMMIT');
        } finally {
          c.release();
        }
      },
    };
    const cairn: Case = {
      name: '',
      run: async () => {
        const thread = await openThread(store);
        thread.add({ role: 'user', data: { text: 'hello' } });
        await thread.save();
        await thread.close();
      },
    };
    const row = await compare({
      name: 'Postgres: openThread of a new thread + save of one message',
      baseline: raw,
      subject: cairn,
      warmup: 5,
      runs: 41,
      target: { maxRatio: 2 },
    });
    return { row, trips: { cairn: await roundTrips(cairn.run), raw: await roundTrips(raw.run) } };
  } finally {
    await pool.end();
    await store.close();
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
    await admin.end();
  }
}

const ms = (x: number) => (x >= 100 ? x.toFixed(0) : x.toFixed(1));

const suite: Suite = {
  id: 'workers',
  title: 'Many worker processes on one Postgres server (Cairn, and LangGraph on two savers)',
  async run(log) {
    const down = await postgresUnreachable();
    if (down) return { markdown: `Postgres server unreachable (${down}): not measured.` };
    const first = await newThread();
    log(`new thread + first message: ${first.row.ratio.toFixed(2)}x of one raw transaction`);
    const rows: Row[] = [];
    for (const workers of COUNTS) {
      for (const { mode, label } of MODES) {
        const row = await scenario(mode, label, workers);
        log(
          `${label} x${workers}: ${row.turnsPerSecond.toFixed(0)} turns/s, p50 ${ms(row.p50)} ms, p99 ${ms(row.p99)} ms, lost ${row.lostUpdates}/${row.lostMessages}`,
        );
        rows.push(row);
      }
    }
    const one = (label: string) => rows.find((r) => r.label === label && r.workers === 1)!;
    const table = [
      '| subject | worker processes | turns | turns/s | x of 1 process | p50 turn ms | p99 turn ms | lease waits | lost updates | lost messages |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...rows.map(
        (r) =>
          `| ${r.label} | ${r.workers} | ${r.turns} | ${r.turnsPerSecond.toFixed(0)} | ${(r.turnsPerSecond / one(r.label).turnsPerSecond).toFixed(2)}x | ${ms(r.p50)} | ${ms(r.p99)} | ${r.leaseWaits} | ${r.lostUpdates} | ${r.lostMessages} |`,
      ),
    ].join('\n');
    return {
      markdown: [
        `Each worker process runs ${TURNS} turns, one after another (after 5 untimed warm-up turns, as`,
        'the processes start one by one): turns 1–3 of every 4 on one of its',
        `${OWN} own threads, every 4th on one of ${SHARED} threads all workers share. A turn holds the`,
        'thread\'s run lease (a worker finding it held waits 1–4 ms and tries again: "lease waits"),',
        'saves a user message, makes two state updates and saves a reply. Cairn: `acquireRun`,',
        '`save`, `update` x2, `save`, `release` on `@cairn/thread` (2 pooled connections per process).',
        'LangGraph: `graph.invoke` of one user message through nodes `count` (+1 on a counter),',
        '`note` and `agent` (the reply) — four checkpoints — on PostgresSaver or CairnSaver, under the',
        'same lease taken with `store.acquireLease` on a Cairn store. Turns/s: all turns over the',
        "slowest worker's time; latencies over all turns. Lost: every thread read back at the end",
        '(a fresh store: messages on its chain, state commits or the counter) against the turns the',
        'workers completed on it. Postgres 15 on the same 2 cores as the workers; load average at',
        `the end: ${loadavg()
          .map((x) => x.toFixed(1))
          .join(', ')}.`,
        '',
        table,
        '',
        `A new thread and its first message, alone (no workers running): ${first.trips.cairn} round trips`,
        'and two commits (`openThread`: the thread and its `main` branch in one transaction; `save`:',
        `the message and the head), against ${first.trips.raw} round trips and one commit for the raw`,
        'transaction (round trips counted in the run).',
        '',
        comparisonTable([first.row]),
      ].join('\n'),
    };
  },
};

export default suite;
