import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { isCairnError } from '@cairn/core';
import { type EncryptionOptions, localKeyring, type Store } from '@cairn/store';
import { createPostgresStore, SCHEMA_VERSION as POSTGRES_VERSION } from '@cairn/store-postgres';
import { createSqliteStore, SCHEMA_VERSION as SQLITE_VERSION } from '@cairn/store-sqlite';
import Database from 'better-sqlite3';
import pg from 'pg';

/** A failure the command line reports as one line, with its exit code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/** Bad usage: exit code 2. */
export const usage = (message: string) => new CliError(message, 2);

/** A database named on the command line: a SQLite file or a Postgres URL (and schema). */
export type Target =
  | { kind: 'sqlite'; path: string; label: string }
  | { kind: 'postgres'; url: string; schema: string; label: string };

/**
 * A database location (or any text holding one) as the command line may show it: the
 * password of a URL's user part and the `password` / `sslpassword` query parameters as
 * `***`. Everything the CLI prints or serves about a database goes through this.
 */
export function redact(text: string): string {
  return text
    .replace(/\b([a-z][a-z0-9+.-]*:\/\/[^:/?#@\s]*:)[^/?#\s]*@/gi, '$1***@')
    .replace(/([?&](?:ssl)?password=)[^&#\s]*/gi, '$1***');
}

/**
 * `postgres://…` or `postgresql://…` is a Postgres database; the query parameter `schema`
 * (default `cairn`) names the schema holding Cairn's tables. Anything else is a SQLite path.
 */
export function parseTarget(arg: string): Target {
  if (/^postgres(ql)?:\/\//i.test(arg)) {
    let url: URL;
    try {
      url = new URL(arg);
    } catch {
      throw usage(`not a valid Postgres URL: ${redact(arg)}`);
    }
    const schema = url.searchParams.get('schema') ?? 'cairn';
    url.searchParams.delete('schema');
    return { kind: 'postgres', url: url.toString(), schema, label: redact(url.toString()) };
  }
  if (arg === '' || arg === ':memory:')
    throw usage(`a database must be a file path or a Postgres URL, got ${JSON.stringify(arg)}`);
  return { kind: 'sqlite', path: resolve(arg), label: arg };
}

/** What a database holds, read without writing anything. */
export interface Probe {
  /** The Cairn schema version recorded (0: none). */
  version: number;
  /** The version this code writes. */
  latest: number;
  /** Nothing there yet: a missing or empty SQLite file, a missing or empty Postgres schema. */
  empty: boolean;
  /**
   * The KEKs that wrap the database's data keys (see encryption at rest in
   * @cairn/store's README): none when it holds no sealed data.
   */
  keyIds: string[];
}

function reason(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** Reads the schema version of a SQLite file, read-only. A missing file is not created. */
function probeSqlite(t: Extract<Target, { kind: 'sqlite' }>, mayCreate: boolean): Probe {
  if (!existsSync(t.path)) {
    if (mayCreate && existsSync(dirname(t.path)))
      return { version: 0, latest: SQLITE_VERSION, empty: true, keyIds: [] };
    throw new CliError(`no such file: ${t.label}`);
  }
  if (!statSync(t.path).isFile()) throw new CliError(`not a file: ${t.label}`);
  let db: Database.Database | undefined;
  try {
    db = new Database(t.path, { readonly: true, fileMustExist: true });
    const tables = db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
      .pluck()
      .all() as string[];
    if (!tables.includes('cairn_migrations'))
      return { version: 0, latest: SQLITE_VERSION, empty: tables.length === 0, keyIds: [] };
    const v = db.prepare('SELECT max(version) FROM cairn_migrations').pluck().get() as
      | number
      | null;
    const keyIds = tables.includes('cairn_data_keys')
      ? (db.prepare('SELECT DISTINCT key_id FROM cairn_data_keys').pluck().all() as string[])
      : [];
    return { version: v ?? 0, latest: SQLITE_VERSION, empty: false, keyIds };
  } catch (e) {
    throw new CliError(`${t.label} is not a SQLite database (${reason(e)})`);
  } finally {
    db?.close();
  }
}

/** A pg client for `t`, connected, or a `CliError` naming the server. */
export async function connectPostgres(
  t: Extract<Target, { kind: 'postgres' }>,
): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: t.url, connectionTimeoutMillis: 5000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return client;
  } catch (e) {
    await client.end().catch(() => undefined);
    throw new CliError(`cannot reach Postgres at ${t.label}: ${reason(e)}`);
  }
}

async function probePostgres(t: Extract<Target, { kind: 'postgres' }>): Promise<Probe> {
  const client = await connectPostgres(t);
  try {
    const { rows } = await client.query<{ tables: string[] }>(
      'SELECT coalesce(array_agg(tablename::text), ARRAY[]::text[]) AS tables FROM pg_tables WHERE schemaname = $1',
      [t.schema],
    );
    const tables = rows[0]?.tables ?? [];
    if (!tables.includes('cairn_migrations'))
      return { version: 0, latest: POSTGRES_VERSION, empty: tables.length === 0, keyIds: [] };
    const v = await client.query<{ v: number | null }>(
      `SELECT max(version) AS v FROM ${quote(t.schema)}.cairn_migrations`,
    );
    const keyIds = tables.includes('data_keys')
      ? (
          await client.query<{ k: string }>(
            `SELECT DISTINCT key_id AS k FROM ${quote(t.schema)}.data_keys`,
          )
        ).rows.map((r) => r.k)
      : [];
    return { version: v.rows[0]?.v ?? 0, latest: POSTGRES_VERSION, empty: false, keyIds };
  } finally {
    await client.end().catch(() => undefined);
  }
}

export const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** Reads what the database holds; writes nothing. */
export function probe(t: Target, mayCreate = false): Promise<Probe> {
  return t.kind === 'sqlite' ? Promise.resolve(probeSqlite(t, mayCreate)) : probePostgres(t);
}

/**
 * How a command may open a database:
 * - `current`: a Cairn database at the schema this code writes (nothing is migrated);
 * - `migrate`: an existing Cairn database of any older version, or an empty one;
 * - `create`: as `migrate`, and a SQLite file that does not exist yet is created.
 */
export type OpenMode = 'current' | 'migrate' | 'create';

/** Checks that `t` may be opened in `mode`, without writing; returns what it holds. */
export async function check(t: Target, mode: OpenMode): Promise<Probe> {
  const p = await probe(t, mode === 'create');
  const where = t.kind === 'postgres' ? `${t.label} (schema ${t.schema})` : t.label;
  if (p.version > p.latest)
    throw new CliError(
      `${where} is at schema version ${p.version}, newer than this cairn knows (${p.latest}); upgrade @cairn/cli`,
    );
  if (p.version === 0 && !(mode !== 'current' && p.empty))
    throw new CliError(`${where} is not a Cairn database`);
  if (mode === 'current' && p.version < p.latest)
    throw new CliError(
      `${where} is at schema version ${p.version}, this cairn needs ${p.latest}: run \`cairn migrate\` first`,
    );
  return p;
}

/** The environment variable that holds the local keyring secret of an encrypted database. */
export const KEYRING_ENV = 'CAIRN_KEYRING_SECRET';

/**
 * The `encryption` option of a command: a local keyring (`localKeyring` of @cairn/store)
 * from the secret in the file `--keyring` names (one trailing newline dropped), else from
 * `CAIRN_KEYRING_SECRET`; undefined when neither is given.
 */
export function keyringOption(file: string | undefined): EncryptionOptions | undefined {
  let secret: string | undefined;
  if (file !== undefined) {
    try {
      secret = readFileSync(file, 'utf8').replace(/\r?\n$/, '');
    } catch (e) {
      throw usage(`--keyring: cannot read ${file} (${reason(e)})`);
    }
  } else secret = process.env[KEYRING_ENV] || undefined;
  if (secret === undefined) return undefined;
  try {
    return { keyring: localKeyring(secret) };
  } catch (e) {
    throw usage(
      `${file === undefined ? KEYRING_ENV : `--keyring ${file}`}: ${isCairnError(e) ? e.message : reason(e)}`,
    );
  }
}

/** How a command opens a store: with a keyring, and whether it reads or writes values. */
export interface OpenOptions {
  /** Opens sealed values (see `keyringOption`). */
  encryption?: EncryptionOptions | undefined;
  /**
   * The command reads or writes messages, state or memories: on an encrypted database it
   * needs the keyring that wrapped its data keys, and is refused before anything without.
   */
  values?: boolean;
}

/** Why `p`, a database with sealed data, cannot be opened with `encryption` (null: it can). */
function keyProblem(where: string, p: Probe, encryption: EncryptionOptions | undefined) {
  if (p.keyIds.length === 0) return null;
  const held = p.keyIds.map((k) => JSON.stringify(k)).join(', ');
  if (!encryption)
    return `${where} is encrypted (data keys wrapped by ${held}): give its keyring secret with --keyring <file> or ${KEYRING_ENV}`;
  const other = p.keyIds.filter((k) => k !== encryption.keyring.keyId);
  if (other.length === 0) return null;
  return `${where} is encrypted with another key: its data keys are wrapped by ${other.map((k) => JSON.stringify(k)).join(', ')}, the keyring secret given is ${JSON.stringify(encryption.keyring.keyId)}`;
}

/** Opens the store on `t` after `check` (opening migrates, so it is checked first). */
export async function openStore(t: Target, mode: OpenMode, o: OpenOptions = {}): Promise<Store> {
  const p = await check(t, mode);
  if (o.values) {
    const where = t.kind === 'postgres' ? `${t.label} (schema ${t.schema})` : t.label;
    const problem = keyProblem(where, p, o.encryption);
    if (problem) throw new CliError(problem);
  }
  const options = o.encryption ? { encryption: o.encryption } : {};
  try {
    return t.kind === 'sqlite'
      ? createSqliteStore({ path: t.path }, options)
      : await createPostgresStore(
          { connectionString: t.url },
          { schema: t.schema, maxConnections: 4, ...options },
        );
  } catch (e) {
    throw new CliError(isCairnError(e) ? e.message : `cannot open ${t.label}: ${reason(e)}`);
  }
}
