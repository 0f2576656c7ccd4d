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
  AsyncLock,
  type ChainOptions,
  ChangeEmitter,
  checkId,
  checkLeaseData,
  checkLeaseInput,
  checkLimit,
  checkMemoryFilter,
  checkMemoryPatch,
  checkMemorySearch,
  checkName,
  checkNewBranch,
  checkNewCheckpoint,
  checkNewThread,
  checkStateCommit,
  checkThreadPatch,
  checkTimestamp,
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
  type MemoryFilter,
  type MemoryHit,
  type MemoryPatch,
  type MemorySearch,
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
import {
  decodeF64,
  encodeF32,
  encodeF64,
  ftsAnyWordQuery,
  MEMORY_COLUMNS,
  memoryFilterSql,
  memoryFromRow,
} from './memory-sql.js';
import { runMigrations } from './migrations.js';
import type { SqliteDatabase, SqliteStatement } from './sqlite-driver.js';

const THREAD_COLUMNS = 'id, resource_id, title, metadata, created_at, updated_at';
const MESSAGE_COLUMNS = 'id, thread_id, parent_id, role, type, data, created_at, depth';
const BRANCH_COLUMNS =
  'id, thread_id, name, head_message_id, is_active, created_at, fork_message_id, parent_branch_id, seq';
const CHECKPOINT_COLUMNS = 'id, thread_id, name, message_id, created_at';
const COMMIT_COLUMNS =
  'branch_id, thread_id, version, message_id, message_depth, update_json, snapshot, created_at';
const TURN_COLUMNS =
  'id, thread_id, message_id, source, user_id, status, state, steps, started_at, finished_at';
const LEASE_COLUMNS = 'key, owner, acquired_at, renewed_at, expires_at, released_at, data';

type Row = unknown[];

const threadFromRow = (r: Row): Thread => ({
  id: r[0] as string,
  resourceId: r[1] as string | null,
  title: r[2] as string | null,
  metadata: JSON.parse(r[3] as string),
  createdAt: r[4] as number,
  updatedAt: r[5] as number,
});

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

const branchFromRow = (r: Row): Branch => ({
  id: r[0] as string,
  threadId: r[1] as string,
  name: r[2] as string,
  headMessageId: r[3] as string | null,
  isActive: r[4] === 1,
  createdAt: r[5] as number,
  forkMessageId: r[6] as string | null,
  parentBranchId: r[7] as string | null,
  seq: r[8] as number,
});

const checkpointFromRow = (r: Row): Checkpoint => ({
  id: r[0] as string,
  threadId: r[1] as string,
  name: r[2] as string,
  messageId: r[3] as string,
  createdAt: r[4] as number,
});

const commitFromRow = (r: Row): StateCommit => ({
  branchId: r[0] as string,
  threadId: r[1] as string,
  version: r[2] as number,
  messageId: r[3] as string | null,
  messageDepth: r[4] as number | null,
  update: JSON.parse(r[5] as string),
  snapshot: r[6] === null ? null : JSON.parse(r[6] as string),
  createdAt: r[7] as number,
});

const turnFromRow = (r: Row): Turn => ({
  id: r[0] as string,
  threadId: r[1] as string,
  messageId: r[2] as string | null,
  source: r[3] as string | null,
  userId: r[4] as string | null,
  status: r[5] as Turn['status'],
  state: JSON.parse(r[6] as string),
  steps: JSON.parse(r[7] as string),
  startedAt: r[8] as number,
  finishedAt: r[9] as number | null,
});

const leaseFromRow = (r: Row): Lease => ({
  key: r[0] as string,
  owner: r[1] as string,
  acquiredAt: r[2] as number,
  renewedAt: r[3] as number,
  expiresAt: r[4] as number,
  releasedAt: r[5] as number | null,
  data: JSON.parse(r[6] as string),
});

const notFound = (what: string, id: string, details: Record<string, unknown> = {}) =>
  new CairnError('NOT_FOUND', `${what} ${JSON.stringify(id)} not found`, {
    details: { id, ...details },
  });
const conflict = (message: string, details: Record<string, unknown> = {}) =>
  new CairnError('CONFLICT', message, { details });
const invalid = (message: string, details: Record<string, unknown> = {}) =>
  new CairnError('INVALID_ARGUMENT', message, { details });

/** A SQLite error code, such as `SQLITE_CONSTRAINT_UNIQUE`, or undefined. */
function sqliteCode(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_') ? code : undefined;
}

/** Turns driver errors that callers can act on into CairnErrors; rethrows the rest. */
function translate(e: unknown): never {
  const code = sqliteCode(e);
  if (code === 'SQLITE_BUSY' || code === 'SQLITE_BUSY_SNAPSHOT' || code === 'SQLITE_LOCKED') {
    throw new CairnError(
      'TIMEOUT',
      `the database stayed locked by another connection: ${(e as Error).message}`,
      {
        cause: e,
      },
    );
  }
  throw e;
}

/** What every view of the store (the store itself, a transaction) shares. */
class Shared {
  readonly db: SqliteDatabase;
  readonly ownsDb: boolean;
  readonly capabilities: StoreCapabilities;
  readonly lock = new AsyncLock();
  readonly emitter = new ChangeEmitter();
  closed = false;
  /** Calls queued on the lock or running under it; when 0 a call may run at once. */
  queued = 0;
  #statements = new Map<string, SqliteStatement>();

  constructor(db: SqliteDatabase, ownsDb: boolean, capabilities: StoreCapabilities) {
    this.db = db;
    this.ownsDb = ownsDb;
    this.capabilities = capabilities;
  }

  /** A cached prepared statement. */
  sql(source: string): SqliteStatement {
    let s = this.#statements.get(source);
    if (!s) {
      s = this.db.prepare(source);
      this.#statements.set(source, s);
    }
    return s;
  }

  /** A cached statement returning rows as arrays. */
  rows(source: string): SqliteStatement {
    const key = `raw:${source}`;
    let s = this.#statements.get(key);
    if (!s) {
      s = this.db.prepare(source).raw(true);
      this.#statements.set(key, s);
    }
    return s;
  }

  clearStatements(): void {
    this.#statements.clear();
  }
}

/**
 * How a view runs one call: the store itself takes the lock and a write transaction per
 * write; a transaction's view runs inside the open transaction, each write under a
 * savepoint so that a failed call changes nothing even when the caller goes on.
 */
