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
import type { EmbeddingSpace } from '@cairn/store';
import { type MessageLink, SqlTable } from '@cairn/store/adapter';
import { unpackJson } from './packed.js';

/**
 * The tables' columns and row decoders. Timestamps are double precision and JSON is
 * jsonb, so both clients return numbers and parsed values (JSON, `*`, is sent as text);
 * bigserial `seq` arrives as a string from pg and a number from PGlite (`#`). A message's
 * data is the exception: packed (`packJson`, bytea), see `MESSAGE`.
 */
const table = <T>(name: string, spec: string) => new SqlTable<T>(name, spec, { jsonText: false });

/**
 * `t`, whose `data` column holds `packJson` bytes, with a `decode` that unpacks them
 * (bytea arrives as a Buffer from pg and a Uint8Array from PGlite).
 */
function packedData<T extends { data: unknown }>(t: SqlTable<T>): SqlTable<T> {
  const decode = t.decode;
  t.decode = (row) => {
    const value = decode(row);
    value.data = unpackJson(row.data as Uint8Array);
    return value;
  };
  return t;
}

export const THREAD = table<Thread>('threads', 'id resourceId title metadata* createdAt updatedAt');
/**
 * Messages are read back only whole, so their data is packed: a chat message's row is a
 * third smaller.
 */
export const MESSAGE = packedData(
  table<Message>('messages', 'id threadId parentId role type data createdAt depth'),
);
/** A stored message's place in its thread (`lookupMessageBatch`). */
export const MESSAGE_LINK = table<MessageLink>('messages', 'threadId depth jumpId jumpDepth');
export const BRANCH = table<Branch>(
  'branches',
  'id threadId name headMessageId isActive createdAt forkMessageId parentBranchId seq#',
);
export const CHECKPOINT = table<Checkpoint>('checkpoints', 'id threadId name messageId createdAt');
export const COMMIT = table<StateCommit>(
  'state_commits',
  'branchId threadId version messageId messageDepth update* snapshot* createdAt',
);
export const TURN = table<Turn>(
  'turns',
  'id threadId messageId source userId status state* steps* startedAt finishedAt',
);
export const LEASE = table<Lease>(
  'leases',
  'key owner acquiredAt renewedAt expiresAt releasedAt data*',
);
export const EMBEDDING_SPACE = table<EmbeddingSpace>('embedding_space', 'embedderId dimensions');
export const MEMORY = table<Memory>(
  'memories',
  'id type agentId entityId roomId worldId scope content* metadata* contentHash embedding createdAt',
);

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
