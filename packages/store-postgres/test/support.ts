import { newId } from '@cairn/core';
import pg from 'pg';
import { describe } from 'vitest';

/** The test server, from CAIRN_POSTGRES_URL (default: the local trust-auth server). */
export const POSTGRES_URL =
  process.env.CAIRN_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REQUIRED = process.env.CAIRN_REQUIRE_POSTGRES === '1';

async function probe(): Promise<string | null> {
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3000 });
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

const unreachable = await probe();
if (unreachable && !REQUIRED) {
  console.warn(
    `[store-postgres] PostgreSQL at ${POSTGRES_URL} is unreachable (${unreachable}): SKIPPING the server tests. ` +
      'Set CAIRN_POSTGRES_URL to a reachable server, or CAIRN_REQUIRE_POSTGRES=1 to make this a failure.',
  );
}

/** True when the server tests run (a reachable server, or CAIRN_REQUIRE_POSTGRES=1, which makes an unreachable one fail). */
export const SERVER = unreachable === null || REQUIRED;

/** `describe` for tests that need the server: skipped (with the warning above) when it is unreachable. */
export const describeServer: typeof describe = describe.skipIf(!SERVER) as typeof describe;

/** A schema name of its own for one test file or store. */
export function freshSchema(prefix = 'cairn_test'): string {
  return `${prefix}_${newId().replaceAll('-', '').slice(-16)}`;
}

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

export async function dropSchema(schema: string): Promise<void> {
  await withClient((c) =>
    c.query(`DROP SCHEMA IF EXISTS "${schema.replaceAll('"', '""')}" CASCADE`),
  );
}