interface Runner {
  read<T>(fn: () => T): Promise<T>;
  write<T>(fn: (changes: StoreChange[]) => T): Promise<T>;
  transaction<T>(fn: (tx: Store) => Promise<T>, view: SqliteStoreView): Promise<T>;
}

class RootRunner implements Runner {
  #s: Shared;

  constructor(shared: Shared) {
    this.#s = shared;
  }

  #checkOpen(): void {
    if (this.#s.closed) throw new CairnError('CLOSED', 'this SQLite store is closed');
  }

  async #run<T>(fn: () => T): Promise<T> {
    this.#checkOpen();
    // Synchronous work cannot interleave with anything, so with nothing queued it runs
    // at once; otherwise it waits its turn behind a running transaction.
    if (this.#s.queued === 0) return fn();
    this.#s.queued++;
    try {
      return await this.#s.lock.run(fn);
    } finally {
      this.#s.queued--;
    }
  }

  read<T>(fn: () => T): Promise<T> {
    return this.#run(fn);
  }

  write<T>(fn: (changes: StoreChange[]) => T): Promise<T> {
    return this.#run(() => {
      const db = this.#s;
      const changes: StoreChange[] = [];
      try {
        db.sql('BEGIN IMMEDIATE').run();
      } catch (e) {
        translate(e);
      }
      let result: T;
      try {
        result = fn(changes);
        db.sql('COMMIT').run();
      } catch (e) {
        if (db.db.inTransaction) db.sql('ROLLBACK').run();
        translate(e);
      }
      for (const c of changes) this.#s.emitter.emit(c);
      return result;
    });
  }

  async transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T> {
    this.#checkOpen();
    if (typeof fn !== 'function') throw invalid('transaction expects a function');
    this.#s.queued++;
    try {
      return await this.#s.lock.run(async () => {
        const runner = new TxRunner(this.#s);
        try {
          this.#s.sql('BEGIN IMMEDIATE').run();
        } catch (e) {
          translate(e);
        }
        let result: T;
        try {
          result = await fn(new SqliteStoreView(this.#s, runner));
          runner.end();
          this.#s.sql('COMMIT').run();
        } catch (e) {
          runner.end();
          if (this.#s.db.inTransaction) this.#s.sql('ROLLBACK').run();
          translate(e);
        }
        for (const c of runner.changes) this.#s.emitter.emit(c);
        return result;
      });
    } finally {
      this.#s.queued--;
    }
  }
}

class TxRunner implements Runner {
  #s: Shared;
  #ended = false;
  readonly changes: StoreChange[] = [];

  constructor(shared: Shared) {
    this.#s = shared;
  }

  end(): void {
    this.#ended = true;
  }

  #checkOpen(): void {
    if (this.#ended) {
      throw new CairnError(
        'CLOSED',
        'this transaction has ended; use the store, not the transaction, after it',
      );
    }
  }

  async read<T>(fn: () => T): Promise<T> {
    this.#checkOpen();
    return fn();
  }

  async write<T>(fn: (changes: StoreChange[]) => T): Promise<T> {
    this.#checkOpen();
    const s = this.#s;
    s.sql('SAVEPOINT cairn_call').run();
    try {
      const changes: StoreChange[] = [];
      const result = fn(changes);
      s.sql('RELEASE cairn_call').run();
      this.changes.push(...changes);
      return result;
    } catch (e) {
      s.sql('ROLLBACK TO cairn_call').run();
      s.sql('RELEASE cairn_call').run();
      translate(e);
    }
  }

  async transaction<T>(fn: (tx: Store) => Promise<T>, view: SqliteStoreView): Promise<T> {
    this.#checkOpen();
    if (typeof fn !== 'function') throw invalid('transaction expects a function');
    // Nested: join the outer transaction.
    return fn(view);
  }
}

const EMBEDDING_SPACE_KEY = 'embedding_space';
/** Extra vector candidates re-scored in double precision, past float32 rounding at the cut. */
const RESCORE_MARGIN = 16;

/** One view of the store: every Store method, run through a Runner. */
export class SqliteStoreView implements Store {
  #s: Shared;
  #r: Runner;

  constructor(shared: Shared, runner: Runner) {
    this.#s = shared;
    this.#r = runner;
  }

  get capabilities(): StoreCapabilities {
    return this.#s.capabilities;
  }

  // ------------------------------------------------------------------ threads

