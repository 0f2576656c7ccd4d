/**
 * The parts of a better-sqlite3 `Database` the store uses, declared structurally so an
 * injected database needs no shared type identity with this package's copy of the driver.
 */
export interface SqliteDatabase {
  prepare(sql: string): SqliteStatement;
  exec(sql: string): unknown;
  pragma(source: string, options?: { simple?: boolean }): unknown;
  loadExtension(file: string, entrypoint?: string): unknown;
  close(): unknown;
  readonly open: boolean;
  readonly inTransaction: boolean;
  readonly memory: boolean;
  readonly name: string;
}

export interface SqliteRunResult {
  changes: number;
  lastInsertRowid: number | bigint;
}

export interface SqliteStatement {
  run(...params: unknown[]): SqliteRunResult;
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  iterate(...params: unknown[]): IterableIterator<unknown>;
  raw(toggle?: boolean): SqliteStatement;
}
