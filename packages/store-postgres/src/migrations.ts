import { backfillJumps, schemaTooNew } from '@cairn/store/adapter';
import { searchVector } from './keyword-index.js';
import { packJson } from './packed.js';
import type { Queryable } from './queryable.js';

/** A double-quoted SQL identifier. */
export function ident(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** A string literal, read the same whatever `standard_conforming_strings` says. */
export function literal(text: string): string {
  return `E'${text.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

/**
 * The schema's migrations, append-only: the position in the list is the version. Each
 * gets the quoted schema name; `run`, when present, follows the SQL (work SQL cannot do).
 * Never edit one that has shipped; add the next instead.
 */
export const MIGRATIONS: ReadonlyArray<{
  name: string;
  sql: (s: string) => string;
  run?: (q: Queryable, s: string) => Promise<void>;
}> = [
  {
    name: 'initial schema',
    sql: (s) => `
CREATE TABLE ${s}.threads (
  id text PRIMARY KEY,
  resource_id text,
  title text,
  metadata jsonb NOT NULL,
  created_at double precision NOT NULL,
  updated_at double precision NOT NULL,
  seq bigserial NOT NULL UNIQUE
);
CREATE INDEX threads_by_resource ON ${s}.threads (resource_id, seq);

CREATE TABLE ${s}.messages (
  id text PRIMARY KEY,
  thread_id text NOT NULL REFERENCES ${s}.threads (id) ON DELETE CASCADE,
  parent_id text,
  role text NOT NULL,
  type text,
  data jsonb NOT NULL,
  created_at double precision NOT NULL,
  depth integer NOT NULL
);
CREATE INDEX messages_by_thread ON ${s}.messages (thread_id);

CREATE TABLE ${s}.branches (
  id text PRIMARY KEY,
  thread_id text NOT NULL REFERENCES ${s}.threads (id) ON DELETE CASCADE,
  name text NOT NULL,
  head_message_id text,
  is_active boolean NOT NULL,
  created_at double precision NOT NULL,
  fork_message_id text,
  parent_branch_id text,
  seq bigserial NOT NULL,
  UNIQUE (thread_id, name)
);
CREATE UNIQUE INDEX branches_one_active ON ${s}.branches (thread_id) WHERE is_active;

CREATE TABLE ${s}.checkpoints (
  id text PRIMARY KEY,
  thread_id text NOT NULL REFERENCES ${s}.threads (id) ON DELETE CASCADE,
  name text NOT NULL,
  message_id text NOT NULL,
  created_at double precision NOT NULL,
  seq bigserial NOT NULL,
  UNIQUE (thread_id, name)
);

CREATE TABLE ${s}.state_commits (
  branch_id text NOT NULL REFERENCES ${s}.branches (id) ON DELETE CASCADE,
  thread_id text NOT NULL,
  version integer NOT NULL,
  message_id text,
  message_depth integer,
  "update" jsonb NOT NULL,
  snapshot jsonb,
  created_at double precision NOT NULL,
  PRIMARY KEY (branch_id, version)
);

CREATE TABLE ${s}.turns (
  id text PRIMARY KEY,
  thread_id text NOT NULL,
  message_id text,
  source text,
  user_id text,
  status text NOT NULL,
  state jsonb NOT NULL,
  steps jsonb NOT NULL,
  started_at double precision NOT NULL,
  finished_at double precision
);
CREATE INDEX turns_by_thread ON ${s}.turns (thread_id, started_at DESC);

CREATE TABLE ${s}.leases (
  key text PRIMARY KEY,
  owner text NOT NULL,
  acquired_at double precision NOT NULL,
  renewed_at double precision NOT NULL,
  expires_at double precision NOT NULL,
  released_at double precision,
  data jsonb NOT NULL
);

CREATE TABLE ${s}.memories (
  id text PRIMARY KEY,
  type text NOT NULL,
  agent_id text NOT NULL,
  entity_id text,
  room_id text,
  world_id text,
  scope text NOT NULL,
  content jsonb NOT NULL,
  metadata jsonb NOT NULL,
  content_hash text NOT NULL,
  embedding double precision[],
  embedding_norm double precision,
  search tsvector NOT NULL,
  created_at double precision NOT NULL,
  seq bigserial NOT NULL
);
CREATE INDEX memories_by_agent ON ${s}.memories (agent_id);
CREATE INDEX memories_by_room ON ${s}.memories (room_id);
CREATE INDEX memories_by_world ON ${s}.memories (world_id);
CREATE INDEX memories_by_hash ON ${s}.memories (content_hash);
CREATE INDEX memories_by_created ON ${s}.memories (created_at, seq);
CREATE INDEX memories_search ON ${s}.memories USING gin (search);

CREATE TABLE ${s}.embedding_space (
  one boolean PRIMARY KEY DEFAULT true CHECK (one),
  embedder_id text,
  dimensions integer NOT NULL
);

CREATE TABLE ${s}.embedding_cache (
  embedder_id text NOT NULL,
  content_hash text NOT NULL,
  embedding double precision[] NOT NULL,
  PRIMARY KEY (embedder_id, content_hash)
);
`,
  },
  {
    // A message batch locks its threads once instead of checking a key per row; the
    // thread's deletion removes its messages itself.
    name: 'messages without a per-row foreign key to threads',
    sql: (s) => `ALTER TABLE ${s}.messages DROP CONSTRAINT IF EXISTS messages_thread_id_fkey;`,
  },
  {
    // Keyword search tokenizes as every other store does (no stemming, no stop words of
    // Postgres's own) and ranks by BM25, which needs each memory's token count.
    name: 'keyword index from the shared tokenizer, with token counts for BM25',
    sql: (s) => `ALTER TABLE ${s}.memories ADD COLUMN search_len integer NOT NULL DEFAULT 0;
CREATE INDEX memories_search_len ON ${s}.memories (search_len);`,
    run: reindexKeywords,
  },
  {
    // An ancestor at any depth is O(log depth) jumps away, whatever the chain's length.
    name: 'message jump pointers',
    sql: (s) => `ALTER TABLE ${s}.messages ADD COLUMN jump_id text;
ALTER TABLE ${s}.messages ADD COLUMN jump_depth integer NOT NULL DEFAULT 0;`,
    run: backfillMessageJumps,
  },
  {
    // A chat message's few hundred bytes of JSON, which Postgres never compresses, take
    // about half the room packed (`packJson`). Rows are packed into `packed` with their
    // jsonb cleared in the same update, so the old values leave nothing behind for VACUUM
    // to keep; `run` then puts the packed column in the old one's place.
    name: 'message data packed',
    sql: (s) => `ALTER TABLE ${s}.messages ADD COLUMN packed bytea;
ALTER TABLE ${s}.messages ALTER COLUMN data DROP NOT NULL;`,
    run: packMessageData,
  },
];

/** Gives every stored message its jump pointer, a thread at a time. */
async function backfillMessageJumps(q: Queryable, s: string): Promise<void> {
  const threads = await q.query<{ t: string }>(`SELECT DISTINCT thread_id AS t FROM ${s}.messages`);
  for (const { t } of threads.rows) {
    const { rows } = await q.query<{ id: string; parentId: string | null; depth: number }>(
      `SELECT id, parent_id AS "parentId", depth FROM ${s}.messages WHERE thread_id = $1 ORDER BY depth`,
      [t],
    );
    const jumps = [...backfillJumps(rows)];
    await q.query(
      `UPDATE ${s}.messages m SET jump_id = u.jump_id, jump_depth = u.jump_depth
       FROM unnest($1::text[], $2::text[], $3::int[]) AS u(id, jump_id, jump_depth) WHERE m.id = u.id`,
      [jumps.map(([id]) => id), jumps.map(([, j]) => j.jumpId), jumps.map(([, j]) => j.jumpDepth)],
    );
  }
}

/** Packs every message's data, in batches of a thousand by id (the primary key's order). */
async function packMessageData(q: Queryable, s: string): Promise<void> {
  for (let after = ''; ; ) {
    const { rows } = await q.query<{ id: string; data: string }>(
      `SELECT id, data::text AS data FROM ${s}.messages WHERE id > $1 ORDER BY id LIMIT 1000`,
      [after],
    );
    if (rows.length === 0) break;
    await q.query(
      `UPDATE ${s}.messages m SET packed = u.packed, data = NULL
       FROM unnest($1::text[], $2::bytea[]) AS u(id, packed) WHERE m.id = u.id`,
      [rows.map((r) => r.id), rows.map((r) => packJson(JSON.parse(r.data)))],
    );
    after = rows[rows.length - 1]!.id;
  }
  await q.exec(`ALTER TABLE ${s}.messages DROP COLUMN data;
ALTER TABLE ${s}.messages RENAME COLUMN packed TO data;
ALTER TABLE ${s}.messages ALTER COLUMN data SET NOT NULL;`);
}

/** Rebuilds every memory's keyword index, in batches of a thousand. */
async function reindexKeywords(q: Queryable, s: string): Promise<void> {
  for (let after = -1; ; ) {
    const { rows } = await q.query<{ seq: string | number; text: string }>(
      `SELECT seq, content->>'text' AS text FROM ${s}.memories WHERE seq > $1 ORDER BY seq LIMIT 1000`,
      [after],
    );
    if (rows.length === 0) return;
    const indexed = rows.map((r) => searchVector(r.text));
    await q.query(
      `UPDATE ${s}.memories m SET search = u.search::tsvector, search_len = u.len
       FROM unnest($1::bigint[], $2::text[], $3::int[]) AS u(seq, search, len) WHERE m.seq = u.seq`,
      [rows.map((r) => r.seq), indexed.map((x) => x.vector), indexed.map((x) => x.length)],
    );
    after = Number(rows[rows.length - 1]!.seq);
  }
}

export const LATEST_VERSION = MIGRATIONS.length;

/** The pgvector details the store needs: where the extension lives. */
export interface VectorSupport {
  /** The quoted schema holding pgvector's type and operators. */
  schema: string;
}

/**
 * Brings the schema up to date inside one transaction holding an advisory lock keyed
 * on the schema name, so stores opening at once in several processes take turns and
 * each migration runs exactly once. Refuses (SCHEMA_TOO_NEW) a database that recorded
 * a version this code does not know. Also tries to create pgvector (when `tryVector`)
 * and returns where it is, or null.
 */
export async function migrate(
  db: Queryable,
  schema: string,
  tryVector: boolean,
): Promise<VectorSupport | null> {
  const s = ident(schema);
  return db.transaction(async (q) => {
    await q.query(`SELECT pg_advisory_xact_lock(2061751913, hashtext($1))`, [schema]);
    await q.exec(`CREATE SCHEMA IF NOT EXISTS ${s};
CREATE TABLE IF NOT EXISTS ${s}.cairn_migrations (
  version integer PRIMARY KEY,
  name text NOT NULL,
  applied_at double precision NOT NULL
);`);
    const { rows } = await q.query<{ v: number | null }>(
      `SELECT max(version) AS v FROM ${s}.cairn_migrations`,
    );
    const current = rows[0]?.v ?? 0;
    if (current > LATEST_VERSION)
      throw schemaTooNew(`schema ${s}`, current, LATEST_VERSION, '@cairn/store-postgres');
    for (let v = current + 1; v <= LATEST_VERSION; v++) {
      const m = MIGRATIONS[v - 1]!;
      await q.exec(m.sql(s));
      await m.run?.(q, s);
      await q.query(
        `INSERT INTO ${s}.cairn_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
        [v, m.name, Date.now()],
      );
    }
    if (tryVector) {
      // The extension is database-wide and may be missing from the server: try it in a
      // savepoint so a failure leaves the migration transaction usable.
      await q
        .transaction((sp) => sp.exec('CREATE EXTENSION IF NOT EXISTS vector'))
        .catch(() => undefined);
    }
    const ext = await q.query<{ nspname: string }>(
      `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'`,
    );
    const found = ext.rows[0];
    return found ? { schema: ident(found.nspname) } : null;
  });
}
