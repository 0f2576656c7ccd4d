/**
 * A forget reaches @cairn/compose's cache (issue 29): a composer given the store
 * (`createComposer({ store })`) serves no composition holding a forgotten user's data
 * afterwards, on every store. Through the same store, or another store on the database in
 * this process, before `forget` returns; from a store on another connection (another
 * process's view of a Postgres server) as soon as its notice arrives.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createComposer, type Provider } from '@cairn/compose';
import { newId } from '@cairn/core';
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
import { afterAll, describe, expect, it } from 'vitest';
import { createMemory, memoriesProvider } from '../src/index.js';

async function waitFor(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000 && !done(); i++) await new Promise((r) => setTimeout(r, 5));
  if (!done()) throw new Error(`timed out waiting for ${what}`);
}

interface ChatMessage {
  id: string;
  userId: string;
  text: string;
}

const dir = mkdtempSync(join(tmpdir(), 'cairn-compose-forget-'));
const pglite = new PGlite();
const skipServer = await postgresTestSkip('compose forget');
const schemas: string[] = [];
afterAll(async () => {
  await pglite.close();
  if (!skipServer) for (const s of schemas) await dropSchema(s);
  rmSync(dir, { recursive: true, force: true });
});

interface Kind {
  name: string;
  /** The store, and (where the database can be shared) a second store on it. */
  open: () => Promise<{ store: Store; other: (() => Promise<Store>) | null }>;
  /** The second store hears the first one's forget before that forget returns. */
  otherHearsAtOnce: boolean;
}

const kinds: Kind[] = [
  {
    name: 'memory',
    open: async () => ({ store: createMemoryStore(), other: null }),
    otherHearsAtOnce: false,
  },
  {
    name: 'SQLite file',
    open: async () => {
      const path = join(dir, `${newId()}.db`);
      return { store: createSqliteStore({ path }), other: async () => createSqliteStore({ path }) };
    },
    otherHearsAtOnce: true,
  },
  {
    name: 'PGlite',
    open: async () => {
      const schema = `compose_forget_${newId().replaceAll('-', '').slice(-12)}`;
      const store = await createPostgresStore({ client: pglite }, { schema });
      return { store, other: () => createPostgresStore({ client: pglite }, { schema }) };
    },
    // Through PGlite's own notifications.
    otherHearsAtOnce: false,
  },
];
if (!skipServer)
  kinds.push({
    name: 'PostgreSQL server',
    open: async () => {
      const schema = freshSchema('compose_forget');
      schemas.push(schema);
      const open = () => createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema });
      return { store: await open(), other: open };
    },
    otherHearsAtOnce: false,
  });

describe.each(kinds)('a forget reaches the composer on $name', (kind) => {
  /** A user's thread and memories, each holding a canary; a composer over both. */
  async function setup(store: Store) {
    const user = `user-${newId()}`;
    const canary = `canary-${newId()}`;
    const { thread, branch } = await store.createThreadWithBranch({ resourceId: user });
    const [m] = await store.addMessages([
      { threadId: thread.id, parentId: null, role: 'user', data: `my code is ${canary}` },
    ]);
    await store.moveHead(branch.id, null, m!.id);
    const memory = createMemory({ store, agentId: 'assistant' });
    await memory.remember({ text: `The user's code is ${canary}`, entityId: user });
    const history: Provider<ChatMessage> = {
      name: 'HISTORY',
      get: async ({ message }) => {
        const threads = await store.listThreads({ resourceId: message.userId });
        const texts: string[] = [];
        for (const t of threads.items) {
          const head = (await store.getActiveBranch(t.id))?.headMessageId;
          if (head) for (const x of await store.getChain(head)) texts.push(String(x.data));
        }
        return { text: texts.join('\n') };
      },
    };
    const memories = memoriesProvider<ChatMessage>(memory, {
      viewerFrom: () => ({ agentId: 'assistant' }),
      mode: 'keyword',
      queryFrom: () => 'code',
    });
    const composer = createComposer<ChatMessage>({ providers: [history, memories], store });
    const message: ChatMessage = { id: m!.id, userId: user, text: 'what is my code?' };
    // The version an application holds: the same before and after the forget.
    const compose = async () => (await composer.compose(message, { version: 'held' })).text;
    for (let i = 0; i < 2; i++) {
      const text = await compose();
      expect(text).toContain(`my code is ${canary}`);
      expect(text).toContain(`The user's code is ${canary}`);
    }
    expect(composer.stats.hits).toBe(1);
    return { user, canary, compose, composer };
  }

  it('serves no composition with the user’s data once forget returns', async () => {
    const { store } = await kind.open();
    try {
      const { user, canary, compose } = await setup(store);
      await store.forget({ resourceId: user, entityId: user });
      expect(await compose()).not.toContain(canary);
    } finally {
      await store.close();
    }
  }, 30_000);

  it.skipIf(kind.name === 'memory')(
    'hears a forget through another store on the database',
    async () => {
      const { store, other } = await kind.open();
      const second = await other!();
      try {
        const { user, canary, compose, composer } = await setup(store);
        await second.forget({ resourceId: user, entityId: user });
        // On a shared SQLite file (one connection per file in a process), before forget
        // returns; elsewhere when the notice arrives (PGlite's notifications; a Postgres
        // server's LISTEN/NOTIFY, as from another process).
        if (!kind.otherHearsAtOnce)
          await waitFor(() => composer.stats.size === 0, 'the forget notice');
        expect(await compose()).not.toContain(canary);
      } finally {
        await second.close();
        await store.close();
      }
    },
    30_000,
  );
});
