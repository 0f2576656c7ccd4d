import type {
  Branch,
  Checkpoint,
  Entry,
  JsonObject,
  Memory,
  Message,
  StateCommit,
  Thread,
  Turn,
} from '@cairn/core';
import { type EmbeddingSpace, runLeaseKey } from '@cairn/store';
import type {
  BranchCommitQuery,
  DataKeyRow,
  DriverMemoryFilter,
  DriverSession,
  KeywordCandidate,
  LatestCommitConditions,
  MemoryRow,
  MessageBatchLookup,
  MessageJump,
  SqlTable,
  StateCommitDraft,
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
import { BM25, branchAnchor, chainSql, memoryFilterSql } from '@cairn/store/adapter';
import { searchQuery, searchVector } from './keyword-index.js';
import { ident, literal, type VectorSupport } from './migrations.js';
import type { Queryable, Row } from './queryable.js';
import {
  BRANCH,
  CHECKPOINT,
  EMBEDDING_SPACE,
  ENTRY,
  floatArray,
  LEASE,
  MEMORY,
  MESSAGE,
  MESSAGE_LINK,
  norm,
  storedData,
  THREAD,
  TURN,
  vectorLiteral,
} from './rows.js';
import { appendTo, commitsOf, keptSegments, rememberedTail, type Segment } from './state-log.js';

/** A state segment's columns (of alias `g`) as `Segment` fields. */
const SEGMENT_SUMMARY =
  'g.first_version AS "firstVersion", g.last_version AS "lastVersion", g.has_snapshot AS "hasSnapshot", g.min_depth AS "minDepth"';
const SEGMENT_COLUMNS = `${SEGMENT_SUMMARY}, g.commits`;

/** What reads of the state log need of a segment. */
const LOG_COLUMNS = 'thread_id, first_version, commits';

/** Every segment of the state log, sealed or the tails, as one relation (Postgres pushes conditions into both). */
const stateLog = (s: string) =>
  `(SELECT branch_id, last_version, ${LOG_COLUMNS} FROM ${s}.state_segments UNION ALL SELECT branch_id, last_version, ${LOG_COLUMNS} FROM ${s}.state_tail) g`;

/** Whether `c` meets `getLatestStateCommit`'s conditions. */
const matchesLatest = (c: StateCommit, q: LatestCommitConditions) =>
  (q.maxVersion === undefined || c.version <= q.maxVersion) &&
  (!q.withSnapshot || c.snapshot !== null) &&
  (q.maxMessageDepth === undefined || (c.messageDepth ?? -1) <= q.maxMessageDepth);

/** What every session of one store shares. */
export interface SessionContext {
  /** The quoted schema. */
  s: string;
  /** pgvector's quoted schema when the HNSW path is in use, else null. */
  vector: VectorSupport | null;
  /** The embedding width for which the HNSW index is known to exist. */
  indexedWidth: number | null;
  /** The NOTIFY channel. */
  channel: string;
}

/** The advisory-lock class of `lockSubjects` (the migrations' is 2061751913). */
const SUBJECT_LOCK_CLASS = 2061751914;

/**
 * The rows of `table` matching `where` for each element `k.v` of a text[] parameter, read
 * as one index probe per element (a `LATERAL … LIMIT 1` subquery) however many there are
 * and whatever the plan: as a join or an `= ANY`, a generic plan made while the table
 * was small (or a bad estimate) scans or hashes the whole table at every call, so a
 * lookup of a few rows costs in proportion to the table.
 */
const probeEach = (table: string, param: string, where: string, columns: string, lock = '') =>
  `SELECT x.* FROM unnest(${param}::text[]) AS k(v)
     CROSS JOIN LATERAL (SELECT ${columns} FROM ${table} WHERE ${where} LIMIT 1 ${lock}) x`;

/** One session's SQL, over a connection (read) or an open transaction (write). */
export class PostgresSession implements DriverSession {
  readonly #q: Queryable;
  readonly #c: SessionContext;
  readonly #s: string;

  constructor(q: Queryable, context: SessionContext) {
    this.#q = q;
    this.#c = context;
    this.#s = context.s;
  }

  async #rows(sql: string, params: unknown[] = []): Promise<Row[]> {
    return (await this.#q.query(sql, params)).rows;
  }

  async #one<T>(sql: string, params: unknown[], map: (r: Row) => T): Promise<T | null> {
    const row = (await this.#rows(sql, params))[0];
    return row ? map(row) : null;
  }

  /** The first row of `t` meeting `where`, decoded. */
  #find<T>(t: SqlTable<T>, where: string, params: unknown[]) {
    return this.#one(
      `SELECT ${t.columns} FROM ${this.#s}.${t.name} WHERE ${where}`,
      params,
      t.decode,
    );
  }

  async #count(sql: string, params: unknown[]): Promise<number> {
    return (await this.#q.query(sql, params)).rowCount;
  }

  /** Inserts `value` as a row of `t`, the statement ending with `rest` (ON CONFLICT, RETURNING). */
  #insert<T>(t: SqlTable<T>, value: T, rest: string) {
    const sql = t.insert(`${this.#s}.${t.name}`, (_, i) => `$${i + 1}`);
    return this.#q.query(`${sql} ${rest}`, t.values(value));
  }

  savepoint<T>(fn: () => Promise<T>): Promise<T> {
    return this.#q.transaction(fn);
  }

  /**
   * NOTIFY, delivered by Postgres at commit; identical payloads of one transaction fold.
   * Statements without parameters, so that a pool's transaction sends them with its COMMIT.
   */
  async publish(payloads: string[]): Promise<void> {
    const channel = ident(this.#c.channel);
    await this.#q.exec(payloads.map((p) => `NOTIFY ${channel}, ${literal(p)}`).join('; '));
  }

  // ---------------------------------------------------------------- threads

  async insertThread(t: Thread): Promise<boolean> {
    return (await this.#insert(THREAD, t, 'ON CONFLICT (id) DO NOTHING')).rowCount > 0;
  }

  getThread(id: string): Promise<Thread | null> {
    return this.#find(THREAD, 'id = $1', [id]);
  }

  updateThread(
    id: string,
    patch: { title?: string | null; metadata?: JsonObject },
    updatedAt: number,
  ): Promise<Thread | null> {
    return this.#one(
      `UPDATE ${this.#s}.threads SET title = CASE WHEN $2 THEN $3 ELSE title END,
         metadata = COALESCE($4::jsonb, metadata), updated_at = $5
       WHERE id = $1 RETURNING ${THREAD.columns}`,
      [
        id,
        patch.title !== undefined,
        patch.title ?? null,
        patch.metadata === undefined ? null : JSON.stringify(patch.metadata),
        updatedAt,
      ],
      THREAD.decode,
    );
  }

  async listThreads(q: {
    resourceId?: string;
    beforeSeq?: number;
    limit: number;
  }): Promise<ThreadRow[]> {
    // Two statements rather than `$1 IS NULL OR …`, so that a resource's threads are a
    // walk of its index (resource_id, seq) under a generic plan, not a scan of every thread.
    const before = q.beforeSeq ?? Number.MAX_SAFE_INTEGER;
    const [where, params] =
      q.resourceId === undefined
        ? ['seq < $1', [before, q.limit]]
        : ['resource_id = $1 AND seq < $2', [q.resourceId, before, q.limit]];
    const rows = await this.#rows(
      `SELECT ${THREAD.columns}, seq FROM ${this.#s}.threads
       WHERE ${where} ORDER BY seq DESC LIMIT $${params.length}`,
      params,
    );
    return rows.map((r) => ({ thread: THREAD.decode(r), seq: Number(r.seq) }));
  }

  async deleteThread(id: string): Promise<boolean> {
    // The thread row first: that waits for message batches being added to it (they
    // hold a key share lock on it). Branches, their commits and checkpoints cascade;
    // messages and turns carry no foreign key to the thread.
    if ((await this.#count(`DELETE FROM ${this.#s}.threads WHERE id = $1`, [id])) === 0)
      return false;
    await this.#q.query(`DELETE FROM ${this.#s}.messages WHERE thread_id = $1`, [id]);
    await this.#q.query(`DELETE FROM ${this.#s}.turns WHERE thread_id = $1`, [id]);
    return true;
  }

  /** Waits for the message batches being added to the thread (they hold a key share lock). */
  lockThread(id: string): Promise<Thread | null> {
    return this.#find(THREAD, 'id = $1 FOR UPDATE', [id]);
  }

  // ---------------------------------------------------------------- messages

  async latestMessageAt(threadId: string): Promise<number | null> {
    const sql = `SELECT max(created_at) AS t FROM ${this.#s}.messages WHERE thread_id = $1`;
    return ((await this.#rows(sql, [threadId]))[0]?.t as number | null) ?? null;
  }

  /**
   * Called in write sessions: the threads found stay key-share locked until commit,
   * so none is deleted under the batch (messages carry no per-row foreign key).
   */
  async lookupMessageBatch(ids: {
    threadIds: string[];
    messageIds: string[];
  }): Promise<MessageBatchLookup> {
    const s = this.#s;
    // One index probe per id and per jump: each message is read by a LATERAL subquery
    // whose LIMIT 1 keeps the planner from flattening it into a join. As a join, a plan
    // (a generic one made for the prepared statement, or a bad row estimate for the
    // recursive walk) hashes every row of the messages table, so a call cost time in
    // proportion to the table instead of the batch.
    const link = (id: string) =>
      `CROSS JOIN LATERAL (SELECT m.id, m.thread_id, m.depth, m.jump_id, m.jump_depth
         FROM ${s}.messages m WHERE m.id = ${id} LIMIT 1) m`;
    const rows = await this.#rows(
      `WITH RECURSIVE th AS (
         SELECT t.id FROM unnest($1::text[]) AS k(id)
           CROSS JOIN LATERAL (SELECT id FROM ${s}.threads t WHERE t.id = k.id LIMIT 1 FOR KEY SHARE) t),
       spine AS (
         SELECT m.* FROM unnest($2::text[]) AS k(id) ${link('k.id')}
         UNION
         SELECT m.* FROM spine p ${link('p.jump_id')})
       SELECT id, NULL AS thread_id, NULL::integer AS depth, NULL AS jump_id, NULL::integer AS jump_depth FROM th
       UNION ALL
       SELECT id, thread_id, depth, jump_id, jump_depth FROM spine`,
      [ids.threadIds, ids.messageIds],
    );
    const found: MessageBatchLookup = { threadIds: new Set(), messages: new Map() };
    for (const r of rows) {
      if (r.thread_id === null) found.threadIds.add(r.id as string);
      else found.messages.set(r.id as string, MESSAGE_LINK.decode(r));
    }
    return found;
  }

  async insertMessages(messages: Message[], jumps: MessageJump[]): Promise<void> {
    // On a pipelining connection, sent without waiting: a failure (a message id taken
    // meanwhile) is reported by the session's next statement or its commit.
    await this.#q.send(this.#insertMessagesSql(), insertMessagesParams(messages, jumps));
  }

  /**
   * One statement: the UPDATE of moveHead cannot see the CTE's rows, so it tests the
   * thread, which it locks as `lookupMessageBatch` does (a batch of roots comes without
   * that lookup).
   */
  insertMessagesMovingHead(
    messages: Message[],
    jumps: MessageJump[],
    branchId: string,
    expectedHeadId: string | null,
  ): Promise<Branch | null> {
    const head = messages.at(-1)!;
    return this.#one(
      `WITH inserted AS (${this.#insertMessagesSql()}),
       th AS (SELECT t.id FROM ${this.#s}.threads t WHERE t.id = $15 FOR KEY SHARE)
       UPDATE ${this.#s}.branches b SET head_message_id = $12
       WHERE b.id = $13 AND b.head_message_id IS NOT DISTINCT FROM $14::text AND b.thread_id = $15
         AND EXISTS (SELECT 1 FROM th)
       RETURNING ${BRANCH.columns}`,
      [...insertMessagesParams(messages, jumps), head.id, branchId, expectedHeadId, head.threadId],
      BRANCH.decode,
    );
  }

  #insertMessagesSql(): string {
    return `INSERT INTO ${this.#s}.messages (id, thread_id, parent_id, role, type, data, packed, created_at, depth, jump_id, jump_depth)
       SELECT id, thread_id, parent_id, role, type, data::jsonb, packed, created_at, depth, jump_id, jump_depth
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[], $8::int[],
                   $9::text[], $10::int[], $11::bytea[])
         AS u(id, thread_id, parent_id, role, type, data, created_at, depth, jump_id, jump_depth, packed)`;
  }

  getMessage(id: string): Promise<Message | null> {
    return this.#find(MESSAGE, 'id = $1', [id]);
  }

  async listMessages(threadId: string): Promise<Message[]> {
    const rows = await this.#rows(
      `SELECT ${MESSAGE.columns} FROM ${this.#s}.messages WHERE thread_id = $1 ORDER BY depth, id COLLATE "C"`,
      [threadId],
    );
    return rows.map(MESSAGE.decode);
  }

  async getChain(headId: string, minDepth: number, maxDepth: number): Promise<Message[]> {
    const p = { head: '$1', min: '$2', max: '$3' };
    const sql = chainSql(`${this.#s}.messages`, MESSAGE.columns, p, 'lateral');
    const rows = await this.#rows(`${sql} ORDER BY depth`, [headId, minDepth, maxDepth]);
    return rows.map(MESSAGE.decode);
  }

  // ---------------------------------------------------------------- branches

  insertBranch(b: Omit<Branch, 'seq'>): Promise<Branch | null> {
    return this.#one(
      `INSERT INTO ${this.#s}.branches (id, thread_id, name, head_message_id, is_active, created_at, fork_message_id, parent_branch_id)
       VALUES ($1, $2, $3, $4, $8, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING ${BRANCH.columns}`,
      [
        b.id,
        b.threadId,
        b.name,
        b.headMessageId,
        b.createdAt,
        b.forkMessageId,
        b.parentBranchId,
        b.isActive,
      ],
      BRANCH.decode,
    );
  }

  /** One statement: the branch is inserted only when the thread was (data-modifying CTEs). */
  async insertThreadWithBranch(
    t: Thread,
    b: Omit<Branch, 'seq'>,
  ): Promise<{ thread: boolean; branch: Branch | null }> {
    const s = this.#s;
    const thread = THREAD.insert(`${s}.threads`, (_, i) => `$${i + 1}`);
    const [row] = await this.#rows(
      `WITH t AS (${thread} ON CONFLICT (id) DO NOTHING RETURNING id),
       b AS (
         INSERT INTO ${s}.branches (id, thread_id, name, head_message_id, is_active, created_at, fork_message_id, parent_branch_id)
         SELECT $7::text, t.id, $8::text, $9::text, $10::boolean, $11::float8, $12::text, $13::text FROM t
         ON CONFLICT DO NOTHING RETURNING ${BRANCH.columns})
       SELECT EXISTS (SELECT 1 FROM t) AS thread_inserted, b.* FROM (VALUES (1)) AS one LEFT JOIN b ON true`,
      [
        ...THREAD.values(t),
        b.id,
        b.name,
        b.headMessageId,
        b.isActive,
        b.createdAt,
        b.forkMessageId,
        b.parentBranchId,
      ],
    );
    return {
      thread: row!.thread_inserted === true,
      branch: row!.id === null ? null : BRANCH.decode(row!),
    };
  }

  getBranchById(id: string): Promise<Branch | null> {
    return this.#find(BRANCH, 'id = $1', [id]);
  }

  getBranch(threadId: string, name: string): Promise<Branch | null> {
    return this.#find(BRANCH, 'thread_id = $1 AND name = $2', [threadId, name]);
  }

  async listBranches(threadId: string): Promise<Branch[]> {
    const rows = await this.#rows(
      `SELECT ${BRANCH.columns} FROM ${this.#s}.branches WHERE thread_id = $1 ORDER BY seq`,
      [threadId],
    );
    return rows.map(BRANCH.decode);
  }

  getActiveBranch(threadId: string): Promise<Branch | null> {
    return this.#find(BRANCH, 'thread_id = $1 AND is_active', [threadId]);
  }

  async setActiveBranch(threadId: string, branchId: string): Promise<Branch | null> {
    const s = this.#s;
    // The thread's row lock serializes activations; two statements, because the
    // one-active-branch index is checked row by row.
    await this.#q.query(`SELECT 1 FROM ${s}.threads WHERE id = $1 FOR UPDATE`, [threadId]);
    await this.#q.query(
      `UPDATE ${s}.branches SET is_active = false WHERE thread_id = $1 AND is_active AND id <> $2`,
      [threadId, branchId],
    );
    return this.#one(
      `UPDATE ${s}.branches SET is_active = true WHERE id = $1 AND thread_id = $2 RETURNING ${BRANCH.columns}`,
      [branchId, threadId],
      BRANCH.decode,
    );
  }

  moveHead(branchId: string, expectedHeadId: string | null, newHeadId: string) {
    const s = this.#s;
    return this.#one(
      `UPDATE ${s}.branches b SET head_message_id = $3
       WHERE b.id = $1 AND b.head_message_id IS NOT DISTINCT FROM $2::text
         AND EXISTS (SELECT 1 FROM ${s}.messages m WHERE m.id = $3 AND m.thread_id = b.thread_id)
       RETURNING ${BRANCH.columns}`,
      [branchId, expectedHeadId, newHeadId],
      BRANCH.decode,
    );
  }

  /** The row lock moveHead's UPDATE takes; lock_timeout (transaction-local) bounds the wait. */
  async deleteBranch(branchId: string): Promise<number | null> {
    // Its state log goes by ON DELETE CASCADE; counted first.
    const rows = await this.#rows(
      `SELECT (SELECT COALESCE(sum(last_version - first_version + 1), 0) FROM ${this.#s}.state_segments WHERE branch_id = $1)
            + (SELECT COALESCE(sum(last_version - first_version + 1), 0) FROM ${this.#s}.state_tail WHERE branch_id = $1) AS n`,
      [branchId],
    );
    const deleted = await this.#count(`DELETE FROM ${this.#s}.branches WHERE id = $1`, [branchId]);
    return deleted > 0 ? Number(rows[0]!.n) : null;
  }

  async lockBranch(branchId: string, timeoutMs: number): Promise<Branch | null> {
    // lock_timeout 0 would mean no bound at all, so "no wait" is 1 ms.
    await this.#q.query(`SELECT set_config('lock_timeout', $1, true)`, [
      `${Math.max(1, timeoutMs)}ms`,
    ]);
    return this.#find(BRANCH, 'id = $1 FOR NO KEY UPDATE', [branchId]);
  }

  // ---------------------------------------------------------------- checkpoints

  async putCheckpoint(c: Checkpoint): Promise<Checkpoint> {
    const { rows } = await this.#insert(
      CHECKPOINT,
      c,
      `ON CONFLICT (thread_id, name) DO UPDATE SET message_id = EXCLUDED.message_id
       RETURNING ${CHECKPOINT.columns}`,
    );
    return CHECKPOINT.decode(rows[0]!);
  }

  getCheckpoint(threadId: string, name: string): Promise<Checkpoint | null> {
    return this.#find(CHECKPOINT, 'thread_id = $1 AND name = $2', [threadId, name]);
  }

  getCheckpointById(id: string): Promise<Checkpoint | null> {
    return this.#find(CHECKPOINT, 'id = $1', [id]);
  }

  async listCheckpoints(threadId: string): Promise<Checkpoint[]> {
    const rows = await this.#rows(
      `SELECT ${CHECKPOINT.columns} FROM ${this.#s}.checkpoints WHERE thread_id = $1 ORDER BY seq`,
      [threadId],
    );
    return rows.map(CHECKPOINT.decode);
  }

  async deleteCheckpoint(threadId: string, name: string): Promise<boolean> {
    const sql = `DELETE FROM ${this.#s}.checkpoints WHERE thread_id = $1 AND name = $2`;
    return (await this.#count(sql, [threadId, name])) > 0;
  }

  // ---------------------------------------------------------------- state

  async appendStateCommit(c: StateCommitDraft, expected: number): Promise<StateCommit | null> {
    const s = this.#s;
    // The branch's row lock (the one lockBranch takes) makes appends to a branch take turns.
    // Had this waited for it, the tail read with it may predate the append that held it;
    // the write below then finds the log moved on and writes nothing.
    // The tail this process wrote last, if it is still the branch's (its hash says so), need
    // not travel back: a tail is up to ~1.9 KB, twice that as text, at every append.
    const mine = rememberedTail(c.branchId);
    const found = await this.#one(
      `SELECT b.thread_id AS "threadId", m.depth, m.id IS NOT NULL AS "hasMessage", ${
        mine ? `${SEGMENT_SUMMARY}, sha256(g.commits) AS "sha256"` : SEGMENT_COLUMNS
      }
       FROM ${s}.branches b
       LEFT JOIN ${s}.messages m ON m.id = $2::text AND m.thread_id = b.thread_id
       LEFT JOIN ${s}.state_tail g ON g.branch_id = b.id
       WHERE b.id = $1 FOR NO KEY UPDATE OF b`,
      [c.branchId, c.messageId],
      (r) => r,
    );
    if (!found || (c.messageId !== null && !found.hasMessage)) return null;
    const tail = found.firstVersion === null ? null : (found as unknown as Segment);
    if ((tail?.lastVersion ?? 0) !== expected) return null;
    if (tail && mine) {
      // Another process wrote the tail since: read it (the branch's row lock holds it still).
      tail.commits =
        Buffer.compare(found.sha256 as Uint8Array, mine.sha256) === 0
          ? mine.commits
          : ((await this.#one(
              `SELECT commits FROM ${s}.state_tail WHERE branch_id = $1`,
              [c.branchId],
              (r) => r.commits,
            )) as Uint8Array);
    }
    const commit: StateCommit = {
      ...c,
      threadId: found.threadId as string,
      version: expected + 1,
      messageDepth: c.messageId === null ? null : (found.depth as number),
    };
    const { tail: next, sealed } = appendTo(tail, commit);
    const params = [
      c.branchId,
      next.firstVersion,
      next.lastVersion,
      next.hasSnapshot,
      next.minDepth,
      next.commits,
    ];
    const update = `UPDATE ${s}.state_tail SET first_version = $2, last_version = $3, has_snapshot = $4,
         min_depth = $5, commits = $6 WHERE branch_id = $1 AND last_version = $7`;
    let written: number;
    if (!tail)
      written = await this.#count(
        `INSERT INTO ${s}.state_tail (branch_id, first_version, last_version, has_snapshot, min_depth, commits, thread_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
        [...params, commit.threadId],
      );
    else if (!sealed) written = await this.#count(update, [...params, expected]);
    // The tail moves to the segments as it was; the new commit starts the next one.
    else
      written = await this.#count(
        `WITH moved AS (${update} RETURNING 1)
         INSERT INTO ${s}.state_segments (branch_id, first_version, last_version, has_snapshot, min_depth, commits, thread_id)
         SELECT $1, $8, $7, $9, $10, $11, $12 WHERE EXISTS (SELECT FROM moved)`,
        [
          ...params,
          expected,
          sealed.firstVersion,
          sealed.hasSnapshot,
          sealed.minDepth,
          sealed.commits,
          commit.threadId,
        ],
      );
    // The caller gets objects of its own, as from any read.
    return written > 0 ? structuredClone(commit) : null;
  }

  async deleteStateCommits(branchId: string, beforeVersion: number): Promise<number> {
    const s = this.#s;
    const size = 'last_version - first_version + 1 AS n';
    const sum = (rows: Row[]) => rows.reduce((n, r) => n + Number(r.n), 0);
    // Whole segments below the cut, then the one that straddles it (a sealed one or the
    // tail), rewritten without the commits below: its later versions keep their numbers.
    let deleted = sum(
      await this.#rows(
        `DELETE FROM ${s}.state_segments WHERE branch_id = $1 AND last_version < $2 RETURNING ${size}`,
        [branchId, beforeVersion],
      ),
    );
    for (const table of ['state_segments', 'state_tail'] as const) {
      const rows = await this.#rows(
        `DELETE FROM ${s}.${table} WHERE branch_id = $1 AND first_version < $2 RETURNING ${LOG_COLUMNS}, last_version`,
        [branchId, beforeVersion],
      );
      for (const r of rows) {
        const all = this.#commitsOf(branchId, r);
        const kept = all.filter((c) => c.version >= beforeVersion);
        deleted += all.length - kept.length;
        const segments = keptSegments(kept, table === 'state_tail');
        const tail = table === 'state_tail' ? segments.pop() : undefined;
        for (const g of segments) await this.#insertSegment('state_segments', branchId, r, g);
        if (tail) await this.#insertSegment('state_tail', branchId, r, tail);
      }
    }
    return deleted;
  }

  #insertSegment(table: string, branchId: string, r: Row, g: Segment) {
    return this.#q.query(
      `INSERT INTO ${this.#s}.${table} (branch_id, first_version, last_version, has_snapshot, min_depth, commits, thread_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [branchId, g.firstVersion, g.lastVersion, g.hasSnapshot, g.minDepth, g.commits, r.thread_id],
    );
  }

  async latestStateVersion(branchId: string): Promise<number> {
    const rows = await this.#rows(
      `SELECT last_version AS v FROM ${this.#s}.state_tail WHERE branch_id = $1`,
      [branchId],
    );
    return (rows[0]?.v as number | undefined) ?? 0;
  }

  async getStateCommits(branchId: string, from: number, to: number): Promise<StateCommit[]> {
    const s = this.#s;
    // From the segment holding `from` (the last one starting at or before it) to `to`. A
    // segment that ends before `from` is not read: a reader asking for what is new since its
    // last read (the tail it has, every turn) gets no row, not the tail to unpack and drop.
    const rows = await this.#rows(
      `SELECT ${LOG_COLUMNS} FROM ${stateLog(s)}
       WHERE branch_id = $1 AND first_version <= $3::bigint AND last_version >= $2::bigint
         AND first_version >= COALESCE(
         (SELECT max(first_version) FROM ${stateLog(s)} WHERE branch_id = $1 AND first_version <= $2::bigint), 0)
       ORDER BY first_version`,
      [branchId, from, to],
    );
    return rows
      .flatMap((r) => this.#commitsOf(branchId, r))
      .filter((c) => c.version >= from && c.version <= to);
  }

  async getLatestStateCommit(
    branchId: string,
    q: LatestCommitConditions,
  ): Promise<StateCommit | null> {
    const matches = (c: StateCommit) => matchesLatest(c, q);
    // Newest first, a few segments at a time: those whose summary allows a match.
    const PAGE = 4;
    const where = `WHERE branch_id = $1 AND first_version < $2::bigint AND (NOT $3 OR has_snapshot)
      AND ($4::bigint IS NULL OR min_depth <= $4::bigint)`;
    for (let below = (q.maxVersion ?? Number.MAX_SAFE_INTEGER) + 1; ; ) {
      // The sealed ones by their own ORDER BY and LIMIT: a backward scan of their key, not a
      // read of all a branch's segments, whatever Postgres estimates of the union.
      const rows = await this.#rows(
        `(SELECT ${LOG_COLUMNS} FROM ${this.#s}.state_tail ${where})
         UNION ALL
         (SELECT ${LOG_COLUMNS} FROM ${this.#s}.state_segments ${where} ORDER BY first_version DESC LIMIT ${PAGE})
         ORDER BY first_version DESC LIMIT ${PAGE}`,
        [branchId, below, q.withSnapshot === true, q.maxMessageDepth ?? null],
      );
      for (const r of rows) {
        const found = this.#commitsOf(branchId, r).findLast(matches);
        if (found) return found;
      }
      if (rows.length < PAGE) return null;
      below = rows.at(-1)!.first_version as number;
    }
  }

  #commitsOf(branchId: string, r: Row): StateCommit[] {
    return commitsOf(
      branchId,
      r.thread_id as string,
      r.first_version as number,
      r.commits as Uint8Array,
    );
  }

  // ---------------------------------------------------------------- turns

  async putTurn(t: Turn): Promise<void> {
    await this.#insert(
      TURN,
      t,
      `ON CONFLICT (id) DO UPDATE SET thread_id = EXCLUDED.thread_id, message_id = EXCLUDED.message_id,
         source = EXCLUDED.source, user_id = EXCLUDED.user_id, status = EXCLUDED.status, state = EXCLUDED.state,
         steps = EXCLUDED.steps, started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at`,
    );
  }

  getTurn(id: string): Promise<Turn | null> {
    return this.#find(TURN, 'id = $1', [id]);
  }

  async listTurns(threadId: string, limit: number): Promise<Turn[]> {
    const rows = await this.#rows(
      `SELECT ${TURN.columns} FROM ${this.#s}.turns WHERE thread_id = $1 ORDER BY started_at DESC, id DESC LIMIT $2`,
      [threadId, limit],
    );
    return rows.map(TURN.decode);
  }

  async deleteTurn(id: string): Promise<boolean> {
    return (await this.#count(`DELETE FROM ${this.#s}.turns WHERE id = $1`, [id])) > 0;
  }

  purgeTurns(before: number, threadId: string | undefined): Promise<number> {
    // Two statements: a generic plan of `($2 IS NULL OR thread_id = $2)` scans every turn.
    if (threadId === undefined)
      return this.#count(
        `DELETE FROM ${this.#s}.turns WHERE status <> 'running' AND started_at < $1`,
        [before],
      );
    return this.#count(
      `DELETE FROM ${this.#s}.turns WHERE thread_id = $2 AND status <> 'running' AND started_at < $1`,
      [before, threadId],
    );
  }

  // ---------------------------------------------------------------- leases

  lockLease(key: string): Promise<StoredLease | null> {
    return this.#find(LEASE, 'key = $1 FOR UPDATE', [key]);
  }

  getLease(key: string): Promise<StoredLease | null> {
    return this.#find(LEASE, 'key = $1', [key]);
  }

  async listLeases(afterKey: string | null, limit: number): Promise<StoredLease[]> {
    const rows = await this.#rows(
      `SELECT ${LEASE.columns} FROM ${this.#s}.leases WHERE key COLLATE "C" > $1 ORDER BY key COLLATE "C" LIMIT $2`,
      [afterKey ?? '', limit],
    );
    return rows.map(LEASE.decode);
  }

  async putLease(lease: StoredLease, insert: boolean): Promise<boolean> {
    const onConflict = insert
      ? 'NOTHING'
      : `UPDATE SET owner = EXCLUDED.owner, acquired_at = EXCLUDED.acquired_at, renewed_at = EXCLUDED.renewed_at,
           expires_at = EXCLUDED.expires_at, released_at = EXCLUDED.released_at, data = EXCLUDED.data,
           waiters = EXCLUDED.waiters`;
    return (await this.#insert(LEASE, lease, `ON CONFLICT (key) DO ${onConflict}`)).rowCount > 0;
  }

  // ---------------------------------------------------------------- entries

  lockEntry(collection: string, id: string): Promise<Entry | null> {
    return this.#find(ENTRY, 'collection = $1 AND id = $2 FOR UPDATE', [collection, id]);
  }

  getEntry(collection: string, id: string): Promise<Entry | null> {
    return this.#find(ENTRY, 'collection = $1 AND id = $2', [collection, id]);
  }

  async putEntry(entry: Entry, insert: boolean): Promise<boolean> {
    const onConflict = insert
      ? 'NOTHING'
      : `UPDATE SET group_id = EXCLUDED.group_id, data = EXCLUDED.data, version = EXCLUDED.version,
           created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at`;
    return (
      (await this.#insert(ENTRY, entry, `ON CONFLICT (collection, id) DO ${onConflict}`)).rowCount >
      0
    );
  }

  async listEntries(
    collection: string,
    group: string | null,
    afterId: string | null,
    limit: number,
  ): Promise<Entry[]> {
    // Two statements rather than `$2 IS NULL OR …`, so each plan is the index walk it needs.
    const [where, params] =
      group === null
        ? ['collection = $1 AND id > $2', [collection, afterId ?? '', limit]]
        : [
            'collection = $1 AND group_id = $2 AND id > $3',
            [collection, group, afterId ?? '', limit],
          ];
    const rows = await this.#rows(
      `SELECT ${ENTRY.columns} FROM ${this.#s}.entries WHERE ${where} ORDER BY id LIMIT $${params.length}`,
      params,
    );
    return rows.map(ENTRY.decode);
  }

  async deleteEntries(
    collection: string,
    selector: { ids: string[] } | { group: string },
  ): Promise<Array<{ id: string; group: string | null }>> {
    const table = `${this.#s}.entries`;
    const rows =
      'ids' in selector
        ? await this.#deleteEach(
            table,
            'collection = $1 AND id = k.v',
            [collection, selector.ids],
            'id, group_id',
          )
        : await this.#rows(
            `DELETE FROM ${table} WHERE collection = $1 AND group_id = $2 RETURNING id, group_id`,
            [collection, selector.group],
          );
    return rows.map((r) => ({ id: r.id as string, group: (r.group_id as string | null) ?? null }));
  }

  // ---------------------------------------------------------------- memories

  async takenMemoryIds(ids: string[]): Promise<string[]> {
    const rows = await this.#rows(probeEach(`${this.#s}.memories`, '$1', 'id = k.v', 'id'), [ids]);
    return rows.map((r) => r.id as string);
  }

  async insertMemories(memories: Memory[]): Promise<Memory[]> {
    const indexed = memories.map((m) => searchVector(m.content.text));
    await this.#q.query(
      `INSERT INTO ${this.#s}.memories (id, type, agent_id, entity_id, room_id, world_id, scope, content, metadata,
         content_hash, embedding, embedding_norm, search, search_len, created_at,
         valid_from, valid_to, superseded_at, supersedes, lineage_id, source,
         branch_thread_id, branch_message_id)
       SELECT id, type, agent_id, entity_id, room_id, world_id, scope, content::jsonb, metadata::jsonb,
         content_hash, embedding::float8[], embedding_norm, search::tsvector, search_len, created_at,
         valid_from, valid_to, superseded_at, supersedes, lineage_id, source::jsonb,
         branch_thread_id, branch_message_id
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
         $9::text[], $10::text[], $11::text[], $12::float8[], $13::text[], $14::int[], $15::float8[],
         $16::float8[], $17::float8[], $18::float8[], $19::text[], $20::text[], $21::text[],
         $22::text[], $23::text[])
         WITH ORDINALITY AS u(id, type, agent_id, entity_id, room_id, world_id, scope, content, metadata,
           content_hash, embedding, embedding_norm, search, search_len, created_at,
           valid_from, valid_to, superseded_at, supersedes, lineage_id, source,
           branch_thread_id, branch_message_id, ord)
       ORDER BY ord`,
      [
        memories.map((m) => m.id),
        memories.map((m) => m.type),
        memories.map((m) => m.agentId),
        memories.map((m) => m.entityId),
        memories.map((m) => m.roomId),
        memories.map((m) => m.worldId),
        memories.map((m) => m.scope),
        memories.map((m) => JSON.stringify(m.content)),
        memories.map((m) => JSON.stringify(m.metadata)),
        memories.map((m) => m.contentHash),
        memories.map((m) => (m.embedding ? floatArray(m.embedding) : null)),
        memories.map((m) => (m.embedding ? norm(m.embedding) : null)),
        indexed.map((x) => x.vector),
        indexed.map((x) => x.length),
        memories.map((m) => m.createdAt),
        memories.map((m) => m.validFrom),
        memories.map((m) => m.validTo),
        memories.map((m) => m.supersededAt),
        memories.map((m) => m.supersedes),
        memories.map((m) => m.lineageId),
        memories.map((m) => (m.source === null ? null : JSON.stringify(m.source))),
        memories.map((m) => (branchAnchor(m) === null ? null : m.source!.threadId)),
        memories.map(branchAnchor),
      ],
    );
    return memories;
  }

  getMemory(id: string): Promise<Memory | null> {
    return this.#find(MEMORY, 'id = $1', [id]);
  }

  async replaceMemory(m: Memory): Promise<Memory> {
    const indexed = searchVector(m.content.text);
    return (await this.#one(
      `UPDATE ${this.#s}.memories SET content = $2::jsonb, content_hash = $3, metadata = $4::jsonb,
         embedding = $5::float8[], embedding_norm = $6, search = $7::tsvector, search_len = $8
       WHERE id = $1 RETURNING ${MEMORY.columns}, seq`,
      [
        m.id,
        JSON.stringify(m.content),
        m.contentHash,
        JSON.stringify(m.metadata),
        m.embedding ? floatArray(m.embedding) : null,
        m.embedding ? norm(m.embedding) : null,
        indexed.vector,
        indexed.length,
      ],
      MEMORY.decode,
    ))!;
  }

  async closeMemory(id: string, validTo: number, supersededAt: number): Promise<boolean> {
    const rows = await this.#rows(
      `UPDATE ${this.#s}.memories SET valid_to = $2, superseded_at = $3
        WHERE id = $1 AND valid_to IS NULL AND superseded_at IS NULL RETURNING seq`,
      [id, validTo, supersededAt],
    );
    return rows.length === 1;
  }

  async deleteMemories(ids: string[]): Promise<number> {
    return (await this.#deleteEach(`${this.#s}.memories`, 'id = k.v', [ids])).length;
  }

  /**
   * Deletes the rows `probeEach` finds (the text[] parameter is the last of `params`) by
   * row address. The rows are locked first, so their addresses hold until the delete, in
   * a statement of its own that sees the versions the lock waited for; the addresses go
   * in as constants (a parameter's plan may be a generic scan of the table).
   */
  async #deleteEach(
    table: string,
    where: string,
    params: unknown[],
    returning = 'ctid',
  ): Promise<Row[]> {
    const found = await this.#rows(
      probeEach(table, `$${params.length}`, where, 'ctid', 'FOR UPDATE'),
      params,
    );
    if (found.length === 0) return [];
    const tids = found.map((r) => {
      const tid = String(r.ctid);
      if (!/^\(\d+,\d+\)$/.test(tid)) throw new Error(`unexpected row address ${tid}`);
      return `'${tid}'`;
    });
    // No parameters: an unnamed statement, planned for these constants and not kept.
    const sql = `DELETE FROM ${table} WHERE ctid = ANY(ARRAY[${tids.join(', ')}]::tid[]) RETURNING ${returning}`;
    return (await this.#q.query(sql)).rows;
  }

  async listMemories(
    filter: DriverMemoryFilter,
    limit: number,
    order: 'newest' | 'oldest',
  ): Promise<Memory[]> {
    const dir = order === 'oldest' ? 'ASC' : 'DESC';
    const params: unknown[] = [limit];
    const rows = await this.#rows(
      `SELECT ${MEMORY.columns}, seq FROM ${this.#s}.memories WHERE ${memoryWhere(filter, params)}
       ORDER BY created_at ${dir}, seq ${dir} LIMIT $1`,
      params,
    );
    return rows.map(MEMORY.decode);
  }

  async scanMemories(afterId: string | null, limit: number): Promise<Memory[]> {
    const rows = await this.#rows(
      `SELECT ${MEMORY.columns} FROM ${this.#s}.memories WHERE id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2`,
      [afterId ?? '', limit],
    );
    return rows.map(MEMORY.decode);
  }

  async branchAnchors(
    threadId: string,
    maxDepth: number,
  ): Promise<Array<{ id: string; depth: number }>> {
    // Each anchor's depth by its key, one lookup per memory: a join could be planned as a
    // scan of the thread's messages.
    const rows = await this.#rows(
      `SELECT a.id, a.depth FROM (
         SELECT DISTINCT m.branch_message_id AS id,
           (SELECT x.depth FROM ${this.#s}.messages x
             WHERE x.id = m.branch_message_id AND x.thread_id = $1) AS depth
           FROM ${this.#s}.memories m WHERE m.branch_thread_id = $1) a
        WHERE a.depth <= $2`,
      [threadId, maxDepth],
    );
    return rows.map((r) => ({ id: r.id as string, depth: Number(r.depth) }));
  }

  async countMemories(filter: DriverMemoryFilter): Promise<number> {
    const params: unknown[] = [];
    const rows = await this.#rows(
      `SELECT count(*) AS n FROM ${this.#s}.memories WHERE ${memoryWhere(filter, params)}`,
      params,
    );
    return Number(rows[0]!.n);
  }

  async vectorCandidates(query: {
    vector: number[];
    filter: DriverMemoryFilter;
    count: number;
    minSimilarity?: number;
  }): Promise<MemoryRow[]> {
    const c = this.#c;
    if (c.vector) {
      const dims = query.vector.length;
      await ensureVectorIndex(c, this.#q, dims);
      // Fewer rows than asked for: the filter admits fewer, or the scan gave up. The
      // exact scan settles it.
      const rows = await this.#hnsw(query, c.vector.schema, dims);
      if (rows.length === query.count) return rows.map(toMemoryRow);
    }
    const params: unknown[] = [
      floatArray(query.vector),
      norm(query.vector),
      query.minSimilarity ?? null,
      query.count,
    ];
    const where = memoryWhere(query.filter, params);
    const rows = await this.#rows(
      `SELECT * FROM (
         SELECT ${MEMORY.columns}, seq,
           CASE WHEN embedding_norm = 0 OR $2::float8 = 0 THEN 0
                ELSE (SELECT sum(a * b) FROM unnest(embedding, $1::float8[]) AS t(a, b)) / (embedding_norm * $2::float8) END AS similarity
         FROM ${c.s}.memories WHERE embedding IS NOT NULL AND ${where}) x
       WHERE $3::float8 IS NULL OR similarity >= $3::float8
       ORDER BY similarity DESC, seq ASC LIMIT $4`,
      params,
    );
    return rows.map(toMemoryRow);
  }

  /** The HNSW index, with pgvector's iterative scan so a selective filter still fills `count`. */
  async #hnsw(
    query: { vector: number[]; filter: DriverMemoryFilter; count: number },
    v: string,
    dims: number,
  ): Promise<Row[]> {
    const sql = hnswSearchSql(this.#s, v, dims, query.vector, query.filter, query.count);
    return this.#q.transaction(async (tq) => {
      await tq.query(
        `SELECT set_config('hnsw.ef_search', $1, true), set_config('hnsw.iterative_scan', 'relaxed_order', true),
                set_config('hnsw.max_scan_tuples', '50000', true)`,
        [String(sql.efSearch)],
      );
      return (await tq.query(sql.text, sql.params)).rows;
    });
  }

  /**
   * BM25 over the shared tokenizer's words, as the reference store computes it: the
   * collection statistics (count, mean length, document frequencies) are over every
   * stored memory; the filter only chooses which of them are returned.
   */
  async keywordCandidates(query: {
    terms: string[];
    filter: DriverMemoryFilter;
    count: number;
  }): Promise<KeywordCandidate[]> {
    const m = this.#s;
    const q = searchQuery(query.terms);
    const params: unknown[] = [q.lexemes, q.single, q.any, query.count];
    const rows = await this.#rows(
      `WITH stats AS (
         SELECT count(*)::float8 AS n, COALESCE(avg(search_len), 0)::float8 AS avgdl FROM ${m}.memories),
       terms AS (
         SELECT t.lexeme, ln(1 + (stats.n - d.n + 0.5) / (d.n + 0.5)) AS idf
         FROM unnest($1::text[], $2::tsquery[]) AS t(lexeme, q) CROSS JOIN stats
           CROSS JOIN LATERAL (SELECT count(*)::float8 AS n FROM ${m}.memories WHERE search @@ t.q) d)
       SELECT ${MEMORY.columns}, seq,
         (SELECT sum(terms.idf * tf * ${BM25.k1 + 1} / (tf + ${BM25.k1} * (1 - ${BM25.b} + ${BM25.b} * search_len / stats.avgdl)))
          FROM unnest(search) AS u JOIN terms ON terms.lexeme = u.lexeme,
            LATERAL (SELECT array_length(u.positions, 1)::float8 AS tf) f) AS relevance
       FROM ${m}.memories, stats
       WHERE search @@ $3::tsquery AND ${memoryWhere(query.filter, params)}
       ORDER BY relevance DESC, seq ASC LIMIT $4`,
      params,
    );
    return rows.map((r) => ({ ...toMemoryRow(r), relevance: r.relevance as number }));
  }

  getEmbeddingSpace(): Promise<EmbeddingSpace | null> {
    return this.#find(EMBEDDING_SPACE, 'true', []);
  }

  async setEmbeddingSpace(space: EmbeddingSpace): Promise<void> {
    await this.#q.query(
      `INSERT INTO ${this.#s}.embedding_space (one, embedder_id, dimensions) VALUES (true, $1, $2)
       ON CONFLICT (one) DO UPDATE SET embedder_id = EXCLUDED.embedder_id, dimensions = EXCLUDED.dimensions`,
      [space.embedderId, space.dimensions],
    );
  }

  async getCachedEmbeddings(
    embedderId: string,
    contentHashes: string[],
  ): Promise<Map<string, number[]>> {
    const rows = await this.#rows(
      probeEach(
        `${this.#s}.embedding_cache`,
        '$2',
        'embedder_id = $1 AND content_hash = k.v',
        'content_hash, embedding',
      ),
      [embedderId, contentHashes],
    );
    return new Map(rows.map((r) => [r.content_hash as string, r.embedding as number[]]));
  }

  async putCachedEmbeddings(
    embedderId: string,
    entries: Array<{ contentHash: string; embedding: number[] }>,
  ): Promise<void> {
    await this.#q.query(
      `INSERT INTO ${this.#s}.embedding_cache (embedder_id, content_hash, embedding)
       SELECT $1, h, e::float8[] FROM unnest($2::text[], $3::text[]) AS u(h, e)
       ON CONFLICT (embedder_id, content_hash) DO UPDATE SET embedding = EXCLUDED.embedding`,
      [embedderId, entries.map((e) => e.contentHash), entries.map((e) => floatArray(e.embedding))],
    );
  }

  // ---------------------------------------------------------------- forgetting

  async putTombstones(tombstones: Tombstone[]): Promise<void> {
    if (tombstones.length === 0) return;
    await this.#q.query(
      `INSERT INTO ${this.#s}.tombstones (kind, key, at)
       SELECT * FROM unnest($1::text[], $2::text[], $3::float8[])
       ON CONFLICT (kind, key) DO NOTHING`,
      [tombstones.map((t) => t.kind), tombstones.map((t) => t.key), tombstones.map((t) => t.at)],
    );
  }

  async findTombstones(keys: TombstoneKey[]): Promise<Tombstone[]> {
    // One primary-key probe per key, whatever the plan (see `probeEach`).
    const rows = await this.#rows(
      `SELECT x.kind, x.key, x.at FROM unnest($1::text[], $2::text[]) AS k(kind, key)
         CROSS JOIN LATERAL (SELECT kind, key, at FROM ${this.#s}.tombstones t
           WHERE t.kind = k.kind AND t.key = k.key LIMIT 1) x`,
      [keys.map((k) => k.kind), keys.map((k) => k.key)],
    );
    return rows.map((r) => ({
      kind: r.kind as Tombstone['kind'],
      key: r.key as string,
      at: Number(r.at),
    }));
  }

  async lockSubjects(keys: TombstoneKey[], exclusive: boolean): Promise<void> {
    // Transaction-level advisory locks in a class of their own, one per key, taken in the
    // order of their hashes so that two sessions never wait for each other in a circle.
    const lock = exclusive ? 'pg_advisory_xact_lock' : 'pg_advisory_xact_lock_shared';
    await this.#q.query(
      `SELECT ${lock}(${SUBJECT_LOCK_CLASS}, h) FROM
         (SELECT DISTINCT hashtext(k) AS h FROM unnest($1::text[]) AS u(k) ORDER BY 1) x`,
      [keys.map((k) => `${this.#s}:${k.kind}:${k.key}`)],
    );
  }

  // ---------------------------------------------------------------- data keys

  async getDataKeys(tenants: Tenant[]): Promise<DataKeyRow[]> {
    const rows = await this.#rows(
      `SELECT x.* FROM unnest($1::text[], $2::text[]) AS k(kind, key)
         CROSS JOIN LATERAL (SELECT ${DATA_KEY_COLUMNS} FROM ${this.#s}.data_keys d
           WHERE d.kind = k.kind AND d.key = k.key) x`,
      [tenants.map((t) => t.kind), tenants.map((t) => t.key)],
    );
    return rows.map(dataKeyRow);
  }

  async insertDataKey(row: DataKeyRow): Promise<boolean> {
    const r = await this.#q.query(
      `INSERT INTO ${this.#s}.data_keys (kind, key, key_id, wrapped, created_at)
       VALUES ($1, $2, $3, $4, $5) ON CONFLICT (kind, key) DO NOTHING`,
      [row.kind, row.key, row.keyId, row.wrapped, row.createdAt],
    );
    return r.rowCount === 1;
  }

  async deleteDataKeys(tenants: Tenant[]): Promise<number> {
    if (tenants.length === 0) return 0;
    const r = await this.#q.query(
      `DELETE FROM ${this.#s}.data_keys d USING unnest($1::text[], $2::text[]) AS k(kind, key)
       WHERE d.kind = k.kind AND d.key = k.key`,
      [tenants.map((t) => t.kind), tenants.map((t) => t.key)],
    );
    return r.rowCount ?? 0;
  }

  async listDataKeys(after: Tenant | null, limit: number): Promise<DataKeyRow[]> {
    const rows = await this.#rows(
      `SELECT ${DATA_KEY_COLUMNS} FROM ${this.#s}.data_keys
       WHERE (kind, key) > ($1, $2) ORDER BY kind, key LIMIT $3`,
      [after?.kind ?? '', after?.key ?? '', limit],
    );
    return rows.map(dataKeyRow);
  }

  async replaceDataKey(row: DataKeyRow, expectedWrapped: string): Promise<boolean> {
    const r = await this.#q.query(
      `UPDATE ${this.#s}.data_keys SET key_id = $3, wrapped = $4
       WHERE kind = $1 AND key = $2 AND wrapped = $5`,
      [row.kind, row.key, row.keyId, row.wrapped, expectedWrapped],
    );
    return r.rowCount === 1;
  }

  // ---------------------------------------------------------------- sweeping

  async sweepFacts(threadIds: string[], lockTimeoutMs: number): Promise<SweepFacts> {
    const s = this.#s;
    // In one order, so that two sessions locking overlapping threads queue, not deadlock.
    const ids = [...threadIds].sort();
    await this.#q.query(`SELECT set_config('lock_timeout', $1, true)`, [
      `${Math.max(1, lockTimeoutMs)}ms`,
    ]);
    // The run leases, then the branches: the order writers take them in.
    const leases = await this.#rows(
      probeEach(`${s}.leases`, '$1', 'key = k.v', LEASE.columns, 'FOR UPDATE'),
      [ids.map(runLeaseKey)],
    );
    const branches = await this.#rows(
      `SELECT x.* FROM unnest($1::text[]) AS k(v) CROSS JOIN LATERAL
         (SELECT ${BRANCH.columns} FROM ${s}.branches WHERE thread_id = k.v ORDER BY seq FOR NO KEY UPDATE) x`,
      [ids],
    );
    const threads = await this.#rows(probeEach(`${s}.threads`, '$1', 'id = k.v', THREAD.columns), [
      ids,
    ]);
    const checkpoints = await this.#rows(
      `SELECT x.* FROM unnest($1::text[]) AS k(v) CROSS JOIN LATERAL
         (SELECT ${CHECKPOINT.columns} FROM ${s}.checkpoints WHERE thread_id = k.v ORDER BY seq) x`,
      [ids],
    );
    const found = branches.map(BRANCH.decode);
    const marked = checkpoints.map(CHECKPOINT.decode);
    const wanted = new Set<string>();
    for (const b of found) {
      if (b.headMessageId !== null) wanted.add(b.headMessageId);
      if (b.forkMessageId !== null) wanted.add(b.forkMessageId);
    }
    for (const c of marked) wanted.add(c.messageId);
    const messages =
      wanted.size === 0
        ? []
        : await this.#rows(probeEach(`${s}.messages`, '$1', 'id = k.v', MESSAGE.columns), [
            [...wanted],
          ]);
    const running = await this.#rows(
      `SELECT k.v AS id FROM unnest($1::text[]) AS k(v) CROSS JOIN LATERAL
         (SELECT 1 FROM ${s}.turns WHERE thread_id = k.v AND status = 'running' LIMIT 1) x`,
      [ids],
    );
    return {
      threads: threads.map(THREAD.decode),
      branches: found,
      checkpoints: marked,
      messages: messages.map(MESSAGE.decode),
      leases: leases.map(LEASE.decode),
      running: running.map((r) => r.id as string),
    };
  }

  async getLatestStateCommits(queries: BranchCommitQuery[]): Promise<Array<StateCommit | null>> {
    const s = this.#s;
    // Each query's newest segment whose summary allows a match, one probe each; a query
    // whose match is not in it (a summary says "maybe") asks again on its own.
    const where = `WHERE branch_id = k.b AND first_version < k.below AND (NOT k.snap OR has_snapshot)
      AND (k.depth IS NULL OR min_depth <= k.depth)`;
    const rows = await this.#rows(
      `SELECT k.i, x.thread_id, x.first_version, x.commits
       FROM unnest($1::text[], $2::bigint[], $3::bool[], $4::bigint[]) WITH ORDINALITY AS k(b, below, snap, depth, i)
       CROSS JOIN LATERAL (
         (SELECT ${LOG_COLUMNS} FROM ${s}.state_tail ${where})
         UNION ALL
         (SELECT ${LOG_COLUMNS} FROM ${s}.state_segments ${where} ORDER BY first_version DESC LIMIT 1)
         ORDER BY first_version DESC LIMIT 1) x`,
      [
        queries.map((q) => q.branchId),
        queries.map((q) => (q.maxVersion ?? Number.MAX_SAFE_INTEGER) + 1),
        queries.map((q) => q.withSnapshot === true),
        queries.map((q) => q.maxMessageDepth ?? null),
      ],
    );
    const out: Array<StateCommit | null> = queries.map(() => null);
    for (const r of rows) {
      const i = Number(r.i) - 1;
      const { branchId, ...q } = queries[i]!;
      const found = this.#commitsOf(branchId, r).findLast((c) => matchesLatest(c, q));
      // Not in its newest candidate segment: an older one may hold it.
      out[i] = found ?? (await this.getLatestStateCommit(branchId, q));
    }
    return out;
  }

  async sweepDelete(d: SweepDeletes): Promise<SweepDeleted> {
    const s = this.#s;
    const out: SweepDeleted = { turns: 0, branches: [], stateCommits: 0 };
    if (d.turns.length > 0) {
      const found = await this.#rows(
        `SELECT x.ctid FROM unnest($1::text[], $2::bigint[]) AS k(v, before) CROSS JOIN LATERAL
           (SELECT ctid FROM ${s}.turns WHERE thread_id = k.v AND started_at < k.before
              AND status <> 'running' FOR UPDATE) x`,
        [d.turns.map((t) => t.threadId), d.turns.map((t) => t.before)],
      );
      out.turns = await this.#deleteTids(`${s}.turns`, found);
    }
    if (d.branches.length > 0) {
      // Their state logs go by ON DELETE CASCADE; counted first.
      const [counted] = await this.#rows(
        `SELECT COALESCE(sum(x.n), 0) AS n FROM unnest($1::text[]) AS k(v) CROSS JOIN LATERAL
           (SELECT last_version - first_version + 1 AS n FROM ${s}.state_segments WHERE branch_id = k.v
            UNION ALL
            SELECT last_version - first_version + 1 FROM ${s}.state_tail WHERE branch_id = k.v) x`,
        [d.branches],
      );
      const gone = await this.#deleteEach(`${s}.branches`, 'id = k.v', [d.branches], 'id');
      out.branches = gone.map((r) => r.id as string);
      // Locked by the sweep (`sweepFacts`), each is still there: all or none counted.
      if (gone.length > 0) out.stateCommits += Number(counted!.n);
    }
    if (d.stateCuts.length > 0) out.stateCommits += await this.#cutStateLogs(d.stateCuts);
    return out;
  }

  /**
   * `deleteStateCommits` for several branches at once: every segment that starts below its
   * branch's cut is deleted, and one that straddles it is written again without the
   * commits below (its later versions keep their numbers).
   */
  async #cutStateLogs(cuts: Array<{ branchId: string; beforeVersion: number }>): Promise<number> {
    const s = this.#s;
    const where = 'WHERE branch_id = k.v AND first_version < k.cut';
    // The straddling segment's commits travel back to be rewritten; the others' do not.
    const columns = `ctid, branch_id, thread_id, first_version, last_version,
      CASE WHEN last_version >= k.cut THEN commits END AS commits`;
    // No row locks: the sweep holds the branches' (`sweepFacts`), which every append takes,
    // so these rows stay where they are until the deletes below.
    const rows = await this.#rows(
      `SELECT x.*, k.cut FROM unnest($1::text[], $2::bigint[]) AS k(v, cut) CROSS JOIN LATERAL (
         SELECT 'state_segments' AS t, ${columns} FROM ${s}.state_segments ${where}
         UNION ALL
         SELECT 'state_tail', ${columns} FROM ${s}.state_tail ${where}) x`,
      [cuts.map((c) => c.branchId), cuts.map((c) => c.beforeVersion)],
    );
    let deleted = 0;
    const rewrite: Record<'state_segments' | 'state_tail', Array<Segment & Row>> = {
      state_segments: [],
      state_tail: [],
    };
    for (const r of rows) {
      const [first, last, cut] = [Number(r.first_version), Number(r.last_version), Number(r.cut)];
      if (last < cut) {
        deleted += last - first + 1;
        continue;
      }
      const all = this.#commitsOf(r.branch_id as string, r);
      const kept = all.filter((c) => c.version >= cut);
      deleted += all.length - kept.length;
      const segments = keptSegments(kept, r.t === 'state_tail');
      const tail = r.t === 'state_tail' ? segments.pop() : undefined;
      for (const g of segments) rewrite.state_segments.push({ ...r, ...g });
      if (tail) rewrite.state_tail.push({ ...r, ...tail });
    }
    for (const t of ['state_segments', 'state_tail'] as const)
      await this.#deleteTids(
        `${s}.${t}`,
        rows.filter((r) => r.t === t),
      );
    for (const t of ['state_segments', 'state_tail'] as const) {
      const gs = rewrite[t];
      if (gs.length === 0) continue;
      await this.#q.query(
        `INSERT INTO ${s}.${t} (branch_id, first_version, last_version, has_snapshot, min_depth, commits, thread_id)
         SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::bool[], $5::int[], $6::bytea[], $7::text[])`,
        [
          gs.map((g) => g.branch_id),
          gs.map((g) => g.firstVersion),
          gs.map((g) => g.lastVersion),
          gs.map((g) => g.hasSnapshot),
          gs.map((g) => g.minDepth),
          gs.map((g) => Buffer.from(g.commits)),
          gs.map((g) => g.thread_id),
        ],
      );
    }
    return deleted;
  }

  /** Deletes these locked rows of `table` by address (constants: see `#deleteEach`); how many. */
  async #deleteTids(table: string, rows: Row[]): Promise<number> {
    if (rows.length === 0) return 0;
    const tids = rows.map((r) => {
      const tid = String(r.ctid);
      if (!/^\(\d+,\d+\)$/.test(tid)) throw new Error(`unexpected row address ${tid}`);
      return `'${tid}'`;
    });
    const sql = `DELETE FROM ${table} WHERE ctid = ANY(ARRAY[${tids.join(', ')}]::tid[])`;
    return (await this.#q.query(sql)).rowCount;
  }

  async countThreadRows(threadId: string): Promise<ThreadRowCounts> {
    const s = this.#s;
    // State commits are packed: a segment or tail holds versions first..last of a branch.
    const versions = (table: string) =>
      `(SELECT coalesce(sum(last_version - first_version + 1), 0) FROM ${s}.${table}
         WHERE branch_id IN (SELECT id FROM ${s}.branches WHERE thread_id = $1))`;
    const [r] = await this.#rows(
      `SELECT (SELECT count(*) FROM ${s}.messages WHERE thread_id = $1) AS messages,
              (SELECT count(*) FROM ${s}.branches WHERE thread_id = $1) AS branches,
              ${versions('state_segments')} + ${versions('state_tail')} AS commits,
              (SELECT count(*) FROM ${s}.checkpoints WHERE thread_id = $1) AS checkpoints,
              (SELECT count(*) FROM ${s}.turns WHERE thread_id = $1) AS turns`,
      [threadId],
    );
    return {
      messages: Number(r!.messages),
      branches: Number(r!.branches),
      stateCommits: Number(r!.commits),
      checkpoints: Number(r!.checkpoints),
      turns: Number(r!.turns),
    };
  }

  async memoryHashesInUse(contentHashes: string[]): Promise<string[]> {
    const rows = await this.#rows(
      probeEach(`${this.#s}.memories`, '$1', 'content_hash = k.v', 'content_hash'),
      [contentHashes],
    );
    return rows.map((r) => r.content_hash as string);
  }

  async deleteLeases(keys: string[]): Promise<number> {
    return (await this.#deleteEach(`${this.#s}.leases`, 'key = k.v', [keys])).length;
  }

  async deleteCachedEmbeddings(contentHashes: string[]): Promise<number> {
    const table = `${this.#s}.embedding_cache`;
    // Every embedder's row of each hash: a probe per hash (no `LIMIT 1`), then by address.
    const found = await this.#rows(
      `SELECT x.ctid FROM unnest($1::text[]) AS k(v)
         CROSS JOIN LATERAL (SELECT ctid FROM ${table} WHERE content_hash = k.v FOR UPDATE) x`,
      [contentHashes],
    );
    if (found.length === 0) return 0;
    const tids = found.map((r) => {
      const tid = String(r.ctid);
      if (!/^\(\d+,\d+\)$/.test(tid)) throw new Error(`unexpected row address ${tid}`);
      return `'${tid}'`;
    });
    const sql = `DELETE FROM ${table} WHERE ctid = ANY(ARRAY[${tids.join(', ')}]::tid[])`;
    return (await this.#q.query(sql)).rowCount;
  }
}

