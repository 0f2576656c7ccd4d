/**
 * The driver interface: what an adapter writes to make a Cairn store.
 *
 * `createStore(driver)` (see `front-door.ts`) is the only `Store` implementation. It
 * checks every argument, owns the guards (closed store, ended transaction), the
 * transaction session, notifications, error codes, messages and `details`, and the
 * query logic every store shares (cursor encoding, float64 re-scoring of vector
 * candidates, keyword scores). A driver does only what needs the database: run a
 * session, read and write rows, find vector and keyword candidates, translate its own
 * failures. Every value a driver receives has already been checked; it never validates
 * and never builds a `CairnError` for a contract rule.
 */
import type {
  Branch,
  CairnError,
  Checkpoint,
  Entry,
  JsonObject,
  Lease,
  Memory,
  Message,
  StateCommit,
  Thread,
  Timestamp,
  Turn,
} from '@cairn/core';
import type { Tenant, TenantKind } from './encryption.js';
import type { EmbeddingSpace, MemoryFilter, StoreCapabilities } from './store.js';

/** An acquisition waiting for a lease, as the lease's row keeps it. */
export interface LeaseWaiter {
  owner: string;
  /** When it first asked: waiters take a free lease in this order. */
  since: number;
  /** When its place lapses unless it asks again: a waiter that died leaves the queue then. */
  until: number;
}

/**
 * A lease as a driver stores it: the lease and its queue of waiting acquisitions, first
 * come first served across every process (the front door shows only the lease).
 */
export interface StoredLease extends Lease {
  waiters: LeaseWaiter[];
}

/**
 * A memory filter as a driver gets it: `visibleFrom` resolved by the front door to
 * `visibleAnchors`, the messages whose branch-scoped memories count (see `branchAnchor`):
 * a memory counts when it is not branch-scoped or its anchor is among them. Left out: no
 * condition. `branchThreadId` (the front door's own, for `forget`): only the branch-scoped
 * memories learned on this thread.
 */
export type DriverMemoryFilter = Omit<MemoryFilter, 'visibleFrom'> & {
  visibleAnchors?: readonly string[];
  branchThreadId?: string;
};

/** A value or a promise of it: a synchronous driver (SQLite) returns plain values. */
export type MaybePromise<T> = T | Promise<T>;

/** What `Driver.run` is asked for. */
export interface SessionOptions {
  /**
   * The session writes. A write session is one transaction: everything it wrote commits
   * when its function resolves and is rolled back when it throws. A read session
   * (`write: false`) never writes; it may run outside a transaction.
   */
  write: boolean;
}

/** A thread row with its creation order, for `listThreads` paging. */
export interface ThreadRow {
  thread: Thread;
  /** Increases with every thread created in this store; never reused. */
  seq: number;
}

/** A memory with its creation order, which breaks ties between equal scores. */
export interface MemoryRow {
  memory: Memory;
  /** Increases with every memory created in this store; never reused. */
  seq: number;
}

/** A keyword candidate: a memory and the driver's relevance for it (higher is better). */
export interface KeywordCandidate extends MemoryRow {
  /** Any positive relevance, such as BM25. The front door rescales it to (0, 1]. */
  relevance: number;
}

/**
 * A message's jump pointer: an ancestor that walks toward the root may leap to instead
 * of the parent. The front door chooses it when the message is added (skew-binary jump
 * pointers, see `planMessageBatch`), so that the ancestor of any message at any depth is
 * reached in O(log depth) steps: from a message above depth `t`, step to the jump when
 * `jumpDepth >= t`, otherwise to the parent. A root has `jumpId: null` (`jumpDepth` 0).
 * A driver stores both with the message and follows them in `getChain`.
 */
export interface MessageJump {
  jumpId: string | null;
  jumpDepth: number;
}

/** A stored message's place in its thread's tree, as `lookupMessageBatch` reports it. */
export interface MessageLink extends MessageJump {
  threadId: string;
  depth: number;
}

