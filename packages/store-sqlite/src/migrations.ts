import { backfillJumps, schemaTooNew as tooNew } from '@cairn/store/adapter';
import type { SqliteDatabase } from './sqlite-driver.js';

/**
 * The sign-bit code of a float32 vector blob: sqlite-vec's `vec_quantize_binary` (bit i of
 * byte j is dimension 8j + i, set when it is > 0), which takes whole bytes, so a width
 * that is not a multiple of 8 is padded with zeros (clear bits).
 */
const CODE_OF = (e: string) =>
  `vec_quantize_binary(CASE WHEN length(${e}) % 32 = 0 THEN ${e} ELSE unhex(hex(${e}) || hex(zeroblob(32 - length(${e}) % 32))) END)`;

/** A step: SQL, or SQL and then work SQL cannot do. */
type Migration = string | { sql: string; run: (db: SqliteDatabase) => void };

/**
 * The schema, as append-only numbered steps: the position in the list is the version
 * (the first is version 1). Never edit or reorder a step that has shipped; add one.
 */
export const MIGRATIONS: readonly Migration[] = [
  // 1: conversations
  `
  CREATE TABLE cairn_threads (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    resource_id TEXT,
    title TEXT,
    metadata TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX cairn_threads_resource ON cairn_threads (resource_id, seq);

  -- No foreign key on thread_id: writes check the thread in their transaction and
  -- deleteThread removes the messages, so the hot insert path skips a lookup per row.
  CREATE TABLE cairn_messages (
    id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    parent_id TEXT,
    role TEXT NOT NULL,
    type TEXT,
    data TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    depth INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX cairn_messages_thread ON cairn_messages (thread_id);

  CREATE TABLE cairn_branches (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    thread_id TEXT NOT NULL REFERENCES cairn_threads (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    head_message_id TEXT,
    is_active INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    fork_message_id TEXT,
    parent_branch_id TEXT,
    UNIQUE (thread_id, name)
  );

  CREATE TABLE cairn_checkpoints (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    thread_id TEXT NOT NULL REFERENCES cairn_threads (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    message_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (thread_id, name)
  );

  CREATE TABLE cairn_state_commits (
    branch_id TEXT NOT NULL REFERENCES cairn_branches (id) ON DELETE CASCADE,
    thread_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    message_id TEXT,
    message_depth INTEGER,
    update_json TEXT NOT NULL,
    snapshot TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (branch_id, version)
  );

  CREATE TABLE cairn_turns (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    thread_id TEXT NOT NULL REFERENCES cairn_threads (id) ON DELETE CASCADE,
    message_id TEXT,
    source TEXT,
    user_id TEXT,
    status TEXT NOT NULL,
    state TEXT NOT NULL,
    steps TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    finished_at INTEGER
  );
  CREATE INDEX cairn_turns_thread ON cairn_turns (thread_id, started_at, id);
  CREATE INDEX cairn_turns_started ON cairn_turns (started_at);

  CREATE TABLE cairn_leases (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    acquired_at INTEGER NOT NULL,
    renewed_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    released_at INTEGER,
    data TEXT NOT NULL
  );
  `,
  // 2: long-term memory, keyword index kept in step by triggers, embedding cache
  `
  CREATE TABLE cairn_settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
  );

  CREATE TABLE cairn_memories (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    entity_id TEXT,
    room_id TEXT,
    world_id TEXT,
    scope TEXT NOT NULL,
    content TEXT NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    embedding BLOB,
    created_at INTEGER NOT NULL
  );
  CREATE INDEX cairn_memories_agent ON cairn_memories (agent_id);
  CREATE INDEX cairn_memories_room ON cairn_memories (room_id);
  CREATE INDEX cairn_memories_world ON cairn_memories (world_id);
  CREATE INDEX cairn_memories_hash ON cairn_memories (content_hash);
  CREATE INDEX cairn_memories_created ON cairn_memories (created_at, seq);

  CREATE VIRTUAL TABLE cairn_memories_fts USING fts5 (
    text, content = 'cairn_memories', content_rowid = 'seq', tokenize = 'unicode61 remove_diacritics 0'
  );
  CREATE TRIGGER cairn_memories_fts_insert AFTER INSERT ON cairn_memories BEGIN
    INSERT INTO cairn_memories_fts (rowid, text) VALUES (new.seq, new.text);
  END;
  CREATE TRIGGER cairn_memories_fts_delete AFTER DELETE ON cairn_memories BEGIN
    INSERT INTO cairn_memories_fts (cairn_memories_fts, rowid, text) VALUES ('delete', old.seq, old.text);
  END;
  CREATE TRIGGER cairn_memories_fts_update AFTER UPDATE OF text ON cairn_memories BEGIN
    INSERT INTO cairn_memories_fts (cairn_memories_fts, rowid, text) VALUES ('delete', old.seq, old.text);
    INSERT INTO cairn_memories_fts (rowid, text) VALUES (new.seq, new.text);
  END;

  CREATE TABLE cairn_embedding_cache (
    embedder_id TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    embedding BLOB NOT NULL,
    PRIMARY KEY (embedder_id, content_hash)
  ) WITHOUT ROWID;
  `,
  // 3: jump pointers, so that an ancestor at any depth is O(log depth) steps away
  {
    sql: `
  ALTER TABLE cairn_messages ADD COLUMN jump_id TEXT;
  ALTER TABLE cairn_messages ADD COLUMN jump_depth INTEGER NOT NULL DEFAULT 0;
  `,
    run: backfillMessageJumps,
  },
  // 4: entries, JSON documents in named collections (a server's runs and their events)
  `
  CREATE TABLE cairn_entries (
    collection TEXT NOT NULL,
    id TEXT NOT NULL,
    group_id TEXT,
    data TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (collection, id)
  ) WITHOUT ROWID;
  CREATE INDEX cairn_entries_group ON cairn_entries (collection, group_id, id);
  `,
  // 5: payloads out of the key b-trees. A WITHOUT ROWID table keeps whole rows in an index
  // b-tree, where SQLite reads a cell's whole record (overflow pages and all) to compare
  // it with a key: one 20 MB message made every later insert and lookup near it read 20 MB
  // per comparison. Rowid tables keep rows in a table b-tree, searched by integer; the keys
  // go in indexes of their own, and the payload column comes last, so that reading the
  // columns before it never walks its overflow pages.
  `
  CREATE TABLE cairn_messages_v5 (
    id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    parent_id TEXT,
    role TEXT NOT NULL,
    type TEXT,
    created_at INTEGER NOT NULL,
    depth INTEGER NOT NULL,
    jump_id TEXT,
    jump_depth INTEGER NOT NULL DEFAULT 0,
    data TEXT NOT NULL
  );
  INSERT INTO cairn_messages_v5 (id, thread_id, parent_id, role, type, created_at, depth, jump_id, jump_depth, data)
    SELECT id, thread_id, parent_id, role, type, created_at, depth, jump_id, jump_depth, data FROM cairn_messages;
  DROP TABLE cairn_messages;
  ALTER TABLE cairn_messages_v5 RENAME TO cairn_messages;
  CREATE UNIQUE INDEX cairn_messages_id ON cairn_messages (id);
  CREATE INDEX cairn_messages_thread ON cairn_messages (thread_id);

  CREATE TABLE cairn_entries_v5 (
    collection TEXT NOT NULL,
    id TEXT NOT NULL,
    group_id TEXT,
    version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    data TEXT NOT NULL
  );
  INSERT INTO cairn_entries_v5 (collection, id, group_id, version, created_at, updated_at, data)
    SELECT collection, id, group_id, version, created_at, updated_at, data FROM cairn_entries;
  DROP TABLE cairn_entries;
  ALTER TABLE cairn_entries_v5 RENAME TO cairn_entries;
  CREATE UNIQUE INDEX cairn_entries_key ON cairn_entries (collection, id);
  CREATE INDEX cairn_entries_group ON cairn_entries (collection, group_id, id);

  CREATE TABLE cairn_embedding_cache_v5 (
    embedder_id TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    embedding BLOB NOT NULL
  );
  INSERT INTO cairn_embedding_cache_v5 (embedder_id, content_hash, embedding)
    SELECT embedder_id, content_hash, embedding FROM cairn_embedding_cache;
  DROP TABLE cairn_embedding_cache;
  ALTER TABLE cairn_embedding_cache_v5 RENAME TO cairn_embedding_cache;
  CREATE UNIQUE INDEX cairn_embedding_cache_key ON cairn_embedding_cache (embedder_id, content_hash);
  `,
  // 6: tombstones of forgotten resources, entities, worlds, threads and branches (see
  // Store.forget): ids only, never content; kept for good. The cache index on the hash
  // alone lets forget drop a hash's rows of every embedder; the entity index finds an
  // entity's memories without a scan.
  `
  CREATE TABLE cairn_tombstones (
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (kind, key)
  ) WITHOUT ROWID;
  CREATE INDEX cairn_embedding_cache_hash ON cairn_embedding_cache (content_hash);
  CREATE INDEX cairn_memories_entity ON cairn_memories (entity_id);
  `,
  // 7: memories with two times (event time valid_from/valid_to, system time created_at to
  // superseded_at), a fact's versions tied by lineage_id, and the messages they came from
  `
  ALTER TABLE cairn_memories ADD COLUMN valid_from INTEGER;
  ALTER TABLE cairn_memories ADD COLUMN valid_to INTEGER;
  ALTER TABLE cairn_memories ADD COLUMN superseded_at INTEGER;
  ALTER TABLE cairn_memories ADD COLUMN supersedes TEXT;
  ALTER TABLE cairn_memories ADD COLUMN lineage_id TEXT;
  ALTER TABLE cairn_memories ADD COLUMN source TEXT;
  UPDATE cairn_memories SET lineage_id = id;
  CREATE INDEX cairn_memories_lineage ON cairn_memories (lineage_id, created_at, seq);
  `,
  // 8: each lease's queue of waiting acquisitions (JSON), so a freed lease goes to the
  // waiters of every process in the order they asked
  `
  ALTER TABLE cairn_leases ADD COLUMN waiters TEXT NOT NULL DEFAULT '[]';
  `,
  // 9: data keys of a store with encryption, one per tenant, wrapped by the user's
  // key-encryption key (see EncryptionOptions); never a key in the clear
  `
  CREATE TABLE cairn_data_keys (
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    key_id TEXT NOT NULL,
    wrapped TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (kind, key)
  ) WITHOUT ROWID;
  `,
  // 10: branch-scoped memories: the thread and the message (`branchAnchor`) a memory hangs
  // on, null for every other memory (no memory was branch-scoped before)
  `
  ALTER TABLE cairn_memories ADD COLUMN branch_thread_id TEXT;
  ALTER TABLE cairn_memories ADD COLUMN branch_message_id TEXT;
  CREATE INDEX cairn_memories_branch ON cairn_memories (branch_thread_id, branch_message_id)
    WHERE branch_thread_id IS NOT NULL;
  `,
  // 11: sign-bit codes of the embeddings (sqlite-vec's binary quantization, one bit per
  // dimension, padded to a whole byte), kept in step by triggers, for the approximate
  // vector search's candidate scan. Every change to a memory's vector appends a row with a
  // new \`n\` (its code, or NULL when the vector or the memory is gone) and drops the rows
  // before it for that memory, so a process's copy catches up by reading the rows after the
  // last \`n\` it saw (see CodeIndex).
  `
  CREATE TABLE cairn_memory_codes (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    seq INTEGER NOT NULL,
    code BLOB
  );
  CREATE INDEX cairn_memory_codes_seq ON cairn_memory_codes (seq);
  INSERT INTO cairn_memory_codes (seq, code)
    SELECT seq, ${CODE_OF('embedding')} FROM cairn_memories
     WHERE length(embedding) > 0 ORDER BY seq;
  CREATE TRIGGER cairn_memory_codes_insert AFTER INSERT ON cairn_memories
    WHEN length(new.embedding) > 0 BEGIN
    INSERT INTO cairn_memory_codes (seq, code) VALUES (new.seq, ${CODE_OF('new.embedding')});
  END;
  CREATE TRIGGER cairn_memory_codes_update AFTER UPDATE OF embedding ON cairn_memories
    WHEN new.embedding IS NOT old.embedding BEGIN
    DELETE FROM cairn_memory_codes WHERE seq = old.seq;
    INSERT INTO cairn_memory_codes (seq, code) VALUES (new.seq,
      CASE WHEN length(new.embedding) > 0 THEN ${CODE_OF('new.embedding')} END);
  END;
  CREATE TRIGGER cairn_memory_codes_delete AFTER DELETE ON cairn_memories
    WHEN old.embedding IS NOT NULL BEGIN
    DELETE FROM cairn_memory_codes WHERE seq = old.seq;
    INSERT INTO cairn_memory_codes (seq, code) VALUES (old.seq, NULL);
  END;
  `,
];

