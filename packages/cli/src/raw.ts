import Database from 'better-sqlite3';
import { CliError, connectPostgres, quote, type Target } from './database.js';

/**
 * Cairn's tables by the name they have in both stores; a branch's state log is one row per
 * commit on SQLite (`state_commits`) and packed segments on Postgres (`state_segments`, and
 * each branch's newest in `state_tail`).
 */
export const TABLES = [
  'threads',
  'messages',
  'branches',
  'checkpoints',
  'state_commits',
  'state_segments',
  'state_tail',
  'turns',
  'leases',
  'memories',
  'embedding_cache',
] as const;

/** The tables of a branch's state log, on either store. */
export const STATE_LOG_TABLES = ['state_commits', 'state_segments', 'state_tail'] as const;
export type Table = (typeof TABLES)[number];

/**
 * Read-only SQL on a Cairn database, for what the Store contract does not say (sizes,
 * integrity, orphans). Queries take no parameters, so one text runs on both.
 */
export interface RawReader {
  readonly kind: Target['kind'];
  /** The Postgres schema holding the tables ('' on SQLite). */
  readonly schema: string;
  /** The table's name in SQL, or null when the schema has no such table yet. */
  table(name: Table): string | null;
  all<T>(sql: string): Promise<T[]>;
  close(): Promise<void>;
}

export async function openRaw(t: Target): Promise<RawReader> {
  if (t.kind === 'sqlite') {
    let db: Database.Database;
    try {
      db = new Database(t.path, { readonly: true, fileMustExist: true });
    } catch (e) {
      throw new CliError(`cannot open ${t.label}: ${(e as Error).message}`);
    }
    const present = new Set(
      db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[],
    );
    return {
      kind: 'sqlite',
      schema: '',
      table: (name) => (present.has(`cairn_${name}`) ? `cairn_${name}` : null),
      all: async <T>(sql: string) => db.prepare(sql).all() as T[],
      close: async () => void db.close(),
    };
  }
  const client = await connectPostgres(t);
  const { rows } = await client.query<{ tablename: string }>(
    'SELECT tablename FROM pg_tables WHERE schemaname = $1',
    [t.schema],
  );
  const present = new Set(rows.map((r) => r.tablename));
  return {
    kind: 'postgres',
    schema: t.schema,
    table: (name) => (present.has(name) ? `${quote(t.schema)}.${name}` : null),
    all: async <T>(sql: string) => (await client.query(sql)).rows as T[],
    close: () => client.end(),
  };
}
