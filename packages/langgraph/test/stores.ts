// The Cairn stores the package's tests run on. Each kind can open a store and open it again
// (a fresh instance on the same data, as another process would).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMemoryStore, type Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import {
  dropSchema,
  freshSchema,
  POSTGRES_TEST_URL,
  postgresTestSkip,
} from '@cairn/store-postgres/testing';
import { createSqliteStore } from '@cairn/store-sqlite';
import { PGlite } from '@electric-sql/pglite';

export interface StoreKind {
  name: string;
  /** Why this kind is skipped, or false. */
  skip: string | false;
  /** A new, empty database; `reopen` opens another store instance on it. */
  open(): Promise<{ store: Store; reopen(): Promise<Store>; dispose(): Promise<void> }>;
}

const dirs: string[] = [];
export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-langgraph-'));
  dirs.push(dir);
  return dir;
}
export function removeTempDirs() {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

let pglite: PGlite | undefined;
let pgliteSchemas = 0;

export async function storeKinds(): Promise<StoreKind[]> {
  const skipServer = await postgresTestSkip('langgraph');
  return [
    {
      name: 'the in-memory store',
      skip: false,
      open: async () => {
        const store = createMemoryStore();
        return { store, reopen: async () => store, dispose: () => store.close() };
      },
    },
    {
      name: 'a SQLite file',
      skip: false,
      open: async () => {
        const path = join(tempDir(), 'agent.db');
        const opened: Store[] = [createSqliteStore({ path })];
        return {
          store: opened[0]!,
          reopen: async () => {
            opened.push(createSqliteStore({ path }));
            return opened[opened.length - 1]!;
          },
          dispose: async () => {
            for (const s of opened) await s.close();
          },
        };
      },
    },
    {
      name: 'PGlite',
      skip: false,
      open: async () => {
        pglite ??= new PGlite();
        const schema = `langgraph_test_${++pgliteSchemas}`;
        const client = pglite;
        const opened: Store[] = [await createPostgresStore({ client }, { schema })];
        return {
          store: opened[0]!,
          reopen: async () => {
            opened.push(await createPostgresStore({ client }, { schema }));
            return opened[opened.length - 1]!;
          },
          dispose: async () => {
            for (const s of opened) await s.close();
          },
        };
      },
    },
    {
      name: 'the PostgreSQL server',
      skip: skipServer,
      open: async () => {
        const schema = freshSchema('langgraph_test');
        const make = () => createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema });
        const opened: Store[] = [await make()];
        return {
          store: opened[0]!,
          reopen: async () => {
            opened.push(await make());
            return opened[opened.length - 1]!;
          },
          dispose: async () => {
            for (const s of opened) await s.close();
            await dropSchema(schema);
          },
        };
      },
    },
  ];
}

export async function closePglite() {
  await pglite?.close();
  pglite = undefined;
}
