import {
  applyUpdate,
  type Branch,
  CairnError,
  type Checkpoint,
  checkKeys,
  conflict,
  defineState,
  invalidArgument,
  type JsonObject,
  type JsonValue,
  keysOf,
  type Message,
  newId,
  notFound,
  type StateOf,
  type StateSchema,
  type Thread as ThreadRecord,
  type ThreadStateOf,
  type ThreadUpdateOf,
  type Timestamp,
  type UpdateOf,
} from '@cairn/core';
import {
  DEFAULT_LOCK_TIMEOUT_MS,
  type NewMessage,
  type Store,
  type StoreChange,
} from '@cairn/store';
import { checkStore, normalizeNewMessages } from '@cairn/store/adapter';
import { forkBranchName } from './branch-names.js';
import type { ThreadEvent, ThreadListener } from './events.js';
import { SerialQueue } from './queue.js';
import { retryAttempts, retryOnConflict } from './retry.js';
import { acquireRunLease, type RunRecord, runKey, runRecord, type ThreadRun } from './run.js';
import {
  initialLoaded,
  isOnChain,
  jsonSize,
  type LoadedState,
  needsVersionSnapshot,
  type ResolvedSnapshotPolicy,
  readBranchState,
  readLineageState,
  replay,
  resolveSnapshotPolicy,
  type SnapshotPolicy,
  snapshotOf,
  wantsSnapshot,
} from './state-log.js';
import { ThreadTurn } from './turn.js';

/** A message to add: stored when `save()` runs. Giving the id of a stored message makes it an edit. */
export interface MessageInput {
  id?: string;
  role: string;
  type?: string | null;
  data: JsonValue;
  createdAt?: Timestamp;
}

/** A message added but not saved yet. */
export interface PendingMessage {
  id: string;
  role: string;
  type: string | null;
  data: JsonValue;
  createdAt?: Timestamp;
  /** The caller chose the id (so it may name a stored message: an edit). */
  readonly callerId: boolean;
}

const MESSAGE_INPUT_KEYS = keysOf<MessageInput>()(['id', 'role', 'type', 'data', 'createdAt']);

/** The schema of a thread opened without one: no state fields, plain history. */
const NO_STATE = defineState({});
type NoState = typeof NO_STATE;

export interface OpenThreadOptions<S extends StateSchema<any> = NoState> {
  /**
   * The state schema; `thread.state` holds its thread-scoped fields. Without one the
   * thread has messages, branches, checkpoints and runs, and no state fields.
   */
  schema?: S;
  /** Opens this thread, creating it (with this id) when it does not exist. A new thread when omitted. */
  threadId?: string;
  /** Used when the thread is created. */
  resourceId?: string | null;
  /** Used when the thread is created. */
  title?: string | null;
  /** Work on this branch (and make it active). Default: the thread's active branch, or a new `main`. */
  branch?: string;
  /** Finished turns older than this are purged when a turn finishes. Default 24 h. */
  turnRetentionMs?: number;
  /** When a state commit also stores a full snapshot. */
  snapshotPolicy?: SnapshotPolicy;
  /**
   * Attempts after a conflict with another writer (a head or state version moved, a
   * branch name taken) before `CONFLICT` is thrown. Default 50.
   */
  maxRetries?: number;
  /**
   * How long a save or update that lost a race waits in line for the branch's lock
   * (`store.lockBranch`) before `TIMEOUT`. Default 10 000 ms.
   */
  lockTimeoutMs?: number;
}

export interface SaveOptions {
  /** `'rebase'` (default): chain after whatever another writer saved. `'fail'`: throw `CONFLICT`. */
  onConflict?: 'rebase' | 'fail';
}

const DEFAULT_RETENTION_MS = 24 * 60 * 60 * 1000;
const MAX_LOCK_TIMEOUT_MS = 3_600_000;

const OPEN_THREAD_KEYS = keysOf<OpenThreadOptions>()([
  'schema',
  'threadId',
  'resourceId',
  'title',
  'branch',
  'turnRetentionMs',
  'snapshotPolicy',
  'maxRetries',
  'lockTimeoutMs',
]);

/** Every option of `openThread`, checked before the store is touched. */
function checkOpenThreadArguments(store: unknown, options: unknown): void {
  checkStore(store, 'openThread: the first argument');
  if (typeof options !== 'object' || options === null) {
    throw invalidArgument('openThread options must be an object');
  }
  checkKeys(options, 'openThread options', OPEN_THREAD_KEYS);
  const o = options as OpenThreadOptions<StateSchema<any>>;
  if (o.schema !== undefined && typeof o.schema?.initial !== 'function') {
    throw invalidArgument('openThread: schema must be made with defineState');
  }
  if (
    o.turnRetentionMs !== undefined &&
    !(Number.isFinite(o.turnRetentionMs) && o.turnRetentionMs >= 0)
  ) {
    throw invalidArgument(
      `turnRetentionMs must be a number >= 0, got ${String(o.turnRetentionMs)}`,
    );
  }
  const t = o.lockTimeoutMs;
  if (
    t !== undefined &&
    !(typeof t === 'number' && Number.isInteger(t) && t >= 0 && t <= MAX_LOCK_TIMEOUT_MS)
  ) {
    throw invalidArgument(
      `lockTimeoutMs must be an integer from 0 to ${MAX_LOCK_TIMEOUT_MS}, got ${String(t)}`,
    );
  }
  retryAttempts(o.maxRetries);
  resolveSnapshotPolicy(o.snapshotPolicy);
}

