import { POSTGRES_TEST_URL, postgresTestSkip } from '@cairn/store-postgres/testing';
import pg from 'pg';
import { describe } from 'vitest';
import { ident, MIGRATIONS } from '../src/migrations.js';
import type { Queryable } from '../src/queryable.js';

export { dropSchema, freshSchema } from '@cairn/store-postgres/testing';
export const POSTGRES_URL = POSTGRES_TEST_URL;

const skip = await postgresTestSkip('store-postgres');

/** True when the server tests run (a reachable server, or CAIRN_REQUIRE_POSTGRES=1, which makes an unreachable one fail). */
export const SERVER = skip === false;

/** `describe` for tests that need the server: skipped (with a warning) when it is unreachable. */
export const describeServer: typeof describe = describe.skipIf(!SERVER) as typeof describe;

/** Runs `fn` with a connected client of its own. */
export async function withClient<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Creates `schema` as the migrations before the one called `name` left it. */
export async function schemaBefore(q: Queryable, schema: string, name: string): Promise<void> {
  const s = ident(schema);
  const version = MIGRATIONS.findIndex((m) => m.name === name);
  if (version < 1) throw new Error(`no migration after the first is called ${name}`);
  await q.exec(`CREATE SCHEMA ${s};
CREATE TABLE ${s}.cairn_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at double precision NOT NULL);`);
  for (const [i, m] of MIGRATIONS.slice(0, version).entries()) {
    await q.exec(m.sql(s));
    await m.run?.(q, s);
    await q.query(`INSERT INTO ${s}.cairn_migrations VALUES ($1, $2, 0)`, [i + 1, m.name]);
  }
}
