import {
  applyUpdate,
  type Branch,
  CairnError,
  checkKeys,
  type Fields,
  invalidArgument,
  type JsonObject,
  keysOf,
  type Message,
  migrateState,
  SCHEMA_VERSION_KEY,
  type StateCommit,
  type StateSchema,
  type ThreadStateOf,
} from '@cairn/core';
import type { Store } from '@cairn/store';

/**
 * When a state commit also stores the whole state. A snapshot is written when the
 * commits since the last one reach `maxCommits`, or when the bytes of their updates
 * pass `bytesRatio` times the size of that snapshot (and at least `minBytes`), so that
 * reading the state costs at most one snapshot plus a bounded replay, while a large
 * state that receives small updates is rarely rewritten.
 */
export interface SnapshotPolicy {
  /** Default 50. */
  maxCommits?: number;
  /** Default 1: replaying must not read more update bytes than the snapshot itself. */
  bytesRatio?: number;
  /** Below this many update bytes since the last snapshot, never snapshot for size. Default 4096. */
  minBytes?: number;
}

export type ResolvedSnapshotPolicy = Required<SnapshotPolicy>;

/** A snapshot policy with its defaults; `INVALID_ARGUMENT` naming a key or value it cannot take. */
export function resolveSnapshotPolicy(p: SnapshotPolicy | undefined): ResolvedSnapshotPolicy {
  if (p === undefined) return { maxCommits: 50, bytesRatio: 1, minBytes: 4096 };
  checkKeys(
    p,
    'snapshotPolicy',
    keysOf<SnapshotPolicy>()(['maxCommits', 'bytesRatio', 'minBytes']),
  );
  const number = (key: keyof SnapshotPolicy, fallback: number, min: number, integer: boolean) => {
    const v = p[key] ?? fallback;
    if (typeof v !== 'number' || !(v >= min) || (integer && !Number.isInteger(v) && v !== Infinity))
      throw invalidArgument(
        `snapshotPolicy.${key} must be ${integer ? 'an integer' : 'a number'} >= ${min}, got ${String(v)}`,
      );
    return v;
  };
  return {
    maxCommits: number('maxCommits', 50, 1, true),
    bytesRatio: number('bytesRatio', 1, 0, false),
    minBytes: number('minBytes', 4096, 0, false),
  };
}

/** A branch's state as read from its commits, plus what the snapshot policy needs. */
export interface LoadedState {
  /** The state in the running schema's shape (migrated when it was stored by an older one). */
  state: JsonObject;
  /** The latest version included (0: no commit). */
  version: number;
  /**
   * The schema version the stored state at `version` was written under: the one its latest
   * snapshot records (1 when it records none). The running schema's for a branch with no commit.
   */
  schemaVersion: number;
  /** The stored state before migration (`state` itself when `schemaVersion` is the running one). */
  stored: JsonObject;
  /** Commits replayed on top of the last snapshot (or of the initial state). */
  commitsSinceSnapshot: number;
  /** Bytes of those commits' updates. */
  bytesSinceSnapshot: number;
  /** Size of the last snapshot (or of the initial state), in JSON characters. */
  snapshotBytes: number;
}

export const jsonSize = (value: unknown): number => JSON.stringify(value).length;

/**
 * The snapshot to store for `state` under `schema`: the state itself for version 1 (stored
 * as before schemas had versions), with the version recorded under `SCHEMA_VERSION_KEY` from 2 on.
 */
export function snapshotOf(schema: StateSchema<any>, state: JsonObject): JsonObject {
  return schema.version === 1 ? state : { ...state, [SCHEMA_VERSION_KEY]: schema.version };
}

/** Whether the next commit must be a snapshot so that it records the running schema version. */
export function needsVersionSnapshot(schema: StateSchema<any>, loaded: LoadedState): boolean {
  return loaded.schemaVersion !== schema.version || (loaded.version === 0 && schema.version > 1);
}

/** A stored snapshot's schema version (1 when it records none) and its state. */
function readSnapshot(snapshot: JsonObject): { schemaVersion: number; state: JsonObject } {
  if (!Object.hasOwn(snapshot, SCHEMA_VERSION_KEY)) return { schemaVersion: 1, state: snapshot };
  const { [SCHEMA_VERSION_KEY]: v, ...state } = snapshot;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) {
    throw new CairnError('INVALID_UPDATE', `a stored snapshot records schema version ${String(v)}`);
  }
  return { schemaVersion: v, state };
}

