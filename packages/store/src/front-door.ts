import {
  type Branch,
  CairnError,
  type Checkpoint,
  conflict,
  type Entry,
  invalidArgument,
  isCairnError,
  type JsonObject,
  jsonEqual,
  keysOf,
  type Lease,
  type Memory,
  type Message,
  newId,
  notFound,
  type StateCommit,
  type Thread,
  type Turn,
} from '@cairn/core';
import type {
  BranchCommitQuery,
  DataKeyRow,
  Driver,
  DriverMemoryFilter,
  DriverSession,
  KeywordCandidate,
  MemoryRow,
  StateCommitDraft,
  StoredLease,
  SweepDeleted,
  SweepDeletes,
  SweepFacts,
  Tombstone,
  TombstoneKey,
} from './driver.js';
import { type Change, ChangeEmitter } from './emitter.js';
import {
  checkEncryptionOptions,
  type EncryptionOptions,
  type Tenant,
  type TenantKind,
} from './encryption.js';
import { asCairnError, forgotten } from './failures.js';
import { Gate } from './gate.js';
import { bm25Scorer, cosineSimilarity, searchTerms } from './memory-search.js';
import {
  checkRetentionPolicy,
  checkSweepOptions,
  type ResolvedPolicy,
  stateCutFloor,
  sweepRestMs,
  threadPolicy,
} from './retention.js';
import { Sealer, sealingSession, storesEmbedding } from './sealing.js';
import type {
  AcquiredLease,
  AcquireLeaseInput,
  ChainOptions,
  CloseMemoryOptions,
  EmbeddingSpace,
  EntryListener,
  EntrySelector,
  ForgetCounts,
  ForgetListener,
  ForgetReceipt,
  ForgetSubject,
  LatestCommitQuery,
  ListEntriesOptions,
  ListMemoriesOptions,
  ListThreadsOptions,
  LockOptions,
  MemoryFilter,
  MemoryHit,
  MemoryPatch,
  MemorySearch,
  MemoryVersion,
  NewBranch,
  NewCheckpoint,
  NewEntry,
  NewMemory,
  NewMessage,
  NewStateCommit,
  NewThread,
  Page,
  PageOptions,
  RetentionPolicy,
  StateCommitRange,
  Store,
  StoreCapabilities,
  StoreChange,
  StoreListener,
  SweepOptions,
  SweepReport,
  ThreadPatch,
  ThreadRecords,
  ThreadWithBranch,
} from './store.js';
import { runLeaseKey, SWEEP_LEASE_KEY } from './store.js';
import {
  checkCachedEmbeddings,
  checkChainOptions,
  checkCloseMemoryOptions,
  checkContentHashes,
  checkEntryBatch,
  checkEntrySelector,
  checkForgetSubject,
  checkId,
  checkIdList,
  checkLatestCommitQuery,
  checkLeaseData,
  checkLeaseInput,
  checkLeases,
  checkLimit,
  checkListEntriesOptions,
  checkListMemoriesOptions,
  checkListThreadsOptions,
  checkLockOptions,
  checkMemoryFilter,
  checkMemoryPatch,
  checkMemorySearch,
  checkMemoryVersion,
  checkName,
  checkNewBranch,
  checkNewCheckpoint,
  checkNewThread,
  checkObjectArgument,
  checkPageOptions,
  checkPurgeTurns,
  checkStateCommit,
  checkStateRange,
  checkThreadPatch,
  checkThreadRecords,
  checkTimestamp,
  checkTtl,
  checkTurn,
  checkVectorWidth,
  DEFAULT_LOCK_TIMEOUT_MS,
  encodeCursor,
  type MessageDraft,
  messageBatchLookups,
  normalizeNewMemories,
  normalizeNewMessages,
  planClose,
  planEntryPut,
  planLeaseAcquire,
  planLeaseRelease,
  planLeaseRenew,
  planLeaseWait,
  planMemoryUpdate,
  planMessageBatch,
  planSupersede,
  resolveEmbeddingSpace,
} from './validate.js';

/** Options of `createStore`. */
export interface CreateStoreOptions {
  /** The clock for timestamps and lease expiry; `Date.now` by default. */
  now?: () => number;
  /**
   * Encryption at rest with a data key per tenant (a thread's `resourceId`; a memory's
   * `entityId`, else its `worldId`; else the store's own): message data, state commits'
   * updates and snapshots, memory content and metadata are sealed with AES-256-GCM
   * before the driver writes them, bound to the row (kind, ids) and tenant, and opened
   * when read. Each data key is stored wrapped by `keyring`. A row edited, moved to
   * another row or tenant, or written in plaintext around the store fails to open with
   * `DECRYPTION_FAILED`; so does every sealed row for a store opened without the keyring.
   * A memory's embedding is sealed with it, and the store keeps no index of sealed text or
   * vectors: `searchMemories` (vector and keyword) opens the memories its filter selects
   * and scores them in the process, exactly (at most `searchScanLimit` of them), and the
   * embedding cache stays empty. `metadataPrefix` filters are refused (`INVALID_ARGUMENT`).
   * `forget` destroys the subject's data key.
   */
  encryption?: EncryptionOptions;
}

/** Vector candidates asked of the driver beyond `limit`, re-scored here in float64. */
const RESCORE_MARGIN = 16;
/** Slack on the threshold handed to the driver, whose distances may be float32. */
const THRESHOLD_SLACK = 1e-5;

const show = (id: string | null) => JSON.stringify(id);
const otherThread = (messageId: string, threadId: string) =>
  invalidArgument(`message ${show(messageId)} belongs to another thread`, {
    messageId,
    threadId,
  });

/** The emitters of the stores whose drivers share a `changeScope`: each hears the others. */
const scopes = new WeakMap<object, Set<ChangeEmitter>>();

/** What the store and every transaction view of it share. */
class Door {
  readonly gate = new Gate();
  readonly emitter = new ChangeEmitter();
  /** Tells this store's published changes from other instances'. */
  readonly origin = newId();
  closed = false;
  /** Every emitter a commit here reaches: this store's, and those sharing its scope. */
  readonly #peers: Set<ChangeEmitter>;
  #unlisten: (() => void) | null = null;

