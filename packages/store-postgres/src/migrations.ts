import type { StateCommit } from '@cairn/core';
import { backfillJumps, SqlTable, schemaTooNew } from '@cairn/store/adapter';
import { searchVector } from './keyword-index.js';
import type { Queryable } from './queryable.js';
import { segmentsOf } from './state-log.js';

/** A row of `state_commits`, the table of one row per commit that schema version 6 packed. */
const OLD_COMMIT = new SqlTable<StateCommit>(
  'state_commits',
  'branchId threadId version messageId messageDepth update* snapshot* createdAt',
  { jsonText: false },
);

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
  /** The tables `run` fills or rewrites: analyzed after it, so no plan works from stale statistics. */
  rewrites?: string[];
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
    rewrites: ['memories'],
  },
  {
    // An ancestor at any depth is O(log depth) jumps away, whatever the chain's length.
    name: 'message jump pointers',
    sql: (s) => `ALTER TABLE ${s}.messages ADD COLUMN jump_id text;
ALTER TABLE ${s}.messages ADD COLUMN jump_depth integer NOT NULL DEFAULT 0;`,
    run: backfillMessageJumps,
    rewrites: ['messages'],
  },
  {
    // Message data goes packed into `packed` instead of `data` when `storedData` says so
    // (rows.ts). Stored rows stay as they are.
    name: 'message data packed',
    sql: (s) => `ALTER TABLE ${s}.messages ADD COLUMN packed bytea;
ALTER TABLE ${s}.messages ALTER COLUMN data DROP NOT NULL;`,
  },
  {
    // A branch's state log in packed segments of consecutive commits (state-log.ts): the
    // sealed ones, and each branch's newest (its tail), the one appends rewrite: inserts
    // leave half of a tail's page free for those rewrites to stay in it.
    name: 'state log in packed segments',
    sql: (s) => `CREATE TABLE ${s}.state_segments (
  branch_id text NOT NULL REFERENCES ${s}.branches (id) ON DELETE CASCADE,
  first_version integer NOT NULL,
  last_version integer NOT NULL,
  thread_id text NOT NULL,
  has_snapshot boolean NOT NULL,
  min_depth integer NOT NULL,
  commits bytea NOT NULL,
  PRIMARY KEY (branch_id, first_version)
);
CREATE TABLE ${s}.state_tail (
  branch_id text PRIMARY KEY REFERENCES ${s}.branches (id) ON DELETE CASCADE,
  first_version integer NOT NULL,
  last_version integer NOT NULL,
  thread_id text NOT NULL,
  has_snapshot boolean NOT NULL,
  min_depth integer NOT NULL,
  commits bytea NOT NULL
) WITH (fillfactor = 50);`,
    run: packStateCommits,
    rewrites: ['state_segments', 'state_tail'],
  },
  {
    // JSON documents in named collections (a server's runs, their queue and events). Ids
    // collate in binary order, so listing by id walks the index as every store orders it.
    name: 'entries',
    sql: (s) => `CREATE TABLE ${s}.entries (
  collection text COLLATE "C" NOT NULL,
  id text COLLATE "C" NOT NULL,
  group_id text COLLATE "C",
  data jsonb NOT NULL,
  version integer NOT NULL,
  created_at double precision NOT NULL,
  updated_at double precision NOT NULL,
  PRIMARY KEY (collection, id)
);
CREATE INDEX entries_by_group ON ${s}.entries (collection, group_id, id);`,
  },
  {
    // Store.forget: tombstones of forgotten resources, entities, worlds, threads and
    // branches (ids only, kept for good); an entity's memories found without a scan; a
    // content hash's cached embeddings of every embedder found by the hash alone.
    name: 'tombstones',
    sql: (s) => `CREATE TABLE ${s}.tombstones (
  kind text COLLATE "C" NOT NULL,
  key text COLLATE "C" NOT NULL,
  at double precision NOT NULL,
  PRIMARY KEY (kind, key)
);
CREATE INDEX memories_by_entity ON ${s}.memories (entity_id);
CREATE INDEX embedding_cache_by_hash ON ${s}.embedding_cache (content_hash);`,
  },
  {
    // Two times per memory: event time (valid_from, valid_to) and system time (created_at to
    // superseded_at); a fact's versions share lineage_id (a first version's own id), found
    // by index; source names the messages a memory was learned from.
    name: 'memory versions, validity and source',
    sql: (s) => `ALTER TABLE ${s}.memories ADD COLUMN valid_from double precision,
  ADD COLUMN valid_to double precision,
  ADD COLUMN superseded_at double precision,
  ADD COLUMN supersedes text,
  ADD COLUMN lineage_id text,
  ADD COLUMN source jsonb;
UPDATE ${s}.memories SET lineage_id = id;
ALTER TABLE ${s}.memories ALTER COLUMN lineage_id SET NOT NULL;
CREATE INDEX memories_by_lineage ON ${s}.memories (lineage_id, created_at, seq);`,
  },
  {
    // Each lease's queue of waiting acquisitions, so a freed lease goes to the waiters of
    // every process in the order they asked.
    name: 'lease waiters',
    sql: (s) => `ALTER TABLE ${s}.leases ADD COLUMN waiters jsonb NOT NULL DEFAULT '[]';`,
  },
  {
    // Encryption at rest: each tenant's data key, wrapped by the user's key-encryption key
    // (see EncryptionOptions); never a key in the clear.
    name: 'data keys',
    sql: (s) => `CREATE TABLE ${s}.data_keys (
  kind text COLLATE "C" NOT NULL,
  key text COLLATE "C" NOT NULL,
  key_id text NOT NULL,
  wrapped text NOT NULL,
  created_at double precision NOT NULL,
  PRIMARY KEY (kind, key)
);`,
  },
  {
    // Branch-scoped memories: the thread and the message (`branchAnchor`) a memory hangs
    // on, null for every other memory (no memory was branch-scoped before).
    name: 'branch-scoped memories',
    sql: (s) => `ALTER TABLE ${s}.memories ADD COLUMN branch_thread_id text,
  ADD COLUMN branch_message_id text;
CREATE INDEX memories_by_branch ON ${s}.memories (branch_thread_id, branch_message_id)
  WHERE branch_thread_id IS NOT NULL;`,
  },
];