/** What `DriverSession.lookupMessageBatch` is asked for and returns. */
export interface MessageBatchLookup {
  /** The batch's threads that exist. */
  threadIds: Set<string>;
  /**
   * The stored messages among the ids asked for (the batch's ids and its parents) and
   * every message reached from them by following `jumpId` (O(log depth) more per id):
   * the new messages' jump pointers are chosen among these.
   */
  messages: Map<string, MessageLink>;
}

/** The state commit to append, as `DriverSession.appendStateCommit` receives it. */
export interface StateCommitDraft {
  branchId: string;
  messageId: string | null;
  update: JsonObject;
  snapshot: JsonObject | null;
  createdAt: Timestamp;
}

/** Conditions of `getLatestStateCommit`, all optional, all already checked. */
export interface LatestCommitConditions {
  withSnapshot?: boolean;
  maxVersion?: number;
  /** A commit with a null `messageDepth` counts as depth -1. */
  maxMessageDepth?: number;
}

/** What a tombstone names: a forgotten resource, entity, world, thread or branch. */
export type TombstoneKind = 'resource' | 'entity' | 'world' | 'thread' | 'branch';

/** A tombstone's key: its kind and the id it names. */
export interface TombstoneKey {
  kind: TombstoneKind;
  key: string;
}

/** A record that `forget` deleted a subject's data: writes that would bring it back are refused. */
export interface Tombstone extends TombstoneKey {
  /** When the forget that recorded it began. */
  at: Timestamp;
}

/**
 * A tenant's data key as the store keeps it: wrapped by a key-encryption key (see
 * `EncryptionOptions`), never in the clear. Written in the transaction of the tenant's
 * first sealed row.
 */
export interface DataKeyRow {
  kind: TenantKind;
  key: string;
  /** The key-encryption key that wrapped it (`Keyring.keyId`). */
  keyId: string;
  /** The wrapped data key, base64. */
  wrapped: string;
  createdAt: Timestamp;
}

/**
 * What `Store.sweep` decides a page of threads on, as `DriverSession.sweepFacts` reads it:
 * rows of the threads asked for that exist, in any order.
 */
export interface SweepFacts {
  threads: Thread[];
  /** Their branches, in creation order (`seq` ascending) within each thread. */
  branches: Branch[];
  /** The messages these branches' heads and forks and these checkpoints name. */
  messages: Message[];
  /** Their named checkpoints, in creation order within each thread. */
  checkpoints: Checkpoint[];
  /** Their run leases (`runLeaseKey`) that exist. */
  leases: StoredLease[];
  /** The threads among them with a `running` turn. */
  running: string[];
}

/** One question of `DriverSession.getLatestStateCommits`: a branch and `getLatestStateCommit`'s conditions. */
export interface BranchCommitQuery extends LatestCommitConditions {
  branchId: string;
}

/** The deletes of a page of `Store.sweep`, as `DriverSession.sweepDelete` receives them. */
export interface SweepDeletes {
  /** For each thread, `purgeTurns(before, threadId)`. */
  turns: Array<{ threadId: string; before: Timestamp }>;
  /** For each, `deleteBranch(branchId)`. */
  branches: string[];
  /** For each (each branch at most once), `deleteStateCommits(branchId, beforeVersion)`. */
  stateCuts: Array<{ branchId: string; beforeVersion: number }>;
}

/** What `DriverSession.sweepDelete` deleted. */
export interface SweepDeleted {
  turns: number;
  /** The branches deleted (of those asked for, the ones that existed). */
  branches: string[];
  /** State commits deleted: with the branches and by the cuts. */
  stateCommits: number;
}

/** How many rows of each kind are under a thread, as `countThreadRows` reports them. */
export interface ThreadRowCounts {
  messages: number;
  branches: number;
  stateCommits: number;
  checkpoints: number;
  turns: number;
}

/**
 * One session of a driver: a transaction for writes, a connection (or snapshot) for
 * reads. The front door calls these methods only inside `Driver.run`, one at a time
 * (never two at once on one session), with checked inputs. A method returns `null`,
 * `false` or `0` when the row it needs is missing, or when a compare-and-set condition
 * does not hold; it never throws for that. The front door then finds out why and
 * reports it. Thrown errors are driver failures: the front door passes them to
 * `Driver.translateError`.
 *
 * Rows come back as the `@cairn/core` types, decoded (JSON parsed, booleans and
 * numbers as JS values) and fresh: the front door hands them to callers as they are.
 */
