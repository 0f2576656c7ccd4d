import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineState, field, newId, reducers } from '@cairn/core';
import type { Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import { createSqliteStore } from '@cairn/store-sqlite';
import { openThread } from '@cairn/thread';
import pg from 'pg';
import type { Suite } from '../harness.js';
import { POSTGRES_URL, postgresUnreachable } from '../postgres.js';

/**
 * A sweep (`store.sweep`) over many stored threads while workers run turns on other
 * threads of the same store: the workers' p99 turn time with the sweep running against
 * the same workers without it, in alternating windows of one run.
 * BENCH_SWEEP_THREADS (default 2,000) scales the swept threads (the issue's 10,000).
 */
const SWEPT = Number(process.env.BENCH_SWEEP_THREADS ?? 2000);
const WORKERS = 4;
const ROUNDS = 3;

const Chat = defineState({
  turn: field<number>({ default: () => 0 }),
  topics: field<string[]>({ reducer: reducers.appendUnique, default: () => [] }),
});

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

/** Workers running turns (a message, a reply, a state update) until `stop()`; each turn's ms. */
function runWorkers(store: Store, threadIds: string[]) {
  const times: number[] = [];
  let running = true;
  const loops = threadIds.map(async (threadId) => {
    const t = await openThread(store, { schema: Chat, threadId });
    for (let i = 0; running; i++) {
      const t0 = performance.now();
      t.add({ role: 'user', data: `question ${i}` });
      await t.save();
      t.add({ role: 'assistant', data: `answer ${i}` });
      await t.save();
      await t.update({ turn: i, topics: [`live${i % 5}`] });
      times.push(performance.now() - t0);
      // A worker waits on its model between turns; on a synchronous store (SQLite) this
      // also lets timers run.
      await new Promise((r) => setImmediate(r));
    }
    await t.close();
  });
  return {
    times,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

interface Row {
  store: string;
  quiet: number[];
  sweeping: number[];
  freed: number;
  sweepMs: number;
}

async function measure(name: string, store: Store, log: (line: string) => void): Promise<Row> {
  log(`${name}: writing ${SWEPT} threads to sweep`);
  for (let i = 0; i < SWEPT; i += 20)
    await Promise.all(Array.from({ length: Math.min(20, SWEPT - i) }, () => writeOld(store)));
  const workerThreads: string[] = [];
  for (let i = 0; i < WORKERS; i++) workerThreads.push((await store.createThread({})).id);
  const row: Row = { store: name, quiet: [], sweeping: [], freed: 0, sweepMs: 0 };
  await new Promise((r) => setTimeout(r, 5));
  // Each round: a sweep with workers running, then as long without it. The first round's
  // sweep frees most; later ones still read every thread, which is what costs the writers.
  for (let round = 0; round < ROUNDS; round++) {
    const busy = runWorkers(store, workerThreads);
    const t0 = performance.now();
    const report = await store.sweep(
      { keepStateCommits: 5, branchTtlMs: 1, turnTtlMs: 1 },
      { batch: 100 },
    );
    const sweepMs = performance.now() - t0;
    await busy.stop();
    const quiet = runWorkers(store, workerThreads);
    await new Promise((r) => setTimeout(r, sweepMs));
    await quiet.stop();
    const freed = report.freed.stateCommits + report.freed.branches + report.freed.turns;
    log(
      `${name} round ${round + 1}: sweep ${sweepMs.toFixed(0)} ms, freed ${freed}; p99 ${percentile(busy.times, 99).toFixed(1)} ms sweeping (${busy.times.length} turns) vs ${percentile(quiet.times, 99).toFixed(1)} ms quiet (${quiet.times.length})`,
    );
    row.sweeping.push(...busy.times);
    row.quiet.push(...quiet.times);
    row.freed += freed;
    row.sweepMs += sweepMs;
  }
  return row;
}

const suite: Suite = {
  id: 'retention',
  title: 'Retention: a sweep while workers run turns',
  async run(log) {
    const rows: Row[] = [];
    const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-retention-'));
    try {
      const sqlite = createSqliteStore({ path: join(dir, 'sweep.db') });
      rows.push(await measure('SQLite file', sqlite, log));
      await sqlite.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const why = await postgresUnreachable();
    if (why === null) {
      const schema = `cairn_bench_sweep_${newId().replaceAll('-', '').slice(-12)}`;
      const store = await createPostgresStore({ connectionString: POSTGRES_URL }, { schema });
      try {
        rows.push(await measure('PostgreSQL server', store, log));
      } finally {
        await store.close();
        const c = new pg.Client({ connectionString: POSTGRES_URL });
        await c.connect();
        await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await c.end();
      }
    } else log(`PostgreSQL server skipped: ${why}`);
    const f = (x: number) => x.toFixed(1);
    const table = [
      '| store | swept threads | freed rows | sweep time | turns (sweeping / quiet) | p50 sweeping / quiet | p99 sweeping / quiet | p99 ratio |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...rows.map((r) => {
        const p99 = [percentile(r.sweeping, 99), percentile(r.quiet, 99)] as const;
        return `| ${r.store} | ${SWEPT} x ${ROUNDS} | ${r.freed} | ${(r.sweepMs / 1000).toFixed(1)} s | ${r.sweeping.length} / ${r.quiet.length} | ${f(percentile(r.sweeping, 50))} / ${f(percentile(r.quiet, 50))} ms | ${f(p99[0])} / ${f(p99[1])} ms | ${(p99[0] / p99[1]).toFixed(2)} |`;
      }),
    ].join('\n');
    return {
      markdown: `${WORKERS} workers run turns (a message, a reply and a state update each) on threads of
their own while \`store.sweep({ keepStateCommits: 5, branchTtlMs: 1, turnTtlMs: 1 })\` runs
over ${SWEPT} stored threads (30 state commits, a side branch and a finished turn each), in
the same process and store; then as long again without the sweep. ${ROUNDS} rounds, alternating;
the ratio is p99 turn time sweeping over p99 quiet, one run. \`BENCH_SWEEP_THREADS=10000\`
runs the issue's size.

${table}
`,
    };
  },
};

export default suite;
