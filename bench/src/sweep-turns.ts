/**
 * What the retention suite's workers and sweeper share, in its process or in processes of
 * their own (workers/sweep-process.ts): the state, a turn loop, and how to open the store.
 */
import { defineState, field, reducers } from '@cairn/core';
import type { Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import { createSqliteStore } from '@cairn/store-sqlite';
import { openThread } from '@cairn/thread';

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
 */
export function runTurns(store: Store, threadIds: string[], phase: () => string) {
  const times = new Map<string, number[]>();
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
      const bucket = phase();
      if (!times.has(bucket)) times.set(bucket, []);
      times.get(bucket)!.push(performance.now() - t0);
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