  constructor(
    readonly driver: Driver,
    readonly now: () => number,
    /** Seals and opens values; null for a store without encryption. */
    readonly sealer: Sealer | null,
  ) {
    const scope = driver.changeScope;
    this.#peers = (scope && scopes.get(scope)) || new Set();
    if (scope) scopes.set(scope, this.#peers);
    this.#peers.add(this.emitter);
  }

  /** The session the front door works with: one that seals and opens values. */
  seal(s: DriverSession): DriverSession {
    return sealingSession(s, this.sealer, this.now);
  }

  /** A CairnError for anything a driver threw. */
  translate(e: unknown): CairnError {
    const translated = isCairnError(e) ? e : this.driver.translateError?.(e);
    return translated ?? asCairnError(e, "the store's database failed");
  }

  emit(changes: Change[]): void {
    for (const emitter of this.#peers) for (const c of changes) emitter.emit(c);
  }

  /** Changes as the driver publishes them to other instances: text, naming this one. */
  encode(changes: Change[]): string[] {
    return changes.map((c) => {
      if (c.kind === 'lease') return JSON.stringify({ o: this.origin, k: 'lease', l: c.key });
      if (c.kind === 'forget')
        return JSON.stringify({ o: this.origin, k: 'forget', s: c.notice.subject, a: c.notice.at });
      if (c.kind === 'entry') {
        const { collection, id, group, version } = c.entry;
        return JSON.stringify({
          o: this.origin,
          k: 'entry',
          c: collection,
          i: id,
          g: group,
          v: version,
        });
      }
      const { threadId: t, kind: k, branchId: b, headMessageId: h, version: v } = c;
      return JSON.stringify({ o: this.origin, t, k, b, h, v });
    });
  }

  /** Starts hearing other instances' changes, once, for drivers that publish them. */
  listen(): void {
    if (this.#unlisten || !this.driver.listen) return;
    this.#unlisten = this.driver.listen((payload) => {
      const c = decodeChange(payload);
      // This store's own changes reached its listeners at commit.
      if (c && c.origin !== this.origin) this.emitter.emit(c.change);
    });
  }

  /** Each lease key's waiters, in the order they came: the last one's turn ends last. */
  readonly #leaseTurns = new Map<string, Promise<void>>();

  /**
   * Runs `attempt` (an acquisition) until it does not meet another owner's live lease:
   * after each `CONFLICT` it sleeps until the lease is released (a notice, here or from
   * another process where the store hears them), expires, or `waitMs` has passed
   * (`TIMEOUT`). Each attempt keeps the waiter's place in the lease's queue, so a freed
   * lease goes to the waiters of every process in the order they asked. One waiter per key
   * of this instance is in that queue at a time, in arrival order.
   * Where releases in other processes go unheard (a SQLite file), it also looks again
   * every `UNHEARD_RECHECK_MS`.
   */
  async waitForLease<T>(
    key: string,
    waitMs: number,
    attempt: (queueUntil: number) => Promise<T>,
  ): Promise<T> {
    const deadline = Date.now() + waitMs;
    const timedOut = (cause?: CairnError) =>
      new CairnError('TIMEOUT', `lease ${show(key)} still held after waiting ${waitMs} ms`, {
        details: { key, waitMs, ...(cause?.details ?? {}) },
        ...(cause ? { cause } : {}),
      });
    this.listen();
    const before = this.#leaseTurns.get(key) ?? Promise.resolve();
    let done!: () => void;
    const mine = before.then(() => new Promise<void>((resolve) => (done = resolve)));
    this.#leaseTurns.set(key, mine);
    try {
      if (!(await sleepUntil(deadline, (wake) => void before.then(wake)))) throw timedOut();
      const { notifications, multiProcess } = this.driver.capabilities;
      const unheard = multiProcess && notifications === 'process';
      for (;;) {
        let released = false;
        let wake: (() => void) | null = null;
        const stop = this.emitter.onLeaseReleased(key, () => {
          released = true;
          wake?.();
        });
        try {
          // Its place in the lease's queue holds until the deadline or the next refresh.
          return await attempt(Math.min(deadline, Date.now() + WAITER_TTL_MS));
        } catch (e) {
          const expiresAt = (e as CairnError).details?.expiresAt;
          if (!isCairnError(e, 'CONFLICT') || typeof expiresAt !== 'number') throw e;
          if (Date.now() >= deadline) throw timedOut(e);
          if (released) continue;
          // Awake when the holder's lease (or the first waiter's place) lapses, and in
          // time to keep this waiter's own place.
          let until = Math.min(deadline, expiresAt + 1, Date.now() + WAITER_TTL_MS / 2);
          if (unheard) until = Math.min(until, Date.now() + UNHEARD_RECHECK_MS);
          await sleepUntil(until, (w) => {
            wake = w;
          });
        } finally {
          stop();
        }
      }
    } finally {
      // `done` is set once the earlier waiters are through; a timed-out waiter lets the
      // next go after them.
      void before.then(() => done());
      if (this.#leaseTurns.get(key) === mine) this.#leaseTurns.delete(key);
    }
  }

  stopListening(): void {
    this.#unlisten?.();
    this.#unlisten = null;
    this.emitter.clear();
    this.#peers.delete(this.emitter);
  }
}

/** A published change, or null for a payload that is not one. */
function decodeChange(payload: string): { origin: string; change: Change } | null {
  try {
    const p = JSON.parse(payload) as Record<string, unknown>;
    if (
      typeof p.o === 'string' &&
      p.k === 'entry' &&
      typeof p.c === 'string' &&
      typeof p.i === 'string'
    ) {
      const group = typeof p.g === 'string' ? p.g : null;
      const version = typeof p.v === 'number' ? p.v : null;
      return {
        origin: p.o,
        change: { kind: 'entry', entry: { collection: p.c, id: p.i, group, version } },
      };
    }
    if (typeof p.o === 'string' && p.k === 'lease' && typeof p.l === 'string')
      return { origin: p.o, change: { kind: 'lease', key: p.l } };
    if (typeof p.o === 'string' && p.k === 'forget' && typeof p.a === 'number') {
      const given = (p.s ?? {}) as Record<string, unknown>;
      const subject: ForgetSubject = {};
      for (const k of ['resourceId', 'entityId', 'worldId'] as const)
        if (typeof given[k] === 'string') subject[k] = given[k];
      return { origin: p.o, change: { kind: 'forget', notice: { subject, at: p.a } } };
    }
    if (typeof p.o !== 'string' || typeof p.t !== 'string' || typeof p.k !== 'string') return null;
    const change = { threadId: p.t, kind: p.k as StoreChange['kind'] } as StoreChange;
    if (typeof p.b === 'string') change.branchId = p.b;
    if (typeof p.h === 'string' || p.h === null) change.headMessageId = p.h;
    if (typeof p.v === 'number') change.version = p.v;
    return { origin: p.o, change };
  } catch {
    return null;
  }
}

/** How often a sweep looks again whether sessions still queue for a connection. */
const QUEUED_RECHECK_MS = 2;

/** How often a lease waiter looks again where releases in other processes go unheard. */
const UNHEARD_RECHECK_MS = 50;

/**
 * Resolves true when `arm`'s wake is called, false at `until` (ms since the epoch),
 * whichever comes first.
 */
function sleepUntil(until: number, arm: (wake: () => void) => void): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), Math.max(0, until - Date.now()));
    arm(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** A page of a listing by key, from `limit + 1` rows: the extra one says there is more. */
function keyPage<T>(rows: T[], limit: number, key: (row: T) => string): Page<T> {
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return { items, nextCursor: rows.length > limit && last ? encodeCursor([key(last)]) : null };
}

/** Whether two leases are the same record, field by field. */
const sameLease = (a: Lease, b: Lease) =>
  a.owner === b.owner &&
  a.acquiredAt === b.acquiredAt &&
  a.renewedAt === b.renewedAt &&
  a.expiresAt === b.expiresAt &&
  a.releasedAt === b.releasedAt &&
  jsonEqual(a.data, b.data);

/** The lease, locked until the session ends (or read, where sessions exclude each other). */
const lockLease = (s: DriverSession, key: string) =>
  s.lockLease ? s.lockLease(key) : s.getLease(key);

/** A stored lease as the store shows it: without its queue of waiters. */
function shownLease(l: StoredLease): Lease;
function shownLease(l: StoredLease | null): Lease | null;
function shownLease(l: StoredLease | null): Lease | null {
  if (!l) return null;
  const { waiters: _, ...lease } = l;
  return lease;
}

/**
 * How long a waiting acquisition's place in a lease's queue holds unless it asks again:
 * a waiter refreshes it every half of this, and one that died blocks the lease's next
 * hand-off for at most this long.
 */
const WAITER_TTL_MS = 5_000;

/**
 * Appends version `expected + 1`, or returns null when the branch is missing or at
 * another version or the message is not in its thread: the driver's compare-and-set, or
 * read, compare and insert for a driver whose write sessions exclude each other.
 */
async function appendCommit(
  s: DriverSession,
  draft: StateCommitDraft,
  expected: number,
): Promise<StateCommit | null> {
  if (s.appendStateCommit) return s.appendStateCommit(draft, expected);
  const b = await s.getBranchById(draft.branchId);
  if (!b || (await s.latestStateVersion(b.id)) !== expected) return null;
  const m = draft.messageId === null ? null : await s.getMessage(draft.messageId);
  if (draft.messageId !== null && m?.threadId !== b.threadId) return null;
  const commit = {
    ...draft,
    threadId: b.threadId,
    version: expected + 1,
    messageDepth: m?.depth ?? null,
  };
  await s.insertStateCommit!(commit);
  return commit;
}

/** Inserts a checked new thread; `CONFLICT` when its id is taken. */
async function insertNewThread(s: DriverSession, t: Thread, touch: Touch): Promise<void> {
  threadInserted(await s.insertThread(t), t, touch);
}

function threadInserted(inserted: boolean, t: Thread, touch: Touch): void {
  if (!inserted) throw conflict(`thread ${show(t.id)} already exists`, { id: t.id });
  touch({ threadId: t.id, kind: 'thread' });
}

/** Inserts a checked branch whose name is free in its thread; `CONFLICT` when its id is taken. */
async function insertNewBranch(s: DriverSession, b: Omit<Branch, 'seq'>): Promise<Branch> {
  return branchInserted(await s.insertBranch(b), b);
}

function branchInserted(branch: Branch | null, b: Omit<Branch, 'seq'>): Branch {
  if (!branch) throw conflict(`branch id ${show(b.id)} already exists`, { id: b.id });
  return branch;
}

/** `insertNewThread` and then `insertNewBranch` of a branch of it, in one step where the driver can. */
async function insertNewThreadWithBranch(
  s: DriverSession,
  t: Thread,
  b: Omit<Branch, 'seq'>,
  touch: Touch,
): Promise<Branch> {
  if (!s.insertThreadWithBranch) {
    await insertNewThread(s, t, touch);
    return insertNewBranch(s, b);
  }
  const inserted = await s.insertThreadWithBranch(t, b);
  threadInserted(inserted.thread, t, touch);
  return branchInserted(inserted.branch, b);
}

/** Stores a checked batch; touches each thread it adds to. */
async function insertBatch(
  s: DriverSession,
  drafts: MessageDraft[],
  touch: Touch,
): Promise<Message[]> {
  const planned = await planBatch(s, drafts);
  await s.insertMessages(planned.messages, planned.jumps);
  touchBatch(drafts, touch);
  return planned.messages;
}

/** A checked batch against what is stored: its messages with depths, and their jumps. */
async function planBatch(s: DriverSession, drafts: MessageDraft[]) {
  return planMessageBatch(drafts, await s.lookupMessageBatch(messageBatchLookups(drafts)));
}

/** Whether the batch is of one thread and each parent is null or earlier in the batch. */
function isRootBatch(drafts: MessageDraft[]): boolean {
  const ids = new Set<string>();
  for (const d of drafts) {
    if (d.threadId !== drafts[0]!.threadId) return false;
    if (d.parentId !== null && !ids.has(d.parentId)) return false;
    ids.add(d.id);
  }
  return true;
}

function touchBatch(drafts: MessageDraft[], touch: Touch): void {
  for (const threadId of new Set(drafts.map((m) => m.threadId)))
    touch({ threadId, kind: 'messages' });
}

/** What every run lease key starts with (see `runLeaseKey`). */
const RUN_LEASE_PREFIX = runLeaseKey('');

/** Resolves after the I/O and timers that are due (a synchronous driver's callers included). */
const yieldToOthers = () =>
  new Promise<void>((resolve) =>
    typeof setImmediate === 'function' ? setImmediate(resolve) : setTimeout(resolve, 0),
  );

/** `items` in arrays of at most `size`. */
function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * Threads `sweep` decides on and deletes from in one write session: few enough that the
 * session is short (on SQLite it holds the one writer lock that callers wait for), enough
 * that its set-based statements are shared by several threads.
 */
const SWEEP_CHUNK = 8;
/** How long a write session of several threads of a sweep waits for a lock (see `sweepFactsOf`). */
const SWEEP_PART_LOCK_MS = 100;

/** What a part of a sweep found and freed. */
interface PartReport {
  scanned: number;
  busy: number;
  invalid: number;
  freed: Partial<SweepReport['freed']>;
}

/** Adds what a part of a sweep found and freed to `total` (a sweep's report, or a part's). */
function addPart(total: PartReport, part: PartReport): void {
  total.scanned += part.scanned;
  total.busy += part.busy;
  total.invalid += part.invalid;
  for (const [k, n] of Object.entries(part.freed)) {
    const key = k as keyof SweepReport['freed'];
    total.freed[key] = (total.freed[key] ?? 0) + n;
  }
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = out.get(k);
    if (group) group.push(item);
    else out.set(k, [item]);
  }
  return out;
}

/** `DriverSession.sweepFacts`, or the same rows thread by thread for a driver without it. */
async function sweepFactsOf(s: DriverSession, ids: string[]): Promise<SweepFacts> {
  // Several threads wait briefly: while one waits for a lock, the others' writers wait for
  // the locks it holds already. A part that gave up is swept again a thread at a time.
  const waitMs = ids.length > 1 ? SWEEP_PART_LOCK_MS : DEFAULT_LOCK_TIMEOUT_MS;
  if (s.sweepFacts) return s.sweepFacts(ids, waitMs);
  const facts: SweepFacts = {
    threads: [],
    branches: [],
    messages: [],
    checkpoints: [],
    leases: [],
    running: [],
  };
  const seen = new Set<string>();
  const message = async (id: string | null) => {
    if (id === null || seen.has(id)) return;
    seen.add(id);
    const m = await s.getMessage(id);
    if (m) facts.messages.push(m);
  };
  for (const id of ids) {
    const lease = await lockLease(s, runLeaseKey(id));
    let branches = await s.listBranches(id);
    if (s.lockBranch) {
      for (const b of branches) await s.lockBranch(b.id, waitMs);
      // Listed again under the locks.
      branches = await s.listBranches(id);
    }
    // Not the thread's lock: a save holds it (key share) while it waits for its branch's.
    const thread = await s.getThread(id);
    if (!thread) continue;
    facts.threads.push(thread);
    if (lease) facts.leases.push(lease);
    facts.branches.push(...branches);
    const checkpoints = await s.listCheckpoints(id);
    facts.checkpoints.push(...checkpoints);
    for (const b of branches) {
      await message(b.headMessageId);
      await message(b.forkMessageId);
    }
    for (const c of checkpoints) await message(c.messageId);
    const turns = await s.listTurns(id, Number.MAX_SAFE_INTEGER);
    if (turns.some((t) => t.status === 'running')) facts.running.push(id);
  }
  return facts;
}

/** `DriverSession.getLatestStateCommits`, or query by query for a driver without it. */
async function latestCommitsOf(
  s: DriverSession,
  queries: BranchCommitQuery[],
): Promise<Array<StateCommit | null>> {
  if (queries.length === 0) return [];
  if (s.getLatestStateCommits) return s.getLatestStateCommits(queries);
  const out: Array<StateCommit | null> = [];
  for (const { branchId, ...conditions } of queries)
    out.push(await s.getLatestStateCommit(branchId, conditions));
  return out;
}

/** `DriverSession.sweepDelete`, or delete by delete for a driver without it. */
async function sweepDeleteOf(s: DriverSession, d: SweepDeletes): Promise<SweepDeleted> {
  const none = d.turns.length === 0 && d.branches.length === 0 && d.stateCuts.length === 0;
  if (none) return { turns: 0, branches: [], stateCommits: 0 };
  if (s.sweepDelete) return s.sweepDelete(d);
  const out: SweepDeleted = { turns: 0, branches: [], stateCommits: 0 };
  for (const t of d.turns) out.turns += await s.purgeTurns(t.before, t.threadId);
  for (const id of d.branches) {
    const commits = await s.deleteBranch(id);
    if (commits === null) continue;
    out.branches.push(id);
    out.stateCommits += commits;
  }
  for (const c of d.stateCuts)
    out.stateCommits += await s.deleteStateCommits(c.branchId, c.beforeVersion);
  return out;
}

/** Threads `forget` deletes per transaction: each with everything under it. */
const FORGET_THREAD_PAGE = 20;
/** How often `forget` tries a page of threads that a concurrent writer's locks rolled back. */
const FORGET_TRIES = 5;
/** Memories `forget` deletes per transaction. */
const FORGET_MEMORY_PAGE = 200;

const noCounts = (): ForgetCounts => ({
  threads: 0,
  branches: 0,
  messages: 0,
  stateCommits: 0,
  checkpoints: 0,
  turns: 0,
  leases: 0,
  memories: 0,
  embeddings: 0,
  cachedEmbeddings: 0,
  dataKeys: 0,
});

function addCounts(total: ForgetCounts, page: Partial<ForgetCounts>): void {
  for (const [k, n] of Object.entries(page)) total[k as keyof ForgetCounts] += n;
}

/** The tombstone of the first of these keys that has one, or null. */
async function firstTombstone(s: DriverSession, keys: TombstoneKey[]): Promise<Tombstone | null> {
  if (keys.length === 0) return null;
  const found = await s.findTombstones(keys);
  for (const k of keys) {
    const t = found.find((f) => f.kind === k.kind && f.key === k.key);
    if (t) return t;
  }
  return null;
}

