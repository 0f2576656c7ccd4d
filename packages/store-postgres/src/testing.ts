/**
 * Helpers for tests that run against a real PostgreSQL server: where it is, whether the
 * tests may run, and a schema of their own. Used by this package's tests and by every
 * package that runs its suite on the Postgres store.
 *
 * @example
 * ```ts
 * import { dropSchema, freshSchema, POSTGRES_TEST_URL, postgresTestSkip } from '@cairn/store-postgres/testing';
 *
 * const skip = await postgresTestSkip('thread');
 * describe.skipIf(skip)('on the server', () => {
 *   const schema = freshSchema();
 *   afterAll(() => dropSchema(schema));
 *   // createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema })
 * });
 * ```
 */
import { newId } from '@cairn/core';
// From its vitest-free module: bench/ imports this file outside vitest.
import { type TestStoreKind, testStoreKind } from '@cairn/store/testing/kinds';
import pg from 'pg';
import { createPostgresStore } from './create-postgres-store.js';

// Where they lived first; `@cairn/store/testing` is their home.
export { type TestStoreKind, testStoreKind };

/** The test server: `CAIRN_POSTGRES_URL`, or the local trust-auth server. */
export const POSTGRES_TEST_URL =
  process.env.CAIRN_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

async function probe(): Promise<string | null> {
  const client = new pg.Client({
    connectionString: POSTGRES_TEST_URL,
    connectionTimeoutMillis: 3000,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return null;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Why the server tests must be skipped (the server is unreachable), or false when they
 * run. With `CAIRN_REQUIRE_POSTGRES=1` (CI) they always run, so an unreachable server
 * fails them instead. A skip is announced on the console, naming `label`.
 */
export async function postgresTestSkip(label: string): Promise<string | false> {
  const unreachable = await probe();
  if (!unreachable || process.env.CAIRN_REQUIRE_POSTGRES === '1') return false;
  console.warn(
    `[${label}] PostgreSQL at ${POSTGRES_TEST_URL} is unreachable (${unreachable}): SKIPPING the server tests. ` +
      'Set CAIRN_POSTGRES_URL to a reachable server, or CAIRN_REQUIRE_POSTGRES=1 to make this a failure.',
  );
  return `PostgreSQL unreachable: ${unreachable}`;
}

/** A schema name of its own for one test file or store. */
export function freshSchema(prefix = 'cairn_test'): string {
  return `${prefix}_${newId().replaceAll('-', '').slice(-16)}`;
}

/** Drops a test schema and everything in it. */
export async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_TEST_URL });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema.replaceAll('"', '""')}" CASCADE`);
  } finally {
    await client.end();
  }
}

/**
 * The Postgres store on an in-process PGlite, a new database for each `create`
 * (`@electric-sql/pglite` must be installed).
 */
export function pgliteTestStore(): TestStoreKind {
  return testStoreKind('the Postgres store (PGlite)', async () => {
    const { PGlite } = await import('@electric-sql/pglite');
    const db = new PGlite();
    return { store: await createPostgresStore({ client: db }), dispose: () => db.close() };
  });
}

/**
 * The Postgres store on the test server, a schema of its own (`<prefix>_...`) for each
 * `create`, dropped by `destroy`; skipped as `postgresTestSkip(label)` says.
 */
export async function postgresServerTestStore(
  label: string,
  prefix = 'cairn_test',
): Promise<TestStoreKind> {
  return testStoreKind(
    'the Postgres store (server)',
    async () => {
      const schema = freshSchema(prefix);
      return {
        store: await createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema }),
        dispose: () => dropSchema(schema),
      };
    },
    await postgresTestSkip(label),
  );
}

/** A statement a pg client sent: its text, and whether it rode in an earlier one's round trip. */
export interface SentStatement {
  text: string;
  /** Sent on a pipelining connection while an earlier query of it was unanswered. */
  pipelined: boolean;
}

/**
 * The statements this process's pg clients send while `fn` runs, in order (a simple query of
 * several statements is one), each marked `pipelined` when it travels in the round trip of
 * an earlier query of its connection that is still unanswered.
 */
export async function sentWhile(fn: () => unknown): Promise<SentStatement[]> {
  type Client = { pipeline?: boolean };
  const proto = pg.Client.prototype as unknown as {
    query: (this: Client, ...args: unknown[]) => unknown;
  };
  const original = proto.query;
  const unanswered = new WeakMap<Client, number>();
  const sent: SentStatement[] = [];
  proto.query = function (this: Client, ...args: unknown[]) {
    const q = args[0] as string | { text: string };
    const waiting = unanswered.get(this) ?? 0;
    sent.push({
      text: typeof q === 'string' ? q : q.text,
      pipelined: this.pipeline === true && waiting > 0,
    });
    const result = original.apply(this, args);
    if (result instanceof Promise) {
      unanswered.set(this, waiting + 1);
      const answered = () => unanswered.set(this, (unanswered.get(this) ?? 1) - 1);
      result.then(answered, answered);
    }
    return result;
  };
  try {
    await fn();
  } finally {
    proto.query = original;
  }
  return sent;
}

/** The round trips to the server `fn` makes: the statements `sentWhile` marks not pipelined. */
export async function roundTrips(fn: () => unknown): Promise<number> {
  return (await sentWhile(fn)).filter((s) => !s.pipelined).length;
}
