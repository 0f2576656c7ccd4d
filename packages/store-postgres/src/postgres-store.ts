import {
  type Branch,
  CairnError,
  type Checkpoint,
  type JsonObject,
  type Lease,
  type Memory,
  type Message,
  type StateCommit,
  type Thread,
  type Turn,
} from '@cairn/core';
import {
  type AcquiredLease,
  type AcquireLeaseInput,
  type ChainOptions,
  type ChangeEmitter,
  type CheckedSearch,
  checkId,
  checkLeaseData,
  checkLeaseInput,
  checkLimit,
  checkLockOptions,
  checkMemoryFilter,
  checkMemoryPatch,
  checkMemorySearch,
  checkName,
  checkNewBranch,
  checkNewCheckpoint,
  checkNewThread,
  checkStateCommit,
  checkThreadPatch,
  checkTtl,
  checkTurn,
  checkVectorWidth,
  cosineSimilarity,
  decodeCursor,
  type EmbeddingSpace,
  encodeCursor,
  keywordTokens,
  type LatestCommitQuery,
  type ListMemoriesOptions,
  type ListThreadsOptions,
  type LockOptions,
  type MemoryFilter,
  type MemoryHit,
  type MemoryPatch,
  type MemorySearch,
  messageBatchLookups,
  type NewBranch,
  type NewCheckpoint,
  type NewMemory,
  type NewMessage,
  type NewStateCommit,
  type NewThread,
  normalizeNewMemories,
  normalizeNewMessages,
  type Page,
  planLeaseAcquire,
  planLeaseRelease,
  planLeaseRenew,
  planMessageBatch,
  resolveEmbeddingSpace,
  type StateCommitRange,
  type Store,
  type StoreCapabilities,
  type StoreChange,
  type StoreListener,
  type ThreadPatch,
} from '@cairn/store';
import { encodeChange } from './change-listener.js';
import type { Gate } from './gate.js';
import { searchQuery, searchVector } from './keyword-index.js';
import type { VectorSupport } from './migrations.js';
import { type Queryable, type Row, sqlState } from './queryable.js';
import {
  BRANCH_COLUMNS,
  CHECKPOINT_COLUMNS,
  COMMIT_COLUMNS,
  floatArray,
  LEASE_COLUMNS,
  MEMORY_COLUMNS,
  MESSAGE_COLUMNS,
  norm,
  THREAD_COLUMNS,
  TURN_COLUMNS,
  toBranch,
  toCheckpoint,
  toCommit,
  toLease,
  toMemory,
  toMessage,
  toThread,
  toTurn,
  vectorLiteral,
} from './rows.js';

/** What every facade of one store (the store itself, its transactions) shares. */
export interface StoreCore {
  db: Queryable;
  gate: Gate;
  /** The quoted schema. */
  s: string;
  /** pgvector's quoted schema when the HNSW path is in use, else null. */
  vector: VectorSupport | null;
  /** NOTIFY channel on a server; null on PGlite (notifications stay in the process). */
  channel: string | null;
  origin: string;
  /** This store's listeners. */
  emitter: ChangeEmitter;
  /** Tells every store that should hear a change made through this one (in this process). */
  broadcast: (change: StoreChange) => void;
  capabilities: StoreCapabilities;
  closed: boolean;
  /** The embedding width for which the HNSW index is known to exist. */
  indexedWidth: number | null;
  migrate: () => Promise<void>;
  close: () => Promise<void>;
}

/** The changes one write made: emitted locally after commit, NOTIFYed unless `notified`. */
interface WriteContext {
  q: Queryable;
  touch(change: StoreChange, notified?: boolean): void;
}

const notFound = (what: string, id: string) =>
  new CairnError('NOT_FOUND', `${what} ${JSON.stringify(id)} not found`, { details: { id } });
const conflict = (message: string, details: Record<string, unknown> = {}) =>
  new CairnError('CONFLICT', message, { details });
const invalid = (message: string) => new CairnError('INVALID_ARGUMENT', message);

/** BM25's parameters, the reference store's. */
const BM25_K1 = 1.2;
const BM25_B = 0.75;

/** Vector candidates fetched beyond `limit`, so rescoring in float64 can reorder near-ties. */
const RESCORE_SLACK = 8;

/**
 * The Store over one `Queryable`. The top-level store runs each call as its own
 * statement or transaction; the store handed to `transaction(fn)` runs its calls inside
 * the open transaction, each in a savepoint so a failed call changes nothing.
 */
export class PostgresStore implements Store {
  readonly capabilities: StoreCapabilities;
  #core: StoreCore;
  /** Set for the store handed to `transaction(fn)`: its queryable and the changes to emit at commit. */
  #tx: { q: Queryable; pending: StoreChange[] } | null;

  constructor(core: StoreCore, tx: { q: Queryable; pending: StoreChange[] } | null = null) {
    this.#core = core;
    this.#tx = tx;
    this.capabilities = core.capabilities;
  }

  #guard(): void {
    if (this.#core.closed) throw new CairnError('CLOSED', 'this store is closed');
  }

  async #read<T>(fn: (q: Queryable) => Promise<T>): Promise<T> {
    this.#guard();
    if (this.#tx) return fn(this.#tx.q);
    return this.#core.gate.shared(() => fn(this.#core.db));
  }

