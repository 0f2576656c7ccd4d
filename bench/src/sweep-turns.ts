/**
 * What the retention suite's workers and sweeper share, in its process or in processes of
 * their own (workers/sweep-process.ts): the state, a turn loop, and how to open the store.
 */
import { defineState, field, reducers } from '@cairn/core';
import type { Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import { createSqliteStore } from '@cairn/store-sqlite';
import { openThread } from '@cairn/thread';
import Database from 'better-sqlite3';
import pg from 'pg';

export const Chat = defineState({
  turn: field<number>({ default: () => 0 }),
  topics: field<string[]>({ reducer: reducers.appendUnique, default: () => [] }),
});

/** The policy every sweep of the suite runs. */
export const SWEEP_POLICY = { keepStateCommits: 5, branchTtlMs: 1, turnTtlMs: 1 };

/** Where the store is, for a process that opens it again. */
export type StoreSpec =
  | { kind: 'sqlite'; path: string }
  | { kind: 'pg'; url: string; schema: string };

export async function openStore(spec: StoreSpec): Promise<Store> {
  return spec.kind === 'sqlite'
    ? createSqliteStore({ path: spec.path }, { busyTimeoutMs: 30_000 })
    : createPostgresStore({ connectionString: spec.url }, { schema: spec.schema });
}

/**
 * Workers running turns (a message, a reply, a state update) on `threadIds` until
 * `stop()`; each turn's ms goes to the bucket `phase()` names when it ends.
 *
 * `pace()` says how each worker issues turns: null, closed loop (the next turn as soon as
 * one ends: saturating); a number, open loop, one turn every that many ms per worker (a
 * server taking requests at a fixed rate). In open loop a turn is due at its scheduled
 * time, and a worker behind schedule starts it at once; besides its own time (the bucket),
 * the time since it was due goes to `<bucket>:due` (what the caller waits, queueing and
 * timer lateness included).
 */
export function runTurns(
  store: Store,
  threadIds: string[],
  phase: () => string,
  pace: () => number | null = () => null,
) {
  const times = new Map<string, number[]>();
  const record = (bucket: string, ms: number) => {
    const xs = times.get(bucket);
    if (xs) xs.push(ms);
    else times.set(bucket, [ms]);
  };
  let running = true;
  const loops = threadIds.map(async (threadId, n) => {
    const t = await openThread(store, { schema: Chat, threadId });
    let due: number | null = null;
    for (let i = 0; running; i++) {
      const interval = pace();
      if (interval === null) due = null;
      else {
        // Workers start spread over one interval, not in step.
        due = due === null ? performance.now() + (interval * n) / threadIds.length : due + interval;
        const wait = due - performance.now();
        if (wait >= 1) await new Promise((r) => setTimeout(r, wait));
        if (!running) break;
      }
      const t0 = performance.now();
      t.add({ role: 'user', data: `question ${i}` });
      await t.save();
      t.add({ role: 'assistant', data: `answer ${i}` });
      await t.save();
      await t.update({ turn: i, topics: [`live${i % 5}`] });
      const end = performance.now();
      const bucket = phase();
      record(bucket, end - t0);
      if (due !== null) record(`${bucket}:due`, end - Math.min(due, t0));
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

/** A stored thread with 30 state commits (a snapshot every 10), a side branch and a finished turn. */
export async function writeOld(store: Store): Promise<void> {
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

/**
 * `count` threads as `writeOld` writes them, fast: `perTx` threads to a transaction (one
 * commit instead of ~45), `parallel` transactions at a time (a pool's connections).
 */
export async function writeOldThreads(
  store: Store,
  count: number,
  { perTx = 20, parallel = 4 }: { perTx?: number; parallel?: number } = {},
): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const n = Math.min(perTx, count - next);
      next += n;
      await store.transaction(async (tx) => {
        for (let i = 0; i < n; i++) await writeOld(tx);
      });
    }
  };
  await Promise.all(Array.from({ length: parallel }, lane));
}

/**
 * Counts the SQL statements this process sends (better-sqlite3 statement runs and pg
 * queries, BEGIN and COMMIT included) while `fn` runs, and the CPU time it takes.
 */
export async function countStatements<T>(
  fn: () => Promise<T>,
): Promise<{ result: T; statements: number; cpuMs: number }> {
  let statements = 0;
  const restore: (() => void)[] = [];
  const wrap = (proto: Record<string, unknown>, names: string[]) => {
    for (const name of names) {
      const orig = proto[name] as (...a: unknown[]) => unknown;
      proto[name] = function (this: unknown, ...a: unknown[]) {
        statements++;
        return orig.apply(this, a);
      };
      restore.push(() => {
        proto[name] = orig;
      });
    }
  };
  const probe = new Database(':memory:');
  wrap(Object.getPrototypeOf(probe.prepare('SELECT 1')), ['run', 'get', 'all', 'iterate']);
  wrap(Object.getPrototypeOf(probe) as Record<string, unknown>, ['exec']);
  probe.close();
  wrap(pg.Client.prototype as unknown as Record<string, unknown>, ['query']);
  const cpu0 = process.cpuUsage();
  try {
    const result = await fn();
    const cpu = process.cpuUsage(cpu0);
    return { result, statements, cpuMs: (cpu.user + cpu.system) / 1000 };
  } finally {
    for (const r of restore) r();
  }
}
