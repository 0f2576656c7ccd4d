/**
 * Input checks shared by every store, so that bad input is rejected the same way,
 * with the same codes and messages, before anything is written.
 */
import { createHash } from 'node:crypto';
import {
  type Branch,
  CairnError,
  type Checkpoint,
  checkKeys,
  conflict,
  type Entry,
  findNonJson,
  type JsonObject,
  type JsonValue,
  keysOf,
  type Lease,
  MAX_NAME_LENGTH,
  MEMORY_SCOPES,
  MEMORY_TYPES,
  type Memory,
  type MemorySource,
  type Message,
  newId,
  type StateCommit,
  type Thread,
  type Turn,
  textProblem,
  type Viewer,
} from '@cairn/core';
import type { LeaseWaiter, MessageJump, MessageLink, StoredLease } from './driver.js';
import type {
  AcquireLeaseInput,
  ChainOptions,
  CloseMemoryOptions,
  EmbeddingSpace,
  EntrySelector,
  ForgetSubject,
  LatestCommitQuery,
  ListEntriesOptions,
  ListMemoriesOptions,
  ListThreadsOptions,
  LockOptions,
  MemoryFilter,
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
  PageOptions,
  StateCommitRange,
  Store,
  ThreadPatch,
  ThreadRecords,
} from './store.js';

const NOT_BLANK = /\S/;

const invalid = (message: string, details?: Record<string, unknown>) =>
  new CairnError('INVALID_ARGUMENT', message, details ? { details } : {});

function show(value: unknown): string {
  if (typeof value === 'string')
    return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'bigint') return `${value}n`;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** The longest memory text a store takes (every store's keyword index can hold it). */
export const MAX_MEMORY_TEXT_LENGTH = 100_000;

/**
 * INVALID_ARGUMENT when a text holds a NUL or a lone surrogate, naming the field and the
 * position (`details`: `field`, `position`). The one text rule of every store.
 */
export function checkText(value: string, label: string): string {
  const p = textProblem(value);
  if (p) {
    throw invalid(`${label} holds ${p.reason} at position ${p.position}; stored text cannot`, {
      field: label,
      position: p.position,
    });
  }
  return value;
}

/** A non-empty text of at most 200 characters (ids, resource, room and world ids). */
export function checkId(value: unknown, label: string): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_NAME_LENGTH) {
    throw invalid(
      `${label} must be a non-empty string of at most ${MAX_NAME_LENGTH} characters, got ${
        typeof value === 'string' && value.length > 0 ? `${value.length} characters` : show(value)
      }`,
      { field: label },
    );
  }
  return checkText(value, label);
}

/** A name (branch, checkpoint, lease key, owner): non-blank, at most 200 characters. */
export function checkName(value: unknown, label: string): string {
  if (typeof value !== 'string' || !NOT_BLANK.test(value) || value.length > MAX_NAME_LENGTH) {
    throw invalid(
      `${label} must be a non-blank string of at most ${MAX_NAME_LENGTH} characters, got ${
        typeof value === 'string' ? `${value.length} characters` : show(value)
      }`,
      { field: label },
    );
  }
  return checkText(value, label);
}

/** A text or null (undefined counts as null); free text unless `max` is given. */
function checkOptionalString(value: unknown, label: string, max?: number): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string')
    throw invalid(`${label} must be a string or null, got ${show(value)}`, { field: label });
  if (max !== undefined && value.length > max) {
    throw invalid(`${label} must be at most ${max} characters, got ${value.length}`, {
      field: label,
    });
  }
  return checkText(value, label);
}

/** An id-like text or null: resourceId, roomId, worldId, entityId, a turn's ids. */
const checkOptionalId = (value: unknown, label: string) =>
  checkOptionalString(value, label, MAX_NAME_LENGTH);

/** INVALID_ARGUMENT naming the field (`details.field`) where `value` is not storable JSON. */
function checkJson(value: unknown, label: string): void {
  const bad = findNonJson(value, label);
  if (bad) {
    throw invalid(`${bad.path}: ${bad.reason}`, {
      field: bad.path,
      ...(bad.position === undefined ? {} : { position: bad.position }),
    });
  }
}

function checkObject(value: unknown, label: string): JsonObject {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalid(`${label} must be a plain object, got ${show(value)}`, { field: label });
  }
  checkJson(value, label);
  return value as JsonObject;
}

/** An integer in [1, max]; `fallback` when undefined. */
export function checkLimit(value: unknown, label: string, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    throw invalid(`${label} must be an integer from 1 to ${max}, got ${show(value)}`);
  }
  return value;
}

/** A finite number (a timestamp, say), or `fallback` when undefined. */
export function checkTimestamp(value: unknown, label: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw invalid(
      `${label} must be a finite number (milliseconds since the epoch), got ${show(value)}`,
    );
  }
  return value;
}

const NEW_THREAD_KEYS = keysOf<NewThread>()(['id', 'resourceId', 'title', 'metadata']);
const NEW_THREAD_WITH_BRANCH_KEYS = [...NEW_THREAD_KEYS, 'branch'];

/** `createThread` input (`createThreadWithBranch`'s also takes `branch`). */
export function checkNewThread(
  input: NewThread,
  now: number,
  label: 'createThread' | 'createThreadWithBranch' = 'createThread',
): Thread {
  if (typeof input !== 'object' || input === null) throw invalid('thread input must be an object');
  checkKeys(
    input,
    label,
    label === 'createThread' ? NEW_THREAD_KEYS : NEW_THREAD_WITH_BRANCH_KEYS,
    label === 'createThread' ? { branch: 'a branch is created by createThreadWithBranch' } : {},
  );
  return {
    id: input.id === undefined ? newId() : checkId(input.id, 'thread id'),
    resourceId: checkOptionalId(input.resourceId, 'resourceId'),
    title: checkOptionalString(input.title, 'title'),
    metadata: input.metadata === undefined ? {} : checkObject(input.metadata, 'metadata'),
    createdAt: now,
    updatedAt: now,
  };
}

const FORGET_KEYS = keysOf<ForgetSubject>()(['resourceId', 'entityId', 'worldId']);

/**
 * `forget`'s subject: an object of known keys, at least one given, each an id. Returns
 * the keys given, in a fixed order.
 */
export function checkForgetSubject(subject: ForgetSubject): ForgetSubject {
  checkObjectArgument(subject, 'forget subject', FORGET_KEYS);
  const out: ForgetSubject = {};
  for (const key of FORGET_KEYS)
    if (subject[key] !== undefined) out[key] = checkId(subject[key], key);
  if (Object.keys(out).length === 0)
    throw invalid(`forget needs a subject: one or more of ${FORGET_KEYS.join(', ')}`);
  return out;
}

export function checkThreadPatch(patch: ThreadPatch): ThreadPatch {
  if (typeof patch !== 'object' || patch === null) throw invalid('thread patch must be an object');
  checkKeys(patch, 'updateThread', keysOf<ThreadPatch>()(['title', 'metadata']));
  const out: ThreadPatch = {};
  if (patch.title !== undefined) out.title = checkOptionalString(patch.title, 'title');
  if (patch.metadata !== undefined) out.metadata = checkObject(patch.metadata, 'metadata');
  return out;
}

const batchLabel = (i: number) => `messages[${i}]`;
const NEW_MESSAGE_KEYS = keysOf<NewMessage>()([
  'id',
  'threadId',
  'parentId',
  'role',
  'type',
  'data',
  'createdAt',
]);
const ok = (v: unknown): v is string =>
  typeof v === 'string' && v.length > 0 && v.length <= MAX_NAME_LENGTH && textProblem(v) === null;

/**
 * A message as checked without the database. `depth` is not known yet (it is -1);
 * `planMessageBatch` fills it in on the same object, so a batch allocates once.
 */
export type MessageDraft = Message;

/**
 * Checks a batch on its own: shapes, JSON data, self-parenting, an id used twice in the
 * batch. Fills in ids, `type` and `createdAt`.
 */
export function normalizeNewMessages(batch: NewMessage[], now: number): MessageDraft[] {
  if (!Array.isArray(batch)) throw invalid('addMessages expects an array of messages');
  const seen = new Set<string>();
  return batch.map((m, i) => {
    // Hot path: labels are built only when a check fails.
    if (typeof m !== 'object' || m === null) throw invalid(`${batchLabel(i)} must be an object`);
    checkKeys(m, batchLabel(i), NEW_MESSAGE_KEYS);
    const id =
      m.id === undefined ? newId() : ok(m.id) ? m.id : checkId(m.id, `${batchLabel(i)}.id`);
    if (seen.has(id)) {
      throw new CairnError(
        'CONFLICT',
        `${batchLabel(i)}.id ${show(id)} appears twice in the batch`,
        {
          details: { id },
        },
      );
    }
    seen.add(id);
    const parentId =
      m.parentId === null
        ? null
        : ok(m.parentId)
          ? m.parentId
          : checkId(m.parentId, `${batchLabel(i)}.parentId`);
    if (parentId === id)
      throw invalid(`${batchLabel(i)}: message ${show(id)} cannot be its own parent`, { id });
    if (m.data === undefined) throw invalid(`${batchLabel(i)}.data is required (any JSON value)`);
    if (findNonJson(m.data) !== null) checkJson(m.data, `${batchLabel(i)}.data`);
    const role =
      ok(m.role) && NOT_BLANK.test(m.role) ? m.role : checkName(m.role, `${batchLabel(i)}.role`);
    const type = m.type == null ? null : checkOptionalId(m.type, `${batchLabel(i)}.type`);
    const createdAt =
      typeof m.createdAt === 'number' && Number.isFinite(m.createdAt)
        ? m.createdAt
        : checkTimestamp(m.createdAt, `${batchLabel(i)}.createdAt`, now);
    return {
      id,
      threadId: ok(m.threadId) ? m.threadId : checkId(m.threadId, `${batchLabel(i)}.threadId`),
      parentId,
      role,
      type,
      data: m.data as JsonValue,
      createdAt,
      depth: -1,
    };
  });
}

