import type {
  Branch,
  CairnError,
  Checkpoint,
  Entry,
  JsonObject,
  Memory,
  Message,
  StateCommit,
  Thread,
  Turn,
} from '@cairn/core';
import { type EmbeddingSpace, runLeaseKey, type StoreCapabilities } from '@cairn/store';
import type {
  BranchCommitQuery,
  DataKeyRow,
  Driver,
  DriverMemoryFilter,
  DriverSession,
  KeywordCandidate,
  LatestCommitConditions,
  MemoryRow,
  MessageBatchLookup,
  MessageJump,
  SessionOptions,
  StoredLease,
  SweepDeleted,
  SweepDeletes,
  SweepFacts,
  Tenant,
  ThreadRow,
  ThreadRowCounts,
  Tombstone,
  TombstoneKey,
} from '@cairn/store/adapter';
import { branchAnchor, chainSql, lockTimeout, SqlTable, withSavepoint } from '@cairn/store/adapter';
import { CodeIndex } from './code-index.js';
import { type Connection, isBusy, untilUnlocked } from './connection.js';
import {
  AFTER_MEMORY_COLUMNS,
  decodeVector,
  encodeVector,
  MEMORY_COLUMNS,
  memoryFromRow,
  memoryWhere,
} from './memory-sql.js';
import { runMigrations } from './migrations.js';

type Row = unknown[];
type Fields = Record<string, unknown>;
const json = (v: unknown) => JSON.stringify(v);
/** A list as one parameter, for `IN (SELECT value FROM json_each(?))`: no variable limit. */
const IN_LIST = 'IN (SELECT value FROM json_each(?))';
const EMBEDDING_SPACE_KEY = 'embedding_space';
/**
 * Candidates an approximate vector search reads again and scores exactly (or 4 times the
 * count asked for, if more): at 1,000,000 clustered 512-dimensional vectors, 1,200 hold
 * 0.96 of the exact top 10 (`pnpm bench -- --only memory-scale`).
 */
const CANDIDATES = 1200;
/** When the filter admits too few of them: once more, this many times as many. */
const CANDIDATES_WIDEN = 8;

/** A table of JSON-as-text columns, and its insert binding each field by name. */
const table = <T>(name: string, spec: string) => new SqlTable<T>(name, spec, { jsonText: true });
const insertSql = (t: SqlTable<unknown>) => t.insert(t.name, (field) => `@${field}`);

const THREADS = table<Thread>('cairn_threads', 'id resourceId title metadata* createdAt updatedAt');
const BRANCHES = table<Branch>(
  'cairn_branches',
  'id threadId name headMessageId isActive? createdAt forkMessageId parentBranchId seq',
);
const CHECKPOINTS = table<Checkpoint>('cairn_checkpoints', 'id threadId name messageId createdAt');
const COMMITS = table<StateCommit>(
  'cairn_state_commits',
  'branchId threadId version messageId messageDepth update=update_json* snapshot* createdAt',
);
const TURNS = table<Turn>(
  'cairn_turns',
  'id threadId messageId source userId status state* steps* startedAt finishedAt',
);
const ENTRIES = table<Entry>(
  'cairn_entries',
  'collection id group=group_id data* version createdAt updatedAt',
);
const LEASES = table<StoredLease>(
  'cairn_leases',
  'key owner acquiredAt renewedAt expiresAt releasedAt data* waiters*',
);

const DATA_KEYS =
  'SELECT kind, key, key_id AS keyId, wrapped, created_at AS createdAt FROM cairn_data_keys';

/** Messages are read in bulk (whole chains): as arrays, decoded by position. */
const MESSAGE_COLUMNS = 'id, thread_id, parent_id, role, type, data, created_at, depth';
const messageFromRow = (r: Row): Message => ({
  id: r[0] as string,
  threadId: r[1] as string,
  parentId: r[2] as string | null,
  role: r[3] as string,
  type: r[4] as string | null,
  data: JSON.parse(r[5] as string),
  createdAt: r[6] as number,
  depth: r[7] as number,
});

/** Memories are read by `memoryFromRow`; this table only writes them. */
const MEMORIES = table<Memory>(
  'cairn_memories',
  'id type agentId entityId roomId worldId scope content* text metadata* contentHash embedding createdAt ' +
    'validFrom validTo supersededAt supersedes lineageId source* branchThreadId branchMessageId',
);
/**
 * A memory's column values: its text for the keyword index, its vector as float32, the
 * thread and message a branch-scoped memory hangs on.
 */
const memoryFields = (m: Memory): Fields => {
  const anchor = branchAnchor(m);
  return {
    ...MEMORIES.encode(m),
    text: m.content.text,
    embedding: m.embedding === null ? null : encodeVector(m.embedding),
    branchThreadId: anchor === null ? null : m.source!.threadId,
    branchMessageId: anchor,
  };
};

/** A memory as a reader gets it back: vectors are stored as float32. */
const asStored = (m: Memory): Memory =>
  m.embedding === null ? m : { ...m, embedding: Array.from(Float32Array.from(m.embedding)) };

/**
 * The SQL of one session. better-sqlite3 is synchronous, so every method returns its
 * answer directly; the session is the connection's, inside the transaction `run` opened.
 */
class SqliteSession implements DriverSession {
  readonly #c: Connection;
  readonly #approximate: boolean;

  constructor(conn: Connection, approximate: boolean) {
    this.#c = conn;
    this.#approximate = approximate;
  }