/** The parameters of `insertMessages`' statement: a column array each. */
function insertMessagesParams(messages: Message[], jumps: MessageJump[]) {
  const data = messages.map((m) => storedData(m.data));
  return [
    messages.map((m) => m.id),
    messages.map((m) => m.threadId),
    messages.map((m) => m.parentId),
    messages.map((m) => m.role),
    messages.map((m) => m.type),
    data.map((d) => d.json),
    messages.map((m) => m.createdAt),
    messages.map((m) => m.depth),
    jumps.map((j) => j.jumpId),
    jumps.map((j) => j.jumpDepth),
    data.map((d) => d.packed),
  ];
}

const toMemoryRow = (r: Row): MemoryRow => ({ memory: MEMORY.decode(r), seq: Number(r.seq) });

/**
 * The HNSW candidate query: the admitted rows nearest by the index's own expression
 * (so the planner can use the index). Exported for the tests, which check that the
 * planner really uses the index.
 */
export function hnswSearchSql(
  s: string,
  v: string,
  dims: number,
  vector: number[],
  filter: DriverMemoryFilter,
  count: number,
): { text: string; params: unknown[]; efSearch: number } {
  const params: unknown[] = [vectorLiteral(vector), count];
  const where = memoryWhere(filter, params);
  const distance = `(embedding::${v}.vector(${dims})) OPERATOR(${v}.<=>) ($1::text::${v}.vector(${dims}))`;
  return {
    text: `SELECT ${MEMORY.columns}, seq FROM ${s}.memories
         WHERE embedding IS NOT NULL AND ${where} ORDER BY ${distance} LIMIT $2`,
    params,
    // Generous: in WASM and on a server alike the scan costs far less than the round
    // trip, and recall on less clustered data (random 384-dim vectors) rises from 0.31
    // at 64 to about 0.9 at 512.
    efSearch: Math.min(1000, Math.max(400, count * 4)),
  };
}

