/**
 * One of several worker processes running turns against one Postgres server. Spawned by the
 * `workers` suite.
 *
 *   node pg-turns.js '<Config as JSON>'
 *
 * Runs 5 untimed warm-up turns on its first own thread, prints "ready", waits for "go" on
 * stdin, then runs `turns` turns and prints one JSON line (`Result`). Turn i goes to one of the worker's own threads, every 4th to a shared one. A
 * turn holds the thread's run lease (taken again after a jittered 1–4 ms wait while another
 * worker holds it) and saves a user message, makes two state updates and saves a reply:
 * - `cairn`: `@cairn/thread` — `acquireRun`, `save`, `update` x2, `save`, `release`;
 * - `cairn-saver` / `pg-saver`: a LangGraph graph (input message, nodes `count`, `note`,
 *   `agent`: four checkpoints) on CairnSaver (Cairn Postgres) or PostgresSaver, the lease
 *   taken with `store.acquireLease` on a Cairn Postgres store (the same one for CairnSaver).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { isCairnError } from '@cairn/core';
import { CairnSaver } from '@cairn/langgraph';
import { createPostgresStore } from '@cairn/store-postgres';
import { type CairnThread, openThread } from '@cairn/thread';
import { HumanMessage } from '@langchain/core/messages';
import type { BaseCheckpointSaver } from '@langchain/langgraph';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import pg from 'pg';
import { type Config, type Result, TurnState, turnGraph } from '../turns.js';

/** One turn on a thread, holding its run lease (waiting while another worker holds it). */
type RunTurn = (threadId: string, i: number) => Promise<void>;

async function cairnTurns(c: Config): Promise<{ turn: RunTurn; close: () => Promise<void> }> {
  const store = await createPostgresStore(
    { connectionString: c.url },
    { schema: c.schema, maxConnections: 2 },
  );
  const threads = new Map<string, CairnThread<typeof TurnState>>();
  for (const id of [...c.own, ...c.shared])
    threads.set(id, await openThread(store, { schema: TurnState, threadId: id }));
  const owner = `worker-${c.worker}`;
  return {
    turn: async (id, i) => {
      const thread = threads.get(id)!;
      const run = await waitFor(() => thread.acquireRun({ owner, ttlMs: 30_000 }));
      thread.add({ role: 'user', data: { text: `question from ${owner}` } });
      await thread.save();
      await thread.update({ counter: 1 });
      await thread.update({ last: `${owner} turn ${i}` });
      thread.add({ role: 'assistant', data: { text: `reply to ${owner}` } });
      await thread.save();
      await run.release({ result: 'completed' });
    },
    close: async () => {
      for (const t of threads.values()) await t.close();
      await store.close();
    },
  };
}

async function graphTurns(c: Config): Promise<{ turn: RunTurn; close: () => Promise<void> }> {
  const store = await createPostgresStore(
    { connectionString: c.url },
    { schema: c.schema, maxConnections: 2 },
  );
  let saver: BaseCheckpointSaver;
  let pool: pg.Pool | null = null;
  if (c.mode === 'pg-saver') {
    pool = new pg.Pool({ connectionString: c.url, max: 2 });
    saver = new PostgresSaver(pool, undefined, { schema: c.saverSchema });
  } else saver = new CairnSaver(store);
  const graph = turnGraph(saver);
  const owner = `worker-${c.worker}`;
  return {
    turn: async (id) => {
      await waitFor(() => store.acquireLease({ key: `run:${id}`, owner, ttlMs: 30_000 }));
      await graph.invoke(
        { messages: [new HumanMessage(`question from ${owner}`)] },
        { configurable: { thread_id: id } },
      );
      await store.releaseLease(`run:${id}`, owner);
    },
    close: async () => {
      await pool?.end();
      await store.close();
    },
  };
}

let leaseWaits = 0;
const WARMUP = 5;

/** `take()` again after a jittered 1–4 ms wait while it fails with CONFLICT (a held lease). */
async function waitFor<T>(take: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await take();
    } catch (e) {
      if (!isCairnError(e, 'CONFLICT')) throw e;
      leaseWaits++;
      await sleep(1 + Math.random() * 3);
    }
  }
}

const c = JSON.parse(process.argv[2]!) as Config;
const { turn, close } = c.mode === 'cairn' ? await cairnTurns(c) : await graphTurns(c);
const turnsOn: Record<string, number> = {};
// Warm-up, untimed (a fresh process runs its first turns cold): on the first own thread.
for (let i = 0; i < WARMUP; i++) {
  await turn(c.own[0]!, -1 - i);
  turnsOn[c.own[0]!] = (turnsOn[c.own[0]!] ?? 0) + 1;
}
process.stdout.write('ready\n');
await new Promise<void>((resolve) => {
  process.stdin.on('data', (d) => {
    if (String(d).includes('go')) resolve();
  });
});
const latencies: number[] = [];
leaseWaits = 0;
const t0 = performance.now();
for (let i = 0; i < c.turns; i++) {
  const id =
    i % 4 === 3 ? c.shared[((i >> 2) + c.worker) % c.shared.length]! : c.own[i % c.own.length]!;
  const start = performance.now();
  await turn(id, i);
  latencies.push(performance.now() - start);
  turnsOn[id] = (turnsOn[id] ?? 0) + 1;
}
const ms = performance.now() - t0;
await close();
const result: Result = { latencies, turnsOn, leaseWaits, ms };
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
