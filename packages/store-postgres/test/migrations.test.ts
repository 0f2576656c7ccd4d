import { isCairnError, type JsonValue, type StateCommit } from '@cairn/core';
import type { Store } from '@cairn/store';
import { backfillJumps } from '@cairn/store/adapter';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresStore, SCHEMA_VERSION } from '../src/index.js';
import { ident } from '../src/migrations.js';
import { type Queryable, sessionQueryable } from '../src/queryable.js';
import { SEGMENT_COMMITS } from '../src/state-log.js';
import { runFixture } from './processes.js';
import {
  describeServer,
  dropSchema,
  freshSchema,
  POSTGRES_URL,
  schemaBefore,
  withClient,
} from './support.js';

async function expectSchemaTooNew(open: Promise<unknown>) {
  const error = await open.then(
    () => null,
    (e: unknown) => e,
  );
  expect(isCairnError(error, 'SCHEMA_TOO_NEW'), String(error)).toBe(true);
  expect((error as Error).message).toMatch(String(SCHEMA_VERSION + 1));
}

/** Message data of every kind, some long enough for Postgres to compress and move out of line. */
function oldData(i: number): JsonValue {
  switch (i % 6) {
    case 0:
      return `message ${i}: café, 日本語, 🎉, "quotes" and \\ backslashes`;
    case 1:
      return {
        lc: 1,
        type: 'constructor',
        id: ['langchain_core', 'messages', 'AIMessage'],
        kwargs: { content: `reply ${i}`, tool_calls: [], additional_kwargs: {}, zeta: i, a: null },
      };
    case 2:
      return i % 4 === 0 ? i * 1.5 : -i;
    case 3:
      return [true, false, null, { nested: { deeper: [i, `x${i}`] } }];
    case 4:
      return i % 12 === 4 ? null : i % 12 === 10;
    default:
      return { text: `long ${i} `.repeat(1200), words: `w${i}`.repeat(900) };
  }
}

/**
 * A thread of `n` messages (a chain with a fork at 10) stored as they were before
 * "message data packed", in a schema at that version: data as jsonb.
 */
async function messagesBeforePacking(q: Queryable, schema: string, n: number) {
  await schemaBefore(q, schema, 'message data packed');
  const s = ident(schema);
  await q.query(
    `INSERT INTO ${s}.threads (id, metadata, created_at, updated_at) VALUES ('t', '{}', 0, 0)`,
  );
  const rows = Array.from({ length: n }, (_, i) => {
    const parentId = i === 0 ? null : i === 20 ? 'm0010' : `m${String(i - 1).padStart(4, '0')}`;
    return {
      id: `m${String(i).padStart(4, '0')}`,
      parentId,
      depth: i < 20 ? i : i - 9,
      data: oldData(i),
    };
  });
  const jumps = backfillJumps(rows);
  await q.query(
    `INSERT INTO ${s}.messages (id, thread_id, parent_id, role, type, data, created_at, depth, jump_id, jump_depth)
     SELECT id, 't', parent_id, 'user', NULL, data::jsonb, 1, depth, jump_id, jump_depth
     FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::int[])
       AS u(id, parent_id, data, depth, jump_id, jump_depth)`,
    [
      rows.map((r) => r.id),
      rows.map((r) => r.parentId),
      rows.map((r) => JSON.stringify(r.data)),
      rows.map((r) => r.depth),
      rows.map((r) => jumps.get(r.id)!.jumpId),
      rows.map((r) => jumps.get(r.id)!.jumpDepth),
    ],
  );
  // What the store read back before packing: the values as jsonb returns them.
  const stored = await q.query<{ id: string; data: JsonValue }>(
    `SELECT id, data FROM ${s}.messages ORDER BY id`,
  );
  return stored.rows;
}

/**
 * Opens a store on the schema `messagesBeforePacking` filled: every message reads back as it
 * did (they stay jsonb), and new ones are packed or not by size.
 */
