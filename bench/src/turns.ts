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
}

export interface Result {
  /** Milliseconds per turn, lease wait included. */
  latencies: number[];
  /** Turns completed per thread id. */
  turnsOn: Record<string, number>;
  /** Times a lease was found held by another worker. */
  leaseWaits: number;
  ms: number;
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
 * Runs turns as one worker. A turn holds the thread's run lease (taken again after a jittered
 * 1–4 ms wait while another worker holds it), saves a user message, makes two state updates
 * and saves a reply:
 * - `cairn`: `@cairn/thread` — `acquireRun`, `save`, `update` x2, `save`, `release`;
 * - `cairn-saver` / `pg-saver`: a LangGraph graph (input message, nodes `count`, `note`,
 *   `agent`: four checkpoints) on CairnSaver (Cairn Postgres) or PostgresSaver, the lease
 *   taken with `store.acquireLease` on a Cairn Postgres store (the same one for CairnSaver).
 */
export interface TurnRunner {
  turn(threadId: string, i: number): Promise<void>;
  /** Times a lease was found held by another worker. */
  leaseWaits(): number;
  close(): Promise<void>;
}

/** The turns of `c.mode`, on `c`'s threads (opened, or created, now). */
export async function turnRunner(c: Config): Promise<TurnRunner> {
  let waits = 0;
  // `take()` again after a jittered 1–4 ms wait while it fails with CONFLICT (a held lease).
  const waitFor = async <T>(take: () => Promise<T>): Promise<T> => {
    for (;;) {
      try {
        return await take();
      } catch (e) {
        if (!isCairnError(e, 'CONFLICT')) throw e;
        waits++;
        await sleep(1 + Math.random() * 3);
      }
    }
  };
  const runner = c.mode === 'cairn' ? await cairnTurns(c, waitFor) : await graphTurns(c, waitFor);
  return { ...runner, leaseWaits: () => waits };
}

type WaitFor = <T>(take: () => Promise<T>) => Promise<T>;
type Turns = Omit<TurnRunner, 'leaseWaits'>;

async function cairnTurns(c: Config, waitFor: WaitFor): Promise<Turns> {
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

async function graphTurns(c: Config, waitFor: WaitFor): Promise<Turns> {
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
