import {
  applyUpdate,
  type Branch,
  CairnError,
  checkKeys,
  invalidArgument,
  type JsonObject,
  keysOf,
  type Message,
  type StateCommit,
  type StateOf,
  type StateSchema,
  type ThreadStateOf,
  type UpdateOf,
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
  state: JsonObject;
  /** The latest version included (0: no commit). */
  version: number;
  /** Commits replayed on top of the last snapshot (or of the initial state). */
  commitsSinceSnapshot: number;
  /** Bytes of those commits' updates. */
  bytesSinceSnapshot: number;
  /** Size of the last snapshot (or of the initial state), in JSON characters. */
  snapshotBytes: number;
}

export const jsonSize = (value: unknown): number => JSON.stringify(value).length;

/** Applies stored commits (ascending) on top of a loaded state. */
export function replay<S extends StateSchema<any>>(
  schema: S,
  base: LoadedState,
  commits: readonly StateCommit[],
): LoadedState {
  let { state, version, commitsSinceSnapshot, bytesSinceSnapshot, snapshotBytes } = base;
  for (const c of commits) {
    if (c.version <= version) continue;
    if (c.snapshot) {
      state = c.snapshot;
      snapshotBytes = jsonSize(c.snapshot);
      commitsSinceSnapshot = 0;
      bytesSinceSnapshot = 0;
    } else {
      state = applyUpdate(schema, state as StateOf<S>, c.update as UpdateOf<S>, { scope: 'thread' })
        .state as JsonObject;
      commitsSinceSnapshot++;
      bytesSinceSnapshot += jsonSize(c.update);
    }
    version = c.version;
  }
  return { state, version, commitsSinceSnapshot, bytesSinceSnapshot, snapshotBytes };
}

export function initialLoaded(initial: JsonObject): LoadedState {
  return {
    state: initial,
    version: 0,
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
  if (latest.snapshot) return replay(schema, initialLoaded(initial), [latest]);
  const snap = await store.getLatestStateCommit(branchId, {
    withSnapshot: true,
    maxVersion: latest.version,
  });
  const base = snap ? replay(schema, initialLoaded(initial), [snap]) : initialLoaded(initial);
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
  return initialLoaded(initial);
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