  /**
   * Runs a write in a transaction (`single`: as one statement, atomic on its own), then
   * tells listeners. Inside `transaction(fn)` it runs in a savepoint instead.
   */
  async #write<T>(fn: (ctx: WriteContext) => Promise<T>, single = false): Promise<T> {
    this.#guard();
    const core = this.#core;
    const local: StoreChange[] = [];
    const remote: StoreChange[] = [];
    const run = async (q: Queryable) => {
      local.length = 0;
      remote.length = 0;
      const result = await fn({
        q,
        touch(change, notified = false) {
          local.push(change);
          if (!notified) remote.push(change);
        },
      });
      if (core.channel && remote.length > 0) {
        await q.query('SELECT pg_notify($1, x) FROM unnest($2::text[]) AS x', [
          core.channel,
          remote.map((c) => encodeChange(core.origin, c)),
        ]);
      }
      return result;
    };
    if (this.#tx) {
      const tx = this.#tx;
      const result = await tx.q.transaction(run);
      tx.pending.push(...local);
      return result;
    }
    const result = await core.gate.shared(() => (single ? run(core.db) : core.db.transaction(run)));
    for (const c of local) core.broadcast(c);
    return result;
  }

  /** SQL for a NOTIFY inside a single statement, or nothing on PGlite. */
  #notifyColumn(
    params: unknown[],
    kind: StoreChange['kind'],
    threadExpr: string,
    branchExpr: string | null,
  ): string {
    const core = this.#core;
    if (!core.channel) return '';
    params.push(core.channel, core.origin, kind);
    const n = params.length;
    const branch = branchExpr ? `, 'b', ${branchExpr}` : '';
    return `, pg_notify($${n - 2}, json_build_object('o', $${n - 1}::text, 't', ${threadExpr}, 'k', $${n}::text${branch})::text) AS notified`;
  }

  // ------------------------------------------------------------------ threads

  async createThread(input: NewThread): Promise<Thread> {
    const t = checkNewThread(input, Date.now());
    const s = this.#core.s;
    return this.#write(async ({ q, touch }) => {
      const r = await q.query(
        `INSERT INTO ${s}.threads (id, resource_id, title, metadata, created_at, updated_at)
         VALUES ($1, $2, $3, $4::jsonb, $5, $6) ON CONFLICT (id) DO NOTHING RETURNING id`,
        [t.id, t.resourceId, t.title, JSON.stringify(t.metadata), t.createdAt, t.updatedAt],
      );
      if (r.rowCount === 0)
        throw conflict(`thread ${JSON.stringify(t.id)} already exists`, { id: t.id });
      touch({ threadId: t.id, kind: 'thread' });
      return t;
    });
  }

  async getThread(id: string): Promise<Thread | null> {
    checkId(id, 'thread id');
    return this.#read(async (q) => {
      const r = await q.query(
        `SELECT ${THREAD_COLUMNS} FROM ${this.#core.s}.threads WHERE id = $1`,
        [id],
      );
      return r.rows[0] ? toThread(r.rows[0]) : null;
    });
  }

  async updateThread(id: string, patch: ThreadPatch): Promise<Thread> {
    const p = checkThreadPatch(patch);
    checkId(id, 'thread id');
    return this.#write(async ({ q, touch }) => {
      const r = await q.query(
        `UPDATE ${this.#core.s}.threads SET
           title = CASE WHEN $2 THEN $3 ELSE title END,
           metadata = COALESCE($4::jsonb, metadata),
           updated_at = GREATEST($5, created_at)
         WHERE id = $1 RETURNING ${THREAD_COLUMNS}`,
        [
          id,
          p.title !== undefined,
          p.title ?? null,
          p.metadata === undefined ? null : JSON.stringify(p.metadata),
          Date.now(),
        ],
      );
      const row = r.rows[0];
      if (!row) throw notFound('thread', id);
      touch({ threadId: id, kind: 'thread' });
      return toThread(row);
    }, true);
  }

  async listThreads(options: ListThreadsOptions = {}): Promise<Page<Thread>> {
    const limit = checkLimit(options.limit, 'limit', 50, 1000);
    const before = options.cursor == null ? null : Number(decodeCursor(options.cursor)[0]);
    if (before !== null && !Number.isFinite(before))
      throw invalid('cursor is not one this store issued');
    if (options.resourceId !== undefined && typeof options.resourceId !== 'string')
      throw invalid('resourceId must be a string');
    return this.#read(async (q) => {
      const r = await q.query(
        `SELECT ${THREAD_COLUMNS} FROM ${this.#core.s}.threads
         WHERE ($1::text IS NULL OR resource_id = $1) AND ($2::bigint IS NULL OR seq < $2)
         ORDER BY seq DESC LIMIT $3`,
        [options.resourceId ?? null, before, limit + 1],
      );
      const rows = r.rows.slice(0, limit);
      const last = rows[rows.length - 1];
      return {
        items: rows.map(toThread),
        nextCursor: r.rows.length > limit && last ? encodeCursor([Number(last.seq)]) : null,
      };
    });
  }

  async deleteThread(id: string): Promise<boolean> {
    checkId(id, 'thread id');
    return this.#write(async ({ q, touch }) => {
      const s = this.#core.s;
      // The thread row first: that waits for batches being added to it (they hold a key
      // share lock on it), whose messages the next statement then sees and deletes.
      // Messages and turns carry no foreign key to the thread.
      const r = await q.query(`DELETE FROM ${s}.threads WHERE id = $1`, [id]);
      if (r.rowCount === 0) return false;
      await q.query(`DELETE FROM ${s}.messages WHERE thread_id = $1`, [id]);
      await q.query(`DELETE FROM ${s}.turns WHERE thread_id = $1`, [id]);
      touch({ threadId: id, kind: 'thread' });
      return true;
    });
  }

  // ------------------------------------------------------------------ messages

  async addMessages(batch: NewMessage[]): Promise<Message[]> {
    const drafts = normalizeNewMessages(batch, Date.now());
    if (drafts.length === 0) {
      this.#guard();
      return [];
    }
    const lookups = messageBatchLookups(drafts);
    const s = this.#core.s;
    return this.#write(async ({ q, touch }) => {
      const found = await q.query<{
        kind: string;
        id: string;
        thread_id: string;
        depth: number | null;
      }>(
        // Joins on unnest (one index probe per id) rather than `id = ANY(...)`, which
        // a plan made while the table was small turns into a scan of every row.
        `SELECT 't' AS kind, t.id, t.id AS thread_id, NULL::integer AS depth
         FROM unnest($1::text[]) AS k(id) JOIN ${s}.threads t ON t.id = k.id
         UNION ALL
         SELECT 'm', m.id, m.thread_id, m.depth
         FROM unnest($2::text[]) AS k(id) JOIN ${s}.messages m ON m.id = k.id`,
        [lookups.threadIds, lookups.messageIds],
      );
      const threadIds = new Set<string>();
      const messages = new Map<string, { threadId: string; depth: number }>();
      for (const row of found.rows) {
        if (row.kind === 't') threadIds.add(row.id);
        else messages.set(row.id, { threadId: row.thread_id, depth: row.depth! });
      }
      const planned = planMessageBatch(drafts, { threadIds, messages });
      // One statement, atomic on its own, so the lookup above needs no transaction:
      // messages are immutable, a message id taken meanwhile fails the primary key, and
      // the batch's threads are key-share locked here (messages carry no per-row foreign
      // key, which costs a check per row): a thread deleted meanwhile leaves fewer locked
      // threads than the batch names, and the insert stores nothing.
      const threadCount = new Set(planned.map((m) => m.threadId)).size;
      const params: unknown[] = [
        planned.map((m) => m.id),
        planned.map((m) => m.threadId),
        planned.map((m) => m.parentId),
        planned.map((m) => m.role),
        planned.map((m) => m.type),
        planned.map((m) => JSON.stringify(m.data)),
        planned.map((m) => m.createdAt),
        planned.map((m) => m.depth),
        threadCount,
      ];
      const notify = this.#notifyColumn(params, 'messages', 't.thread_id', null);
      let inserted: number;
      try {
        const r = await q.query(
          `WITH th AS (
             SELECT id FROM ${s}.threads WHERE id IN (SELECT DISTINCT x FROM unnest($2::text[]) AS x) FOR KEY SHARE),
           ins AS (
             INSERT INTO ${s}.messages (id, thread_id, parent_id, role, type, data, created_at, depth)
             SELECT id, thread_id, parent_id, role, type, data::jsonb, created_at, depth
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[], $8::int[])
               AS u(id, thread_id, parent_id, role, type, data, created_at, depth)
             WHERE (SELECT count(*) FROM th) = $9::int
             RETURNING thread_id)
           SELECT t.thread_id${notify} FROM (SELECT DISTINCT thread_id FROM ins) t`,
          params,
        );
        inserted = r.rows.length;
      } catch (e) {
        // Another writer took a message id between the lookup and the insert.
        if (sqlState(e) === '23505')
          throw conflict('a message id in the batch is already used; messages are immutable');
        throw e;
      }
      if (inserted !== threadCount) {
        throw new CairnError(
          'NOT_FOUND',
          'a thread of the batch was deleted meanwhile; nothing was stored',
        );
      }
      for (const threadId of new Set(planned.map((m) => m.threadId)))
        touch({ threadId, kind: 'messages' }, true);
      return planned;
    }, true);
  }

  async getMessage(id: string): Promise<Message | null> {
    checkId(id, 'message id');
    return this.#read(async (q) => {
      const r = await q.query(
        `SELECT ${MESSAGE_COLUMNS} FROM ${this.#core.s}.messages WHERE id = $1`,
        [id],
      );
      return r.rows[0] ? toMessage(r.rows[0]) : null;
    });
  }

  async getChain(headId: string, options: ChainOptions = {}): Promise<Message[]> {
    const limit =
      options.limit === undefined
        ? null
        : checkLimit(options.limit, 'limit', 0, Number.MAX_SAFE_INTEGER);
    const before = options.beforeDepth;
    if (before !== undefined && (!Number.isInteger(before) || before < 0)) {
      throw invalid(`beforeDepth must be an integer >= 0, got ${before}`);
    }
    checkId(headId, 'head id');
    const s = this.#core.s;
    return this.#read(async (q) => {
      // Walk from the head toward the root, stopping once below the lowest depth wanted.
      const r = await q.query(
        `WITH RECURSIVE
           head AS (SELECT depth FROM ${s}.messages WHERE id = $1),
           bounds AS (
             SELECT LEAST(COALESCE($2::int, depth + 1), depth + 1) AS top,
                    CASE WHEN $3::bigint IS NULL THEN 0
                         ELSE LEAST(COALESCE($2::int, depth + 1), depth + 1) - $3::bigint END AS floor
             FROM head),
           chain AS (
             SELECT ${MESSAGE_COLUMNS} FROM ${s}.messages WHERE id = $1
             UNION ALL
             SELECT m.id, m.thread_id, m.parent_id, m.role, m.type, m.data, m.created_at, m.depth
             FROM ${s}.messages m JOIN chain c ON m.id = c.parent_id
             WHERE c.depth - 1 >= (SELECT floor FROM bounds))
         SELECT ${MESSAGE_COLUMNS} FROM chain
         WHERE depth < (SELECT top FROM bounds) AND depth >= (SELECT floor FROM bounds)
         ORDER BY depth`,
        [headId, before ?? null, limit],
      );
      if (r.rows.length === 0) {
        const exists = await q.query(`SELECT 1 FROM ${s}.messages WHERE id = $1`, [headId]);
        if (exists.rowCount === 0) throw notFound('message', headId);
      }
      return r.rows.map(toMessage);
    });
  }

  // ------------------------------------------------------------------ branches

  async createBranch(input: NewBranch): Promise<Branch> {
    const b = checkNewBranch(input, Date.now());
    const s = this.#core.s;
    return this.#write(async ({ q, touch }) => {
      // Locking the thread row serializes branch changes of one thread (names, activation).
      const thread = await q.query(`SELECT id FROM ${s}.threads WHERE id = $1 FOR UPDATE`, [
        b.threadId,
      ]);
      if (thread.rowCount === 0) throw notFound('thread', b.threadId);
      const taken = await q.query<{ id: string; thread_id: string; name: string }>(
        `SELECT id, thread_id, name FROM ${s}.branches WHERE id = $1 OR (thread_id = $2 AND name = $3) OR id = $4`,
        [b.id, b.threadId, b.name, b.parentBranchId],
      );
      if (taken.rows.some((r) => r.id === b.id))
        throw conflict(`branch id ${JSON.stringify(b.id)} already exists`, { id: b.id });
      if (b.headMessageId !== null) {
        const head = await q.query<{ thread_id: string }>(
          `SELECT thread_id FROM ${s}.messages WHERE id = $1`,
          [b.headMessageId],
        );
        if (!head.rows[0]) throw notFound('message', b.headMessageId);
        if (head.rows[0].thread_id !== b.threadId) {
          throw invalid(
            `head message ${JSON.stringify(b.headMessageId)} belongs to another thread`,
          );
        }
      }
      if (
        b.parentBranchId !== null &&
        !taken.rows.some((r) => r.id === b.parentBranchId && r.thread_id === b.threadId)
      ) {
        throw notFound('parent branch', b.parentBranchId);
      }
      if (taken.rows.some((r) => r.thread_id === b.threadId && r.name === b.name)) {
        throw conflict(`branch ${JSON.stringify(b.name)} already exists in this thread`, {
          name: b.name,
        });
      }
      const others = await q.query(`SELECT 1 FROM ${s}.branches WHERE thread_id = $1 LIMIT 1`, [
        b.threadId,
      ]);
      const activate = b.activate || others.rowCount === 0;
      if (activate)
        await q.query(
          `UPDATE ${s}.branches SET is_active = false WHERE thread_id = $1 AND is_active`,
          [b.threadId],
        );
      const r = await q.query(
        `INSERT INTO ${s}.branches (id, thread_id, name, head_message_id, is_active, created_at, fork_message_id, parent_branch_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${BRANCH_COLUMNS}`,
        [
          b.id,
          b.threadId,
          b.name,
          b.headMessageId,
          activate,
          b.createdAt,
          b.forkMessageId,
          b.parentBranchId,
        ],
      );
      const branch = toBranch(r.rows[0]!);
      touch({ threadId: branch.threadId, kind: 'branch', branchId: branch.id });
      return branch;
    });
  }

  async getBranch(threadId: string, name: string): Promise<Branch | null> {
    checkId(threadId, 'threadId');
    checkName(name, 'branch name');
    return this.#one(
      `SELECT ${BRANCH_COLUMNS} FROM ${this.#core.s}.branches WHERE thread_id = $1 AND name = $2`,
      [threadId, name],
      toBranch,
    );
  }

  async getBranchById(id: string): Promise<Branch | null> {
    checkId(id, 'branch id');
    return this.#one(
      `SELECT ${BRANCH_COLUMNS} FROM ${this.#core.s}.branches WHERE id = $1`,
      [id],
      toBranch,
    );
  }

  async listBranches(threadId: string): Promise<Branch[]> {
    checkId(threadId, 'threadId');
    return this.#all(
      `SELECT ${BRANCH_COLUMNS} FROM ${this.#core.s}.branches WHERE thread_id = $1 ORDER BY seq`,
      [threadId],
      toBranch,
    );
  }

  async getActiveBranch(threadId: string): Promise<Branch | null> {
    checkId(threadId, 'threadId');
    return this.#one(
      `SELECT ${BRANCH_COLUMNS} FROM ${this.#core.s}.branches WHERE thread_id = $1 AND is_active`,
      [threadId],
      toBranch,
    );
  }

  async setActiveBranch(branchId: string): Promise<Branch> {
    checkId(branchId, 'branch id');
    const s = this.#core.s;
    return this.#write(async ({ q, touch }) => {
      const found = await q.query<{ thread_id: string }>(
        `SELECT thread_id FROM ${s}.branches WHERE id = $1`,
        [branchId],
      );
      if (!found.rows[0]) throw notFound('branch', branchId);
      const threadId = found.rows[0].thread_id;
      await q.query(`SELECT id FROM ${s}.threads WHERE id = $1 FOR UPDATE`, [threadId]);
      // Two statements: the one-active-branch index is checked row by row.
      await q.query(
        `UPDATE ${s}.branches SET is_active = false WHERE thread_id = $1 AND is_active AND id <> $2`,
        [threadId, branchId],
      );
      const r = await q.query(
        `UPDATE ${s}.branches SET is_active = true WHERE id = $1 RETURNING ${BRANCH_COLUMNS}`,
        [branchId],
      );
      if (!r.rows[0]) throw notFound('branch', branchId);
      touch({ threadId, kind: 'branch', branchId });
      return toBranch(r.rows[0]);
    });
  }

  async moveHead(
    branchId: string,
    expectedHeadId: string | null,
    newHeadId: string,
  ): Promise<Branch> {
    checkId(branchId, 'branch id');
    if (expectedHeadId !== null) checkId(expectedHeadId, 'expectedHeadId');
    checkId(newHeadId, 'new head id');
    const s = this.#core.s;
    return this.#write(async ({ q, touch }) => {
      // Compare-and-set in one statement; only when it changes nothing do we ask why.
      const params: unknown[] = [branchId, expectedHeadId, newHeadId];
      const notify = this.#notifyColumn(params, 'branch', 'b.thread_id', 'b.id');
      const r = await q.query(
        `WITH moved AS (
           UPDATE ${s}.branches b SET head_message_id = $3
           WHERE b.id = $1 AND b.head_message_id IS NOT DISTINCT FROM $2::text
             AND EXISTS (SELECT 1 FROM ${s}.messages m WHERE m.id = $3 AND m.thread_id = b.thread_id)
           RETURNING b.*)
         SELECT ${BRANCH_COLUMNS.split(', ')
           .map((c) => `b.${c}`)
           .join(', ')}${notify} FROM moved b`,
        params,
      );
      const row = r.rows[0];
      if (!row) {
        const b = await q.query<{
          thread_id: string;
          head_message_id: string | null;
          name: string;
        }>(`SELECT thread_id, head_message_id, name FROM ${s}.branches WHERE id = $1`, [branchId]);
        const branch = b.rows[0];
        if (!branch) throw notFound('branch', branchId);
        const m = await q.query<{ thread_id: string }>(
          `SELECT thread_id FROM ${s}.messages WHERE id = $1`,
          [newHeadId],
        );
        if (!m.rows[0]) throw notFound('message', newHeadId);
        if (m.rows[0].thread_id !== branch.thread_id)
          throw invalid(`message ${JSON.stringify(newHeadId)} belongs to another thread`);
        throw conflict(
          `branch ${JSON.stringify(branch.name)} head is ${JSON.stringify(branch.head_message_id)}, not ${JSON.stringify(expectedHeadId)}`,
          { branchId, headMessageId: branch.head_message_id },
        );
      }
      const branch = toBranch(row);
      touch({ threadId: branch.threadId, kind: 'branch', branchId: branch.id }, true);
      return branch;
    }, true);
  }

  async lockBranch(branchId: string, options?: LockOptions): Promise<Branch> {
    checkId(branchId, 'branch id');
    const timeoutMs = checkLockOptions(options);
    const s = this.#core.s;
    return this.#write(async ({ q }) => {
      // Transaction-local: the bound also covers the lock waits of the writes that follow.
      // (lock_timeout 0 would mean no bound at all, so "no wait" is 1 ms.)
      await q.query(`SELECT set_config('lock_timeout', $1, true)`, [`${Math.max(1, timeoutMs)}ms`]);
      let r: { rows: Row[] };
      try {
        // The row lock moveHead's UPDATE and appendStateCommit's insert also take.
        r = await q.query(
          `SELECT ${BRANCH_COLUMNS} FROM ${s}.branches WHERE id = $1 FOR NO KEY UPDATE`,
          [branchId],
        );
      } catch (e) {
        if (sqlState(e) !== '55P03') throw e;
        throw new CairnError(
          'TIMEOUT',
          `branch ${JSON.stringify(branchId)} stayed locked by another transaction for ${timeoutMs} ms`,
          { cause: e, details: { branchId, timeoutMs } },
        );
      }
      const row = r.rows[0];
      if (!row) throw notFound('branch', branchId);
      return toBranch(row);
    });
  }

  // ------------------------------------------------------------------ checkpoints

  async saveCheckpoint(input: NewCheckpoint): Promise<Checkpoint> {
    const c = checkNewCheckpoint(input, Date.now());
    const s = this.#core.s;
    return this.#write(async ({ q, touch }) => {
      const found = await q.query<{ kind: string; thread_id: string }>(
        `SELECT 't' AS kind, id AS thread_id FROM ${s}.threads WHERE id = $1
         UNION ALL SELECT 'm', thread_id FROM ${s}.messages WHERE id = $2`,
        [c.threadId, c.messageId],
      );
      if (!found.rows.some((r) => r.kind === 't')) throw notFound('thread', c.threadId);
      const m = found.rows.find((r) => r.kind === 'm');
      if (!m) throw notFound('message', c.messageId);
      if (m.thread_id !== c.threadId)
        throw invalid(`message ${JSON.stringify(c.messageId)} belongs to another thread`);
      const r = await q.query(
        `INSERT INTO ${s}.checkpoints (id, thread_id, name, message_id, created_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (thread_id, name) DO UPDATE SET message_id = EXCLUDED.message_id
         RETURNING ${CHECKPOINT_COLUMNS}`,
        [c.id, c.threadId, c.name, c.messageId, c.createdAt],
      );
      touch({ threadId: c.threadId, kind: 'checkpoint' });
      return toCheckpoint(r.rows[0]!);
    });
  }

  async getCheckpoint(threadId: string, name: string): Promise<Checkpoint | null> {
    checkId(threadId, 'threadId');
    checkName(name, 'checkpoint name');
    return this.#one(
      `SELECT ${CHECKPOINT_COLUMNS} FROM ${this.#core.s}.checkpoints WHERE thread_id = $1 AND name = $2`,
      [threadId, name],
      toCheckpoint,
    );
  }

  async listCheckpoints(threadId: string): Promise<Checkpoint[]> {
    checkId(threadId, 'threadId');
    return this.#all(
      `SELECT ${CHECKPOINT_COLUMNS} FROM ${this.#core.s}.checkpoints WHERE thread_id = $1 ORDER BY seq`,
      [threadId],
      toCheckpoint,
    );
  }

  async deleteCheckpoint(threadId: string, name: string): Promise<boolean> {
    checkId(threadId, 'threadId');
    checkName(name, 'checkpoint name');
    return this.#write(async ({ q, touch }) => {
      const r = await q.query(
        `DELETE FROM ${this.#core.s}.checkpoints WHERE thread_id = $1 AND name = $2`,
        [threadId, name],
      );
      if (r.rowCount === 0) return false;
      touch({ threadId, kind: 'checkpoint' });
      return true;
    }, true);
  }

  // ------------------------------------------------------------------ state

  async appendStateCommit(commit: NewStateCommit, expectedVersion: number): Promise<StateCommit> {
    const c = checkStateCommit(commit, expectedVersion);
    const s = this.#core.s;
    return this.#write(async ({ q, touch }) => {
      // Compare-and-set in one statement: the insert happens only when the branch's
      // latest version is the expected one; the primary key settles a race between two.
      // It takes the branch's row lock, so it waits while a lockBranch holder commits.
      const params: unknown[] = [
        c.branchId,
        c.messageId,
        expectedVersion,
        JSON.stringify(c.update),
        c.snapshot === null ? null : JSON.stringify(c.snapshot),
        Date.now(),
      ];
      const notify = this.#notifyColumn(params, 'state', 'i.thread_id', 'i.branch_id');
      const r = await q.query(
        `WITH ins AS (
           INSERT INTO ${s}.state_commits (branch_id, thread_id, version, message_id, message_depth, "update", snapshot, created_at)
           SELECT b.id, b.thread_id, ($3::bigint + 1)::int, $2::text, m.depth, $4::jsonb, $5::jsonb, $6
           FROM ${s}.branches b LEFT JOIN ${s}.messages m ON m.id = $2::text AND m.thread_id = b.thread_id
           WHERE b.id = $1 AND ($2::text IS NULL OR m.id IS NOT NULL)
             AND (SELECT COALESCE(max(version), 0) FROM ${s}.state_commits WHERE branch_id = $1) = $3::bigint
           FOR NO KEY UPDATE OF b
           ON CONFLICT (branch_id, version) DO NOTHING
           RETURNING *)
         SELECT ${COMMIT_COLUMNS.split(', ')
           .map((col) => `i.${col}`)
           .join(', ')}${notify} FROM ins i`,
        params,
      );
      const row = r.rows[0];
      if (!row) throw await this.#commitFailure(q, c.branchId, c.messageId, expectedVersion);
      const saved = toCommit(row);
      touch({ threadId: saved.threadId, kind: 'state', branchId: saved.branchId }, true);
      return saved;
    }, true);
  }

  async #commitFailure(
    q: Queryable,
    branchId: string,
    messageId: string | null,
    expected: number,
  ): Promise<CairnError> {
    const s = this.#core.s;
    const b = await q.query<{ thread_id: string; name: string; v: number }>(
      `SELECT thread_id, name, (SELECT COALESCE(max(version), 0) FROM ${s}.state_commits WHERE branch_id = $1) AS v
       FROM ${s}.branches WHERE id = $1`,
      [branchId],
    );
    const branch = b.rows[0];
    if (!branch) return notFound('branch', branchId);
    if (messageId !== null) {
      const m = await q.query<{ thread_id: string }>(
        `SELECT thread_id FROM ${s}.messages WHERE id = $1`,
        [messageId],
      );
      if (!m.rows[0]) return notFound('message', messageId);
      if (m.rows[0].thread_id !== branch.thread_id)
        return invalid(`message ${JSON.stringify(messageId)} belongs to another thread`);
    }
    return conflict(
      `branch ${JSON.stringify(branch.name)} is at state version ${branch.v}, not ${expected}`,
      {
        branchId,
        version: branch.v,
      },
    );
  }

  async getStateCommits(branchId: string, range: StateCommitRange = {}): Promise<StateCommit[]> {
    checkId(branchId, 'branch id');
    for (const key of ['fromVersion', 'toVersion'] as const) {
      const v = range[key];
      if (v !== undefined && (!Number.isSafeInteger(v) || v < 0))
        throw invalid(`${key} must be an integer >= 0, got ${v}`);
    }
    const s = this.#core.s;
    return this.#read(async (q) => {
      const r = await q.query(
        `SELECT ${COMMIT_COLUMNS.split(', ')
          .map((col) => `c.${col}`)
          .join(', ')}
         FROM ${s}.branches b LEFT JOIN ${s}.state_commits c
           ON c.branch_id = b.id AND c.version >= $2::bigint AND ($3::bigint IS NULL OR c.version <= $3::bigint)
         WHERE b.id = $1 ORDER BY c.version`,
        [branchId, range.fromVersion ?? 1, range.toVersion ?? null],
      );
      if (r.rows.length === 0) throw notFound('branch', branchId);
      return r.rows.filter((row) => row.version !== null).map(toCommit);
    });
  }

  async getLatestStateCommit(
    branchId: string,
    query: LatestCommitQuery = {},
  ): Promise<StateCommit | null> {
    checkId(branchId, 'branch id');
    for (const key of ['maxVersion', 'maxMessageDepth'] as const) {
      const v = query[key];
      if (v !== undefined && !Number.isSafeInteger(v))
        throw invalid(`${key} must be an integer, got ${v}`);
    }
    const s = this.#core.s;
    return this.#read(async (q) => {
      const r = await q.query(
        `SELECT b.id AS found, c.* FROM ${s}.branches b
         LEFT JOIN LATERAL (
           SELECT ${COMMIT_COLUMNS} FROM ${s}.state_commits
           WHERE branch_id = b.id
             AND ($2::bigint IS NULL OR version <= $2::bigint)
             AND (NOT $3 OR snapshot IS NOT NULL)
             AND ($4::bigint IS NULL OR COALESCE(message_depth, -1) <= $4::bigint)
           ORDER BY version DESC LIMIT 1) c ON true
         WHERE b.id = $1`,
        [
          branchId,
          query.maxVersion ?? null,
          query.withSnapshot === true,
          query.maxMessageDepth ?? null,
        ],
      );
      const row = r.rows[0];
      if (!row) throw notFound('branch', branchId);
      return row.version === null ? null : toCommit(row);
    });
  }

  // ------------------------------------------------------------------ turns

  async putTurn(turn: Turn): Promise<Turn> {
    const t = checkTurn(turn);
    const s = this.#core.s;
    return this.#write(async ({ q }) => {
      const r = await q.query(
        `INSERT INTO ${s}.turns (id, thread_id, message_id, source, user_id, status, state, steps, started_at, finished_at)
         SELECT $1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb, $9, $10
         WHERE EXISTS (SELECT 1 FROM ${s}.threads WHERE id = $2)
         ON CONFLICT (id) DO UPDATE SET thread_id = EXCLUDED.thread_id, message_id = EXCLUDED.message_id,
           source = EXCLUDED.source, user_id = EXCLUDED.user_id, status = EXCLUDED.status, state = EXCLUDED.state,
           steps = EXCLUDED.steps, started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at`,
        [
          t.id,
          t.threadId,
          t.messageId,
          t.source,
          t.userId,
          t.status,
          JSON.stringify(t.state),
          JSON.stringify(t.steps),
          t.startedAt,
          t.finishedAt,
        ],
      );
      if (r.rowCount === 0) throw notFound('thread', t.threadId);
      return structuredClone(t);
    }, true);
  }

  async getTurn(id: string): Promise<Turn | null> {
    checkId(id, 'turn id');
    return this.#one(
      `SELECT ${TURN_COLUMNS} FROM ${this.#core.s}.turns WHERE id = $1`,
      [id],
      toTurn,
    );
  }

  async listTurns(threadId: string, options: { limit?: number } = {}): Promise<Turn[]> {
    checkId(threadId, 'threadId');
    const limit = checkLimit(options.limit, 'limit', 100, 10_000);
    return this.#all(
      `SELECT ${TURN_COLUMNS} FROM ${this.#core.s}.turns WHERE thread_id = $1 ORDER BY started_at DESC, id DESC LIMIT $2`,
      [threadId, limit],
      toTurn,
    );
  }

  async deleteTurn(id: string): Promise<boolean> {
    checkId(id, 'turn id');
    return this.#write(async ({ q }) => {
      const r = await q.query(`DELETE FROM ${this.#core.s}.turns WHERE id = $1`, [id]);
      return r.rowCount > 0;
    }, true);
  }

  async purgeTurns(options: { before: number; threadId?: string }): Promise<number> {
    if (typeof options?.before !== 'number' || Number.isNaN(options.before)) {
      throw invalid('purgeTurns needs `before` (a timestamp)');
    }
    if (options.threadId !== undefined) checkId(options.threadId, 'threadId');
    return this.#write(async ({ q }) => {
      const r = await q.query(
        `DELETE FROM ${this.#core.s}.turns WHERE status <> 'running' AND started_at < $1 AND ($2::text IS NULL OR thread_id = $2)`,
        [options.before, options.threadId ?? null],
      );
      return r.rowCount;
    }, true);
  }

  // ------------------------------------------------------------------ leases

  /** Reads the lease row locked (inserting nothing), so the rule is applied to a stable row. */
  async #lockedLease(q: Queryable, key: string): Promise<Lease | null> {
    const r = await q.query(
      `SELECT ${LEASE_COLUMNS} FROM ${this.#core.s}.leases WHERE key = $1 FOR UPDATE`,
      [key],
    );
    return r.rows[0] ? toLease(r.rows[0]) : null;
  }

  async #saveLease(q: Queryable, lease: Lease, insert: boolean): Promise<boolean> {
    const s = this.#core.s;
    const params = [
      lease.key,
      lease.owner,
      lease.acquiredAt,
      lease.renewedAt,
      lease.expiresAt,
      lease.releasedAt,
      JSON.stringify(lease.data),
    ];
    if (insert) {
      const r = await q.query(
        `INSERT INTO ${s}.leases (${LEASE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb) ON CONFLICT (key) DO NOTHING`,
        params,
      );
      return r.rowCount > 0;
    }
    await q.query(
      `UPDATE ${s}.leases SET owner = $2, acquired_at = $3, renewed_at = $4, expires_at = $5, released_at = $6, data = $7::jsonb WHERE key = $1`,
      params,
    );
    return true;
  }

  async acquireLease(input: AcquireLeaseInput): Promise<AcquiredLease> {
    const checked = checkLeaseInput(input);
    return this.#write(async ({ q }) => {
      // A first acquisition races on the insert; the loser re-reads the winner's row.
      for (;;) {
        const current = await this.#lockedLease(q, checked.key);
        const result = planLeaseAcquire(current, checked, Date.now());
        if (await this.#saveLease(q, result.lease, current === null)) return result;
      }
    });
  }

  async renewLease(key: string, owner: string, ttlMs: number, data?: JsonObject): Promise<Lease> {
    checkName(key, 'lease key');
    checkName(owner, 'lease owner');
    const ttl = checkTtl(ttlMs);
    const patch = checkLeaseData(data);
    return this.#write(async ({ q }) => {
      const lease = planLeaseRenew(
        await this.#lockedLease(q, key),
        key,
        owner,
        ttl,
        patch,
        Date.now(),
      );
      await this.#saveLease(q, lease, false);
      return lease;
    });
  }

  async releaseLease(key: string, owner: string, data?: JsonObject): Promise<Lease> {
    checkName(key, 'lease key');
    checkName(owner, 'lease owner');
    const patch = checkLeaseData(data);
    return this.#write(async ({ q }) => {
      const lease = planLeaseRelease(
        await this.#lockedLease(q, key),
        key,
        owner,
        patch,
        Date.now(),
      );
      await this.#saveLease(q, lease, false);
      return lease;
    });
  }

  async getLease(key: string): Promise<Lease | null> {
    checkName(key, 'lease key');
    return this.#one(
      `SELECT ${LEASE_COLUMNS} FROM ${this.#core.s}.leases WHERE key = $1`,
      [key],
      toLease,
    );
  }

  // ------------------------------------------------------------------ memories

  async #space(q: Queryable, lock = false): Promise<EmbeddingSpace | null> {
    const r = await q.query<{ embedder_id: string | null; dimensions: number }>(
      `SELECT embedder_id, dimensions FROM ${this.#core.s}.embedding_space${lock ? ' FOR UPDATE' : ''}`,
    );
    const row = r.rows[0];
    return row ? { embedderId: row.embedder_id, dimensions: row.dimensions } : null;
  }

  /** Fixes the space on first use (a concurrent writer may win: then theirs stands). */
  async #fixSpace(q: Queryable, space: EmbeddingSpace): Promise<EmbeddingSpace> {
    await q.query(
      `INSERT INTO ${this.#core.s}.embedding_space (one, embedder_id, dimensions) VALUES (true, $1, $2) ON CONFLICT (one) DO NOTHING`,
      [space.embedderId, space.dimensions],
    );
    return (await this.#space(q, true))!;
  }

  async addMemories(batch: NewMemory[]): Promise<Memory[]> {
    const memories = normalizeNewMemories(batch, Date.now());
    if (memories.length === 0) {
      this.#guard();
      return [];
    }
    const s = this.#core.s;
    return this.#write(async ({ q }) => {
      const first = memories.find((m) => m.embedding);
      if (first) {
        const space =
          (await this.#space(q)) ??
          (await this.#fixSpace(q, { embedderId: null, dimensions: first.embedding!.length }));
        for (const m of memories)
          if (m.embedding) checkVectorWidth(space, m.embedding, `memory ${m.id} embedding`);
      }
      const indexed = memories.map((m) => searchVector(m.content.text));
      try {
        await q.query(
          `INSERT INTO ${s}.memories (id, type, agent_id, entity_id, room_id, world_id, scope, content, metadata,
             content_hash, embedding, embedding_norm, search, search_len, created_at)
           SELECT id, type, agent_id, entity_id, room_id, world_id, scope, content::jsonb, metadata::jsonb,
             content_hash, embedding::float8[], embedding_norm, search::tsvector, search_len, created_at
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
             $9::text[], $10::text[], $11::text[], $12::float8[], $13::float8[], $14::int[], $15::text[], $16::int[])
             AS u(id, type, agent_id, entity_id, room_id, world_id, scope, content, metadata, content_hash, embedding,
               embedding_norm, created_at, ord, search, search_len)
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
            memories.map((m) => m.createdAt),
            memories.map((_, i) => i),
            indexed.map((x) => x.vector),
            indexed.map((x) => x.length),
          ],
        );
      } catch (e) {
        if (sqlState(e) === '23505') throw conflict('a memory id in the batch is already used');
        throw e;
      }
      return memories;
    });
  }

  async getMemory(id: string): Promise<Memory | null> {
    checkId(id, 'memory id');
    return this.#one(
      `SELECT ${MEMORY_COLUMNS} FROM ${this.#core.s}.memories WHERE id = $1`,
      [id],
      toMemory,
    );
  }

  async updateMemory(id: string, patch: MemoryPatch): Promise<Memory> {
    const p = checkMemoryPatch(patch);
    checkId(id, 'memory id');
    const s = this.#core.s;
    return this.#write(async ({ q }) => {
      const exists = await q.query(`SELECT 1 FROM ${s}.memories WHERE id = $1 FOR UPDATE`, [id]);
      if (exists.rowCount === 0) throw notFound('memory', id);
      if (p.embedding) {
        const space =
          (await this.#space(q)) ??
          (await this.#fixSpace(q, { embedderId: null, dimensions: p.embedding.length }));
        checkVectorWidth(space, p.embedding, 'embedding');
      }
      const indexed = p.content === undefined ? null : searchVector(p.content.text);
      const r = await q.query(
        `UPDATE ${s}.memories SET
           content = COALESCE($2::jsonb, content),
           search = COALESCE($8::tsvector, search),
           search_len = COALESCE($9, search_len),
           content_hash = COALESCE($3, content_hash),
           metadata = COALESCE($4::jsonb, metadata),
           embedding = CASE WHEN $5 THEN $6::float8[] ELSE embedding END,
           embedding_norm = CASE WHEN $5 THEN $7 ELSE embedding_norm END
         WHERE id = $1 RETURNING ${MEMORY_COLUMNS}`,
        [
          id,
          p.content === undefined ? null : JSON.stringify(p.content),
          p.contentHash ?? null,
          p.metadata === undefined ? null : JSON.stringify(p.metadata),
          p.embedding !== undefined,
          p.embedding ? floatArray(p.embedding) : null,
          p.embedding ? norm(p.embedding) : null,
          indexed?.vector ?? null,
          indexed?.length ?? null,
        ],
      );
      return toMemory(r.rows[0]!);
    });
  }

  async deleteMemories(ids: string[]): Promise<number> {
    if (!Array.isArray(ids)) throw invalid('deleteMemories expects an array of ids');
    for (const id of ids) checkId(id, 'memory id');
    if (ids.length === 0) {
      this.#guard();
      return 0;
    }
    return this.#write(async ({ q }) => {
      const r = await q.query(
        `DELETE FROM ${this.#core.s}.memories m USING unnest($1::text[]) AS k(id) WHERE m.id = k.id`,
        [ids],
      );
      return r.rowCount;
    }, true);
  }

  async listMemories(filter?: MemoryFilter, options: ListMemoriesOptions = {}): Promise<Memory[]> {
    const f = checkMemoryFilter(filter);
    const limit = checkLimit(options.limit, 'limit', 100, 10_000);
    if (options.order !== undefined && options.order !== 'newest' && options.order !== 'oldest') {
      throw invalid(`order must be 'newest' or 'oldest', got ${JSON.stringify(options.order)}`);
    }
    const dir = options.order === 'oldest' ? 'ASC' : 'DESC';
    const params: unknown[] = [];
    const where = memoryWhere(f, params);
    params.push(limit);
    return this.#all(
      `SELECT ${MEMORY_COLUMNS} FROM ${this.#core.s}.memories WHERE ${where}
       ORDER BY created_at ${dir}, seq ${dir} LIMIT $${params.length}`,
      params,
      toMemory,
    );
  }

  async countMemories(filter?: MemoryFilter): Promise<number> {
    const f = checkMemoryFilter(filter);
    const params: unknown[] = [];
    const where = memoryWhere(f, params);
    return this.#read(async (q) => {
      const r = await q.query<{ n: string | number }>(
        `SELECT count(*) AS n FROM ${this.#core.s}.memories WHERE ${where}`,
        params,
      );
      return Number(r.rows[0]?.n ?? 0);
    });
  }

  async searchMemories(search: MemorySearch): Promise<MemoryHit[]> {
    const s = checkMemorySearch(search);
    if (s.text !== undefined) return this.#searchText(s);
    return this.#read(async (q) => {
      const space = await this.#space(q);
      checkVectorWidth(space, s.vector!, 'query vector');
      if (!space) return [];
      if (this.#core.vector) {
        // The index is built by the first search, in bulk over what is stored (much
        // faster than growing it row by row during a bulk load), then kept up to date.
        await ensureVectorIndex(this.#core, q, space.dimensions);
        const hits = await this.#searchHnsw(q, s, space.dimensions);
        if (hits) return hits;
      }
      return this.#searchExact(q, s);
    });
  }

  /** Sorts candidates by their exact (float64) cosine similarity, as the reference does. */
  #rescore(rows: Row[], s: CheckedSearch): MemoryHit[] {
    return rows
      .map((row) => ({
        memory: toMemory(row),
        seq: Number(row.seq),
        score: cosineSimilarity(s.vector!, row.embedding as number[]),
      }))
      .filter((h) => s.threshold === undefined || h.score >= s.threshold)
      .sort((a, b) => b.score - a.score || a.seq - b.seq)
      .slice(0, s.limit)
      .map(({ memory, score }) => ({ memory, score }));
  }

  /** Brute force: cosine computed in SQL over every admitted row, then rescored exactly. */
  async #searchExact(q: Queryable, s: CheckedSearch): Promise<MemoryHit[]> {
    const params: unknown[] = [
      floatArray(s.vector!),
      norm(s.vector!),
      s.threshold ?? null,
      s.limit + RESCORE_SLACK,
    ];
    const where = memoryWhere(s.filter, params);
    const r = await q.query(
      `SELECT * FROM (
         SELECT ${MEMORY_COLUMNS},
           CASE WHEN embedding_norm = 0 OR $2::float8 = 0 THEN 0
                ELSE (SELECT sum(a * b) FROM unnest(embedding, $1::float8[]) AS t(a, b)) / (embedding_norm * $2::float8) END AS score
         FROM ${this.#core.s}.memories WHERE embedding IS NOT NULL AND ${where}) x
       WHERE $3::float8 IS NULL OR score >= $3::float8 - 1e-9
       ORDER BY score DESC, seq ASC LIMIT $4`,
      params,
    );
    return this.#rescore(r.rows, s);
  }

  /**
   * The HNSW index, with pgvector's iterative scan so a filter that rejects most
   * neighbours still yields `limit` rows. Returns null when the index gave fewer rows
   * than asked for (the filter admits fewer, or the scan gave up): the caller then runs
   * the exact scan, which settles it.
   */
  async #searchHnsw(q: Queryable, s: CheckedSearch, dims: number): Promise<MemoryHit[] | null> {
    const sql = hnswSearchSql(this.#core.s, this.#core.vector!.schema, dims, s);
    const rows = await q.transaction(async (tq) => {
      await tq.query(
        `SELECT set_config('hnsw.ef_search', $1, true), set_config('hnsw.iterative_scan', 'relaxed_order', true),
                set_config('hnsw.max_scan_tuples', '50000', true)`,
        [String(sql.efSearch)],
      );
      return (await tq.query(sql.text, sql.params)).rows;
    });
    if (rows.length < s.limit) return null;
    return this.#rescore(rows, s);
  }

  /**
   * BM25 over the shared tokenizer's words, as the reference store computes it: the
   * collection statistics (count, mean length, document frequencies) are over every
   * stored memory, the filter only chooses which of them are returned.
   */
  async #searchText(s: CheckedSearch): Promise<MemoryHit[]> {
    const query = searchQuery(keywordTokens(s.text!));
    if (query.lexemes.length === 0) {
      this.#guard();
      return [];
    }
    const params: unknown[] = [query.lexemes, query.single, query.any, s.limit];
    const where = memoryWhere(s.filter, params);
    const m = this.#core.s;
    return this.#read(async (q) => {
      const r = await q.query(
        `WITH stats AS (
           SELECT count(*)::float8 AS n, COALESCE(avg(search_len), 0)::float8 AS avgdl FROM ${m}.memories),
         terms AS (
           SELECT t.lexeme, ln(1 + (stats.n - d.n + 0.5) / (d.n + 0.5)) AS idf
           FROM unnest($1::text[], $2::tsquery[]) AS t(lexeme, q) CROSS JOIN stats
             CROSS JOIN LATERAL (SELECT count(*)::float8 AS n FROM ${m}.memories WHERE search @@ t.q) d)
         SELECT ${MEMORY_COLUMNS},
           (SELECT sum(terms.idf * tf * ${BM25_K1 + 1} / (tf + ${BM25_K1} * (1 - ${BM25_B} + ${BM25_B} * search_len / stats.avgdl)))
            FROM unnest(search) AS u JOIN terms ON terms.lexeme = u.lexeme,
              LATERAL (SELECT array_length(u.positions, 1)::float8 AS tf) f) AS score
         FROM ${m}.memories, stats
         WHERE search @@ $3::tsquery AND ${where}
         ORDER BY score DESC, seq ASC LIMIT $4`,
        params,
      );
      return r.rows.map((row) => ({ memory: toMemory(row), score: row.score as number }));
    });
  }

  async ensureEmbeddingSpace(space: {
    embedderId: string;
    dimensions: number;
  }): Promise<EmbeddingSpace> {
    resolveEmbeddingSpace(null, space);
    return this.#write(async ({ q }) => {
      const current = (await this.#space(q, true)) ?? (await this.#fixSpace(q, { ...space }));
      const r = resolveEmbeddingSpace(current, space);
      if (r.changed) {
        await q.query(
          `UPDATE ${this.#core.s}.embedding_space SET embedder_id = $1, dimensions = $2`,
          [r.space.embedderId, r.space.dimensions],
        );
      }
      return { embedderId: r.space.embedderId, dimensions: r.space.dimensions };
    });
  }

  async getEmbeddingSpace(): Promise<EmbeddingSpace | null> {
    return this.#read((q) => this.#space(q));
  }

  async getCachedEmbeddings(
    embedderId: string,
    contentHashes: string[],
  ): Promise<Map<string, number[]>> {
    checkId(embedderId, 'embedderId');
    if (!Array.isArray(contentHashes) || !contentHashes.every((h) => typeof h === 'string')) {
      throw invalid('contentHashes must be an array of strings');
    }
    return this.#read(async (q) => {
      const r = await q.query<{ content_hash: string; embedding: number[] }>(
        `SELECT c.content_hash, c.embedding FROM unnest($2::text[]) AS k(h) JOIN ${this.#core.s}.embedding_cache c ON c.embedder_id = $1 AND c.content_hash = k.h`,
        [embedderId, contentHashes],
      );
      const byHash = new Map(r.rows.map((row) => [row.content_hash, row.embedding]));
      const out = new Map<string, number[]>();
      for (const h of contentHashes) {
        const e = byHash.get(h);
        if (e) out.set(h, e);
      }
      return out;
    });
  }

  async putCachedEmbeddings(
    embedderId: string,
    entries: Array<{ contentHash: string; embedding: number[] }>,
  ): Promise<void> {
    checkId(embedderId, 'embedderId');
    if (!Array.isArray(entries)) throw invalid('entries must be an array');
    for (const e of entries) {
      checkId(e?.contentHash, 'contentHash');
      if (
        !Array.isArray(e.embedding) ||
        e.embedding.length === 0 ||
        !e.embedding.every((x) => typeof x === 'number' && Number.isFinite(x))
      ) {
        throw invalid('a cached embedding must be a non-empty array of finite numbers');
      }
    }
    if (entries.length === 0) {
      this.#guard();
      return;
    }
    // The last entry for a hash wins, as in the reference store.
    const last = new Map(entries.map((e) => [e.contentHash, e.embedding]));
    return this.#write(async ({ q }) => {
      const space = await this.#space(q);
      for (const e of entries) checkVectorWidth(space, e.embedding, 'cached embedding');
      await q.query(
        `INSERT INTO ${this.#core.s}.embedding_cache (embedder_id, content_hash, embedding)
         SELECT $1, h, e::float8[] FROM unnest($2::text[], $3::text[]) AS u(h, e)
         ON CONFLICT (embedder_id, content_hash) DO UPDATE SET embedding = EXCLUDED.embedding`,
        [embedderId, [...last.keys()], [...last.values()].map(floatArray)],
      );
    });
  }

  // ------------------------------------------------------------------ lifecycle

  async transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T> {
    this.#guard();
    if (this.#tx) return fn(this);
    const core = this.#core;
    const pending: StoreChange[] = [];
    const result = await core.gate.exclusive(() => {
      this.#guard();
      return core.db.transaction((q) => fn(new PostgresStore(core, { q, pending })));
    });
    for (const c of pending) core.broadcast(c);
    return result;
  }

  subscribe(threadId: string, listener: StoreListener): () => void {
    this.#guard();
    checkId(threadId, 'threadId');
    if (typeof listener !== 'function') throw invalid('listener must be a function');
    return this.#core.emitter.subscribe(threadId, listener);
  }

  async migrate(): Promise<void> {
    this.#guard();
    if (this.#tx) return;
    await this.#core.gate.exclusive(() => this.#core.migrate());
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async close(): Promise<void> {
    if (this.#tx) throw invalid('close() the store, not the store handed to transaction()');
    await this.#core.close();
  }

  // ------------------------------------------------------------------ helpers

  #one<T>(sql: string, params: unknown[], map: (r: Row) => T): Promise<T | null> {
    return this.#read(async (q) => {
      const r = await q.query(sql, params);
      return r.rows[0] ? map(r.rows[0]) : null;
    });
  }

  #all<T>(sql: string, params: unknown[], map: (r: Row) => T): Promise<T[]> {
    return this.#read(async (q) => (await q.query(sql, params)).rows.map(map));
  }
}

