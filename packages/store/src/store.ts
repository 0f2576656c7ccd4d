import type {
  Branch,
  Checkpoint,
  Entry,
  JsonObject,
  JsonValue,
  Lease,
  Memory,
  MemoryContent,
  MemoryScope,
  MemorySource,
  MemoryType,
  Message,
  StateCommit,
  Thread,
  Timestamp,
  Turn,
  Viewer,
} from '@cairn/core';

/**
 * What a store can do. The conformance suite and the engine branch on these, never
 * on a store's name.
 */
export interface StoreCapabilities {
  /**
   * `exact`: brute-force cosine, results equal a reference scan. `approximate`: an index
   * chooses the candidates (an ANN index, or compact codes of the vectors), so a hit may be
   * missed; every hit returned meets the filter and carries its exact score. A store that
   * can be approximate takes `vectorSearch: 'exact'` when it is opened, for exact answers.
   */
  vectorSearch: 'exact' | 'approximate';
  /** `process`: `subscribe` hears changes made through this store instance's process.
   * `cluster`: it also hears changes made by other processes and machines. */
  notifications: 'process' | 'cluster';
  /** Several processes may open the same database at once without losing writes. */
  multiProcess: boolean;
  /** The data outlives the process (false for the in-memory store). */
  durable: boolean;
  /**
   * Transactions run side by side, each on a connection of its own, and never hold up
   * other calls, which see only what has committed (a Postgres store on a pool). False:
   * one transaction at a time, and other calls on the store wait until it ends.
   */
  concurrentTransactions: boolean;
}

// ---------------------------------------------------------------- inputs

export interface NewThread {
  /** Generated (UUIDv7) when omitted. */
  id?: string;
  resourceId?: string | null;
  title?: string | null;
  metadata?: JsonObject;
}

export interface ThreadWithBranch {
  thread: Thread;
  branch: Branch;
}

export interface ThreadPatch {
  title?: string | null;
  metadata?: JsonObject;
}

export interface ListThreadsOptions {
  resourceId?: string;
  /** At most this many (default 50, at most 1000). */
  limit?: number;
  /** The `nextCursor` of the previous page. */
  cursor?: string | null;
}

