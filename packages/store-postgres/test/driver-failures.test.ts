import { type CairnError, isCairnError } from '@cairn/core';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { createPostgresStore } from '../src/index.js';
import { type DriverConnection, PostgresDriver } from '../src/postgres-driver.js';
import { describeServer, dropSchema, freshSchema, POSTGRES_URL } from './support.js';

/** The call's failure, which must be a CairnError UNAVAILABLE carrying the driver's error. */
async function unavailable(call: Promise<unknown>): Promise<CairnError> {
  const error = await call.then(
    () => expect.fail('the call succeeded'),
    (e: unknown) => e,
  );
  expect(isCairnError(error, 'UNAVAILABLE'), String(error)).toBe(true);
  const e = error as CairnError;
  expect(e.cause).toBeInstanceOf(Error);
  expect(e.message).toContain((e.cause as Error).message);
  return e;
}

const elsewhere = (database: string) => {
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${database}`;
  return url.toString();
};

describeServer('driver failures on the server are UNAVAILABLE', () => {
  it('a server that refuses the connection', async () => {
    const e = await unavailable(
      createPostgresStore({ connectionString: 'postgres://postgres@127.0.0.1:1/test' }),
    );
    expect((e.cause as { code?: string }).code).toBe('ECONNREFUSED');
  });

  it('a database that does not exist', async () => {
    const e = await unavailable(
      createPostgresStore({ connectionString: elsewhere('cairn_no_such_database') }),
    );
    expect((e.cause as { code?: string }).code).toBe('3D000');
  });

  it('a pool its owner ended while the store was open, for reads, writes and transactions', async () => {
    const schema = freshSchema();
    const pool = new pg.Pool({ connectionString: POSTGRES_URL });
    const store = await createPostgresStore({ pool }, { schema });
    const thread = await store.createThread({});
    await pool.end();
    await unavailable(store.getThread(thread.id));
    await unavailable(store.createThread({}));
    await unavailable(store.transaction((tx) => tx.getThread(thread.id)));
    await store.close();
    await dropSchema(schema);
  });
});

describe('driver failures on PGlite are UNAVAILABLE', () => {
  let db: PGlite;
  beforeAll(async () => {
    db = await PGlite.create();
  });

  it('a PGlite instance its owner closed; what a transaction function throws passes through', async () => {
    const store = await createPostgresStore({ client: db }, { schema: freshSchema() });
    const thread = await store.createThread({});
    const mine = new Error('mine');
    await expect(store.transaction(() => Promise.reject(mine))).rejects.toBe(mine);
    await db.close();
    await unavailable(store.getThread(thread.id));
    await unavailable(store.addMemories([{ agentId: 'a', content: { text: 'x' } }]));
    await unavailable(store.transaction((tx) => tx.getThread(thread.id)));
    await store.close();
  });
});

describe('a row a write refers to, deleted meanwhile by another connection', () => {
  it('is NOT_FOUND naming the thread (the front door then tells a forgotten one), not UNAVAILABLE', () => {
    // What pg hands over when a branch is inserted for a thread deleted since it was checked.
    const error = Object.assign(
      new Error(
        'insert or update on table "branches" violates foreign key constraint "branches_thread_id_fkey"',
      ),
      {
        code: '23503',
        constraint: 'branches_thread_id_fkey',
        detail: 'Key (thread_id)=(t-1) is not present in table "threads".',
      },
    );
    const driver = new PostgresDriver({} as DriverConnection);
    const e = driver.translateError(error);
    expect(isCairnError(e, 'NOT_FOUND')).toBe(true);
    expect(e!.details).toEqual({ threadId: 't-1' });
    expect(e!.cause).toBe(error);
    const other = driver.translateError(
      Object.assign(new Error('fk'), { code: '23503', detail: 'Key (x)=(1) is not present' }),
    );
    expect(isCairnError(other, 'NOT_FOUND')).toBe(true);
    expect(other!.details).toEqual({});
  });

  it('a transaction rolled back to break a deadlock is CONFLICT (safe to try again), not UNAVAILABLE', () => {
    const error = Object.assign(new Error('deadlock detected'), { code: '40P01' });
    const e = new PostgresDriver({} as DriverConnection).translateError(error);
    expect(isCairnError(e, 'CONFLICT')).toBe(true);
    expect(e!.details).toEqual({ reason: 'deadlock' });
    expect(e!.cause).toBe(error);
  });
});