  createThread(input: NewThread): Promise<Thread> {
    return this.#r.write((changes) => {
      const t = checkNewThread(input, Date.now());
      if (this.#s.sql('SELECT 1 FROM cairn_threads WHERE id = ?').get(t.id) !== undefined) {
        throw conflict(`thread id ${JSON.stringify(t.id)} is already taken`, { id: t.id });
      }
      this.#s
        .sql(
          'INSERT INTO cairn_threads (id, resource_id, title, metadata, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)',
        )
        .run(t.id, t.resourceId, t.title, JSON.stringify(t.metadata), t.createdAt, t.updatedAt);
      changes.push({ threadId: t.id, kind: 'thread' });
      return t;
    });
  }

  #thread(id: string): Thread | null {
    const r = this.#s.rows(`SELECT ${THREAD_COLUMNS} FROM cairn_threads WHERE id = ?`).get(id) as
      | Row
      | undefined;
    return r ? threadFromRow(r) : null;
  }

  #requireThread(id: string): void {
    if (this.#s.sql('SELECT 1 FROM cairn_threads WHERE id = ?').get(id) === undefined) {
      throw notFound('thread', id);
    }
  }

  getThread(id: string): Promise<Thread | null> {
    return this.#r.read(() => this.#thread(checkId(id, 'thread id')));
  }

  updateThread(id: string, patch: ThreadPatch): Promise<Thread> {
    return this.#r.write((changes) => {
      checkId(id, 'thread id');
      const p = checkThreadPatch(patch);
      const t = this.#thread(id);
      if (!t) throw notFound('thread', id);
      const next: Thread = {
        ...t,
        ...(p.title !== undefined ? { title: p.title } : {}),
        ...(p.metadata !== undefined ? { metadata: p.metadata } : {}),
        updatedAt: Math.max(Date.now(), t.updatedAt),
      };
      this.#s
        .sql('UPDATE cairn_threads SET title = ?, metadata = ?, updated_at = ? WHERE id = ?')
        .run(next.title, JSON.stringify(next.metadata), next.updatedAt, id);
      changes.push({ threadId: id, kind: 'thread' });
      return next;
    });
  }

  listThreads(options: ListThreadsOptions = {}): Promise<Page<Thread>> {
    return this.#r.read(() => {
      if (typeof options !== 'object' || options === null)
        throw invalid('listThreads options must be an object');
      const limit = checkLimit(options.limit, 'limit', 50, 1000);
      const where: string[] = [];
      const params: unknown[] = [];
      if (options.resourceId !== undefined) {
        where.push('resource_id = ?');
        params.push(checkId(options.resourceId, 'resourceId'));
      }
      if (options.cursor != null) {
        const c = decodeCursor(options.cursor);
        if (c.length !== 1 || typeof c[0] !== 'number') {
          throw invalid(`cursor ${JSON.stringify(options.cursor)} is not one this store issued`);
        }
        where.push('seq < ?');
        params.push(c[0]);
      }
      // Creation order (seq), newest first: stable under clock steps and same-millisecond creates.
      const rows = this.#s
        .rows(
          `SELECT ${THREAD_COLUMNS}, seq FROM cairn_threads ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
           ORDER BY seq DESC LIMIT ?`,
        )
        .all(...params, limit + 1) as Row[];
      const more = rows.length > limit;
      const page = more ? rows.slice(0, limit) : rows;
      const last = page[page.length - 1];
      return {
        items: page.map(threadFromRow),
        nextCursor: more && last ? encodeCursor([last[6] as number]) : null,
      };
    });
  }

  deleteThread(id: string): Promise<boolean> {
    return this.#r.write((changes) => {
      checkId(id, 'thread id');
      const { changes: n } = this.#s.sql('DELETE FROM cairn_threads WHERE id = ?').run(id);
      if (n > 0) this.#s.sql('DELETE FROM cairn_messages WHERE thread_id = ?').run(id);
      if (n > 0) changes.push({ threadId: id, kind: 'thread' });
      return n > 0;
    });
  }

  // ------------------------------------------------------------------ messages

  addMessages(messages: NewMessage[]): Promise<Message[]> {
    return this.#r.write((changes) => {
      const drafts = normalizeNewMessages(messages, Date.now());
      if (drafts.length === 0) return [];
      // Look up only what the batch does not hold itself: its threads and the parents it
      // chains onto. An id that is already stored is caught by the primary key below, in
      // the same transaction, so it still changes nothing.
      const threadIds = new Set<string>();
      const inBatch = new Set<string>();
      const known = new Map<string, { threadId: string; depth: number }>();
      const threadExists = this.#s.sql('SELECT 1 FROM cairn_threads WHERE id = ?');
      const parentRow = this.#s.rows('SELECT thread_id, depth FROM cairn_messages WHERE id = ?');
      const threads = new Set<string>();
      for (const d of drafts) {
        if (!threads.has(d.threadId)) {
          threads.add(d.threadId);
          if (threadExists.get(d.threadId) !== undefined) threadIds.add(d.threadId);
        }
        if (d.parentId !== null && !inBatch.has(d.parentId) && !known.has(d.parentId)) {
          const r = parentRow.get(d.parentId) as Row | undefined;
          if (r) known.set(d.parentId, { threadId: r[0] as string, depth: r[1] as number });
        }
        inBatch.add(d.id);
      }
      const planned = planMessageBatch(drafts, { threadIds, messages: known });
      const insert = this.#s.sql(
        `INSERT INTO cairn_messages (${MESSAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      );
      for (let i = 0; i < planned.length; i++) {
        const m = planned[i]!;
        try {
          insert.run(
            m.id,
            m.threadId,
            m.parentId,
            m.role,
            m.type,
            JSON.stringify(m.data),
            m.createdAt,
            m.depth,
          );
        } catch (e) {
          if (sqliteCode(e) !== 'SQLITE_CONSTRAINT_PRIMARYKEY') throw e;
          throw conflict(
            `messages[${i}]: message id ${JSON.stringify(m.id)} is already used; messages are immutable`,
            { id: m.id },
          );
        }
      }
      for (const threadId of threads) changes.push({ threadId, kind: 'messages' });
      return planned;
    });
  }

  #message(id: string): Message | null {
    const r = this.#s.rows(`SELECT ${MESSAGE_COLUMNS} FROM cairn_messages WHERE id = ?`).get(id) as
      | Row
      | undefined;
    return r ? messageFromRow(r) : null;
  }

  getMessage(id: string): Promise<Message | null> {
    return this.#r.read(() => this.#message(checkId(id, 'message id')));
  }

  getChain(headId: string, options: ChainOptions = {}): Promise<Message[]> {
    return this.#r.read(() => {
      checkId(headId, 'headId');
      if (typeof options !== 'object' || options === null)
        throw invalid('getChain options must be an object');
      const { limit, beforeDepth } = options;
      if (limit !== undefined) checkLimit(limit, 'limit', 0, Number.MAX_SAFE_INTEGER);
      if (beforeDepth !== undefined && (!Number.isInteger(beforeDepth) || beforeDepth < 0)) {
        throw invalid(`beforeDepth must be an integer >= 0, got ${JSON.stringify(beforeDepth)}`);
      }
      const head = this.#s.sql('SELECT depth FROM cairn_messages WHERE id = ?').get(headId) as
        | { depth: number }
        | undefined;
      if (!head) throw notFound('message', headId);
      const top = beforeDepth === undefined ? head.depth : Math.min(head.depth, beforeDepth - 1);
      if (top < 0) return [];
      const bottom = limit === undefined ? 0 : Math.max(0, top - limit + 1);
      // Walks parent links from the head and stops at `bottom`: a page near the head costs
      // its own length, never the chain's.
      const rows = this.#s
        .rows(
          `WITH RECURSIVE chain (id, thread_id, parent_id, role, type, data, created_at, depth) AS (
             SELECT ${MESSAGE_COLUMNS} FROM cairn_messages WHERE id = ?
             UNION ALL
             SELECT m.id, m.thread_id, m.parent_id, m.role, m.type, m.data, m.created_at, m.depth
               FROM chain c JOIN cairn_messages m ON m.id = c.parent_id
              WHERE c.depth > ?
           )
           SELECT ${MESSAGE_COLUMNS} FROM chain WHERE depth <= ?`,
        )
        .all(headId, bottom, top) as Row[];
      const out = new Array<Message>(rows.length);
      // The walk yields head first; depths make root-first order without a sort.
      for (let i = 0, n = rows.length; i < n; i++) out[n - 1 - i] = messageFromRow(rows[i]!);
      return out;
    });
  }

  // ------------------------------------------------------------------ branches

  #branchById(id: string): Branch | null {
    const r = this.#s.rows(`SELECT ${BRANCH_COLUMNS} FROM cairn_branches WHERE id = ?`).get(id) as
      | Row
      | undefined;
    return r ? branchFromRow(r) : null;
  }

  /** The message, which must exist (NOT_FOUND) and be in `threadId` (INVALID_ARGUMENT). */
  #messageIn(threadId: string, messageId: string, label: string): { depth: number } {
    const m = this.#s
      .sql('SELECT thread_id, depth FROM cairn_messages WHERE id = ?')
      .get(messageId) as { thread_id: string; depth: number } | undefined;
    if (!m) throw notFound(`${label} message`, messageId);
    if (m.thread_id !== threadId) {
      throw invalid(`${label} message ${JSON.stringify(messageId)} belongs to another thread`, {
        messageId,
        threadId,
      });
    }
    return { depth: m.depth };
  }

  createBranch(input: NewBranch): Promise<Branch> {
    return this.#r.write((changes) => {
      const b = checkNewBranch(input, Date.now());
      this.#requireThread(b.threadId);
      if (b.headMessageId !== null) this.#messageIn(b.threadId, b.headMessageId, 'head');
      if (b.parentBranchId !== null) {
        const parent = this.#branchById(b.parentBranchId);
        // A branch of another thread is not a parent this thread can have.
        if (!parent || parent.threadId !== b.threadId)
          throw notFound('parent branch', b.parentBranchId);
      }
      if (this.#s.sql('SELECT 1 FROM cairn_branches WHERE id = ?').get(b.id) !== undefined) {
        throw conflict(`branch id ${JSON.stringify(b.id)} is already taken`, { id: b.id });
      }
      if (
        this.#s
          .sql('SELECT 1 FROM cairn_branches WHERE thread_id = ? AND name = ?')
          .get(b.threadId, b.name)
      ) {
        throw conflict(
          `thread ${JSON.stringify(b.threadId)} already has a branch named ${JSON.stringify(b.name)}`,
          {
            threadId: b.threadId,
            name: b.name,
          },
        );
      }
      const first =
        this.#s.sql('SELECT 1 FROM cairn_branches WHERE thread_id = ? LIMIT 1').get(b.threadId) ===
        undefined;
      const active = first || b.activate;
      if (active)
        this.#s
          .sql('UPDATE cairn_branches SET is_active = 0 WHERE thread_id = ? AND is_active = 1')
          .run(b.threadId);
      this.#s
        .sql(
          `INSERT INTO cairn_branches (id, thread_id, name, head_message_id, is_active, created_at, fork_message_id, parent_branch_id)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          b.id,
          b.threadId,
          b.name,
          b.headMessageId,
          active ? 1 : 0,
          b.createdAt,
          b.forkMessageId,
          b.parentBranchId,
        );
      changes.push({ threadId: b.threadId, kind: 'branch', branchId: b.id });
      return this.#branchById(b.id)!;
    });
  }

  getBranch(threadId: string, name: string): Promise<Branch | null> {
    return this.#r.read(() => {
      checkId(threadId, 'threadId');
      checkName(name, 'branch name');
      const r = this.#s
        .rows(`SELECT ${BRANCH_COLUMNS} FROM cairn_branches WHERE thread_id = ? AND name = ?`)
        .get(threadId, name) as Row | undefined;
      return r ? branchFromRow(r) : null;
    });
  }

  getBranchById(id: string): Promise<Branch | null> {
    return this.#r.read(() => this.#branchById(checkId(id, 'branch id')));
  }

  listBranches(threadId: string): Promise<Branch[]> {
    return this.#r.read(() => {
      checkId(threadId, 'threadId');
      return (
        this.#s
          .rows(`SELECT ${BRANCH_COLUMNS} FROM cairn_branches WHERE thread_id = ? ORDER BY seq`)
          .all(threadId) as Row[]
      ).map(branchFromRow);
    });
  }

  getActiveBranch(threadId: string): Promise<Branch | null> {
    return this.#r.read(() => {
      checkId(threadId, 'threadId');
      const r = this.#s
        .rows(`SELECT ${BRANCH_COLUMNS} FROM cairn_branches WHERE thread_id = ? AND is_active = 1`)
        .get(threadId) as Row | undefined;
      return r ? branchFromRow(r) : null;
    });
  }

  setActiveBranch(branchId: string): Promise<Branch> {
    return this.#r.write((changes) => {
      checkId(branchId, 'branch id');
      const b = this.#branchById(branchId);
      if (!b) throw notFound('branch', branchId);
      this.#s
        .sql(
          'UPDATE cairn_branches SET is_active = 0 WHERE thread_id = ? AND is_active = 1 AND id <> ?',
        )
        .run(b.threadId, branchId);
      this.#s.sql('UPDATE cairn_branches SET is_active = 1 WHERE id = ?').run(branchId);
      changes.push({ threadId: b.threadId, kind: 'branch', branchId });
      return { ...b, isActive: true };
    });
  }

  moveHead(branchId: string, expectedHeadId: string | null, newHeadId: string): Promise<Branch> {
    return this.#r.write((changes) => {
      checkId(branchId, 'branch id');
      if (expectedHeadId !== null) checkId(expectedHeadId, 'expectedHeadId');
      checkId(newHeadId, 'newHeadId');
      const b = this.#branchById(branchId);
      if (!b) throw notFound('branch', branchId);
      this.#messageIn(b.threadId, newHeadId, 'new head');
      if (b.headMessageId !== expectedHeadId) {
        throw conflict(
          `branch ${JSON.stringify(b.name)} has head ${JSON.stringify(b.headMessageId)}, not the expected ${JSON.stringify(expectedHeadId)}`,
          { branchId, expected: expectedHeadId, actual: b.headMessageId },
        );
      }
      this.#s
        .sql('UPDATE cairn_branches SET head_message_id = ? WHERE id = ?')
        .run(newHeadId, branchId);
      changes.push({ threadId: b.threadId, kind: 'branch', branchId });
      return { ...b, headMessageId: newHeadId };
    });
  }

  // ------------------------------------------------------------------ checkpoints

  saveCheckpoint(input: NewCheckpoint): Promise<Checkpoint> {
    return this.#r.write((changes) => {
      const c = checkNewCheckpoint(input, Date.now());
      this.#requireThread(c.threadId);
      this.#messageIn(c.threadId, c.messageId, 'checkpoint');
      const existing = this.#s
        .rows(
          `SELECT ${CHECKPOINT_COLUMNS} FROM cairn_checkpoints WHERE thread_id = ? AND name = ?`,
        )
        .get(c.threadId, c.name) as Row | undefined;
      let saved: Checkpoint;
      if (existing) {
        saved = { ...checkpointFromRow(existing), messageId: c.messageId };
        this.#s
          .sql('UPDATE cairn_checkpoints SET message_id = ? WHERE id = ?')
          .run(c.messageId, saved.id);
      } else {
        saved = c;
        this.#s
          .sql(
            'INSERT INTO cairn_checkpoints (id, thread_id, name, message_id, created_at) VALUES (?, ?, ?, ?, ?)',
          )
          .run(c.id, c.threadId, c.name, c.messageId, c.createdAt);
      }
      changes.push({ threadId: c.threadId, kind: 'checkpoint' });
      return saved;
    });
  }

  getCheckpoint(threadId: string, name: string): Promise<Checkpoint | null> {
    return this.#r.read(() => {
      checkId(threadId, 'threadId');
      checkName(name, 'checkpoint name');
      const r = this.#s
        .rows(
          `SELECT ${CHECKPOINT_COLUMNS} FROM cairn_checkpoints WHERE thread_id = ? AND name = ?`,
        )
        .get(threadId, name) as Row | undefined;
      return r ? checkpointFromRow(r) : null;
    });
  }

  listCheckpoints(threadId: string): Promise<Checkpoint[]> {
    return this.#r.read(() => {
      checkId(threadId, 'threadId');
      return (
        this.#s
          .rows(
            `SELECT ${CHECKPOINT_COLUMNS} FROM cairn_checkpoints WHERE thread_id = ? ORDER BY seq`,
          )
          .all(threadId) as Row[]
      ).map(checkpointFromRow);
    });
  }

  deleteCheckpoint(threadId: string, name: string): Promise<boolean> {
    return this.#r.write((changes) => {
      checkId(threadId, 'threadId');
      checkName(name, 'checkpoint name');
      const { changes: n } = this.#s
        .sql('DELETE FROM cairn_checkpoints WHERE thread_id = ? AND name = ?')
        .run(threadId, name);
      if (n > 0) changes.push({ threadId, kind: 'checkpoint' });
      return n > 0;
    });
  }

  // ------------------------------------------------------------------ state

  appendStateCommit(commit: NewStateCommit, expectedVersion: number): Promise<StateCommit> {
    return this.#r.write((changes) => {
      const c = checkStateCommit(commit, expectedVersion);
      const b = this.#branchById(c.branchId);
      if (!b) throw notFound('branch', c.branchId);
      const messageDepth =
        c.messageId === null ? null : this.#messageIn(b.threadId, c.messageId, 'commit').depth;
      const { v } = this.#s
        .sql('SELECT coalesce(max(version), 0) AS v FROM cairn_state_commits WHERE branch_id = ?')
        .get(c.branchId) as { v: number };
      if (v !== expectedVersion) {
        throw conflict(
          `branch ${JSON.stringify(b.name)} is at state version ${v}, not the expected ${expectedVersion}`,
          {
            branchId: c.branchId,
            expected: expectedVersion,
            actual: v,
          },
        );
      }
      const saved: StateCommit = {
        branchId: c.branchId,
        threadId: b.threadId,
        version: v + 1,
        messageId: c.messageId,
        messageDepth,
        update: c.update,
        snapshot: c.snapshot,
        createdAt: Date.now(),
      };
      this.#s
        .sql(`INSERT INTO cairn_state_commits (${COMMIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
        .run(
          saved.branchId,
          saved.threadId,
          saved.version,
          saved.messageId,
          saved.messageDepth,
          JSON.stringify(saved.update),
          saved.snapshot === null ? null : JSON.stringify(saved.snapshot),
          saved.createdAt,
        );
      changes.push({ threadId: b.threadId, kind: 'state', branchId: b.id });
      return saved;
    });
  }

  #requireBranch(branchId: string): void {
    if (this.#s.sql('SELECT 1 FROM cairn_branches WHERE id = ?').get(branchId) === undefined) {
      throw notFound('branch', branchId);
    }
  }

  getStateCommits(branchId: string, range: StateCommitRange = {}): Promise<StateCommit[]> {
    return this.#r.read(() => {
      checkId(branchId, 'branch id');
      if (typeof range !== 'object' || range === null) throw invalid('range must be an object');
      const from = range.fromVersion ?? 1;
      const to = range.toVersion ?? Number.MAX_SAFE_INTEGER;
      for (const [label, v] of [
        ['fromVersion', from],
        ['toVersion', to],
      ] as const) {
        if (!Number.isInteger(v) || v < 0)
          throw invalid(`${label} must be an integer >= 0, got ${JSON.stringify(v)}`);
      }
      this.#requireBranch(branchId);
      return (
        this.#s
          .rows(
            `SELECT ${COMMIT_COLUMNS} FROM cairn_state_commits WHERE branch_id = ? AND version >= ? AND version <= ? ORDER BY version`,
          )
          .all(branchId, from, to) as Row[]
      ).map(commitFromRow);
    });
  }

  getLatestStateCommit(
    branchId: string,
    query: LatestCommitQuery = {},
  ): Promise<StateCommit | null> {
    return this.#r.read(() => {
      checkId(branchId, 'branch id');
      if (typeof query !== 'object' || query === null) throw invalid('query must be an object');
      const where = ['branch_id = ?'];
      const params: unknown[] = [branchId];
      if (query.withSnapshot) where.push('snapshot IS NOT NULL');
      if (query.maxVersion !== undefined) {
        if (!Number.isInteger(query.maxVersion))
          throw invalid(`maxVersion must be an integer, got ${JSON.stringify(query.maxVersion)}`);
        where.push('version <= ?');
        params.push(query.maxVersion);
      }
      if (query.maxMessageDepth !== undefined) {
        if (!Number.isInteger(query.maxMessageDepth)) {
          throw invalid(
            `maxMessageDepth must be an integer, got ${JSON.stringify(query.maxMessageDepth)}`,
          );
        }
        where.push('coalesce(message_depth, -1) <= ?');
        params.push(query.maxMessageDepth);
      }
      this.#requireBranch(branchId);
      const r = this.#s
        .rows(
          `SELECT ${COMMIT_COLUMNS} FROM cairn_state_commits WHERE ${where.join(' AND ')} ORDER BY version DESC LIMIT 1`,
        )
        .get(...params) as Row | undefined;
      return r ? commitFromRow(r) : null;
    });
  }

  // ------------------------------------------------------------------ turns

  putTurn(turn: Turn): Promise<Turn> {
    return this.#r.write(() => {
      const t = checkTurn(turn);
      this.#requireThread(t.threadId);
      this.#s
        .sql(
          `INSERT INTO cairn_turns (${TURN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET thread_id = excluded.thread_id, message_id = excluded.message_id,
             source = excluded.source, user_id = excluded.user_id, status = excluded.status, state = excluded.state,
             steps = excluded.steps, started_at = excluded.started_at, finished_at = excluded.finished_at`,
        )
        .run(
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
        );
      return t;
    });
  }

  getTurn(id: string): Promise<Turn | null> {
    return this.#r.read(() => {
      checkId(id, 'turn id');
      const r = this.#s.rows(`SELECT ${TURN_COLUMNS} FROM cairn_turns WHERE id = ?`).get(id) as
        | Row
        | undefined;
      return r ? turnFromRow(r) : null;
    });
  }

  listTurns(threadId: string, options: { limit?: number } = {}): Promise<Turn[]> {
    return this.#r.read(() => {
      checkId(threadId, 'threadId');
      if (typeof options !== 'object' || options === null)
        throw invalid('listTurns options must be an object');
      const limit = checkLimit(options.limit, 'limit', 100, 10_000);
      return (
        this.#s
          .rows(
            `SELECT ${TURN_COLUMNS} FROM cairn_turns WHERE thread_id = ? ORDER BY started_at DESC, id DESC LIMIT ?`,
          )
          .all(threadId, limit) as Row[]
      ).map(turnFromRow);
    });
  }

  deleteTurn(id: string): Promise<boolean> {
    return this.#r.write(() => {
      checkId(id, 'turn id');
      return this.#s.sql('DELETE FROM cairn_turns WHERE id = ?').run(id).changes > 0;
    });
  }

  purgeTurns(options: { before: number; threadId?: string }): Promise<number> {
    return this.#r.write(() => {
      if (typeof options !== 'object' || options === null)
        throw invalid('purgeTurns options must be an object');
      const before = checkTimestamp(options.before, 'before', Number.NaN);
      if (Number.isNaN(before)) throw invalid('purgeTurns needs `before`');
      if (options.threadId !== undefined) {
        checkId(options.threadId, 'threadId');
        return this.#s
          .sql(
            "DELETE FROM cairn_turns WHERE status <> 'running' AND started_at < ? AND thread_id = ?",
          )
          .run(before, options.threadId).changes;
      }
      return this.#s
        .sql("DELETE FROM cairn_turns WHERE status <> 'running' AND started_at < ?")
        .run(before).changes;
    });
  }

  // ------------------------------------------------------------------ leases

  #lease(key: string): Lease | null {
    const r = this.#s.rows(`SELECT ${LEASE_COLUMNS} FROM cairn_leases WHERE key = ?`).get(key) as
      | Row
      | undefined;
    return r ? leaseFromRow(r) : null;
  }

  #putLease(l: Lease): void {
    this.#s
      .sql(
        `INSERT INTO cairn_leases (${LEASE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, acquired_at = excluded.acquired_at,
           renewed_at = excluded.renewed_at, expires_at = excluded.expires_at, released_at = excluded.released_at,
           data = excluded.data`,
      )
      .run(
        l.key,
        l.owner,
        l.acquiredAt,
        l.renewedAt,
        l.expiresAt,
        l.releasedAt,
        JSON.stringify(l.data),
      );
  }

  acquireLease(input: AcquireLeaseInput): Promise<AcquiredLease> {
    return this.#r.write(() => {
      const i = checkLeaseInput(input);
      const plan = planLeaseAcquire(this.#lease(i.key), i, Date.now());
      this.#putLease(plan.lease);
      return plan;
    });
  }

  renewLease(key: string, owner: string, ttlMs: number, data?: JsonObject): Promise<Lease> {
    return this.#r.write(() => {
      checkName(key, 'lease key');
      checkName(owner, 'lease owner');
      checkTtl(ttlMs);
      const d = checkLeaseData(data);
      const lease = planLeaseRenew(this.#lease(key), key, owner, ttlMs, d, Date.now());
      this.#putLease(lease);
      return lease;
    });
  }

  releaseLease(key: string, owner: string, data?: JsonObject): Promise<Lease> {
    return this.#r.write(() => {
      checkName(key, 'lease key');
      checkName(owner, 'lease owner');
      const d = checkLeaseData(data);
      const lease = planLeaseRelease(this.#lease(key), key, owner, d, Date.now());
      this.#putLease(lease);
      return lease;
    });
  }

  getLease(key: string): Promise<Lease | null> {
    return this.#r.read(() => this.#lease(checkName(key, 'lease key')));
  }

  // ------------------------------------------------------------------ memories

  #space(): EmbeddingSpace | null {
    const r = this.#s
      .sql('SELECT value FROM cairn_settings WHERE key = ?')
      .get(EMBEDDING_SPACE_KEY) as { value: string } | undefined;
    return r ? (JSON.parse(r.value) as EmbeddingSpace) : null;
  }

  #setSpace(space: EmbeddingSpace): void {
    this.#s
      .sql(
        'INSERT INTO cairn_settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
      )
      .run(EMBEDDING_SPACE_KEY, JSON.stringify(space));
  }

  /** Checks a vector against the store's width, fixing the width on the first vector. */
  #fitVector(vector: number[], label: string): void {
    const space = this.#space();
    if (space) checkVectorWidth(space, vector, label);
    else this.#setSpace({ embedderId: null, dimensions: vector.length });
  }

  #memory(id: string): Memory | null {
    const r = this.#s
      .rows(`SELECT ${MEMORY_COLUMNS} FROM cairn_memories m WHERE m.id = ?`)
      .get(id) as Row | undefined;
    return r ? memoryFromRow(r) : null;
  }

  addMemories(memories: NewMemory[]): Promise<Memory[]> {
    return this.#r.write(() => {
      const batch = normalizeNewMemories(memories, Date.now());
      if (batch.length === 0) return [];
      const seen = new Set<string>();
      for (const [i, m] of batch.entries()) {
        if (seen.has(m.id))
          throw conflict(`memories[${i}].id ${JSON.stringify(m.id)} appears twice in the batch`, {
            id: m.id,
          });
        seen.add(m.id);
      }
      const taken = this.#s
        .rows('SELECT id FROM cairn_memories WHERE id IN (SELECT value FROM json_each(?)) LIMIT 1')
        .get(JSON.stringify([...seen])) as Row | undefined;
      if (taken)
        throw conflict(`memory id ${JSON.stringify(taken[0])} is already taken`, { id: taken[0] });
      const withVector = batch.find((m) => m.embedding !== null);
      if (withVector)
        this.#fitVector(withVector.embedding!, `memories[${batch.indexOf(withVector)}].embedding`);
      const insert = this.#s.sql(
        `INSERT INTO cairn_memories (id, type, agent_id, entity_id, room_id, world_id, scope, content, text, metadata,
           content_hash, embedding, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      );
      return batch.map((m) => {
        insert.run(
          m.id,
          m.type,
          m.agentId,
          m.entityId,
          m.roomId,
          m.worldId,
          m.scope,
          JSON.stringify(m.content),
          m.content.text,
          JSON.stringify(m.metadata),
          m.contentHash,
          m.embedding === null ? null : encodeF32(m.embedding),
          m.createdAt,
        );
        // What a reader gets back: vectors are stored as float32.
        return m.embedding === null
          ? m
          : { ...m, embedding: Array.from(Float32Array.from(m.embedding)) };
      });
    });
  }

  getMemory(id: string): Promise<Memory | null> {
    return this.#r.read(() => this.#memory(checkId(id, 'memory id')));
  }

  updateMemory(id: string, patch: MemoryPatch): Promise<Memory> {
    return this.#r.write(() => {
      checkId(id, 'memory id');
      const p = checkMemoryPatch(patch);
      const current = this.#memory(id);
      if (!current) throw notFound('memory', id);
      if (p.embedding) this.#fitVector(p.embedding, 'embedding');
      const next: Memory = {
        ...current,
        ...(p.content !== undefined ? { content: p.content } : {}),
        ...(p.contentHash !== undefined ? { contentHash: p.contentHash } : {}),
        ...(p.metadata !== undefined ? { metadata: p.metadata } : {}),
        ...(p.embedding !== undefined
          ? { embedding: p.embedding === null ? null : Array.from(Float32Array.from(p.embedding)) }
          : {}),
      };
      this.#s
        .sql(
          'UPDATE cairn_memories SET content = ?, text = ?, content_hash = ?, metadata = ?, embedding = ? WHERE id = ?',
        )
        .run(
          JSON.stringify(next.content),
          next.content.text,
          next.contentHash,
          JSON.stringify(next.metadata),
          next.embedding === null ? null : encodeF32(next.embedding),
          id,
        );
      return next;
    });
  }

  deleteMemories(ids: string[]): Promise<number> {
    return this.#r.write(() => {
      if (!Array.isArray(ids)) throw invalid('deleteMemories expects an array of ids');
      for (const [i, id] of ids.entries()) checkId(id, `ids[${i}]`);
      if (ids.length === 0) return 0;
      return this.#s
        .sql('DELETE FROM cairn_memories WHERE id IN (SELECT value FROM json_each(?))')
        .run(JSON.stringify(ids)).changes;
    });
  }

  listMemories(filter?: MemoryFilter, options: ListMemoriesOptions = {}): Promise<Memory[]> {
    return this.#r.read(() => {
      const where = memoryFilterSql(checkMemoryFilter(filter));
      if (typeof options !== 'object' || options === null)
        throw invalid('listMemories options must be an object');
      const limit = checkLimit(options.limit, 'limit', 100, 10_000);
      const order = options.order ?? 'newest';
      if (order !== 'newest' && order !== 'oldest')
        throw invalid(`order must be newest or oldest, got ${JSON.stringify(order)}`);
      const dir = order === 'newest' ? 'DESC' : 'ASC';
      return (
        this.#s
          .rows(
            `SELECT ${MEMORY_COLUMNS} FROM cairn_memories m WHERE ${where.sql} ORDER BY m.created_at ${dir}, m.seq ${dir} LIMIT ?`,
          )
          .all(...where.params, limit) as Row[]
      ).map(memoryFromRow);
    });
  }

  countMemories(filter?: MemoryFilter): Promise<number> {
    return this.#r.read(() => {
      const where = memoryFilterSql(checkMemoryFilter(filter));
      return (
        this.#s
          .sql(`SELECT count(*) AS n FROM cairn_memories m WHERE ${where.sql}`)
          .get(...where.params) as { n: number }
      ).n;
    });
  }

  searchMemories(search: MemorySearch): Promise<MemoryHit[]> {
    return this.#r.read(() => {
      const q = checkMemorySearch(search);
      const where = memoryFilterSql(q.filter);
      if (q.vector) return this.#vectorSearch(q.vector, where, q.limit, q.threshold);
      const match = ftsAnyWordQuery(keywordTokens(q.text!));
      if (match === null) return [];
      // Rank on small rows (seq, bm25), then read the winners whole. bm25() is lower for
      // better matches; the score is its negation, higher is better.
      const ranked = this.#s
        .rows(
          `SELECT m.seq, bm25(cairn_memories_fts) AS rank
             FROM cairn_memories_fts JOIN cairn_memories m ON m.seq = cairn_memories_fts.rowid
            WHERE cairn_memories_fts MATCH ? AND ${where.sql}
            ORDER BY rank, m.seq LIMIT ?`,
        )
        .all(match, ...where.params, q.limit) as Row[];
      const bySeq = this.#memoriesBySeq(ranked.map((r) => r[0] as number));
      return ranked.map((r) => ({ memory: bySeq.get(r[0] as number)!, score: -(r[1] as number) }));
    });
  }

  #memoriesBySeq(seqs: number[]): Map<number, Memory> {
    const out = new Map<number, Memory>();
    if (seqs.length === 0) return out;
    for (const r of this.#s
      .rows(
        `SELECT ${MEMORY_COLUMNS}, m.seq FROM cairn_memories m WHERE m.seq IN (SELECT value FROM json_each(?))`,
      )
      .all(JSON.stringify(seqs)) as Row[]) {
      out.set(r[12] as number, memoryFromRow(r));
    }
    return out;
  }

  #vectorSearch(
    vector: number[],
    where: { sql: string; params: unknown[] },
    limit: number,
    threshold: number | undefined,
  ): MemoryHit[] {
    const space = this.#space();
    if (!space) return [];
    checkVectorWidth(space, vector, 'vector');
    // An exact scan of the rows the filter admits with sqlite-vec, ranking small rows
    // (seq, distance). sqlite-vec computes in float32, so a few more candidates than
    // asked are re-scored in double precision over the stored values, as the reference
    // does, and the top `limit` of those is the answer; the threshold likewise gets a
    // little slack in SQL and is applied exactly here. A zero vector has no cosine
    // distance (NULL): it counts as similarity 0, as in the reference.
    const ranked = this.#s
      .rows(
        `SELECT seq, d FROM (
           SELECT m.seq, coalesce(vec_distance_cosine(m.embedding, ?), 1.0) AS d
             FROM cairn_memories m WHERE m.embedding IS NOT NULL AND ${where.sql}
         ) ${threshold === undefined ? '' : 'WHERE d <= ?'}
         ORDER BY d, seq LIMIT ?`,
      )
      .all(
        encodeF32(vector),
        ...where.params,
        ...(threshold === undefined ? [] : [1 - threshold + 1e-5]),
        limit + RESCORE_MARGIN,
      ) as Row[];
    const bySeq = this.#memoriesBySeq(ranked.map((r) => r[0] as number));
    const hits: Array<MemoryHit & { seq: number }> = [];
    for (const r of ranked) {
      const seq = r[0] as number;
      const memory = bySeq.get(seq)!;
      const score = cosineSimilarity(vector, memory.embedding!);
      if (threshold === undefined || score >= threshold) hits.push({ memory, score, seq });
    }
    return hits
      .sort((a, b) => b.score - a.score || a.seq - b.seq)
      .slice(0, limit)
      .map(({ memory, score }) => ({ memory, score }));
  }

  ensureEmbeddingSpace(space: { embedderId: string; dimensions: number }): Promise<EmbeddingSpace> {
    return this.#r.write(() => {
      const { space: next, changed } = resolveEmbeddingSpace(this.#space(), space);
      if (changed) this.#setSpace(next);
      return next;
    });
  }

  getEmbeddingSpace(): Promise<EmbeddingSpace | null> {
    return this.#r.read(() => this.#space());
  }

  getCachedEmbeddings(embedderId: string, contentHashes: string[]): Promise<Map<string, number[]>> {
    return this.#r.read(() => {
      checkId(embedderId, 'embedderId');
      if (!Array.isArray(contentHashes)) throw invalid('contentHashes must be an array');
      for (const [i, h] of contentHashes.entries()) checkId(h, `contentHashes[${i}]`);
      const out = new Map<string, number[]>();
      if (contentHashes.length === 0) return out;
      for (const r of this.#s
        .rows(
          'SELECT content_hash, embedding FROM cairn_embedding_cache WHERE embedder_id = ? AND content_hash IN (SELECT value FROM json_each(?))',
        )
        .all(embedderId, JSON.stringify(contentHashes)) as Row[]) {
        out.set(r[0] as string, decodeF64(r[1] as Uint8Array));
      }
      return out;
    });
  }

  putCachedEmbeddings(
    embedderId: string,
    entries: Array<{ contentHash: string; embedding: number[] }>,
  ): Promise<void> {
    return this.#r.write(() => {
      checkId(embedderId, 'embedderId');
      if (!Array.isArray(entries)) throw invalid('entries must be an array');
      for (const [i, e] of entries.entries()) {
        if (typeof e !== 'object' || e === null) throw invalid(`entries[${i}] must be an object`);
        checkId(e.contentHash, `entries[${i}].contentHash`);
        if (
          !Array.isArray(e.embedding) ||
          e.embedding.length === 0 ||
          !e.embedding.every((x) => typeof x === 'number' && Number.isFinite(x))
        ) {
          throw invalid(`entries[${i}].embedding must be a non-empty array of finite numbers`);
        }
      }
      const space = this.#space();
      for (const [i, e] of entries.entries())
        checkVectorWidth(space, e.embedding, `entries[${i}].embedding`);
      const put = this.#s.sql(
        `INSERT INTO cairn_embedding_cache (embedder_id, content_hash, embedding) VALUES (?, ?, ?)
         ON CONFLICT (embedder_id, content_hash) DO UPDATE SET embedding = excluded.embedding`,
      );
      for (const e of entries) put.run(embedderId, e.contentHash, encodeF64(e.embedding));
    });
  }

  // ------------------------------------------------------------------ lifecycle

  transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T> {
    return this.#r.transaction(fn, this);
  }

  subscribe(threadId: string, listener: StoreListener): () => void {
    checkId(threadId, 'threadId');
    if (typeof listener !== 'function') throw invalid('subscribe expects a listener function');
    if (this.#s.closed) throw new CairnError('CLOSED', 'this SQLite store is closed');
    return this.#s.emitter.subscribe(threadId, listener);
  }

  async migrate(): Promise<void> {
    if (this.#s.closed) throw new CairnError('CLOSED', 'this SQLite store is closed');
    // Inside a transaction the schema is already current: it was migrated on open.
    if (this.#r instanceof TxRunner) return;
    await this.#r.read(() => runMigrations(this.#s.db));
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async close(): Promise<void> {
    if (this.#r instanceof TxRunner) throw invalid('close the store, not a transaction');
    if (this.#s.closed) return;
    this.#s.closed = true;
    // Let a running transaction and the calls queued before close() finish first.
    await this.#s.lock.run(() => undefined);
    this.#s.emitter.clear();
    this.#s.clearStatements();
    if (this.#s.ownsDb && this.#s.db.open) this.#s.db.close();
  }
}

export { RootRunner, Shared };
