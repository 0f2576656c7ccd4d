import { sentWhile } from '@cairn/store-postgres/testing';
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

/** Round trips to the server made by this process's pg clients while `fn` runs. */
export { roundTrips } from '@cairn/store-postgres/testing';

/** Round trips, and the queries sent (a simple query of several statements counts once). */
export async function wireCounts(
  fn: () => unknown,
): Promise<{ roundTrips: number; queries: number }> {
  const sent = await sentWhile(fn);
  return { roundTrips: sent.filter((s) => !s.pipelined).length, queries: sent.length };
}

/** Counts of queries by the pattern they were asked for, kept by `queryCounter`. */
const counted: { pattern: RegExp; n: number }[] = [];
let countingInstalled = false;

/**
 * The number of queries this process's pg clients have sent whose text matches `pattern`
 * since this call (a reader; the patch on pg's `Client.query` stays for the process).
 */
export function queryCounter(pattern: RegExp): () => number {
  if (!countingInstalled) {
    countingInstalled = true;
    const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
    const original = proto.query;
    proto.query = function (this: unknown, ...args: unknown[]) {
      const q = args[0];
      const text = typeof q === 'string' ? q : (q as { text?: unknown } | null)?.text;
      if (typeof text === 'string') for (const c of counted) if (c.pattern.test(text)) c.n++;
      return original.apply(this, args);
    };
  }
  const c = { pattern, n: 0 };
  counted.push(c);
  return () => c.n;
}