/**
 * The HNSW candidate query: the admitted rows nearest by the index's own expression
 * (so the planner can use the index), `limit` plus some slack for exact rescoring.
 * Exported for the tests, which check that the planner really uses the index.
 */
export function hnswSearchSql(
  s: string,
  v: string,
  dims: number,
  search: CheckedSearch,
): { text: string; params: unknown[]; efSearch: number } {
  const k = search.limit + RESCORE_SLACK;
  const params: unknown[] = [vectorLiteral(search.vector!), k];
  const where = memoryWhere(search.filter, params);
  return {
    text: `SELECT ${MEMORY_COLUMNS} FROM ${s}.memories
         WHERE embedding IS NOT NULL AND ${where}
         ORDER BY (embedding::${v}.vector(${dims})) OPERATOR(${v}.<=>) ($1::text::${v}.vector(${dims}))
         LIMIT $2`,
    params,
    // Generous: in WASM and on a server alike the scan costs far less than the round
    // trip, and recall on less clustered data (random 384-dim vectors) rises from 0.31
    // at 64 to about 0.9 at 512.
    efSearch: Math.min(1000, Math.max(400, k * 4)),
  };
}

/**
 * Creates the HNSW index (cosine) for vectors of width `dims` when pgvector is in use.
 * The column holds float8[] (exact values come back unchanged); the index is over its
 * cast to vector(dims), which the search orders by. A failure leaves exact scans.
 */