  /** The first row of `table` matching `where`, or null. */
  #get<T>(t: SqlTable<T>, where: string, ...params: unknown[]): T | null {
    const r = this.#c.sql(`SELECT ${t.columns} FROM ${t.name} ${where}`).get(...params);
    return r ? t.decode(r as Fields) : null;
  }

  #list<T>(t: SqlTable<T>, where: string, ...params: unknown[]): T[] {
    const rows = this.#c.sql(`SELECT ${t.columns} FROM ${t.name} ${where}`).all(...params);
    return (rows as Fields[]).map(t.decode);
  }

  /** Runs a write with `RETURNING` the row it wrote, or null when it wrote none. */
  #returning<T>(t: SqlTable<T>, sql: string, ...params: unknown[]): T | null {
    const r = this.#c.sql(`${sql} RETURNING ${t.columns}`).get(...params);
    return r ? t.decode(r as Fields) : null;
  }

  #raw<T>(sql: string, decode: (r: Row) => T, ...params: unknown[]): T[] {
    return (this.#c.rows(sql).all(...params) as Row[]).map(decode);
  }

  #run(sql: string, ...params: unknown[]): number {
    return this.#c.sql(sql).run(...params).changes;
  }

  // ---------------------------------------------------------------- threads

  insertThread(t: Thread): boolean {
    return this.#run(`${insertSql(THREADS)} ON CONFLICT (id) DO NOTHING`, THREADS.encode(t)) === 1;
  }

  getThread(id: string): Thread | null {
    return this.#get(THREADS, 'WHERE id = ?', id);
  }

  updateThread(
    id: string,
    patch: { title?: string | null; metadata?: JsonObject },
    updatedAt: number,
  ): Thread | null {
    return this.#returning(
      THREADS,
      `UPDATE cairn_threads SET title = CASE WHEN ? THEN ? ELSE title END,
         metadata = coalesce(?, metadata), updated_at = ? WHERE id = ?`,
      patch.title === undefined ? 0 : 1,
      patch.title ?? null,
      patch.metadata === undefined ? null : json(patch.metadata),
      updatedAt,
      id,
    );
  }

  listThreads(q: { resourceId?: string; beforeSeq?: number; limit: number }): ThreadRow[] {
    // Creation order (seq), newest first: stable under clock steps and same-millisecond creates.
    const rows = this.#c
      .sql(
        `SELECT ${THREADS.columns}, seq FROM cairn_threads
          WHERE (@resourceId IS NULL OR resource_id = @resourceId)
            AND (@beforeSeq IS NULL OR seq < @beforeSeq) ORDER BY seq DESC LIMIT @limit`,
      )
      .all({ resourceId: null, beforeSeq: null, ...q }) as Fields[];
    return rows.map((r) => ({ thread: THREADS.decode(r), seq: r.seq as number }));
  }

  deleteThread(id: string): boolean {
    // Branches, their commits, checkpoints and turns go by ON DELETE CASCADE.
    if (this.#run('DELETE FROM cairn_threads WHERE id = ?', id) === 0) return false;
    this.#run('DELETE FROM cairn_messages WHERE thread_id = ?', id);
    return true;
  }

  // ---------------------------------------------------------------- messages

  latestMessageAt(threadId: string): number | null {
    const r = this.#c
      .sql('SELECT max(created_at) AS t FROM cairn_messages WHERE thread_id = ?')
      .get(threadId) as { t: number | null };
    return r.t;
  }

  lookupMessageBatch(ids: { threadIds: string[]; messageIds: string[] }): MessageBatchLookup {
    // One primary-key probe per id: far cheaper than a json_each list for the few ids of a call.
    const thread = this.#c.rows('SELECT 1 FROM cairn_threads WHERE id = ?');
    const message = this.#c.rows(
      'SELECT thread_id, depth, jump_id, jump_depth FROM cairn_messages WHERE id = ?',
    );
    const messages: MessageBatchLookup['messages'] = new Map();
    for (let id of ids.messageIds) {
      // The message, then its jump spine (O(log depth) probes, shared spines read once).
      for (let r = message.get(id) as Row | undefined; r && !messages.has(id); ) {
        const jumpId = r[2] as string | null;
        messages.set(id, {
          threadId: r[0] as string,
          depth: r[1] as number,
          jumpId,
          jumpDepth: r[3] as number,
        });
        if (jumpId === null) break;
        id = jumpId;
        r = message.get(id) as Row | undefined;
      }
    }
    return { threadIds: new Set(ids.threadIds.filter((id) => thread.get(id))), messages };
  }

  insertMessages(messages: Message[], jumps: MessageJump[]): void {
    const insert = this.#c.sql(
      `INSERT INTO cairn_messages (${MESSAGE_COLUMNS}, jump_id, jump_depth) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i]!;
      const j = jumps[i]!;
      insert.run(
        m.id,
        m.threadId,
        m.parentId,
        m.role,
        m.type,
        json(m.data),
        m.createdAt,
        m.depth,
        j.jumpId,
        j.jumpDepth,
      );
    }
  }

  getMessage(id: string): Message | null {
    const r = this.#c.rows(`SELECT ${MESSAGE_COLUMNS} FROM cairn_messages WHERE id = ?`).get(id);
    return r ? messageFromRow(r as Row) : null;
  }

  listMessages(threadId: string): Message[] {
    return this.#raw(
      `SELECT ${MESSAGE_COLUMNS} FROM cairn_messages WHERE thread_id = ? ORDER BY depth, id`,
      messageFromRow,
      threadId,
    );
  }

  getChain(headId: string, minDepth: number, maxDepth: number): Message[] {
    const rows = this.#c
      .rows(
        chainSql('cairn_messages', MESSAGE_COLUMNS, { head: '@head', min: '@min', max: '@max' }),
      )
      .all({ head: headId, min: minDepth, max: maxDepth }) as Row[];
    const out = new Array<Message>(rows.length);
    // The walk yields the deepest first; depths make root-first order without a sort.
    for (let i = 0, n = rows.length; i < n; i++) out[n - 1 - i] = messageFromRow(rows[i]!);
    return out;
  }

  // ---------------------------------------------------------------- branches

  insertBranch(b: Omit<Branch, 'seq'>): Branch | null {
    return this.#returning(
      BRANCHES,
      `INSERT INTO cairn_branches (id, thread_id, name, head_message_id, is_active, created_at, fork_message_id,
         parent_branch_id) VALUES (@id, @threadId, @name, @headMessageId, @isActive, @createdAt, @forkMessageId,
         @parentBranchId) ON CONFLICT DO NOTHING`,
      { ...b, isActive: b.isActive ? 1 : 0 },
    );
  }

  getBranchById(id: string): Branch | null {
    return this.#get(BRANCHES, 'WHERE id = ?', id);
  }

  getBranch(threadId: string, name: string): Branch | null {
    return this.#get(BRANCHES, 'WHERE thread_id = ? AND name = ?', threadId, name);
  }

  listBranches(threadId: string): Branch[] {
    return this.#list(BRANCHES, 'WHERE thread_id = ? ORDER BY seq', threadId);
  }

  getActiveBranch(threadId: string): Branch | null {
    return this.#get(BRANCHES, 'WHERE thread_id = ? AND is_active = 1', threadId);
  }

  setActiveBranch(threadId: string, branchId: string): Branch | null {
    this.#run(
      'UPDATE cairn_branches SET is_active = (id = ?) WHERE thread_id = ? AND (is_active = 1 OR id = ?)',
      branchId,
      threadId,
      branchId,
    );
    return this.getBranchById(branchId);
  }

  moveHead(branchId: string, expectedHeadId: string | null, newHeadId: string): Branch | null {
    return this.#returning(
      BRANCHES,
      `UPDATE cairn_branches SET head_message_id = @newHeadId
        WHERE id = @branchId AND head_message_id IS @expectedHeadId AND EXISTS
          (SELECT 1 FROM cairn_messages m WHERE m.id = @newHeadId AND m.thread_id = cairn_branches.thread_id)`,
      { branchId, expectedHeadId, newHeadId },
    );
  }

  deleteBranch(branchId: string): number | null {
    const commits = this.#run('DELETE FROM cairn_state_commits WHERE branch_id = ?', branchId);
    return this.#run('DELETE FROM cairn_branches WHERE id = ?', branchId) > 0 ? commits : null;
  }

  // ---------------------------------------------------------------- checkpoints

  putCheckpoint(c: Checkpoint): Checkpoint {
    return this.#returning(
      CHECKPOINTS,
      `${insertSql(CHECKPOINTS)} ON CONFLICT (thread_id, name) DO UPDATE SET message_id = excluded.message_id`,
      CHECKPOINTS.encode(c),
    )!;
  }

  getCheckpoint(threadId: string, name: string): Checkpoint | null {
    return this.#get(CHECKPOINTS, 'WHERE thread_id = ? AND name = ?', threadId, name);
  }

  getCheckpointById(id: string): Checkpoint | null {
    return this.#get(CHECKPOINTS, 'WHERE id = ?', id);
  }

  listCheckpoints(threadId: string): Checkpoint[] {
    return this.#list(CHECKPOINTS, 'WHERE thread_id = ? ORDER BY seq', threadId);
  }

  deleteCheckpoint(threadId: string, name: string): boolean {
    return (
      this.#run('DELETE FROM cairn_checkpoints WHERE thread_id = ? AND name = ?', threadId, name) >
      0
    );
  }

  // ---------------------------------------------------------------- state

  insertStateCommit(c: StateCommit): void {
    this.#run(insertSql(COMMITS), COMMITS.encode(c));
  }

  latestStateVersion(branchId: string): number {
    return (
      this.#c
        .sql('SELECT coalesce(max(version), 0) AS v FROM cairn_state_commits WHERE branch_id = ?')
        .get(branchId) as { v: number }
    ).v;
  }

  deleteStateCommits(branchId: string, beforeVersion: number): number {
    return this.#run(
      'DELETE FROM cairn_state_commits WHERE branch_id = ? AND version < ?',
      branchId,
      beforeVersion,
    );
  }

  getStateCommits(branchId: string, fromVersion: number, toVersion: number): StateCommit[] {
    return this.#list(
      COMMITS,
      'WHERE branch_id = ? AND version >= ? AND version <= ? ORDER BY version',
      branchId,
      fromVersion,
      toVersion,
    );
  }

  getLatestStateCommit(branchId: string, q: LatestCommitConditions): StateCommit | null {
    return this.#get(
      COMMITS,
      `WHERE branch_id = @branchId AND (@withSnapshot = 0 OR snapshot IS NOT NULL)
         AND (@maxVersion IS NULL OR version <= @maxVersion)
         AND (@maxMessageDepth IS NULL OR coalesce(message_depth, -1) <= @maxMessageDepth)
       ORDER BY version DESC LIMIT 1`,
      {
        branchId,
        maxVersion: null,
        maxMessageDepth: null,
        ...q,
        withSnapshot: q.withSnapshot ? 1 : 0,
      },
    );
  }

  // ---------------------------------------------------------------- turns

  putTurn(t: Turn): void {
    this.#run(
      `${insertSql(TURNS)} ON CONFLICT (id) DO UPDATE SET thread_id = excluded.thread_id,
         message_id = excluded.message_id, source = excluded.source, user_id = excluded.user_id,
         status = excluded.status, state = excluded.state, steps = excluded.steps,
         started_at = excluded.started_at, finished_at = excluded.finished_at`,
      TURNS.encode(t),
    );
  }

  getTurn(id: string): Turn | null {
    return this.#get(TURNS, 'WHERE id = ?', id);
  }

  listTurns(threadId: string, limit: number): Turn[] {
    return this.#list(
      TURNS,
      'WHERE thread_id = ? ORDER BY started_at DESC, id DESC LIMIT ?',
      threadId,
      limit,
    );
  }

  deleteTurn(id: string): boolean {
    return this.#run('DELETE FROM cairn_turns WHERE id = ?', id) > 0;
  }

  purgeTurns(before: number, threadId: string | undefined): number {
    // Two statements: `(@threadId IS NULL OR thread_id = @threadId)` scans every turn.
    if (threadId === undefined)
      return this.#run(
        `DELETE FROM cairn_turns WHERE status <> 'running' AND started_at < @before`,
        { before },
      );
    return this.#run(
      `DELETE FROM cairn_turns WHERE thread_id = @threadId AND status <> 'running' AND started_at < @before`,
      { before, threadId },
    );
  }

  // ---------------------------------------------------------------- leases

  getLease(key: string): StoredLease | null {
    return this.#get(LEASES, 'WHERE key = ?', key);
  }

  putLease(lease: StoredLease, insert: boolean): boolean {
    const onConflict = insert
      ? 'NOTHING'
      : `UPDATE SET owner = excluded.owner, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at,
           expires_at = excluded.expires_at, released_at = excluded.released_at, data = excluded.data,
           waiters = excluded.waiters`;
    return (
      this.#run(`${insertSql(LEASES)} ON CONFLICT (key) DO ${onConflict}`, LEASES.encode(lease)) ===
      1
    );
  }

  listLeases(afterKey: string | null, limit: number): StoredLease[] {
    return afterKey === null
      ? this.#list(LEASES, 'ORDER BY key LIMIT ?', limit)
      : this.#list(LEASES, 'WHERE key > ? ORDER BY key LIMIT ?', afterKey, limit);
  }

  // ---------------------------------------------------------------- entries

  getEntry(collection: string, id: string): Entry | null {
    return this.#get(ENTRIES, 'WHERE collection = ? AND id = ?', collection, id);
  }

  putEntry(entry: Entry, insert: boolean): boolean {
    const onConflict = insert
      ? 'NOTHING'
      : `UPDATE SET group_id = excluded.group_id, data = excluded.data, version = excluded.version,
           created_at = excluded.created_at, updated_at = excluded.updated_at`;
    const sql = `${insertSql(ENTRIES)} ON CONFLICT (collection, id) DO ${onConflict}`;
    return this.#run(sql, ENTRIES.encode(entry)) === 1;
  }

  listEntries(
    collection: string,
    group: string | null,
    afterId: string | null,
    limit: number,
  ): Entry[] {
    return this.#list(
      ENTRIES,
      `WHERE collection = @collection AND (@group IS NULL OR group_id = @group)
         AND (@afterId IS NULL OR id > @afterId) ORDER BY id LIMIT @limit`,
      { collection, group, afterId, limit },
    );
  }

  deleteEntries(
    collection: string,
    selector: { ids: string[] } | { group: string },
  ): Array<{ id: string; group: string | null }> {
    const where =
      'ids' in selector ? 'id IN (SELECT value FROM json_each(@ids))' : 'group_id = @group';
    const params =
      'ids' in selector
        ? { collection, ids: JSON.stringify(selector.ids) }
        : { collection, group: selector.group };
    return this.#raw(
      `DELETE FROM cairn_entries WHERE collection = @collection AND ${where} RETURNING id, group_id`,
      (r) => ({ id: r[0] as string, group: r[1] as string | null }),
      params,
    );
  }

  // ---------------------------------------------------------------- memories

  takenMemoryIds(ids: string[]): string[] {
    return (
      this.#c.rows(`SELECT id FROM cairn_memories WHERE id ${IN_LIST}`).all(json(ids)) as Row[]
    ).map((r) => r[0] as string);
  }

  insertMemories(memories: Memory[]): Memory[] {
    const insert = this.#c.sql(insertSql(MEMORIES));
    for (const m of memories) insert.run(memoryFields(m));
    return memories.map(asStored);
  }

  getMemory(id: string): Memory | null {
    const r = this.#c.rows(`SELECT ${MEMORY_COLUMNS} FROM cairn_memories m WHERE m.id = ?`).get(id);
    return r ? memoryFromRow(r as Row) : null;
  }

  replaceMemory(m: Memory): Memory {
    this.#run(
      `UPDATE cairn_memories SET content = @content, text = @text, content_hash = @contentHash,
         metadata = @metadata, embedding = @embedding WHERE id = @id`,
      memoryFields(m),
    );
    return asStored(m);
  }

  closeMemory(id: string, validTo: number, supersededAt: number): boolean {
    return (
      this.#run(
        `UPDATE cairn_memories SET valid_to = ?, superseded_at = ?
          WHERE id = ? AND valid_to IS NULL AND superseded_at IS NULL`,
        validTo,
        supersededAt,
        id,
      ) === 1
    );
  }

  deleteMemories(ids: string[]): number {
    return this.#run(`DELETE FROM cairn_memories WHERE id ${IN_LIST}`, json(ids));
  }

  listMemories(filter: DriverMemoryFilter, limit: number, order: 'newest' | 'oldest'): Memory[] {
    const params: unknown[] = [];
    const dir = order === 'newest' ? 'DESC' : 'ASC';
    return this.#raw(
      `SELECT ${MEMORY_COLUMNS} FROM cairn_memories m WHERE ${memoryWhere(filter, params)}
        ORDER BY m.created_at ${dir}, m.seq ${dir} LIMIT ?`,
      memoryFromRow,
      ...params,
      limit,
    );
  }

  scanMemories(afterId: string | null, limit: number): Memory[] {
    return this.#raw(
      `SELECT ${MEMORY_COLUMNS} FROM cairn_memories m WHERE m.id > ? ORDER BY m.id LIMIT ?`,
      memoryFromRow,
      afterId ?? '',
      limit,
    );
  }

  branchAnchors(threadId: string, maxDepth: number): Array<{ id: string; depth: number }> {
    return this.#raw(
      `SELECT DISTINCT x.id, x.depth FROM cairn_memories m
         JOIN cairn_messages x ON x.id = m.branch_message_id
        WHERE m.branch_thread_id = ? AND x.thread_id = ? AND x.depth <= ?`,
      (r) => ({ id: r[0] as string, depth: r[1] as number }),
      threadId,
      threadId,
      maxDepth,
    );
  }

  countMemories(filter: DriverMemoryFilter): number {
    const params: unknown[] = [];
    const where = memoryWhere(filter, params);
    return (
      this.#c.sql(`SELECT count(*) AS n FROM cairn_memories m WHERE ${where}`).get(...params) as {
        n: number;
      }
    ).n;
  }

  /** Ranks on small rows (seq and a score) first, then reads the winners whole. */
  #hydrate<T extends { seq: number }>(ranked: T[]): Array<T & { memory: Memory }> {
    const bySeq = new Map<number, Memory>();
    if (ranked.length > 0) {
      for (const r of this.#c
        .rows(`SELECT ${MEMORY_COLUMNS}, m.seq FROM cairn_memories m WHERE m.seq ${IN_LIST}`)
        .all(json(ranked.map((r) => r.seq))) as Row[]) {
        bySeq.set(r[AFTER_MEMORY_COLUMNS] as number, memoryFromRow(r));
      }
    }
    return ranked.map((r) => ({ ...r, memory: bySeq.get(r.seq)! }));
  }

  vectorCandidates(q: Parameters<DriverSession['vectorCandidates']>[0]): MemoryRow[] {
    // Inside a write transaction the codes may hold rows that roll back: the exact scan.
    if (this.#approximate && !this.#c.db.inTransaction) {
      const ranked = this.#approximateCandidates(q);
      if (ranked !== null) return this.#hydrate(ranked);
    }
    const params: unknown[] = [encodeVector(q.vector)];
    const where = memoryWhere(q.filter, params);
    // An exact scan of the rows the filter admits with sqlite-vec (in float32). A zero
    // vector has no cosine distance (NULL): it counts as similarity 0.
    const ranked = this.#c
      .rows(
        `SELECT seq, d FROM (
           SELECT m.seq, coalesce(vec_distance_cosine(m.embedding, ?), 1.0) AS d
             FROM cairn_memories m WHERE m.embedding IS NOT NULL AND ${where}
         ) ${q.minSimilarity === undefined ? '' : 'WHERE d <= ?'} ORDER BY d, seq LIMIT ?`,
      )
      // No WHERE on d without a threshold: SQLite would compute every distance twice.
      .all(
        ...params,
        ...(q.minSimilarity === undefined ? [] : [1 - q.minSimilarity]),
        q.count,
      ) as Row[];
    return this.#hydrate(ranked.map((r) => ({ seq: r[0] as number })));
  }

  /**
   * The approximate search: the memories whose sign-bit codes are nearest the query's (see
   * CodeIndex), read again through the filter and ranked by their exact (float32) cosine
   * distance. When the filter admits fewer than `count` of them, once more with more
   * candidates; then null (a selective filter): the exact scan of the rows the filter
   * admits answers instead. Candidates that cover every code settle it exactly.
   */
  #approximateCandidates(
    q: Parameters<DriverSession['vectorCandidates']>[0],
  ): Array<{ seq: number }> | null {
    const index = this.#catchUpCodes();
    const words = Math.ceil(q.vector.length / 32);
    if (index.words !== words) return null;
    const query = CodeIndex.query(q.vector, words);
    const first = Math.max(CANDIDATES, q.count * 4);
    for (let k = first; ; k *= CANDIDATES_WIDEN) {
      const seqs = index.nearest(query, k);
      const params: unknown[] = [encodeVector(q.vector), json(seqs)];
      const where = memoryWhere(q.filter, params);
      // CROSS JOIN: the candidates drive, each a rowid lookup, whatever the filter's indexes.
      const ranked = this.#c
        .rows(
          `SELECT m.seq, coalesce(vec_distance_cosine(m.embedding, ?), 1.0) AS d
             FROM json_each(?) AS c CROSS JOIN cairn_memories m ON m.seq = c.value
            WHERE m.embedding IS NOT NULL AND ${where} ORDER BY d, m.seq LIMIT ?`,
        )
        .all(...params, q.count) as Row[];
      if (ranked.length === q.count || index.size <= k)
        return ranked.map((r) => ({ seq: r[0] as number }));
      if (k > first) return null;
    }
  }

  /** The connection's CodeIndex, brought up to the codes committed so far. */
  #catchUpCodes(): CodeIndex {
    const index = this.#c.codes;
    const top = this.#c
      .rows("SELECT seq FROM sqlite_sequence WHERE name = 'cairn_memory_codes'")
      .get() as Row | undefined;
    // The sequence never goes back in one file; behind what the copy saw, the copy is of
    // another database (a file replaced under this connection): read it again.
    if (((top?.[0] as number | undefined) ?? 0) < index.lastN) index.reset();
    index.apply(
      this.#c
        .rows('SELECT n, seq, code FROM cairn_memory_codes WHERE n > ? ORDER BY n')
        .iterate(index.lastN) as Iterable<Row>,
    );
    return index;
  }

  keywordCandidates(q: Parameters<DriverSession['keywordCandidates']>[0]): KeywordCandidate[] {
    const params: unknown[] = [];
    const where = memoryWhere(q.filter, params);
    // Any of the words, each quoted so that no user text is read as FTS5 syntax.
    const ftsQuery = q.terms.map((t) => `"${t.replaceAll('"', '""')}"`).join(' OR ');
    // bm25() is lower for better matches and never 0 (FTS5 floors a term's weight): its
    // negation is the positive relevance the front door scales.
    const ranked = this.#c
      .rows(
        `SELECT m.seq, bm25(cairn_memories_fts) AS rank
           FROM cairn_memories_fts JOIN cairn_memories m ON m.seq = cairn_memories_fts.rowid
          WHERE cairn_memories_fts MATCH ? AND ${where}
          ORDER BY rank, m.seq LIMIT ?`,
      )
      .all(ftsQuery, ...params, q.count) as Row[];
    return this.#hydrate(
      ranked.map((r) => ({ seq: r[0] as number, relevance: -(r[1] as number) })),
    );
  }

  getEmbeddingSpace(): EmbeddingSpace | null {
    const r = this.#c
      .sql('SELECT value FROM cairn_settings WHERE key = ?')
      .get(EMBEDDING_SPACE_KEY) as { value: string } | undefined;
    return r ? (JSON.parse(r.value) as EmbeddingSpace) : null;
  }

  setEmbeddingSpace(space: EmbeddingSpace): void {
    this.#run(
      'INSERT INTO cairn_settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
      EMBEDDING_SPACE_KEY,
      json(space),
    );
  }

  getCachedEmbeddings(embedderId: string, contentHashes: string[]): Map<string, number[]> {
    const out = new Map<string, number[]>();
    for (const r of this.#c
      .rows(
        `SELECT content_hash, embedding FROM cairn_embedding_cache WHERE embedder_id = ? AND content_hash ${IN_LIST}`,
      )
      .all(embedderId, json(contentHashes)) as Row[]) {
      out.set(r[0] as string, decodeVector(r[1] as Uint8Array, Float64Array));
    }
    return out;
  }

  putCachedEmbeddings(
    embedderId: string,
    entries: Array<{ contentHash: string; embedding: number[] }>,
  ): void {
    const put = this.#c.sql(
      `INSERT INTO cairn_embedding_cache (embedder_id, content_hash, embedding) VALUES (?, ?, ?)
       ON CONFLICT (embedder_id, content_hash) DO UPDATE SET embedding = excluded.embedding`,
    );
    for (const e of entries)
      put.run(embedderId, e.contentHash, encodeVector(e.embedding, Float64Array));
  }

  // ---------------------------------------------------------------- forgetting

  putTombstones(tombstones: Tombstone[]): void {
    const put = this.#c.sql(
      'INSERT INTO cairn_tombstones (kind, key, at) VALUES (?, ?, ?) ON CONFLICT (kind, key) DO NOTHING',
    );
    for (const t of tombstones) put.run(t.kind, t.key, t.at);
  }

  findTombstones(keys: TombstoneKey[]): Tombstone[] {
    const find = this.#c.sql(
      'SELECT kind, key, at FROM cairn_tombstones WHERE kind = ? AND key = ?',
    );
    const out: Tombstone[] = [];
    for (const k of keys) {
      const t = find.get(k.kind, k.key) as Tombstone | undefined;
      if (t) out.push({ kind: t.kind, key: t.key, at: t.at });
    }
    return out;
  }

  // ---------------------------------------------------------------- data keys

  getDataKeys(tenants: Tenant[]): DataKeyRow[] {
    const find = this.#c.sql(`${DATA_KEYS} WHERE kind = ? AND key = ?`);
    const out: DataKeyRow[] = [];
    for (const t of tenants) {
      const row = find.get(t.kind, t.key) as DataKeyRow | undefined;
      if (row) out.push({ ...row });
    }
    return out;
  }

  insertDataKey(row: DataKeyRow): boolean {
    return (
      this.#c
        .sql(
          `INSERT INTO cairn_data_keys (kind, key, key_id, wrapped, created_at)
           VALUES (@kind, @key, @keyId, @wrapped, @createdAt) ON CONFLICT (kind, key) DO NOTHING`,
        )
        .run(row).changes === 1
    );
  }

  deleteDataKeys(tenants: Tenant[]): number {
    const del = this.#c.sql('DELETE FROM cairn_data_keys WHERE kind = ? AND key = ?');
    let n = 0;
    for (const t of tenants) n += del.run(t.kind, t.key).changes;
    return n;
  }

  listDataKeys(after: Tenant | null, limit: number): DataKeyRow[] {
    const rows =
      after === null
        ? this.#c.sql(`${DATA_KEYS} ORDER BY kind, key LIMIT ?`).all(limit)
        : this.#c
            .sql(`${DATA_KEYS} WHERE (kind, key) > (?, ?) ORDER BY kind, key LIMIT ?`)
            .all(after.kind, after.key, limit);
    return (rows as DataKeyRow[]).map((r) => ({ ...r }));
  }

  replaceDataKey(row: DataKeyRow, expectedWrapped: string): boolean {
    return (
      this.#c
        .sql(
          `UPDATE cairn_data_keys SET key_id = @keyId, wrapped = @wrapped
           WHERE kind = @kind AND key = @key AND wrapped = @expectedWrapped`,
        )
        .run({ ...row, expectedWrapped }).changes === 1
    );
  }

  // ---------------------------------------------------------------- sweeping

  sweepFacts(threadIds: string[]): SweepFacts {
    // Write sessions exclude each other: nothing to lock.
    const ids = json(threadIds);
    const ofThreads = `thread_id ${IN_LIST} ORDER BY thread_id, seq`;
    return {
      threads: this.#list(THREADS, `WHERE id ${IN_LIST}`, ids),
      branches: this.#list(BRANCHES, `WHERE ${ofThreads}`, ids),
      checkpoints: this.#list(CHECKPOINTS, `WHERE ${ofThreads}`, ids),
      messages: this.#raw(
        `SELECT ${MESSAGE_COLUMNS} FROM cairn_messages WHERE id IN (
           SELECT head_message_id FROM cairn_branches WHERE thread_id ${IN_LIST}
           UNION SELECT fork_message_id FROM cairn_branches WHERE thread_id ${IN_LIST}
           UNION SELECT message_id FROM cairn_checkpoints WHERE thread_id ${IN_LIST})`,
        messageFromRow,
        ids,
        ids,
        ids,
      ),
      leases: this.#list(LEASES, `WHERE key ${IN_LIST}`, json(threadIds.map(runLeaseKey))),
      running: this.#raw(
        `SELECT DISTINCT thread_id FROM cairn_turns WHERE thread_id ${IN_LIST} AND status = 'running'`,
        (r) => r[0] as string,
        ids,
      ),
    };
  }

  getLatestStateCommits(queries: BranchCommitQuery[]): Array<StateCommit | null> {
    // One statement: each query finds its commit's rowid by a backward scan of the key.
    const rows = this.#c
      .sql(
        `WITH q(i, b, s, v, d) AS (
           SELECT key, value ->> '$[0]', value ->> '$[1]', value ->> '$[2]', value ->> '$[3]'
           FROM json_each(?))
         SELECT q.i AS i, ${COMMITS.columns} FROM q JOIN cairn_state_commits ON cairn_state_commits.rowid = (
           SELECT c.rowid FROM cairn_state_commits c
           WHERE c.branch_id = q.b AND (q.s = 0 OR c.snapshot IS NOT NULL)
             AND (q.v IS NULL OR c.version <= q.v)
             AND (q.d IS NULL OR coalesce(c.message_depth, -1) <= q.d)
           ORDER BY c.version DESC LIMIT 1)`,
      )
      .all(
        json(
          queries.map((q) => [
            q.branchId,
            q.withSnapshot ? 1 : 0,
            q.maxVersion ?? null,
            q.maxMessageDepth ?? null,
          ]),
        ),
      ) as Fields[];
    const out: Array<StateCommit | null> = queries.map(() => null);
    for (const r of rows) out[r.i as number] = COMMITS.decode(r);
    return out;
  }

  sweepDelete(d: SweepDeletes): SweepDeleted {
    const turns =
      d.turns.length === 0
        ? 0
        : this.#run(
            `DELETE FROM cairn_turns WHERE status <> 'running' AND id IN (
               SELECT t.id FROM json_each(?) q JOIN cairn_turns t
                 ON t.thread_id = q.value ->> '$[0]' AND t.started_at < q.value ->> '$[1]')`,
            json(d.turns.map((t) => [t.threadId, t.before])),
          );
    let stateCommits = 0;
    let branches: string[] = [];
    if (d.branches.length > 0) {
      const ids = json(d.branches);
      stateCommits += this.#run(`DELETE FROM cairn_state_commits WHERE branch_id ${IN_LIST}`, ids);
      branches = this.#raw(
        `DELETE FROM cairn_branches WHERE id ${IN_LIST} RETURNING id`,
        (r) => r[0] as string,
        ids,
      );
    }
    if (d.stateCuts.length > 0)
      stateCommits += this.#run(
        `DELETE FROM cairn_state_commits WHERE rowid IN (
           SELECT c.rowid FROM json_each(?) q JOIN cairn_state_commits c
             ON c.branch_id = q.value ->> '$[0]' AND c.version < q.value ->> '$[1]')`,
        json(d.stateCuts.map((c) => [c.branchId, c.beforeVersion])),
      );
    return { turns, branches, stateCommits };
  }

  countThreadRows(threadId: string): ThreadRowCounts {
    return this.#c
      .sql(
        `SELECT (SELECT count(*) FROM cairn_messages WHERE thread_id = @t) AS messages,
                (SELECT count(*) FROM cairn_branches WHERE thread_id = @t) AS branches,
                (SELECT count(*) FROM cairn_state_commits WHERE branch_id IN
                   (SELECT id FROM cairn_branches WHERE thread_id = @t)) AS stateCommits,
                (SELECT count(*) FROM cairn_checkpoints WHERE thread_id = @t) AS checkpoints,
                (SELECT count(*) FROM cairn_turns WHERE thread_id = @t) AS turns`,
      )
      .get({ t: threadId }) as ThreadRowCounts;
  }

  memoryHashesInUse(contentHashes: string[]): string[] {
    const rows = this.#c
      .rows(`SELECT DISTINCT content_hash FROM cairn_memories WHERE content_hash ${IN_LIST}`)
      .all(json(contentHashes)) as Row[];
    return rows.map((r) => r[0] as string);
  }

  deleteLeases(keys: string[]): number {
    return this.#run(`DELETE FROM cairn_leases WHERE key ${IN_LIST}`, json(keys));
  }

  deleteCachedEmbeddings(contentHashes: string[]): number {
    return this.#run(
      `DELETE FROM cairn_embedding_cache WHERE content_hash ${IN_LIST}`,
      json(contentHashes),
    );
  }

  // ---------------------------------------------------------------- session

  savepoint<T>(fn: () => Promise<T>): Promise<T> {
    return withSavepoint((sql) => this.#c.sql(sql).run(), 'cairn_call', fn);
  }
}

