import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newId } from '@cairn/core';
import type { SweepReport } from '@cairn/store';
import pg from 'pg';
import type { Suite } from '../harness.js';
import { POSTGRES_URL, postgresUnreachable } from '../postgres.js';
import {
  countStatements,
  openStore,
  runTurns,
  type StoreSpec,
  SWEEP_POLICY,
  writeOldThreads,
} from '../sweep-turns.js';

/**
 * A sweep (`store.sweep`) over many stored threads while workers run turns on other
 * threads of the same store: the workers' p99 turn time with the sweep running against
 * the same workers without it, in alternating windows of one run. Two deployments: the
 * sweep in the workers' process, and the workers in processes of their own with the sweep
 * in another (one sweeper per store, by its lease). Two loads: saturating (each worker
 * runs its next turn as soon as one ends) and open loop (turns at a fixed rate, a share of
 * the capacity a calibration phase of the same run measured: how a server runs). And what
 * a swept thread costs: SQL statements and the sweeping process's CPU time per thread,
 * with nothing else running (stable under load, unlike the p99 ratios).
 *
 * BENCH_SWEEP_THREADS (default 1,000) scales the swept threads (the issue's 10,000);
 * BENCH_SWEEP_ROUNDS (default 3) the sweep/quiet rounds; BENCH_SWEEP_DUTY the sweep's
 * `dutyCycle` (default: the store's); BENCH_SWEEP_MODES (`in-process,processes`),
 * BENCH_SWEEP_LOADS (`saturating,open`) and BENCH_SWEEP_STORES (`sqlite,postgres`) pick
 * rows; BENCH_SWEEP_OPEN_SHARE (default 0.5) the open loop's share of the calibrated
 * capacity; BENCH_SWEEP_COST_THREADS (default 300, 0: skip) the threads of the cost table.
 */
const SWEPT = Number(process.env.BENCH_SWEEP_THREADS ?? 1000);
const ROUNDS = Number(process.env.BENCH_SWEEP_ROUNDS ?? 3);
const DUTY = process.env.BENCH_SWEEP_DUTY ?? 'default';
const MODES = (process.env.BENCH_SWEEP_MODES ?? 'in-process,processes').split(',');
const LOADS = (process.env.BENCH_SWEEP_LOADS ?? 'saturating,open').split(',');
const STORES = (process.env.BENCH_SWEEP_STORES ?? 'sqlite,postgres').split(',');
const OPEN_SHARE = Number(process.env.BENCH_SWEEP_OPEN_SHARE ?? 0.5);
const COST_THREADS = Number(process.env.BENCH_SWEEP_COST_THREADS ?? 300);
const WORKERS = 4;
/** The quiet window is as long as the sweep, up to this (enough turns for a p99). */
const QUIET_MAX_MS = 120_000;
/** How long the workers run closed loop, quiet, to measure the capacity the open loop takes a share of. */
const CALIBRATE_MS = 3000;
/** Worker processes in the `processes` deployment, the workers' threads split among them. */
const WORKER_PROCESSES = 2;
const script = join(dirname(fileURLToPath(import.meta.url)), '..', 'workers', 'sweep-process.js');
const sweepOptions = DUTY === 'default' ? { batch: 100 } : { batch: 100, dutyCycle: Number(DUTY) };

