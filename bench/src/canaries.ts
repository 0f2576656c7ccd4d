/**
 * The canary audit's shared pieces (suite `forget-audit` and its worker processes): how a
 * store is opened, how each package maps a user, and one write per package carrying
 * canaries, unique strings that the audit later looks for everywhere.
 *
 * Each package is used as its README says a user would be mapped:
 * - `@cairn/thread`: `openThread(store, { resourceId: user })`;
 * - `@cairn/memory`: `remember({ entityId: user })`, `ingestDocument({ entityId: user })`;
 * - `@cairn/ai-sdk`: `saveChat({ chatId, messages, resourceId: user })`;
 * - `@cairn/openai-agents`: `new CairnSession({ sessionId, resourceId: user })`;
 * - `@cairn/langgraph`: `CairnSaver` with `resourceId: (config) => config.configurable?.user_id`
 *   and runs given `{ thread_id, user_id }`, and `CairnStore` items under the namespace
 *   `[user, 'memories']` (LangGraph's usual layout: their `worldId` is the user).
 */
import { randomBytes } from 'node:crypto';
import { createChatStore } from '@cairn/ai-sdk';
import { defineState, field, isCairnError, newId, reducers } from '@cairn/core';
import { CairnSaver, CairnStore } from '@cairn/langgraph';
import { createMemory } from '@cairn/memory';
import { CairnSession } from '@cairn/openai-agents';
import { localKeyring, type Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import { createSqliteStore } from '@cairn/store-sqlite';
import { openThread } from '@cairn/thread';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import type { AgentInputItem } from '@openai/agents-core';
import type { UIMessage } from 'ai';
import { POSTGRES_URL } from './postgres.js';

export type Target = { backend: 'sqlite'; path: string } | { backend: 'postgres'; schema: string };

/** What the audit plants and writes, one package write each. */
export const KINDS = [
  'thread-message',
  'thread-state',
  'memory',
  'document',
  'langgraph-checkpoint',
  'langgraph-store',
  'ai-sdk-chat',
  'agents-session',
] as const;
export type Kind = (typeof KINDS)[number];

/** Shares of a user's canaries, per kind (sums to 1). */
export const SHARES: Record<Kind, number> = {
  'thread-message': 0.2,
  'thread-state': 0.1,
  memory: 0.15,
  document: 0.1,
  'langgraph-checkpoint': 0.1,
  'langgraph-store': 0.05,
  'ai-sdk-chat': 0.15,
  'agents-session': 0.15,
};

/** Canaries per package write. */
export const PER_WRITE = 10;

const KEY_SECRET = 'the canary audit key-encryption key, 32 bytes and more';

export async function openStore(target: Target, encrypted: boolean): Promise<Store> {
  const encryption = encrypted ? { keyring: localKeyring(KEY_SECRET) } : undefined;
  if (target.backend === 'sqlite')
    return createSqliteStore({ path: target.path }, { busyTimeoutMs: 120_000, encryption });
  return createPostgresStore(
    { connectionString: POSTGRES_URL },
    { schema: target.schema, encryption },
  );
}

/**
 * A canary: lowercase letters and digits only (one keyword token, stored as written),
 * random first so that no two share a prefix, then user, kind and number for reading back.
 */
export function canary(user: number, kind: Kind, n: number): string {
  return `cnry${randomBytes(6).toString('hex')}u${user}k${KINDS.indexOf(kind)}n${n}`;
}

/** The user and kind a canary was made for. */
export function parseCanary(c: string): { user: number; kind: Kind } {
  const m = /u(\d+)k(\d+)n\d+$/.exec(c)!;
  return { user: Number(m[1]), kind: KINDS[Number(m[2])]! };
}

/** Every canary in a text. */
export function canariesIn(text: string): string[] {
  return text.match(/cnry[0-9a-f]{12}u\d+k\d+n\d+/g) ?? [];
}

export const userId = (u: number) => `canary-user-${u}`;

const Notes = defineState({
  notes: field<string[]>({ reducer: reducers.appendUnique, default: () => [] }),
});

/** A one-node chat graph whose fake model repeats the question. */
function chatGraph(store: Store) {
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', (state) => ({
      messages: [new AIMessage(`You said: ${String(state.messages.at(-1)!.content)}`)],
    }))
    .addEdge(START, 'agent')
    .addEdge('agent', END)
    .compile({
      checkpointer: new CairnSaver(store, {
        resourceId: (config) => config.configurable?.user_id as string | undefined,
      }),
    });
}

