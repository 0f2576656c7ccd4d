import {
  type Branch,
  CairnError,
  type JsonObject,
  type Message,
  type StateSchema,
  type Thread,
  type Viewer,
} from '@cairn/core';
import { type Embedder, embedChecked, type RankingName, reciprocalRankFusion } from '@cairn/memory';
import type { MemoryFilter, MemoryHit, Store } from '@cairn/store';
import { messageText, runKey, stateAsOf } from '@cairn/thread';
import { diffStates, REPLACE_EVERY_FIELD } from './state-view.js';

export interface ApiOptions {
  store: Store;
  schema?: StateSchema | undefined;
  embedder?: Embedder | undefined;
  viewerFor?: ((threadId: string) => Viewer) | undefined;
}

const notFound = (what: string) => new CairnError('NOT_FOUND', what);
const invalid = (what: string) => new CairnError('INVALID_ARGUMENT', what);

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** A thread's whole message graph: the union of its branches' chains. */
interface Graph {
  thread: Thread;
  branches: Branch[];
  messages: Map<string, Message>;
  chains: Map<string, Set<string>>;
}

/** The first branch (in creation order) whose chain holds the message. */
function branchOf(message: Message, graph: Graph): Branch {
  const found = graph.branches.find((b) => graph.chains.get(b.id)?.has(message.id));
  if (!found) throw notFound(`message ${message.id} is on no branch`);
  return found;
}

/**
 * What the inspector's page reads and writes, in terms of the Store contract only. Every
 * id in a request is looked up before it is used: an unknown thread, branch or message is
 * `NOT_FOUND` and nothing is written.
 */
export class InspectorApi {
  readonly #store: Store;
  readonly #schema: StateSchema;
  readonly #exactState: boolean;
  readonly #embedder: Embedder | undefined;
  readonly #viewerFor: ((threadId: string) => Viewer) | undefined;

  constructor(options: ApiOptions) {
    this.#store = options.store;
    this.#schema = options.schema ?? REPLACE_EVERY_FIELD;
    this.#exactState = options.schema !== undefined;
    this.#embedder = options.embedder;
    this.#viewerFor = options.viewerFor;
  }

  /** A page of threads, newest first, optionally of one resource. */
  async threads(params: URLSearchParams) {
    const resourceId = params.get('resourceId') || undefined;
    const cursor = params.get('cursor') || null;
    const { items, nextCursor } = await this.#store.listThreads({ resourceId, cursor, limit: 100 });
    return {
      items: items.map((t) => ({
        id: t.id,
        title: t.title,
        resourceId: t.resourceId,
        createdAt: t.createdAt,
        updatedAt: t.updatedAt,
      })),
      nextCursor,
    };
  }