/** The ids an adapter must look up before calling `planMessageBatch`. */
export function messageBatchLookups(drafts: MessageDraft[]): {
  threadIds: string[];
  messageIds: string[];
} {
  const threadIds = new Set<string>();
  const messageIds = new Set<string>();
  for (const d of drafts) {
    threadIds.add(d.threadId);
    messageIds.add(d.id);
    if (d.parentId !== null) messageIds.add(d.parentId);
  }
  return { threadIds: [...threadIds], messageIds: [...messageIds] };
}

/**
 * Checks a batch against what is stored and computes depths and jump pointers.
 * `known.threadIds` holds the batch's threads that exist; `known.messages` the stored
 * messages among `messageBatchLookups(drafts).messageIds` and their jump spines (see
 * `MessageBatchLookup`). A parent must be stored or come earlier in the batch (NOT_FOUND
 * otherwise), in the same thread (INVALID_ARGUMENT); an id already stored in any thread
 * is CONFLICT. `jumps[i]` is `messages[i]`'s jump pointer.
 */
export function planMessageBatch(
  drafts: MessageDraft[],
  known: { threadIds: Set<string>; messages: Map<string, MessageLink> },
): { messages: Message[]; jumps: MessageJump[] } {
  const inBatch = new Map<string, MessageLink>();
  const link = (id: string): MessageLink | undefined => inBatch.get(id) ?? known.messages.get(id);
  const jumps = new Array<MessageJump>(drafts.length);
  drafts.forEach((d, i) => {
    if (!known.threadIds.has(d.threadId)) {
      throw new CairnError('NOT_FOUND', `${batchLabel(i)}: thread ${show(d.threadId)} not found`, {
        details: { threadId: d.threadId },
      });
    }
    if (known.messages.has(d.id)) {
      throw new CairnError(
        'CONFLICT',
        `${batchLabel(i)}: message id ${show(d.id)} is already used; messages are immutable`,
        { details: { id: d.id } },
      );
    }
    let depth = 0;
    let jump: MessageJump = { jumpId: null, jumpDepth: 0 };
    if (d.parentId !== null) {
      const parent = link(d.parentId);
      if (!parent) {
        throw new CairnError(
          'NOT_FOUND',
          `${batchLabel(i)}: parent message ${show(d.parentId)} not found`,
          {
            details: { parentId: d.parentId },
          },
        );
      }
      if (parent.threadId !== d.threadId) {
        throw invalid(
          `${batchLabel(i)}: parent message ${show(d.parentId)} belongs to another thread`,
          {
            parentId: d.parentId,
          },
        );
      }
      depth = parent.depth + 1;
      jump = childJump(d.parentId, parent, link);
    }
    d.depth = depth;
    jumps[i] = jump;
    inBatch.set(d.id, { threadId: d.threadId, depth, ...jump });
  });
  return { messages: drafts, jumps };
}

/**
 * The jump pointer of a new child of `parent` (skew-binary jump pointers, E. W. Myers,
 * "An applicative random-access stack", 1983): the parent's jump's jump when the
 * parent's two jumps span equal distances, otherwise the parent. Every message on a
 * chain is then O(log depth) jumps and parent steps away from any of its descendants.
 * A jump not in `link` (never the case for a driver that returns jump spines) falls
 * back to the parent, which is slower but still correct.
 */
function childJump(
  parentId: string,
  parent: MessageLink,
  link: (id: string) => MessageLink | undefined,
): MessageJump {
  const j = parent.jumpId === null ? undefined : link(parent.jumpId);
  if (j && j.jumpId !== null && parent.depth - parent.jumpDepth === parent.jumpDepth - j.jumpDepth)
    return { jumpId: j.jumpId, jumpDepth: j.jumpDepth };
  return { jumpId: parentId, jumpDepth: parent.depth };
}

/**
 * Jump pointers for messages stored without them (a database older than jump
 * pointers), for a migration: `messages` must list every message of a thread, parents
 * before children (e.g. by depth). Returns each one's jump, as `planMessageBatch` would
 * have chosen it.
 */
export function backfillJumps(
  messages: Iterable<{ id: string; parentId: string | null; depth: number }>,
): Map<string, MessageJump> {
  const links = new Map<string, MessageLink>();
  const out = new Map<string, MessageJump>();
  for (const m of messages) {
    const parent = m.parentId === null ? undefined : links.get(m.parentId);
    const jump: MessageJump =
      m.parentId === null || !parent
        ? { jumpId: null, jumpDepth: 0 }
        : childJump(m.parentId, parent, (id) => links.get(id));
    links.set(m.id, { threadId: '', depth: m.depth, ...jump });
    out.set(m.id, jump);
  }
  return out;
}

const NEW_BRANCH_KEYS = keysOf<NewBranch>()([
  'id',
  'threadId',
  'name',
  'headMessageId',
  'parentBranchId',
  'activate',
]);

export function checkNewBranch(
  input: NewBranch,
  now: number,
): Omit<Branch, 'seq' | 'isActive'> & { activate: boolean } {
  if (typeof input !== 'object' || input === null) throw invalid('branch input must be an object');
  checkKeys(input, 'createBranch', NEW_BRANCH_KEYS);
  const headMessageId =
    input.headMessageId === null ? null : checkId(input.headMessageId, 'headMessageId');
  return {
    id: input.id === undefined ? newId() : checkId(input.id, 'branch id'),
    threadId: checkId(input.threadId, 'threadId'),
    name: checkName(input.name, 'branch name'),
    headMessageId,
    forkMessageId: headMessageId,
    parentBranchId:
      input.parentBranchId == null ? null : checkId(input.parentBranchId, 'parentBranchId'),
    createdAt: now,
    activate: input.activate === true,
  };
}

/** The default of `LockOptions.timeoutMs`. */
export const DEFAULT_LOCK_TIMEOUT_MS = 10_000;

/** `lockBranch` options: the wait in ms, an integer from 0 (no wait) to 1 hour. */
export function checkLockOptions(options: LockOptions | undefined): number {
  if (options === undefined) return DEFAULT_LOCK_TIMEOUT_MS;
  if (typeof options !== 'object' || options === null)
    throw invalid(`lock options must be an object, got ${show(options)}`);
  checkKeys(options, 'lockBranch options', keysOf<LockOptions>()(['timeoutMs']));
  const t = options.timeoutMs;
  if (t === undefined) return DEFAULT_LOCK_TIMEOUT_MS;
  if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t > 3_600_000)
    throw invalid(`timeoutMs must be an integer from 0 to 3600000, got ${show(t)}`);
  return t;
}

export function checkNewCheckpoint(input: NewCheckpoint, now: number): Checkpoint {
  if (typeof input !== 'object' || input === null)
    throw invalid('checkpoint input must be an object');
  checkKeys(input, 'saveCheckpoint', keysOf<NewCheckpoint>()(['threadId', 'name', 'messageId']));
  return {
    id: newId(),
    threadId: checkId(input.threadId, 'threadId'),
    name: checkName(input.name, 'checkpoint name'),
    messageId: checkId(input.messageId, 'messageId'),
    createdAt: now,
  };
}

export function checkStateCommit(
  commit: NewStateCommit,
  expectedVersion: number,
): NewStateCommit & { snapshot: JsonObject | null } {
  if (typeof commit !== 'object' || commit === null)
    throw invalid('state commit must be an object');
  checkKeys(
    commit,
    'appendStateCommit',
    keysOf<NewStateCommit>()(['branchId', 'messageId', 'update', 'snapshot']),
  );
  if (!Number.isInteger(expectedVersion) || expectedVersion < 0) {
    throw invalid(`expectedVersion must be an integer >= 0, got ${show(expectedVersion)}`);
  }
  return {
    branchId: checkId(commit.branchId, 'branchId'),
    messageId: commit.messageId === null ? null : checkId(commit.messageId, 'messageId'),
    update: checkObject(commit.update, 'update'),
    snapshot: commit.snapshot == null ? null : checkObject(commit.snapshot, 'snapshot'),
  };
}

const TURN_STATUSES = new Set(['running', 'finished', 'failed']);

const TURN_KEYS = keysOf<Turn>()([
  'id',
  'threadId',
  'messageId',
  'source',
  'userId',
  'status',
  'state',
  'steps',
  'startedAt',
  'finishedAt',
]);