/** `FORGOTTEN` for the first of these keys that has a tombstone; nothing when none has. */
async function refuseForgotten(s: DriverSession, keys: TombstoneKey[]): Promise<void> {
  if (keys.length === 0) return;
  // Until this session ends, a forget of these keys waits for it (see `lockSubjects`).
  if (s.lockSubjects) await s.lockSubjects(keys, false);
  const found = await firstTombstone(s, keys);
  if (found) throw forgotten(found);
}

/** The tombstones a new thread must not meet: its id when chosen by the caller, its resource. */
function threadKeys(t: Thread, idGiven: boolean): TombstoneKey[] {
  const keys: TombstoneKey[] = [];
  if (idGiven) keys.push({ kind: 'thread', key: t.id });
  if (t.resourceId !== null) keys.push({ kind: 'resource', key: t.resourceId });
  return keys;
}

/**
 * Deletes a page of the memories meeting `filter` (an entity's or a world's), and the
 * cached embeddings of their content hashes that no remaining memory has. Returns what
 * it deleted.
 */
async function forgetMemories(s: DriverSession, filter: DriverMemoryFilter): Promise<ForgetCounts> {
  const page = noCounts();
  const batch = await s.listMemories(filter, FORGET_MEMORY_PAGE, 'oldest');
  if (batch.length === 0) return page;
  page.memories = await s.deleteMemories(batch.map((m) => m.id));
  // A forget reads rows as stored (its session does not open them): a sealed memory's
  // embedding is inside its stored content.
  page.embeddings = batch.filter(storesEmbedding).length;
  const hashes = [...new Set(batch.map((m) => m.contentHash))];
  const inUse = new Set(await s.memoryHashesInUse(hashes));
  const unused = hashes.filter((h) => !inUse.has(h));
  if (unused.length > 0) page.cachedEmbeddings = await s.deleteCachedEmbeddings(unused);
  return page;
}

/**
 * The memories `filter` selects, opened (a store with encryption), oldest first with their
 * position as creation order: what a sealed store's search scores in the process, as it
 * keeps no index of the sealed text and vectors. `INVALID_ARGUMENT` when the filter selects
 * more than `limit` (`EncryptionOptions.searchScanLimit`), before any is read.
 */
async function sealedScan(
  s: DriverSession,
  filter: DriverMemoryFilter,
  limit: number,
): Promise<MemoryRow[]> {
  const selected = await s.countMemories(filter);
  if (selected > limit)
    throw invalidArgument(
      `searchMemories on a store with encryption opens and scores the memories its filter selects, at most ${limit} (encryption.searchScanLimit); this filter selects ${selected}: narrow it (entityId, worldId, agentId, types, ...)`,
      { selected, searchScanLimit: limit },
    );
  const memories = await s.listMemories(filter, limit, 'oldest');
  return memories.map((memory, seq) => ({ memory, seq }));
}

/**
 * Keyword candidates of opened memories: those whose text holds a term, best first by
 * BM25 over these memories' texts (`bm25Scorer`, the in-memory store's rule), ties by
 * creation order.
 */
function keywordRank(rows: MemoryRow[], terms: string[]): KeywordCandidate[] {
  const relevanceOf = bm25Scorer(
    rows.map((r) => r.memory.content.text),
    terms,
  );
  return rows
    .map((r) => ({ ...r, relevance: relevanceOf(r.memory.content.text) }))
    .filter((c) => c.relevance > 0)
    .sort((a, b) => b.relevance - a.relevance || a.seq - b.seq);
}

/** Data keys `rotateDataKeys` wraps again per transaction. */
const ROTATE_PAGE = 100;

/** The tombstones of a forget's subject: one per key given. */
function subjectTombstones(subject: ForgetSubject, at: number): Tombstone[] {
  const out: Tombstone[] = [];
  if (subject.resourceId !== undefined) out.push({ kind: 'resource', key: subject.resourceId, at });
  if (subject.entityId !== undefined) out.push({ kind: 'entity', key: subject.entityId, at });
  if (subject.worldId !== undefined) out.push({ kind: 'world', key: subject.worldId, at });
  return out;
}

/** Anchor depths at most this far apart are checked by one chain read (see `depthRanges`). */
const ANCHOR_GAP = 16;

/**
 * The distinct `depths` as ranges `[min, max]`, deepest first, a new range wherever two
 * depths are more than `gap` apart: reading the chain over these ranges costs at most
 * `gap` rows per depth, however long the chain between them.
 */
function depthRanges(depths: readonly number[], gap: number): Array<[number, number]> {
  const ranges: Array<[number, number]> = [];
  for (const d of [...new Set(depths)].sort((a, b) => b - a)) {
    const last = ranges.at(-1);
    if (last && last[0] - d <= gap) last[0] = d;
    else ranges.push([d, d]);
  }
  return ranges;
}

/**
 * The filter as a driver takes it: `visibleFrom` resolved to the anchors of the branch-
 * scoped memories it sees (`visibleAnchors`), those on the chain of the viewing branch's
 * head. The work follows the thread's branch-scoped memories (their anchors, and the
 * chain near each anchor's depth), never the number of memories in the store or the
 * length of the chain.
 */
async function driverFilter(s: DriverSession, filter: MemoryFilter): Promise<DriverMemoryFilter> {
  const { visibleFrom, ...rest } = filter;
  if (visibleFrom === undefined) return rest;
  if (visibleFrom === null) return { ...rest, visibleAnchors: [] };
  const { threadId, branchId } = visibleFrom;
  const branch =
    branchId === undefined ? await s.getActiveBranch(threadId) : await s.getBranchById(branchId);
  if (!branch || branch.threadId !== threadId) {
    if (!(await s.getThread(threadId))) throw notFound('thread', threadId);
    if (branchId !== undefined) throw notFound('branch', branchId, { threadId });
  }
  const head = branch?.headMessageId ? await s.getMessage(branch.headMessageId) : null;
  if (!head) return { ...rest, visibleAnchors: [] };
  const anchors = await s.branchAnchors(threadId, head.depth);
  if (anchors.length === 0) return { ...rest, visibleAnchors: [] };
  const onChain = new Set<string>();
  for (const [min, max] of depthRanges(
    anchors.map((a) => a.depth),
    ANCHOR_GAP,
  ))
    for (const m of await s.getChain(head.id, min, max)) onChain.add(m.id);
  return { ...rest, visibleAnchors: anchors.filter((a) => onChain.has(a.id)).map((a) => a.id) };
}

/** The session of a running `transaction(fn)`: its driver session and what it changed. */
interface TxState {
  session: DriverSession;
  pending: Change[];
  ended: boolean;
}

type Touch = (change: Change) => void;

/**
 * The one `Store` implementation: every argument check, guard, error and session rule
 * of the contract, over a `Driver` that does the database work.
 */
class FrontDoor implements Store {
  readonly capabilities: StoreCapabilities;
  readonly #d: Door;
  readonly #tx: TxState | null;

  constructor(door: Door, tx: TxState | null) {
    this.#d = door;
    this.#tx = tx;
    // A store with encryption scans the memories a search selects: always exact.
    this.capabilities = door.sealer
      ? { ...door.driver.capabilities, vectorSearch: 'exact' }
      : door.driver.capabilities;
  }

  /** CLOSED after `close()`, or when this is a transaction's view and it has ended. */
  #open(): void {
    if (this.#tx?.ended) {
      throw new CairnError(
        'CLOSED',
        'this transaction has ended; use the store, not the transaction, after it',
      );
    }
    if (this.#d.closed) throw new CairnError('CLOSED', 'this store is closed');
  }