export async function ensureVectorIndex(
  core: StoreCore,
  q: Queryable,
  dims: number,
): Promise<void> {
  if (!core.vector || core.indexedWidth === dims) return;
  const v = core.vector.schema;
  await q
    .transaction((sp) =>
      sp.query(
        `CREATE INDEX IF NOT EXISTS memories_embedding_hnsw ON ${core.s}.memories
         USING hnsw ((embedding::${v}.vector(${dims})) ${v}.vector_cosine_ops)`,
      ),
    )
    .then(
      () => {
        core.indexedWidth = dims;
      },
      () => undefined,
    );
}

/** The filter as SQL over the memories table, values appended to `params`. */
function memoryWhere(f: MemoryFilter, params: unknown[]): string {
  const p = (value: unknown) => {
    params.push(value);
    return `$${params.length}`;
  };
  const c: string[] = ['true'];
  if (f.viewer) {
    c.push(
      `((scope = 'private' AND agent_id = ${p(f.viewer.agentId)}::text)` +
        ` OR (scope = 'room' AND room_id = ${p(f.viewer.roomId ?? null)}::text)` +
        ` OR (scope = 'shared' AND world_id = ${p(f.viewer.worldId ?? null)}::text))`,
    );
  }
  if (f.agentId !== undefined) c.push(`agent_id = ${p(f.agentId)}::text`);
  if (f.types) c.push(`type = ANY(${p(f.types)}::text[])`);
  if (f.scopes) c.push(`scope = ANY(${p(f.scopes)}::text[])`);
  if (f.entityId !== undefined) c.push(`entity_id = ${p(f.entityId)}::text`);
  if (f.roomId !== undefined) c.push(`room_id = ${p(f.roomId)}::text`);
  if (f.worldId !== undefined) c.push(`world_id = ${p(f.worldId)}::text`);
  if (f.contentHashes) c.push(`content_hash = ANY(${p(f.contentHashes)}::text[])`);
  if (f.ids) c.push(`id = ANY(${p(f.ids)}::text[])`);
  if (f.createdAfter !== undefined) c.push(`created_at > ${p(f.createdAfter)}::float8`);
  if (f.createdBefore !== undefined) c.push(`created_at < ${p(f.createdBefore)}::float8`);
  return c.join(' AND ');
}