/** Gives every stored message its jump pointer, a thread at a time. */
function backfillMessageJumps(db: SqliteDatabase): void {
  const threads = db.prepare('SELECT DISTINCT thread_id AS t FROM cairn_messages').all() as Array<{
    t: string;
  }>;
  const read = db.prepare(
    'SELECT id, parent_id AS parentId, depth FROM cairn_messages WHERE thread_id = ? ORDER BY depth',
  );
  const write = db.prepare('UPDATE cairn_messages SET jump_id = ?, jump_depth = ? WHERE id = ?');
  for (const { t } of threads) {
    const rows = read.all(t) as Array<{ id: string; parentId: string | null; depth: number }>;
    for (const [id, j] of backfillJumps(rows)) write.run(j.jumpId, j.jumpDepth, id);
  }
}

/** The version this code writes: the number of migrations it knows. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/** The version recorded in the file (0 for a file Cairn never wrote). Reads only. */
export function readSchemaVersion(db: SqliteDatabase): number {
  const table = db
    .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cairn_migrations'")
    .get();
  if (table === undefined) return 0;
  const row = db.prepare('SELECT max(version) AS v FROM cairn_migrations').get() as {
    v: number | null;
  };
  return row.v ?? 0;
}

export const schemaTooNew = (found: number) =>
  tooNew('the database', found, SCHEMA_VERSION, '@cairn/store-sqlite');

/**
 * Brings the schema to `target` (default: the latest), each step in one write
 * transaction with its record, so processes opening one file together apply it once.
 * Refuses, changing nothing, when the file is newer than this code.
 */
export function runMigrations(db: SqliteDatabase, target: number = SCHEMA_VERSION): void {
  if (readSchemaVersion(db) > SCHEMA_VERSION) throw schemaTooNew(readSchemaVersion(db));
  db.exec('BEGIN IMMEDIATE');
  try {
    db.exec(
      'CREATE TABLE IF NOT EXISTS cairn_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)',
    );
    const current = readSchemaVersion(db);
    if (current > SCHEMA_VERSION) throw schemaTooNew(current);
    const record = db.prepare('INSERT INTO cairn_migrations (version, applied_at) VALUES (?, ?)');
    for (let v = current + 1; v <= target; v++) {
      const m = MIGRATIONS[v - 1]!;
      db.exec(typeof m === 'string' ? m : m.sql);
      if (typeof m !== 'string') m.run(db);
      record.run(v, Date.now());
    }
    db.exec('COMMIT');
  } catch (e) {
    if (db.inTransaction) db.exec('ROLLBACK');
    throw e;
  }
}