/**
 * Creates the HNSW index (cosine) for vectors of width `dims`, in bulk on the first
 * vector search (much faster than growing it row by row during a load); pgvector keeps
 * it up to date afterwards. The column holds float8[] (exact values come back
 * unchanged); the index is over its cast to vector(dims). A failure leaves exact scans.
 */
async function ensureVectorIndex(c: SessionContext, q: Queryable, dims: number): Promise<void> {
  if (!c.vector || c.indexedWidth === dims) return;
  const v = c.vector.schema;
  await q
    .transaction((sp) =>
      sp.query(
        `CREATE INDEX IF NOT EXISTS memories_embedding_hnsw ON ${c.s}.memories
         USING hnsw ((embedding::${v}.vector(${dims})) ${v}.vector_cosine_ops)`,
      ),
    )
    .then(
      () => {
        c.indexedWidth = dims;
      },
      () => undefined,
    );
}

/** The filter as SQL over the memories table, values appended to `params`. */
function memoryWhere(filter: DriverMemoryFilter, params: unknown[]): string {
  return memoryFilterSql(filter, {
    column: (name) => name,
    value(v) {
      params.push(v);
      return `$${params.length}::${typeof v === 'number' ? 'float8' : 'text'}`;
    },
    oneOf(column, values) {
      // One value as an equality: a generic plan then walks an index on (column, order)
      // for it (a fact's history by lineage), where `= ANY` may be planned as a scan in order.
      if (values.length === 1) {
        params.push(values[0]);
        return `${column} = $${params.length}::text`;
      }
      params.push(values);
      return `${column} = ANY($${params.length}::text[])`;
    },
    jsonArrayPrefix(column, key, labels) {
      params.push(key);
      const path = `${column} -> $${params.length}::text`;
      const parts = [`jsonb_typeof(${path}) = 'array'`];
      labels.forEach((label, i) => {
        params.push(label);
        parts.push(`(${path} -> ${i}) = to_jsonb($${params.length}::text)`);
      });
      return `(${parts.join(' AND ')})`;
    },
  });
}

const DATA_KEY_COLUMNS = 'kind, key, key_id, wrapped, created_at';

const dataKeyRow = (r: Row): DataKeyRow => ({
  kind: r.kind as DataKeyRow['kind'],
  key: r.key as string,
  keyId: r.key_id as string,
  wrapped: r.wrapped as string,
  createdAt: Number(r.created_at),
});