export interface Page<T> {
  items: T[];
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

export interface NewMessage {
  /** Generated when omitted. Must not be used by any stored message, in any thread. */
  id?: string;
  threadId: string;
  /** null for a root. The parent must be stored already or come earlier in the batch. */
  parentId: string | null;
  role: string;
  type?: string | null;
  data: JsonValue;
  createdAt?: Timestamp;
}

export interface ChainOptions {
  /** Return at most this many messages: the ones nearest the head. */
  limit?: number;
  /** Only messages with `depth < beforeDepth` (the next page toward the root). */
  beforeDepth?: number;
}

export interface NewBranch {
  id?: string;
  threadId: string;
  name: string;
  headMessageId: string | null;
  parentBranchId?: string | null;
  /** Make it the thread's active branch. A thread's first branch is always active. */
  activate?: boolean;
}

export interface LockOptions {
  /** How long to wait for another holder before `TIMEOUT`, in ms. Default 10 000. */
  timeoutMs?: number;
}

export interface NewCheckpoint {
  threadId: string;
  name: string;
  messageId: string;
}

export interface NewStateCommit {
  branchId: string;
  /** The branch head the state was computed against. */
  messageId: string | null;
  update: JsonObject;
  /** The whole state after the update, when the writer chooses to store one. */
  snapshot?: JsonObject | null;
}

export interface StateCommitRange {
  /** Inclusive; default 1. */
  fromVersion?: number;
  /** Inclusive; default the latest. */
  toVersion?: number;
}

export interface LatestCommitQuery {
  /** Only commits with a snapshot. */
  withSnapshot?: boolean;
  /** Only commits with `version <= maxVersion`. */
  maxVersion?: number;
  /** Only commits whose `messageDepth <= maxMessageDepth` (a null depth counts as -1). */
  maxMessageDepth?: number;
}

export interface AcquireLeaseInput {
  key: string;
  owner: string;
  ttlMs: number;
  data?: JsonObject;
  /**
   * While another owner's lease is live, wait up to this many milliseconds for it to be
   * released or to expire instead of failing with `CONFLICT` at once; `TIMEOUT` when it
   * is still held then. A release wakes the waiter at once where the store hears it
   * (`notifications`: in the process, or across processes on `cluster`). Waiters of one
   * store instance take the lease in the order they asked. Default 0; not inside a
   * transaction.
   */
  waitMs?: number;
}

export interface AcquiredLease {
  lease: Lease;
  /** The expired lease of another owner that this acquisition took over, if any. */
  tookOver: Lease | null;
  /** The lease as it was before (released, expired, or the owner's own), or null if new. */
  previous: Lease | null;
}

export interface NewMemory {
  id?: string;
  type?: MemoryType;
  agentId: string;
  entityId?: string | null;
  roomId?: string | null;
  worldId?: string | null;
  scope?: MemoryScope;
  content: MemoryContent;
  metadata?: JsonObject;
  /** Computed from `content.text` (SHA-256, hex) when omitted. */
  contentHash?: string;
  embedding?: number[] | null;
  createdAt?: Timestamp;
  /** When the fact starts to hold (event time, ms); null (the default): since always. */
  validFrom?: Timestamp | null;
  /** When it stops holding (exclusive); null (the default): open. Not before `validFrom`. */
  validTo?: Timestamp | null;
  /**
   * The rest describe a version's place in its history, as `supersedeMemory` writes them
   * and `scanMemories` reads them, so that a copy keeps them. `supersededAt`: when a newer
   * version replaced it (default null: current); `supersedes`: the version it replaced;
   * `lineageId`: the first version's id (default: its own id).
   */
  supersededAt?: Timestamp | null;
  supersedes?: string | null;
  lineageId?: string;
  /** The messages it was learned from. */
  source?: MemorySource | null;
}

/**
 * The new version `supersedeMemory` records. Where it belongs and who may see it (type,
 * agent, entity, room, world, scope) are the old version's.
 */
export interface MemoryVersion {
  id?: string;
  content: MemoryContent;
  /** Computed from `content.text` when omitted. */
  contentHash?: string;
  /** Default: the old version's metadata. */
  metadata?: JsonObject;
  embedding?: number[] | null;
  /** When the new value starts to hold; default: now. The old version holds until then. */
  validFrom?: Timestamp;
  /** Default null: open. */
  validTo?: Timestamp | null;
  /** Default: the old version's source. */
  source?: MemorySource | null;
}

/**
 * `Store.closeMemory`'s options: when the version stops holding, what it must still be,
 * and a note to leave on it.
 */
export interface CloseMemoryOptions {
  /** When it stops holding (event time, exclusive); default now. Not before its `validFrom`. */
  validTo?: Timestamp;
  /**
   * The version as the caller read it: `CONFLICT`, closing nothing, when its text
   * (`contentHash`) or its metadata changed since (a write the caller did not see).
   */
  expected?: { contentHash: string; metadata: JsonObject };
  /** Replaces its metadata as it closes (e.g. to say what replaced it); default: kept. */
  metadata?: JsonObject;
}

export interface MemoryPatch {
  content?: MemoryContent;
  contentHash?: string;
  metadata?: JsonObject;
  embedding?: number[] | null;
}

/** Every given condition must hold. `viewer` applies the scope rule (`canSee`). */
export interface MemoryFilter {
  viewer?: Viewer;
  agentId?: string;
  types?: MemoryType[];
  scopes?: MemoryScope[];
  entityId?: string;
  roomId?: string;
  worldId?: string;
  contentHashes?: string[];
  ids?: string[];
  createdAfter?: Timestamp;
  createdBefore?: Timestamp;
  /**
   * Paths kept in metadata, matched by whole labels from the start: each key names a
   * metadata field that must hold an array of strings beginning with the given labels.
   * `{ namespace: ['users', 'u1'] }` admits `metadata.namespace` `['users', 'u1']` and
   * `['users', 'u1', 'notes']`, never `['users', 'u10']` or `['u1']`; `[]` admits any array.
   * Applied inside every listing and search, so a search's `limit` counts only memories
   * under the path. Keys: 1-200 of `A-Z a-z 0-9 _ -`; at most 100 labels per path.
   *
   * @example
   * ```ts
   * await store.searchMemories({ text: 'apple', filter: { metadataPrefix: { namespace: ['users', 'u1'] } } });
   * ```
   */
  metadataPrefix?: Record<string, string[]>;
  /** Only the versions of these facts (by `lineageId`): a fact's history. */
  lineageIds?: string[];
  /**
   * Only what holds at this instant (event time): `validFrom <= validAt < validTo`, an
   * open end holding for ever. Alone, as known now: a superseded version counts within
   * the validity its supersession closed. Pass `Date.now()` for what holds now.
   */
  validAt?: Timestamp;
  /**
   * Only what the store knew at this instant (system time): versions recorded by then
   * (`createdAt <= knownAt`). Alone, only the versions current then (not superseded by
   * then). With `validAt`, each version is read as it was then: a version superseded
   * after `knownAt` counts as still open.
   *
   * @example
   * ```ts
   * // What did the agent believe on 1 May about 1 April?
   * await store.listMemories({ agentId, validAt: Date.UTC(2026, 3, 1), knownAt: Date.UTC(2026, 4, 1) });
   * ```
   */
  knownAt?: Timestamp;
  /**
   * Where the caller stands in a conversation, for branch-scoped memories
   * (`source.branchScoped`): a thread and one of its branches (default: its active
   * branch). A branch-scoped memory counts when its source's last message is on the chain
   * of that branch's head (the message itself or an ancestor): seen from the branch it was
   * written on and from branches forked after that message, not from a branch forked
   * before it, one rewound past it, or another thread. `null`: from no branch, so no
   * branch-scoped memory counts. Left out: no condition (an administrator's view lists
   * them all). Memories that are not branch-scoped are never affected. `NOT_FOUND` when
   * the thread or the branch (of that thread) does not exist.
   *
   * @example
   * ```ts
   * await store.searchMemories({ text: 'city', filter: { visibleFrom: { threadId, branchId } } });
   * ```
   */
  visibleFrom?: BranchView | null;
}

/** A point in a conversation: a thread and one of its branches (default: its active branch). */
export interface BranchView {
  threadId: string;
  branchId?: string;
}

export interface ListMemoriesOptions {
  /** Default 100, at most 10000. */
  limit?: number;
  /** Newest first by default. */
  order?: 'newest' | 'oldest';
}

export interface MemorySearch {
  /** Cosine similarity search. Exactly one of `vector` and `text`. */
  vector?: number[];
  /** Keyword search: memories containing any of the words, best BM25 (or equivalent) first. */
  text?: string;
  filter?: MemoryFilter;
  /** Default 10, at most 1000. */
  limit?: number;
  /** Vector search only: drop hits whose cosine similarity is below this. */
  threshold?: number;
}

export interface MemoryHit {
  memory: Memory;
  /** Vector: cosine similarity in [-1, 1]. Text: the store's relevance, higher is better. */
  score: number;
}

/** The embedder a store's vectors belong to. Fixed by the first vector written. */
export interface EmbeddingSpace {
  embedderId: string | null;
  dimensions: number;
}

/**
 * A thread and everything under it, as `exportThread` reads it and `restoreThread` writes
 * it: the form of a backup, a dump or a copy between stores.
 */
export interface ThreadRecords {
  thread: Thread;
  /** Parents before children: by depth, then id (in binary order). */
  messages: Message[];
  /** In creation order. `seq` is the store's own numbering and is not part of a record. */
  branches: Array<Omit<Branch, 'seq'>>;
  /** In creation order. */
  checkpoints: Checkpoint[];
  /** Branch by branch in the order of `branches`, each ascending by version from 1. */
  stateCommits: StateCommit[];
  /** Oldest first (by `startedAt`, then id). */
  turns: Turn[];
}

/** Paging through a listing ordered by a key: `limit` per page, the previous page's `nextCursor`. */
export interface PageOptions {
  /** Default 100, at most 10000. */
  limit?: number;
  cursor?: string | null;
}

/** An entry to write with `putEntries`. */
export interface NewEntry {
  collection: string;
  id: string;
  /** Ties entries together for `listEntries` and `deleteEntries`; null (the default) for none. */
  group?: string | null;
  data: JsonObject;
  /**
   * Compare-and-set: `null` writes only a new entry (`CONFLICT` when the id is taken); a
   * number writes only over the entry at that version (`CONFLICT` otherwise, also when
   * it is missing). Left out, the entry is written whatever is stored.
   */
  expectedVersion?: number | null;
}

export interface ListEntriesOptions {
  /** Only the entries of this group. */
  group?: string;
  /** Only entries whose id comes after this one (binary order): the last id of the previous page. */
  afterId?: string;
  /** At most this many (default 100, at most 10 000). */
  limit?: number;
}

/** Which entries of a collection `deleteEntries` removes: these ids, or a whole group. */
export type EntrySelector = { ids: string[] } | { group: string };

/** A change to an entry, as `subscribeEntries` hears it. */
export interface EntryChange {
  collection: string;
  id: string;
  group: string | null;
  /** The version written, or null when the entry was deleted. */
  version: number | null;
}

export type EntryListener = (change: EntryChange) => void;

/**
 * Whose data `forget` deletes: at least one key. With several, each is forgotten.
 *
 * @example
 * ```ts
 * const receipt = await store.forget({ resourceId: 'user-1', entityId: 'user-1' });
 * ```
 */
export interface ForgetSubject {
  /** The threads of this resource (`Thread.resourceId`: a user or tenant) and all under them. */
  resourceId?: string;
  /** The memories about this entity (`Memory.entityId`). */
  entityId?: string;
  /** The memories of this world (`Memory.worldId`). */
  worldId?: string;
}

/**
 * What `subscribeForgets` hears: a `forget` (or `destroyDataKeys`) of `subject` that began
 * at `at` has finished, so none of the subject's data can be read from the store any more.
 */
export interface ForgetNotice {
  subject: ForgetSubject;
  at: number;
}

export type ForgetListener = (notice: ForgetNotice) => void;

/** How many of each kind `forget` deleted. */
export interface ForgetCounts {
  threads: number;
  branches: number;
  messages: number;
  stateCommits: number;
  checkpoints: number;
  turns: number;
  /** The forgotten threads' run leases (`runLeaseKey`). */
  leases: number;
  memories: number;
  /** Deleted memories that held an embedding (their vector-index rows went with them). */
  embeddings: number;
  /** Embedding-cache rows (any embedder) of the deleted memories' content hashes that no remaining memory uses. */
  cachedEmbeddings: number;
  /**
   * The subject's data keys destroyed, on a store with encryption (crypto-shredding:
   * whatever of its data a copy of the database still holds cannot be opened); else 0.
   */
  dataKeys: number;
}

/**
 * What `Store.sweep` deletes. Every rule is off unless set; a thread's own metadata key
 * `retention` (a `RetentionPolicy`, or `false` to exempt the thread) overrides the sweep's
 * policy rule by rule, `null` turning one off. No rule ever removes a point a thread can
 * still resume from: the head of a kept branch and its state, the state at each named
 * checkpoint, whatever a kept state needs to be rebuilt (the snapshot it replays from),
 * and nothing of a thread a run is working on (a live run lease or a running turn).
 */
export interface RetentionPolicy {
  /**
   * Delete a thread idle this long (ms): nothing of it written since, nothing working on
   * it now, by the rule of `isThreadIdle`.
   */
  threadTtlMs?: number | null;
  /**
   * Keep, per branch, the newest this many state commits (at least 1); older ones go,
   * except those a kept point (the head, a named checkpoint, a child branch's fork) needs:
   * back to the snapshot its state is rebuilt from. A branch whose log has no snapshot
   * keeps all of it. The state as of a message older than what is kept is no longer
   * readable (a rewind there starts from the state before the branch).
   */
  keepStateCommits?: number | null;
  /**
   * Drop a branch nobody has visited this long (ms): not created, moved or committed to
   * since. Never the active branch, a branch another branch was made from, a branch
   * holding a named checkpoint on its chain, or one of a thread a run is working on. Its
   * state commits go with it; its messages stay.
   */
  branchTtlMs?: number | null;
  /** Delete finished turns (not `running`) started longer ago than this (ms). */
  turnTtlMs?: number | null;
}

/** `Store.sweep`'s options. */
export interface SweepOptions {
  /** Threads read per page (each thread is swept in a transaction of its own). Default 100. */
  batch?: number;
  /** Sweep only these threads (default: every thread of the store). */
  threadIds?: string[];
  /** The owner recorded on the sweep lease (`SWEEP_LEASE_KEY`); a fresh id by default. */
  owner?: string;
  /** The sweep lease's time to live (ms), renewed after every page. Default 60,000. */
  leaseTtlMs?: number;
  /**
   * The share of wall time the sweep works, above 0 and at most 1. After each thread it
   * rests (off the database) for as long as that thread took × (1 − dutyCycle) / dutyCycle,
   * so that workers sharing the database keep its CPU: a loaded database makes each
   * thread slower and the rest longer. Before each thread it also waits while sessions of
   * this store queue for a connection (a full pool). Default 0.1; 1 never rests.
   */
  dutyCycle?: number;
  /**
   * Decide as a sweep would, delete nothing: each thread's transaction runs the same rules
   * and is rolled back, so `freed` counts what a sweep would have freed at that moment.
   * Takes no sweep lease (it writes nothing), so it runs beside a sweep. Default false.
   */
  dryRun?: boolean;
}

/** What `Store.sweep` did. */
export interface SweepReport {
  /** False when another sweeper held the sweep lease: this call did nothing. */
  ran: boolean;
  /** Threads looked at. */
  scanned: number;
  /** Threads left alone because a run works on them (rules other than turns skipped). */
  busy: number;
  /** Threads whose metadata `retention` is not a valid policy: left alone. */
  invalid: number;
  /** What was deleted, by kind (the rows under deleted threads included). */
  freed: {
    threads: number;
    branches: number;
    stateCommits: number;
    turns: number;
    messages: number;
    checkpoints: number;
  };
}

/** The lease key `Store.sweep` holds while it runs: one sweeper per store across processes. */
export const SWEEP_LEASE_KEY = 'cairn:sweep';

/** What `forget` did: the subject as checked, what it deleted, and when it began. */
export interface ForgetReceipt {
  subject: ForgetSubject;
  counts: ForgetCounts;
  /** When the forget began: the time its tombstones record. */
  at: Timestamp;
}

export interface StoreChange {
  threadId: string;
  kind: 'thread' | 'messages' | 'branch' | 'checkpoint' | 'state';
  /** The branch that changed, for `branch` and `state`. */
  branchId?: string;
  /** For `branch`: the branch's head as this change left it. */
  headMessageId?: string | null;
  /** For `state`: the version this change appended. */
  version?: number;
}

export type StoreListener = (change: StoreChange) => void;

/**
 * The key of a thread's run lease (one run at a time per thread, see `@cairn/thread`): a
 * live one, or any write to it, makes the thread active (see `Store.isThreadIdle`).
 */
export function runLeaseKey(threadId: string): string {
  return `run:${threadId}`;
}

/**
 * The operations every Cairn store provides, all async. Bad input is rejected with a
 * `CairnError` before anything is written; a failed call changes nothing.
 *
 * Error codes: a missing thread, message, branch, checkpoint or memory that a call
 * needs is `NOT_FOUND`; an id or name already taken, or a compare-and-set that lost, is
 * `CONFLICT`; malformed input (empty or over-long names, self-parenting, a parent in
 * another thread, non-JSON data, bad limits) is `INVALID_ARGUMENT`; a vector of the
 * wrong width is `EMBEDDING_MISMATCH`; a write that would bring back data of a subject
 * `forget` deleted is `FORGOTTEN`; any call after `close()` is `CLOSED`.
 *
 * @example
 * ```ts
 * const store = createMemoryStore();
 * const thread = await store.createThread({ resourceId: 'user-1' });
 * const [m] = await store.addMessages([{ threadId: thread.id, parentId: null, role: 'user', data: 'hi' }]);
 * const main = await store.createBranch({ threadId: thread.id, name: 'main', headMessageId: m!.id });
 * ```
 */
export interface Store {
  readonly capabilities: StoreCapabilities;

