import pg from 'pg';

/** The PostgreSQL server the bench suites use (the same variable as the tests). */
export const POSTGRES_URL =
  process.env.CAIRN_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Why the server cannot be reached, or null when it answers (a suite then skips its server rows). */
export async function postgresUnreachable(): Promise<string | null> {
  const c = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3000 });
  c.on('error', () => undefined);
  try {
    await c.connect();
    return null;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  } finally {
    await c.end().catch(() => undefined);
  }
}

/**
 * Statements sent to a server by this process's pg clients while `fn` runs: each is one
 * round trip (several statements in one simple query count once, as they travel together).
 */
export async function roundTrips(fn: () => unknown): Promise<number> {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  let n = 0;
  proto.query = function (this: unknown, ...args: unknown[]) {
    n++;
    return original.apply(this, args);
  };
  try {
    await fn();
  } finally {
    proto.query = original;
  }
  return n;
}