/** Moves every branch's state commits into segments, the newest as its tail, then drops their table. */
async function packStateCommits(q: Queryable, s: string): Promise<void> {
  const branches = await q.query<{ b: string }>(
    `SELECT DISTINCT branch_id AS b FROM ${s}.state_commits`,
  );
  for (const { b } of branches.rows) {
    const { rows } = await q.query(
      `SELECT ${OLD_COMMIT.columns} FROM ${s}.state_commits WHERE branch_id = $1 ORDER BY version`,
      [b],
    );
    const commits = rows.map(OLD_COMMIT.decode);
    const segments = segmentsOf(commits);
    for (const [table, part] of [
      ['state_segments', segments.slice(0, -1)],
      ['state_tail', segments.slice(-1)],
    ] as const)
      await q.query(
        `INSERT INTO ${s}.${table} (branch_id, thread_id, first_version, last_version, has_snapshot, min_depth, commits)
         SELECT $1, $2, * FROM unnest($3::int[], $4::int[], $5::boolean[], $6::int[], $7::bytea[])`,
        [
          b,
          commits[0]!.threadId,
          part.map((g) => g.firstVersion),
          part.map((g) => g.lastVersion),
          part.map((g) => g.hasSnapshot),
          part.map((g) => g.minDepth),
          part.map((g) => g.commits),
        ],
      );
  }
  await q.exec(`DROP TABLE ${s}.state_commits`);
}

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
    const rewritten = new Set<string>();
    for (let v = current + 1; v <= LATEST_VERSION; v++) {
      const m = MIGRATIONS[v - 1]!;
      await q.exec(m.sql(s));
      await m.run?.(q, s);
      for (const table of m.rewrites ?? []) rewritten.add(table);
      await q.query(
        `INSERT INTO ${s}.cairn_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
        [v, m.name, Date.now()],
      );
    }
    // A fresh schema's tables are empty: nothing to analyze. The table names are ours.
    if (current > 0) for (const table of rewritten) await q.exec(`ANALYZE ${s}.${table}`);
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