  // threads
  createThread(input: NewThread): Promise<Thread>;
  /**
   * A new thread with its first branch (`main` unless named; empty, active), atomically:
   * what `createThread` then `createBranch` in one transaction do, in fewer statements.
   * `CONFLICT` when the thread id is taken.
   */
  createThreadWithBranch(input: NewThread & { branch?: string }): Promise<ThreadWithBranch>;
  getThread(id: string): Promise<Thread | null>;
  updateThread(id: string, patch: ThreadPatch): Promise<Thread>;
  /** Newest first. */
  listThreads(options?: ListThreadsOptions): Promise<Page<Thread>>;
  /**
   * Deletes the thread and everything under it. False when there was no such thread, or
   * when `idleSince` is given and the thread was not idle since then (see `isThreadIdle`):
   * checked as the delete runs, atomically with writers, so a thread chosen for being idle
   * and touched before the delete stays.
   */
  deleteThread(id: string, options?: { idleSince?: Timestamp }): Promise<boolean>;
  /**
   * Whether the thread exists and was idle since `since`: nothing of it was written at or
   * after `since` (the thread itself, a message, a branch, a state commit, a checkpoint, a
   * turn, its run lease `runLeaseKey(id)`), and nothing works on it now (a running turn, a
   * live run lease). The rule `deleteThread`'s `idleSince` applies.
   *
   * @example
   * ```ts
   * const weekAgo = Date.now() - 7 * 86_400_000;
   * if (await store.isThreadIdle(threadId, weekAgo)) console.log('a week without activity');
   * ```
   */
  isThreadIdle(id: string, since: Timestamp): Promise<boolean>;