export interface DriverSession {
  // ---------------------------------------------------------------- threads

  /** Inserts a new thread. False, writing nothing, when the id is already taken. */
  insertThread(thread: Thread): MaybePromise<boolean>;
  getThread(id: string): MaybePromise<Thread | null>;
  /**
   * Sets the given fields (`title` and/or `metadata`) and `updatedAt`; returns the
   * thread as stored now, or null when there is no such thread.
   */
  updateThread(
    id: string,
    patch: { title?: string | null; metadata?: JsonObject },
    updatedAt: Timestamp,
  ): MaybePromise<Thread | null>;
  /**
   * Threads newest first (by `seq`, descending), at most `limit`, only those of
   * `resourceId` when given and only those with `seq < beforeSeq` when given.
   */
  listThreads(query: {
    resourceId?: string;
    beforeSeq?: number;
    limit: number;
  }): MaybePromise<ThreadRow[]>;
  /**
   * Deletes the thread and everything under it: messages, branches, their state
   * commits, checkpoints and turns. False when there was no such thread.
   */
  deleteThread(id: string): MaybePromise<boolean>;
  /**
   * The thread, locked until the session ends against its writers (messages added to
   * it, its updates; e.g. `SELECT … FOR UPDATE`), or null when missing. Only called in
   * write sessions. Optional, as `lockBranch` is: without it the front door reads.
   */
  lockThread?(id: string): MaybePromise<Thread | null>;
  /** The newest `createdAt` among the thread's messages, or null when it has none. */
  latestMessageAt(threadId: string): MaybePromise<Timestamp | null>;

  // ---------------------------------------------------------------- messages

  /** Which of these threads exist, and the thread and depth of these stored messages. */
  lookupMessageBatch(ids: {
    threadIds: string[];
    messageIds: string[];
  }): MaybePromise<MessageBatchLookup>;
  /**
   * Inserts messages already planned (ids free, parents present, depths computed), in
   * order, each with its jump pointer (`jumps[i]` is `messages[i]`'s). Stored messages
   * are immutable.
   */
  insertMessages(messages: Message[], jumps: MessageJump[]): MaybePromise<void>;
  /**
   * Optional: `insertMessages(messages, jumps)` and then `moveHead(branchId,
   * expectedHeadId, <the last message's id>)`, in one step (one statement), returning what
   * `moveHead` returns. Without it the front door calls the two. For a batch of roots of
   * one thread the front door skips `lookupMessageBatch`, so this step must fail on a
   * taken message id, and move nothing unless the head's thread exists, locking it as
   * the lookup does; on either, the front door rolls back and makes the call again with
   * the lookup.
   */
  insertMessagesMovingHead?(
    messages: Message[],
    jumps: MessageJump[],
    branchId: string,
    expectedHeadId: string | null,
  ): MaybePromise<Branch | null>;
  getMessage(id: string): MaybePromise<Message | null>;
  /** Every message of the thread, by depth then id (binary order, e.g. `COLLATE "C"`). */
  listMessages(threadId: string): MaybePromise<Message[]>;
  /**
   * The ancestors of `headId` (itself included) whose depth is in
   * `[minDepth, maxDepth]`, root first. The front door has checked that the head exists
   * and that `0 <= minDepth <= maxDepth <= head.depth`. Cost must follow the length of
   * the answer plus O(log depth), not the length of the chain: reach `maxDepth` through
   * the jump pointers (see `MessageJump`), then walk parents down to `minDepth`.
   */
  getChain(headId: string, minDepth: number, maxDepth: number): MaybePromise<Message[]>;

  // ---------------------------------------------------------------- branches