/**
 * Opens a thread (creating it, and its `main` branch, when needed) and returns its engine.
 *
 * @example
 * ```ts
 * const Research = defineState({
 *   objective: field<string>(),
 *   keyInsights: field<string[]>({ reducer: reducers.appendUnique, default: () => [] }),
 * });
 * const thread = await openThread(store, { schema: Research, resourceId: 'user-1' });
 * thread.add({ role: 'user', data: { text: 'What is a cairn?' } });
 * await thread.save();
 * await thread.update({ keyInsights: ['stacked stones mark a trail'] });
 * ```
 */
export async function openThread<S extends StateSchema<any> = NoState>(
  store: Store,
  options: OpenThreadOptions<S> = {},
): Promise<CairnThread<S>> {
  checkOpenThreadArguments(store, options);
  const attempts = retryAttempts(options.maxRetries);
  const { threadId } = options;
  // A new thread and its first branch are one transaction (one commit), and the branch
  // has no state to read. A CONFLICT: another engine created this thread at the same
  // moment; the next attempt opens it.
  const opened = await retryOnConflict(
    async () => {
      const found = threadId === undefined ? null : await store.getThread(threadId);
      if (found) return { record: found, branch: null };
      const created = await store.createThreadWithBranch({
        ...(threadId === undefined ? {} : { id: threadId }),
        resourceId: options.resourceId ?? null,
        title: options.title ?? null,
        branch: options.branch ?? 'main',
      });
      return { record: created.thread, branch: created.branch };
    },
    { attempts },
  );
  const { record } = opened;
  const branch = opened.branch ?? (await openBranch(store, record.id, options.branch, attempts));
  const thread = new CairnThread<S>(store, record, options, branch);
  await thread.load({ fresh: opened.branch !== null });
  return thread;
}

/** The named branch, or the active one; a thread with no branch gets one (`main` by default). */
function openBranch(
  store: Store,
  threadId: string,
  name: string | undefined,
  attempts: number,
): Promise<Branch> {
  // A CONFLICT: another engine created the branch (or activated another) meanwhile.
  return retryOnConflict(
    async () => {
      if (name !== undefined) {
        const b = await store.getBranch(threadId, name);
        if (b) return b.isActive ? b : store.setActiveBranch(b.id);
        if ((await store.listBranches(threadId)).length > 0) {
          throw new CairnError(
            'NOT_FOUND',
            `thread ${threadId} has no branch named ${JSON.stringify(name)}`,
            {
              details: { threadId, branch: name },
            },
          );
        }
      } else {
        const active = await store.getActiveBranch(threadId);
        if (active) return active;
      }
      return store.createBranch({
        threadId,
        name: name ?? 'main',
        headMessageId: null,
        activate: true,
      });
    },
    { attempts },
  );
}

/**
 * The engine of one thread: the message graph and its branches, checkpoints, the typed
 * thread state with its commits, turns and runs. Writes go through one queue, in call
 * order; a failed call does not block the ones after it.
 *
 * @example
 * ```ts
 * const thread = await openThread(store, { schema: Research });
 * thread.add([{ role: 'user', data: 'hi' }, { role: 'assistant', data: 'hello' }]);
 * const [hi] = await thread.save();
 * await thread.rewind(hi!.id);          // now on main-v2, whose state is the state as of `hi`
 * const off = thread.subscribe((e) => console.log(e.kind));
 * ```
 */
export class CairnThread<S extends StateSchema<any>> {
  readonly #store: Store;
  readonly #schema: S;
  readonly #record: ThreadRecord;
  readonly #retentionMs: number;
  readonly #policy: ResolvedSnapshotPolicy;
  /** Attempts of an operation that conflicts with other writers, the first included. */
  readonly #attempts: number;
  readonly #lockTimeoutMs: number;
  readonly #listeners = new Set<ThreadListener>();
  /** Every call that writes or refreshes what this engine holds runs through it, in order. */
  readonly #queue = new SerialQueue();
  #branch: Branch;
  #pending: PendingMessage[] = [];
  #loaded: LoadedState;
  #unsubscribe: (() => void) | null = null;
  #closed = false;
  #ownWrites = 0;
  /**
   * What the latest change notifications said the active branch's head and state version
   * are (undefined: not said): a queued refresh that finds them already held, as after
   * this engine's own writes, skips its read.
   */
  #heard: { head?: string | null; version?: number } = {};