  // messages
  /** Stores a batch atomically: all of it or, on any error, none. Returns them with depths. */
  addMessages(messages: NewMessage[]): Promise<Message[]>;
  getMessage(id: string): Promise<Message | null>;
  /**
   * The chain from the root to `headId`, root first; with `limit`, the part nearest the
   * head. Costs the length of the answer plus O(log depth): a page or one message deep
   * in a long chain is as quick as one near the head.
   */
  getChain(headId: string, options?: ChainOptions): Promise<Message[]>;
  /**
   * Whether `ancestorId` is on the chain from the root to `descendantId` (a message is
   * its own ancestor). Costs O(log depth) whatever the chain's length or the number of
   * branches; `NOT_FOUND` when either message is missing.
   *
   * @example
   * ```ts
   * if (await store.isAncestor(messageId, branch.headMessageId!)) console.log('on the branch');
   * ```
   */
  isAncestor(ancestorId: string, descendantId: string): Promise<boolean>;

  // branches
  createBranch(input: NewBranch): Promise<Branch>;
  getBranch(threadId: string, name: string): Promise<Branch | null>;
  getBranchById(id: string): Promise<Branch | null>;
  /** In creation order. */
  listBranches(threadId: string): Promise<Branch[]>;
  getActiveBranch(threadId: string): Promise<Branch | null>;
  /** Makes this branch the only active one of its thread. */
  setActiveBranch(branchId: string): Promise<Branch>;
  /** Moves the head if it is still `expectedHeadId`; otherwise `CONFLICT`. */
  moveHead(branchId: string, expectedHeadId: string | null, newHeadId: string): Promise<Branch>;
  /**
   * `addMessages` of a non-empty batch, then `moveHead` from `expectedHeadId` onto its last
   * message, atomically in one write (fewer statements than both in a transaction): how an
   * engine saves on its branch. A moved head is `moveHead`'s `CONFLICT`, writing nothing.
   */
  addMessagesOnBranch(
    branchId: string,
    expectedHeadId: string | null,
    messages: NewMessage[],
  ): Promise<{ messages: Message[]; branch: Branch }>;
  /**
   * Inside `transaction(fn)`: locks the branch until the transaction ends, so that every
   * `moveHead` and `appendStateCommit` on it from any other transaction, store instance
   * or process waits for it — writers that queue here cannot lose a compare-and-set.
   * Waits up to `timeoutMs` (default 10 000) for another holder, then `TIMEOUT`. Returns
   * the branch as stored once locked; `NOT_FOUND` when there is none. Outside a
   * transaction the lock ends with the call.
   *
   * @example
   * ```ts
   * await store.transaction(async (tx) => {
   *   const b = await tx.lockBranch(branchId, { timeoutMs: 5000 });
   *   const version = (await tx.getLatestStateCommit(b.id))?.version ?? 0;
   *   await tx.appendStateCommit({ branchId, messageId: b.headMessageId, update }, version); // cannot conflict
   * });
   * ```
   */
  lockBranch(branchId: string, options?: LockOptions): Promise<Branch>;

