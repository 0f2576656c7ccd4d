import { isCairnError } from '@cairn/core';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresStore, SCHEMA_VERSION } from '../src/index.js';
import { runFixture } from './processes.js';
import { describeServer, dropSchema, freshSchema, POSTGRES_URL, withClient } from './support.js';

async function expectSchemaTooNew(open: Promise<unknown>) {
  const error = await open.then(
    () => null,
    (e: unknown) => e,
  );
  expect(isCairnError(error, 'SCHEMA_TOO_NEW'), String(error)).toBe(true);
  expect((error as Error).message).toMatch(String(SCHEMA_VERSION + 1));
}

describeServer('migrations on the server', () => {
  const schemas: string[] = [];
  const schema = () => {
    const s = freshSchema('cairn_mig');
    schemas.push(s);
    return s;
  };
  afterAll(async () => {
    for (const s of schemas) await dropSchema(s);
  });

  it('migrates once when three processes and three stores open a new schema at the same moment', async () => {
    const s = schema();
    const inProcess = Array.from({ length: 3 }, () =>
      createPostgresStore({ connectionString: POSTGRES_URL }, { schema: s }),
    );
    const children = Array.from({ length: 3 }, () =>
      runFixture('open-store.mjs', [POSTGRES_URL, s]),
    );
    const [stores, outputs] = await Promise.all([Promise.all(inProcess), Promise.all(children)]);
    expect(outputs).toEqual(['migrated', 'migrated', 'migrated']);
    const recorded = await withClient((c) =>
      c.query(`SELECT version FROM "${s}".cairn_migrations ORDER BY version`),
    );
    expect(recorded.rows.map((r) => r.version)).toEqual(
      Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1),
    );
    // Every store works on the one schema.
    const thread = await stores[0]!.createThread({});
    expect(await stores[2]!.getThread(thread.id)).toEqual(thread);
    await Promise.all(stores.map((st) => st.migrate()));
    for (const st of stores) await st.close();
  }, 60_000);

  it('refuses a database migrated by a newer version (SCHEMA_TOO_NEW), on open and on migrate()', async () => {
    const s = schema();
    const store = await createPostgresStore({ connectionString: POSTGRES_URL }, { schema: s });
    await withClient((c) =>
      c.query(
        `INSERT INTO "${s}".cairn_migrations (version, name, applied_at) VALUES ($1, 'from the future', 0)`,
        [SCHEMA_VERSION + 1],
      ),
    );
    await expectSchemaTooNew(store.migrate());
    await expectSchemaTooNew(
      createPostgresStore({ connectionString: POSTGRES_URL }, { schema: s }),
    );
    await store.close();
  });

  it('quotes every identifier: a schema name with quotes and spaces works', async () => {
    const s = `${schema()} "odd" Name`;
    schemas.push(s);
    const store = await createPostgresStore({ connectionString: POSTGRES_URL }, { schema: s });
    const t = await store.createThread({ title: "it's; DROP TABLE x --" });
    expect((await store.getThread(t.id))?.title).toBe("it's; DROP TABLE x --");
    await store.close();
    const found = await withClient((c) =>
      c.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [s]),
    );
    expect(found.rowCount).toBe(1);
  });
});

describe('migrations on PGlite', () => {
  let db: PGlite;
  beforeAll(async () => {
    db = await PGlite.create();
  });
  afterAll(() => db.close());

  it('records each migration once and is idempotent', async () => {
    const s = freshSchema();
    const stores = await Promise.all(
      [0, 1, 2].map(() => createPostgresStore({ client: db }, { schema: s })),
    );
    await stores[0]!.migrate();
    const r = await db.query<{ version: number }>(
      `SELECT version FROM "${s}".cairn_migrations ORDER BY version`,
    );
    expect(r.rows.map((row) => row.version)).toEqual(
      Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1),
    );
    for (const st of stores) await st.close();
  });

  it('gives messages stored before jump pointers the ones new messages get', async () => {
    const s = freshSchema();
    const store = await createPostgresStore({ client: db }, { schema: s });
    const t = await store.createThread({});
    // A chain of 300 with a fork at 100, stored with jump pointers by the current code.
    await store.addMessages(
      Array.from({ length: 360 }, (_, i) => ({
        id: `m${i}`,
        threadId: t.id,
        parentId: i === 0 ? null : i === 300 ? 'm100' : `m${i - 1}`,
        role: 'user',
        data: i,
      })),
    );
    const jumps = async () =>
      (
        await db.query<{ id: string; jump_id: string | null; jump_depth: number }>(
          `SELECT id, jump_id, jump_depth FROM "${s}".messages ORDER BY id`,
        )
      ).rows;
    const planned = await jumps();
    // Back to the schema before them, then up again: the migration fills them in.
    await db.exec(`ALTER TABLE "${s}".messages DROP COLUMN jump_id, DROP COLUMN jump_depth;
      DELETE FROM "${s}".cairn_migrations WHERE version = ${SCHEMA_VERSION}`);
    await store.migrate();
    expect(await jumps()).toEqual(planned);
    expect(new Set(planned.map((r) => r.jump_id)).size).toBeGreaterThan(50);
    expect(await store.isAncestor('m100', 'm359')).toBe(true);
    expect(await store.isAncestor('m101', 'm359')).toBe(false);
    await store.close();
  });

  it('refuses a newer schema (SCHEMA_TOO_NEW)', async () => {
    const s = freshSchema();
    const store = await createPostgresStore({ client: db }, { schema: s });
    await store.close();
    await db.query(
      `INSERT INTO "${s}".cairn_migrations (version, name, applied_at) VALUES ($1, 'future', 0)`,
      [SCHEMA_VERSION + 1],
    );
    await expectSchemaTooNew(createPostgresStore({ client: db }, { schema: s }));
  });

  it('without pgvector falls back to the exact scan and says so', async () => {
    const store = await createPostgresStore({ client: db }, { schema: freshSchema() });
    expect(store.capabilities.vectorSearch).toBe('exact');
    await store.addMemories([
      { agentId: 'a', content: { text: 'x' }, embedding: [1, 0] },
      { agentId: 'a', content: { text: 'y' }, embedding: [0, 1] },
    ]);
    const hits = await store.searchMemories({ vector: [0.1, 1], limit: 1 });
    expect(hits.map((h) => h.memory.content.text)).toEqual(['y']);
    await store.close();
  });

  it.each([
    ['an empty schema', { schema: '' }],
    ['a schema name over 63 bytes', { schema: 'x'.repeat(64) }],
    ['an unknown vectorSearch mode', { vectorSearch: 'fast' as never }],
  ])('rejects %s (INVALID_ARGUMENT)', async (_label, options) => {
    const error = await createPostgresStore(
      { client: db },
      { schema: freshSchema(), ...options },
    ).then(
      () => null,
      (e: unknown) => e,
    );
    expect(isCairnError(error, 'INVALID_ARGUMENT'), String(error)).toBe(true);
  });
});