  /** @internal — use `openThread`. */
  constructor(store: Store, record: ThreadRecord, options: OpenThreadOptions<S>, branch: Branch) {
    this.#store = store;
    this.#schema = options.schema ?? (NO_STATE as unknown as S);
    this.#record = record;
    this.#retentionMs = options.turnRetentionMs ?? DEFAULT_RETENTION_MS;
    this.#policy = resolveSnapshotPolicy(options.snapshotPolicy);
    this.#attempts = retryAttempts(options.maxRetries);
    this.#lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;
    this.#branch = branch;
    this.#loaded = initialLoaded(this.#initial(), this.#schema.version);
  }

  /**
   * @internal Loads the active branch's state (a `fresh` branch, just created, has none)
   * and starts listening to the store.
   */
  async load(options: { fresh: boolean }): Promise<void> {
    if (!options.fresh) this.#loaded = await this.#loadBranch(this.#branch);
    this.#unsubscribe = this.#store.subscribe(this.#record.id, (change) =>
      this.#onStoreChange(change),
    );
  }

  // ------------------------------------------------------------------ reading

  get id(): string {
    return this.#record.id;
  }

  get resourceId(): string | null {
    return this.#record.resourceId;
  }

  /** The active branch as this engine sees it. */
  get branch(): Branch {
    return { ...this.#branch };
  }

  get branchId(): string {
    return this.#branch.id;
  }

  get branchName(): string {
    return this.#branch.name;
  }

  /** The id of the active branch's head message (null on an empty branch). */
  get head(): string | null {
    return this.#branch.headMessageId;
  }

  /** Messages added and not saved yet. */
  get pending(): readonly PendingMessage[] {
    return this.#pending.map((m) => ({ ...m }));
  }

  /** The thread-scoped state of the active branch, kept in memory. */
  get state(): ThreadStateOf<S> {
    return this.#loaded.state as ThreadStateOf<S>;
  }

  /** The active branch's state version (0 before its first commit). */
  get stateVersion(): number {
    return this.#loaded.version;
  }

  /**
   * A token that changes whenever the active branch, its head or its state changes:
   * a cache key for context composed from this thread.
   */
  get version(): string {
    return `${this.#branch.id}:${this.#branch.headMessageId ?? ''}:${this.#loaded.version}`;
  }

  /**
   * The active branch's messages, root to head (with `limit`, the ones nearest the head).
   * Reads the branch from the store, so it shows what other writers saved.
   */
  async history(options: { limit?: number } = {}): Promise<Message[]> {
    this.#assertOpen();
    checkKeys(options, 'history options', ['limit']);
    const fresh = await this.#store.getBranchById(this.#branch.id);
    if (fresh && fresh.headMessageId !== this.#branch.headMessageId) {
      delete this.#heard.head;
      void this.#queueHeadRefresh();
    }
    const head = fresh?.headMessageId ?? this.#branch.headMessageId;
    if (head === null) return [];
    return this.#store.getChain(head, options.limit === undefined ? {} : { limit: options.limit });
  }

  /** The thread's branches, in creation order. */
  async branches(): Promise<Branch[]> {
    this.#assertOpen();
    return this.#store.listBranches(this.#record.id);
  }

  /** The thread's checkpoints, in creation order. */
  async checkpoints(): Promise<Checkpoint[]> {
    this.#assertOpen();
    return this.#store.listCheckpoints(this.#record.id);
  }

  /**
   * The thread state as of message `messageId` on the active branch's lineage: the last
   * commit at or before it. `NOT_FOUND` when the message is not on that lineage.
   */
  async stateAt(messageId: string): Promise<ThreadStateOf<S>> {
    this.#assertOpen();
    const m = await this.#threadMessage(messageId);
    const branch = (await this.#store.getBranchById(this.#branch.id)) ?? this.#branch;
    if (!(await this.#onChain(branch.headMessageId, m))) {
      throw new CairnError(
        'NOT_FOUND',
        `message ${messageId} is not on branch ${JSON.stringify(branch.name)}`,
        {
          details: { messageId, branch: branch.name },
        },
      );
    }
    return (await this.#stateOnLineage(branch, m.depth)).state as ThreadStateOf<S>;
  }

  /** The thread's run record (null before the first run). */
  async runStatus(): Promise<RunRecord | null> {
    this.#assertOpen();
    const lease = await this.#store.getLease(runKey(this.#record.id));
    return lease ? runRecord(lease) : null;
  }

  /**
   * Listens to this thread: `messages`, `state`, `branch` and `checkpoint` events, for
   * this engine's own changes (`source: 'local'`) and others' (`'remote'`, relayed from
   * the store's notifications). Returns the function that stops listening.
   */
  subscribe(listener: ThreadListener): () => void {
    if (typeof listener !== 'function')
      throw new CairnError('INVALID_ARGUMENT', 'subscribe needs a function');
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  // ------------------------------------------------------------------ messages

  /**
   * Adds messages to the pending list, stored by `save()`. Checked now, by the same rules
   * the store applies when saving (`INVALID_ARGUMENT`, or `CONFLICT` for an id given
   * twice), so a message `save()` would refuse never becomes pending.
   */
  add(message: MessageInput | MessageInput[]): PendingMessage[] {
    this.#assertOpen();
    const list: unknown[] = Array.isArray(message) ? message : [message];
    list.forEach((m, i) => {
      if (typeof m === 'object' && m !== null)
        checkKeys(m, Array.isArray(message) ? `add: messages[${i}]` : 'add', MESSAGE_INPUT_KEYS, {
          parentId: 'a pending message chains after the head; rewind() first to save elsewhere',
          threadId: 'a message is added to this thread',
        });
    });
    const threadId = this.#record.id;
    const checked = normalizeNewMessages(
      list.map((m) =>
        typeof m === 'object' && m !== null
          ? ({ ...m, threadId, parentId: null } as NewMessage)
          : (m as NewMessage),
      ),
      Date.now(),
    );
    const pendingIds = new Set(this.#pending.map((p) => p.id));
    const added = checked.map((m, i): PendingMessage => {
      const input = list[i] as MessageInput;
      if (pendingIds.has(m.id)) {
        throw conflict(`message id ${JSON.stringify(m.id)} is already pending`, { id: m.id });
      }
      const p: PendingMessage = {
        id: m.id,
        role: m.role,
        type: m.type,
        data: m.data,
        callerId: input.id !== undefined,
      };
      if (input.createdAt !== undefined) p.createdAt = m.createdAt;
      return p;
    });
    this.#pending.push(...added);
    return added.map((p) => ({ ...p }));
  }

  /**
   * Stores all pending messages as one chain after the head and moves the head, in one
   * transaction. When another writer moved the head first, the chain is re-parented onto
   * the new head and saved again (or `CONFLICT` with `onConflict: 'fail'`). A first pending
   * message carrying a stored message's id is an edit: the engine rewinds to that
   * message's parent (a new branch, made active) and saves the edit there with a new id.
   */
  save(options: SaveOptions = {}): Promise<Message[]> {
    checkKeys(options, 'save options', keysOf<SaveOptions>()(['onConflict']));
    if (options.onConflict !== undefined && !['rebase', 'fail'].includes(options.onConflict))
      throw invalidArgument(
        `onConflict must be 'rebase' or 'fail', got ${JSON.stringify(options.onConflict)}`,
      );
    // What is pending now; messages added after this call wait for the next save.
    const ids = new Set(this.#pending.map((p) => p.id));
    return this.#serial(() => this.#save(options, ids));
  }

  async #save(options: SaveOptions, ids: Set<string>): Promise<Message[]> {
    const pending = this.#pending.filter((p) => ids.has(p.id));
    if (pending.length === 0) return [];
    // Edits: only the first pending message may name a stored message.
    let edit: Message | null = null;
    for (let i = 0; i < pending.length; i++) {
      const p = pending[i]!;
      if (!p.callerId) continue;
      const stored = await this.#store.getMessage(p.id);
      if (!stored) continue;
      if (stored.threadId !== this.#record.id) {
        throw new CairnError('INVALID_ARGUMENT', `message id ${p.id} belongs to another thread`, {
          details: { id: p.id },
        });
      }
      if (i > 0) {
        throw new CairnError(
          'INVALID_ARGUMENT',
          `only the first pending message can be an edit of a stored message (${p.id} is #${i})`,
        );
      }
      edit = stored;
    }
    if (edit) {
      const parent = edit.parentId === null ? null : await this.#threadMessage(edit.parentId);
      await this.#fork(parent, { activate: true });
      const renamed = { ...pending[0]!, id: newId(), callerId: false };
      this.#pending = this.#pending.map((p) => (p.id === edit!.id ? renamed : p));
      ids.add(renamed.id);
    }
    const batch = this.#pending.filter((p) => ids.has(p.id));
    const batchIds = new Set(batch.map((p) => p.id));
    const chainOf = (head: string | null): NewMessage[] =>
      batch.map((p, i, all) => {
        const m: NewMessage = {
          id: p.id,
          threadId: this.#record.id,
          parentId: i === 0 ? head : all[i - 1]!.id,
          role: p.role,
          type: p.type,
          data: p.data,
        };
        if (p.createdAt !== undefined) m.createdAt = p.createdAt;
        return m;
      });
    let head = this.#branch.headMessageId;
    const branchId = this.#branch.id;
    const onBranch = (store: Store) => store.addMessagesOnBranch(branchId, head, chainOf(head));
    const stored = await retryOnConflict(
      (attempt) =>
        this.#write(() =>
          attempt === 0
            ? onBranch(this.#store)
            : // After a lost race, wait in line for the branch: the head read under its
              // lock cannot move before this transaction commits.
              this.#store.transaction(async (tx) => {
                head = (await tx.lockBranch(branchId, { timeoutMs: this.#lockTimeoutMs }))
                  .headMessageId;
                return onBranch(tx);
              }),
        ),
      {
        attempts: options.onConflict === 'fail' ? 1 : this.#attempts,
        // Only a moved head (the CONFLICT naming the branch) is retried, re-parented onto
        // the head read under the branch's lock; any other CONFLICT is the caller's.
        onConflict: async (e, { final }) => {
          if (e.details.branchId !== branchId) throw e;
          const fresh = await this.#store.getBranchById(this.#branch.id);
          if (!fresh) {
            // Deleted meanwhile, or forgotten: a write on it makes the store say which
            // (NOT_FOUND, or FORGOTTEN with the forget's tombstone).
            await onBranch(this.#store);
            throw notFound('branch', this.#branch.id);
          }
          if (final) {
            this.#setHead(fresh);
            throw new CairnError(
              'CONFLICT',
              `branch ${JSON.stringify(fresh.name)} moved to ${fresh.headMessageId} while saving`,
              {
                cause: e,
                details: {
                  branchId: fresh.id,
                  expectedHeadId: head,
                  headMessageId: fresh.headMessageId,
                },
              },
            );
          }
          head = fresh.headMessageId;
        },
      },
    );
    this.#pending = this.#pending.filter((p) => !batchIds.has(p.id));
    this.#branch = { ...stored.branch, isActive: this.#branch.isActive };
    this.#emit({
      kind: 'messages',
      threadId: this.#record.id,
      branchId: this.#branch.id,
      headMessageId: this.#branch.headMessageId,
      messages: stored.messages,
      source: 'local',
    });
    return stored.messages;
  }

  // ------------------------------------------------------------------ branches

  /**
   * Makes a new branch whose head is `messageId`, named by `forkBranchName` (`main` ->
   * `main-v2`, and a rewind on `main-v2` -> `main-v3`, ...), switches to it and drops
   * pending messages. Its state starts as the state as of that message. `rewind(null)`
   * starts an empty branch with the initial state; the old branches keep their messages.
   */
  rewind(messageId: string | null): Promise<Branch> {
    return this.#serial(async () => {
      const m = messageId === null ? null : await this.#threadMessage(messageId);
      const b = await this.#fork(m, { activate: true });
      this.#pending = [];
      return b;
    });
  }

  /** Makes a branch at the current head without switching to it; pending messages stay. */
  btw(): Promise<Branch> {
    return this.#serial(async () => {
      const fresh = (await this.#store.getBranchById(this.#branch.id)) ?? this.#branch;
      this.#setHead(fresh);
      const head =
        fresh.headMessageId === null ? null : await this.#threadMessage(fresh.headMessageId);
      return this.#fork(head, { activate: false });
    });
  }

  /** Activates the named branch, loads its state and drops pending messages. */
  switchBranch(name: string): Promise<Branch> {
    return this.#serial(async () => {
      const b = await this.#store.getBranch(this.#record.id, name);
      if (!b) {
        throw new CairnError(
          'NOT_FOUND',
          `thread ${this.#record.id} has no branch named ${JSON.stringify(name)}`,
          {
            details: { branch: name },
          },
        );
      }
      // Its state is read first: a state this engine cannot read (SCHEMA_TOO_NEW) leaves
      // the active branch as it was.
      const loaded = await this.#loadBranch(b);
      const active = await this.#write(() => this.#store.setActiveBranch(b.id));
      this.#branch = active;
      this.#loaded = loaded;
      // Commits made meanwhile were announced for a branch this engine was not on yet.
      await this.#catchUp();
      this.#pending = [];
      this.#emit({
        kind: 'branch',
        threadId: this.#record.id,
        branchId: active.id,
        name: active.name,
        action: 'switched',
        source: 'local',
      });
      return { ...active };
    });
  }

  // ------------------------------------------------------------------ checkpoints

  /** Bookmarks a message (default the head) under `name`; an existing name moves. */
  checkpoint(name: string, messageId?: string): Promise<Checkpoint> {
    return this.#serial(async () => {
      const target = messageId ?? this.#branch.headMessageId;
      if (target === null)
        throw new CairnError(
          'INVALID_ARGUMENT',
          'cannot checkpoint an empty branch: no head message',
        );
      const cp = await this.#write(() =>
        this.#store.saveCheckpoint({ threadId: this.#record.id, name, messageId: target }),
      );
      this.#emit({
        kind: 'checkpoint',
        threadId: this.#record.id,
        name: cp.name,
        messageId: cp.messageId,
        source: 'local',
      });
      return cp;
    });
  }

  /** `rewind` to the checkpoint's message: a new branch; no existing branch moves. */
  restore(name: string): Promise<Branch> {
    return this.#serial(async () => {
      const cp = await this.#store.getCheckpoint(this.#record.id, name);
      if (!cp) {
        throw new CairnError(
          'NOT_FOUND',
          `thread ${this.#record.id} has no checkpoint named ${JSON.stringify(name)}`,
          {
            details: { checkpoint: name },
          },
        );
      }
      const m = await this.#threadMessage(cp.messageId);
      const b = await this.#fork(m, { activate: true });
      this.#pending = [];
      return b;
    });
  }

  // ------------------------------------------------------------------ state

  /**
   * Merges `update` into the thread state through the schema's reducers and commits it.
   * Calls apply in call order, one at a time. On a version conflict with another
   * process the engine re-reads and re-applies the update, up to `maxRetries` times.
   * `INVALID_UPDATE` for a bad update, before anything is written.
   */
  update(update: ThreadUpdateOf<S>): Promise<ThreadStateOf<S>> {
    return this.#serial(() => this.#update(update as JsonObject));
  }

  async #update(update: JsonObject): Promise<ThreadStateOf<S>> {
    if (typeof update !== 'object' || update === null || Array.isArray(update)) {
      throw new CairnError('INVALID_UPDATE', 'a state update must be a plain object of fields');
    }
    // fromEntries keeps every key as data (a "__proto__" too), so applyUpdate can name it.
    const clean = Object.fromEntries(
      Object.entries(update).filter(([, v]) => v !== undefined),
    ) as JsonObject;
    // Measured after applyUpdate checked the update: JSON.stringify of a value nested too
    // deep overflows the stack, where applyUpdate's check answers INVALID_UPDATE.
    let updateBytes = 0;
    /** Applies the update to the state as loaded and commits it as the next version. */
    const commit = async (store: Store) => {
      const base = this.#loaded;
      const next = applyUpdate(this.#schema, base.state as StateOf<S>, clean as UpdateOf<S>, {
        scope: 'thread',
      });
      if (next.changed.length === 0) return { base, next, snapshot: false };
      updateBytes = jsonSize(clean);
      // A state read from an older schema version is written whole, recording the running
      // version: the commits after it are folded with this version's reducers.
      const snapshot =
        needsVersionSnapshot(this.#schema, base) || wantsSnapshot(this.#policy, base, updateBytes);
      await store.appendStateCommit(
        {
          branchId: this.#branch.id,
          messageId: this.#branch.headMessageId,
          update: clean,
          snapshot: snapshot ? snapshotOf(this.#schema, next.state as JsonObject) : null,
        },
        base.version,
      );
      return { base, next, snapshot };
    };
    const changed = await retryOnConflict(
      async (attempt) => {
        const { base, next, snapshot } = await this.#write(() =>
          attempt === 0
            ? commit(this.#store)
            : // After a lost race, wait in line for the branch: the commits and head read
              // under its lock stay the latest until this transaction commits.
              this.#store.transaction(async (tx) => {
                const locked = await tx.lockBranch(this.#branch.id, {
                  timeoutMs: this.#lockTimeoutMs,
                });
                this.#setHead(locked);
                await this.#catchUp(tx);
                return commit(tx);
              }),
        );
        if (next.changed.length === 0) return next.changed;
        const state = next.state as JsonObject;
        this.#loaded = snapshot
          ? { ...initialLoaded(state, this.#schema.version), version: base.version + 1 }
          : {
              state,
              stored: state,
              schemaVersion: base.schemaVersion,
              version: base.version + 1,
              commitsSinceSnapshot: base.commitsSinceSnapshot + 1,
              bytesSinceSnapshot: base.bytesSinceSnapshot + updateBytes,
              snapshotBytes: base.snapshotBytes,
            };
        return next.changed;
      },
      {
        attempts: this.#attempts,
        // Attempts after the first re-apply the update on the latest state, under the lock.
        onConflict: async (e, { attempt, final }) => {
          if (final) {
            throw new CairnError(
              'CONFLICT',
              `state of branch ${JSON.stringify(this.#branch.name)} kept changing: gave up after ${attempt + 1} attempts`,
              { cause: e, details: { branchId: this.#branch.id, attempts: attempt + 1 } },
            );
          }
        },
      },
    );
    if (changed.length > 0) {
      this.#emit({
        kind: 'state',
        threadId: this.#record.id,
        branchId: this.#branch.id,
        version: this.#loaded.version,
        changed,
        source: 'local',
      });
    }
    return this.state;
  }

  // ------------------------------------------------------------------ turns and runs

  /** Starts a turn: turn-scoped fields start from their defaults. Stored with `putTurn`. */
  async beginTurn(
    options: { messageId?: string | null; source?: string | null; userId?: string | null } = {},
  ): Promise<ThreadTurn<S>> {
    this.#assertOpen();
    checkKeys(options, 'beginTurn options', ['messageId', 'source', 'userId']);
    const messageId = options.messageId ?? null;
    if (messageId !== null) await this.#threadMessage(messageId);
    const record = await this.#store.putTurn({
      id: newId(),
      threadId: this.#record.id,
      messageId,
      source: options.source ?? null,
      userId: options.userId ?? null,
      status: 'running',
      state: this.#schema.initial('turn') as JsonObject,
      steps: [],
      startedAt: Date.now(),
      finishedAt: null,
    });
    return new ThreadTurn(this.#store, this.#schema, record, async () => {
      await this.#store.purgeTurns({
        before: Date.now() - this.#retentionMs,
        threadId: this.#record.id,
      });
    });
  }

  /**
   * Takes the thread's run (one at a time): `CONFLICT` while another owner's run is
   * live, or with `waitMs`, waits up to that long for it to end (`TIMEOUT` then; waiters
   * of one store take turns in the order they asked); an expired one is taken over and
   * recorded as `stale_recovered`.
   */
  async acquireRun(options: { owner: string; ttlMs: number; waitMs?: number }): Promise<ThreadRun> {
    this.#assertOpen();
    if (typeof options !== 'object' || options === null)
      throw new CairnError('INVALID_ARGUMENT', 'acquireRun needs { owner, ttlMs }');
    checkKeys(options, 'acquireRun options', ['owner', 'ttlMs', 'waitMs']);
    const { owner, ttlMs, waitMs } = options;
    return acquireRunLease(this.#store, this.#record.id, owner, ttlMs, waitMs);
  }

  /** Stops listening to the store; later calls fail with `CLOSED`. Waits for queued writes. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#unsubscribe?.();
    this.#unsubscribe = null;
    await this.#queue.idle();
    this.#listeners.clear();
  }

  // ------------------------------------------------------------------ internals

  #initial(): JsonObject {
    return this.#schema.initial('thread') as JsonObject;
  }

  #assertOpen(): void {
    if (this.#closed) throw new CairnError('CLOSED', `thread ${this.#record.id} was closed`);
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    try {
      this.#assertOpen();
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#queue.run(fn);
  }

  async #write<T>(fn: () => Promise<T>): Promise<T> {
    this.#ownWrites++;
    try {
      return await fn();
    } finally {
      this.#ownWrites--;
    }
  }

  #emit(event: ThreadEvent): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener(event);
      } catch (e) {
        queueMicrotask(() => {
          throw e;
        });
      }
    }
  }

  /** Adopts the stored head of the active branch; reports a move made by another writer. */
  #setHead(fresh: Branch): boolean {
    if (fresh.headMessageId === this.#branch.headMessageId) return false;
    this.#branch = { ...this.#branch, headMessageId: fresh.headMessageId };
    this.#emit({
      kind: 'messages',
      threadId: this.#record.id,
      branchId: fresh.id,
      headMessageId: fresh.headMessageId,
      source: 'remote',
    });
    return true;
  }

  async #threadMessage(id: string): Promise<Message> {
    if (typeof id !== 'string' || id.length === 0)
      throw new CairnError('INVALID_ARGUMENT', 'a message id must be a non-empty string');
    const m = await this.#store.getMessage(id);
    if (!m || m.threadId !== this.#record.id) {
      throw new CairnError('NOT_FOUND', `thread ${this.#record.id} has no message ${id}`, {
        details: { messageId: id },
      });
    }
    return m;
  }

  /** Whether `m` is on the chain ending at `headId`. */
  #onChain(headId: string | null, m: Message): Promise<boolean> {
    return isOnChain(this.#store, headId, m);
  }

  /**
   * The state at depth `depth` of `branch`'s lineage: the branch's last commit at or
   * before that depth, or, before its fork, its parent branch's (and so on).
   */
  #stateOnLineage(branch: Branch, depth: number): Promise<LoadedState> {
    return readLineageState(this.#store, this.#schema, branch, depth);
  }

  /**
   * The state as of `m`, wherever it is: on the active lineage, or on another branch's;
   * with the branch whose lineage holds it (the active one when `m` is null).
   */
  async #stateAsOf(m: Message | null): Promise<{ state: JsonObject; branch: Branch }> {
    const active = (await this.#store.getBranchById(this.#branch.id)) ?? this.#branch;
    if (m === null) return { state: this.#initial(), branch: active };
    if (await this.#onChain(active.headMessageId, m))
      return { state: (await this.#stateOnLineage(active, m.depth)).state, branch: active };
    for (const b of await this.#store.listBranches(this.#record.id)) {
      if (b.id !== active.id && (await this.#onChain(b.headMessageId, m)))
        return { state: (await this.#stateOnLineage(b, m.depth)).state, branch: b };
    }
    throw new CairnError(
      'NOT_FOUND',
      `message ${m.id} is on no branch of thread ${this.#record.id}`,
      { details: { messageId: m.id } },
    );
  }

  /**
   * Creates a branch at `at` named by `forkBranchName`, with the state as of `at` as its
   * version 1, in one transaction. A name taken meanwhile (CONFLICT) takes the next number.
   */
  async #fork(at: Message | null, options: { activate: boolean }): Promise<Branch> {
    // The new branch's parent is the branch `at` was found on, so that its lineage (the
    // state before its fork) runs through branches that hold `at`.
    const { state: forkState, branch: source } = await this.#stateAsOf(at);
    const from = this.#branch;
    const taken = new Set((await this.#store.listBranches(this.#record.id)).map((b) => b.name));
    let name = '';
    // A CONFLICT: another engine took the name meanwhile; the next free number is ours.
    const created = await retryOnConflict(
      () => {
        name = forkBranchName(from.name, taken);
        return this.#write(() =>
          this.#store.transaction(async (tx) => {
            const b = await tx.createBranch({
              threadId: this.#record.id,
              name,
              headMessageId: at?.id ?? null,
              parentBranchId: source.id,
              activate: options.activate,
            });
            await tx.appendStateCommit(
              {
                branchId: b.id,
                messageId: at?.id ?? null,
                update: {},
                snapshot: snapshotOf(this.#schema, forkState),
              },
              0,
            );
            return b;
          }),
        );
      },
      { attempts: this.#attempts, onConflict: () => taken.add(name) },
    );
    if (options.activate) {
      this.#branch = created;
      this.#loaded = { ...initialLoaded(forkState, this.#schema.version), version: 1 };
      this.#emit({
        kind: 'branch',
        threadId: this.#record.id,
        branchId: created.id,
        name,
        action: 'switched',
        source: 'local',
      });
      this.#emit({
        kind: 'state',
        threadId: this.#record.id,
        branchId: created.id,
        version: 1,
        changed: [],
        source: 'local',
      });
    } else {
      this.#emit({
        kind: 'branch',
        threadId: this.#record.id,
        branchId: created.id,
        name,
        action: 'created',
        source: 'local',
      });
    }
    return created;
  }

  /** A branch's current state; a branch made outside the engine gets its fork state written as version 1. */
  async #loadBranch(b: Branch): Promise<LoadedState> {
    // A CONFLICT: another engine wrote the fork state first; the next attempt reads it.
    return retryOnConflict(
      async () => {
        const loaded = await readBranchState(this.#store, this.#schema, b.id, this.#initial());
        if (loaded) return loaded;
        if (b.parentBranchId === null) return initialLoaded(this.#initial(), this.#schema.version);
        const fork =
          b.forkMessageId === null ? null : await this.#store.getMessage(b.forkMessageId);
        const parent = await this.#store.getBranchById(b.parentBranchId);
        const state =
          fork && parent ? (await this.#stateOnLineage(parent, fork.depth)).state : this.#initial();
        await this.#write(() =>
          this.#store.appendStateCommit(
            {
              branchId: b.id,
              messageId: b.forkMessageId,
              update: {},
              snapshot: snapshotOf(this.#schema, state),
            },
            0,
          ),
        );
        return { ...initialLoaded(state, this.#schema.version), version: 1 };
      },
      { attempts: this.#attempts },
    );
  }

  /** Applies the commits other writers added to the active branch. True when it advanced. */
  async #catchUp(store: Store = this.#store): Promise<boolean> {
    const commits = await store.getStateCommits(this.#branch.id, {
      fromVersion: this.#loaded.version + 1,
    });
    if (commits.length === 0) return false;
    let from = 0;
    for (let i = commits.length - 1; i >= 0; i--)
      if (commits[i]!.snapshot) {
        from = i;
        break;
      }
    const base =
      from > 0 || commits[0]!.snapshot
        ? initialLoaded(this.#initial(), this.#schema.version)
        : this.#loaded;
    this.#loaded = replay(this.#schema, base, commits.slice(from));
    return true;
  }

  #onStoreChange(change: StoreChange): void {
    if (this.#closed) return;
    const mine = change.branchId === undefined || change.branchId === this.#branch.id;
    switch (change.kind) {
      case 'messages':
        void this.#queueHeadRefresh();
        return;
      case 'branch':
        if (mine) {
          this.#heard.head = change.headMessageId;
          void this.#queueHeadRefresh();
        }
        if (
          this.#ownWrites === 0 &&
          change.branchId !== undefined &&
          change.branchId !== this.#branch.id
        ) {
          this.#emit({
            kind: 'branch',
            threadId: this.#record.id,
            branchId: change.branchId,
            action: 'changed',
            source: 'remote',
          });
        }
        return;
      case 'state':
        if (mine) {
          this.#heard.version = change.version;
          this.#queueStateRefresh();
        }
        return;
      case 'checkpoint':
        if (this.#ownWrites === 0)
          this.#emit({ kind: 'checkpoint', threadId: this.#record.id, source: 'remote' });
        return;
      default:
        return;
    }
  }

  /** Adopts the stored head of the active branch, after the writes queued before. */
  #queueHeadRefresh(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return this.#queue.runOnce('head', async () => {
      const heard = this.#heard.head;
      delete this.#heard.head;
      if (heard !== undefined && heard === this.#branch.headMessageId) return;
      const fresh = await this.#store.getBranchById(this.#branch.id);
      if (fresh) this.#setHead(fresh);
    });
  }

  /** Applies other writers' commits to the active branch, after the writes queued before. */
  #queueStateRefresh(): void {
    if (this.#closed) return;
    void this.#queue.runOnce('state', async () => {
      const heard = this.#heard.version;
      delete this.#heard.version;
      if (heard !== undefined && heard <= this.#loaded.version) return;
      if (await this.#catchUp()) {
        this.#emit({
          kind: 'state',
          threadId: this.#record.id,
          branchId: this.#branch.id,
          version: this.#loaded.version,
          changed: [],
          source: 'remote',
        });
      }
    });
  }
}
