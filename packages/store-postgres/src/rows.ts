import type {
  Branch,
  Checkpoint,
  Entry,
  JsonValue,
  Memory,
  Message,
  Thread,
  Turn,
} from '@cairn/core';
import type { EmbeddingSpace } from '@cairn/store';
import { type MessageLink, SqlTable, type StoredLease } from '@cairn/store/adapter';
import { packText, unpackJson } from './packed.js';

/**
 * The tables' columns and row decoders. Timestamps are double precision and JSON is
 * jsonb, so both clients return numbers and parsed values (JSON, `*`, is sent as text);
 * bigserial `seq` arrives as a string from pg and a number from PGlite (`#`). A message's
 * data may be packed instead, see `MESSAGE`.
 */
const table = <T>(name: string, spec: string) => new SqlTable<T>(name, spec, { jsonText: false });

/**
 * Message data of at least this many characters of JSON is packed when that saves a fifth:
 * a chat message of a few hundred bytes, which Postgres never compresses, packs to about
 * three fifths (the bench's LangChain-serialized chat messages: ~500 bytes to ~300).
 * Smaller data stays jsonb, read without unpacking.
 */
export const PACK_FROM = 256;

/** A message's data as stored: jsonb text (`json`) or packed bytes (`packed`), the other null. */
export function storedData(data: JsonValue): { json: string | null; packed: Buffer | null } {
  const json = JSON.stringify(data);
  if (json.length < PACK_FROM) return { json, packed: null };
  const packed = packText(json);
  return packed.length <= json.length * 0.8 ? { json: null, packed } : { json, packed: null };
}

export const THREAD = table<Thread>('threads', 'id resourceId title metadata* createdAt updatedAt');
/**
 * Messages, their data read from `data` (jsonb) or `packed` (bytea: a Buffer from pg, a
 * Uint8Array from PGlite), whichever `storedData` filled.
 */
export const MESSAGE = table<Message>(
  'messages',
  'id threadId parentId role type data* createdAt depth packed',
);
const decodeMessage = MESSAGE.decode;
MESSAGE.decode = (row) => {
  const { packed, ...m } = decodeMessage(row) as Message & { packed: Uint8Array | null };
  if (packed !== null) m.data = unpackJson(packed);
  return m;
};
/** A stored message's place in its thread (`lookupMessageBatch`). */
export const MESSAGE_LINK = table<MessageLink>('messages', 'threadId depth jumpId jumpDepth');
export const BRANCH = table<Branch>(
  'branches',
  'id threadId name headMessageId isActive createdAt forkMessageId parentBranchId seq#',
);
export const CHECKPOINT = table<Checkpoint>('checkpoints', 'id threadId name messageId createdAt');
export const TURN = table<Turn>(
  'turns',
  'id threadId messageId source userId status state* steps* startedAt finishedAt',
);
export const ENTRY = table<Entry>(
  'entries',
  'collection id group=group_id data* version createdAt updatedAt',
);
export const LEASE = table<StoredLease>(
  'leases',
  'key owner acquiredAt renewedAt expiresAt releasedAt data* waiters*',
);
export const EMBEDDING_SPACE = table<EmbeddingSpace>('embedding_space', 'embedderId dimensions');
export const MEMORY = table<Memory>(
  'memories',
  'id type agentId entityId roomId worldId scope content* metadata* contentHash embedding createdAt ' +
    'validFrom validTo supersededAt supersedes lineageId source*',
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