  // checkpoints
  /** Creates the checkpoint, or moves the one of that name. */
  saveCheckpoint(input: NewCheckpoint): Promise<Checkpoint>;
  getCheckpoint(threadId: string, name: string): Promise<Checkpoint | null>;
  /** In creation order. */
  listCheckpoints(threadId: string): Promise<Checkpoint[]>;
  deleteCheckpoint(threadId: string, name: string): Promise<boolean>;

  // state
  /**
   * Appends version `expectedVersion + 1` if the branch's latest version is
   * `expectedVersion` (0 when it has none); otherwise `CONFLICT`.
   */
  appendStateCommit(commit: NewStateCommit, expectedVersion: number): Promise<StateCommit>;
  /** Ascending by version. */
  getStateCommits(branchId: string, range?: StateCommitRange): Promise<StateCommit[]>;
  /** The newest commit matching the query, or null. */
  getLatestStateCommit(branchId: string, query?: LatestCommitQuery): Promise<StateCommit | null>;

  // turns
  putTurn(turn: Turn): Promise<Turn>;
  getTurn(id: string): Promise<Turn | null>;
  /** Newest first. */
  listTurns(threadId: string, options?: { limit?: number }): Promise<Turn[]>;
  deleteTurn(id: string): Promise<boolean>;
  /** Deletes turns that are not running and started before `before`. Returns how many. */
  purgeTurns(options: { before: Timestamp; threadId?: string }): Promise<number>;

