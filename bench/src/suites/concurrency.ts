/**
 * Many threads in one process on one Postgres store (issue 25): 16 turns at a time on 16
 * threads, against the same turns one at a time in the same process, and against 4 worker
 * processes (../workers/pg-turns.ts) doing the same turns on the same threads.
 */

import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newId } from '@cairn/core';
import { createPostgresStore } from '@cairn/store-postgres';
import pg from 'pg';
import { median, type Suite } from '../harness.js';
import { POSTGRES_URL, postgresUnreachable, wireCounts } from '../postgres.js';
import { runProcesses } from '../processes.js';
import { type Config, type Result, turnRunner } from '../turns.js';

const script = join(dirname(fileURLToPath(import.meta.url)), '..', 'workers', 'pg-turns.js');
const THREADS = 16;
const PROCESSES = 4;
/** Turns on each thread in one block (every block runs THREADS x this many). */
const TURNS = Number(process.env.CAIRN_BENCH_CONCURRENCY_TURNS ?? 10);
const ROUNDS = Number(process.env.CAIRN_BENCH_CONCURRENCY_ROUNDS ?? 3);
/** The worker number of this process's own turns (no spawned worker has it). */
const SELF = 99;

type Way = 'serial' | 'concurrent' | 'processes';

interface Block {
  way: Way;
  turns: number;
  ms: number;
  turnsPerSecond: number;
  p50: number;
  p99: number;
  /** CPU time of the process(es) running the turns, over the block's wall time (1 = a core). */
  cpu: number;
  /** The most connections with a query unanswered at once (in-process blocks). */
  maxInFlight: number | null;
  /** Backends by state and wait event, summed over samples (see `backendStates`). */
  states?: Map<string, number>;
  samples?: number;
}

/** Postgres backends of this suite's connections, told apart by their application_name. */
const APP = 'cairn-bench-concurrency';

/** A backend waiting for the lock a committing transaction that sent NOTIFY holds. */
const NOTIFY_LOCK = "  of which waiting for NOTIFY's commit lock (Lock: object, pg_database 0)";

/** Clients whose queries `inFlight` does not count (the sampler's). */
const uncounted = new WeakSet<object>();

/**
 * What this suite's Postgres backends were doing while `fn` ran, sampled from
 * pg_stat_activity every few ms: counts by state and wait event ("running": active, no wait;
 * "idle in transaction": waiting for Node inside a transaction).
 */
async function backendStates<T>(
  fn: () => Promise<T>,
): Promise<{ result: T; states: Map<string, number>; samples: number }> {
  const admin = new pg.Client({ connectionString: POSTGRES_URL });
  uncounted.add(admin);
  await admin.connect();
  const states = new Map<string, number>();
  let samples = 0;
  let done = false;
  const sampling = (async () => {
    while (!done) {
      const { rows } = await admin.query(
        `SELECT a.state, a.wait_event_type, a.wait_event,
           EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted AND l.locktype = 'object'
             AND l.classid = 'pg_database'::regclass AND l.objid = 0) AS notify_lock
         FROM pg_stat_activity a
         WHERE a.application_name = $1 AND a.backend_type = 'client backend' AND a.query NOT LIKE 'LISTEN%'`,
        [APP],
      );
      samples++;
      for (const r of rows as {
        state: string;
        wait_event_type: string | null;
        wait_event: string | null;
        notify_lock: boolean;
      }[]) {
        if (r.notify_lock) states.set(NOTIFY_LOCK, (states.get(NOTIFY_LOCK) ?? 0) + 1);
        const k =
          r.state === 'active'
            ? r.wait_event_type
              ? `active, waiting on ${r.wait_event_type}: ${r.wait_event}`
              : 'active, running'
            : r.state;
        states.set(k, (states.get(k) ?? 0) + 1);
      }
      await new Promise((w) => setTimeout(w, 5));
    }
  })();
  try {
    return { result: await fn(), states, samples };
  } finally {
    done = true;
    await sampling;
    await admin.end();
  }
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

/** The most of this process's pg clients with a query unanswered at once while `fn` runs. */
async function inFlight<T>(fn: () => Promise<T>): Promise<{ result: T; max: number }> {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  const pending = new Map<unknown, number>();
  let max = 0;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const result = original.apply(this, args);
    if (result instanceof Promise && !uncounted.has(this as object)) {
      pending.set(this, (pending.get(this) ?? 0) + 1);
      max = Math.max(max, pending.size);
      const done = () => {
        const n = (pending.get(this) ?? 1) - 1;
        if (n > 0) pending.set(this, n);
        else pending.delete(this);
      };
      result.then(done, done);
    }
    return result;
  };
  try {
    return { result: await fn(), max };
  } finally {
    proto.query = original;
  }
}