const percentile = (xs: number[], p: number) => {
  if (xs.length === 0) return Number.NaN;
  const sorted = Float64Array.from(xs).sort();
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

type Load = 'saturating' | 'open';

/** The threads to sweep, written; the workers' own threads, created. */
async function prepare(spec: StoreSpec, log: (line: string) => void, name: string) {
  const store = await openStore(spec);
  try {
    const t0 = performance.now();
    await writeOldThreads(store, SWEPT, { parallel: spec.kind === 'pg' ? 4 : 1 });
    log(
      `${name}: wrote ${SWEPT} threads to sweep in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    const workerThreads: string[] = [];
    for (let i = 0; i < WORKERS; i++) workerThreads.push((await store.createThread({})).id);
    return workerThreads;
  } finally {
    await store.close();
  }
}

interface Row {
  store: string;
  mode: string;
  load: Load;
  /** Open loop: turns a second, all workers together (0: closed loop). */
  rate: number;
  quiet: number[];
  sweeping: number[];
  /** Open loop: ms from when each turn was due. */
  quietDue: number[];
  sweepingDue: number[];
  freed: number;
  sweepMs: number;
}

/** A row with nothing measured yet. */
const emptyRow = (store: string, mode: string, load: Load): Row => ({
  store,
  mode,
  load,
  rate: 0,
  quiet: [],
  sweeping: [],
  quietDue: [],
  sweepingDue: [],
  freed: 0,
  sweepMs: 0,
});

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
  return `${row.store}, ${row.mode}, ${row.load}, round ${round + 1}: sweep ${sweepMs.toFixed(0)} ms, freed ${freed}; p99 ${percentile(busy, 99).toFixed(2)} ms sweeping (${busy.length} turns) vs ${percentile(quiet, 99).toFixed(2)} ms quiet (${quiet.length})`;
}

/** Per-worker ms between turns for the open loop, from a closed-loop quiet window's count. */
function intervalOf(turns: number, ms: number): number {
  const capacity = turns / (ms / 1000);
  return (1000 * WORKERS) / (capacity * OPEN_SHARE);
}

/** The sweep in the workers' process: one store, one event loop. */
async function inProcess(
  name: string,
  spec: StoreSpec,
  load: Load,
  log: (line: string) => void,
): Promise<Row> {
  const workerThreads = await prepare(spec, log, `${name}, in-process, ${load}`);
  const store = await openStore(spec);
  const row = emptyRow(name, 'in-process', load);
  try {
    let interval: number | null = null;
    if (load === 'open') {
      const cal = runTurns(store, workerThreads, () => 'cal');
      await new Promise((r) => setTimeout(r, CALIBRATE_MS));
      await cal.stop();
      interval = intervalOf(cal.times.get('cal')?.length ?? 0, CALIBRATE_MS);
      row.rate = (1000 * WORKERS) / interval;
      log(
        `${name}, in-process: open loop at ${row.rate.toFixed(0)} turns/s (${OPEN_SHARE} of capacity)`,
      );
    }
    for (let round = 0; round < ROUNDS; round++) {
      const busy = runTurns(
        store,
        workerThreads,
        () => 'on',
        () => interval,
      );
      const t0 = performance.now();
      const report = await store.sweep(SWEEP_POLICY, sweepOptions);
      const sweepMs = performance.now() - t0;
      await busy.stop();
      const quiet = runTurns(
        store,
        workerThreads,
        () => 'on',
        () => interval,
      );
      await new Promise((r) => setTimeout(r, Math.min(sweepMs, QUIET_MAX_MS)));
      await quiet.stop();
      const [b, q] = [busy.times.get('on') ?? [], quiet.times.get('on') ?? []];
      log(roundLine(row, round, sweepMs, freedOf(report), b, q));
      append(row.sweeping, b);
      append(row.quiet, q);
      append(row.sweepingDue, busy.times.get('on:due') ?? []);
      append(row.quietDue, quiet.times.get('on:due') ?? []);
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

type Times = Record<string, number[]>;

/** Workers in processes of their own, the sweep in another, one store (file or server). */
async function processes(
  name: string,
  spec: StoreSpec,
  load: Load,
  log: (line: string) => void,
): Promise<Row> {
  const workerThreads = await prepare(spec, log, `${name}, processes, ${load}`);
  const row = emptyRow(name, 'processes', load);
  const per = Math.ceil(WORKERS / WORKER_PROCESSES);
  const workers = Array.from({ length: WORKER_PROCESSES }, (_, i) =>
    start(['turns', JSON.stringify(spec), workerThreads.slice(i * per, (i + 1) * per).join(',')]),
  );
  for (const w of workers) await w.next();
  const send = (m: unknown) => {
    for (const w of workers) w.send(m);
  };
  const collect = async (m: unknown) => {
    send(m);
    const all: Times[] = [];
    for (const w of workers) all.push((await w.next<{ times: Times }>()).times);
    return all;
  };
  // The workers' code warms up before anything is measured.
  await new Promise((r) => setTimeout(r, 2000));
  if (load === 'open') {
    send({ phase: 'cal' });
    await new Promise((r) => setTimeout(r, CALIBRATE_MS));
    const turns = (await collect({ phase: 'after-cal', report: true })).reduce(
      (n, t) => n + (t.cal?.length ?? 0),
      0,
    );
    const interval = intervalOf(turns, CALIBRATE_MS);
    row.rate = (1000 * WORKERS) / interval;
    log(
      `${name}, processes: open loop at ${row.rate.toFixed(0)} turns/s (${OPEN_SHARE} of capacity)`,
    );
    send({ intervalMs: interval });
    await new Promise((r) => setTimeout(r, 1000));
  }
  const sweepMs: number[] = [];
  const freed: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const sweeper = start(['sweep', JSON.stringify(spec), DUTY]);
    await sweeper.next();
    send({ phase: `sweeping${round}` });
    sweeper.send({ go: true });
    const done = await sweeper.next<{ report: SweepReport; ms: number }>();
    send({ phase: `quiet${round}` });
    await new Promise((r) => setTimeout(r, Math.min(done.ms, QUIET_MAX_MS)));
    sweepMs.push(done.ms);
    freed.push(freedOf(done.report));
  }
  send({ phase: 'done' });
  const times = await collect({ stop: true });
  for (let round = 0; round < ROUNDS; round++) {
    const pick = (key: string) => {
      const xs: number[] = [];
      for (const t of times) append(xs, t[key] ?? []);
      return xs;
    };
    const [b, q] = [pick(`sweeping${round}`), pick(`quiet${round}`)];
    log(roundLine(row, round, sweepMs[round]!, freed[round]!, b, q));
    append(row.sweeping, b);
    append(row.quiet, q);
    append(row.sweepingDue, pick(`sweeping${round}:due`));
    append(row.quietDue, pick(`quiet${round}:due`));
    row.freed += freed[round]!;
    row.sweepMs += sweepMs[round]!;
  }
  return row;
}

interface Cost {
  store: string;
  threads: number;
  statements: number;
  cpuMs: number;
  wallMs: number;
  freed: number;
}

/** One sweep over COST_THREADS threads with nothing else running, at duty cycle 1: its statements and CPU. */
async function cost(name: string, spec: StoreSpec, log: (line: string) => void): Promise<Cost> {
  const store = await openStore(spec);
  try {
    const w0 = performance.now();
    await writeOldThreads(store, COST_THREADS, { parallel: spec.kind === 'pg' ? 4 : 1 });
    log(
      `${name}: wrote ${COST_THREADS} threads in ${((performance.now() - w0) / 1000).toFixed(1)} s`,
    );
    const t0 = performance.now();
    const { result, statements, cpuMs } = await countStatements(() =>
      store.sweep(SWEEP_POLICY, { batch: 100, dutyCycle: 1 }),
    );
    const c = {
      store: name,
      threads: result.scanned,
      statements,
      cpuMs,
      wallMs: performance.now() - t0,
      freed: freedOf(result),
    };
    log(
      `${name}: a sweep of ${c.threads} threads: ${statements} statements, ${cpuMs.toFixed(0)} ms CPU, freed ${c.freed}`,
    );
    return c;
  } finally {
    await store.close();
  }
}

const RUNS = { 'in-process': inProcess, processes };

/** Runs `fn` on a fresh Postgres schema, dropped after. */
async function onSchema<T>(fn: (spec: StoreSpec) => Promise<T>): Promise<T> {
  const schema = `cairn_bench_sweep_${newId().replaceAll('-', '').slice(-12)}`;
  try {
    return await fn({ kind: 'pg', url: POSTGRES_URL, schema });
  } finally {
    const c = new pg.Client({ connectionString: POSTGRES_URL });
    await c.connect();
    await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await c.end();
  }
}

const suite: Suite = {
  id: 'retention',
  title: 'Retention: a sweep while workers run turns',
  async run(log) {
    const rows: Row[] = [];
    const costs: Cost[] = [];
    const load = loadavg()[0]!.toFixed(1);
    const modes = MODES.filter((m): m is keyof typeof RUNS => m in RUNS);
    const loads = LOADS.filter((l): l is Load => l === 'saturating' || l === 'open');
    if (STORES.includes('sqlite')) {
      const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-retention-'));
      try {
        if (COST_THREADS > 0)
          costs.push(
            await cost('SQLite file', { kind: 'sqlite', path: join(dir, 'cost.db') }, log),
          );
        for (const mode of modes)
          for (const l of loads)
            rows.push(
              await RUNS[mode](
                'SQLite file',
                { kind: 'sqlite', path: join(dir, `${mode}-${l}.db`) },
                l,
                log,
              ),
            );
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
    const why = STORES.includes('postgres') ? await postgresUnreachable() : 'not asked for';
    if (why === null) {
      if (COST_THREADS > 0)
        costs.push(await onSchema((spec) => cost('PostgreSQL server', spec, log)));
      for (const mode of modes)
        for (const l of loads)
          rows.push(await onSchema((spec) => RUNS[mode]('PostgreSQL server', spec, l, log)));
    } else log(`PostgreSQL server skipped: ${why}`);
    const loadEnd = loadavg()[0]!.toFixed(1);
    const f = (x: number) => x.toFixed(2);
    const table = [
      '| store | sweep runs | load | swept threads | freed rows | sweep time | turns (sweeping / quiet) | p50 sweeping / quiet | p99 sweeping / quiet | p99 ratio | open loop: p99 since due, sweeping / quiet (ratio) |',
      '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...rows.map((r) => {
        const p99 = [percentile(r.sweeping, 99), percentile(r.quiet, 99)] as const;
        const due = [percentile(r.sweepingDue, 99), percentile(r.quietDue, 99)] as const;
        return `| ${r.store} | ${r.mode === 'processes' ? 'in a process of its own' : "in the workers' process"} | ${r.load === 'open' ? `open loop, ${r.rate.toFixed(0)} turns/s` : 'saturating'} | ${SWEPT} x ${ROUNDS} | ${r.freed} | ${(r.sweepMs / 1000).toFixed(1)} s | ${r.sweeping.length} / ${r.quiet.length} | ${f(percentile(r.sweeping, 50))} / ${f(percentile(r.quiet, 50))} ms | ${f(p99[0])} / ${f(p99[1])} ms | ${(p99[0] / p99[1]).toFixed(2)} | ${r.load === 'open' ? `${f(due[0])} / ${f(due[1])} ms (${(due[0] / due[1]).toFixed(2)})` : '-'} |`;
      }),
    ].join('\n');
    const costTable = [
      '| store | swept threads | freed rows | statements per thread | sweep CPU per thread | wall per thread |',
      '| --- | ---: | ---: | ---: | ---: | ---: |',
      ...costs.map(
        (c) =>
          `| ${c.store} | ${c.threads} | ${c.freed} | ${(c.statements / c.threads).toFixed(1)} | ${((1000 * c.cpuMs) / c.threads).toFixed(0)} µs | ${((1000 * c.wallMs) / c.threads).toFixed(0)} µs |`,
      ),
    ].join('\n');
    return {
      markdown: `${WORKERS} workers run turns (a message, a reply and a state update each) on threads of
their own while \`store.sweep({ keepStateCommits: 5, branchTtlMs: 1, turnTtlMs: 1 }, { batch: 100${DUTY === 'default' ? '' : `, dutyCycle: ${DUTY}`} })\`
(${DUTY === 'default' ? 'the default duty cycle, 0.1' : `duty cycle ${DUTY}`}) runs over ${SWEPT} stored threads (30 state commits, a side branch and a
finished turn each); then as long again without the sweep (at most ${QUIET_MAX_MS / 1000} s). ${ROUNDS} rounds, alternating
(the first round frees the rows; later rounds sweep threads with nothing left to free);
the ratio is p99 turn time sweeping over p99 quiet, one run. Two deployments, each on a
store of its own: the sweep in the workers' process (one store, one event loop), and the
workers in ${WORKER_PROCESSES} processes of their own (${WORKERS / WORKER_PROCESSES} threads each) with the sweep in another
(one sweeper per store by its lease). Two loads: saturating, each worker running its next
turn as soon as one ends (every spare cycle of the 2 cores goes to turns, so any CPU the
sweep takes shows in their times), and open loop, the workers together running turns at a fixed rate,
${OPEN_SHARE} of the capacity a ${CALIBRATE_MS / 1000} s closed-loop phase of the same run measured (how a server
runs). In open loop the p99 columns are a turn's own time, and the last column the time
since it was due (with a timer's lateness, about a millisecond, in both windows). The machine has 2 cores,
shared with the Postgres server and other engineers' work (load average ${load} at the start, ${loadEnd} at the end).

${table}

What a swept thread costs, the same threads swept once at duty cycle 1 with nothing else
running: SQL statements sent (BEGIN and COMMIT included) and CPU time of the sweeping
process (on SQLite the database's work too; on Postgres only the client's).

${costTable}
`,
    };
  },
};

export default suite;