export function checkTurn(turn: Turn, label = 'putTurn'): Turn {
  if (typeof turn !== 'object' || turn === null) throw invalid('turn must be an object');
  checkKeys(turn, label, TURN_KEYS);
  checkId(turn.id, 'turn id');
  checkId(turn.threadId, 'threadId');
  if (!TURN_STATUSES.has(turn.status))
    throw invalid(`turn status must be running, finished or failed, got ${show(turn.status)}`);
  checkObject(turn.state, 'turn state');
  if (!Array.isArray(turn.steps)) throw invalid('turn steps must be an array');
  checkJson(turn.steps, 'turn steps');
  checkTimestamp(turn.startedAt, 'startedAt', Number.NaN);
  return {
    id: turn.id,
    threadId: turn.threadId,
    messageId: checkOptionalId(turn.messageId, 'messageId'),
    source: checkOptionalId(turn.source, 'source'),
    userId: checkOptionalId(turn.userId, 'userId'),
    status: turn.status,
    state: turn.state,
    steps: turn.steps,
    startedAt: turn.startedAt,
    finishedAt: turn.finishedAt == null ? null : checkTimestamp(turn.finishedAt, 'finishedAt', 0),
  };
}

const MAX_TTL_MS = 2 ** 31 - 1;

export function checkTtl(ttlMs: unknown): number {
  if (typeof ttlMs !== 'number' || !Number.isInteger(ttlMs) || ttlMs < 1 || ttlMs > MAX_TTL_MS) {
    throw invalid(`ttlMs must be an integer from 1 to ${MAX_TTL_MS}, got ${show(ttlMs)}`);
  }
  return ttlMs;
}

export function checkLeaseInput(input: AcquireLeaseInput): Required<AcquireLeaseInput> {
  if (typeof input !== 'object' || input === null) throw invalid('lease input must be an object');
  checkKeys(
    input,
    'acquireLease',
    keysOf<AcquireLeaseInput>()(['key', 'owner', 'ttlMs', 'data', 'waitMs']),
  );
  const waitMs = input.waitMs ?? 0;
  if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > MAX_TTL_MS)
    throw invalid(`waitMs must be an integer from 0 to ${MAX_TTL_MS}, got ${show(input.waitMs)}`);
  return {
    waitMs,
    key: checkName(input.key, 'lease key'),
    owner: checkName(input.owner, 'lease owner'),
    ttlMs: checkTtl(input.ttlMs),
    data: input.data === undefined ? {} : checkObject(input.data, 'lease data'),
  };
}

/** Checks an optional lease data patch. */
export function checkLeaseData(data: unknown): JsonObject | undefined {
  return data === undefined ? undefined : checkObject(data, 'lease data');
}

/** The waiters of a lease whose place has not lapsed at `now`, first come first. */
function waitingAt(current: StoredLease | null, now: number): LeaseWaiter[] {
  return (current?.waiters ?? []).filter((w) => w.until > now).sort((a, b) => a.since - b.since);
}

/** `acquireLease`'s plan: what to write, with what it replaced. */
export interface LeaseAcquisition {
  lease: StoredLease;
  tookOver: Lease | null;
  previous: Lease | null;
}

/**
 * What `acquireLease` does with the current row: the rule every store follows. A live
 * lease of another owner is `CONFLICT`; so is a free lease while another acquisition
 * waits for it first: waiters take a released or expired lease in the order they asked.
 */
export function planLeaseAcquire(
  current: StoredLease | null,
  input: Required<AcquireLeaseInput>,
  now: number,
): LeaseAcquisition {
  const live = current !== null && current.releasedAt === null && current.expiresAt > now;
  if (live && current.owner !== input.owner) {
    throw new CairnError(
      'CONFLICT',
      `lease ${show(input.key)} is held by ${show(current.owner)} until ${new Date(current.expiresAt).toISOString()}`,
      {
        details: { key: input.key, owner: current.owner, expiresAt: current.expiresAt },
      },
    );
  }
  const queue = waitingAt(current, now);
  const first = queue[0];
  if (!live && first && first.owner !== input.owner) {
    throw new CairnError(
      'CONFLICT',
      `lease ${show(input.key)} is free, but ${show(first.owner)} waits for it first (${queue.length} waiting)`,
      {
        details: {
          key: input.key,
          owner: first.owner,
          expiresAt: first.until,
          waiting: queue.length,
        },
      },
    );
  }
  const waiters = queue.filter((w) => w.owner !== input.owner);
  if (live) {
    return {
      lease: {
        ...current,
        renewedAt: now,
        expiresAt: now + input.ttlMs,
        data: { ...current.data, ...input.data },
        waiters,
      },
      tookOver: null,
      previous: current,
    };
  }
  const expired = current !== null && current.releasedAt === null ? current : null;
  return {
    lease: {
      key: input.key,
      owner: input.owner,
      acquiredAt: now,
      renewedAt: now,
      expiresAt: now + input.ttlMs,
      releasedAt: null,
      data: input.data,
      waiters,
    },
    tookOver: expired,
    previous: current,
  };
}

/**
 * A waiting acquisition's place in the lease's queue: kept where it was (`since`) when it
 * asks again, at the end when it is new; it lapses at `until` unless asked again.
 */
export function planLeaseWait(
  current: StoredLease,
  owner: string,
  now: number,
  until: number,
): StoredLease {
  const queue = waitingAt(current, now);
  const mine = queue.find((w) => w.owner === owner);
  const others = queue.filter((w) => w !== mine);
  return { ...current, waiters: [...others, { owner, since: mine?.since ?? now, until }] };
}

/** The rule for `renewLease`: a live lease held by `owner`. */
export function planLeaseRenew(
  current: StoredLease | null,
  key: string,
  owner: string,
  ttlMs: number,
  data: JsonObject | undefined,
  now: number,
): StoredLease {
  if (!current)
    throw new CairnError('NOT_FOUND', `lease ${show(key)} not found`, { details: { key } });
  if (current.owner !== owner || current.releasedAt !== null || current.expiresAt <= now) {
    const why =
      current.owner !== owner
        ? `is held by ${show(current.owner)}`
        : current.releasedAt !== null
          ? 'was released'
          : 'expired';
    throw new CairnError(
      'CONFLICT',
      `lease ${show(key)} ${why}; ${show(owner)} no longer holds it`,
      { details: { key, owner: current.owner } },
    );
  }
  return {
    ...current,
    renewedAt: now,
    expiresAt: now + ttlMs,
    data: data ? { ...current.data, ...data } : current.data,
  };
}

/** The rule for `releaseLease`: only the owner releases; releasing twice is harmless. */
export function planLeaseRelease(
  current: StoredLease | null,
  key: string,
  owner: string,
  data: JsonObject | undefined,
  now: number,
): StoredLease {
  if (!current)
    throw new CairnError('NOT_FOUND', `lease ${show(key)} not found`, { details: { key } });
  if (current.owner !== owner) {
    throw new CairnError(
      'CONFLICT',
      `lease ${show(key)} is held by ${show(current.owner)}, not ${show(owner)}`,
      { details: { key, owner: current.owner } },
    );
  }
  return {
    ...current,
    releasedAt: current.releasedAt ?? now,
    data: data ? { ...current.data, ...data } : current.data,
  };
}

/** Prefixes the UTF-16 bytes of an ill-formed text: 0xff never occurs in UTF-8, so the two inputs never meet. */
const ILL_FORMED = Buffer.from([0xff]);

/**
 * SHA-256 of a memory's text, hex: of its UTF-8 bytes, or, for a text with a lone
 * surrogate (which UTF-8 would turn into U+FFFD, so `'a\ud83d'` and `'a\ude00'` would
 * collide), of 0xff and its UTF-16 code units.
 */
export function contentHash(text: string): string {
  const hash = createHash('sha256');
  if ((text as string & { isWellFormed(): boolean }).isWellFormed())
    return hash.update(text, 'utf8').digest('hex');
  return hash.update(ILL_FORMED).update(text, 'utf16le').digest('hex');
}

function checkVector(value: unknown, label: string): number[] {
  if (
    !Array.isArray(value) ||
    value.length === 0 ||
    !value.every((x) => typeof x === 'number' && Number.isFinite(x))
  ) {
    throw invalid(`${label} must be a non-empty array of finite numbers`);
  }
  return value;
}

function checkContent(value: unknown, label: string) {
  const content = checkObject(value, label);
  if (typeof content.text !== 'string') throw invalid(`${label}.text must be a string`);
  if (content.text.length > MAX_MEMORY_TEXT_LENGTH) {
    throw invalid(
      `${label}.text must be at most ${MAX_MEMORY_TEXT_LENGTH} characters, got ${content.text.length}`,
      { field: `${label}.text` },
    );
  }
  return content as Memory['content'];
}

const NEW_MEMORY_KEYS = keysOf<NewMemory>()([
  'id',
  'type',
  'agentId',
  'entityId',
  'roomId',
  'worldId',
  'scope',
  'content',
  'metadata',
  'contentHash',
  'embedding',
  'createdAt',
  'validFrom',
  'validTo',
  'supersededAt',
  'supersedes',
  'lineageId',
  'source',
]);

/** A timestamp or null; undefined counts as null. */
function checkOptionalTimestamp(value: unknown, label: string): number | null {
  return value === null || value === undefined ? null : checkTimestamp(value, label, 0);
}

