import type { Memory, MemoryScope, MemoryType } from '@cairn/core';
import type { MemoryFilter } from '@cairn/store';

/** A WHERE fragment over `cairn_memories m` and its parameters. */
export interface SqlFragment {
  sql: string;
  params: unknown[];
}

/**
 * The memory filter as SQL, the same rule as `matchesMemoryFilter` (including `canSee`
 * for a viewer), so that searches apply it inside the query. Lists travel as one JSON
 * parameter, so a long `ids` list never meets SQLite's variable limit.
 */
export function memoryFilterSql(filter: MemoryFilter): SqlFragment {
  const where: string[] = [];
  const params: unknown[] = [];
  const list = (column: string, values: readonly string[]) => {
    if (values.length === 0) where.push('0');
    else {
      where.push(`${column} IN (SELECT value FROM json_each(?))`);
      params.push(JSON.stringify(values));
    }
  };
  const { viewer } = filter;
  if (viewer) {
    where.push(
      "((m.scope = 'private' AND m.agent_id = ?) OR (m.scope = 'room' AND m.room_id = ?) OR (m.scope = 'shared' AND m.world_id = ?))",
    );
    // `= NULL` is never true, as canSee wants for a viewer outside any room or world.
    params.push(viewer.agentId, viewer.roomId ?? null, viewer.worldId ?? null);
  }
  if (filter.agentId !== undefined) {
    where.push('m.agent_id = ?');
    params.push(filter.agentId);
  }
  if (filter.types) list('m.type', filter.types);
  if (filter.scopes) list('m.scope', filter.scopes);
  for (const [key, column] of [
    ['entityId', 'm.entity_id'],
    ['roomId', 'm.room_id'],
    ['worldId', 'm.world_id'],
  ] as const) {
    if (filter[key] !== undefined) {
      where.push(`${column} = ?`);
      params.push(filter[key]);
    }
  }
  if (filter.contentHashes) list('m.content_hash', filter.contentHashes);
  if (filter.ids) list('m.id', filter.ids);
  if (filter.createdAfter !== undefined) {
    where.push('m.created_at > ?');
    params.push(filter.createdAfter);
  }
  if (filter.createdBefore !== undefined) {
    where.push('m.created_at < ?');
    params.push(filter.createdBefore);
  }
  return { sql: where.length === 0 ? '1' : where.join(' AND '), params };
}

/** The memory columns, in the order `memoryFromRow` reads them. */
export const MEMORY_COLUMNS =
  'm.id, m.type, m.agent_id, m.entity_id, m.room_id, m.world_id, m.scope, m.content, m.metadata, m.content_hash, m.embedding, m.created_at';

export function memoryFromRow(r: unknown[]): Memory {
  return {
    id: r[0] as string,
    type: r[1] as MemoryType,
    agentId: r[2] as string,
    entityId: r[3] as string | null,
    roomId: r[4] as string | null,
    worldId: r[5] as string | null,
    scope: r[6] as MemoryScope,
    content: JSON.parse(r[7] as string),
    metadata: JSON.parse(r[8] as string),
    contentHash: r[9] as string,
    embedding: r[10] == null ? null : decodeVector(r[10] as Uint8Array),
    createdAt: r[11] as number,
  };
}

type VectorArray = Float32ArrayConstructor | Float64ArrayConstructor;

/**
 * A vector as a blob: float32 (sqlite-vec's format) by default; cached embeddings keep
 * full precision in float64, since they are the embedder's output, verbatim.
 */
export function encodeVector(vector: readonly number[], type: VectorArray = Float32Array): Buffer {
  const f = type.from(vector);
  return Buffer.from(f.buffer, f.byteOffset, f.byteLength);
}

export function decodeVector(blob: Uint8Array, type: VectorArray = Float32Array): number[] {
  // Copy: a blob's offset in its buffer need not be aligned.
  const f = new type(blob.byteLength / type.BYTES_PER_ELEMENT);
  new Uint8Array(f.buffer).set(blob);
  // A loop, not Array.from: V8 runs that through the iterator, ~5x slower at 384 values.
  const out = new Array<number>(f.length);
  for (let i = 0; i < f.length; i++) out[i] = f[i]!;
  return out;
}