  /** Runs one call in its own session, or inside the transaction's, under a savepoint. */
  async #call<T>(
    write: boolean,
    fn: (s: DriverSession, touch: Touch) => Promise<T>,
    sealed = true,
  ): Promise<T> {
    const d = this.#d;
    const tx = this.#tx;
    if (tx) {
      const changes: Change[] = [];
      try {
        const result = write
          ? await tx.session.savepoint(() => fn(tx.session, (c) => changes.push(c)))
          : await fn(tx.session, () => {});
        tx.pending.push(...changes);
        return result;
      } catch (e) {
        throw d.translate(e);
      }
    }
    const changes: Change[] = [];
    const result = await d.gate.shared(async () => {
      try {
        return await d.driver.run(
          async (s) => {
            const r = await fn(sealed ? d.seal(s) : s, (c) => changes.push(c));
            if (changes.length > 0 && s.publish) await s.publish(d.encode(changes));
            return r;
          },
          { write },
        );
      } catch (e) {
        throw d.translate(e);
      }
    });
    d.emit(changes);
    return result;
  }

  #read<T>(fn: (s: DriverSession) => Promise<T>): Promise<T> {
    return this.#call(false, fn);
  }

  /**
   * A write in a session of its own (or the transaction's). `sealed: false` gives the
   * driver's session as it is, for `forget`, which deletes without reading values.
   */
  async #write<T>(fn: (s: DriverSession, touch: Touch) => Promise<T>, sealed = true): Promise<T> {
    try {
      return await this.#call(true, fn, sealed);
    } catch (e) {
      throw await this.#whyNotFound(e);
    }
  }

  /**
   * `FORGOTTEN` for a write that failed `NOT_FOUND` because its thread or branch was
   * forgotten (a worker finishing a turn late); any other error as it is. Looked up only
   * on this failure path, so writes that succeed pay nothing for tombstones.
   */
  async #whyNotFound(e: unknown): Promise<unknown> {
    if (!isCairnError(e, 'NOT_FOUND')) return e;
    const { id, threadId, branchId } = e.details;
    const keys: TombstoneKey[] = [];
    for (const key of new Set([id, threadId, branchId]))
      if (typeof key === 'string') keys.push({ kind: 'thread', key }, { kind: 'branch', key });
    if (keys.length === 0) return e;
    const found = await this.#read((s) => firstTombstone(s, keys));
    return found ? forgotten(found, e) : e;
  }

  // ---------------------------------------------------------------- threads

  async createThread(input: NewThread): Promise<Thread> {
    this.#open();
    const t = checkNewThread(input, this.#d.now());
    const keys = threadKeys(t, input.id !== undefined);
    return this.#write(async (s, touch) => {
      await refuseForgotten(s, keys);
      await insertNewThread(s, t, touch);
      return t;
    });
  }

  async createThreadWithBranch(input: NewThread & { branch?: string }): Promise<ThreadWithBranch> {
    this.#open();
    const now = this.#d.now();
    const thread = checkNewThread(input, now, 'createThreadWithBranch');
    const { activate: _, ...b } = checkNewBranch(
      { threadId: thread.id, name: input.branch ?? 'main', headMessageId: null },
      now,
    );
    const keys = threadKeys(thread, input.id !== undefined);
    return this.#write(async (s, touch) => {
      await refuseForgotten(s, keys);
      // The thread is this session's own: no other branch of it can be active.
      const branch = await insertNewThreadWithBranch(s, thread, { ...b, isActive: true }, touch);
      touch({ threadId: thread.id, kind: 'branch', branchId: b.id, headMessageId: null });
      return { thread, branch };
    });
  }

  async getThread(id: string): Promise<Thread | null> {
    this.#open();
    checkId(id, 'thread id');
    return this.#read(async (s) => s.getThread(id));
  }

  async updateThread(id: string, patch: ThreadPatch): Promise<Thread> {
    this.#open();
    checkId(id, 'thread id');
    const p = checkThreadPatch(patch);
    const now = this.#d.now();
    return this.#write(async (s, touch) => {
      const t = await s.updateThread(id, p, now);
      if (!t) throw notFound('thread', id);
      touch({ threadId: id, kind: 'thread' });
      return t;
    });
  }

  async listThreads(options: ListThreadsOptions = {}): Promise<Page<Thread>> {
    this.#open();
    const q = checkListThreadsOptions(options);
    return this.#read(async (s) => {
      const rows = await s.listThreads({ ...q, limit: q.limit + 1 });
      const page = rows.slice(0, q.limit);
      const last = page[page.length - 1];
      return {
        items: page.map((r) => r.thread),
        nextCursor: rows.length > q.limit && last ? encodeCursor([last.seq]) : null,
      };
    });
  }

  async deleteThread(id: string, options: { idleSince?: number } = {}): Promise<boolean> {
    this.#open();
    checkId(id, 'thread id');
    checkObjectArgument(options, 'deleteThread options', ['idleSince']);
    const idleSince =
      options.idleSince === undefined
        ? undefined
        : checkTimestamp(options.idleSince, 'idleSince', 0);
    return this.#write(async (s, touch) => {
      if (idleSince !== undefined && !(await this.#idleSince(s, id, idleSince, true))) return false;
      const deleted = await s.deleteThread(id);
      if (deleted) touch({ threadId: id, kind: 'thread' });
      return deleted;
    });
  }

  async isThreadIdle(id: string, since: number): Promise<boolean> {
    this.#open();
    checkId(id, 'thread id');
    const t = checkTimestamp(since, 'since', 0);
    return this.#read((s) => this.#idleSince(s, id, t, false));
  }

  /**
   * The one rule of thread activity (`deleteThread`'s `idleSince`, `isThreadIdle`): the
   * thread exists, nothing of it was written at or after `since` (the thread itself, a
   * message, a branch, a state commit, a checkpoint, a turn, its run lease) and nothing
   * works on it now (a running turn, a live run lease).
   *
   * With `lock` (a write session about to delete) its writers are locked out first, so
   * that none slips in between this check and the delete: the run lease, the branches
   * (state commits and head moves take their lock) and the thread (messages, branches,
   * checkpoints and updates need it). In that order, the order writers take them in.
   */
  async #idleSince(s: DriverSession, id: string, since: number, lock: boolean): Promise<boolean> {
    const now = this.#d.now();
    const key = runLeaseKey(id);
    const lease = await (lock ? lockLease(s, key) : s.getLease(key));
    if (lease && (lease.renewedAt >= since || (lease.releasedAt ?? 0) >= since)) return false;
    if (lease && lease.releasedAt === null && lease.expiresAt > now) return false;
    if (lock && s.lockBranch)
      for (const b of await s.listBranches(id)) await s.lockBranch(b.id, DEFAULT_LOCK_TIMEOUT_MS);
    const t = await (lock && s.lockThread ? s.lockThread(id) : s.getThread(id));
    if (!t || t.updatedAt >= since) return false;
    const newest = await s.latestMessageAt(id);
    if (newest !== null && newest >= since) return false;
    for (const b of await s.listBranches(id)) {
      if (b.createdAt >= since) return false;
      const commit = await s.getLatestStateCommit(b.id, {});
      if (commit && commit.createdAt >= since) return false;
    }
    for (const c of await s.listCheckpoints(id)) if (c.createdAt >= since) return false;
    for (const turn of await s.listTurns(id, Number.MAX_SAFE_INTEGER))
      if (turn.status === 'running' || turn.startedAt >= since || (turn.finishedAt ?? 0) >= since)
        return false;
    return true;
  }

  // ---------------------------------------------------------------- messages

  async addMessages(messages: NewMessage[]): Promise<Message[]> {
    this.#open();
    const drafts = normalizeNewMessages(messages, this.#d.now());
    if (drafts.length === 0) return [];
    return this.#write((s, touch) => insertBatch(s, drafts, touch));
  }

  async addMessagesOnBranch(
    branchId: string,
    expectedHeadId: string | null,
    messages: NewMessage[],
  ): Promise<{ messages: Message[]; branch: Branch }> {
    this.#open();
    checkId(branchId, 'branch id');
    if (expectedHeadId !== null) checkId(expectedHeadId, 'expectedHeadId');
    const drafts = normalizeNewMessages(messages, this.#d.now());
    if (drafts.length === 0) throw invalidArgument('addMessagesOnBranch needs a message');
    // A batch of roots of one thread (each parent null or earlier in the batch) needs of
    // what is stored only that the thread exists and the ids are free. A driver that
    // inserts and moves the head in one statement checks both (see
    // `insertMessagesMovingHead`), so the batch is first planned without the lookup; if
    // that statement fails or moves nothing, it rolls back and the call is made again
    // with the lookup, whose checks give the contract's error in the contract's order.
    const write = (refused?: CairnError) =>
      this.#write((s, touch) =>
        this.#onBranch(s, touch, drafts, branchId, expectedHeadId, refused),
      );
    if (!isRootBatch(drafts)) return write();
    const refused = new CairnError('CONFLICT', 'a batch planned without its lookup was refused');
    return write(refused).catch((e: unknown) => {
      if (e !== refused) throw e;
      return write();
    });
  }

  /** `addMessagesOnBranch` in a session; with `refused`, a root batch without the lookup. */
  async #onBranch(
    s: DriverSession,
    touch: Touch,
    drafts: MessageDraft[],
    branchId: string,
    expectedHeadId: string | null,
    refused?: CairnError,
  ): Promise<{ messages: Message[]; branch: Branch }> {
    const head = drafts.at(-1)!.id;
    const withoutLookup = refused !== undefined && s.insertMessagesMovingHead !== undefined;
    const { messages: saved, jumps } = withoutLookup
      ? planMessageBatch(drafts, { threadIds: new Set([drafts[0]!.threadId]), messages: new Map() })
      : await planBatch(s, drafts);
    let moved: Branch | null;
    if (withoutLookup) {
      moved = await Promise.resolve(
        s.insertMessagesMovingHead!(saved, jumps, branchId, expectedHeadId),
      ).catch((e: unknown) => {
        // A lock wait that gave up would only wait again.
        if (this.#d.translate(e).code === 'TIMEOUT') throw e;
        return null;
      });
      if (!moved) throw refused;
    } else if (s.insertMessagesMovingHead) {
      moved = await s.insertMessagesMovingHead(saved, jumps, branchId, expectedHeadId);
    } else {
      await s.insertMessages(saved, jumps);
      moved = await s.moveHead(branchId, expectedHeadId, head);
    }
    touchBatch(drafts, touch);
    const branch = await this.#headMoved(s, touch, moved, branchId, expectedHeadId, head);
    return { messages: saved, branch };
  }

  async getMessage(id: string): Promise<Message | null> {
    this.#open();
    checkId(id, 'message id');
    return this.#read(async (s) => s.getMessage(id));
  }

  async getChain(headId: string, options: ChainOptions = {}): Promise<Message[]> {
    this.#open();
    checkId(headId, 'head id');
    const { limit, beforeDepth } = checkChainOptions(options);
    return this.#read(async (s) => {
      const head = await s.getMessage(headId);
      if (!head) throw notFound('message', headId);
      const top = beforeDepth === undefined ? head.depth : Math.min(head.depth, beforeDepth - 1);
      if (top < 0) return [];
      const bottom = limit === undefined ? 0 : Math.max(0, top - limit + 1);
      return s.getChain(headId, bottom, top);
    });
  }

  async isAncestor(ancestorId: string, descendantId: string): Promise<boolean> {
    this.#open();
    checkId(ancestorId, 'ancestor id');
    checkId(descendantId, 'descendant id');
    return this.#read(async (s) => {
      const a = await s.getMessage(ancestorId);
      if (!a) throw notFound('message', ancestorId);
      if (ancestorId === descendantId) return true;
      const d = await s.getMessage(descendantId);
      if (!d) throw notFound('message', descendantId);
      if (d.threadId !== a.threadId || d.depth <= a.depth) return false;
      const [at] = await s.getChain(descendantId, a.depth, a.depth);
      return at?.id === ancestorId;
    });
  }

  // ---------------------------------------------------------------- branches

  /** NOT_FOUND unless the message exists; INVALID_ARGUMENT unless it is in `threadId`. */
  async #messageIn(s: DriverSession, threadId: string, messageId: string): Promise<Message> {
    const m = await s.getMessage(messageId);
    if (!m) throw notFound('message', messageId);
    if (m.threadId !== threadId) throw otherThread(messageId, threadId);
    return m;
  }

  async #requireThread(s: DriverSession, threadId: string): Promise<void> {
    if (!(await s.getThread(threadId))) throw notFound('thread', threadId);
  }

  async createBranch(input: NewBranch): Promise<Branch> {
    this.#open();
    const { activate, ...b } = checkNewBranch(input, this.#d.now());
    return this.#write(async (s, touch) => {
      await this.#requireThread(s, b.threadId);
      if (b.headMessageId !== null) await this.#messageIn(s, b.threadId, b.headMessageId);
      if (b.parentBranchId !== null) {
        const parent = await s.getBranchById(b.parentBranchId);
        // A branch of another thread is not a parent this thread can have.
        if (parent?.threadId !== b.threadId) throw notFound('parent branch', b.parentBranchId);
      }
      // Made active when asked, or when the thread has no active branch yet.
      const activated = activate || (await s.getActiveBranch(b.threadId)) === null;
      let branch = await s.insertBranch({ ...b, isActive: false });
      if (!branch) {
        if (await s.getBranchById(b.id))
          throw conflict(`branch id ${show(b.id)} already exists`, { id: b.id });
        throw conflict(`branch ${show(b.name)} already exists in this thread`, {
          threadId: b.threadId,
          name: b.name,
        });
      }
      if (activated) branch = (await s.setActiveBranch(b.threadId, b.id))!;
      touch({
        threadId: b.threadId,
        kind: 'branch',
        branchId: b.id,
        headMessageId: b.headMessageId,
      });
      return branch;
    });
  }

  async getBranch(threadId: string, name: string): Promise<Branch | null> {
    this.#open();
    checkId(threadId, 'threadId');
    checkName(name, 'branch name');
    return this.#read(async (s) => s.getBranch(threadId, name));
  }

  async getBranchById(id: string): Promise<Branch | null> {
    this.#open();
    checkId(id, 'branch id');
    return this.#read(async (s) => s.getBranchById(id));
  }

  async listBranches(threadId: string): Promise<Branch[]> {
    this.#open();
    checkId(threadId, 'threadId');
    return this.#read(async (s) => s.listBranches(threadId));
  }

  async getActiveBranch(threadId: string): Promise<Branch | null> {
    this.#open();
    checkId(threadId, 'threadId');
    return this.#read(async (s) => s.getActiveBranch(threadId));
  }

  async setActiveBranch(branchId: string): Promise<Branch> {
    this.#open();
    checkId(branchId, 'branch id');
    return this.#write(async (s, touch) => {
      const b = await s.getBranchById(branchId);
      if (!b) throw notFound('branch', branchId);
      const active = (await s.setActiveBranch(b.threadId, branchId))!;
      touch({
        threadId: b.threadId,
        kind: 'branch',
        branchId,
        headMessageId: active.headMessageId,
      });
      return active;
    });
  }

  async moveHead(
    branchId: string,
    expectedHeadId: string | null,
    newHeadId: string,
  ): Promise<Branch> {
    this.#open();
    checkId(branchId, 'branch id');
    if (expectedHeadId !== null) checkId(expectedHeadId, 'expectedHeadId');
    checkId(newHeadId, 'new head id');
    return this.#write(async (s, touch) => {
      const moved = await s.moveHead(branchId, expectedHeadId, newHeadId);
      return this.#headMoved(s, touch, moved, branchId, expectedHeadId, newHeadId);
    });
  }

  /** The branch a head move returned, or why it moved nothing. */
  async #headMoved(
    s: DriverSession,
    touch: Touch,
    moved: Branch | null,
    branchId: string,
    expectedHeadId: string | null,
    newHeadId: string,
  ): Promise<Branch> {
    if (moved) {
      touch({ threadId: moved.threadId, kind: 'branch', branchId, headMessageId: newHeadId });
      return moved;
    }
    // The compare-and-set changed nothing: find out why.
    const b = await s.getBranchById(branchId);
    if (!b) throw notFound('branch', branchId);
    await this.#messageIn(s, b.threadId, newHeadId);
    throw conflict(
      `branch ${show(b.name)} head is ${show(b.headMessageId)}, not ${show(expectedHeadId)}`,
      { branchId, expected: expectedHeadId, actual: b.headMessageId },
    );
  }

  async lockBranch(branchId: string, options?: LockOptions): Promise<Branch> {
    this.#open();
    checkId(branchId, 'branch id');
    const timeoutMs = checkLockOptions(options);
    return this.#write(async (s) => {
      const b = await (s.lockBranch
        ? s.lockBranch(branchId, timeoutMs)
        : s.getBranchById(branchId));
      if (!b) throw notFound('branch', branchId);
      return b;
    });
  }

  // ---------------------------------------------------------------- checkpoints

  async saveCheckpoint(input: NewCheckpoint): Promise<Checkpoint> {
    this.#open();
    const c = checkNewCheckpoint(input, this.#d.now());
    return this.#write(async (s, touch) => {
      await this.#requireThread(s, c.threadId);
      await this.#messageIn(s, c.threadId, c.messageId);
      const saved = await s.putCheckpoint(c);
      touch({ threadId: c.threadId, kind: 'checkpoint' });
      return saved;
    });
  }

  async getCheckpoint(threadId: string, name: string): Promise<Checkpoint | null> {
    this.#open();
    checkId(threadId, 'threadId');
    checkName(name, 'checkpoint name');
    return this.#read(async (s) => s.getCheckpoint(threadId, name));
  }

  async listCheckpoints(threadId: string): Promise<Checkpoint[]> {
    this.#open();
    checkId(threadId, 'threadId');
    return this.#read(async (s) => s.listCheckpoints(threadId));
  }

  async deleteCheckpoint(threadId: string, name: string): Promise<boolean> {
    this.#open();
    checkId(threadId, 'threadId');
    checkName(name, 'checkpoint name');
    return this.#write(async (s, touch) => {
      const deleted = await s.deleteCheckpoint(threadId, name);
      if (deleted) touch({ threadId, kind: 'checkpoint' });
      return deleted;
    });
  }

  // ---------------------------------------------------------------- state

  async appendStateCommit(commit: NewStateCommit, expectedVersion: number): Promise<StateCommit> {
    this.#open();
    const c = checkStateCommit(commit, expectedVersion);
    const createdAt = this.#d.now();
    return this.#write(async (s, touch) => {
      const saved = await appendCommit(
        s,
        {
          branchId: c.branchId,
          messageId: c.messageId,
          update: c.update,
          snapshot: c.snapshot,
          createdAt,
        },
        expectedVersion,
      );
      if (saved) {
        touch({
          threadId: saved.threadId,
          kind: 'state',
          branchId: saved.branchId,
          version: saved.version,
        });
        return saved;
      }
      const b = await s.getBranchById(c.branchId);
      if (!b) throw notFound('branch', c.branchId);
      if (c.messageId !== null) await this.#messageIn(s, b.threadId, c.messageId);
      const actual = await s.latestStateVersion(c.branchId);
      throw conflict(
        `branch ${show(b.name)} is at state version ${actual}, not ${expectedVersion}`,
        { branchId: b.id, expected: expectedVersion, actual },
      );
    });
  }

  async getStateCommits(branchId: string, range: StateCommitRange = {}): Promise<StateCommit[]> {
    this.#open();
    checkId(branchId, 'branch id');
    const { from, to } = checkStateRange(range);
    return this.#read(async (s) => {
      const commits = await s.getStateCommits(branchId, from, to);
      if (commits.length === 0) await this.#requireBranch(s, branchId);
      return commits;
    });
  }

  async getLatestStateCommit(
    branchId: string,
    query: LatestCommitQuery = {},
  ): Promise<StateCommit | null> {
    this.#open();
    checkId(branchId, 'branch id');
    const q = checkLatestCommitQuery(query);
    return this.#read(async (s) => {
      const latest = await s.getLatestStateCommit(branchId, q);
      if (latest === null) await this.#requireBranch(s, branchId);
      return latest;
    });
  }

  /**
   * NOT_FOUND unless the branch exists. State reads check only when they found no commit:
   * a branch's commits go with it, so one found says the branch is there.
   */
  async #requireBranch(s: DriverSession, branchId: string): Promise<void> {
    if (!(await s.getBranchById(branchId))) throw notFound('branch', branchId);
  }

  // ---------------------------------------------------------------- turns

  async putTurn(turn: Turn): Promise<Turn> {
    this.#open();
    const t = checkTurn(turn);
    return this.#write(async (s) => {
      // Held (key share, as a message batch holds it) until the turn is written: a prune
      // deleting the thread waits for this session and then sees the turn.
      const { threadIds } = await s.lookupMessageBatch({ threadIds: [t.threadId], messageIds: [] });
      if (!threadIds.has(t.threadId)) throw notFound('thread', t.threadId);
      if (t.messageId !== null) await this.#messageIn(s, t.threadId, t.messageId);
      await s.putTurn(t);
      return t;
    });
  }

  async getTurn(id: string): Promise<Turn | null> {
    this.#open();
    checkId(id, 'turn id');
    return this.#read(async (s) => s.getTurn(id));
  }

  async listTurns(threadId: string, options: { limit?: number } = {}): Promise<Turn[]> {
    this.#open();
    checkId(threadId, 'threadId');
    checkObjectArgument(options, 'listTurns options', ['limit']);
    const limit = checkLimit(options.limit, 'limit', 100, 10_000);
    return this.#read(async (s) => s.listTurns(threadId, limit));
  }

  async deleteTurn(id: string): Promise<boolean> {
    this.#open();
    checkId(id, 'turn id');
    return this.#write(async (s) => s.deleteTurn(id));
  }

  async purgeTurns(options: { before: number; threadId?: string }): Promise<number> {
    this.#open();
    const { before, threadId } = checkPurgeTurns(options);
    return this.#write(async (s) => s.purgeTurns(before, threadId));
  }

  // ---------------------------------------------------------------- leases

  async acquireLease(input: AcquireLeaseInput): Promise<AcquiredLease> {
    this.#open();
    const i = checkLeaseInput(input);
    if (i.waitMs > 0 && this.#tx)
      throw invalidArgument(
        'acquireLease waits (waitMs) only outside a transaction: a transaction would stay open while it waits',
      );
    // `queueUntil`: a waiting acquisition that meets `CONFLICT` takes (or keeps) its place in
    // the lease's queue until then, committed, before the conflict is thrown.
    const attempt = async (queueUntil?: number) => {
      const outcome = await this.#write(async (s) => {
        // A first acquisition races on the insert; the loser locks the winner's row.
        for (;;) {
          const current = await lockLease(s, i.key);
          // A run lease of a forgotten thread would start a run on it: refused. Checked
          // only for a new lease row: a forgotten thread's run lease was deleted.
          if (current === null && i.key.startsWith(RUN_LEASE_PREFIX))
            await refuseForgotten(s, [
              { kind: 'thread', key: i.key.slice(RUN_LEASE_PREFIX.length) },
            ]);
          const now = this.#d.now();
          let plan: ReturnType<typeof planLeaseAcquire>;
          try {
            plan = planLeaseAcquire(current, i, now);
          } catch (e) {
            if (queueUntil === undefined || current === null || !isCairnError(e, 'CONFLICT'))
              throw e;
            await s.putLease(planLeaseWait(current, i.owner, now, queueUntil), false);
            return e;
          }
          if (await s.putLease(plan.lease, current === null)) return plan;
        }
      });
      if (outcome instanceof CairnError) throw outcome;
      return {
        lease: shownLease(outcome.lease),
        tookOver: shownLease(outcome.tookOver as StoredLease | null),
        previous: shownLease(outcome.previous as StoredLease | null),
      };
    };
    return i.waitMs > 0 ? this.#d.waitForLease(i.key, i.waitMs, attempt) : attempt();
  }

  async renewLease(key: string, owner: string, ttlMs: number, data?: JsonObject): Promise<Lease> {
    this.#open();
    checkName(key, 'lease key');
    checkName(owner, 'lease owner');
    const ttl = checkTtl(ttlMs);
    const patch = checkLeaseData(data);
    return this.#write(async (s) => {
      const lease = planLeaseRenew(await lockLease(s, key), key, owner, ttl, patch, this.#d.now());
      await s.putLease(lease, false);
      return shownLease(lease);
    });
  }

  async releaseLease(key: string, owner: string, data?: JsonObject): Promise<Lease> {
    this.#open();
    checkName(key, 'lease key');
    checkName(owner, 'lease owner');
    const patch = checkLeaseData(data);
    return this.#write(async (s, touch) => {
      const lease = planLeaseRelease(await lockLease(s, key), key, owner, patch, this.#d.now());
      await s.putLease(lease, false);
      touch({ kind: 'lease', key });
      return shownLease(lease);
    });
  }

  async getLease(key: string): Promise<Lease | null> {
    this.#open();
    checkName(key, 'lease key');
    return this.#read(async (s) => shownLease(await s.getLease(key)));
  }

  // ---------------------------------------------------------------- memories

  /** Checks a vector against the store's width, fixing the width on the first vector. */
  async #fitVector(s: DriverSession, vector: number[], label: string): Promise<void> {
    const space = await s.getEmbeddingSpace();
    if (space) checkVectorWidth(space, vector, label);
    else await s.setEmbeddingSpace({ embedderId: null, dimensions: vector.length });
  }

  async addMemories(memories: NewMemory[]): Promise<Memory[]> {
    this.#open();
    const batch = normalizeNewMemories(memories, this.#d.now());
    if (batch.length === 0) return [];
    const keys: TombstoneKey[] = [];
    for (const key of new Set(batch.map((m) => m.entityId)))
      if (key !== null) keys.push({ kind: 'entity', key });
    for (const key of new Set(batch.map((m) => m.worldId)))
      if (key !== null) keys.push({ kind: 'world', key });
    // Nor is anything learned on a forgotten thread (a background job finishing late).
    for (const key of new Set(batch.map((m) => m.source?.threadId)))
      if (key !== undefined) keys.push({ kind: 'thread', key });
    return this.#write(async (s) => {
      await refuseForgotten(s, keys);
      const taken = new Set(await s.takenMemoryIds(batch.map((m) => m.id)));
      const first = batch.find((m) => taken.has(m.id));
      if (first) throw conflict(`memory id ${show(first.id)} is already used`, { id: first.id });
      const i = batch.findIndex((m) => m.embedding !== null);
      if (i >= 0) await this.#fitVector(s, batch[i]!.embedding!, `memories[${i}].embedding`);
      return s.insertMemories(batch);
    });
  }

  async getMemory(id: string): Promise<Memory | null> {
    this.#open();
    checkId(id, 'memory id');
    return this.#read(async (s) => s.getMemory(id));
  }

  async updateMemory(id: string, patch: MemoryPatch): Promise<Memory> {
    this.#open();
    checkId(id, 'memory id');
    const p = checkMemoryPatch(patch);
    // The newest version of a closed version's fact: the one to update instead, if open.
    const newest = async (s: DriverSession, m: Memory | null) =>
      m && m.supersededAt !== null
        ? ((await s.listMemories({ lineageIds: [m.lineageId] }, 1, 'newest'))[0] ?? null)
        : null;
    return this.#write(async (s) => {
      const current = await s.getMemory(id);
      planMemoryUpdate(id, current, await newest(s, current));
      if (p.embedding) await this.#fitVector(s, p.embedding, 'embedding');
      const next: Memory = { ...current };
      if (p.content !== undefined) next.content = p.content;
      if (p.contentHash !== undefined) next.contentHash = p.contentHash;
      if (p.metadata !== undefined) next.metadata = p.metadata;
      if (p.embedding !== undefined) next.embedding = p.embedding;
      const stored = await s.replaceMemory(next);
      // A concurrent session may have closed it since the read: decide again on what is
      // stored (throwing rolls the edit back).
      planMemoryUpdate(id, stored, await newest(s, stored));
      return stored;
    });
  }

  async supersedeMemory(id: string, next: MemoryVersion): Promise<Memory> {
    this.#open();
    checkId(id, 'memory id');
    const now = this.#d.now();
    const version = checkMemoryVersion(next, now);
    return this.#write(async (s) => {
      const plan = planSupersede(id, await s.getMemory(id), version, now);
      if ((await s.takenMemoryIds([plan.memory.id])).length > 0)
        throw conflict(`memory id ${show(plan.memory.id)} is already used`, {
          id: plan.memory.id,
        });
      if (plan.memory.embedding) await this.#fitVector(s, plan.memory.embedding, 'embedding');
      // A concurrent session may have superseded it since the read: decide again on what is stored.
      if (!(await s.closeMemory(id, plan.closed.validTo!, plan.closed.supersededAt!))) {
        planSupersede(id, await s.getMemory(id), version, now);
        throw conflict(`memory ${show(id)} was superseded meanwhile`, { id });
      }
      const [stored] = await s.insertMemories([plan.memory]);
      return stored!;
    });
  }

  async closeMemory(id: string, options: CloseMemoryOptions = {}): Promise<Memory> {
    this.#open();
    checkId(id, 'memory id');
    const now = this.#d.now();
    const close = checkCloseMemoryOptions(options, now);
    return this.#write(async (s) => {
      planClose(id, await s.getMemory(id), close, now);
      // A concurrent session may have closed it since the read: decide again on what is stored.
      if (!(await s.closeMemory(id, close.validTo, now))) {
        planClose(id, await s.getMemory(id), close, now);
        throw conflict(`memory ${show(id)} was superseded meanwhile`, { id });
      }
      // Read again under the lock the close took: a write that committed between the first
      // read and the close shows here, and throwing rolls the close back.
      const closed = await s.getMemory(id);
      planClose(id, closed && { ...closed, validTo: null, supersededAt: null }, close, now);
      return close.metadata === null
        ? closed!
        : s.replaceMemory({ ...closed!, metadata: close.metadata });
    });
  }

  async deleteMemories(ids: string[]): Promise<number> {
    this.#open();
    checkIdList(ids, 'ids');
    if (ids.length === 0) return 0;
    return this.#write(async (s) => s.deleteMemories(ids));
  }

  async listMemories(filter?: MemoryFilter, options: ListMemoriesOptions = {}): Promise<Memory[]> {
    this.#open();
    const f = checkMemoryFilter(filter, 'listMemories');
    const { limit, order } = checkListMemoriesOptions(options);
    return this.#read(async (s) => s.listMemories(await driverFilter(s, f), limit, order));
  }

  async countMemories(filter?: MemoryFilter): Promise<number> {
    this.#open();
    const f = checkMemoryFilter(filter, 'countMemories');
    return this.#read(async (s) => s.countMemories(await driverFilter(s, f)));
  }

  async searchMemories(search: MemorySearch): Promise<MemoryHit[]> {
    this.#open();
    const q = checkMemorySearch(search);
    const sealer = this.#d.sealer;
    return this.#read(async (s) => {
      const filter = await driverFilter(s, q.filter);
      // A store with encryption keeps no index: it scores the memories the filter selects.
      const scan = sealer && (() => sealedScan(s, filter, sealer.searchScanLimit));
      if (q.vector) {
        const vector = q.vector;
        const space = await s.getEmbeddingSpace();
        if (!space) return [];
        checkVectorWidth(space, vector, 'vector');
        const candidates = scan
          ? (await scan()).filter((c) => c.memory.embedding !== null)
          : await s.vectorCandidates({
              vector,
              filter,
              count: q.limit + RESCORE_MARGIN,
              ...(q.threshold === undefined
                ? {}
                : { minSimilarity: q.threshold - THRESHOLD_SLACK }),
            });
        // The driver's distances may be float32 or approximate: the answer is ranked on
        // float64 cosine over the stored values, as the reference computes it.
        return candidates
          .map((c) => ({ c, score: cosineSimilarity(vector, c.memory.embedding!) }))
          .filter((h) => q.threshold === undefined || h.score >= q.threshold)
          .sort((a, b) => b.score - a.score || a.c.seq - b.c.seq)
          .slice(0, q.limit)
          .map((h) => ({ memory: h.c.memory, score: h.score }));
      }
      const terms = searchTerms(q.text!);
      if (terms.length === 0) return [];
      const candidates = scan
        ? keywordRank(await scan(), terms)
        : await s.keywordCandidates({ terms, filter, count: q.limit });
      // Scores relative to the best hit, in (0, 1]: comparable across stores.
      const best = candidates.reduce((m, c) => Math.max(m, c.relevance), 0);
      return candidates
        .slice(0, q.limit)
        .map((c) => ({ memory: c.memory, score: best > 0 ? c.relevance / best : 1 }));
    });
  }

  async ensureEmbeddingSpace(space: {
    embedderId: string;
    dimensions: number;
  }): Promise<EmbeddingSpace> {
    this.#open();
    return this.#write(async (s) => {
      const { space: next, changed } = resolveEmbeddingSpace(await s.getEmbeddingSpace(), space);
      if (changed) await s.setEmbeddingSpace(next);
      return next;
    });
  }

  async getEmbeddingSpace(): Promise<EmbeddingSpace | null> {
    this.#open();
    return this.#read(async (s) => s.getEmbeddingSpace());
  }

  async getCachedEmbeddings(
    embedderId: string,
    contentHashes: string[],
  ): Promise<Map<string, number[]>> {
    this.#open();
    checkId(embedderId, 'embedderId');
    checkContentHashes(contentHashes);
    // A store with encryption caches no embeddings (see `putCachedEmbeddings`).
    if (contentHashes.length === 0 || this.#d.sealer) return new Map();
    return this.#read(async (s) => s.getCachedEmbeddings(embedderId, contentHashes));
  }

  async putCachedEmbeddings(
    embedderId: string,
    entries: Array<{ contentHash: string; embedding: number[] }>,
  ): Promise<void> {
    this.#open();
    checkId(embedderId, 'embedderId');
    checkCachedEmbeddings(entries);
    if (entries.length === 0) return;
    const sealer = this.#d.sealer;
    return this.#write(async (s) => {
      const space = await s.getEmbeddingSpace();
      for (const [i, e] of entries.entries())
        checkVectorWidth(space, e.embedding, `entries[${i}].embedding`);
      // A store with encryption caches no embeddings: the cache is keyed by content hash,
      // of no tenant, and an embedding tells its text. Checked, then nothing is written.
      if (sealer) return;
      // One entry per hash: the last one given wins.
      const last = new Map(entries.map((e) => [e.contentHash, e.embedding]));
      const unique = [...last].map(([contentHash, embedding]) => ({ contentHash, embedding }));
      await s.putCachedEmbeddings(embedderId, unique);
    });
  }

  // ---------------------------------------------------------------- whole records

  async exportThread(threadId: string): Promise<ThreadRecords | null> {
    this.#open();
    checkId(threadId, 'thread id');
    return this.#read(async (s) => {
      const thread = await s.getThread(threadId);
      if (!thread) return null;
      const messages = await s.listMessages(threadId);
      const branches = await s.listBranches(threadId);
      const checkpoints = await s.listCheckpoints(threadId);
      const stateCommits: StateCommit[] = [];
      for (const b of branches)
        stateCommits.push(...(await s.getStateCommits(b.id, 1, Number.MAX_SAFE_INTEGER)));
      const turns = (await s.listTurns(threadId, Number.MAX_SAFE_INTEGER)).reverse();
      return {
        thread,
        messages,
        branches: branches.map(({ seq: _seq, ...b }) => b),
        checkpoints,
        stateCommits,
        turns,
      };
    });
  }

  async restoreThread(records: ThreadRecords): Promise<void> {
    this.#open();
    const r = checkThreadRecords(records);
    const threadId = r.thread.id;
    await this.#write(async (s, touch) => {
      await refuseForgotten(s, threadKeys(r.thread, true));
      await insertNewThread(s, r.thread, touch);
      const planned = await planBatch(s, r.messages);
      await s.insertMessages(planned.messages, planned.jumps);
      for (const b of r.branches) await insertNewBranch(s, { ...b, isActive: false });
      if (r.activeBranchId !== null) await s.setActiveBranch(threadId, r.activeBranchId);
      for (const c of r.checkpoints) {
        // putCheckpoint keys on (thread, name): a taken id is found here, not by the driver.
        if (await s.getCheckpointById(c.id))
          throw conflict(`checkpoint id ${show(c.id)} already exists`, { id: c.id });
        await s.putCheckpoint(c);
      }
      for (const { draft, version } of r.stateCommits) {
        if (!(await appendCommit(s, draft, version - 1)))
          throw conflict(
            `state version ${version} of branch ${show(draft.branchId)} was not written`,
            {
              branchId: draft.branchId,
              version,
            },
          );
      }
      for (const t of r.turns) {
        if (await s.getTurn(t.id))
          throw conflict(`turn id ${show(t.id)} already exists`, { id: t.id });
        await s.putTurn(t);
      }
    });
  }

  // ---------------------------------------------------------------- entries

  async putEntries(entries: NewEntry[]): Promise<Entry[]> {
    this.#open();
    const drafts = checkEntryBatch(entries);
    if (drafts.length === 0) return [];
    return this.#write(async (s, touch) => {
      const written: Entry[] = [];
      for (const draft of drafts) {
        // A first write races on the insert; the loser locks the winner's row and decides again.
        for (;;) {
          const current = await (s.lockEntry ?? s.getEntry).call(s, draft.collection, draft.id);
          const entry = planEntryPut(current, draft, this.#d.now());
          if (!(await s.putEntry(entry, current === null))) continue;
          written.push(entry);
          const { collection, id, group, version } = entry;
          touch({ kind: 'entry', entry: { collection, id, group, version } });
          break;
        }
      }
      return written;
    });
  }

  async getEntry(collection: string, id: string): Promise<Entry | null> {
    this.#open();
    checkName(collection, 'collection');
    checkName(id, 'entry id');
    return this.#read(async (s) => s.getEntry(collection, id));
  }

  async listEntries(collection: string, options: ListEntriesOptions = {}): Promise<Entry[]> {
    this.#open();
    checkName(collection, 'collection');
    const { group, afterId, limit } = checkListEntriesOptions(options);
    return this.#read(async (s) => s.listEntries(collection, group, afterId, limit));
  }

  async deleteEntries(collection: string, selector: EntrySelector): Promise<number> {
    this.#open();
    checkName(collection, 'collection');
    const which = checkEntrySelector(selector);
    if (which.ids?.length === 0) return 0;
    return this.#write(async (s, touch) => {
      const deleted = await s.deleteEntries(collection, which as EntrySelector);
      for (const { id, group } of deleted)
        touch({ kind: 'entry', entry: { collection, id, group, version: null } });
      return deleted.length;
    });
  }

  subscribeEntries(collection: string, listener: EntryListener): () => void {
    this.#open();
    checkName(collection, 'collection');
    if (typeof listener !== 'function')
      throw invalidArgument('subscribeEntries expects a listener function');
    this.#d.listen();
    return this.#d.emitter.subscribeEntries(collection, listener);
  }

  async listLeases(options: PageOptions = {}): Promise<Page<Lease>> {
    this.#open();
    const { limit, after } = checkPageOptions(options, 'listLeases');
    return this.#read(async (s) =>
      keyPage(
        (await s.listLeases(after, limit + 1)).map((l) => shownLease(l)),
        limit,
        (l) => l.key,
      ),
    );
  }

  async restoreLeases(leases: Lease[]): Promise<void> {
    this.#open();
    const checked = checkLeases(leases);
    if (checked.length === 0) return;
    await this.#write(async (s) => {
      const now = this.#d.now();
      for (const l of checked) {
        const existing = await lockLease(s, l.key);
        // A restore never takes a lease from its live holder, nor extends it: only the
        // same record again (a re-run) passes, and then nothing is written.
        if (existing && existing.releasedAt === null && existing.expiresAt > now) {
          if (sameLease(existing, l)) continue;
          throw conflict(
            `lease ${show(l.key)} is held by ${show(existing.owner)} until ${new Date(existing.expiresAt).toISOString()}: a restore does not replace a live lease`,
            { key: l.key, owner: existing.owner, expiresAt: existing.expiresAt },
          );
        }
        // A restored lease has no waiters: they wait in the processes of the source.
        if (!(await s.putLease({ ...l, waiters: [] }, existing === null)))
          throw conflict(`lease ${show(l.key)} was taken while it was restored`, { key: l.key });
      }
    });
  }

  async scanMemories(options: PageOptions = {}): Promise<Page<Memory>> {
    this.#open();
    const { limit, after } = checkPageOptions(options, 'scanMemories');
    return this.#read(async (s) =>
      keyPage(await s.scanMemories(after, limit + 1), limit, (m) => m.id),
    );
  }

  // ---------------------------------------------------------------- forgetting

  async forget(subject: ForgetSubject): Promise<ForgetReceipt> {
    this.#open();
    if (this.#tx)
      throw invalidArgument(
        'forget runs transactions of its own, a page at a time: call it on the store, not inside transaction()',
      );
    const checked = checkForgetSubject(subject);
    const { resourceId, entityId, worldId } = checked;
    const at = this.#d.now();
    // The subject's tombstones first: from here on no write brings its data back.
    // Writes that looked for these tombstones before they were there commit first.
    // With them go the subject's data keys: what a copy of the database made from here on
    // holds of its data cannot be opened, even before it is deleted.
    const counts = noCounts();
    counts.dataKeys = await this.#shred(subjectTombstones(checked, at));
    if (resourceId !== undefined)
      for (let tries = 1; ; tries++) {
        let page: ForgetCounts;
        try {
          page = await this.#write(
            (s, touch) => this.#forgetThreads(s, touch, resourceId, at),
            false,
          );
        } catch (e) {
          // A writer finishing a turn took the same rows in another order (a deadlock the
          // database broke by rolling this page back): the page is done again.
          if (isCairnError(e, 'CONFLICT') && tries < FORGET_TRIES) continue;
          throw e;
        }
        tries = 0;
        if (page.threads === 0) break;
        addCounts(counts, page);
      }
    const filters: MemoryFilter[] = [];
    if (entityId !== undefined) filters.push({ entityId });
    if (worldId !== undefined) filters.push({ worldId });
    for (const filter of filters) {
      for (;;) {
        const page = await this.#write((s) => forgetMemories(s, filter), false);
        if (page.memories === 0) break;
        addCounts(counts, page);
      }
    }
    const d = this.#d;
    if (d.driver.scrub)
      await d.gate.shared(async () => {
        try {
          await d.driver.scrub!({ memories: filters.length > 0 });
        } catch (e) {
          throw d.translate(e);
        }
      });
    await this.#forgotten(checked, at);
    return { subject: checked, counts, at };
  }

  /**
   * Tells `subscribeForgets` listeners that the subject's data is gone: this store's and
   * those sharing its database in this process before it returns, and other processes'
   * where the driver publishes (a session of its own, so the notice leaves on commit).
   */
  async #forgotten(subject: ForgetSubject, at: number): Promise<void> {
    await this.#write(
      async (_s, touch) => touch({ kind: 'forget', notice: { subject, at } }),
      false,
    );
  }

  /** The subject's tombstones, written with its data keys destroyed; returns how many keys. */
  async #shred(subjects: Tombstone[]): Promise<number> {
    // Each subject (a resource, an entity, a world) is a tenant of that kind and key.
    const tenants = subjects.map(({ kind, key }) => ({ kind: kind as TenantKind, key }));
    const destroyed = await this.#write(async (s) => {
      if (s.lockSubjects) await s.lockSubjects(subjects, true);
      await s.putTombstones(subjects);
      return s.deleteDataKeys(tenants);
    }, false);
    // Nor does this process keep their keys or values it opened.
    this.#d.sealer?.drop(tenants);
    return destroyed;
  }

  #sealer(call: string): Sealer {
    if (!this.#d.sealer)
      throw invalidArgument(
        `${call} is for a store with encryption: create it with encryption: { keyring }`,
      );
    return this.#d.sealer;
  }

  async destroyDataKeys(subject: ForgetSubject): Promise<number> {
    this.#open();
    this.#sealer('destroyDataKeys');
    if (this.#tx)
      throw invalidArgument('destroyDataKeys: call it on the store, not inside transaction()');
    const checked = checkForgetSubject(subject);
    const at = this.#d.now();
    const destroyed = await this.#shred(subjectTombstones(checked, at));
    await this.#forgotten(checked, at);
    return destroyed;
  }

  async rotateDataKeys(): Promise<{ rewrapped: number }> {
    this.#open();
    const sealer = this.#sealer('rotateDataKeys');
    if (this.#tx)
      throw invalidArgument('rotateDataKeys runs transactions of its own: call it on the store');
    let rewrapped = 0;
    let after: Tenant | null = null;
    for (;;) {
      // A page of keys per transaction, each replaced by compare-and-set: a key destroyed
      // or wrapped again meanwhile keeps what happened to it.
      const from: Tenant | null = after;
      const page: DataKeyRow[] = await this.#write(async (s) => {
        const rows = await s.listDataKeys(from, ROTATE_PAGE);
        for (const row of rows) {
          if (row.keyId === sealer.keyring.keyId) continue;
          if (await s.replaceDataKey(await sealer.rewrap(row), row.wrapped)) rewrapped++;
        }
        return rows;
      }, false);
      const last = page.at(-1);
      if (!last || page.length < ROTATE_PAGE) return { rewrapped };
      after = { kind: last.kind, key: last.key };
    }
  }

  /**
   * Deletes a page of the resource's threads, each with everything under it, and records
   * a tombstone for each thread and branch. Returns what it deleted.
   */
  async #forgetThreads(
    s: DriverSession,
    touch: Touch,
    resourceId: string,
    at: number,
  ): Promise<ForgetCounts> {
    const page = noCounts();
    const rows = await s.listThreads({ resourceId, limit: FORGET_THREAD_PAGE });
    // A create of one of these ids that looked for a tombstone already ends first.
    if (s.lockSubjects && rows.length > 0)
      await s.lockSubjects(
        rows.map((r) => ({ kind: 'thread', key: r.thread.id })),
        true,
      );
    const tombstones: Tombstone[] = [];
    for (const { thread } of rows) {
      const id = thread.id;
      // The thread's writers are locked out first, in the order writers take the locks
      // (as `deleteThread`'s `idleSince` does), so the counts are what the delete removes.
      if (s.lockLease) await s.lockLease(runLeaseKey(id));
      const branches = await s.listBranches(id);
      if (s.lockBranch) for (const b of branches) await s.lockBranch(b.id, DEFAULT_LOCK_TIMEOUT_MS);
      if (s.lockThread) await s.lockThread(id);
      tombstones.push({ kind: 'thread', key: id, at });
      // Listed again under the thread's lock: a branch created meanwhile is named too.
      for (const b of await s.listBranches(id)) tombstones.push({ kind: 'branch', key: b.id, at });
      const under = await s.countThreadRows(id);
      if (!(await s.deleteThread(id))) continue;
      addCounts(page, { threads: 1, ...under });
      // What was learned on the thread and is seen only from its branches goes with it.
      for (;;) {
        const memories = await forgetMemories(s, { branchThreadId: id });
        if (memories.memories === 0) break;
        addCounts(page, memories);
      }
      touch({ threadId: id, kind: 'thread' });
    }
    page.leases += await s.deleteLeases(rows.map((r) => runLeaseKey(r.thread.id)));
    await s.putTombstones(tombstones);
    return page;
  }

  // ---------------------------------------------------------------- retention

  async sweep(policy: RetentionPolicy, options: SweepOptions = {}): Promise<SweepReport> {
    this.#open();
    if (this.#tx)
      throw invalidArgument(
        'sweep runs transactions of its own, a thread at a time: call it on the store, not inside transaction()',
      );
    const rules = checkRetentionPolicy(policy);
    const o = checkSweepOptions(options);
    const report: SweepReport = {
      ran: false,
      scanned: 0,
      busy: 0,
      invalid: 0,
      freed: { threads: 0, branches: 0, stateCommits: 0, turns: 0, messages: 0, checkpoints: 0 },
    };
    const lease = { key: SWEEP_LEASE_KEY, owner: o.owner, ttlMs: o.leaseTtlMs };
    // A dry run writes nothing: it needs no lease, and takes none from a sweeper.
    if (!o.dryRun)
      try {
        await this.acquireLease(lease);
      } catch (e) {
        if (isCairnError(e) && e.code === 'CONFLICT') return report;
        throw e;
      }
    report.ran = true;
    try {
      const pages = o.threadIds ? chunks(o.threadIds, o.batch) : this.#threadPages(o.batch);
      // Renewed by time, not by page: a page of resting threads may take longer than the TTL.
      let renewedAt = performance.now();
      const renew = async () => {
        renewedAt = performance.now();
        if (o.dryRun) return true;
        return this.renewLease(lease.key, lease.owner, lease.ttlMs).then(
          () => true,
          (e: unknown) => {
            if (isCairnError(e, 'CONFLICT') || isCairnError(e, 'NOT_FOUND')) return false;
            throw e;
          },
        );
      };
      sweeping: for await (const ids of pages) {
        for (const part of chunks(ids, SWEEP_CHUNK)) {
          await this.#waitForQueuedSessions(o.leaseTtlMs / 4);
          const started = performance.now();
          const done = await this.#sweepPart(part, rules, o.dryRun);
          addPart(report, done);
          // Off the hot path: writers that queued meanwhile go before the next threads, and
          // the sweep rests in proportion to what they cost (its duty cycle).
          // At most a third of the lease's TTL, so that the lease is renewed in time.
          const rest = Math.min(
            sweepRestMs(performance.now() - started, o.dutyCycle),
            o.leaseTtlMs / 3,
          );
          if (rest > 0) await new Promise((r) => setTimeout(r, rest));
          else await yieldToOthers();
          // A sweep that lost its lease (it expired and another sweeper took it) stops here.
          if (performance.now() - renewedAt >= o.leaseTtlMs / 3 && !(await renew())) break sweeping;
        }
        if (!(await renew())) break;
      }
    } finally {
      if (!o.dryRun) await this.releaseLease(lease.key, lease.owner).catch(() => undefined);
    }
    return report;
  }

  /**
   * Runs `fn` in a write session of its own, as `#write` does, and rolls the session back:
   * what `fn` decides and counts, with nothing kept and nobody notified.
   */
  async #rolledBack<T>(fn: (s: DriverSession, touch: Touch) => Promise<T>): Promise<T> {
    const d = this.#d;
    const undo = new Error('rolled back');
    let result!: T;
    await d.gate.shared(async () => {
      try {
        await d.driver.run(
          async (s) => {
            result = await fn(d.seal(s), () => {});
            throw undo;
          },
          { write: true },
        );
      } catch (e) {
        if (e !== undo) throw d.translate(e);
      }
    });
    return result;
  }

  /**
   * Waits (up to `maxMs`) while sessions of this store queue for a connection, as the
   * driver counts them (a full pool): the sweep's next session would take one they wait for.
   */
  async #waitForQueuedSessions(maxMs: number): Promise<void> {
    const queued = this.#d.driver.queuedSessions;
    if (!queued) return;
    const until = performance.now() + maxMs;
    while (queued.call(this.#d.driver) > 0 && performance.now() < until)
      await new Promise((r) => setTimeout(r, QUEUED_RECHECK_MS));
  }

  /** Every thread's id, a page at a time (oldest pages may shift as threads are deleted: seq paging). */
  async *#threadPages(batch: number): AsyncGenerator<string[]> {
    let beforeSeq: number | undefined;
    for (;;) {
      const rows = await this.#read(async (s) =>
        s.listThreads(beforeSeq === undefined ? { limit: batch } : { beforeSeq, limit: batch }),
      );
      if (rows.length === 0) return;
      yield rows.map((r) => r.thread.id);
      beforeSeq = rows.at(-1)!.seq;
      if (rows.length < batch) return;
    }
  }

  /**
   * A few threads of `sweep` (a part of a page), in one write session; when a lock of one
   * of them is held longer than the store waits (TIMEOUT), each thread again in a session of
   * its own, and a thread still locked is busy.
   */
  async #sweepPart(ids: string[], rules: ResolvedPolicy, dryRun: boolean): Promise<PartReport> {
    try {
      const sweep = (s: DriverSession, touch: Touch) => this.#sweepThreads(s, touch, ids, rules);
      return await (dryRun ? this.#rolledBack(sweep) : this.#write(sweep));
    } catch (e) {
      // A branch locked longer than the store waits is in use: the thread is busy.
      if (!isCairnError(e, 'TIMEOUT')) throw e;
      if (ids.length === 1) return { scanned: 1, busy: 1, invalid: 0, freed: {} };
    }
    const all: PartReport = { scanned: 0, busy: 0, invalid: 0, freed: {} };
    for (const id of ids) {
      addPart(all, await this.#sweepPart([id], rules, dryRun));
    }
    return all;
  }

  /**
   * Threads of `sweep`, in one write session, set-based: their rows read at once
   * (`sweepFacts`, which first locks their run leases and branches, the order writers take
   * them in, so that no run starts, no head moves and no state is committed between what
   * the rules decide and the session's commit), the rules decided here, and the deletes
   * made at once (`sweepDelete`). Deleting an idle thread also locks the thread, as
   * `deleteThread`'s `idleSince` does.
   */
  async #sweepThreads(
    s: DriverSession,
    touch: Touch,
    ids: string[],
    rules: ResolvedPolicy,
  ): Promise<PartReport> {
    const now = this.#d.now();
    const freed: Partial<SweepReport['freed']> = {};
    const add = (k: keyof SweepReport['freed'], n: number) => {
      if (n > 0) freed[k] = (freed[k] ?? 0) + n;
    };
    const result: PartReport = { scanned: 0, busy: 0, invalid: 0, freed };
    const facts = await sweepFactsOf(s, ids);
    const messages = new Map(facts.messages.map((m) => [m.id, m]));
    const leases = new Map(facts.leases.map((l) => [l.key, l]));
    const running = new Set(facts.running);
    const branchesOf = groupBy(facts.branches, (b) => b.threadId);
    const checkpointsOf = groupBy(facts.checkpoints, (c) => c.threadId);
    const deletes: SweepDeletes = { turns: [], branches: [], stateCuts: [] };
    /** The threads whose branches the rules look at, with what they keep. */
    const plans: Array<{
      id: string;
      policy: ResolvedPolicy;
      branches: Branch[];
      marks: Message[];
    }> = [];
    for (const thread of facts.threads) {
      const id = thread.id;
      result.scanned++;
      const policy = threadPolicy(rules, thread.metadata);
      if (policy === 'invalid') result.invalid++;
      if (policy === null || policy === 'invalid') continue;
      if (
        policy.threadTtlMs !== null &&
        (await this.#idleSince(s, id, now - policy.threadTtlMs, true))
      ) {
        const under = await s.countThreadRows(id);
        if (await s.deleteThread(id)) {
          add('threads', 1);
          for (const [k, n] of Object.entries(under)) add(k as keyof SweepReport['freed'], n);
          touch({ threadId: id, kind: 'thread' });
        }
        continue;
      }
      if (policy.turnTtlMs !== null)
        deletes.turns.push({ threadId: id, before: now - policy.turnTtlMs });
      const lease = leases.get(runLeaseKey(id));
      if (running.has(id) || (lease && lease.releasedAt === null && lease.expiresAt > now)) {
        result.busy++;
        continue;
      }
      if (policy.branchTtlMs === null && policy.keepStateCommits === null) continue;
      // The named checkpoints' messages, to find their branches.
      const marks = (checkpointsOf.get(id) ?? []).flatMap((c) => messages.get(c.messageId) ?? []);
      plans.push({ id, policy, branches: branchesOf.get(id) ?? [], marks });
    }

    const onChain = async (b: Branch, m: Message) => {
      if (b.headMessageId === null) return false;
      if (b.headMessageId === m.id) return true;
      const head = messages.get(b.headMessageId);
      if (!head || head.depth <= m.depth) return false;
      const [at] = await s.getChain(head.id, m.depth, m.depth);
      return at?.id === m.id;
    };
    const holdsAny = async (b: Branch, ms: Message[]) => {
      for (const m of ms) if (await onChain(b, m)) return true;
      return false;
    };
    const latest = new Map<string, StateCommit | null>();
    const all = plans.flatMap((p) => p.branches);
    const found = await latestCommitsOf(
      s,
      all.map((b) => ({ branchId: b.id })),
    );
    for (const [i, b] of all.entries()) latest.set(b.id, found[i]!);

    const dropped: Branch[] = [];
    for (const p of plans) {
      if (p.policy.branchTtlMs === null) continue;
      const since = now - p.policy.branchTtlMs;
      // Dropping a branch may leave its parent with no child: look again until none goes.
      for (let again = true; again; ) {
        again = false;
        for (const b of p.branches) {
          if (b.isActive || b.createdAt >= since) continue;
          if (p.branches.some((c) => c.parentBranchId === b.id)) continue;
          const head = b.headMessageId === null ? null : messages.get(b.headMessageId);
          if (head && head.createdAt >= since) continue;
          const commit = latest.get(b.id);
          if (commit && commit.createdAt >= since) continue;
          if (await holdsAny(b, p.marks)) continue;
          dropped.push(b);
          p.branches = p.branches.filter((x) => x.id !== b.id);
          again = true;
        }
      }
    }
    deletes.branches = dropped.map((b) => b.id);

    // The commits the reads a thread can still make resolve to: on each kept branch, the
    // state at its head and at each named checkpoint on its chain, read through its
    // lineage (a branch with no commit at or before that depth reads its parent's as of
    // its fork, and so on, as `@cairn/thread` reads state). Asked for all at once, a step
    // of the lineage at a time; where a branch's latest commit is at or before the depth,
    // it is the answer without asking.
    const needed = new Map<string, number[]>();
    const need = (branchId: string, version: number) =>
      needed.set(branchId, [...(needed.get(branchId) ?? []), version]);
    type Step = { byId: Map<string, Branch>; x: Branch; at: number };
    let steps: Step[] = [];
    const keeping = plans.filter((p) => p.policy.keepStateCommits !== null);
    for (const p of keeping) {
      const byId = new Map(p.branches.map((b) => [b.id, b]));
      for (const b of p.branches) {
        const head = b.headMessageId === null ? null : messages.get(b.headMessageId);
        if (head) steps.push({ byId, x: b, at: head.depth });
        for (const m of p.marks) if (await onChain(b, m)) steps.push({ byId, x: b, at: m.depth });
      }
    }
    while (steps.length > 0) {
      const asked = steps.filter((st) => {
        const c = latest.get(st.x.id);
        if (!c || (c.messageDepth ?? -1) > st.at) return true;
        need(st.x.id, c.version);
        return false;
      });
      const answers = await latestCommitsOf(
        s,
        asked.map((st) => ({ branchId: st.x.id, maxMessageDepth: st.at })),
      );
      steps = [];
      for (const [i, st] of asked.entries()) {
        const c = answers[i];
        if (c) {
          need(st.x.id, c.version);
          continue;
        }
        const fork = st.x.forkMessageId === null ? null : messages.get(st.x.forkMessageId);
        const parent = st.byId.get(st.x.parentBranchId ?? '');
        if (fork && parent)
          steps.push({ byId: st.byId, x: parent, at: Math.min(st.at, fork.depth) });
      }
    }

    // On each kept branch, the commits below the oldest one kept (`stateCutFloor`) go, back
    // to the snapshot its state is rebuilt from.
    const floors: Array<{ branchId: string; floor: number }> = [];
    for (const p of keeping)
      for (const b of p.branches) {
        const floor = stateCutFloor(
          latest.get(b.id)?.version ?? 0,
          p.policy.keepStateCommits!,
          needed.get(b.id) ?? [],
        );
        if (floor !== null) floors.push({ branchId: b.id, floor });
      }
    const snapshots = await latestCommitsOf(
      s,
      floors.map((f) => ({ branchId: f.branchId, withSnapshot: true, maxVersion: f.floor })),
    );
    floors.forEach((f, i) => {
      // A state with no snapshot at or before it replays from the branch's first commit.
      const cut = snapshots[i]?.version ?? 1;
      if (cut > 1) deletes.stateCuts.push({ branchId: f.branchId, beforeVersion: cut });
    });

    const done = await sweepDeleteOf(s, deletes);
    add('turns', done.turns);
    add('branches', done.branches.length);
    add('stateCommits', done.stateCommits);
    const gone = new Set(done.branches);
    for (const b of dropped)
      if (gone.has(b.id))
        touch({
          threadId: b.threadId,
          kind: 'branch',
          branchId: b.id,
          headMessageId: b.headMessageId,
        });
    return result;
  }

  // ---------------------------------------------------------------- lifecycle

  async transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T> {
    this.#open();
    if (typeof fn !== 'function')
      throw invalidArgument(`transaction expects a function, got ${typeof fn}`);
    // Nested: join the transaction already open.
    if (this.#tx) return fn(this);
    const d = this.#d;
    // Side by side where each session has a connection of its own; else alone, so that
    // no other call runs (and reads) on the connection while the transaction is open.
    const turn = d.driver.capabilities.concurrentTransactions ? 'shared' : 'exclusive';
    return d.gate[turn](async () => {
      // The store may have been closed while this waited its turn.
      if (d.closed) throw new CairnError('CLOSED', 'this store is closed');
      let failure: { error: unknown } | null = null;
      let tx: TxState | null = null;
      let result: T;
      try {
        result = await d.driver.run(
          async (session) => {
            tx = { session: d.seal(session), pending: [], ended: false };
            try {
              const r = await fn(new FrontDoor(d, tx));
              tx.ended = true;
              if (tx.pending.length > 0 && session.publish)
                await session.publish(d.encode(tx.pending));
              return r;
            } catch (e) {
              tx.ended = true;
              failure = { error: e };
              throw e;
            }
          },
          { write: true },
        );
      } catch (e) {
        // The caller's own error passes through unchanged; the driver's is translated.
        if (failure && (failure as { error: unknown }).error === e) throw e;
        throw d.translate(e);
      } finally {
        if (tx) (tx as TxState).ended = true;
      }
      d.emit((tx as TxState | null)?.pending ?? []);
      return result;
    });
  }

  subscribe(threadId: string, listener: StoreListener): () => void {
    this.#open();
    checkId(threadId, 'threadId');
    if (typeof listener !== 'function')
      throw invalidArgument('subscribe expects a listener function');
    this.#d.listen();
    return this.#d.emitter.subscribe(threadId, listener);
  }

  subscribeForgets(listener: ForgetListener): () => void {
    this.#open();
    if (typeof listener !== 'function')
      throw invalidArgument('subscribeForgets expects a listener function');
    this.#d.listen();
    return this.#d.emitter.subscribeForgets(listener);
  }

  async migrate(): Promise<void> {
    this.#open();
    // Inside a transaction the schema is already current: it was migrated on open.
    if (this.#tx) return;
    const d = this.#d;
    await d.gate.shared(async () => {
      try {
        await d.driver.migrate();
      } catch (e) {
        throw d.translate(e);
      }
    });
  }

  async close(): Promise<void> {
    if (this.#tx) {
      this.#open();
      throw invalidArgument('close the store, not a transaction');
    }
    const d = this.#d;
    if (d.closed) return;
    d.closed = true;
    // Let a running transaction and the calls queued before close() finish first.
    await d.gate.exclusive(async () => {});
    d.stopListening();
    try {
      await d.driver.close();
    } catch (e) {
      throw d.translate(e);
    }
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/**
 * Makes a `Store` of a driver: the one implementation of the contract's behaviour
 * (checks, guards, errors, transactions, notifications, shared query logic). Adapters
 * call it from their own factory; users call the adapter's factory.
 *
 * @example
 * ```ts
 * import { createStore } from '@cairn/store/adapter';
 * const store = createStore(new MyDriver(db), { now: () => clock.now() });
 * ```
 */
export function createStore(driver: Driver, options: CreateStoreOptions = {}): Store {
  if (typeof driver !== 'object' || driver === null || typeof driver.run !== 'function')
    throw invalidArgument('createStore expects a driver');
  checkObjectArgument(
    options,
    'store options',
    keysOf<CreateStoreOptions>()(['now', 'encryption']),
  );
  if (options.now !== undefined && typeof options.now !== 'function')
    throw invalidArgument(
      `now must be a function returning milliseconds, got ${typeof options.now}`,
    );
  const encryption =
    options.encryption === undefined ? null : checkEncryptionOptions(options.encryption);
  const sealer =
    encryption &&
    new Sealer(encryption.keyring, encryption.plaintextCacheBytes, encryption.searchScanLimit);
  return new FrontDoor(new Door(driver, options.now ?? Date.now, sealer), null);
}
