/**
 * What the `workers` suite and its worker processes (workers/pg-turns.ts) share: the
 * configuration and result of a worker, and the turns it runs (Cairn's, or a LangGraph graph's).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { defineState, field, isCairnError } from '@cairn/core';
import { CairnSaver } from '@cairn/langgraph';
import { createPostgresStore } from '@cairn/store-postgres';
import { type CairnThread, openThread } from '@cairn/thread';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import {
  Annotation,
  type BaseCheckpointSaver,
  END,
  MessagesAnnotation,
  START,
  StateGraph,
} from '@langchain/langgraph';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import pg from 'pg';
import { queryCounter } from './postgres.js';

export type Mode = 'cairn' | 'cairn-saver' | 'pg-saver';

export interface Config {
  mode: Mode;
  url: string;
  /** Cairn's schema (threads, or leases and CairnSaver's checkpoints). */
  schema: string;
  /** PostgresSaver's schema (`pg-saver`). */
  saverSchema: string;
  worker: number;
  own: string[];
  shared: string[];
  turns: number;
  /** The Cairn store's pool; default 2 (a worker runs one turn at a time), null: the store's default (10). */
  maxConnections?: number | null;
  /**
   * Take a held lease as before issue 25, for comparison in the same run: on `CONFLICT`,
   * sleep 1–4 ms and ask again (every attempt counted in `acquisitions`).
   */
  poll?: boolean;
}

export interface Result {
  /** Milliseconds per turn, lease wait included. */
  latencies: number[];
  /** Turns completed per thread id. */
  turnsOn: Record<string, number>;
  /** Turns whose lease was found held by another worker, and waited for. */
  leaseWaits: number;
  /** Attempts to take a lease beyond the first of each turn: each after a wake-up. */
  leaseRetries: number;
  ms: number;
  /** CPU time of the worker process over its timed turns, in ms. */
  cpuMs?: number;
}

/** Thread state of the `cairn` mode (and the graph's): a count of turns and the last one's name. */
export const TurnState = defineState({
  counter: field<number, number>({ reducer: (a, b) => (a ?? 0) + (b ?? 0), default: () => 0 }),
  last: field<string>(),
});

export const GraphState = Annotation.Root({
  ...MessagesAnnotation.spec,
  counter: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
  last: Annotation<string>(),
});

/** The graph of the LangGraph modes: one turn is the input and three nodes, four checkpoints. */
export function turnGraph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(GraphState)
    .addNode('count', () => ({ counter: 1 }))
    .addNode('note', (s) => ({ last: `turn ${s.counter}` }))
    .addNode('agent', (s) => ({ messages: [new AIMessage(`reply to ${s.messages.length}`)] }))
    .addEdge(START, 'count')
    .addEdge('count', 'note')
    .addEdge('note', 'agent')
    .addEdge('agent', END)
    .compile({ checkpointer });
}

/**
 * Runs turns as one worker. A turn holds the thread's run lease (waited for while another
 * worker holds it: `waitMs`, woken by the release's change notification, no polling), saves a
 * user message, makes two state updates and saves a reply:
 * - `cairn`: `@cairn/thread` — `acquireRun({ waitMs })`, `save`, `update` x2, `save`, `release`;
 * - `cairn-saver` / `pg-saver`: a LangGraph graph (input message, nodes `count`, `note`,
 *   `agent`: four checkpoints) on CairnSaver (Cairn Postgres) or PostgresSaver, the lease
 *   taken with `store.acquireLease({ waitMs })` on a Cairn Postgres store (the same one for
 *   CairnSaver).
 */
export interface TurnRunner {
  turn(threadId: string, i: number): Promise<void>;
  /**
   * Attempts of each lease acquisition so far, in order: the lease row locks (`SELECT …
   * FOR UPDATE`) this process sent while it ran, meaningful when turns run one at a time.
   * One: taken at once; more: found held, waited for, tried again once woken.
   */
  acquisitions(): number[];
  close(): Promise<void>;
}

/** How long a turn waits for a thread's run lease before TIMEOUT (never, in the bench). */
export const LEASE_WAIT_MS = 60_000;

/** The statement each attempt to take a lease starts with (the Postgres store's lockLease). */
const LEASE_LOCK = /\.leases WHERE key = \$1 FOR UPDATE/;

/** Lease waits in `attempts` (see `TurnRunner.acquisitions`): acquisitions of more than one attempt. */
export function leaseWaits(attempts: number[]): { waits: number; retries: number } {
  let waits = 0;
  let retries = 0;
  for (const n of attempts) {
    if (n > 1) waits++;
    retries += n - 1;
  }
  return { waits, retries };
}

/** The turns of `c.mode`, on `c`'s threads (opened, or created, now). */
export async function turnRunner(c: Config): Promise<TurnRunner> {
  const locks = queryCounter(LEASE_LOCK);
  const acquisitions: number[] = [];
  const counted: Counted = async (take) => {
    const before = locks();
    const r = c.poll ? await polled(take) : await take(LEASE_WAIT_MS);
    acquisitions.push(locks() - before);
    return r;
  };
  const runner = c.mode === 'cairn' ? await cairnTurns(c, counted) : await graphTurns(c, counted);
  return { ...runner, acquisitions: () => [...acquisitions] };
}

/** A lease acquisition, waiting up to `waitMs` (undefined: `CONFLICT` at once). */
type Counted = <T>(take: (waitMs?: number) => Promise<T>) => Promise<T>;

/** The polling loop of before issue 25: `take()` again after a jittered 1–4 ms sleep. */
async function polled<T>(take: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await take();
    } catch (e) {
      if (!isCairnError(e, 'CONFLICT')) throw e;
      await sleep(1 + Math.random() * 3);
    }
  }
}
type Turns = Omit<TurnRunner, 'acquisitions'>;

const poolOf = (c: Config) =>
  c.maxConnections === null ? {} : { maxConnections: c.maxConnections ?? 2 };

async function cairnTurns(c: Config, counted: Counted): Promise<Turns> {
  const store = await createPostgresStore(
    { connectionString: c.url },
    { schema: c.schema, ...poolOf(c) },
  );
  const threads = new Map<string, CairnThread<typeof TurnState>>();
  for (const id of [...c.own, ...c.shared])
    threads.set(id, await openThread(store, { schema: TurnState, threadId: id }));
  const owner = `worker-${c.worker}`;
  return {
    turn: async (id, i) => {
      const thread = threads.get(id)!;
      const run = await counted((waitMs) =>
        thread.acquireRun({ owner, ttlMs: 30_000, ...(waitMs ? { waitMs } : {}) }),
      );
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

async function graphTurns(c: Config, counted: Counted): Promise<Turns> {
  const store = await createPostgresStore(
    { connectionString: c.url },
    { schema: c.schema, ...poolOf(c) },
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
      await counted((waitMs) =>
        store.acquireLease({
          key: `run:${id}`,
          owner,
          ttlMs: 30_000,
          ...(waitMs ? { waitMs } : {}),
        }),
      );
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
