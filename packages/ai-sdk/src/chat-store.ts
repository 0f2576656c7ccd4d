import {
  type Branch,
  checkKeys,
  checkOwner,
  defineState,
  invalidArgument,
  type JsonObject,
  jsonEqual,
  keysOf,
  type Message,
  newId,
  notFound,
  type StateSchema,
  type Thread,
  toJson,
} from '@cairn/core';
import type { ListThreadsOptions, NewMessage, Page, Store } from '@cairn/store';
import {
  type CairnThread,
  type MessageInput,
  openThread,
  retryAttempts,
  retryOnConflict,
} from '@cairn/thread';
import type { UIMessage } from 'ai';
import { checkShape } from './ui-message.js';

/** The `type` of the Cairn messages that hold a `UIMessage` (its JSON is the message's `data`). */
export const UI_MESSAGE_TYPE = 'ui-message';

const NoState = defineState({});
const PAGE = 64;

export interface ChatStoreOptions<S extends StateSchema<any>> {
  store: Store;
  /** The schema of `thread.state` for app state (title, tools used, ...). Default: no fields. */
  schema?: S;
  /** Retries when another request moved the chat's head during a save. Default 50. */
  maxRetries?: number;
}

export interface CreateChatOptions {
  /** Generated (UUIDv7) when omitted. */
  id?: string;
  /** The user or tenant that owns the chat. */
  resourceId?: string | null;
  title?: string | null;
  metadata?: JsonObject;
}

/**
 * Whom a call acts for. With `resourceId` (the signed-in user or tenant, never a value the
 * client sends), a chat of another owner is `NOT_FOUND`, as if it did not exist (`null`
 * matches only chats without an owner). Omitted: any chat (for code that checked already).
 */
export interface ChatAccess {
  resourceId?: string | null;
}

/** A `ChatAccess` argument holds `resourceId` only (the one rule for option objects). */
function checkAccess(access: ChatAccess, method: string): void {
  checkKeys(access, `${method} options`, keysOf<ChatAccess>()(['resourceId']));
}

export interface SaveChatOptions<M extends UIMessage = UIMessage> extends ChatAccess {
  chatId: string;
  /** The whole list: what the client sent plus the reply (`onFinish`'s `messages`). */
  messages: M[];
  /**
   * The chat's owner: a chat created by this save gets it; an existing chat must be this
   * resource's, else `NOT_FOUND` before anything is written (see `ChatAccess`).
   */
  resourceId?: string | null;
}

export interface LoadChatOptions extends ChatAccess {
  /** Only the last `limit` messages. */
  limit?: number;
}

export interface SaveChatResult {
  /** The branch the list was saved on (now the active one). */
  branch: string;
  /** True when the list diverged from the stored branch and a new branch was made. */
  forked: boolean;
  /** How many messages were written. */
  saved: number;
}

export interface ChatBranch {
  name: string;
  isActive: boolean;
  /** The branch it was forked from (null for the first). */
  parent: string | null;
  createdAt: number;
}

export interface MessageVersions<M extends UIMessage = UIMessage> {
  /** The position of the active branch's version in `versions`: "version index + 1 of n". */
  index: number;
  /** Every message stored at this place (same parent), oldest first, each with a branch that shows it. */
  versions: Array<{ branch: string; message: M }>;
}

/**
 * Chat history for the AI SDK on Cairn threads: one thread per chat, each `UIMessage` a
 * Cairn message (role, and the message's JSON as data), nothing ever overwritten. A
 * regenerated answer or an edited question is saved on a new branch forked at the last
 * message in common; the old branch stays and can be switched back to.
 *
 * @example
 * ```ts
 * const chats = createChatStore({ store: createSqliteStore({ path: 'chats.db' }) });
 * const chatId = await chats.createChat({ resourceId: 'user-1' });
 * // in the route handler, for the signed-in user:
 * const result = streamText({ model, messages: await convertToModelMessages(messages) });
 * return result.toUIMessageStreamResponse({
 *   originalMessages: messages,
 *   onFinish: ({ messages }) => chats.saveChat({ chatId, messages, resourceId: userId }),
 * });
 * // on page load:
 * const initialMessages = await chats.loadChat(chatId, { resourceId: userId });
 * ```
 */
