import { POSTGRES_TEST_URL, postgresTestSkip } from '@cairn/store-postgres/testing';
import pg from 'pg';
import { describe } from 'vitest';

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