  /**
   * Inserts a branch as given: the front door asks for `isActive: true` only where no
   * other branch of the thread is active (a thread created in the same session), and
   * otherwise activates it with `setActiveBranch`. `seq` is ignored: the driver assigns
   * the next creation number. Returns the branch as stored, or null, writing nothing,
   * when the id or the (threadId, name) pair is already taken.
   */
  insertBranch(branch: Omit<Branch, 'seq'>): MaybePromise<Branch | null>;
  /**
   * Optional: `insertThread(thread)` and then, when it inserted, `insertBranch(branch)` of
   * a branch of that thread, in one step (one statement, where separate ones would cost a
   * round trip each). `thread` says whether the thread was inserted, `branch` is what
   * `insertBranch` returned (null when the thread was not inserted). Without it the front
   * door calls the two.
   */
  insertThreadWithBranch?(
    thread: Thread,
    branch: Omit<Branch, 'seq'>,
  ): MaybePromise<{ thread: boolean; branch: Branch | null }>;
  getBranchById(id: string): MaybePromise<Branch | null>;
  getBranch(threadId: string, name: string): MaybePromise<Branch | null>;
  /** The thread's branches in creation order (`seq` ascending). */
  listBranches(threadId: string): MaybePromise<Branch[]>;
  getActiveBranch(threadId: string): MaybePromise<Branch | null>;
  /** Makes `branchId` the only active branch of `threadId`; returns it, or null if missing. */
  setActiveBranch(threadId: string, branchId: string): MaybePromise<Branch | null>;
  /**
   * Compare-and-set: sets the head to `newHeadId` only if the branch exists, its head is
   * `expectedHeadId` (null matches null) and message `newHeadId` exists in the branch's
   * thread; returns the updated branch. Otherwise null, writing nothing; the front
   * door reads to report why. One statement where the database allows it.
   */
  moveHead(
    branchId: string,
    expectedHeadId: string | null,
    newHeadId: string,
  ): MaybePromise<Branch | null>;
  /**
   * Deletes the branch (never the thread's active one: the front door sees to that) and
   * its state commits. Returns how many state commits went with it, or null when there
   * was no such branch. For `Store.sweep`.
   */
  deleteBranch(branchId: string): MaybePromise<number | null>;
  /**
   * Locks the branch until the session ends (e.g. `SELECT … FOR NO KEY UPDATE`, the lock
   * `moveHead` and `appendStateCommit` must also take), waiting at most `timeoutMs` for
   * another session that holds it; returns it, or null when missing. A wait that gives
   * up is a driver failure that `translateError` maps to `TIMEOUT`. Only called in write
   * sessions. Optional: a driver whose write sessions exclude each other (SQLite, the
   * in-memory driver) holds every lock already and leaves it out; the front door reads.
   */
  lockBranch?(branchId: string, timeoutMs: number): MaybePromise<Branch | null>;

  // ---------------------------------------------------------------- checkpoints

  /**
   * Inserts the checkpoint, or, when the thread already has one of that name, points
   * that one at `checkpoint.messageId` (keeping its id and `createdAt`). Returns it as
   * stored. The front door has checked the thread and the message.
   */
  putCheckpoint(checkpoint: Checkpoint): MaybePromise<Checkpoint>;
  getCheckpoint(threadId: string, name: string): MaybePromise<Checkpoint | null>;
  /** The checkpoint of this id, in any thread, or null. */
  getCheckpointById(id: string): MaybePromise<Checkpoint | null>;
  /** In creation order. */
  listCheckpoints(threadId: string): MaybePromise<Checkpoint[]>;
  deleteCheckpoint(threadId: string, name: string): MaybePromise<boolean>;

  // ---------------------------------------------------------------- state