/** The schema a state of version `v` was written under, when known: the running one, or a migration's. */
function schemaOf(schema: StateSchema<any>, v: number): StateSchema<any> | undefined {
  if (v === schema.version) return schema;
  return schema.migrations.find((m) => m.from === v)?.schema;
}

/**
 * `SCHEMA_TOO_NEW` when a commit's state was written under a schema version newer than the
 * running one: this code would misread it, and its writes would corrupt it.
 */
function refuseNewer(schema: StateSchema<any>, v: number, c: StateCommit): void {
  if (v <= schema.version) return;
  throw new CairnError(
    'SCHEMA_TOO_NEW',
    `the state of thread ${c.threadId} (branch ${c.branchId}) was written by state schema version ${v}; this code has version ${schema.version}, so it neither reads nor writes it`,
    {
      details: {
        found: v,
        supported: schema.version,
        threadId: c.threadId,
        branchId: c.branchId,
        version: c.version,
      },
    },
  );
}

/**
 * Applies one stored update written under schema version `v`: through that version's
 * reducers when its schema is known (the running one, or a migration's `schema`); else each
 * field through the running schema's reducer of that name (unvalidated), or replacing it
 * when the running schema has no such field.
 */
function foldUpdate(
  schema: StateSchema<any>,
  v: number,
  state: JsonObject,
  update: JsonObject,
): JsonObject {
  const at = schemaOf(schema, v);
  if (at) return applyUpdate(at, state, update, { scope: 'thread' }).state as JsonObject;
  const next = { ...state };
  for (const [name, value] of Object.entries(update)) {
    if (value === undefined) continue;
    const def = Object.hasOwn(schema.fields, name) ? (schema.fields as Fields)[name] : undefined;
    if (def?.scope !== 'thread') {
      next[name] = value;
      continue;
    }
    try {
      next[name] = def.reducer(Object.hasOwn(state, name) ? state[name] : undefined, value);
    } catch (e) {
      throw new CairnError(
        'INVALID_UPDATE',
        `a stored update of state schema version ${v} to field "${name}" does not fold with the reducer of version ${schema.version}; give the migration from version ${v} its schema`,
        { cause: e, details: { field: name, found: v } },
      );
    }
  }
  return next;
}

/** The starting state of a branch first written under schema version `v`. */
function initialOf(schema: StateSchema<any>, v: number): JsonObject {
  return (schemaOf(schema, v)?.initial('thread') ?? {}) as JsonObject;
}

/** Applies stored commits (ascending) on top of a loaded state. */
export function replay<S extends StateSchema<any>>(
  schema: S,
  base: LoadedState,
  commits: readonly StateCommit[],
): LoadedState {
  let { stored, schemaVersion, version, commitsSinceSnapshot, bytesSinceSnapshot, snapshotBytes } =
    base;
  let changed = false;
  for (const c of commits) {
    if (c.version <= version) continue;
    if (c.snapshot) {
      const read = readSnapshot(c.snapshot);
      refuseNewer(schema, read.schemaVersion, c);
      stored = read.state;
      schemaVersion = read.schemaVersion;
      snapshotBytes = jsonSize(c.snapshot);
      commitsSinceSnapshot = 0;
      bytesSinceSnapshot = 0;
    } else {
      // A branch's first commit without a snapshot was written before schema versions were
      // recorded, or under version 1 (a later version's first commit is always a snapshot).
      if (version === 0 && schemaVersion !== 1) {
        schemaVersion = 1;
        stored = initialOf(schema, 1);
      }
      stored = foldUpdate(schema, schemaVersion, stored, c.update);
      commitsSinceSnapshot++;
      bytesSinceSnapshot += jsonSize(c.update);
    }
    version = c.version;
    changed = true;
  }
  const state = !changed
    ? base.state
    : schemaVersion === schema.version
      ? stored
      : (migrateState(schema, stored, schemaVersion) as JsonObject);
  return {
    state,
    version,
    schemaVersion,
    stored,
    commitsSinceSnapshot,
    bytesSinceSnapshot,
    snapshotBytes,
  };
}

/** A loaded state of no commit, or just written as a snapshot, of the running `schemaVersion`. */
export function initialLoaded(initial: JsonObject, schemaVersion: number): LoadedState {
  return {
    state: initial,
    version: 0,
    schemaVersion,
    stored: initial,
    commitsSinceSnapshot: 0,
    bytesSinceSnapshot: 0,
    snapshotBytes: jsonSize(initial),
  };
}