  // leases
  /**
   * Takes the lease if it is free, released, expired (then `tookOver` holds the old one)
   * or already held by `owner` (then it is renewed). `CONFLICT` while another owner's
   * lease is live, or, with `waitMs`, `TIMEOUT` once it has waited that long.
   */
  acquireLease(input: AcquireLeaseInput): Promise<AcquiredLease>;
  /** Extends a live lease held by `owner`; `CONFLICT` if it expired, was released or taken. */
  renewLease(key: string, owner: string, ttlMs: number, data?: JsonObject): Promise<Lease>;
  /** Releases a lease held by `owner` (merging `data`); `CONFLICT` if another owner holds it. */
  releaseLease(key: string, owner: string, data?: JsonObject): Promise<Lease>;
  getLease(key: string): Promise<Lease | null>;

  // memories
  /** Stores a batch atomically. Vectors must match the store's embedding width. */
  addMemories(memories: NewMemory[]): Promise<Memory[]>;
  getMemory(id: string): Promise<Memory | null>;
  /**
   * Edits a current version in place (its text, hash, metadata or embedding; its place in
   * time stays). `NOT_FOUND` when there is no memory `id`; `CONFLICT` when `supersedeMemory`
   * or `closeMemory` (a consolidation pass among them) closed it: a closed version is history
   * and stays as it was. The error names the current version of the fact to update instead
   * (`details.currentId`, null when the fact has none), and nothing is written.
   *
   * @example
   * ```ts
   * await store.updateMemory(moved.id, { metadata: { checked: true } });
   * await store.updateMemory(city.id, { metadata: {} }); // CONFLICT: details.currentId === moved.id
   * ```
   */
  updateMemory(id: string, patch: MemoryPatch): Promise<Memory>;
  /**
   * Records a new version of a fact, atomically: the version `id` is closed (its `validTo`
   * becomes the new `validFrom`, its `supersededAt` now) and `next` is stored as a new
   * memory with `supersedes: id` and the same `lineageId`. Nothing is deleted. Returns
   * the new version. `NOT_FOUND` when there is no memory `id`; `CONFLICT` when it is
   * already superseded or ends on its own (`validTo` set): only an open, current version
   * can be superseded; `INVALID_ARGUMENT` when the new version would start before the
   * old one does.
   *
   * @example
   * ```ts
   * const [city] = await store.addMemories([{ agentId, content: { text: 'Ada lives in Paris' } }]);
   * const moved = await store.supersedeMemory(city!.id, {
   *   content: { text: 'Ada lives in Berlin' },
   *   validFrom: Date.UTC(2026, 4, 3),
   * });
   * await store.listMemories({ lineageIds: [moved.lineageId] }, { order: 'oldest' }); // both versions
   * ```
   */
  supersedeMemory(id: string, next: MemoryVersion): Promise<Memory>;
  /**
   * Ends a current version without a successor, atomically: its `validTo` becomes
   * `options.validTo` (default now) and its `supersededAt` now, so a plain recall no
   * longer finds it while `lineageIds`, `validAt` and `knownAt` still do. Nothing is
   * deleted. For a version that another memory replaces (a duplicate merged into it, a
   * fact a newer one contradicts). With `expected`, only if the version is still as the
   * caller read it. Returns the closed version. `NOT_FOUND` when there is no memory `id`;
   * `CONFLICT` when it is already superseded or ends on its own, or differs from
   * `expected`; `INVALID_ARGUMENT` for bad options or a `validTo` before its `validFrom`.
   *
   * @example
   * ```ts
   * const seen = await store.getMemory(id);
   * await store.closeMemory(id, {
   *   expected: seen!,
   *   metadata: { ...seen!.metadata, mergedInto: keptId },
   * });
   * ```
   */
  closeMemory(id: string, options?: CloseMemoryOptions): Promise<Memory>;
  deleteMemories(ids: string[]): Promise<number>;
  listMemories(filter?: MemoryFilter, options?: ListMemoriesOptions): Promise<Memory[]>;
  countMemories(filter?: MemoryFilter): Promise<number>;
  /** Exactly one of `vector` or `text`; the filter is applied inside the search, never after. */
  searchMemories(search: MemorySearch): Promise<MemoryHit[]>;
  /**
   * Fixes the store's embedding space on first use and returns it; `EMBEDDING_MISMATCH`
   * (naming both) when a different embedder id or width is already recorded. A space
   * recorded by a bare vector write (embedderId null) adopts the first id offered.
   */
  ensureEmbeddingSpace(space: { embedderId: string; dimensions: number }): Promise<EmbeddingSpace>;
  getEmbeddingSpace(): Promise<EmbeddingSpace | null>;
  /** Cached embeddings by content hash, for one embedder. */
  getCachedEmbeddings(embedderId: string, contentHashes: string[]): Promise<Map<string, number[]>>;
  putCachedEmbeddings(
    embedderId: string,
    entries: Array<{ contentHash: string; embedding: number[] }>,
  ): Promise<void>;