  /**
   * Compare-and-set: appends version `expectedVersion + 1` only if the branch exists,
   * its latest version is `expectedVersion` (0 when it has none) and, when
   * `draft.messageId` is set, that message exists in the branch's thread. Fills in
   * `threadId` (the branch's) and `messageDepth` (the message's, or null). Returns the
   * stored commit, or null, writing nothing, when a condition fails (including a
   * concurrent append of the same version).
   *
   * Optional, for a driver whose write sessions run side by side: the compare belongs in
   * the write itself (a read under a lock may predate the append it waited for). A driver
   * whose write sessions exclude each other leaves it
   * out and implements `insertStateCommit`: the front door reads, compares and inserts.
   */
  appendStateCommit?(
    draft: StateCommitDraft,
    expectedVersion: number,
  ): MaybePromise<StateCommit | null>;
  /** Inserts a commit the front door checked; required when `appendStateCommit` is left out. */
  insertStateCommit?(commit: StateCommit): MaybePromise<void>;
  /** The branch's latest state version, 0 when it has none. */
  latestStateVersion(branchId: string): MaybePromise<number>;
  /** Commits with `fromVersion <= version <= toVersion`, ascending. */
  getStateCommits(
    branchId: string,
    fromVersion: number,
    toVersion: number,
  ): MaybePromise<StateCommit[]>;
  /** The newest commit meeting every condition, or null. */
  getLatestStateCommit(
    branchId: string,
    conditions: LatestCommitConditions,
  ): MaybePromise<StateCommit | null>;

  /**
   * Deletes the branch's state commits with `version < beforeVersion`, exactly (a driver
   * that stores commits in groups rewrites a group that straddles it); the versions of
   * those kept do not change. Returns how many it deleted. For `Store.sweep`, which keeps
   * the latest commit: `beforeVersion <= latestStateVersion`.
   */
  deleteStateCommits(branchId: string, beforeVersion: number): MaybePromise<number>;

  // ---------------------------------------------------------------- turns

  /** Inserts or replaces the turn of that id. The front door has checked the thread. */
  putTurn(turn: Turn): MaybePromise<void>;
  getTurn(id: string): MaybePromise<Turn | null>;
  /** The thread's turns, newest `startedAt` first (ties: id descending), at most `limit`. */
  listTurns(threadId: string, limit: number): MaybePromise<Turn[]>;
  deleteTurn(id: string): MaybePromise<boolean>;
  /**
   * Deletes turns whose status is not `running` and whose `startedAt < before` (only
   * of `threadId` when given). Returns how many.
   */
  purgeTurns(before: Timestamp, threadId: string | undefined): MaybePromise<number>;

  // ---------------------------------------------------------------- leases

  /**
   * The lease, locked until the session ends (e.g. `SELECT … FOR UPDATE`) so that the
   * front door's read-decide-write is atomic against other sessions. Only called in
   * write sessions. Optional, as `lockBranch` is: without it the front door reads.
   */
  lockLease?(key: string): MaybePromise<StoredLease | null>;
  getLease(key: string): MaybePromise<StoredLease | null>;
  /**
   * Writes the lease. With `insert: true` (no row existed when locked) it inserts only
   * if the key is still absent and returns false, writing nothing, when another session
   * inserted it first (the front door then locks and decides again). Otherwise it
   * replaces the row and returns true.
   */
  putLease(lease: StoredLease, insert: boolean): MaybePromise<boolean>;
  /** Leases with `key > afterKey` (all when null), by key (binary order), at most `limit`. */
  listLeases(afterKey: string | null, limit: number): MaybePromise<StoredLease[]>;

  // ---------------------------------------------------------------- entries

  /**
   * The entry, locked until the session ends (e.g. `SELECT … FOR UPDATE`) so that the
   * front door's compare-and-set is atomic against other sessions. Only called in write
   * sessions. Optional, as `lockLease` is: without it the front door reads.
   */
  lockEntry?(collection: string, id: string): MaybePromise<Entry | null>;
  getEntry(collection: string, id: string): MaybePromise<Entry | null>;
  /**
   * Writes the entry as given. With `insert: true` (no row existed when locked) it
   * inserts only if the key is still absent and returns false, writing nothing, when
   * another session inserted it first (the front door then locks and decides again).
   * Otherwise it replaces the row and returns true.
   */
  putEntry(entry: Entry, insert: boolean): MaybePromise<boolean>;
  /**
   * The collection's entries (only those of `group` when not null) with `id > afterId`
   * (all when null), by id in binary order, at most `limit`.
   */
  listEntries(
    collection: string,
    group: string | null,
    afterId: string | null,
    limit: number,
  ): MaybePromise<Entry[]>;
  /**
   * Deletes the collection's entries of these ids, or of this group; returns the deleted
   * entries' ids and groups (for the front door's notifications).
   */
  deleteEntries(
    collection: string,
    selector: { ids: string[] } | { group: string },
  ): MaybePromise<Array<{ id: string; group: string | null }>>;

