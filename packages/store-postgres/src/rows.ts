import type {
  Branch,
  Checkpoint,
  Lease,
  Memory,
  Message,
  StateCommit,
  Thread,
  Turn,
} from '@cairn/core';
import type { Row } from './queryable.js';

// Column lists and row mappers. Timestamps are double precision and JSON is jsonb, so
// both drivers return numbers and parsed values; bigserial `seq` arrives as a string
// from pg and a number from PGlite, hence Number().

export const THREAD_COLUMNS = 'id, resource_id, title, metadata, created_at, updated_at, seq';
export const toThread = (r: Row): Thread => ({
  id: r.id as string,
  resourceId: r.resource_id as string | null,
  title: r.title as string | null,
  metadata: r.metadata as Thread['metadata'],
  createdAt: r.created_at as number,
  updatedAt: r.updated_at as number,
});

export const MESSAGE_COLUMNS = 'id, thread_id, parent_id, role, type, data, created_at, depth';
export const toMessage = (r: Row): Message => ({
  id: r.id as string,
  threadId: r.thread_id as string,
  parentId: r.parent_id as string | null,
  role: r.role as string,
  type: r.type as string | null,
  data: r.data as Message['data'],
  createdAt: r.created_at as number,
  depth: r.depth as number,
});

export const BRANCH_COLUMNS =
  'id, thread_id, name, head_message_id, is_active, created_at, fork_message_id, parent_branch_id, seq';
export const toBranch = (r: Row): Branch => ({
  id: r.id as string,
  threadId: r.thread_id as string,
  name: r.name as string,
  headMessageId: r.head_message_id as string | null,
  isActive: r.is_active as boolean,
  createdAt: r.created_at as number,
  forkMessageId: r.fork_message_id as string | null,
  parentBranchId: r.parent_branch_id as string | null,
  seq: Number(r.seq),
});

export const CHECKPOINT_COLUMNS = 'id, thread_id, name, message_id, created_at';
export const toCheckpoint = (r: Row): Checkpoint => ({
  id: r.id as string,
  threadId: r.thread_id as string,
  name: r.name as string,
  messageId: r.message_id as string,
  createdAt: r.created_at as number,
});

export const COMMIT_COLUMNS =
  'branch_id, thread_id, version, message_id, message_depth, "update", snapshot, created_at';
export const toCommit = (r: Row): StateCommit => ({
  branchId: r.branch_id as string,
  threadId: r.thread_id as string,
  version: r.version as number,
  messageId: r.message_id as string | null,
  messageDepth: r.message_depth as number | null,
  update: r.update as StateCommit['update'],
  snapshot: r.snapshot as StateCommit['snapshot'],
  createdAt: r.created_at as number,
});

export const TURN_COLUMNS =
  'id, thread_id, message_id, source, user_id, status, state, steps, started_at, finished_at';
export const toTurn = (r: Row): Turn => ({
  id: r.id as string,
  threadId: r.thread_id as string,
  messageId: r.message_id as string | null,
  source: r.source as string | null,
  userId: r.user_id as string | null,
  status: r.status as Turn['status'],
  state: r.state as Turn['state'],
  steps: r.steps as Turn['steps'],
  startedAt: r.started_at as number,
  finishedAt: r.finished_at as number | null,
});

export const LEASE_COLUMNS = 'key, owner, acquired_at, renewed_at, expires_at, released_at, data';
export const toLease = (r: Row): Lease => ({
  key: r.key as string,
  owner: r.owner as string,
  acquiredAt: r.acquired_at as number,
  renewedAt: r.renewed_at as number,
  expiresAt: r.expires_at as number,
  releasedAt: r.released_at as number | null,
  data: r.data as Lease['data'],
});

export const MEMORY_COLUMNS =
  'id, type, agent_id, entity_id, room_id, world_id, scope, content, metadata, content_hash, embedding, created_at, seq';
export const toMemory = (r: Row): Memory => ({
  id: r.id as string,
  type: r.type as Memory['type'],
  agentId: r.agent_id as string,
  entityId: r.entity_id as string | null,
  roomId: r.room_id as string | null,
  worldId: r.world_id as string | null,
  scope: r.scope as Memory['scope'],
  content: r.content as Memory['content'],
  metadata: r.metadata as Memory['metadata'],
  contentHash: r.content_hash as string,
  embedding: (r.embedding as number[] | null) ?? null,
  createdAt: r.created_at as number,
});

/** A float8[] literal; JavaScript's shortest round-trip form keeps every bit. */
export function floatArray(v: readonly number[]): string {
  return `{${v.join(',')}}`;
}

/** A pgvector literal. */
export function vectorLiteral(v: readonly number[]): string {
  return `[${v.join(',')}]`;
}

export function norm(v: readonly number[]): number {
  let s = 0;
  for (const x of v) s += x * x;
  return Math.sqrt(s);
}