/** `validTo` must not come before `validFrom` (equal: a version that never held, a correction). */
function checkValidity(validFrom: number | null, validTo: number | null, at: string): void {
  if (validFrom !== null && validTo !== null && validTo < validFrom)
    throw invalid(`${at}validTo (${validTo}) is before validFrom (${validFrom})`, {
      field: `${at}validTo`,
      validFrom,
      validTo,
    });
}

/** The most message ids one memory's `source` names. */
export const MAX_SOURCE_MESSAGES = 1000;

function checkSource(value: unknown, label: string): MemorySource | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value))
    throw invalid(
      `${label} must be an object { threadId, branchId?, messageIds }, got ${show(value)}`,
      {
        field: label,
      },
    );
  checkKeys(
    value,
    label,
    keysOf<MemorySource>()(['threadId', 'branchId', 'messageIds', 'branchScoped']),
  );
  const s = value as MemorySource;
  if (s.branchScoped !== undefined && typeof s.branchScoped !== 'boolean')
    throw invalid(`${label}.branchScoped must be a boolean, got ${show(s.branchScoped)}`, {
      field: `${label}.branchScoped`,
    });
  const threadId = checkId(s.threadId, `${label}.threadId`);
  const branchId = s.branchId === undefined ? undefined : checkId(s.branchId, `${label}.branchId`);
  const messageIds = checkIdList(s.messageIds, `${label}.messageIds`);
  if (messageIds.length > MAX_SOURCE_MESSAGES)
    throw invalid(
      `${label}.messageIds must name at most ${MAX_SOURCE_MESSAGES} messages, got ${messageIds.length}`,
      { field: `${label}.messageIds` },
    );
  if (s.branchScoped && messageIds.length === 0)
    throw invalid(`${label}: a branch-scoped memory must name the messages it came from`, {
      field: `${label}.messageIds`,
    });
  return {
    threadId,
    ...(branchId === undefined ? {} : { branchId }),
    messageIds: [...messageIds],
    ...(s.branchScoped ? { branchScoped: true } : {}),
  };
}

/** Checks a batch of new memories and fills in ids, defaults and content hashes. */
export function normalizeNewMemories(batch: NewMemory[], now: number): Memory[] {
  if (!Array.isArray(batch)) throw invalid('addMemories expects an array of memories');
  let width: number | undefined;
  const seen = new Set<string>();
  return batch.map((m, i) => {
    const at = `memories[${i}]`;
    if (typeof m !== 'object' || m === null) throw invalid(`${at} must be an object`);
    checkKeys(m, at, NEW_MEMORY_KEYS);
    const type = m.type ?? 'custom';
    if (!MEMORY_TYPES.includes(type))
      throw invalid(`${at}.type must be one of ${MEMORY_TYPES.join(', ')}, got ${show(type)}`);
    const scope = m.scope ?? 'private';
    if (!MEMORY_SCOPES.includes(scope))
      throw invalid(`${at}.scope must be one of ${MEMORY_SCOPES.join(', ')}, got ${show(scope)}`);
    const content = checkContent(m.content, `${at}.content`);
    const embedding = m.embedding == null ? null : checkVector(m.embedding, `${at}.embedding`);
    if (embedding) {
      if (width !== undefined && embedding.length !== width) {
        throw new CairnError(
          'EMBEDDING_MISMATCH',
          `${at}.embedding has ${embedding.length} dimensions; the batch's others have ${width}`,
          {
            details: { expected: width, actual: embedding.length },
          },
        );
      }
      width = embedding.length;
    }
    const memory: Memory = {
      id: m.id === undefined ? newId() : checkId(m.id, `${at}.id`),
      type,
      agentId: checkId(m.agentId, `${at}.agentId`),
      entityId: checkOptionalId(m.entityId, `${at}.entityId`),
      roomId: checkOptionalId(m.roomId, `${at}.roomId`),
      worldId: checkOptionalId(m.worldId, `${at}.worldId`),
      scope,
      content,
      metadata: m.metadata === undefined ? {} : checkObject(m.metadata, `${at}.metadata`),
      contentHash:
        m.contentHash === undefined
          ? contentHash(content.text)
          : checkId(m.contentHash, `${at}.contentHash`),
      embedding,
      createdAt: checkTimestamp(m.createdAt, `${at}.createdAt`, now),
      validFrom: checkOptionalTimestamp(m.validFrom, `${at}.validFrom`),
      validTo: checkOptionalTimestamp(m.validTo, `${at}.validTo`),
      supersededAt: checkOptionalTimestamp(m.supersededAt, `${at}.supersededAt`),
      supersedes: checkOptionalId(m.supersedes, `${at}.supersedes`),
      lineageId: '',
      source: checkSource(m.source, `${at}.source`),
    };
    memory.lineageId =
      m.lineageId === undefined ? memory.id : checkId(m.lineageId, `${at}.lineageId`);
    checkValidity(memory.validFrom, memory.validTo, `${at}.`);
    if (seen.has(memory.id))
      throw conflict(`${at}.id ${show(memory.id)} appears twice in the batch`, { id: memory.id });
    seen.add(memory.id);
    if (scope === 'room' && memory.roomId === null)
      throw invalid(`${at}: a room-scoped memory needs a roomId`);
    if (scope === 'shared' && memory.worldId === null)
      throw invalid(`${at}: a shared memory needs a worldId`);
    return memory;
  });
}

const MEMORY_VERSION_KEYS = keysOf<MemoryVersion>()([
  'id',
  'content',
  'contentHash',
  'metadata',
  'embedding',
  'validFrom',
  'validTo',
  'source',
]);

/** A `supersedeMemory` version, checked on its own (before the old version is read). */
export interface CheckedVersion {
  id: string;
  content: Memory['content'];
  contentHash: string;
  metadata?: JsonObject;
  embedding: number[] | null;
  validFrom: number;
  validTo: number | null;
  source?: MemorySource | null;
}

/** Checks `supersedeMemory`'s new version; `validFrom` defaults to `now`. */
export function checkMemoryVersion(next: MemoryVersion, now: number): CheckedVersion {
  if (typeof next !== 'object' || next === null || Array.isArray(next))
    throw invalid(
      `supersedeMemory expects a version { content, validFrom?, ... }, got ${show(next)}`,
    );
  checkKeys(next, 'supersedeMemory version', MEMORY_VERSION_KEYS);
  const content = checkContent(next.content, 'content');
  if (next.validFrom === null)
    throw invalid('validFrom of a new version must be a timestamp (it closes the old version)', {
      field: 'validFrom',
    });
  const out: CheckedVersion = {
    id: next.id === undefined ? newId() : checkId(next.id, 'id'),
    content,
    contentHash:
      next.contentHash === undefined
        ? contentHash(content.text)
        : checkId(next.contentHash, 'contentHash'),
    embedding: next.embedding == null ? null : checkVector(next.embedding, 'embedding'),
    validFrom: checkTimestamp(next.validFrom, 'validFrom', now),
    validTo: checkOptionalTimestamp(next.validTo, 'validTo'),
  };
  if (next.metadata !== undefined) out.metadata = checkObject(next.metadata, 'metadata');
  if (next.source !== undefined) out.source = checkSource(next.source, 'source');
  checkValidity(out.validFrom, out.validTo, '');
  return out;
}

/**
 * `supersedeMemory`'s decision: the old version as closed and the new version to insert,
 * or the error (`NOT_FOUND`, `CONFLICT`, `INVALID_ARGUMENT`) when `current` cannot be
 * superseded by `next` at `now`.
 */
export function planSupersede(
  id: string,
  current: Memory | null,
  next: CheckedVersion,
  now: number,
): { closed: Memory; memory: Memory } {
  openVersion(id, current, 'superseded');
  if (current.validFrom !== null && next.validFrom < current.validFrom)
    throw invalid(
      `validFrom (${next.validFrom}) is before the old version's validFrom (${current.validFrom}): a new version cannot start before the one it replaces`,
      { field: 'validFrom', validFrom: next.validFrom, previousValidFrom: current.validFrom },
    );
  if (next.id === id) throw conflict(`memory id ${show(id)} is the old version's`, { id });
  return {
    closed: { ...current, validTo: next.validFrom, supersededAt: now },
    memory: {
      id: next.id,
      type: current.type,
      agentId: current.agentId,
      entityId: current.entityId,
      roomId: current.roomId,
      worldId: current.worldId,
      scope: current.scope,
      content: next.content,
      metadata: next.metadata ?? current.metadata,
      contentHash: next.contentHash,
      embedding: next.embedding,
      createdAt: now,
      validFrom: next.validFrom,
      validTo: next.validTo,
      supersededAt: null,
      supersedes: current.id,
      lineageId: current.lineageId,
      source: next.source === undefined ? current.source : next.source,
    },
  };
}

/** The current, open version `id`, or `NOT_FOUND` / `CONFLICT` saying why it cannot be `verb`. */
function openVersion(
  id: string,
  current: Memory | null,
  verb: 'superseded' | 'closed',
): asserts current is Memory {
  if (!current) throw new CairnError('NOT_FOUND', `no memory ${show(id)}`, { details: { id } });
  if (current.supersededAt !== null)
    throw conflict(
      `memory ${show(id)} was already superseded (at ${current.supersededAt}): ${verb === 'superseded' ? 'supersede' : 'close'} its newest version`,
      { id, supersededAt: current.supersededAt },
    );
  if (current.validTo !== null)
    throw conflict(
      `memory ${show(id)} ends on its own (validTo ${current.validTo}): only an open version can be ${verb}`,
      { id, validTo: current.validTo },
    );
}