  // ---------------------------------------------------------------- memories

  /** Which of these memory ids are already used, in any order. */
  takenMemoryIds(ids: string[]): MaybePromise<string[]>;
  /**
   * Inserts memories (ids free, vectors of the store's width). Returns them as a later
   * read returns them (a driver that stores float32 vectors returns them rounded).
   */
  insertMemories(memories: Memory[]): MaybePromise<Memory[]>;
  getMemory(id: string): MaybePromise<Memory | null>;
  /**
   * Replaces the stored memory of `memory.id` (content, contentHash, metadata,
   * embedding); returns it as a later read returns it.
   */
  replaceMemory(memory: Memory): MaybePromise<Memory>;
  /**
   * Compare-and-set, for `supersedeMemory`: sets the memory's `validTo` and `supersededAt`
   * only if it exists and both are still null (one statement, e.g. `UPDATE … WHERE
   * superseded_at IS NULL AND valid_to IS NULL`, so two sessions superseding one version
   * at once cannot both succeed). False, writing nothing, otherwise.
   */
  closeMemory(id: string, validTo: Timestamp, supersededAt: Timestamp): MaybePromise<boolean>;
  /** Deletes the memories of these ids; returns how many existed. */
  deleteMemories(ids: string[]): MaybePromise<number>;
  /**
   * Memories meeting the filter (see `matchesMemoryFilter`, the reference), ordered by
   * `createdAt` then creation order (`order: 'newest'`: both descending), at most `limit`.
   */
  listMemories(
    filter: DriverMemoryFilter,
    limit: number,
    order: 'newest' | 'oldest',
  ): MaybePromise<Memory[]>;
  countMemories(filter: DriverMemoryFilter): MaybePromise<number>;
  /**
   * The anchors (`branchAnchor`) of the thread's branch-scoped memories (those whose
   * `source.threadId` is `threadId`) that are stored messages of depth at most
   * `maxDepth`, each once, with their depth, in any order. Cost follows the number of
   * such memories, not the table's size.
   */
  branchAnchors(
    threadId: string,
    maxDepth: number,
  ): MaybePromise<Array<{ id: string; depth: number }>>;
  /** Memories with `id > afterId` (all when null), by id (binary order), at most `limit`. */
  scanMemories(afterId: string | null, limit: number): MaybePromise<Memory[]>;
  /**
   * Memories with an embedding meeting the filter, nearest to `vector` by cosine
   * similarity first, at most `count` (the front door asks for a margin beyond what it
   * returns and re-scores the candidates in float64, so float32 or approximate distances
   * are fine). With `minSimilarity`, a driver may leave out the candidates whose
   * (approximate) similarity is below it; the front door keeps only those whose exact
   * score reaches the threshold. A zero vector counts as similarity 0.
   */
  vectorCandidates(query: {
    vector: number[];
    filter: DriverMemoryFilter;
    count: number;
    minSimilarity?: number;
  }): MaybePromise<MemoryRow[]>;
  /**
   * Memories meeting the filter whose text contains at least one of `terms` (lower-case
   * words from `keywordTokens`, stop words already removed, never empty), best first by
   * the driver's relevance (BM25 or equivalent; ties: creation order), at most `count`.
   */
  keywordCandidates(query: {
    terms: string[];
    filter: DriverMemoryFilter;
    count: number;
  }): MaybePromise<KeywordCandidate[]>;
  getEmbeddingSpace(): MaybePromise<EmbeddingSpace | null>;
  /** Records the store's embedding space (replacing the one recorded). */
  setEmbeddingSpace(space: EmbeddingSpace): MaybePromise<void>;
  /** The cached embeddings of these content hashes for one embedder. */
  getCachedEmbeddings(
    embedderId: string,
    contentHashes: string[],
  ): MaybePromise<Map<string, number[]>>;
  /** Inserts or replaces cached embeddings, stored exactly (float64); one entry per hash. */
  putCachedEmbeddings(
    embedderId: string,
    entries: Array<{ contentHash: string; embedding: number[] }>,
  ): MaybePromise<void>;

