import type { JsonObject, JsonValue } from './json.js';

/** Milliseconds since the Unix epoch. Every timestamp in Cairn is one of these. */
export type Timestamp = number;

/** The longest name (branch, checkpoint, lease key, ...) a store accepts, in characters. */
export const MAX_NAME_LENGTH = 200;

/** A conversation. Deleting it deletes everything under it. */
export interface Thread {
  id: string;
  /** The user or tenant that owns the thread. */
  resourceId: string | null;
  title: string | null;
  metadata: JsonObject;
  createdAt: Timestamp;
  updatedAt: Timestamp;
}

/**
 * An immutable node of a thread's message graph. `depth` is the parent's depth + 1
 * (a root has depth 0): it orders a chain without sorting on time.
 */
export interface Message {
  id: string;
  threadId: string;
  parentId: string | null;
  role: string;
  type: string | null;
  data: JsonValue;
  createdAt: Timestamp;
  depth: number;
}

/** A named pointer to a head message. Names are unique per thread; one branch is active. */
export interface Branch {
  id: string;
  threadId: string;
  name: string;
  headMessageId: string | null;
  isActive: boolean;
  createdAt: Timestamp;
  /** Where the branch started: its head when it was created. */
  forkMessageId: string | null;
  /** The branch it was made from, if any. */
  parentBranchId: string | null;
  /** Creation order within the store; breaks ties between equal `createdAt`. */
  seq: number;
}

/** A named bookmark on a message. Saving an existing name moves it. */
export interface Checkpoint {
  id: string;
  threadId: string;
  name: string;
  messageId: string;
  createdAt: Timestamp;
}

/**
 * One change to a branch's state. Versions run 1, 2, 3, ... per branch with no gap.
 * `snapshot`, when present, is the whole state after this commit, so reading need not
 * replay commits before it.
 */
export interface StateCommit {
  branchId: string;
  threadId: string;
  version: number;
  /** The branch's head message when the commit was made. */
  messageId: string | null;
  /** The depth of `messageId` (null when there is no head yet). */
  messageDepth: number | null;
  update: JsonObject;
  snapshot: JsonObject | null;
  createdAt: Timestamp;
}

export type TurnStatus = 'running' | 'finished' | 'failed';

/** The timing of one named step of a turn. */
export interface TurnStep {
  name: string;
  start: Timestamp;
  end: Timestamp | null;
  error: string | null;
}

/** The short-lived state of one message being processed. */
export interface Turn {
  id: string;
  threadId: string;
  messageId: string | null;
  source: string | null;
  userId: string | null;
  status: TurnStatus;
  state: JsonObject;
  steps: TurnStep[];
  startedAt: Timestamp;
  finishedAt: Timestamp | null;
}

/**
 * A time-limited claim on a key (one research run per thread, say). A lease is live
 * while `releasedAt` is null and `expiresAt` is in the future.
 */
export interface Lease {
  key: string;
  owner: string;
  acquiredAt: Timestamp;
  renewedAt: Timestamp;
  expiresAt: Timestamp;
  releasedAt: Timestamp | null;
  data: JsonObject;
}

/**
 * A JSON document in a named collection: what an integration keeps beside threads (a
 * server's runs, their queue, their streamed events). `version` is 1 when the entry is
 * written first and grows by one with every write, for compare-and-set; `group` ties
 * entries together (a thread's runs, a run's events) for listing and deleting them.
 */
export interface Entry {
  collection: string;
  id: string;
  group: string | null;
  data: JsonObject;
  version: number;
  createdAt: Timestamp;
  updatedAt: Timestamp;
}

export type MemoryType = 'document' | 'fragment' | 'message' | 'description' | 'custom';
export const MEMORY_TYPES: readonly MemoryType[] = [
  'document',
  'fragment',
  'message',
  'description',
  'custom',
];

/**
 * Who may see a memory: `private` — only the agent that created it; `room` — viewers in
 * its room; `shared` — viewers in its world.
 */
export type MemoryScope = 'private' | 'room' | 'shared';
export const MEMORY_SCOPES: readonly MemoryScope[] = ['private', 'room', 'shared'];

export interface MemoryContent {
  text: string;
  [key: string]: JsonValue;
}

/**
 * Where a memory was learned: the thread (and branch) and the messages it came from. Kept
 * as given: the thread or messages may be deleted later.
 */
export interface MemorySource {
  threadId: string;
  branchId?: string;
  messageIds: string[];
  /**
   * Branch-scoped (opt-in): the memory is seen only from a branch of `threadId` whose chain
   * holds its last message (`messageIds`, in chain order, the last the one it was learned
   * at): the branch it was written on and the branches forked after that message, not a
   * branch forked before it nor one rewound past it, and not from another thread or from
   * no branch (see `MemoryFilter.visibleFrom`). Kept as given, like the rest of the source:
   * while its last message is not stored (its thread deleted, or not copied yet) it is
   * seen from no branch.
   */
  branchScoped?: boolean;
}

/**
 * A long-term record an agent can recall.
 *
 * Two times: event time, when the fact holds (`validFrom` to `validTo`), and system time,
 * when the store held this version as current (`createdAt` to `supersededAt`). A fact that
 * changes is recorded as a new version (`Store.supersedeMemory`) that `supersedes` the old
 * one; every version of a fact shares its first version's id as `lineageId`.
 */
export interface Memory {
  id: string;
  type: MemoryType;
  agentId: string;
  entityId: string | null;
  roomId: string | null;
  worldId: string | null;
  scope: MemoryScope;
  content: MemoryContent;
  metadata: JsonObject;
  contentHash: string;
  embedding: number[] | null;
  createdAt: Timestamp;
  /** When the fact starts to hold (ms, inclusive); null: since always (not known). */
  validFrom: Timestamp | null;
  /** When the fact stops holding (ms, exclusive); null: open. A supersession sets it. */
  validTo: Timestamp | null;
  /** When a newer version replaced this one (system time); null: the current version. */
  supersededAt: Timestamp | null;
  /** The id of the version this one replaced; null for a first version. */
  supersedes: string | null;
  /** The id of the first version of this fact, shared by all its versions (its own id for a first version). */
  lineageId: string;
  /** The messages it was learned from; null when not given. */
  source: MemorySource | null;
}

/** The one looking at memories: an agent, in a room, in a world. */
export interface Viewer {
  agentId: string;
  roomId?: string | null;
  worldId?: string | null;
}

/**
 * The scope rule, as one pure function: every store enforces the same rule inside its
 * query, and tests compare against this.
 *
 * @example
 * ```ts
 * canSee({ agentId: 'a', roomId: 'r1' }, memory);
 * ```
 */
export function canSee(
  viewer: Viewer,
  memory: Pick<Memory, 'scope' | 'agentId' | 'roomId' | 'worldId'>,
): boolean {
  switch (memory.scope) {
    case 'private':
      return memory.agentId === viewer.agentId;
    case 'room':
      return memory.roomId !== null && memory.roomId === (viewer.roomId ?? null);
    case 'shared':
      return memory.worldId !== null && memory.worldId === (viewer.worldId ?? null);
  }
}
