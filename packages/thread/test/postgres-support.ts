import { newId } from '@cairn/core';
import pg from 'pg';

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
    `[thread] PostgreSQL at ${POSTGRES_URL} is unreachable (${unreachable}): SKIPPING the Postgres server tests. ` +
      'Set CAIRN_POSTGRES_URL to a reachable server, or CAIRN_REQUIRE_POSTGRES=1 to make this a failure.',
  );
}

/** Why the server tests are skipped, or false when they run (CAIRN_REQUIRE_POSTGRES=1 never skips). */
export const SKIP_SERVER: string | false =
  unreachable && !REQUIRED ? `PostgreSQL unreachable: ${unreachable}` : false;

/** A schema name of its own for one test file. */
export function freshSchema(): string {
  return `cairn_test_${newId().replaceAll('-', '').slice(-16)}`;
}

export async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}