/**
 * Reads a branch's state: the latest commit (at or before `maxMessageDepth` when given),
 * from the newest snapshot at or before it plus the commits after that snapshot.
 * Null when the branch has no such commit.
 */
export async function readBranchState<S extends StateSchema<any>>(
  store: Store,
  schema: S,
  branchId: string,
  initial: JsonObject,
  maxMessageDepth?: number,
): Promise<LoadedState | null> {
  const latest = await store.getLatestStateCommit(
    branchId,
    maxMessageDepth === undefined ? undefined : { maxMessageDepth },
  );
  if (!latest) return null;
  if (latest.snapshot) return replay(schema, initialLoaded(initial, schema.version), [latest]);
  const snap = await store.getLatestStateCommit(branchId, {
    withSnapshot: true,
    maxVersion: latest.version,
  });
  const start = initialLoaded(initial, schema.version);
  const base = snap ? replay(schema, start, [snap]) : start;
  const commits = await store.getStateCommits(branchId, {
    fromVersion: base.version + 1,
    toVersion: latest.version,
  });
  return replay(schema, base, commits);
}

/** Whether the next commit (with an update of `updateBytes`) should carry a snapshot. */
export function wantsSnapshot(
  p: ResolvedSnapshotPolicy,
  loaded: LoadedState,
  updateBytes: number,
): boolean {
  if (loaded.commitsSinceSnapshot + 1 >= p.maxCommits) return true;
  const bytes = loaded.bytesSinceSnapshot + updateBytes;
  return bytes >= p.minBytes && bytes > loaded.snapshotBytes * p.bytesRatio;
}

/** Whether `m` is on the chain that ends at `headId` (the head itself included). O(log depth). */
export async function isOnChain(store: Store, headId: string | null, m: Message): Promise<boolean> {
  return headId !== null && store.isAncestor(m.id, headId);
}

/**
 * The state at `depth` on `branch`'s lineage: the branch's last commit at or before that
 * depth or, failing that, its parent branch's as of the fork message (and so on); the
 * initial state when no branch of the lineage has one. A branch without commits thus has
 * its parent's state as of its fork, as the engine writes when it first loads such a
 * branch; one forked from no message starts from the initial state.
 */
export async function readLineageState<S extends StateSchema<any>>(
  store: Store,
  schema: S,
  branch: Branch,
  depth: number,
): Promise<LoadedState> {
  const initial = schema.initial('thread') as JsonObject;
  let b: Branch | null = branch;
  let at = depth;
  for (let hops = 0; b && hops < 10_000; hops++) {
    const loaded = await readBranchState(store, schema, b.id, initial, at);
    if (loaded) return loaded;
    const fork = b.forkMessageId === null ? null : await store.getMessage(b.forkMessageId);
    if (!fork || b.parentBranchId === null) break;
    // Past the fork the parent's chain is another one: read the parent as of the fork.
    at = Math.min(at, fork.depth);
    b = await store.getBranchById(b.parentBranchId);
  }
  return initialLoaded(initial, schema.version);
}

/**
 * The thread state as of a message on a branch's lineage, read from the commit log
 * without opening a thread or switching its active branch — for inspectors and tools.
 * `NOT_FOUND` when the branch or message does not exist or the message is not on the
 * branch's chain.
 *
 * @example
 * ```ts
 * const state = await stateAsOf(store, Research, { branchId: branch.id, messageId });
 * ```
 */
export async function stateAsOf<S extends StateSchema<any>>(
  store: Store,
  schema: S,
  at: { branchId: string; messageId: string },
): Promise<ThreadStateOf<S>> {
  const [branch, message] = await Promise.all([
    store.getBranchById(at.branchId),
    store.getMessage(at.messageId),
  ]);
  if (!branch) throw new CairnError('NOT_FOUND', `branch ${JSON.stringify(at.branchId)} not found`);
  if (!message || !(await isOnChain(store, branch.headMessageId, message))) {
    throw new CairnError(
      'NOT_FOUND',
      `message ${JSON.stringify(at.messageId)} is not on branch ${JSON.stringify(branch.name)}`,
      { details: { messageId: at.messageId, branch: branch.name } },
    );
  }
  return (await readLineageState(store, schema, branch, message.depth)).state as ThreadStateOf<S>;
}