/**
 * One process's handles on the packages, and one write of a kind for a user: `tag` names
 * the writer's own threads, chats and sessions (made on its first write), so writers never
 * race on one head.
 */
export class Writers {
  readonly #store: Store;
  readonly #memory;
  readonly #chats;
  readonly #items: CairnStore;
  readonly #graph;
  readonly #threads = new Map<string, Awaited<ReturnType<typeof openThread<typeof Notes>>>>();
  readonly #sessions = new Map<string, CairnSession>();

  constructor(store: Store) {
    this.#store = store;
    this.#memory = createMemory({ store, agentId: 'canary-agent' });
    this.#chats = createChatStore({ store });
    this.#items = new CairnStore(store);
    this.#graph = chatGraph(store);
  }

  /** Thread, chat, session and LangGraph thread ids of a user's writer `tag`. */
  static ids(user: string, tag: string) {
    return {
      thread: `${user}-thread-${tag}`,
      chat: `${user}-chat-${tag}`,
      session: `${user}-support-${tag}`,
      langgraph: `lg-${user}-${tag}`,
    };
  }

  /** The writer's thread of a user, opened on first use and kept (as a worker keeps one). */
  async thread(user: string, tag: string) {
    const id = Writers.ids(user, tag).thread;
    let t = this.#threads.get(id);
    if (!t) {
      t = await openThread(this.#store, { schema: Notes, resourceId: user, threadId: id });
      this.#threads.set(id, t);
    }
    return t;
  }

  #session(user: string, tag: string) {
    const id = Writers.ids(user, tag).session;
    let s = this.#sessions.get(id);
    if (!s) {
      s = new CairnSession({ store: this.#store, sessionId: id, resourceId: user });
      this.#sessions.set(id, s);
    }
    return s;
  }

  /** Opens the writer's thread now (a worker holding a thread open across a forget). */
  async open(user: string, tag: string): Promise<void> {
    await this.thread(user, tag);
  }

  async write(kind: Kind, user: string, tag: string, words: string[]): Promise<void> {
    const text = words.join(' ');
    const ids = Writers.ids(user, tag);
    switch (kind) {
      case 'thread-message': {
        const t = await this.thread(user, tag);
        t.add({ role: 'user', data: { text } });
        await t.save();
        return;
      }
      case 'thread-state': {
        const t = await this.thread(user, tag);
        await t.update({ notes: words });
        return;
      }
      case 'memory':
        await this.#memory.rememberMany(
          words.map((w) => ({ text: `the user said ${w}`, entityId: user })),
        );
        return;
      case 'document':
        await this.#memory.ingestDocument(
          {
            text: words.map((w) => `A paragraph that mentions ${w}.`).join('\n\n'),
            title: 'notes',
            entityId: user,
          },
          { chunkSize: 200, overlap: 0 },
        );
        return;
      case 'langgraph-checkpoint':
        await this.#graph.invoke(
          { messages: [new HumanMessage(text)] },
          { configurable: { thread_id: ids.langgraph, user_id: user } },
        );
        return;
      case 'langgraph-store':
        await this.#items.put([user, 'memories'], newId(), { text });
        return;
      case 'ai-sdk-chat': {
        const message: UIMessage = { id: newId(), role: 'user', parts: [{ type: 'text', text }] };
        await this.#chats.saveChat({ chatId: ids.chat, messages: [message], resourceId: user });
        return;
      }
      case 'agents-session': {
        const item: AgentInputItem = { role: 'user', content: text };
        await this.#session(user, tag).addItems([item]);
        return;
      }
    }
  }
}

/**
 * How a write for `user` ended: written, refused as forgotten, refused because the read it
 * made first found the user's data key destroyed by a forget running meanwhile (a store
 * with encryption: `DECRYPTION_FAILED` naming the user's tenant), or another error.
 */
export async function outcome(
  fn: () => Promise<unknown>,
  user: string,
): Promise<'ok' | 'forgotten' | 'keyDestroyed' | string> {
  try {
    await fn();
    return 'ok';
  } catch (e) {
    if (isCairnError(e, 'FORGOTTEN')) return 'forgotten';
    if (
      isCairnError(e, 'DECRYPTION_FAILED') &&
      ['resource', 'entity', 'world'].some((k) => e.details.tenant === `${k}:${user}`)
    )
      return 'keyDestroyed';
    return e instanceof Error
      ? `${(e as { code?: string }).code ?? e.name}: ${e.message}`
      : String(e);
  }
}
