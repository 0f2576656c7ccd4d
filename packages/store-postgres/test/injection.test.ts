import { isCairnError } from '@cairn/core';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { describe, expect, it, vi } from 'vitest';
import { createPostgresStore } from '../src/index.js';
import { describeServer, dropSchema, freshSchema, POSTGRES_URL } from './support.js';

async function expectClosed(call: Promise<unknown>) {
  const error = await call.then(
    () => null,
    (e: unknown) => e,
  );
  expect(isCairnError(error, 'CLOSED'), String(error)).toBe(true);
}

describeServer('injected pg pool and client', () => {
  it('uses an injected pool and leaves it open on close()', async () => {
    const schema = freshSchema();
    const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 3 });
    try {
      const store = await createPostgresStore({ pool }, { schema });
      const t = await store.createThread({ title: 'pooled' });
      await store.close();
      await expectClosed(store.getThread(t.id));
      const r = await pool.query(`SELECT title FROM "${schema}".threads WHERE id = $1`, [t.id]);
      expect(r.rows).toEqual([{ title: 'pooled' }]);
      expect(pool.ending).toBe(false);
    } finally {
      await pool.end();
      await dropSchema(schema);
    }
  });

  it('uses an injected client for everything, LISTEN included, and leaves it connected on close()', async () => {
    const schema = freshSchema();
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    const other = await createPostgresStore({ connectionString: POSTGRES_URL }, { schema });
    try {
      const store = await createPostgresStore({ client }, { schema });
      expect(store.capabilities.notifications).toBe('cluster');
      const t = await store.createThread({});
      const heard: string[] = [];
      store.subscribe(t.id, (c) => heard.push(c.kind));
      // Concurrent calls on one connection take turns instead of interleaving.
      await Promise.all([
        store.transaction(async (tx) => {
          await tx.addMessages([{ threadId: t.id, parentId: null, role: 'user', data: 1 }]);
        }),
        store.listThreads(),
        other.updateThread(t.id, { title: 'from another store' }),
      ]);
      await vi.waitFor(() => expect(heard).toContain('thread'), { timeout: 10_000, interval: 20 });
      await store.close();
      const r = await client.query(`SELECT count(*)::int AS n FROM "${schema}".messages`);
      expect(r.rows[0].n).toBe(1);
      const listening = await client.query('SELECT pg_listening_channels() AS c');
      expect(listening.rows).toEqual([]);
    } finally {
      await other.close();
      await client.end();
      await dropSchema(schema);
    }
  });

  it('closes the pool it opened itself: close() ends its connections', async () => {
    const schema = freshSchema();
    const store = await createPostgresStore(
      { connectionString: POSTGRES_URL },
      { schema, maxConnections: 2 },
    );
    const marker = `cairn-close-${schema}`;
    await store.createThread({ title: marker });
    await store.close();
    await store.close();
    await expectClosed(store.listThreads());
    await dropSchema(schema);
  });
});

describe('injected PGlite', () => {
  it('leaves the PGlite instance open on close()', async () => {
    const db = new PGlite();
    try {
      const store = await createPostgresStore({ client: db }, { schema: 'app_one' });
      expect(store.capabilities).toEqual({
        vectorSearch: 'exact',
        notifications: 'process',
        multiProcess: false,
        durable: false,
        concurrentTransactions: false,
      });
      const t = await store.createThread({ title: 'local' });
      await store.close();
      expect(db.closed).toBe(false);
      const r = await db.query<{ title: string }>(
        'SELECT title FROM app_one.threads WHERE id = $1',
        [t.id],
      );
      expect(r.rows).toEqual([{ title: 'local' }]);
      // Two stores on one instance and schema hear each other's changes; closing one
      // leaves the other's listeners alone.
      const a = await createPostgresStore({ client: db }, { schema: 'app_one' });
      const b = await createPostgresStore({ client: db }, { schema: 'app_one' });
      const heard: string[] = [];
      b.subscribe(t.id, (c) => heard.push(`b:${c.kind}`));
      a.subscribe(t.id, (c) => heard.push(`a:${c.kind}`));
      await a.updateThread(t.id, { title: 'renamed' });
      expect(heard.sort()).toEqual(['a:thread', 'b:thread']);
      await a.close();
      await b.updateThread(t.id, { title: 'again' });
      expect(heard.sort()).toEqual(['a:thread', 'b:thread', 'b:thread']);
      await b.close();
      // A second application on the same database, in its own schema, sees none of it.
      const second = await createPostgresStore({ client: db }, { schema: 'app_two' });
      expect((await second.listThreads()).items).toEqual([]);
      await second.close();
    } finally {
      await db.close();
    }
  });
});
