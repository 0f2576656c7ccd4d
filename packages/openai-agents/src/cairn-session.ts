import {
  checkKeys,
  checkOwner,
  defineState,
  invalidArgument,
  type JsonObject,
  keysOf,
  newId,
  type StateSchema,
  toJson,
} from '@cairn/core';
import type { Store } from '@cairn/store';
import { type CairnThread, openThread, retryAttempts, retryOnConflict } from '@cairn/thread';
import type { AgentInputItem, Session } from '@openai/agents-core';

/** The `type` of the Cairn messages that hold an Agents SDK item (the item is the message's `data`). */
export const AGENT_ITEM_TYPE = 'agent-item';

/** The checkpoint that marks the item `popItem` removed last. */
export const POPPED_CHECKPOINT = 'popped';

const NoState = defineState({});

export interface CairnSessionOptions<S extends StateSchema<any>> {
  store: Store;
  /** The session's thread id. A new UUIDv7 when omitted; the thread is created on the first write. */
  sessionId?: string;
  /**
   * The user or tenant the session acts for (the signed-in one, never a value a client
   * sends): its thread is created with it, and every call on a thread of another owner is
   * `NOT_FOUND` before anything is read or written (`null` matches only a thread without an
   * owner). Omitted: no check.
   */
  resourceId?: string | null;
  /** The schema of the thread's state, for `openThread()`. Default: no fields. */
  schema?: S;
  /** Retries when another writer moved the head during a write. Default 50. */
  maxRetries?: number;
}

/**
 * A `Session` of the OpenAI Agents SDK on a Cairn thread. Items are Cairn messages on
 * the thread's active branch (each item's JSON is a message's `data`), stored once and
 * never changed:
 *
 * - `addItems` appends the items as one chain after the head, in one transaction (after
 *   whatever another writer appended meanwhile).
 * - `popItem` moves the head back to the popped item's parent. The item stays in the graph;
 *   the checkpoint `popped` marks the last one popped.
 * - `clearSession` starts a new, empty branch and makes it active; earlier branches keep
 *   their items (it deletes nothing; `store.deleteThread(sessionId)` does).
 * - With `resourceId`, a session whose thread is another owner's is `NOT_FOUND`.
 *
 * @example
 * ```ts
 * const session = new CairnSession({ store, sessionId: 'user-1-support' });
 * const result = await run(agent, 'Where is my order?', { session });
 * ```
 */
export class CairnSession<S extends StateSchema<any> = typeof NoState> implements Session {
  readonly #store: Store;
  readonly #sessionId: string;
  readonly #resourceId: string | null | undefined;
  readonly #schema: S;
  readonly #attempts: number;

  constructor(options: CairnSessionOptions<S>) {
    if (typeof options !== 'object' || options === null || typeof options.store !== 'object') {
      throw invalidArgument('CairnSession needs { store }');
    }
    checkKeys(
      options,
      'CairnSession options',
      keysOf<CairnSessionOptions<any>>()([
        'store',
        'sessionId',
        'resourceId',
        'schema',
        'maxRetries',
      ]),
    );
    if (
      options.sessionId !== undefined &&
      (typeof options.sessionId !== 'string' || options.sessionId.length === 0)
    ) {
      throw invalidArgument('sessionId must be a non-empty string', {
        sessionId: options.sessionId,
      });
    }
    this.#store = options.store;
    this.#sessionId = options.sessionId ?? newId();
    this.#resourceId = options.resourceId;
    this.#schema = options.schema ?? (NoState as unknown as S);
    this.#attempts = retryAttempts(options.maxRetries);
  }

  /** The id of the session's Cairn thread. */
  async getSessionId(): Promise<string> {
    return this.#sessionId;
  }

