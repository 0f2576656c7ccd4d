/**
 * What SQL drivers share: the memory filter as a WHERE clause (the rule of
 * `matchesMemoryFilter`, written once for every dialect) and a table's columns with the
 * decoding of its rows into the `@cairn/core` types.
 */
import type { DriverMemoryFilter } from './driver.js';

/** How one SQL dialect binds values in a WHERE clause. */
export interface SqlFilterDialect {
  /** The SQL of a memory column (`agent_id`, `scope`, ...), e.g. with a table alias. */
  column(name: string): string;
  /** A placeholder for `value`, which the dialect adds to its parameters. */
  value(value: string | number | null): string;
  /** The condition that `column` is one of `values` (the list may be empty). */
  oneOf(column: string, values: readonly string[]): string;
  /**
   * The condition that the JSON object in `column` holds, under the top-level `key`, an
   * array whose first elements are the strings `labels` (an array of any length when
   * `labels` is empty). `key` is 1-200 of `A-Z a-z 0-9 _ -`.
   */
  jsonArrayPrefix(column: string, key: string, labels: readonly string[]): string;
}

/**
 * The memory filter as a WHERE condition, the same rule as `matchesMemoryFilter`
 * (including `canSee` for a viewer), so that searches apply it inside the query.
 * Placeholders are taken in the order they appear in the text.
 */
export function memoryFilterSql(filter: DriverMemoryFilter, d: SqlFilterDialect): string {
  const c = (name: string) => d.column(name);
  const where: string[] = [];
  const { viewer } = filter;
  if (viewer) {
    // `= NULL` is never true, as canSee wants for a viewer outside any room or world.
    where.push(
      `((${c('scope')} = 'private' AND ${c('agent_id')} = ${d.value(viewer.agentId)})` +
        ` OR (${c('scope')} = 'room' AND ${c('room_id')} = ${d.value(viewer.roomId ?? null)})` +
        ` OR (${c('scope')} = 'shared' AND ${c('world_id')} = ${d.value(viewer.worldId ?? null)}))`,
    );
  }
  const equal = (column: string, value: string | number | undefined) => {
    if (value !== undefined) where.push(`${c(column)} = ${d.value(value)}`);
  };
  const oneOf = (column: string, values: readonly string[] | undefined) => {
    if (values) where.push(d.oneOf(c(column), values));
  };
  equal('agent_id', filter.agentId);
  oneOf('type', filter.types);
  oneOf('scope', filter.scopes);
  equal('entity_id', filter.entityId);
  equal('room_id', filter.roomId);
  equal('world_id', filter.worldId);
  oneOf('content_hash', filter.contentHashes);
  oneOf('id', filter.ids);
  if (filter.createdAfter !== undefined)
    where.push(`${c('created_at')} > ${d.value(filter.createdAfter)}`);
  if (filter.createdBefore !== undefined)
    where.push(`${c('created_at')} < ${d.value(filter.createdBefore)}`);
  oneOf('lineage_id', filter.lineageIds);
  // The rule of `holdsAt`. Each placeholder is made where it goes in the text.
  const { validAt, knownAt } = filter;
  const supersededAfter = (k: number) =>
    `(${c('superseded_at')} IS NOT NULL AND ${c('superseded_at')} > ${d.value(k)})`;
  if (knownAt !== undefined) {
    where.push(`${c('created_at')} <= ${d.value(knownAt)}`);
    if (validAt === undefined)
      where.push(`(${c('superseded_at')} IS NULL OR ${c('superseded_at')} > ${d.value(knownAt)})`);
  }
  if (validAt !== undefined) {
    where.push(`(${c('valid_from')} IS NULL OR ${c('valid_from')} <= ${d.value(validAt)})`);
    const open = `${c('valid_to')} IS NULL OR ${c('valid_to')} > ${d.value(validAt)}`;
    where.push(`(${open}${knownAt === undefined ? '' : ` OR ${supersededAfter(knownAt)}`})`);
  }
  // `branch_message_id`: the memory's `branchAnchor`, null when it is not branch-scoped.
  if (filter.branchThreadId !== undefined)
    where.push(`${c('branch_thread_id')} = ${d.value(filter.branchThreadId)}`);
  if (filter.visibleAnchors)
    where.push(
      `(${c('branch_message_id')} IS NULL OR ${d.oneOf(c('branch_message_id'), filter.visibleAnchors)})`,
    );
  for (const [key, labels] of Object.entries(filter.metadataPrefix ?? {}))
    where.push(d.jsonArrayPrefix(c('metadata'), key, labels));
  return where.length === 0 ? '1 = 1' : where.join(' AND ');
}

type Fields = Record<string, unknown>;

/**
 * A table whose rows read back as a `@cairn/core` type. `spec` lists its fields,
 * separated by spaces: `name` (column `snake_name`) or `name=column`, with a suffix for
 * a value the database does not hand back as it is: `*` JSON, `?` a flag (a boolean, or
 * 0/1 where the database has no boolean), `#` a counter (a bigint, which may come back
 * as a string). `columns` lists the columns in field order; `decode` turns a row keyed by
 * column into the type, `encode` a value into its fields (JSON as text, flags as 0/1),
 * `values` into its parameters in column order, and `insert` writes the INSERT.
 */