async function expectPackedOnOpen(
  q: Queryable,
  schema: string,
  open: () => Promise<Store>,
): Promise<void> {
  const before = await messagesBeforePacking(q, schema, 2500);
  const store = await open();
  // Equal, key order included: each reads back as it did before.
  const json = (ms: Array<{ id: string; data: JsonValue }>) =>
    new Map(ms.map((m) => [m.id, JSON.stringify(m.data)]));
  const stored = json(before);
  expect(json((await store.exportThread('t'))!.messages)).toEqual(stored);
  expect([...stored.values()].some((d) => d.length > 10_000)).toBe(true);
  const chain = await store.getChain('m2499');
  expect(chain.map((m) => m.id)).toEqual(
    before.map((m) => m.id).filter((id) => id <= 'm0010' || id >= 'm0020'),
  );
  for (const m of chain) expect(JSON.stringify(m.data)).toBe(stored.get(m.id));
  expect((await store.getMessage('m0005'))?.data).toEqual(oldData(5));
  // New data: packed from PACK_FROM characters of JSON, jsonb below; both read back.
  const long = { text: 'a chat message of a few hundred characters, '.repeat(8) };
  const added = await store.addMessages([
    { threadId: 't', parentId: 'm2499', role: 'user', data: { after: 'packing' } },
    { threadId: 't', parentId: null, role: 'user', data: long },
  ]);
  for (const [m, data] of [
    [added[0]!, { after: 'packing' }],
    [added[1]!, long],
  ] as const)
    expect((await store.getMessage(m.id))?.data).toEqual(data);
  const packed = await q.query<{ id: string; jsonb: boolean; packed: boolean }>(
    `SELECT id, data IS NOT NULL AS jsonb, packed IS NOT NULL AS packed FROM ${ident(schema)}.messages
     WHERE id = ANY($1) OR packed IS NOT NULL ORDER BY packed`,
    [added.map((m) => m.id)],
  );
  expect(packed.rows).toEqual([
    { id: added[0]!.id, jsonb: true, packed: false },
    { id: added[1]!.id, jsonb: false, packed: true },
  ]);
  await store.close();
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

  it('reads the messages stored before packing as they were, and packs new ones by size', async () => {
    const s = schema();
    await withClient((client) =>
      expectPackedOnOpen(sessionQueryable(client), s, () =>
        createPostgresStore({ connectionString: POSTGRES_URL }, { schema: s }),
      ),
    );
  }, 60_000);

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
    // A chain of 300 with a fork at 100, stored with jump pointers by the current code...
    const current = freshSchema();
    const store = await createPostgresStore({ client: db }, { schema: current });
    const t = await store.createThread({});
    await store.addMessages(
      Array.from({ length: 360 }, (_, i) => ({
        id: `m${i}`,
        threadId: t.id,
        parentId: i === 0 ? null : i === 300 ? 'm100' : `m${i - 1}`,
        role: 'user',
        data: i,
      })),
    );
    await store.close();
    const jumps = async (s: string) =>
      (
        await db.query<{ id: string; jump_id: string | null; jump_depth: number }>(
          `SELECT id, jump_id, jump_depth FROM "${s}".messages ORDER BY id`,
        )
      ).rows;
    const planned = await jumps(current);
    // ...and the same messages in a schema from before them: the migration fills them in.
    const s = freshSchema();
    await schemaBefore(sessionQueryable(db), s, 'message jump pointers');
    await db.exec(`INSERT INTO "${s}".threads (id, metadata, created_at, updated_at)
        SELECT id, metadata, created_at, updated_at FROM "${current}".threads;
      INSERT INTO "${s}".messages (id, thread_id, parent_id, role, data, created_at, depth)
        SELECT id, thread_id, parent_id, role, to_jsonb(depth), created_at, depth FROM "${current}".messages`);
    const analyzed = async () =>
      (
        await db.query<{ n: number }>(
          `SELECT reltuples::int AS n FROM pg_class WHERE oid = '"${s}".messages'::regclass`,
        )
      ).rows[0]!.n;
    expect(await analyzed()).toBe(-1); // never analyzed
    const migrated = await createPostgresStore({ client: db }, { schema: s });
    // The rewritten table is analyzed: no plan works from no statistics after the rewrite.
    expect(await analyzed()).toBe(360);
    expect(await jumps(s)).toEqual(planned);
    expect(new Set(planned.map((r) => r.jump_id)).size).toBeGreaterThan(50);
    expect(await migrated.isAncestor('m100', 'm359')).toBe(true);
    expect(await migrated.isAncestor('m101', 'm359')).toBe(false);
    await migrated.close();
  });

  it('gives memories stored before versions their own lineage, open and current', async () => {
    const s = freshSchema();
    await schemaBefore(sessionQueryable(db), s, 'memory versions, validity and source');
    await db.exec(`INSERT INTO "${s}".memories (id, type, agent_id, scope, content, metadata, content_hash, created_at, search, search_len)
      VALUES ('old', 'custom', 'a', 'private', '{"text":"Ada lives in Paris"}', '{}', 'h', 5, 'ada:1 lives:2 paris:3', 3)`);
    const store = await createPostgresStore({ client: db }, { schema: s });
    expect(await store.getMemory('old')).toMatchObject({
      createdAt: 5,
      validFrom: null,
      validTo: null,
      supersededAt: null,
      supersedes: null,
      lineageId: 'old',
      source: null,
    });
    const next = await store.supersedeMemory('old', {
      content: { text: 'Ada lives in Berlin' },
      validFrom: 10,
    });
    expect(
      (await store.listMemories({ lineageIds: ['old'] }, { order: 'oldest' })).map((m) => m.id),
    ).toEqual(['old', next.id]);
    expect((await store.listMemories({ validAt: 9 })).map((m) => m.id)).toEqual(['old']);
    await store.close();
  });

  it('reads the messages stored before packing as they were, and packs new ones by size', async () => {
    const s = freshSchema();
    await expectPackedOnOpen(sessionQueryable(db), s, () =>
      createPostgresStore({ client: db }, { schema: s }),
    );
  });

  it('packs the state commits stored one per row into segments, each read back as it was', async () => {
    const s = freshSchema();
    await schemaBefore(sessionQueryable(db), s, 'state log in packed segments');
    await db.exec(`INSERT INTO "${s}".threads (id, metadata, created_at, updated_at) VALUES ('t', '{}', 0, 0);
      INSERT INTO "${s}".messages (id, thread_id, role, data, created_at, depth) VALUES ('m0', 't', 'user', '0', 0, 0);
      INSERT INTO "${s}".branches (id, thread_id, name, is_active, created_at) VALUES
        ('b1', 't', 'main', true, 0), ('b2', 't', 'other', false, 0), ('b3', 't', 'none', false, 0)`);
    // b1: 600 commits (several segments), every 50th with a snapshot, some at message m0; b2: one.
    const stored: StateCommit[] = [];
    for (let v = 1; v <= 600; v++) {
      stored.push({
        branchId: 'b1',
        threadId: 't',
        version: v,
        messageId: v % 3 === 0 ? 'm0' : null,
        messageDepth: v % 3 === 0 ? 0 : null,
        update: { step: v, note: `update ${v} of branch b1`, nested: { list: [v, null, 'x'] } },
        snapshot: v % 50 === 0 ? { total: v } : null,
        createdAt: 1_700_000_000_000 + v,
      });
    }
    stored.push({ ...stored[0]!, branchId: 'b2', update: { only: true } });
    await db.query(
      `INSERT INTO "${s}".state_commits (branch_id, thread_id, version, message_id, message_depth, "update", snapshot, created_at)
       SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::int[], $6::jsonb[], $7::jsonb[], $8::float8[])`,
      [
        stored.map((c) => c.branchId),
        stored.map((c) => c.threadId),
        stored.map((c) => c.version),
        stored.map((c) => c.messageId),
        stored.map((c) => c.messageDepth),
        stored.map((c) => JSON.stringify(c.update)),
        stored.map((c) => (c.snapshot === null ? null : JSON.stringify(c.snapshot))),
        stored.map((c) => c.createdAt),
      ],
    );
    const store = await createPostgresStore({ client: db }, { schema: s });
    const b1 = stored.filter((c) => c.branchId === 'b1');
    expect(await store.getStateCommits('b1')).toEqual(b1);
    expect(await store.getStateCommits('b2')).toEqual(stored.filter((c) => c.branchId === 'b2'));
    expect(await store.getStateCommits('b3')).toEqual([]);
    expect(await store.getStateCommits('b1', { fromVersion: 250, toVersion: 270 })).toEqual(
      b1.slice(249, 270),
    );
    expect(await store.getLatestStateCommit('b1', { withSnapshot: true, maxVersion: 549 })).toEqual(
      b1[499],
    );
    const segments = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${s}".state_segments WHERE branch_id = 'b1'`,
    );
    // Sealed when full by count (these commits are small); the rest is the tail.
    expect(segments.rows[0]!.n).toBe(Math.floor(b1.length / SEGMENT_COMMITS));
    const tables = await db.query(
      `SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'state_commits'`,
      [s],
    );
    expect(tables.rows).toEqual([]);
    // The log goes on where it was.
    const next = await store.appendStateCommit(
      { branchId: 'b1', messageId: null, update: { step: 601 } },
      600,
    );
    expect(next.version).toBe(601);
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