  // entries: JSON documents in named collections
  /**
   * Writes a batch of entries atomically: all of them or, on any error, none. A new entry
   * gets version 1, a rewritten one its stored version + 1 (its `createdAt` kept). Each
   * entry's `expectedVersion`, when given, must hold, or the call is `CONFLICT` and
   * writes nothing.
   *
   * @example
   * ```ts
   * const [run] = await store.putEntries([
   *   { collection: 'runs', id: 'run-1', group: 'thread-1', data: { status: 'pending' }, expectedVersion: null },
   * ]);
   * await store.putEntries([{ ...run!, data: { status: 'running' }, expectedVersion: run!.version }]);
   * ```
   */
  putEntries(entries: NewEntry[]): Promise<Entry[]>;
  getEntry(collection: string, id: string): Promise<Entry | null>;
  /** A collection's entries (of one group, when given) by id in binary order, a page at a time. */
  listEntries(collection: string, options?: ListEntriesOptions): Promise<Entry[]>;
  /** Deletes the entries of these ids, or of a group; returns how many there were. */
  deleteEntries(collection: string, selector: EntrySelector): Promise<number>;
  /**
   * Listens for writes and deletes of a collection's entries (from other processes too,
   * where `capabilities.notifications` is `cluster`); returns the function that stops
   * listening.
   */
  subscribeEntries(collection: string, listener: EntryListener): () => void;

  // whole records: backups, dumps and copies between stores
  /**
   * The thread and everything under it, read in one session (a consistent snapshot where
   * the database gives one), or null when there is no such thread.
   */
  exportThread(threadId: string): Promise<ThreadRecords | null>;
  /**
   * Writes a thread and everything under it exactly as given (ids, timestamps, versions,
   * the active branch), atomically. The records are checked first (parents before
   * children, heads, checkpoints and state commits on messages of the thread, versions
   * 1, 2, 3, ... per branch, one active branch). `CONFLICT`, writing nothing, when the
   * thread id or any message, branch or turn id is already stored. Each message's
   * `depth` and each commit's `threadId` and `messageDepth` are recomputed.
   *
   * @example
   * ```ts
   * const records = await source.exportThread(threadId);
   * if (records) await target.restoreThread(records);
   * ```
   */
  restoreThread(records: ThreadRecords): Promise<void>;
  /** Every lease, by key (binary order). */
  listLeases(options?: PageOptions): Promise<Page<Lease>>;
  /**
   * Writes leases exactly as given (timestamps included), replacing those of the same key,
   * all or none. A live lease (not released, not expired) is never replaced: restoring it
   * is `CONFLICT` naming its holder, unless the lease given is the same record (then
   * nothing is written), so a restore can neither take nor extend a lease someone holds.
   */
  restoreLeases(leases: Lease[]): Promise<void>;
  /** Every memory, by id (binary order); `addMemories` writes them back as they are. */
  scanMemories(options?: PageOptions): Promise<Page<Memory>>;