  /** The active branch's items in order; with `limit`, the latest `limit` of them. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    if (limit !== undefined && !Number.isInteger(limit)) {
      throw invalidArgument(`limit must be an integer, got ${String(limit)}`, { limit });
    }
    if (limit !== undefined && limit <= 0) return [];
    await this.#checkOwner();
    const branch = await this.#store.getActiveBranch(this.#sessionId);
    if (!branch?.headMessageId) return [];
    const chain = await this.#store.getChain(
      branch.headMessageId,
      limit === undefined ? {} : { limit },
    );
    return chain.map((m) => m.data as unknown as AgentInputItem);
  }

  /**
   * Appends the items as one chain after the head, atomically: all of them or none. An
   * item that is not JSON is `INVALID_ARGUMENT` naming its position, before anything is
   * written (object keys whose value is `undefined` are left out, as JSON does).
   */
  async addItems(items: AgentInputItem[]): Promise<void> {
    if (!Array.isArray(items)) throw invalidArgument('addItems needs an array of items');
    const messages = items.map((item, i) => {
      if (typeof item !== 'object' || item === null || Array.isArray(item)) {
        throw invalidArgument(`items[${i}] must be an object`, { index: i });
      }
      const data = toJson(item, `items[${i}]`) as JsonObject;
      const role =
        typeof data.role === 'string' && data.role.length > 0
          ? data.role
          : typeof data.type === 'string' && data.type.length > 0
            ? data.type
            : 'item';
      return { role, type: AGENT_ITEM_TYPE, data };
    });
    if (messages.length === 0) return;
    await this.#withThread(async (thread) => {
      thread.add(messages);
      await thread.save();
    });
  }

  /**
   * Removes the latest item from the session: the head moves back to its parent. The item
   * stays in the graph, immutable, marked by the checkpoint `popped`. Popping the only
   * item starts an empty branch. Undefined when the session is empty.
   */
  async popItem(): Promise<AgentInputItem | undefined> {
    await this.#checkOwner();
    return retryOnConflict(
      async () => {
        const branch = await this.#store.getActiveBranch(this.#sessionId);
        if (!branch?.headMessageId) return undefined;
        const head = await this.#store.getMessage(branch.headMessageId);
        if (!head) return undefined;
        if (head.parentId === null) {
          await this.#withThread(async (thread) => {
            await thread.checkpoint(POPPED_CHECKPOINT, head.id);
            await thread.rewind(null);
          });
        } else {
          await this.#store.transaction(async (tx) => {
            await tx.moveHead(branch.id, head.id, head.parentId!);
            await tx.saveCheckpoint({
              threadId: this.#sessionId,
              name: POPPED_CHECKPOINT,
              messageId: head.id,
            });
          });
        }
        return head.data as unknown as AgentInputItem;
      },
      { attempts: this.#attempts },
    );
  }

  /** Starts a new, empty branch and makes it active. Nothing is deleted. */
  async clearSession(): Promise<void> {
    if (!(await this.#store.getThread(this.#sessionId))) return;
    await this.#withThread((thread) => thread.rewind(null));
  }

  /**
   * The session's Cairn thread (created when needed), for its state, branches and
   * checkpoints. Close it when done.
   */
  async openThread(): Promise<CairnThread<S>> {
    await this.#checkOwner();
    const thread = await openThread(this.#store, {
      schema: this.#schema,
      threadId: this.#sessionId,
      resourceId: this.#resourceId ?? null,
      maxRetries: this.#attempts - 1,
    });
    try {
      // Another owner's session may have created the thread since the check.
      checkOwner(thread, this.#resourceId, 'session');
    } catch (e) {
      await thread.close();
      throw e;
    }
    return thread;
  }

  /** `NOT_FOUND` when the session acts for a resource and its thread is another's. */
  async #checkOwner(): Promise<void> {
    if (this.#resourceId === undefined) return;
    checkOwner(await this.#store.getThread(this.#sessionId), this.#resourceId, 'session');
  }

  async #withThread<T>(fn: (thread: CairnThread<S>) => Promise<T>): Promise<T> {
    const thread = await this.openThread();
    try {
      return await fn(thread);
    } finally {
      await thread.close();
    }
  }
}
