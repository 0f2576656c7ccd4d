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

/**
 * A table's columns and the decoder of its rows into a `@cairn/core` type (snake_case
 * columns to camelCase fields). Timestamps are double precision and JSON is jsonb, so
 * both drivers return numbers and parsed values; bigserial `seq` arrives as a string
 * from pg and a number from PGlite, hence Number().
 */
function table<T>(columns: string): { columns: string; decode: (r: Row) => T } {
  const fields = columns.split(', ').map((c) => {
    const name = c.replaceAll('"', '');
    return [name, name.replace(/_([a-z])/g, (_, l: string) => l.toUpperCase())] as const;
  });
  const decode = (r: Row) => {
    const out: Record<string, unknown> = {};
    for (const [from, to] of fields) out[to] = from === 'seq' ? Number(r[from]) : r[from];
    return out as T;
  };
  return { columns, decode };
}

export const THREAD = table<Thread>('id, resource_id, title, metadata, created_at, updated_at');
export const MESSAGE = table<Message>(
  'id, thread_id, parent_id, role, type, data, created_at, depth',
);
export const BRANCH = table<Branch>(
  'id, thread_id, name, head_message_id, is_active, created_at, fork_message_id, parent_branch_id, seq',
);
export const CHECKPOINT = table<Checkpoint>('id, thread_id, name, message_id, created_at');
export const COMMIT = table<StateCommit>(
  'branch_id, thread_id, version, message_id, message_depth, "update", snapshot, created_at',
);
export const TURN = table<Turn>(
  'id, thread_id, message_id, source, user_id, status, state, steps, started_at, finished_at',
);
export const LEASE = table<Lease>(
  'key, owner, acquired_at, renewed_at, expires_at, released_at, data',
);
export const MEMORY = table<Memory>(
  'id, type, agent_id, entity_id, room_id, world_id, scope, content, metadata, content_hash, embedding, created_at',
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