/**
 * The SQLite driver: sessions on the process's one connection to the file, one at a
 * time (in call order, across every store on that connection). A write session is one
 * `BEGIN IMMEDIATE` transaction; waits for another process's lock run on timers.
 */
export class SqliteDriver implements Driver {
  readonly capabilities: StoreCapabilities;
  /** The stores on one connection hear each other's changes. */
  readonly changeScope: Connection;
  readonly #conn: Connection;
  readonly #session: SqliteSession;
  readonly #busyTimeoutMs: number;

  constructor(conn: Connection, busyTimeoutMs: number, vectorSearch: 'auto' | 'exact') {
    this.#conn = this.changeScope = conn;
    this.#session = new SqliteSession(conn, vectorSearch === 'auto');
    this.#busyTimeoutMs = busyTimeoutMs;
    const durable = !conn.db.memory;
    this.capabilities = Object.freeze({
      vectorSearch: vectorSearch === 'auto' ? 'approximate' : 'exact',
      notifications: 'process',
      multiProcess: durable,
      concurrentTransactions: false,
      durable,
    } as const);
  }

  run<T>(fn: (session: DriverSession) => Promise<T>, options: SessionOptions): Promise<T> {
    const c = this.#conn;
    const session = this.#session;
    // Lock waits: the first try is immediate; only a lock held elsewhere waits, on timers.
    const retry =
      <R>(attempt: () => R | Promise<R>) =>
      (e: unknown) => {
        if (!isBusy(e)) throw e;
        return untilUnlocked(attempt, this.#busyTimeoutMs);
      };
    // A read changes nothing: when another process's lock stops it, it is retried whole.
    if (!options.write) return c.lock.run(() => fn(session).catch(retry(() => fn(session))));
    return c.lock.run(async () => {
      const begin = () => c.sql('BEGIN IMMEDIATE').run();
      try {
        begin();
      } catch (e) {
        await retry(begin)(e);
      }
      try {
        const result = await fn(session);
        c.sql('COMMIT').run();
        return result;
      } catch (e) {
        if (c.db.inTransaction) c.sql('ROLLBACK').run();
        throw e;
      }
    });
  }

  /**
   * After a forget: the keyword index (after a forget of memories) merged into one segment (FTS5 keeps a deleted
   * memory's terms in older segments until they merge; the pages freed are zeroed, see
   * `secure_delete`), then the WAL copied into the file and truncated to nothing, so
   * that the frames holding the deleted rows' old pages are gone. A checkpoint that
   * another process's open read holds back is retried until `busyTimeoutMs`.
   */
  async scrub(what: { memories: boolean }): Promise<void> {
    const c = this.#conn;
    if (what.memories)
      await this.run(
        async () => {
          c.sql("INSERT INTO cairn_memories_fts (cairn_memories_fts) VALUES ('optimize')").run();
        },
        { write: true },
      );
    if (c.db.memory) return;
    await c.lock.run(() =>
      untilUnlocked(() => {
        const [r] = c.db.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>;
        if (r && r.busy !== 0)
          throw Object.assign(new Error('the WAL checkpoint was held back by a reader'), {
            code: 'SQLITE_BUSY',
          });
      }, this.#busyTimeoutMs),
    );
  }

  async migrate(): Promise<void> {
    await this.#conn.lock.run(() =>
      untilUnlocked(() => runMigrations(this.#conn.db), this.#busyTimeoutMs),
    );
  }

  async close(): Promise<void> {
    this.#conn.release();
  }

  translateError(error: unknown): CairnError | undefined {
    return isBusy(error) ? lockTimeout(error) : undefined;
  }
}
