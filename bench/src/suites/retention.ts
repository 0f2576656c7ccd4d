import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newId } from '@cairn/core';
import type { Store, SweepReport } from '@cairn/store';
import { openThread } from '@cairn/thread';
import pg from 'pg';
import type { Suite } from '../harness.js';
import { POSTGRES_URL, postgresUnreachable } from '../postgres.js';
import { Chat, openStore, runTurns, type StoreSpec, SWEEP_POLICY } from '../sweep-turns.js';

/**
 * A sweep (`store.sweep`) over many stored threads while workers run turns on other
 * threads of the same store: the workers' p99 turn time with the sweep running against
 * the same workers without it, in alternating windows of one run. Two deployments: the
 * sweep in the workers' process, and the workers in processes of their own with the sweep
 * in another (one sweeper per store, by its lease).
 *
 * BENCH_SWEEP_THREADS (default 1,000) scales the swept threads (the issue's 10,000);
 * BENCH_SWEEP_ROUNDS (default 3) the sweep/quiet rounds; BENCH_SWEEP_DUTY the sweep's
 * `dutyCycle` (default: the store's); BENCH_SWEEP_MODES (`in-process,processes`) and
 * BENCH_SWEEP_STORES (`sqlite,postgres`) pick rows.
 */
const SWEPT = Number(process.env.BENCH_SWEEP_THREADS ?? 1000);
const ROUNDS = Number(process.env.BENCH_SWEEP_ROUNDS ?? 3);
const DUTY = process.env.BENCH_SWEEP_DUTY ?? 'default';
const MODES = (process.env.BENCH_SWEEP_MODES ?? 'in-process,processes').split(',');
const STORES = (process.env.BENCH_SWEEP_STORES ?? 'sqlite,postgres').split(',');
const WORKERS = 4;
/** The quiet window is as long as the sweep, up to this (enough turns for a p99). */
const QUIET_MAX_MS = 120_000;
/** Worker processes in the `processes` deployment, the workers' threads split among them. */
const WORKER_PROCESSES = 2;
const script = join(dirname(fileURLToPath(import.meta.url)), '..', 'workers', 'sweep-process.js');
const sweepOptions = DUTY === 'default' ? { batch: 100 } : { batch: 100, dutyCycle: Number(DUTY) };

