import type { Memory, MemoryScope, MemoryType } from '@cairn/core';
import { type DriverMemoryFilter, memoryFilterSql } from '@cairn/store/adapter';

/**
 * The memory filter over `cairn_memories m`, its values appended to `params`. Lists
 * travel as one JSON parameter, so a long `ids` list never meets SQLite's variable limit.
 */
export function memoryWhere(filter: DriverMemoryFilter, params: unknown[]): string {
  return memoryFilterSql(filter, {
    column: (name) => `m.${name}`,
    value(v) {
      params.push(v);
      return '?';
    },
    oneOf(column, values) {
      if (values.length === 0) return '0';
      params.push(JSON.stringify(values));
      return `${column} IN (SELECT value FROM json_each(?))`;
    },
    jsonArrayPrefix(column, key, labels) {
      // `key` is letters, digits, `_` and `-` (checked): safe inside the quoted path.
      const path = `$."${key}"`;
      const parts = [`json_type(${column}, '${path}') = 'array'`];
      labels.forEach((label, i) => {
        params.push(label);
        // The type first: json_extract gives an object or array element as its JSON text.
        parts.push(
          `json_type(${column}, '${path}[${i}]') = 'text' AND json_extract(${column}, '${path}[${i}]') = ?`,
        );
      });
      return `(${parts.join(' AND ')})`;
    },
  });
}

/** The memory columns, in the order `memoryFromRow` reads them. */
export const MEMORY_COLUMNS =
  'm.id, m.type, m.agent_id, m.entity_id, m.room_id, m.world_id, m.scope, m.content, m.metadata, m.content_hash, m.embedding, m.created_at, ' +
  'm.valid_from, m.valid_to, m.superseded_at, m.supersedes, m.lineage_id, m.source';

/** The position of the column after `MEMORY_COLUMNS` in a row that selects one more. */
export const AFTER_MEMORY_COLUMNS = 18;

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
    validFrom: r[12] as number | null,
    validTo: r[13] as number | null,
    supersededAt: r[14] as number | null,
    supersedes: r[15] as string | null,
    lineageId: r[16] as string,
    source: r[17] == null ? null : JSON.parse(r[17] as string),
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
  // A loop, not Array.from, which goes through the typed array's iterator.
  const out = new Array<number>(f.length);
  for (let i = 0; i < f.length; i++) out[i] = f[i]!;
  return out;
}