function summarise(
  way: Way,
  latencies: number[],
  ms: number,
  cpuMs: number,
  maxInFlight: number | null,
): Block {
  const sorted = [...latencies].sort((a, b) => a - b);
  return {
    way,
    turns: sorted.length,
    ms,
    turnsPerSecond: sorted.length / (ms / 1000),
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    cpu: cpuMs / ms,
    maxInFlight,
  };
}

/** The turns of one block in this process, on one store (its default pool of 10). */
async function inProcess(base: Config, way: 'serial' | 'concurrent'): Promise<Block> {
  const runner = await turnRunner({ ...base, worker: SELF, maxConnections: null });
  const threads = base.own;
  try {
    // Untimed warm-up, in the block's own shape: a turn on every thread.
    if (way === 'serial') for (const id of threads) await runner.turn(id, -1);
    else await Promise.all(threads.map((id) => runner.turn(id, -1)));
    const latencies: number[] = [];
    const timed = async (id: string, i: number) => {
      const start = performance.now();
      await runner.turn(id, i);
      latencies.push(performance.now() - start);
    };
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const sampled = await backendStates(() =>
      inFlight(async () => {
        if (way === 'serial') {
          for (let i = 0; i < TURNS; i++) for (const id of threads) await timed(id, i);
        } else {
          await Promise.all(
            threads.map(async (id) => {
              for (let i = 0; i < TURNS; i++) await timed(id, i);
            }),
          );
        }
      }),
    );
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    return {
      ...summarise(way, latencies, ms, (cpu.user + cpu.system) / 1000, sampled.result.max),
      states: sampled.states,
      samples: sampled.samples,
    };
  } finally {
    await runner.close();
  }
}

/** The same turns by PROCESSES worker processes, each on its share of the threads, one at a time. */
async function inProcesses(base: Config): Promise<Block> {
  const per = THREADS / PROCESSES;
  const configs: Config[] = Array.from({ length: PROCESSES }, (_, worker) => ({
    ...base,
    worker,
    own: base.own.slice(worker * per, (worker + 1) * per),
    turns: per * TURNS,
  }));
  const {
    result: results,
    states,
    samples,
  } = await backendStates(() =>
    runProcesses<Result>(
      script,
      configs.map((c) => [JSON.stringify(c)]),
    ),
  );
  const ms = Math.max(...results.map((r) => r.ms));
  const cpuMs = results.reduce((a, r) => a + (r.cpuMs ?? 0), 0);
  return {
    ...summarise(
      'processes',
      results.flatMap((r) => r.latencies),
      ms,
      cpuMs,
      null,
    ),
    states,
    samples,
  };
}

const f = (x: number) => x.toFixed(x >= 100 ? 0 : x >= 10 ? 1 : 2);