export class SqlTable<T> {
  readonly name: string;
  readonly columns: string;
  readonly fields: ReadonlyArray<{ field: string; column: string; kind: string }>;
  readonly #jsonText: boolean;

  /** `jsonText`: JSON is stored as text, so `decode` parses it (else the client does). */
  constructor(name: string, spec: string, options: { jsonText: boolean }) {
    this.name = name;
    this.#jsonText = options.jsonText;
    this.fields = spec.split(' ').map((f) => {
      const [, field, column, kind] = /^(\w+)(?:=(\w+))?([*?#]?)$/.exec(f)!;
      return {
        field: field!,
        column: column ?? field!.replace(/[A-Z]/g, (l) => `_${l.toLowerCase()}`),
        kind: kind!,
      };
    });
    this.columns = this.fields.map((f) => `"${f.column}"`).join(', ');
  }

  decode = (row: Fields): T => {
    const out: Fields = {};
    for (const { field, column, kind } of this.fields) {
      const v = row[column];
      out[field] =
        kind === '*' && this.#jsonText && v !== null
          ? JSON.parse(v as string)
          : kind === '?'
            ? v === true || v === 1
            : kind === '#'
              ? Number(v)
              : v;
    }
    return out as T;
  };

  /** `INSERT INTO <table> (<columns>) VALUES (…)`, each field's placeholder from `param`. */
  insert(table: string, param: (field: string, i: number) => string): string {
    const params = this.fields.map((f, i) => param(f.field, i)).join(', ');
    return `INSERT INTO ${table} (${this.columns}) VALUES (${params})`;
  }

  values(value: T): unknown[] {
    const fields = this.encode(value);
    return this.fields.map((f) => fields[f.field]);
  }

  encode(value: T): Fields {
    const out = { ...value } as Fields;
    for (const { field, kind } of this.fields) {
      if (kind === '*' && out[field] !== null) out[field] = JSON.stringify(out[field]);
      if (kind === '?') out[field] = out[field] ? 1 : 0;
    }
    return out;
  }
}

/**
 * `DriverSession.getChain` in SQL (a recursive CTE SQLite and Postgres both run): up
 * from the head to depth `max` by jump pointers (O(log depth) steps), then down parent
 * links to `min`, so the cost is the answer's length, never the chain's. Rows come
 * deepest first. `messages` is the table, `columns` its message columns, and `head`,
 * `min` and `max` the dialect's placeholders.
 *
 * `probe: 'lateral'` (Postgres) reads each step's message in a `LATERAL … LIMIT 1`
 * subquery: a plain join there may be planned (generically, for a prepared statement, or
 * on a table without statistics) as a scan of the whole table at every step, so that a
 * walk costs steps × table; the subquery is one index probe whatever the plan says.
 * SQLite always joins a recursive step by an index lookup.
 */
export function chainSql(
  messages: string,
  columns: string,
  p: { head: string; min: string; max: string },
  probe: 'join' | 'lateral' = 'join',
): string {
  const step = (cols: string, id: string) =>
    probe === 'lateral'
      ? `CROSS JOIN LATERAL (SELECT ${cols} FROM ${messages} WHERE id = ${id} LIMIT 1) m`
      : `JOIN ${messages} m ON m.id = ${id}`;
  const link = 'id, parent_id, depth, jump_id, jump_depth';
  const m = (cols: string) =>
    cols
      .split(', ')
      .map((c) => `m.${c}`)
      .join(', ');
  return `WITH RECURSIVE up (${link}) AS (
      SELECT ${link} FROM ${messages} WHERE id = ${p.head}
      UNION ALL
      SELECT ${m(link)} FROM up
        ${step(link, `CASE WHEN up.jump_depth >= ${p.max} AND up.jump_id IS NOT NULL THEN up.jump_id ELSE up.parent_id END`)}
      WHERE up.depth > ${p.max}),
    chain AS (
      SELECT ${columns} FROM ${messages} WHERE id = (SELECT id FROM up WHERE depth = ${p.max})
      UNION ALL
      SELECT ${m(columns)} FROM chain c ${step(columns, 'c.parent_id')} WHERE c.depth > ${p.min})
    SELECT ${columns} FROM chain`;
}

/**
 * Runs `fn` under the savepoint `name` (what `DriverSession.savepoint` asks for):
 * released when `fn` resolves; rolled back to and released when it throws, so that a
 * failed step undoes only itself and the transaction goes on. `exec` runs a statement.
 */
export async function withSavepoint<T>(
  exec: (sql: string) => unknown,
  name: string,
  fn: () => Promise<T>,
): Promise<T> {
  await exec(`SAVEPOINT ${name}`);
  try {
    const result = await fn();
    await exec(`RELEASE SAVEPOINT ${name}`);
    return result;
  } catch (e) {
    await exec(`ROLLBACK TO SAVEPOINT ${name}`);
    await exec(`RELEASE SAVEPOINT ${name}`);
    throw e;
  }
}