/** `closeMemory`'s options, checked; `validTo` defaults to `now`. */
export interface CheckedClose {
  validTo: number;
  expected: { contentHash: string; metadata: JsonObject } | null;
  metadata: JsonObject | null;
}

const CLOSE_KEYS = keysOf<CloseMemoryOptions>()(['validTo', 'expected', 'metadata']);

/** Checks `closeMemory`'s options (before the version is read). */
export function checkCloseMemoryOptions(options: unknown, now: number): CheckedClose {
  if (typeof options !== 'object' || options === null || Array.isArray(options))
    throw invalid(`closeMemory options must be an object, got ${show(options)}`);
  checkKeys(options, 'closeMemory options', CLOSE_KEYS);
  const o = options as CloseMemoryOptions;
  let expected: CheckedClose['expected'] = null;
  if (o.expected !== undefined) {
    // The version as read: only these two fields are compared, the rest may come along.
    if (typeof o.expected !== 'object' || o.expected === null || Array.isArray(o.expected))
      throw invalid(
        `expected must be the version as read, { contentHash, metadata }, got ${show(o.expected)}`,
        { field: 'expected' },
      );
    expected = {
      contentHash: checkId(o.expected.contentHash, 'expected.contentHash'),
      metadata: checkObject(o.expected.metadata, 'expected.metadata'),
    };
  }
  return {
    validTo: checkTimestamp(o.validTo, 'validTo', now),
    expected,
    metadata: o.metadata === undefined ? null : checkObject(o.metadata, 'metadata'),
  };
}

/** Whether two JSON values are equal, whatever the order of their objects' keys. */
function sameJson(a: JsonValue, b: JsonValue): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => sameJson(x, b[i]!));
  }
  const keys = Object.keys(a).filter((k) => a[k] !== undefined);
  if (keys.length !== Object.keys(b).filter((k) => b[k] !== undefined).length) return false;
  return keys.every((k) => b[k] !== undefined && sameJson(a[k]!, b[k]!));
}

/**
 * `closeMemory`'s decision on the version as stored: the version as closed at `now`, or
 * the error (`NOT_FOUND`, `CONFLICT`, `INVALID_ARGUMENT`) when it cannot be closed so.
 */
export function planClose(
  id: string,
  current: Memory | null,
  close: CheckedClose,
  now: number,
): Memory {
  openVersion(id, current, 'closed');
  if (current.validFrom !== null && close.validTo < current.validFrom)
    throw invalid(
      `validTo (${close.validTo}) is before the version's validFrom (${current.validFrom})`,
      { field: 'validTo', validTo: close.validTo, validFrom: current.validFrom },
    );
  const e = close.expected;
  if (
    e !== null &&
    (e.contentHash !== current.contentHash || !sameJson(e.metadata, current.metadata))
  )
    throw conflict(
      `memory ${show(id)} changed since it was read (its ${e.contentHash !== current.contentHash ? 'text' : 'metadata'}): read it again and decide again`,
      { id, contentHash: current.contentHash },
    );
  return {
    ...current,
    validTo: close.validTo,
    supersededAt: now,
    ...(close.metadata === null ? {} : { metadata: close.metadata }),
  };
}

/**
 * `updateMemory`'s rule on the version as stored: only a current version is edited in
 * place. A version that `supersedeMemory` or `closeMemory` closed (a consolidation pass
 * among them) is history, kept as it was: `CONFLICT`, naming the current version of its
 * fact (`details.currentId`: the newest version of its lineage when that one is open,
 * else null). A version that ends on its own (`validTo` set when it was written) is still
 * current and can be updated.
 */
export function planMemoryUpdate(
  id: string,
  stored: Memory | null,
  newest: Memory | null,
): asserts stored is Memory {
  if (!stored)
    throw new CairnError('NOT_FOUND', `memory ${show(id)} not found`, { details: { id } });
  if (stored.supersededAt === null) return;
  const currentId = newest && newest.supersededAt === null ? newest.id : null;
  throw conflict(
    `memory ${show(id)} is a closed version (superseded at ${stored.supersededAt}): ${currentId === null ? 'its fact has no current version to update' : `update its current version ${show(currentId)}`}`,
    { id, supersededAt: stored.supersededAt, currentId },
  );
}

export function checkMemoryPatch(patch: MemoryPatch): MemoryPatch {
  if (typeof patch !== 'object' || patch === null) throw invalid('memory patch must be an object');
  checkKeys(
    patch,
    'updateMemory',
    keysOf<MemoryPatch>()(['content', 'contentHash', 'metadata', 'embedding']),
  );
  const out: MemoryPatch = {};
  if (patch.content !== undefined) {
    out.content = checkContent(patch.content, 'content');
    out.contentHash =
      patch.contentHash === undefined
        ? contentHash(out.content.text)
        : checkId(patch.contentHash, 'contentHash');
  } else if (patch.contentHash !== undefined) {
    out.contentHash = checkId(patch.contentHash, 'contentHash');
  }
  if (patch.metadata !== undefined) out.metadata = checkObject(patch.metadata, 'metadata');
  if (patch.embedding !== undefined)
    out.embedding = patch.embedding === null ? null : checkVector(patch.embedding, 'embedding');
  return out;
}

function checkStringList(value: unknown, label: string): string[] {
  if (!Array.isArray(value) || !value.every((x) => typeof x === 'string'))
    throw invalid(`${label} must be an array of strings`);
  return value;
}

const MEMORY_FILTER_KEYS = keysOf<MemoryFilter>()([
  'viewer',
  'agentId',
  'types',
  'scopes',
  'entityId',
  'roomId',
  'worldId',
  'contentHashes',
  'ids',
  'createdAfter',
  'createdBefore',
  'metadataPrefix',
  'lineageIds',
  'validAt',
  'knownAt',
  'visibleFrom',
]);
/** A metadata key `metadataPrefix` can name (it becomes part of a JSON path in SQL). */
const METADATA_KEY = /^[A-Za-z0-9_-]{1,200}$/;
/** The most labels one `metadataPrefix` path holds (each is one condition in SQL). */
export const MAX_METADATA_PREFIX_LABELS = 100;
const LIST_MEMORIES_KEYS = keysOf<ListMemoriesOptions>()(['limit', 'order']);
const SEARCH_KEYS = keysOf<MemorySearch>()(['vector', 'text', 'filter', 'limit', 'threshold']);

/** Where keys that are not a memory call's own go: `the <key> goes in <where>`. */
const goesIn = (where: (key: string) => string, keys: readonly string[]) =>
  Object.fromEntries(keys.map((k) => [k, `the ${k} goes in ${where(k)}`]));

/** A memory filter, of `listMemories`, `countMemories` or `searchMemories` (its `filter`). */
export function checkMemoryFilter(
  filter: MemoryFilter | undefined,
  call: 'listMemories' | 'countMemories' | 'searchMemories',
): MemoryFilter {
  if (filter === undefined) return {};
  if (typeof filter !== 'object' || filter === null)
    throw invalid('memory filter must be an object');
  checkKeys(
    filter,
    call === 'searchMemories' ? 'searchMemories filter' : call,
    MEMORY_FILTER_KEYS,
    {
      ...(call === 'listMemories'
        ? goesIn(() => 'the options, the second argument of listMemories', LIST_MEMORIES_KEYS)
        : {}),
      ...goesIn(() => 'a search (searchMemories), not a filter', ['text', 'vector', 'threshold']),
    },
  );
  if (filter.viewer !== undefined) {
    if (typeof filter.viewer !== 'object' || filter.viewer === null)
      throw invalid('filter.viewer must be an object');
    checkKeys(
      filter.viewer,
      `${call} filter.viewer`,
      keysOf<Viewer>()(['agentId', 'roomId', 'worldId']),
    );
    checkId(filter.viewer.agentId, 'filter.viewer.agentId');
    checkOptionalId(filter.viewer.roomId, 'filter.viewer.roomId');
    checkOptionalId(filter.viewer.worldId, 'filter.viewer.worldId');
  }
  if (filter.types !== undefined) {
    for (const t of checkStringList(filter.types, 'filter.types')) {
      if (!MEMORY_TYPES.includes(t as never))
        throw invalid(`filter.types: unknown type ${show(t)}`);
    }
  }
  if (filter.scopes !== undefined) {
    for (const s of checkStringList(filter.scopes, 'filter.scopes')) {
      if (!MEMORY_SCOPES.includes(s as never))
        throw invalid(`filter.scopes: unknown scope ${show(s)}`);
    }
  }
  for (const key of ['agentId', 'entityId', 'roomId', 'worldId'] as const) {
    if (filter[key] !== undefined) checkId(filter[key], `filter.${key}`);
  }
  if (filter.ids !== undefined) checkIdList(filter.ids, 'filter.ids');
  if (filter.contentHashes !== undefined) checkIdList(filter.contentHashes, 'filter.contentHashes');
  if (filter.createdAfter !== undefined)
    checkTimestamp(filter.createdAfter, 'filter.createdAfter', 0);
  if (filter.createdBefore !== undefined)
    checkTimestamp(filter.createdBefore, 'filter.createdBefore', 0);
  if (filter.metadataPrefix !== undefined) checkMetadataPrefix(filter.metadataPrefix);
  if (filter.lineageIds !== undefined) checkIdList(filter.lineageIds, 'filter.lineageIds');
  if (filter.validAt !== undefined) checkTimestamp(filter.validAt, 'filter.validAt', 0);
  if (filter.knownAt !== undefined) checkTimestamp(filter.knownAt, 'filter.knownAt', 0);
  if (filter.visibleFrom !== undefined && filter.visibleFrom !== null) {
    const from = filter.visibleFrom;
    if (typeof from !== 'object' || Array.isArray(from))
      throw invalid(
        `filter.visibleFrom must be { threadId, branchId? } or null, got ${show(from)}`,
        { field: 'filter.visibleFrom' },
      );
    checkKeys(from, 'filter.visibleFrom', ['threadId', 'branchId']);
    checkId(from.threadId, 'filter.visibleFrom.threadId');
    if (from.branchId !== undefined) checkId(from.branchId, 'filter.visibleFrom.branchId');
  }
  return filter;
}