const suite: Suite = {
  id: 'concurrency',
  title: 'Many threads in one process on one Postgres store, against one at a time and 4 processes',
  async run(log) {
    const down = await postgresUnreachable();
    if (down) return { markdown: `Postgres server unreachable (${down}): not measured.` };
    const stamp = newId().replaceAll('-', '').slice(-10);
    const base: Config = {
      mode: 'cairn',
      url: `${POSTGRES_URL}${POSTGRES_URL.includes('?') ? '&' : '?'}application_name=${APP}`,
      schema: `bench_concurrency_${stamp}`,
      saverSchema: `bench_concurrency_lg_${stamp}`,
      worker: SELF,
      own: Array.from({ length: THREADS }, () => newId()),
      shared: [],
      turns: 0,
    };
    // Migrations once, before anything is timed.
    await (
      await createPostgresStore({ connectionString: base.url }, { schema: base.schema })
    ).close();
    const blocks: Block[] = [];
    const ratios = { serial: [] as number[], processes: [] as number[] };
    let tripsPerTurn = 0;
    try {
      // Round trips of one turn alone (in-process, after the first turns).
      {
        const runner = await turnRunner({ ...base, maxConnections: null });
        await runner.turn(base.own[0]!, -1);
        tripsPerTurn = (await wireCounts(() => runner.turn(base.own[0]!, -2))).roundTrips;
        await runner.close();
      }
      const orders: Way[][] = [
        ['serial', 'concurrent', 'processes'],
        ['concurrent', 'processes', 'serial'],
        ['processes', 'serial', 'concurrent'],
      ];
      for (let round = 0; round < ROUNDS; round++) {
        const got = new Map<Way, Block>();
        for (const way of orders[round % orders.length]!) {
          const b = way === 'processes' ? await inProcesses(base) : await inProcess(base, way);
          got.set(way, b);
          blocks.push(b);
          log(
            `round ${round + 1} ${way}: ${b.turnsPerSecond.toFixed(0)} turns/s, p50 ${f(b.p50)} ms, p99 ${f(b.p99)} ms, cpu ${b.cpu.toFixed(2)}${b.maxInFlight === null ? '' : `, ${b.maxInFlight} connections busy at most`}`,
          );
        }
        const c = got.get('concurrent')!.turnsPerSecond;
        ratios.serial.push(c / got.get('serial')!.turnsPerSecond);
        ratios.processes.push(c / got.get('processes')!.turnsPerSecond);
      }
    } finally {
      const admin = new pg.Client({ connectionString: base.url });
      await admin.connect();
      for (const s of [base.schema, base.saverSchema])
        await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
      await admin.end();
    }
    const of = (way: Way) => blocks.filter((b) => b.way === way);
    const med = (way: Way, k: keyof Block) => median(of(way).map((b) => b[k] as number));
    const label: Record<Way, string> = {
      serial: `one process, one store: ${THREADS} threads, one turn at a time`,
      concurrent: `one process, one store: ${THREADS} turns at a time on ${THREADS} threads`,
      processes: `${PROCESSES} worker processes, ${THREADS / PROCESSES} threads each, one turn at a time`,
    };
    const ways: Way[] = ['serial', 'concurrent', 'processes'];
    const rows = ways.map(
      (w) =>
        `| ${label[w]} | ${of(w)[0]!.turns} | ${f(med(w, 'turnsPerSecond'))} | ${of(w)
          .map((b) => f(b.turnsPerSecond))
          .join(
            ', ',
          )} | ${f(med(w, 'p50'))} | ${f(med(w, 'p99'))} | ${med(w, 'cpu').toFixed(2)} | ${
          w === 'processes' ? '' : med(w, 'maxInFlight')
        } |`,
    );
    // Backends by state, on average over the samples of each way's blocks.
    const keys = [...new Set(blocks.flatMap((b) => [...(b.states?.keys() ?? [])]))]
      .filter((k) => k !== NOTIFY_LOCK)
      .sort();
    const at = keys.indexOf('active, waiting on Lock: object');
    keys.splice(at < 0 ? keys.length : at + 1, 0, NOTIFY_LOCK);
    const avg = (w: Way, k: string) => {
      const n = of(w).reduce((a, b) => a + (b.samples ?? 0), 0);
      return of(w).reduce((a, b) => a + (b.states?.get(k) ?? 0), 0) / Math.max(1, n);
    };
    const stateRows = keys.map(
      (k) => `| ${k} | ${ways.map((w) => avg(w, k).toFixed(2)).join(' | ')} |`,
    );
    const vsSerial = median(ratios.serial);
    const vsProcesses = median(ratios.processes);
    const verdict = (ok: boolean) => (ok ? 'met' : '**not met**');
    return {
      markdown: [
        `A turn is the Cairn thread engine turn of the \`workers\` suite: \`acquireRun({ waitMs })\`,`,
        '`save` of a user message, `update` x2, `save` of a reply, `release` (no two turns share a',
        `thread, so no lease is ever waited for). ${THREADS} threads in one schema; a block runs ${TURNS} turns on`,
        `each (${THREADS * TURNS} turns) in one of three ways, after an untimed warm-up (a turn on every thread`,
        'in the same shape; 5 turns in each worker process): in this process on one store (the',
        'default pool of 10 connections), one turn at a time or one lane per thread; or in',
        `${PROCESSES} worker processes (../workers/pg-turns.ts, 2 pooled connections each), ${THREADS / PROCESSES} threads`,
        "each, one turn at a time. Turns/s: the block's turns over its wall time (the slowest",
        `worker's, for the processes). ${ROUNDS} rounds, the order of the three rotated each round; the`,
        "ratios are the median over rounds of each round's ratio. CPU: CPU time of the process(es)",
        "running the turns over the block's wall time (1.00 = one core busy throughout); Postgres's",
        'own CPU is not in it. Busy connections: the most with a query unanswered at once.',
        `One turn alone is ${tripsPerTurn} round trips. ${cpus().length} cores, shared with Postgres and other`,
        `work; load average at the end: ${loadavg()
          .map((x) => x.toFixed(1))
          .join(', ')}.`,
        '',
        '| way | turns | turns/s (median) | turns/s by round | p50 turn ms | p99 turn ms | CPU (cores) | busy connections |',
        '| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |',
        ...rows,
        '',
        '| target (issue 25) | measured | |',
        '| --- | ---: | --- |',
        `| ${THREADS} turns at a time in one process >= 1.5x the same turns one at a time | ${vsSerial.toFixed(2)}x (rounds: ${ratios.serial.map((r) => r.toFixed(2)).join(', ')}) | ${verdict(vsSerial >= 1.5)} |`,
        `| ${THREADS} turns at a time in one process >= 80% of ${PROCESSES} worker processes | ${(vsProcesses * 100).toFixed(0)}% (rounds: ${ratios.processes.map((r) => `${(r * 100).toFixed(0)}%`).join(', ')}) | ${verdict(vsProcesses >= 0.8)} |`,
        '',
        `**What limits ${THREADS} turns at a time (from this run).** Nothing in the process serializes them: the`,
        "front door's gate is shared for a pooled Postgres store (`concurrentTransactions`), the thread",
        "engine's queue is per thread (one lane per thread here), and the pool is not the limit",
        `(at most ${med('concurrent', 'maxInFlight')} connections busy; ${avg('concurrent', 'idle').toFixed(1)} of the 10 idle on average). Nor does`,
        "Postgres's NOTIFY any more: a transaction that sent NOTIFY takes, at commit, an exclusive",
        'lock (PreCommit_Notify: `Lock: object` on pg_database 0) held until its commit record is',
        'flushed, so while every write transaction sent its change notices, the commits of the',
        'database went one at a time, a WAL flush each (3.3 backends waited for that lock on',
        'average in the run of 2026-11-29 06:02). A store now sends them right after the commit, in',
        'its round trip, in a notify-only transaction that does not wait for its flush: in the',
        `concurrent blocks ${avg('concurrent', NOTIFY_LOCK).toFixed(1)} backends on average waited for that lock, and`,
        `${(avg('concurrent', 'active, waiting on IO: WALSync') + avg('concurrent', 'active, waiting on LWLock: WALWrite')).toFixed(1)} were flushing WAL or waiting for a flush (group commit: one flush for`,
        `several commits), against ${avg('concurrent', 'active, running').toFixed(2)} running. The rest is waiting on Node`,
        `(${avg('concurrent', 'idle in transaction').toFixed(1)} idle in transaction): the statements of a transaction are round trips apart,`,
        `and the process shares ${cpus().length} cores with Postgres and other work.`,
        '',
        "What the suite's Postgres backends were doing, sampled from `pg_stat_activity` every ~5 ms",
        '(backends in each state, on average over the samples; "idle in transaction": waiting for',
        "Node inside a transaction; the processes' samples include their start and warm-up):",
        '',
        `| backend state | ${ways.map((w) => w).join(' | ')} |`,
        `| --- | ${ways.map(() => '---:').join(' | ')} |`,
        ...stateRows,
      ].join('\n'),
    };
  },
};

export default suite;
