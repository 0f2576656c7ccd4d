// What the server's tests share: a server on a fresh SQLite file or Postgres schema, an
// SDK client for it, and a plain SSE reader (to see event ids as they go over the wire).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import {
  dropSchema,
  freshSchema,
  POSTGRES_TEST_URL,
  postgresTestSkip,
} from '@cairn/store-postgres/testing';
import { createSqliteStore } from '@cairn/store-sqlite';
import { Client } from '@langchain/langgraph-sdk';
import { type CairnServerOptions, createCairnServer } from '../src/index.js';

export const GRAPHS = { agent: './examples/agent.mjs:graph' };

export interface Database {
  name: string;
  skip: string | false;
  /** A new empty database; `open` opens a store on it (again, as another process would). */
  create(): Promise<{ open(): Promise<Store>; dispose(): Promise<void> }>;
}

export async function databases(): Promise<Database[]> {
  return [
    {
      name: 'sqlite',
      skip: false,
      create: async () => {
        const dir = mkdtempSync(join(tmpdir(), 'cairn-server-'));
        return {
          open: async () => createSqliteStore({ path: join(dir, 'serve.db') }),
          dispose: async () => rmSync(dir, { recursive: true, force: true }),
        };
      },
    },
    {
      name: 'postgres',
      skip: await postgresTestSkip('server'),
      create: async () => {
        const schema = freshSchema('cairn_server');
        return {
          open: () => createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema }),
          dispose: () => dropSchema(schema),
        };
      },
    },
  ];
}

/** A server on a store of `db`, listening on a free loopback port, with a client for it. */
export async function serve(
  store: Store,
  options: Partial<CairnServerOptions> = {},
  clientHeaders: Record<string, string> = {},
) {
  const server = await createCairnServer({ store, graphs: GRAPHS, leaseMs: 2000, ...options });
  const { url } = await server.listen(0);
  const client = new Client({ apiUrl: url, defaultHeaders: clientHeaders });
  return { server, url, client };
}

export interface WireEvent {
  id: string | undefined;
  event: string;
  data: unknown;
}

/** Reads a server-sent event stream to its end: each event with its id, as sent. */
export async function readSse(res: Response): Promise<WireEvent[]> {
  const text = await res.text();
  const events: WireEvent[] = [];
  for (const block of text.split('\n\n')) {
    if (!block.trim()) continue;
    let id: string | undefined;
    let event = 'message';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith('id: ')) id = line.slice(4);
      else if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data.push(line.slice(6));
    }
    events.push({ id, event, data: JSON.parse(data.join('\n')) });
  }
  return events;
}

export const userInput = (content: string, extra: Record<string, unknown> = {}) => ({
  messages: [{ role: 'user', content }],
  ...extra,
});