function checkMetadataPrefix(paths: unknown): void {
  if (typeof paths !== 'object' || paths === null || Array.isArray(paths))
    throw invalid(`filter.metadataPrefix must be an object of label arrays, got ${show(paths)}`, {
      field: 'filter.metadataPrefix',
    });
  for (const [key, labels] of Object.entries(paths)) {
    const label = `filter.metadataPrefix[${JSON.stringify(key)}]`;
    if (!METADATA_KEY.test(key))
      throw invalid(
        `filter.metadataPrefix: a key must be 1-200 of A-Z a-z 0-9 _ -, got ${show(key)}`,
        { field: 'filter.metadataPrefix' },
      );
    if (!Array.isArray(labels) || labels.length > MAX_METADATA_PREFIX_LABELS)
      throw invalid(
        `${label} must be an array of at most ${MAX_METADATA_PREFIX_LABELS} strings, got ${show(labels)}`,
        { field: label },
      );
    labels.forEach((l: unknown, i) => {
      if (typeof l !== 'string' || l.length > MAX_MEMORY_TEXT_LENGTH)
        throw invalid(
          `${label}[${i}] must be a string of at most ${MAX_MEMORY_TEXT_LENGTH} characters, got ${show(l)}`,
          { field: `${label}[${i}]` },
        );
      checkText(l, `${label}[${i}]`);
    });
  }
}

export interface CheckedSearch {
  vector?: number[];
  text?: string;
  filter: MemoryFilter;
  limit: number;
  threshold?: number;
}

export function checkMemorySearch(search: MemorySearch): CheckedSearch {
  if (typeof search !== 'object' || search === null) throw invalid('search must be an object');
  checkKeys(search, 'searchMemories', SEARCH_KEYS, {
    ...goesIn((k) => `filter.${k}`, MEMORY_FILTER_KEYS),
    order: 'search results are ordered by score',
  });
  const hasVector = search.vector !== undefined;
  const hasText = search.text !== undefined;
  if (hasVector === hasText) throw invalid('searchMemories takes exactly one of vector and text');
  const out: CheckedSearch = {
    filter: checkMemoryFilter(search.filter, 'searchMemories'),
    limit: checkLimit(search.limit, 'limit', 10, 1000),
  };
  if (hasVector) out.vector = checkVector(search.vector, 'vector');
  if (hasText) {
    if (typeof search.text !== 'string' || !NOT_BLANK.test(search.text))
      throw invalid('search text must be a non-blank string', { field: 'text' });
    if (search.text.length > MAX_MEMORY_TEXT_LENGTH) {
      throw invalid(
        `search text must be at most ${MAX_MEMORY_TEXT_LENGTH} characters, got ${search.text.length}`,
        { field: 'text' },
      );
    }
    out.text = checkText(search.text, 'search text');
  }
  if (search.threshold !== undefined) {
    if (!hasVector) throw invalid('threshold applies to vector search only (cosine similarity)');
    if (
      typeof search.threshold !== 'number' ||
      !(search.threshold >= -1 && search.threshold <= 1)
    ) {
      throw invalid(
        `threshold must be a cosine similarity from -1 to 1, got ${show(search.threshold)}`,
      );
    }
    out.threshold = search.threshold;
  }
  return out;
}

/**
 * The rule for `ensureEmbeddingSpace`: returns the space to record (and whether it
 * changed), or throws EMBEDDING_MISMATCH naming both spaces.
 */
export function resolveEmbeddingSpace(
  current: EmbeddingSpace | null,
  requested: { embedderId: string; dimensions: number },
): { space: EmbeddingSpace; changed: boolean } {
  checkObjectArgument(requested, 'ensureEmbeddingSpace', ['embedderId', 'dimensions']);
  checkId(requested.embedderId, 'embedderId');
  if (!Number.isInteger(requested.dimensions) || requested.dimensions < 1) {
    throw invalid(`dimensions must be a positive integer, got ${show(requested.dimensions)}`);
  }
  if (!current) return { space: { ...requested }, changed: true };
  if (
    current.dimensions !== requested.dimensions ||
    (current.embedderId !== null && current.embedderId !== requested.embedderId)
  ) {
    throw new CairnError(
      'EMBEDDING_MISMATCH',
      `this store holds embeddings of ${show(current.embedderId ?? 'an unnamed embedder')} with ${current.dimensions} dimensions; got ${show(requested.embedderId)} with ${requested.dimensions}`,
      { details: { stored: current, requested } },
    );
  }
  if (current.embedderId === null) return { space: { ...requested }, changed: true };
  return { space: current, changed: false };
}

/** EMBEDDING_MISMATCH when `vector` does not have the store's width. */
export function checkVectorWidth(
  space: EmbeddingSpace | null,
  vector: number[],
  label: string,
): void {
  if (space && vector.length !== space.dimensions) {
    throw new CairnError(
      'EMBEDDING_MISMATCH',
      `${label} has ${vector.length} dimensions; this store's embeddings have ${space.dimensions}`,
      {
        details: { expected: space.dimensions, actual: vector.length },
      },
    );
  }
}

/** An opaque page cursor holding a few JSON values. */
export function encodeCursor(values: JsonValue[]): string {
  return Buffer.from(JSON.stringify(values), 'utf8').toString('base64url');
}

export function decodeCursor(cursor: unknown): JsonValue[] {
  if (typeof cursor !== 'string') throw invalid('cursor must be a string');
  try {
    const values = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(values)) return values;
  } catch {}
  throw invalid(`cursor ${show(cursor)} is not one this store issued`);
}

/**
 * INVALID_ARGUMENT unless `value` is an object (an options argument, say) holding only
 * `keys`, when given (see `checkKeys`).
 */
export function checkObjectArgument(
  value: unknown,
  label: string,
  keys?: readonly string[],
  elsewhere?: Record<string, string>,
): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw invalid(`${label} must be an object, got ${show(value)}`);
  if (keys) checkKeys(value, label, keys, elsewhere);
}

/**
 * INVALID_ARGUMENT unless `value` is a Cairn `Store`; `label` names where it was given
 * (`openThread: the first argument`, `startInspector: store`). An object holding the
 * store (`{ store }`) is named as such.
 */
export function checkStore(value: unknown, label: string): asserts value is Store {
  const s = value as Partial<Store> | null;
  if (
    typeof s === 'object' &&
    s !== null &&
    typeof s.createThreadWithBranch === 'function' &&
    typeof s.searchMemories === 'function'
  )
    return;
  const got =
    typeof s === 'object' && s !== null && 'store' in s
      ? 'an object holding one ({ store }); pass the store itself'
      : s === null
        ? 'null'
        : typeof s;
  throw invalid(`${label} must be a Cairn Store, got ${got}`);
}

/** `listThreads` options: the limit, the resource and the position a cursor holds. */
export function checkListThreadsOptions(options: ListThreadsOptions): {
  limit: number;
  resourceId?: string;
  beforeSeq?: number;
} {
  checkObjectArgument(
    options,
    'listThreads options',
    keysOf<ListThreadsOptions>()(['resourceId', 'limit', 'cursor']),
  );
  const out: { limit: number; resourceId?: string; beforeSeq?: number } = {
    limit: checkLimit(options.limit, 'limit', 50, 1000),
  };
  if (options.resourceId !== undefined) out.resourceId = checkId(options.resourceId, 'resourceId');
  if (options.cursor != null) {
    const c = decodeCursor(options.cursor);
    if (c.length !== 1 || !Number.isSafeInteger(c[0]))
      throw invalid(`cursor ${show(options.cursor)} is not one this store issued`);
    out.beforeSeq = c[0] as number;
  }
  return out;
}

/** `getChain` options. */
export function checkChainOptions(options: ChainOptions): ChainOptions {
  checkObjectArgument(
    options,
    'getChain options',
    keysOf<ChainOptions>()(['limit', 'beforeDepth']),
  );
  const out: ChainOptions = {};
  if (options.limit !== undefined)
    out.limit = checkLimit(options.limit, 'limit', 0, Number.MAX_SAFE_INTEGER);
  if (options.beforeDepth !== undefined) {
    if (!Number.isSafeInteger(options.beforeDepth) || options.beforeDepth < 0)
      throw invalid(`beforeDepth must be an integer >= 0, got ${show(options.beforeDepth)}`);
    out.beforeDepth = options.beforeDepth;
  }
  return out;
}