  // ---------------------------------------------------------------- forgetting

  /**
   * Records tombstones; one whose kind and key are already recorded keeps its own `at`.
   * They are never deleted.
   */
  putTombstones(tombstones: Tombstone[]): MaybePromise<void>;
  /** The recorded tombstones among these keys, in any order. */
  findTombstones(keys: TombstoneKey[]): MaybePromise<Tombstone[]>;
  /**
   * Optional, for a driver whose write sessions run side by side: locks these keys until
   * the session ends (e.g. `pg_advisory_xact_lock_shared`, or `pg_advisory_xact_lock` when
   * `exclusive`), taking them in a fixed order. A write that could bring a subject back
   * takes them shared before it looks for tombstones; `forget` takes them exclusive while
   * it records tombstones and deletes, so that a write that looked before the tombstone
   * was there commits before the forget deletes, and one that looks after it sees it.
   * Drivers whose write sessions exclude each other leave it out.
   */
  lockSubjects?(keys: TombstoneKey[], exclusive: boolean): MaybePromise<void>;
  // ---------------------------------------------------------------- sweeping

  /**
   * Optional, for `Store.sweep`, which reads a page of threads at once: the rows
   * `SweepFacts` lists, for these threads, in a few statements (set-based, not a series
   * per thread). Only called in write sessions. A driver with `lockBranch` first locks, as
   * they do, the threads' run leases (as `lockLease`) and then their branches (as
   * `lockBranch`, waiting at most `lockTimeoutMs` in all), so that nothing the sweep decides
   * on changes before the session ends. Without it the front door calls the methods above
   * thread by thread.
   */
  sweepFacts?(threadIds: string[], lockTimeoutMs: number): MaybePromise<SweepFacts>;
  /**
   * Optional: `getLatestStateCommit` for each query, answers in the queries' order, in a
   * few statements. Without it the front door asks query by query.
   */
  getLatestStateCommits?(queries: BranchCommitQuery[]): MaybePromise<Array<StateCommit | null>>;
  /**
   * Optional, for `Store.sweep`: the deletes `SweepDeletes` lists, in a few statements
   * (set-based). Without it the front door calls `purgeTurns`, `deleteBranch` and
   * `deleteStateCommits` one by one.
   */
  sweepDelete?(deletes: SweepDeletes): MaybePromise<SweepDeleted>;

  /** How many messages, branches, state commits, checkpoints and turns the thread has. */
  countThreadRows(threadId: string): MaybePromise<ThreadRowCounts>;
  /** The content hashes among these that a stored memory has, in any order. */
  memoryHashesInUse(contentHashes: string[]): MaybePromise<string[]>;
  /** Deletes the leases of these keys; returns how many existed. */
  deleteLeases(keys: string[]): MaybePromise<number>;
  /** Deletes the cached embeddings of these content hashes, of every embedder; returns how many. */
  deleteCachedEmbeddings(contentHashes: string[]): MaybePromise<number>;

  // ---------------------------------------------------------------- data keys

  /** The stored data keys of these tenants, in any order. */
  getDataKeys(tenants: Tenant[]): MaybePromise<DataKeyRow[]>;
  /** Inserts a tenant's data key. False, writing nothing, when the tenant has one already. */
  insertDataKey(row: DataKeyRow): MaybePromise<boolean>;
  /** Deletes the data keys of these tenants (crypto-shredding); returns how many existed. */
  deleteDataKeys(tenants: Tenant[]): MaybePromise<number>;
  /**
   * Data keys after `after` (all when null) by kind then key (binary order), at most
   * `limit`: a rotation's pages.
   */
  listDataKeys(after: Tenant | null, limit: number): MaybePromise<DataKeyRow[]>;
  /**
   * Compare-and-set, for a rotation: replaces the tenant's `keyId` and `wrapped` only if
   * its stored `wrapped` is still `expectedWrapped`. False, writing nothing, otherwise.
   */
  replaceDataKey(row: DataKeyRow, expectedWrapped: string): MaybePromise<boolean>;

