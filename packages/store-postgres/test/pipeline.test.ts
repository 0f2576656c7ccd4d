import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { poolQueryable, type Queryable } from '../src/queryable.js';
import { sentWhile as statementsSent } from '../src/testing.js';
import { describeServer, POSTGRES_URL } from './support.js';

/** The SQLSTATE a call failed with (it must fail). */
const failure = (call: Promise<unknown>) =>
  call.then(
    () => expect.fail('the call succeeded'),
    (e: unknown) => (e as { code?: string }).code,
  );

describeServer('a pipelining pool: statements sent without waiting', () => {
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 1, pipeline: true });
  const table = `cairn_pipeline_${process.pid}`;
  let db: Queryable;
  const ids = async () =>
    (await db.query<{ id: string }>(`SELECT id FROM ${table} ORDER BY id`)).rows.map((r) => r.id);

  beforeAll(async () => {
    db = poolQueryable(pool);
    await db.exec(`DROP TABLE IF EXISTS ${table}; CREATE TABLE ${table} (id text PRIMARY KEY)`);
    await db.query(`INSERT INTO ${table} VALUES ($1)`, ['taken']);
  });
  afterAll(async () => {
    await db.exec(`DROP TABLE IF EXISTS ${table}`);
    await pool.end();
  });

  it('reports a failed send, not what failed after it, and rolls the transaction back', async () => {
    const code = await failure(
      db.transaction(async (q) => {
        await q.send(`INSERT INTO ${table} VALUES ($1)`, ['a']);
        await q.send(`INSERT INTO ${table} VALUES ($1)`, ['taken']);
        // Sent before the failure is known: it fails too (the transaction is aborted).
        await q.query(`INSERT INTO ${table} VALUES ($1)`, ['b']);
      }),
    );
    expect(code).toBe('23505');
    // ... also when nothing follows but the commit.
    const atCommit = await failure(
      db.transaction((q) => q.send(`INSERT INTO ${table} VALUES ($1)`, ['taken'])),
    );
    expect(atCommit).toBe('23505');
    expect(await ids()).toEqual(['taken']);
    // The connection (the pool's only one) was left outside any transaction.
    expect((await db.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });

  it('reports a failed send within its savepoint, which the transaction survives', async () => {
    await db.transaction(async (q) => {
      await q.send(`INSERT INTO ${table} VALUES ($1)`, ['c']);
      const code = await failure(
        q.transaction((sp) => sp.send(`INSERT INTO ${table} VALUES ($1)`, ['taken'])),
      );
      expect(code).toBe('23505');
      await q.send(`INSERT INTO ${table} VALUES ($1)`, ['d']);
    });
    expect(await ids()).toEqual(['c', 'd', 'taken']);
  });

  describe('a savepoint sent with the statement after it', () => {
    /**
     * The statements sent while `fn` runs, each marked `+` when sent before the previous one
     * was answered (in the same round trip), else `*` (a round trip of its own).
     */
    const sentWhile = async (fn: () => Promise<unknown>) =>
      (await statementsSent(fn)).map((s) => `${s.pipelined ? '+' : '*'} ${s.text}`);

    it('goes out with the query that follows it, a failure in it undone alone', async () => {
      const texts = await sentWhile(() =>
        db.transaction(async (q) => {
          await q.transaction((sp) => sp.query(`INSERT INTO ${table} VALUES ($1)`, ['sp-a']));
          const code = await failure(
            q.transaction((sp) => sp.query(`INSERT INTO ${table} VALUES ($1)`, ['taken'])),
          );
          expect(code).toBe('23505');
          await q.transaction((sp) => sp.query(`INSERT INTO ${table} VALUES ($1)`, ['sp-b']));
        }),
      );
      const insert = `INSERT INTO ${table} VALUES ($1)`;
      // Each savepoint goes with the statement after it; a release waits for its statements.
      expect(texts).toEqual([
        '* BEGIN; SAVEPOINT cairn_sp_0',
        `+ ${insert}`,
        '* RELEASE SAVEPOINT cairn_sp_0; SAVEPOINT cairn_sp_0',
        `+ ${insert}`,
        '* ROLLBACK TO SAVEPOINT cairn_sp_0',
        '* RELEASE SAVEPOINT cairn_sp_0; SAVEPOINT cairn_sp_0',
        `+ ${insert}`,
        '* COMMIT',
      ]);
      expect(await ids()).toContain('sp-a');
      expect(await ids()).toContain('sp-b');
    });

    it('is rolled back to when it sent nothing yet, and the transaction goes on', async () => {
      const refused = new Error('refused before any statement');
      await db.transaction(async (q) => {
        await q.query(`INSERT INTO ${table} VALUES ($1)`, ['sp-c']);
        await expect(
          q.transaction(async () => {
            throw refused;
          }),
        ).rejects.toBe(refused);
        // Nested, the inner one failing before its first statement, the outer one after.
        await expect(
          q.transaction(async (outer) => {
            await outer.transaction(async () => {
              throw refused;
            });
          }),
        ).rejects.toBe(refused);
        await q.transaction(async (outer) => {
          await outer.query(`INSERT INTO ${table} VALUES ($1)`, ['sp-d']);
          await expect(
            outer.transaction(async (inner) => {
              await inner.query(`INSERT INTO ${table} VALUES ($1)`, ['sp-gone']);
              throw refused;
            }),
          ).rejects.toBe(refused);
        });
      });
      const found = await ids();
      expect(found).toEqual(expect.arrayContaining(['sp-c', 'sp-d']));
      expect(found).not.toContain('sp-gone');
      expect((await db.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    });
  });

  describe('notices after the commit', () => {
    const channel = `cairn_pipeline_${process.pid}`;
    const listener = new pg.Client({ connectionString: POSTGRES_URL });
    const heard: string[] = [];
    beforeAll(async () => {
      await listener.connect();
      listener.on('notification', (n) => heard.push(n.payload ?? ''));
      await listener.query(`LISTEN ${channel}`);
    });
    afterAll(() => listener.end());
    /** Waits for `payload` to arrive, past anything sent before it. */
    const marked = async (payload: string) => {
      await db.exec(`NOTIFY ${channel}, '${payload}'`);
      await expect.poll(() => heard.includes(payload), { timeout: 10_000 }).toBe(true);
    };

    it('tell nothing of a transaction a statement sent without waiting aborted', async () => {
      heard.length = 0;
      const code = await failure(
        db.transaction(async (q) => {
          await q.send(`INSERT INTO ${table} VALUES ($1)`, ['taken']);
          await q.exec(`NOTIFY ${channel}, 'rolled back'`);
        }),
      );
      expect(code).toBe('23505');
      await marked('after');
      expect(heard).toEqual(['after']);
      expect(await ids()).not.toContain('rolled back');
    });

    it('leave the write committed when the notice itself fails, the connection usable', async () => {
      heard.length = 0;
      // Over Postgres's 8,000-byte limit: the NOTIFY fails once the data committed.
      await db.transaction(async (q) => {
        await q.send(`INSERT INTO ${table} VALUES ($1)`, ['kept']);
        await q.exec(`NOTIFY ${channel}, '${'x'.repeat(9000)}'`);
      });
      expect(await ids()).toContain('kept');
      await db.transaction(async (q) => {
        await q.send(`INSERT INTO ${table} VALUES ($1)`, ['next']);
        await q.exec(`NOTIFY ${channel}, 'next'`);
      });
      expect(await ids()).toContain('next');
      await marked('after');
      expect(heard).toEqual(['next', 'after']);
    });
  });
});