export function createChatStore<S extends StateSchema<any> = typeof NoState>(
  options: ChatStoreOptions<S>,
): ChatStore<S> {
  if (typeof options !== 'object' || options === null || typeof options.store !== 'object') {
    throw invalidArgument('createChatStore needs { store }');
  }
  checkKeys(
    options,
    'createChatStore options',
    keysOf<ChatStoreOptions<any>>()(['store', 'schema', 'maxRetries']),
  );
  return new ChatStore(options);
}

export class ChatStore<S extends StateSchema<any> = typeof NoState> {
  readonly #store: Store;
  readonly #schema: S;
  readonly #attempts: number;

  /** @internal — use `createChatStore`. */
  constructor(options: ChatStoreOptions<S>) {
    this.#store = options.store;
    this.#schema = options.schema ?? (NoState as unknown as S);
    this.#attempts = retryAttempts(options.maxRetries);
  }

  /** Creates an empty chat and returns its id. `CONFLICT` when the id is taken. */
  async createChat(options: CreateChatOptions = {}): Promise<string> {
    checkKeys(
      options,
      'createChat options',
      keysOf<CreateChatOptions>()(['id', 'resourceId', 'title', 'metadata']),
    );
    const t = await this.#store.createThread({
      ...(options.id === undefined ? {} : { id: options.id }),
      resourceId: options.resourceId ?? null,
      title: options.title ?? null,
      ...(options.metadata === undefined ? {} : { metadata: options.metadata }),
    });
    return t.id;
  }

  /** The chat's thread record (title, resourceId, metadata), or null. */
  getChat(chatId: string): Promise<Thread | null> {
    return this.#store.getThread(chatId);
  }

  /** A resource's chats (or all), newest first, a page at a time. */
  listChats(options: ListThreadsOptions = {}): Promise<Page<Thread>> {
    return this.#store.listThreads(options);
  }

  /** Deletes the chat with every branch. False when there was no such chat (for `access`). */
  async deleteChat(chatId: string, access: ChatAccess = {}): Promise<boolean> {
    checkAccess(access, 'deleteChat');
    if (access.resourceId !== undefined) {
      const t = await this.#store.getThread(checkChatId(chatId));
      if (t === null || t.resourceId !== access.resourceId) return false;
    }
    return this.#store.deleteThread(chatId);
  }

  /**
   * The active branch as `UIMessage[]` (with `limit`, its last `limit` messages), exactly
   * as saved. `NOT_FOUND` when the chat does not exist (or is another owner's, see
   * `ChatAccess`).
   */
  async loadChat<M extends UIMessage = UIMessage>(
    chatId: string,
    options: LoadChatOptions = {},
  ): Promise<M[]> {
    checkKeys(options, 'loadChat options', keysOf<LoadChatOptions>()(['limit', 'resourceId']));
    const head = await this.#activeHead(chatId, options.resourceId);
    if (head === null) return [];
    const chain = await this.#store.getChain(
      head,
      options.limit === undefined ? {} : { limit: options.limit },
    );
    return chain.map((m) => m.data as unknown as M);
  }

  /**
   * Saves the whole list (what the client sent plus the reply), storing only what is new.
   * When the list extends the active branch, the new messages are appended to it. When it
   * diverges (a regenerated answer, an edited question: same id, other content, or
   * messages removed), a new branch is forked at the last message in common, made active,
   * and the rest is saved there; the old branch is untouched. Creates the chat when it does
   * not exist. With `resourceId`, a chat of another owner is `NOT_FOUND`. A message the AI
   * SDK would reject is `INVALID_ARGUMENT` naming its position, before anything is written.
   * When another request saved to the chat meanwhile, the list is compared again with what
   * it saved, so neither save loses messages.
   *
   * The list extends the branch when the message at the head's position in the list is the
   * head (same id and content); then the list is read once, start to end, and only the
   * messages after the head are converted and written. Otherwise the list is compared with
   * the branch from that position toward the start, a page at a time, until a message
   * matches.
   */
  async saveChat<M extends UIMessage>(options: SaveChatOptions<M>): Promise<SaveChatResult> {
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('saveChat needs { chatId, messages }');
    checkKeys(
      options,
      'saveChat options',
      keysOf<SaveChatOptions>()(['chatId', 'messages', 'resourceId']),
    );
    const chatId = checkChatId(options.chatId);
    const { messages } = options;
    if (!Array.isArray(messages)) throw invalidArgument('messages must be an array of UIMessages');
    const { resourceId } = options;
    // The owner never changes, so one check covers every attempt; a chat created meanwhile
    // by another request is checked when it is opened (#withThread).
    if (resourceId !== undefined)
      checkOwner(await this.#store.getThread(chatId), resourceId, 'chat');
    return retryOnConflict(() => this.#save(chatId, messages, resourceId), {
      attempts: this.#attempts,
    });
  }

  async #save(
    chatId: string,
    messages: UIMessage[],
    resourceId: string | null | undefined,
  ): Promise<SaveChatResult> {
    const n = messages.length;
    const active = await this.#store.getActiveBranch(chatId);
    const head =
      active?.headMessageId == null ? null : await this.#store.getMessage(active.headMessageId);
    // The common case, a new turn: the list holds the head at its position. Only the
    // messages after it are written, and only if the head has not moved since.
    if (head === null || (head.depth < n && this.#same(messages, head))) {
      const fresh = this.#fresh(messages, head?.depth ?? -1);
      // A new chat (or one made without a branch): the engine creates it and its `main`.
      const branch = active ?? (await this.#withThread(chatId, resourceId, async (t) => t.branch));
      return this.#append(branch, head, fresh);
    }
    return this.#withThread(chatId, resourceId, (thread) => this.#diverged(thread, head, messages));
  }

  async #diverged(
    thread: CairnThread<S>,
    head: Message,
    messages: UIMessage[],
  ): Promise<SaveChatResult> {
    const n = messages.length;
    // The branch whose messages start the list furthest (a repeated request, a client
    // that went on from a version it showed, a list cut short): continue there, or branch
    // off it without writing, rather than store a copy.
    let best: { name: string; at: Message; isHead: boolean } | null = null;
    for (const b of await this.#store.listBranches(thread.id)) {
      if (b.headMessageId === null || (b.id === thread.branchId && head.depth < n)) continue;
      const h = b.headMessageId === head.id ? head : await this.#store.getMessage(b.headMessageId);
      if (!h) continue;
      const p = Math.min(h.depth, n - 1);
      if (p <= (best?.at.depth ?? -1)) continue;
      const at =
        p === h.depth ? h : (await this.#store.getChain(h.id, { beforeDepth: p + 1, limit: 1 }))[0];
      if (at && this.#same(messages, at)) best = { name: b.name, at, isHead: at === h };
    }
    if (best !== null) {
      const fresh = this.#fresh(messages, best.isHead ? best.at.depth : n - 1);
      if (best.name !== thread.branchName) await thread.switchBranch(best.name);
      if (best.isHead) return this.#append(thread.branch, best.at, fresh);
      // The list is the start of that branch: a new branch at its last message.
      await thread.rewind(best.at.id);
      return { branch: thread.branchName, forked: true, saved: 0 };
    }
    // Diverged: the last position where the list and the active branch hold the same
    // message, walking the branch toward its start a page at a time.
    let common: Message | null = null;
    let replaced: Message | null = null;
    let before = Math.min(head.depth, n - 1) + 1;
    search: while (before > 0) {
      const page = await this.#store.getChain(head.id, { beforeDepth: before, limit: PAGE });
      if (page.length === 0) break;
      for (let k = page.length - 1; k >= 0; k--) {
        const m = page[k]!;
        if (this.#same(messages, m)) {
          common = m;
          break search;
        }
        replaced = m;
      }
      before = page[0]!.depth;
    }
    const at = common?.depth ?? -1;
    if (replaced === null || at === n - 1) {
      // Only an empty list gets here (any other start of a branch was found above).
      await thread.rewind(null);
      return { branch: thread.branchName, forked: true, saved: 0 };
    }
    // The first new message takes the id of the stored one it replaces: that makes the
    // engine's save an edit, which forks at that message's parent and saves there.
    const fresh = this.#fresh(messages, at);
    fresh[0]!.id = replaced.id;
    thread.add(fresh);
    const saved = await thread.save();
    return { branch: thread.branchName, forked: true, saved: saved.length };
  }

  /**
   * The one pass over the client's list, before anything is written: every message has the
   * shape the AI SDK requires, and the messages after position `at` (the ones to write)
   * are JSON and have ids found nowhere else in the list. Returns those as Cairn messages.
   */
  #fresh(messages: UIMessage[], at: number): MessageInput[] {
    const positions = new Map<string, number>();
    const unique = (m: UIMessage, i: number) => {
      const j = positions.get(m.id);
      if (j === undefined) return;
      throw invalidArgument(
        `messages[${Math.max(i, j)}].id ${JSON.stringify(m.id)} appears twice in the list (also at ${Math.min(i, j)})`,
        { index: Math.max(i, j), id: m.id },
      );
    };
    const fresh: MessageInput[] = [];
    for (let i = at + 1; i < messages.length; i++) {
      const m = messages[i];
      checkShape(m, i);
      unique(m, i);
      positions.set(m.id, i);
      fresh.push({ role: m.role, type: UI_MESSAGE_TYPE, data: toJson(m, `messages[${i}]`) });
    }
    for (let i = 0; i <= at && i < messages.length; i++) {
      const m = messages[i];
      checkShape(m, i);
      unique(m, i);
    }
    return fresh;
  }

  /**
   * Appends `fresh` after `head` on `branch` and moves its head, in one transaction, if
   * the head is still `head`: `CONFLICT` otherwise (then the save compares the list again
   * with what the other writer saved).
   */
  async #append(
    branch: Branch,
    head: Message | null,
    fresh: MessageInput[],
  ): Promise<SaveChatResult> {
    if (fresh.length === 0) return { branch: branch.name, forked: false, saved: 0 };
    let parentId = head?.id ?? null;
    const chain = fresh.map((m): NewMessage => {
      const message = { ...m, id: newId(), threadId: branch.threadId, parentId };
      parentId = message.id;
      return message;
    });
    await this.#store.transaction(async (tx) => {
      await tx.addMessages(chain);
      await tx.moveHead(branch.id, head?.id ?? null, parentId!);
    });
    return { branch: branch.name, forked: false, saved: chain.length };
  }

  /** Whether the client's message at the stored message `s`'s position (`s.depth`) is `s`. */
  #same(messages: UIMessage[], s: Message): boolean {
    const m = messages[s.depth];
    checkShape(m, s.depth);
    return (
      (s.data as { id?: unknown }).id === m.id &&
      jsonEqual(toJson(m, `messages[${s.depth}]`), s.data)
    );
  }

  /**
   * Runs `fn` on the chat's thread (created, with `main` and `resourceId`, when it does not
   * exist): `NOT_FOUND` when it turns out to be another owner's.
   */
  async #withThread<T>(
    chatId: string,
    resourceId: string | null | undefined,
    fn: (thread: CairnThread<S>) => Promise<T>,
  ): Promise<T> {
    const thread = await this.#openThread(chatId, resourceId ?? null);
    try {
      checkOwner(thread, resourceId, 'chat');
      return await fn(thread);
    } finally {
      await thread.close();
    }
  }

  /** The chat's branches, in creation order. `NOT_FOUND` when the chat does not exist. */
  async listBranches(chatId: string, access: ChatAccess = {}): Promise<ChatBranch[]> {
    checkAccess(access, 'listBranches');
    await this.#requireChat(chatId, access.resourceId);
    const branches = await this.#store.listBranches(chatId);
    const names = new Map(branches.map((b) => [b.id, b.name]));
    return branches.map((b) => ({
      name: b.name,
      isActive: b.isActive,
      parent: b.parentBranchId === null ? null : (names.get(b.parentBranchId) ?? null),
      createdAt: b.createdAt,
    }));
  }

  /** Makes the named branch the active one and returns its messages. `NOT_FOUND` for an unknown name. */
  async switchBranch<M extends UIMessage = UIMessage>(
    chatId: string,
    name: string,
    access: ChatAccess = {},
  ): Promise<M[]> {
    const thread = await this.open(chatId, access);
    try {
      await thread.switchBranch(name);
    } finally {
      await thread.close();
    }
    return this.loadChat<M>(chatId);
  }

  /**
   * The versions of the active branch's message `messageId`: every message stored at its
   * place (the same parent) on any branch, for a "version 2 of 3" control. Switch to a
   * version with `switchBranch(chatId, versions[k].branch)`. `NOT_FOUND` when the message is
   * not on the active branch.
   */
  async versions<M extends UIMessage = UIMessage>(
    chatId: string,
    messageId: string,
    access: ChatAccess = {},
  ): Promise<MessageVersions<M>> {
    checkAccess(access, 'versions');
    const headId = await this.#activeHead(chatId, access.resourceId);
    const chain = headId === null ? [] : await this.#store.getChain(headId);
    const mine = chain.find((m) => (m.data as { id?: unknown }).id === messageId);
    if (!mine) throw notFound('message on the active branch of chat', messageId, { chatId });
    const found = new Map<string, { branch: string; node: Message }>();
    for (const b of await this.#store.listBranches(chatId)) {
      if (b.headMessageId === null) continue;
      const [node] = await this.#store.getChain(b.headMessageId, {
        beforeDepth: mine.depth + 1,
        limit: 1,
      });
      if (!node || node.depth !== mine.depth || node.parentId !== mine.parentId) continue;
      const seen = found.get(node.id);
      if (!seen || b.isActive) found.set(node.id, { branch: b.name, node });
    }
    const list = [...found.values()].sort(
      (a, b) => a.node.createdAt - b.node.createdAt || (a.node.id < b.node.id ? -1 : 1),
    );
    return {
      index: list.findIndex((v) => v.node.id === mine.id),
      versions: list.map((v) => ({ branch: v.branch, message: v.node.data as unknown as M })),
    };
  }

  /**
   * The chat's Cairn thread, for app state next to the messages (`thread.state`,
   * `thread.update({ title })`) and everything else the engine does. Close it when done.
   * `NOT_FOUND` when the chat does not exist.
   */
  async open(chatId: string, access: ChatAccess = {}): Promise<CairnThread<S>> {
    checkAccess(access, 'open');
    await this.#requireChat(chatId, access.resourceId);
    return this.#openThread(chatId, null);
  }

  #openThread(chatId: string, resourceId: string | null): Promise<CairnThread<S>> {
    return openThread(this.#store, {
      schema: this.#schema,
      threadId: chatId,
      resourceId,
      maxRetries: this.#attempts - 1,
    });
  }

  async #requireChat(chatId: string, resourceId?: string | null): Promise<Thread> {
    const t = await this.#store.getThread(checkChatId(chatId));
    if (!t) throw notFound('chat', chatId);
    checkOwner(t, resourceId, 'chat');
    return t;
  }

  /**
   * The active branch's head (one read when the chat has a branch and no owner is to be
   * checked). `NOT_FOUND` for no chat, or another owner's.
   */
  async #activeHead(chatId: string, resourceId?: string | null): Promise<string | null> {
    if (resourceId !== undefined) await this.#requireChat(chatId, resourceId);
    const b = await this.#store.getActiveBranch(checkChatId(chatId));
    if (b) return b.headMessageId;
    if (resourceId === undefined) await this.#requireChat(chatId);
    return null;
  }
}

function checkChatId(chatId: unknown): string {
  if (typeof chatId === 'string' && chatId.length > 0) return chatId;
  throw invalidArgument('chatId must be a non-empty string', { chatId });
}