  // ---------------------------------------------------------------- session

  /**
   * Runs `fn` so that, if it throws, what it wrote is undone while the session goes on
   * (a SQL savepoint). The front door wraps each call made inside `transaction(fn)` in
   * one, so a failed call changes nothing even when the caller catches and continues.
   */
  savepoint<T>(fn: () => Promise<T>): Promise<T>;
  /**
   * Optional: tells other store instances (other processes) about the changes this write
   * session made, called once just before the session commits. Each payload is one change
   * as text, to hand unchanged to the `listen` callbacks of every instance (this one's
   * included: the front door skips its own), only if the session commits: sent inside the
   * transaction (e.g. `NOTIFY`) or by `run` once it committed. Drivers whose notifications
   * stay in the process leave it out.
   */
  publish?(payloads: string[]): MaybePromise<void>;
}

/**
 * What an adapter implements. `createStore(driver)` turns it into a `Store`.
 *
 * @example
 * ```ts
 * import { createStore, type Driver } from '@cairn/store/adapter';
 *
 * export function createMyStore(options: MyOptions): Store {
 *   const driver: Driver = new MyDriver(options);
 *   return createStore(driver);
 * }
 * ```
 */
export interface Driver {
  /** What the store can do; the front door exposes it as `store.capabilities`. */
  readonly capabilities: StoreCapabilities;
  /**
   * Opens a session, runs `fn` with it and ends it: a write session commits when `fn`
   * resolves and rolls back when it throws (rethrowing). The front door never nests
   * calls to `run` (a nested `transaction()` joins the session it already has) and
   * never calls session methods after `fn` settled. `run` may be called again before an
   * earlier session ended; a driver that can hold only one session at a time queues
   * them itself. Waiting for a lock held by another connection or process must not
   * block the event loop.
   */
  run<T>(fn: (session: DriverSession) => Promise<T>, options: SessionOptions): Promise<T>;
  /** Brings the schema up to date. Idempotent; the adapter also runs it on open. */
  migrate(): Promise<void>;
  /**
   * Releases what the driver opened itself (a pool it created, a database file it
   * opened), not what it was given. Called once, after every session ended.
   */
  close(): Promise<void>;
  /**
   * Optional: turns a failure of the database or its client into a `CairnError`, or
   * returns undefined to let the front door wrap it as `UNAVAILABLE` (with the error as
   * `cause`). Use it for failures with a better code, e.g. a lock wait that gave up
   * (`TIMEOUT`) or a unique violation from a concurrent writer (`CONFLICT`); build them
   * with the factories of `@cairn/core` and keep the driver error as `cause`.
   */
  translateError?(error: unknown): CairnError | undefined;
  /**
   * Optional: makes sure deleted data is gone from where the database keeps deleted bytes
   * (free pages, a write-ahead log, index segments that still hold deleted terms). The
   * front door calls it after `Store.forget` deleted everything, outside any session;
   * `memories` says whether the forget was of memories (an entity or a world).
   */
  scrub?(what: { memories: boolean }): Promise<void>;
  /**
   * Optional, for `notifications: 'cluster'`: calls `onPayload` with every payload any
   * store instance (any process) passed to `DriverSession.publish`. Returns the function
   * that stops listening. The front door calls it once, on the first `subscribe`.
   */
  listen?(onPayload: (payload: string) => void): () => void;
  /**
   * Optional: how many sessions of this driver wait for a connection right now (a pool's
   * queue). `Store.sweep` defers its next thread while any do, so that background work
   * never takes a connection a caller is waiting for.
   */
  queuedSessions?(): number;
  /**
   * Optional: an object (e.g. the connection) that stores sharing the same database
   * through this process give alike. Every store with that scope hears the changes any
   * of them commits, so a driver needs no notification machinery of its own for them.
   */
  readonly changeScope?: object;
}