/** A state commit range, defaults filled in. */
export function checkStateRange(range: StateCommitRange): { from: number; to: number } {
  checkObjectArgument(
    range,
    'getStateCommits range',
    keysOf<StateCommitRange>()(['fromVersion', 'toVersion']),
  );
  const from = range.fromVersion ?? 1;
  const to = range.toVersion ?? Number.MAX_SAFE_INTEGER;
  for (const [label, v] of [
    ['fromVersion', from],
    ['toVersion', to],
  ] as const) {
    if (!Number.isSafeInteger(v) || v < 0)
      throw invalid(`${label} must be an integer >= 0, got ${show(v)}`);
  }
  return { from, to };
}

/** A `getLatestStateCommit` query. */
export function checkLatestCommitQuery(query: LatestCommitQuery): LatestCommitQuery {
  checkObjectArgument(
    query,
    'getLatestStateCommit query',
    keysOf<LatestCommitQuery>()(['withSnapshot', 'maxVersion', 'maxMessageDepth']),
  );
  const out: LatestCommitQuery = {};
  if (query.withSnapshot !== undefined) {
    if (typeof query.withSnapshot !== 'boolean')
      throw invalid(`withSnapshot must be a boolean, got ${show(query.withSnapshot)}`);
    out.withSnapshot = query.withSnapshot;
  }
  for (const label of ['maxVersion', 'maxMessageDepth'] as const) {
    const v = query[label];
    if (v === undefined) continue;
    if (!Number.isSafeInteger(v)) throw invalid(`${label} must be an integer, got ${show(v)}`);
    out[label] = v;
  }
  return out;
}

/** `purgeTurns` options. */
export function checkPurgeTurns(options: { before: number; threadId?: string }): {
  before: number;
  threadId: string | undefined;
} {
  checkObjectArgument(options, 'purgeTurns options', ['before', 'threadId']);
  if (options.before === undefined) throw invalid('purgeTurns needs `before` (a timestamp)');
  return {
    before: checkTimestamp(options.before, 'before', 0),
    threadId: options.threadId === undefined ? undefined : checkId(options.threadId, 'threadId'),
  };
}

/** An array of ids, every one checked before any is used. */
export function checkIdList(ids: unknown, label: string): string[] {
  if (!Array.isArray(ids)) throw invalid(`${label} must be an array of ids, got ${show(ids)}`);
  for (let i = 0; i < ids.length; i++) checkId(ids[i], `${label}[${i}]`);
  return ids as string[];
}

/** `listMemories` options, defaults filled in. */
export function checkListMemoriesOptions(options: ListMemoriesOptions): {
  limit: number;
  order: 'newest' | 'oldest';
} {
  checkObjectArgument(
    options,
    'listMemories options',
    LIST_MEMORIES_KEYS,
    goesIn(() => 'the filter, the first argument of listMemories', MEMORY_FILTER_KEYS),
  );
  const order = options.order ?? 'newest';
  if (order !== 'newest' && order !== 'oldest')
    throw invalid(`order must be newest or oldest, got ${show(order)}`);
  return { limit: checkLimit(options.limit, 'limit', 100, 10_000), order };
}

/** The content hashes of `getCachedEmbeddings`. */
export function checkContentHashes(hashes: unknown): string[] {
  return checkIdList(hashes, 'contentHashes');
}

/** The entries of `putCachedEmbeddings` (widths are checked against the store later). */
export function checkCachedEmbeddings(
  entries: unknown,
): Array<{ contentHash: string; embedding: number[] }> {
  if (!Array.isArray(entries))
    throw invalid(`entries must be an array of { contentHash, embedding }, got ${show(entries)}`);
  for (const [i, e] of entries.entries()) {
    checkObjectArgument(e, `entries[${i}]`, ['contentHash', 'embedding']);
    checkId(e.contentHash, `entries[${i}].contentHash`);
    checkVector(e.embedding, `entries[${i}].embedding`);
  }
  return entries;
}

/** `PageOptions` of `listLeases` and `scanMemories`: the limit and the key a cursor holds. */
export function checkPageOptions(
  options: PageOptions,
  label: string,
): { limit: number; after: string | null } {
  checkObjectArgument(options, `${label} options`, keysOf<PageOptions>()(['limit', 'cursor']));
  const limit = checkLimit(options.limit, 'limit', 100, 10_000);
  if (options.cursor == null) return { limit, after: null };
  const c = decodeCursor(options.cursor);
  if (c.length !== 1 || typeof c[0] !== 'string')
    throw invalid(`cursor ${show(options.cursor)} is not one this store issued`);
  // A forged cursor's key goes to the database like any other text: the same rule.
  return { limit, after: checkText(c[0], 'cursor') };
}

function checkRequiredTimestamp(value: unknown, label: string): number {
  if (value === undefined) throw invalid(`${label} is required`);
  return checkTimestamp(value, label, 0);
}

/** A thread's records, checked, in the order `restoreThread` writes them. */
export interface CheckedThreadRecords {
  thread: Thread;
  messages: MessageDraft[];
  branches: Array<Omit<Branch, 'seq' | 'isActive'>>;
  activeBranchId: string | null;
  checkpoints: Checkpoint[];
  stateCommits: Array<{ draft: StateCommitDraftLike; version: number }>;
  turns: Turn[];
}

interface StateCommitDraftLike {
  branchId: string;
  messageId: string | null;
  update: JsonObject;
  snapshot: JsonObject | null;
  createdAt: number;
}

const arrayOf = (value: unknown, label: string): unknown[] => {
  if (!Array.isArray(value)) throw invalid(`${label} must be an array`);
  return value;
};

const THREAD_RECORDS_KEYS = keysOf<ThreadRecords>()([
  'thread',
  'messages',
  'branches',
  'checkpoints',
  'stateCommits',
  'turns',
]);
const THREAD_KEYS = keysOf<Thread>()([
  'id',
  'resourceId',
  'title',
  'metadata',
  'createdAt',
  'updatedAt',
]);
const BRANCH_RECORD_KEYS = keysOf<Omit<Branch, 'seq'>>()([
  'id',
  'threadId',
  'name',
  'headMessageId',
  'isActive',
  'createdAt',
  'forkMessageId',
  'parentBranchId',
]);
const CHECKPOINT_KEYS = keysOf<Checkpoint>()(['id', 'threadId', 'name', 'messageId', 'createdAt']);
const STATE_COMMIT_KEYS = keysOf<StateCommit>()([
  'branchId',
  'threadId',
  'version',
  'messageId',
  'messageDepth',
  'update',
  'snapshot',
  'createdAt',
]);
const LEASE_KEYS = keysOf<Lease>()([
  'key',
  'owner',
  'acquiredAt',
  'renewedAt',
  'expiresAt',
  'releasedAt',
  'data',
]);

/**
 * `restoreThread` records: every field as the model types say, everything in the thread,
 * every reference to a message, branch or version inside the records themselves.
 */
