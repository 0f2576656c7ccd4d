/**
 * What the `schema-versions` suite and its worker processes (workers/schema-turns.ts) share:
 * two versions of one state schema — version 2 renames `name` to `title` and turns the
 * number `score` into `{ value }` — and the turn a worker of either version runs.
 */
import { defineState, field, isCairnError, reducers } from '@cairn/core';
import type { Store } from '@cairn/store';
import { openThread } from '@cairn/thread';

export const V1 = defineState({
  name: field<string>(),
  tags: field<string[]>({ reducer: reducers.appendUnique, default: () => [] }),
  score: field<number>({ default: () => 0 }),
});

export const V2 = defineState(
  {
    title: field<string>(),
    tags: field<string[]>({ reducer: reducers.appendUnique, default: () => [] }),
    score: field<{ value: number }>({ default: () => ({ value: 0 }) }),
  },
  {
    version: 2,
    migrations: [
      {
        from: 1,
        to: 2,
        schema: V1,
        migrate: ({ name, score, ...rest }: Record<string, unknown>) => ({
          ...rest,
          title: name,
          score: { value: score },
        }),
      },
    ],
  },
);

export interface WorkerConfig {
  url: string;
  schema: string;
  version: 1 | 2;
  worker: number;
  /** A file of the thread ids, one per line (10,000 ids are too long for a command line). */
  threadsFile: string;
  seconds: number;
}

export interface WorkerResult {
  /** Turns that wrote their state update. */
  turns: number;
  /** Turns refused with SCHEMA_TOO_NEW: a version-1 worker meeting a thread version 2 wrote. */
  refused: number;
  /** Any other failure, counted, with the first few messages. */
  errors: number;
  errorSamples: string[];
  /** The tag each written turn added, by thread: all must be in the thread's state at the end. */
  tags: Record<string, string[]>;
}

export type Outcome = 'written' | 'refused';

/**
 * One turn under the thread's run lease: open the thread with the worker's schema version, save
 * a message, add a unique tag and a score in that version's shape. `refused` when the thread's
 * state is of a newer version (SCHEMA_TOO_NEW); other errors are thrown.
 */
export async function schemaTurn(
  store: Store,
  version: 1 | 2,
  threadId: string,
  owner: string,
  tag: string,
  score: number,
): Promise<Outcome> {
  const key = `run:${threadId}`;
  await store.acquireLease({ key, owner, ttlMs: 30_000, waitMs: 60_000 });
  try {
    if (version === 1) {
      const t = await openThread(store, { schema: V1, threadId });
      t.add({ role: 'user', data: { text: tag } });
      await t.save();
      await t.update({ tags: [tag], score });
      await t.close();
    } else {
      const t = await openThread(store, { schema: V2, threadId });
      t.add({ role: 'user', data: { text: tag } });
      await t.save();
      await t.update({ tags: [tag], score: { value: score } });
      await t.close();
    }
    return 'written';
  } catch (e) {
    if (isCairnError(e, 'SCHEMA_TOO_NEW')) return 'refused';
    throw e;
  } finally {
    await store.releaseLease(key, owner);
  }
}
