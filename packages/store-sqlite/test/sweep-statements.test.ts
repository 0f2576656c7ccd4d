// What a swept thread costs in SQL: the sweep reads and deletes a few threads at a time,
// set-based, not in a series of statements per thread (that each hold the one writer lock
// callers wait for). Counted, not timed.
import { SWEEPABLE_FREED, SWEEPABLE_POLICY, writeSweepable } from '@cairn/store/testing';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createSqliteStore } from '../src/index.js';

/** Counts the statements better-sqlite3 runs while `fn` runs. */
async function counted<T>(fn: () => Promise<T>): Promise<{ result: T; statements: number }> {
  const probe = new Database(':memory:');
  const proto = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<string, unknown>;
  probe.close();
  const names = ['run', 'get', 'all', 'iterate'] as const;
  const originals = names.map((n) => proto[n] as (...a: unknown[]) => unknown);
  let statements = 0;
  names.forEach((n, i) => {
    proto[n] = function (this: unknown, ...a: unknown[]) {
      statements++;
      return originals[i]!.apply(this, a);
    };
  });
  try {
    return { result: await fn(), statements };
  } finally {
    names.forEach((n, i) => {
      proto[n] = originals[i];
    });
  }
}

describe('sweep statements (SQLite)', () => {
  const store = createSqliteStore({ path: ':memory:' });

  it('sweeps a thread in a few statements, not a series per thread', async () => {
    const THREADS = 40;
    await writeSweepable(store, THREADS);
    const { result, statements } = await counted(() =>
      store.sweep(SWEEPABLE_POLICY, { batch: 100, dutyCycle: 1 }),
    );
    expect(result).toMatchObject({ scanned: THREADS, busy: 0, invalid: 0 });
    expect(result.freed).toMatchObject({
      branches: THREADS * SWEEPABLE_FREED.branches,
      stateCommits: THREADS * SWEEPABLE_FREED.stateCommits,
      turns: THREADS * SWEEPABLE_FREED.turns,
    });
    // A thread at a time, as before, took 733 for these 40.
    expect(statements).toBeLessThanOrEqual(3 * THREADS);
    await store.close();
  });
});