export function checkThreadRecords(records: ThreadRecords): CheckedThreadRecords {
  checkObjectArgument(records, 'thread records', THREAD_RECORDS_KEYS);
  checkObjectArgument(records.thread, 'thread', THREAD_KEYS);
  const t = records.thread;
  const thread: Thread = {
    ...checkNewThread(
      {
        id: checkId(t.id, 'thread id'),
        resourceId: t.resourceId,
        title: t.title,
        metadata: t.metadata,
      },
      0,
    ),
    createdAt: checkRequiredTimestamp(t.createdAt, 'thread createdAt'),
    updatedAt: checkRequiredTimestamp(t.updatedAt, 'thread updatedAt'),
  };
  const inThread = (threadId: unknown, label: string) => {
    if (threadId !== thread.id)
      throw invalid(`${label} belongs to thread ${show(threadId)}, not ${show(thread.id)}`);
  };
  const messages = normalizeNewMessages(
    arrayOf(records.messages, 'messages').map((m, i) => {
      checkObjectArgument(m, `messages[${i}]`);
      const { depth: _depth, ...rest } = m as Message;
      inThread(rest.threadId, `messages[${i}]`);
      if (rest.createdAt === undefined) throw invalid(`messages[${i}].createdAt is required`);
      return rest;
    }),
    0,
  );
  const messageIds = new Set(messages.map((m) => m.id));
  const message = (id: string | null, label: string) => {
    if (id !== null && !messageIds.has(id))
      throw invalid(`${label}: message ${show(id)} is not among the thread's messages`);
    return id;
  };

  const branches: CheckedThreadRecords['branches'] = [];
  const branchIds = new Set<string>();
  const names = new Set<string>();
  let activeBranchId: string | null = null;
  arrayOf(records.branches, 'branches').forEach((raw, i) => {
    checkObjectArgument(raw, `branches[${i}]`, BRANCH_RECORD_KEYS, {
      seq: "seq is the store's own numbering, not part of a record",
    });
    const b = raw as Branch;
    inThread(b.threadId, `branches[${i}]`);
    const { activate: _a, ...checked } = checkNewBranch(
      {
        id: checkId(b.id, `branches[${i}].id`),
        threadId: b.threadId,
        name: b.name,
        headMessageId: b.headMessageId,
        parentBranchId: b.parentBranchId,
      },
      0,
    );
    if (branchIds.has(checked.id) || names.has(checked.name))
      throw new CairnError(
        'CONFLICT',
        `branches[${i}]: branch ${show(checked.name)} (${show(checked.id)}) appears twice`,
      );
    if (checked.parentBranchId !== null && !branchIds.has(checked.parentBranchId))
      throw invalid(
        `branches[${i}]: parent branch ${show(checked.parentBranchId)} must come earlier in the records`,
      );
    message(checked.headMessageId, `branches[${i}].headMessageId`);
    checked.forkMessageId = message(
      b.forkMessageId == null ? null : checkId(b.forkMessageId, `branches[${i}].forkMessageId`),
      `branches[${i}].forkMessageId`,
    );
    checked.createdAt = checkRequiredTimestamp(b.createdAt, `branches[${i}].createdAt`);
    if (typeof b.isActive !== 'boolean') throw invalid(`branches[${i}].isActive must be a boolean`);
    if (b.isActive) {
      if (activeBranchId !== null) throw invalid('more than one branch is active');
      activeBranchId = checked.id;
    }
    branchIds.add(checked.id);
    names.add(checked.name);
    branches.push(checked);
  });
  if (branches.length > 0 && activeBranchId === null) throw invalid('no branch is active');

  const checkpointNames = new Set<string>();
  const checkpoints = arrayOf(records.checkpoints, 'checkpoints').map((raw, i) => {
    checkObjectArgument(raw, `checkpoints[${i}]`, CHECKPOINT_KEYS);
    const c = raw as Checkpoint;
    inThread(c.threadId, `checkpoints[${i}]`);
    const checked = {
      ...checkNewCheckpoint({ threadId: c.threadId, name: c.name, messageId: c.messageId }, 0),
      id: checkId(c.id, `checkpoints[${i}].id`),
      createdAt: checkRequiredTimestamp(c.createdAt, `checkpoints[${i}].createdAt`),
    };
    if (checkpointNames.has(checked.name))
      throw new CairnError(
        'CONFLICT',
        `checkpoints[${i}]: checkpoint ${show(checked.name)} appears twice`,
      );
    checkpointNames.add(checked.name);
    message(checked.messageId, `checkpoints[${i}].messageId`);
    return checked;
  });

  const versions = new Map<string, number>();
  const stateCommits = arrayOf(records.stateCommits, 'stateCommits').map((raw, i) => {
    checkObjectArgument(raw, `stateCommits[${i}]`, STATE_COMMIT_KEYS);
    const c = raw as StateCommit;
    const version = versions.get(c.branchId) ?? 0;
    if (!branchIds.has(c.branchId))
      throw invalid(
        `stateCommits[${i}]: branch ${show(c.branchId)} is not among the thread's branches`,
      );
    if (c.version !== version + 1)
      throw invalid(
        `stateCommits[${i}]: version ${show(c.version)} of branch ${show(c.branchId)} should be ${version + 1}`,
      );
    versions.set(c.branchId, version + 1);
    const checked = checkStateCommit(
      { branchId: c.branchId, messageId: c.messageId, update: c.update, snapshot: c.snapshot },
      version,
    );
    message(checked.messageId, `stateCommits[${i}].messageId`);
    return {
      version: version + 1,
      draft: {
        ...checked,
        createdAt: checkRequiredTimestamp(c.createdAt, `stateCommits[${i}].createdAt`),
      },
    };
  });

  const turnIds = new Set<string>();
  const turns = arrayOf(records.turns, 'turns').map((raw, i) => {
    const turn = checkTurn(raw as Turn, `turns[${i}]`);
    inThread(turn.threadId, `turns[${i}]`);
    message(turn.messageId, `turns[${i}].messageId`);
    if (turnIds.has(turn.id))
      throw new CairnError('CONFLICT', `turns[${i}]: turn ${show(turn.id)} appears twice`);
    turnIds.add(turn.id);
    return turn;
  });
  return { thread, messages, branches, activeBranchId, checkpoints, stateCommits, turns };
}

/** `restoreLeases`: whole leases, timestamps included; each key once. */
export function checkLeases(leases: Lease[]): Lease[] {
  const keys = new Set<string>();
  return arrayOf(leases, 'leases').map((raw, i) => {
    checkObjectArgument(raw, `leases[${i}]`, LEASE_KEYS);
    const l = raw as Lease;
    const key = checkName(l.key, `leases[${i}].key`);
    if (keys.has(key))
      throw new CairnError('CONFLICT', `leases[${i}]: key ${show(key)} appears twice`);
    keys.add(key);
    return {
      key,
      owner: checkName(l.owner, `leases[${i}].owner`),
      acquiredAt: checkRequiredTimestamp(l.acquiredAt, `leases[${i}].acquiredAt`),
      renewedAt: checkRequiredTimestamp(l.renewedAt, `leases[${i}].renewedAt`),
      expiresAt: checkRequiredTimestamp(l.expiresAt, `leases[${i}].expiresAt`),
      releasedAt:
        l.releasedAt == null ? null : checkTimestamp(l.releasedAt, `leases[${i}].releasedAt`, 0),
      data: checkObject(l.data, `leases[${i}].data`),
    };
  });
}

// ---------------------------------------------------------------- entries

/** An entry of a `putEntries` batch, checked: what to write and the version it expects. */
export interface EntryDraft {
  collection: string;
  id: string;
  group: string | null;
  data: JsonObject;
  expectedVersion: number | null | undefined;
}

/** The most entries one `putEntries` call writes. */
export const MAX_ENTRY_BATCH = 1000;

/** A `putEntries` batch: each entry's fields, no entry twice. */
export function checkEntryBatch(batch: NewEntry[]): EntryDraft[] {
  if (!Array.isArray(batch)) throw invalid('putEntries expects an array of entries');
  if (batch.length > MAX_ENTRY_BATCH)
    throw invalid(`putEntries takes at most ${MAX_ENTRY_BATCH} entries, got ${batch.length}`);
  const seen = new Set<string>();
  return batch.map((e, i) => {
    if (typeof e !== 'object' || e === null)
      throw invalid(`entries[${i}] must be an object, got ${show(e)}`);
    const collection = checkName(e.collection, `entries[${i}].collection`);
    const id = checkName(e.id, `entries[${i}].id`);
    const key = JSON.stringify([collection, id]);
    if (seen.has(key))
      throw invalid(
        `entries[${i}]: entry ${show(id)} of ${show(collection)} is twice in the batch`,
      );
    seen.add(key);
    const v = e.expectedVersion;
    if (v !== undefined && v !== null && (!Number.isSafeInteger(v) || v < 1))
      throw invalid(
        `entries[${i}].expectedVersion must be null or a positive integer, got ${show(v)}`,
      );
    return {
      collection,
      id,
      group: checkOptionalId(e.group, `entries[${i}].group`),
      data: checkObject(e.data, `entries[${i}].data`),
      expectedVersion: v,
    };
  });
}

/**
 * What `putEntries` writes for one checked entry over what is stored: the rule of
 * compare-and-set and versions every store follows.
 */
export function planEntryPut(current: Entry | null, draft: EntryDraft, now: number): Entry {
  const expected = draft.expectedVersion;
  const where = `entry ${show(draft.id)} of ${show(draft.collection)}`;
  if (expected === null && current)
    throw conflict(`${where} already exists (version ${current.version})`, {
      collection: draft.collection,
      id: draft.id,
      version: current.version,
    });
  if (typeof expected === 'number' && current?.version !== expected)
    throw conflict(
      current
        ? `${where} is at version ${current.version}, not ${expected}`
        : `${where} does not exist (expected version ${expected})`,
      { collection: draft.collection, id: draft.id, version: current?.version ?? null },
    );
  return {
    collection: draft.collection,
    id: draft.id,
    group: draft.group,
    data: draft.data,
    version: (current?.version ?? 0) + 1,
    createdAt: current?.createdAt ?? now,
    updatedAt: now,
  };
}

/** `listEntries` options: the group, the id to start after, the limit. */
export function checkListEntriesOptions(options: ListEntriesOptions): {
  group: string | null;
  afterId: string | null;
  limit: number;
} {
  checkObjectArgument(options, 'listEntries options');
  return {
    group: options.group === undefined ? null : checkName(options.group, 'group'),
    afterId: options.afterId === undefined ? null : checkName(options.afterId, 'afterId'),
    limit: checkLimit(options.limit, 'limit', 100, 10_000),
  };
}

/** `deleteEntries`' selector: ids (at most 1000) or a group. */
export function checkEntrySelector(
  selector: EntrySelector,
): { ids: string[]; group?: never } | { group: string; ids?: never } {
  checkObjectArgument(selector, 'deleteEntries selector');
  const s = selector as { ids?: unknown; group?: unknown };
  if ((s.ids === undefined) === (s.group === undefined))
    throw invalid('deleteEntries takes exactly one of ids and group');
  if (s.group !== undefined) return { group: checkName(s.group, 'group') };
  if (!Array.isArray(s.ids) || s.ids.length > MAX_ENTRY_BATCH)
    throw invalid(
      `ids must be an array of at most ${MAX_ENTRY_BATCH} entry ids, got ${show(s.ids)}`,
    );
  return { ids: [...new Set(s.ids.map((id, i) => checkName(id, `ids[${i}]`)))] };
}