  // forgetting
  /**
   * Deletes a subject's data for good and refuses it from then on. For a `resourceId`:
   * every thread of that resource and everything under it (messages, branches, state
   * commits, checkpoints, turns, the thread's run lease, and the branch-scoped memories
   * learned on it: `source.branchScoped`; a memory that is not branch-scoped is its
   * entity's or world's, forgotten by naming those in the same call). For an `entityId` or
   * `worldId`: every memory with it, its embedding and keyword-index rows, and the
   * embedding-cache rows of its content hash when no remaining memory has that hash.
   *
   * First it records a tombstone for each key given, then it deletes in small
   * transactions (a page of threads or memories each), recording a tombstone for each
   * thread and branch it deletes. From then on any write that would bring the subject's
   * data back fails with `FORGOTTEN` (details: `kind`, `key`, `at`): `createThread`,
   * `createThreadWithBranch` and `restoreThread` of that resource or of a forgotten
   * thread id, `addMemories` with that entity or world or learned on a forgotten thread
   * (`source.threadId`), a run lease of a forgotten
   * thread, and a write to a forgotten thread or branch (a worker finishing a turn late)
   * that would otherwise be `NOT_FOUND`. Tombstones are kept (they survive reopening)
   * and are never lifted: they hold the ids, never content. A store that keeps deleted
   * bytes (a SQLite file's free pages and WAL) scrubs them before `forget` returns; see
   * each store's README for what stays until its own maintenance (Postgres: `VACUUM`).
   *
   * Safe to run again (a forget that was cut off part-way finishes on the next call; the
   * counts are what this call deleted). Not inside `transaction()`: `INVALID_ARGUMENT`.
   * A bad subject (no key, an unknown key, a malformed id) is `INVALID_ARGUMENT` before
   * anything is written. Entries (`putEntries`) are not the store's to forget: they have
   * no owner; delete those of the subject's threads with `deleteEntries`.
   *
   * @example
   * ```ts
   * const receipt = await store.forget({ resourceId: 'user-1' });
   * console.log(receipt.counts.threads, receipt.counts.messages);
   * await store.createThread({ resourceId: 'user-1' }); // FORGOTTEN
   * ```
   */
  forget(subject: ForgetSubject): Promise<ForgetReceipt>;
  /**
   * On a store with encryption: destroys the subject's data keys (crypto-shredding)
   * without deleting its rows, and records its tombstones as `forget` does, so that no
   * write makes it a new key. From then on its sealed rows fail to open with
   * `DECRYPTION_FAILED`, here and in any copy of the database made afterwards; `forget`
   * still deletes them. Returns how many data keys it destroyed. On a store without
   * encryption, `INVALID_ARGUMENT`.
   *
   * @example
   * ```ts
   * await store.destroyDataKeys({ resourceId: 'user-1' });
   * await store.getChain(headId); // DECRYPTION_FAILED
   * ```
   */
  destroyDataKeys(subject: ForgetSubject): Promise<number>;
  /**
   * On a store with encryption: wraps every data key that another key-encryption key
   * wrapped again with the keyring's current one (`Keyring.keyId`), a page at a time,
   * while the store is in use: sealed rows are not rewritten. The keyring must still
   * unwrap the old keys (e.g. `localKeyring(next, { previous: [old] })`). Returns how many
   * keys it wrapped again. On a store without encryption, `INVALID_ARGUMENT`.
   */
  rotateDataKeys(): Promise<{ rewrapped: number }>;
  /**
   * Applies a retention policy (see `RetentionPolicy`) to every thread, or to
   * `options.threadIds`: a page of `batch` threads at a time, each thread in a transaction
   * of its own that locks out its writers, under the lease `SWEEP_LEASE_KEY` so that one
   * sweeper runs per store across processes (another finds `ran: false`). Returns what
   * it freed. Not inside `transaction()`: `INVALID_ARGUMENT`; a bad policy or option is
   * `INVALID_ARGUMENT` before anything is written. Safe to run again at any time.
   *
   * @example
   * ```ts
   * const report = await store.sweep({ threadTtlMs: 30 * 86_400_000, keepStateCommits: 100 });
   * console.log(report.freed); // { threads: 3, stateCommits: 420, ... }
   * ```
   */
  sweep(policy: RetentionPolicy, options?: SweepOptions): Promise<SweepReport>;

  // lifecycle
  /**
   * Runs `fn` with a store whose calls commit together or not at all. Other calls on
   * this store wait until it ends. Nested calls join the outer transaction.
   */
  transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T>;
  /** Listens for changes to one thread; returns the function that stops listening. */
  subscribe(threadId: string, listener: StoreListener): () => void;
  /**
   * Listens for forgets: `listener` is called once each `forget` or `destroyDataKeys` has
   * finished (its data deleted, or its keys destroyed), before that call returns when it
   * ran through this store or another store sharing its database in this process. What
   * holds data read from the store before (a cache of composed context, see
   * `@cairn/compose`'s `store` option) drops it here. Where `capabilities.notifications`
   * is `cluster` (a Postgres server) it also hears other processes' forgets, moments after
   * they finish (not while the store's listening connection is down: it reconnects after a
   * second, and forgets meanwhile go unheard); where it is `process`, another process's
   * forget is not heard. Returns the function that stops listening.
   *
   * @example
   * ```ts
   * const stop = store.subscribeForgets(({ subject }) => cache.clear());
   * ```
   */
  subscribeForgets(listener: ForgetListener): () => void;
  /** Brings the schema up to date (also run when the store opens). Idempotent. */
  migrate(): Promise<void>;
  /**
   * Releases what the store opened itself. Calls afterwards fail with `CLOSED`; closing
   * again does nothing. On a transaction's store it is `INVALID_ARGUMENT`: close the store.
   */
  close(): Promise<void>;
  /** `close()`, for `await using store = createMemoryStore()`. */
  [Symbol.asyncDispose](): Promise<void>;
}