  async #thread(threadId: string): Promise<Thread> {
    const thread = await this.#store.getThread(threadId);
    if (!thread) throw notFound(`no thread ${threadId}`);
    return thread;
  }

  async #graph(threadId: string): Promise<Graph> {
    const thread = await this.#thread(threadId);
    const branches = await this.#store.listBranches(threadId);
    const messages = new Map<string, Message>();
    const chains = new Map<string, Set<string>>();
    for (const b of branches) {
      const chain = b.headMessageId ? await this.#store.getChain(b.headMessageId) : [];
      chains.set(b.id, new Set(chain.map((m) => m.id)));
      for (const m of chain) messages.set(m.id, m);
    }
    return { thread, branches, messages, chains };
  }

  async thread(threadId: string) {
    const graph = await this.#graph(threadId);
    const { branches, messages, chains } = graph;
    const checkpoints = await this.#store.listCheckpoints(threadId);
    const lease = await this.#store.getLease(runKey(threadId));
    const nodes = [...messages.values()]
      .sort((a, b) => a.depth - b.depth || a.createdAt - b.createdAt || a.id.localeCompare(b.id))
      .map((m) => ({
        id: m.id,
        parentId: m.parentId,
        role: m.role,
        type: m.type,
        depth: m.depth,
        createdAt: m.createdAt,
        text: clip(messageText(m.data), 400),
        branch: branchOf(m, graph).name,
        onBranches: branches.filter((b) => chains.get(b.id)?.has(m.id)).map((b) => b.name),
        checkpoints: checkpoints.filter((c) => c.messageId === m.id).map((c) => c.name),
      }));
    return {
      thread: graph.thread,
      branches: branches.map((b) => ({
        id: b.id,
        name: b.name,
        isActive: b.isActive,
        headMessageId: b.headMessageId,
        forkMessageId: b.forkMessageId,
        parent: branches.find((p) => p.id === b.parentBranchId)?.name ?? null,
        length: chains.get(b.id)?.size ?? 0,
      })),
      checkpoints,
      messages: nodes,
      run: lease
        ? {
            owner: lease.owner,
            releasedAt: lease.releasedAt,
            expiresAt: lease.expiresAt,
            data: lease.data,
          }
        : null,
    };
  }

  async messageState(threadId: string, messageId: string) {
    const graph = await this.#graph(threadId);
    const message = graph.messages.get(messageId);
    if (!message) throw notFound(`thread ${threadId} has no message ${messageId}`);
    const branch = branchOf(message, graph);
    const stateOf = async (id: string): Promise<JsonObject> =>
      (await stateAsOf(this.#store, this.#schema, {
        branchId: branch.id,
        messageId: id,
      })) as JsonObject;
    const state = await stateOf(message.id);
    const parentState =
      message.parentId === null
        ? (this.#schema.initial('thread') as JsonObject)
        : await stateOf(message.parentId);
    return {
      message: {
        id: message.id,
        role: message.role,
        type: message.type,
        depth: message.depth,
        data: message.data,
        createdAt: message.createdAt,
      },
      branch: branch.name,
      exact: this.#exactState,
      state,
      changes: diffStates(parentState, state),
    };
  }

  async switchBranch(threadId: string, name: string) {
    await this.#thread(threadId);
    const branch = await this.#store.getBranch(threadId, name);
    if (!branch) throw notFound(`thread ${threadId} has no branch ${name}`);
    const active = await this.#store.setActiveBranch(branch.id);
    return { active: active.name };
  }

  /**
   * Memory search: the keyword ranking and, with an embedder, the vector ranking, fused by
   * reciprocal rank; each hit says which rankings found it and at which rank. With
   * `viewerFor` and a thread, only what that thread's viewer may see.
   */
  async search(params: URLSearchParams) {
    const query = (params.get('q') ?? '').trim();
    if (query === '') throw invalid('type some words to search for');
    if (query.length > 500) throw invalid(`the search is ${query.length} characters; at most 500`);
    const mode = params.get('mode') ?? (this.#embedder ? 'hybrid' : 'keyword');
    if (mode !== 'hybrid' && mode !== 'vector' && mode !== 'keyword')
      throw invalid('mode must be hybrid, vector or keyword');
    if (mode !== 'keyword' && !this.#embedder)
      throw invalid(`${mode} search needs an embedder: this inspector searches by keyword only`);
    const threadId = params.get('thread');
    const filter: MemoryFilter = {};
    if (threadId && this.#viewerFor) {
      await this.#thread(threadId);
      filter.viewer = this.#viewerFor(threadId);
    }
    const limit = 12;
    const rankings: Array<{ name: RankingName; items: MemoryHit[] }> = [];
    if (mode !== 'keyword' && this.#embedder) {
      const space = await this.#store.getEmbeddingSpace();
      if (space?.embedderId && space.embedderId !== this.#embedder.id) {
        throw invalid(
          `the store's vectors were made by ${space.embedderId}, not ${this.#embedder.id}: search by keyword`,
        );
      }
      const [vector] = await embedChecked(this.#embedder, [query]);
      rankings.push({
        name: 'vector',
        items: await this.#store.searchMemories({ vector: vector!, filter, limit }),
      });
    }
    if (mode !== 'vector') {
      rankings.push({
        name: 'keyword',
        items: await this.#store.searchMemories({ text: query, filter, limit }),
      });
    }
    const fused = reciprocalRankFusion(rankings, (h) => h.memory.id).slice(0, limit);
    const scoreIn = (name: RankingName, id: string) =>
      rankings.find((r) => r.name === name)?.items.find((h) => h.memory.id === id)?.score ?? null;
    return {
      query,
      mode,
      viewer: filter.viewer ?? null,
      hits: fused.map(({ item: { memory: m }, score, sources, ranks }) => ({
        id: m.id,
        type: m.type,
        scope: m.scope,
        roomId: m.roomId,
        title: typeof m.metadata.title === 'string' ? m.metadata.title : null,
        source: sourceOf(m.metadata),
        text: clip(m.content.text, 320),
        score,
        sources,
        ranks,
        similarity: scoreIn('vector', m.id),
        keywordScore: scoreIn('keyword', m.id),
      })),
    };
  }
}

/** A short name for where a memory came from, read from common metadata keys. */
function sourceOf(metadata: JsonObject): string | null {
  for (const key of ['source', 'corpusId', 'upload', 'discoveryId', 'title']) {
    const v = metadata[key];
    if (typeof v === 'string' && v !== '') return v;
  }
  return null;
}
