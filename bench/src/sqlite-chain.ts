import type Database from 'better-sqlite3';
import type { Case } from './harness.js';

/**
 * The ceiling for reading a whole chain from a Cairn SQLite file: a raw recursive CTE from
 * `head` on a connection of its own, `data` parsed, root first (what `getChain` returns).
 */
export function rawSqliteChain(reader: Database.Database, head: string): Case {
  const walk = reader
    .prepare(
      `WITH RECURSIVE chain (id, thread_id, parent_id, role, type, data, created_at, depth) AS (
         SELECT id, thread_id, parent_id, role, type, data, created_at, depth FROM cairn_messages WHERE id = ?
         UNION ALL
         SELECT m.id, m.thread_id, m.parent_id, m.role, m.type, m.data, m.created_at, m.depth
           FROM chain c JOIN cairn_messages m ON m.id = c.parent_id)
       SELECT * FROM chain`,
    )
    .raw(true);
  return {
    name: 'raw recursive CTE + JSON.parse',
    run: () => {
      const out = walk.all(head) as unknown[][];
      for (const r of out) r[5] = JSON.parse(r[5] as string);
      return out.reverse();
    },
  };
}