const percentile = (xs: number[], p: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

/** A stored thread with 30 state commits (a snapshot every 10), a side branch and a finished turn. */
async function writeOld(store: Store): Promise<void> {
  const t = await openThread(store, { schema: Chat, snapshotPolicy: { maxCommits: 10 } });
  for (let i = 0; i < 30; i++) {
    if (i % 10 === 0) {
      t.add({ role: 'user', data: `old ${i}` });
      await t.save();
    }
    await t.update({ turn: i, topics: [`t${i % 7}`] });
  }
  await t.btw();
  await (await t.beginTurn()).finish();
  await t.close();
}

/** The threads to sweep, written; the workers' own threads, created. */
async function prepare(store: Store, log: (line: string) => void, name: string) {
  log(`${name}: writing ${SWEPT} threads to sweep`);
  for (let i = 0; i < SWEPT; i += 20)
    await Promise.all(Array.from({ length: Math.min(20, SWEPT - i) }, () => writeOld(store)));
  const workerThreads: string[] = [];
  for (let i = 0; i < WORKERS; i++) workerThreads.push((await store.createThread({})).id);
  return workerThreads;
}

interface Row {
  store: string;
  mode: string;
  quiet: number[];
  sweeping: number[];
  freed: number;
  sweepMs: number;
}

/** `to.push(...from)` for arrays too long to spread (a round on SQLite runs millions of turns). */
function append(to: number[], from: number[]) {
  for (const x of from) to.push(x);
}

const freedOf = (r: SweepReport) => r.freed.stateCommits + r.freed.branches + r.freed.turns;

function roundLine(
  row: Row,
  round: number,
  sweepMs: number,
  freed: number,
  busy: number[],
  quiet: number[],
) {
  return `${row.store}, ${row.mode}, round ${round + 1}: sweep ${sweepMs.toFixed(0)} ms, freed ${freed}; p99 ${percentile(busy, 99).toFixed(1)} ms sweeping (${busy.length} turns) vs ${percentile(quiet, 99).toFixed(1)} ms quiet (${quiet.length})`;
}

/** The sweep in the workers' process: one store, one event loop. */
async function inProcess(name: string, spec: StoreSpec, log: (line: string) => void): Promise<Row> {
  const store = await openStore(spec);
  const row: Row = {
    store: name,
    mode: 'in-process',
    quiet: [],
    sweeping: [],
    freed: 0,
    sweepMs: 0,
  };
  try {
    const workerThreads = await prepare(store, log, `${name}, in-process`);
    for (let round = 0; round < ROUNDS; round++) {
      const busy = runTurns(store, workerThreads, () => 'on');
      const t0 = performance.now();
      const report = await store.sweep(SWEEP_POLICY, sweepOptions);
      const sweepMs = performance.now() - t0;
      await busy.stop();
      const quiet = runTurns(store, workerThreads, () => 'on');
      await new Promise((r) => setTimeout(r, Math.min(sweepMs, QUIET_MAX_MS)));
      await quiet.stop();
      const [b, q] = [busy.times.get('on') ?? [], quiet.times.get('on') ?? []];
      log(roundLine(row, round, sweepMs, freedOf(report), b, q));
      append(row.sweeping, b);
      append(row.quiet, q);
      row.freed += freedOf(report);
      row.sweepMs += sweepMs;
    }
  } finally {
    await store.close();
  }
  return row;
}

/** A forked process of workers/sweep-process.js and the messages it sends, in order. */
function start(args: string[]) {
  const child = fork(script, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const inbox: unknown[] = [];
  const waiting: ((m: unknown) => void)[] = [];
  let failed: Error | null = null;
  const fail: ((e: Error) => void)[] = [];
  child.on('message', (m) => {
    const w = waiting.shift();
    if (w) w(m);
    else inbox.push(m);
  });
  child.on('exit', (code) => {
    if (code === 0) return;
    failed = new Error(`sweep-process ${args[0]} exited with ${code}`);
    for (const f of fail) f(failed);
  });
  return {
    send: (m: unknown) => child.send(m as never),
    next<T>(): Promise<T> {
      if (inbox.length > 0) return Promise.resolve(inbox.shift() as T);
      if (failed) return Promise.reject(failed);
      return new Promise<T>((resolve, reject) => {
        waiting.push(resolve as (m: unknown) => void);
        fail.push(reject);
      });
    },
  };
}

/** Workers in processes of their own, the sweep in another, one store (file or server). */
async function processes(name: string, spec: StoreSpec, log: (line: string) => void): Promise<Row> {
  const store = await openStore(spec);
  const workerThreads = await prepare(store, log, `${name}, processes`);
  await store.close();
  const row: Row = {
    store: name,
    mode: 'processes',
    quiet: [],
    sweeping: [],
    freed: 0,
    sweepMs: 0,
  };
  const per = Math.ceil(WORKERS / WORKER_PROCESSES);
  const workers = Array.from({ length: WORKER_PROCESSES }, (_, i) =>
    start(['turns', JSON.stringify(spec), workerThreads.slice(i * per, (i + 1) * per).join(',')]),
  );
  for (const w of workers) await w.next();
  const phase = (p: string) => {
    for (const w of workers) w.send({ phase: p });
  };
  // The workers' code warms up before anything is measured.
  await new Promise((r) => setTimeout(r, 2000));
  const sweepMs: number[] = [];
  const freed: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const sweeper = start(['sweep', JSON.stringify(spec), DUTY]);
    await sweeper.next();
    phase(`sweeping${round}`);
    sweeper.send({ go: true });
    const done = await sweeper.next<{ report: SweepReport; ms: number }>();
    phase(`quiet${round}`);
    await new Promise((r) => setTimeout(r, Math.min(done.ms, QUIET_MAX_MS)));
    sweepMs.push(done.ms);
    freed.push(freedOf(done.report));
  }
  phase('done');
  const times: Record<string, number[]>[] = [];
  for (const w of workers) {
    w.send({ stop: true });
    times.push((await w.next<{ times: Record<string, number[]> }>()).times);
  }
  for (let round = 0; round < ROUNDS; round++) {
    const b: number[] = [];
    const q: number[] = [];
    for (const t of times) {
      append(b, t[`sweeping${round}`] ?? []);
      append(q, t[`quiet${round}`] ?? []);
    }
    log(roundLine(row, round, sweepMs[round]!, freed[round]!, b, q));
    append(row.sweeping, b);
    append(row.quiet, q);
    row.freed += freed[round]!;
    row.sweepMs += sweepMs[round]!;
  }
  return row;
}

const RUNS = { 'in-process': inProcess, processes };

const suite: Suite = {
  id: 'retention',
  title: 'Retention: a sweep while workers run turns',
  async run(log) {
    const rows: Row[] = [];
    const load = loadavg()[0]!.toFixed(1);
    const modes = MODES.filter((m): m is keyof typeof RUNS => m in RUNS);
    if (STORES.includes('sqlite')) {
      const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-retention-'));
      try {
        for (const mode of modes)
          rows.push(
            await RUNS[mode]('SQLite file', { kind: 'sqlite', path: join(dir, `${mode}.db`) }, log),
          );
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
    const why = STORES.includes('postgres') ? await postgresUnreachable() : 'not asked for';
    if (why === null) {
      for (const mode of modes) {
        const schema = `cairn_bench_sweep_${newId().replaceAll('-', '').slice(-12)}`;
        try {
          rows.push(
            await RUNS[mode]('PostgreSQL server', { kind: 'pg', url: POSTGRES_URL, schema }, log),
          );
        } finally {
          const c = new pg.Client({ connectionString: POSTGRES_URL });
          await c.connect();
          await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
          await c.end();
        }
      }
    } else log(`PostgreSQL server skipped: ${why}`);
    const f = (x: number) => x.toFixed(1);
    const table = [
      '| store | sweep runs | swept threads | freed rows | sweep time | turns (sweeping / quiet) | p50 sweeping / quiet | p99 sweeping / quiet | p99 ratio |',
      '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...rows.map((r) => {
        const p99 = [percentile(r.sweeping, 99), percentile(r.quiet, 99)] as const;
        return `| ${r.store} | ${r.mode === 'processes' ? 'in a process of its own' : "in the workers' process"} | ${SWEPT} x ${ROUNDS} | ${r.freed} | ${(r.sweepMs / 1000).toFixed(1)} s | ${r.sweeping.length} / ${r.quiet.length} | ${f(percentile(r.sweeping, 50))} / ${f(percentile(r.quiet, 50))} ms | ${f(p99[0])} / ${f(p99[1])} ms | ${(p99[0] / p99[1]).toFixed(2)} |`;
      }),
    ].join('\n');
    return {
      markdown: `${WORKERS} workers run turns (a message, a reply and a state update each) on threads of
their own while \`store.sweep({ keepStateCommits: 5, branchTtlMs: 1, turnTtlMs: 1 }, { batch: 100${DUTY === 'default' ? '' : `, dutyCycle: ${DUTY}`} })\`
(${DUTY === 'default' ? 'the default duty cycle, 0.1' : `duty cycle ${DUTY}`}) runs over ${SWEPT} stored threads (30 state commits, a side branch and a
finished turn each); then as long again without the sweep (at most ${QUIET_MAX_MS / 1000} s). ${ROUNDS} rounds, alternating;
the ratio is p99 turn time sweeping over p99 quiet, one run. Two deployments, each on a
store of its own: the sweep in the workers' process (one store, one event loop), and the
workers in ${WORKER_PROCESSES} processes of their own (${WORKERS / WORKER_PROCESSES} threads each) with the sweep in another
(one sweeper per store by its lease). The machine has 2 cores, shared with the Postgres
server and other engineers' work (load average ${load} at the start).

${table}
`,
    };
  },
};

export default suite;
