// What a swept thread costs in SQL: the sweep reads and deletes a few threads at a time,
// set-based (a round trip per statement), not in a series of statements per thread.
// Counted, not timed.
import type { Store } from '@cairn/store';
import { SWEEPABLE_FREED, SWEEPABLE_POLICY, writeSweepable } from '@cairn/store/testing';
import { createPostgresStore } from '@cairn/store-postgres';
import {
  dropSchema,
  freshSchema,
  POSTGRES_TEST_URL,
  postgresTestSkip,
} from '@cairn/store-postgres/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const skip = await postgresTestSkip('sweep statements');

describe.skipIf(skip)('sweep statements (Postgres)', () => {
  const schema = freshSchema('cairn_sweep_statements');
  const pool = new pg.Pool({ connectionString: POSTGRES_TEST_URL, max: 4 });
  const counting = { on: false, statements: 0 };
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args) => {
      if (counting.on) counting.statements++;
      return query(...args);
    };
  });
  let store: Store;

  beforeAll(async () => {
    store = await createPostgresStore({ pool }, { schema });
  });
  afterAll(async () => {
    await store?.close();
    await pool.end();
    await dropSchema(schema);
  });

  it('sweeps a thread in a few statements, not a series per thread', async () => {
    const THREADS = 40;
    await writeSweepable(store, THREADS);
    counting.on = true;
    const result = await store.sweep(SWEEPABLE_POLICY, { batch: 100, dutyCycle: 1 });
    counting.on = false;
    expect(result).toMatchObject({ scanned: THREADS, busy: 0, invalid: 0 });
    expect(result.freed).toMatchObject({
      branches: THREADS * SWEEPABLE_FREED.branches,
      stateCommits: THREADS * SWEEPABLE_FREED.stateCommits,
      turns: THREADS * SWEEPABLE_FREED.turns,
    });
    // A thread at a time, as before, took 1,013 for these 40.
    expect(counting.statements).toBeLessThanOrEqual(4 * THREADS);
  });

  it('sweeps the other threads of a part while one waits for a lock, then that one', async () => {
    const [locked, other] = await writeSweepable(store, 2);
    const branch = await store.getBranch(locked!, 'main');
    const holder = await pool.connect();
    try {
      // A writer holding the branch's lock (as a save does) past a part's short wait.
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM "${schema}".branches WHERE id = $1 FOR NO KEY UPDATE`, [
        branch!.id,
      ]);
      const sweeping = store.sweep(SWEEPABLE_POLICY, { threadIds: [other!, locked!] });
      await new Promise((r) => setTimeout(r, 400));
      // The part gave up its short wait; the other thread was swept meanwhile, alone, and
      // the locked one waits for its lock on its own.
      const meanwhile = await store.getBranch(other!, 'side');
      await holder.query('COMMIT');
      expect(meanwhile).toBeNull();
      const report = await sweeping;
      expect(report).toMatchObject({ scanned: 2, busy: 0 });
      expect(report.freed.branches).toBe(2 * SWEEPABLE_FREED.branches);
      expect(await store.getBranch(locked!, 'side')).toBeNull();
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
  });
});
