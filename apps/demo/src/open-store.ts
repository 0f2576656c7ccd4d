import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { CairnError, isCairnError } from '@cairn/core';
import type { Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import { createSqliteStore } from '@cairn/store-sqlite';
import type { DemoOptions } from './args.js';

/** The PostgreSQL schema the demo keeps its tables in (`CAIRN_DEMO_PG_SCHEMA` overrides it). */
export const POSTGRES_SCHEMA = 'cairn_demo';

/** A URL with its password hidden, for messages. */
export function redactUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]+:)[^@]*@/, '$1***@');
}

/**
 * Opens the demo's store: the SQLite file (its folder created; with `fresh`, the file
 * deleted first) or the PostgreSQL database of a `postgres://` URL. Failures become one
 * clear `CairnError` line; nothing is written when opening fails.
 *
 * @example
 * ```ts
 * const store = await openDemoStore({ db: '.cairn/cairn.db', dbKind: 'sqlite', fresh: false });
 * ```
 */
export async function openDemoStore(
  options: Pick<DemoOptions, 'db' | 'dbKind' | 'fresh'>,
): Promise<Store> {
  if (options.dbKind === 'postgres') return openPostgres(options.db, options.fresh);
  const path = options.db;
  if (options.fresh) {
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
  }
  try {
    mkdirSync(dirname(path), { recursive: true });
  } catch (error) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `cannot create the folder for ${path}: ${(error as Error).message}`,
    );
  }
  const existed = existsSync(path);
  try {
    return createSqliteStore({ path });
  } catch (error) {
    if (isCairnError(error, 'SCHEMA_TOO_NEW')) throw error;
    // An UNAVAILABLE error wraps the driver's own, which says what is wrong with the file.
    const driverError =
      isCairnError(error, 'UNAVAILABLE') && error.cause instanceof Error ? error.cause : error;
    const reason = (driverError as Error).message.split('\n')[0];
    const hint = existed
      ? '; if it is an old or damaged demo database, run again with --fresh'
      : '';
    throw new CairnError(
      'INVALID_ARGUMENT',
      `cannot open ${path} as a Cairn SQLite database (${reason})${hint}`,
      {
        cause: error,
      },
    );
  }
}

async function openPostgres(url: string, fresh: boolean): Promise<Store> {
  let store: Store;
  try {
    store = await withTimeout(
      createPostgresStore(
        { connectionString: url },
        { schema: process.env.CAIRN_DEMO_PG_SCHEMA || POSTGRES_SCHEMA, maxConnections: 4 },
      ),
      10_000,
    );
  } catch (error) {
    const e = error as Error & { code?: string };
    const reason = (e.message || e.code || String(error)).split('\n')[0];
    throw new CairnError('INVALID_ARGUMENT', `cannot connect to ${redactUrl(url)}: ${reason}`, {
      cause: error,
    });
  }
  if (fresh) await wipe(store);
  return store;
}

/** Deletes every thread and memory through the store contract (the `--fresh` of PostgreSQL). */
async function wipe(store: Store): Promise<void> {
  for (;;) {
    const page = await store.listThreads({ limit: 1000 });
    if (page.items.length === 0) break;
    for (const t of page.items) await store.deleteThread(t.id);
  }
  for (;;) {
    const memories = await store.listMemories({}, { limit: 10_000 });
    if (memories.length === 0) break;
    await store.deleteMemories(memories.map((m) => m.id));
  }
}

async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
