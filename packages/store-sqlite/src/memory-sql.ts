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

/**
 * An FTS5 query matching any of the words: each word quoted (so no user text is read as
 * FTS5 syntax), joined by OR. Null when the text has no words.
 */
export function ftsAnyWordQuery(tokens: readonly string[]): string | null {
  const unique = [...new Set(tokens)];
  if (unique.length === 0) return null;
  return unique.map((t) => `"${t.replaceAll('"', '""')}"`).join(' OR ');
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
    embedding: r[10] == null ? null : decodeF32(r[10] as Uint8Array),
    createdAt: r[11] as number,
  };
}

/** A vector as sqlite-vec's float32 blob. */
export function encodeF32(vector: readonly number[]): Buffer {
  const f = Float32Array.from(vector);
  return Buffer.from(f.buffer, f.byteOffset, f.byteLength);
}

export function decodeF32(blob: Uint8Array): number[] {
  // Copy: a blob's offset in its buffer need not be 4-byte aligned.
  const f = new Float32Array(blob.byteLength / 4);
  new Uint8Array(f.buffer).set(blob);
  return Array.from(f);
}

/** Cached embeddings keep full precision: they are the embedder's output, verbatim. */
export function encodeF64(vector: readonly number[]): Buffer {
  const f = Float64Array.from(vector);
  return Buffer.from(f.buffer, f.byteOffset, f.byteLength);
}

export function decodeF64(blob: Uint8Array): number[] {
  const f = new Float64Array(blob.byteLength / 8);
  new Uint8Array(f.buffer).set(blob);
  return Array.from(f);
}
