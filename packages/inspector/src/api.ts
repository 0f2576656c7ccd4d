import {
  type Branch,
  CairnError,
  type JsonObject,
  type JsonValue,
  type Message,
  type StateSchema,
  type Thread,
  type Viewer,
} from '@cairn/core';
import { type Embedder, embedChecked, hybridFusion, type RecallHit } from '@cairn/memory';
import type { MemoryFilter, MemoryHit, Store } from '@cairn/store';
import { forkBranchName, messageText, runKey, stateAsOf } from '@cairn/thread';
import { diffStates, REPLACE_EVERY_FIELD } from './state-view.js';

export interface ApiOptions {
  store: Store;
  schema?: StateSchema | undefined;
  embedder?: Embedder | undefined;
  viewerFor?: ((threadId: string) => Viewer) | undefined;
}

const notFound = (what: string) => new CairnError('NOT_FOUND', what);
const invalid = (what: string) => new CairnError('INVALID_ARGUMENT', what);
const show = JSON.stringify;

/** Messages drawn per branch unless the page asks for more, and the most it may ask for. */
const WINDOW = 50;
const MAX_WINDOW = 5000;
/** A title search reads pages of this many threads, and at most this many per request. */
const SEARCH_PAGE = 200;
const SEARCH_SCAN = 20_000;

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** Titles and message texts are clipped at this many characters: the page polls them. */
const TEXT_CLIP = 400;
const clipTitle = (title: string | null) => (title === null ? null : clip(title, TEXT_CLIP));

function intParam(params: URLSearchParams, name: string, fallback: number, max: number): number {
  const raw = params.get(name);
  if (raw === null || raw === '') return fallback;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < 1 || n > max)
    throw invalid(`${name} must be a whole number from 1 to ${max}, got ${show(raw)}`);
  return n;
}

function stringField(body: JsonObject, name: string): string | undefined {
  const v = body[name];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw invalid(`${name} must be a string`);
  return v;
}

/** The part of a branch drawn: its chain's last messages, root first. */
interface Window {
  branch: Branch;
  messages: Message[];
  /** depth → message, for the depths in the window. */
  byDepth: Map<number, Message>;
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

  /**
   * A page of threads, newest first, optionally of one resource. With `q`, the threads
   * whose title or id contains it (any case): the Store contract lists threads but does
   * not search titles, so the pages are read here, at most `SEARCH_SCAN` threads per
   * request; `nextCursor` continues the search where it stopped.
   */
  async threads(params: URLSearchParams) {
    const resourceId = params.get('resourceId') || undefined;
    let cursor = params.get('cursor') || null;
    const q = (params.get('q') ?? '').trim().toLowerCase();
    if (q.length > 200) throw invalid(`the title search is ${q.length} characters; at most 200`);
    const found: Thread[] = [];
    let scanned = 0;
    do {
      const page = await this.#store.listThreads({
        resourceId,
        cursor,
        limit: q ? SEARCH_PAGE : 100,
      });
      scanned += page.items.length;
      cursor = page.nextCursor;
      found.push(
        ...(q
          ? page.items.filter(
              (t) => t.id.toLowerCase().includes(q) || t.title?.toLowerCase().includes(q),
            )
          : page.items),
      );
    } while (q && cursor !== null && found.length < 50 && scanned < SEARCH_SCAN);
    return {
      items: found.map((t) => ({
        id: t.id,
        title: clipTitle(t.title),
        resourceId: t.resourceId,
        createdAt: t.createdAt,
        updatedAt: t.updatedAt,
      })),
      nextCursor: cursor,
      scanned,
    };
  }

  async #thread(threadId: string): Promise<Thread> {
    const thread = await this.#store.getThread(threadId);
    if (!thread) throw notFound(`no thread ${show(threadId)}`);
    return thread;
  }

  async #branch(threadId: string, name: string): Promise<Branch> {
    const branch = await this.#store.getBranch(threadId, name);
    if (!branch) throw notFound(`thread ${show(threadId)} has no branch ${show(name)}`);
    return branch;
  }

  /** Whether `m` is on the chain ending at `headId`: its ancestor at `m.depth` is `m`. */
  async #onChain(headId: string | null, m: Message): Promise<boolean> {
    if (headId === null) return false;
    if (headId === m.id) return true;
    const [at] = await this.#store.getChain(headId, { limit: 1, beforeDepth: m.depth + 1 });
    return at?.id === m.id;
  }

  /** The message, which must belong to the thread and lie on one of its branches. */
  async #located(threadId: string, messageId: string): Promise<{ m: Message; branch: Branch }> {
    await this.#thread(threadId);
    const m = await this.#store.getMessage(messageId);
    if (!m || m.threadId !== threadId)
      throw notFound(`thread ${show(threadId)} has no message ${show(messageId)}`);
    for (const branch of await this.#store.listBranches(threadId)) {
      if (await this.#onChain(branch.headMessageId, m)) return { m, branch };
    }
    throw notFound(`message ${show(messageId)} is on no branch`);
  }

  /**
   * The deepest depth of `w`'s window whose message is also on `a`'s chain (-1: none).
   * A chain's membership is closed under ancestors, so this is a binary search; depths
   * both windows hold are compared without a query.
   */
  async #commonDepth(a: Window, w: Window): Promise<number> {
    const on = async (m: Message): Promise<boolean> => {
      const there = a.byDepth.get(m.depth);
      if (there) return there.id === m.id;
      const headDepth = a.messages.at(-1)?.depth ?? -1;
      return m.depth <= headDepth && (await this.#onChain(a.branch.headMessageId, m));
    };
    let lo = 0;
    let hi = w.messages.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (await on(w.messages[mid]!)) {
        found = w.messages[mid]!.depth;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  }

  /**
   * A thread for the page: its branches, checkpoints and run, and the last `window`
   * messages of each branch (default 50) with the branches each lies on. A message
   * whose parent is not drawn gets a `folded` count: the earlier messages of its chain.
   */
  async thread(threadId: string, params: URLSearchParams) {
    const thread = await this.#thread(threadId);
    const limit = intParam(params, 'window', WINDOW, MAX_WINDOW);
    const branches = await this.#store.listBranches(threadId);
    const windows: Window[] = [];
    for (const branch of branches) {
      const messages = branch.headMessageId
        ? await this.#store.getChain(branch.headMessageId, { limit })
        : [];
      windows.push({ branch, messages, byDepth: new Map(messages.map((m) => [m.depth, m])) });
    }
    // Each message once, with the first window that holds it.
    const home = new Map<string, { m: Message; w: Window }>();
    for (const w of windows)
      for (const m of w.messages) if (!home.has(m.id)) home.set(m.id, { m, w });
    const common = new Map<string, number>();
    const commonDepth = async (a: Window, w: Window) => {
      const key = `${a.branch.id} ${w.branch.id}`;
      if (!common.has(key)) common.set(key, await this.#commonDepth(a, w));
      return common.get(key)!;
    };
    const checkpoints = await this.#store.listCheckpoints(threadId);
    const nodes = [];
    for (const { m, w } of [...home.values()].sort(
      (a, b) =>
        a.m.depth - b.m.depth || a.m.createdAt - b.m.createdAt || (a.m.id < b.m.id ? -1 : 1),
    )) {
      const onBranches: string[] = [];
      for (const a of windows) {
        if (a === w || (await commonDepth(a, w)) >= m.depth) onBranches.push(a.branch.name);
      }
      nodes.push({
        id: m.id,
        parentId: m.parentId,
        role: m.role,
        type: m.type,
        depth: m.depth,
        createdAt: m.createdAt,
        text: clip(messageText(m.data), TEXT_CLIP),
        branch: onBranches[0]!,
        onBranches,
        checkpoints: checkpoints.filter((c) => c.messageId === m.id).map((c) => c.name),
        folded: m.parentId !== null && !home.has(m.parentId) ? m.depth : 0,
      });
    }
    const lease = await this.#store.getLease(runKey(threadId));
    return {
      thread: { ...thread, title: clipTitle(thread.title) },
      window: limit,
      branches: windows.map(({ branch: b, messages }) => ({
        id: b.id,
        name: b.name,
        isActive: b.isActive,
        headMessageId: b.headMessageId,
        forkMessageId: b.forkMessageId,
        parent: branches.find((p) => p.id === b.parentBranchId)?.name ?? null,
        length: (messages.at(-1)?.depth ?? -1) + 1,
      })),
      checkpoints: checkpoints.map((c) => ({ ...c, drawn: home.has(c.messageId) })),
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

  /** The state as of a message (read on the first branch that holds it) and its diff from the parent's. */
  async messageState(threadId: string, messageId: string) {
    const { m, branch } = await this.#located(threadId, messageId);
    const state = await this.#stateAt(branch, m.id);
    const parentState = await this.#stateAt(branch, m.parentId);
    return {
      message: {
        id: m.id,
        role: m.role,
        type: m.type,
        depth: m.depth,
        data: m.data,
        createdAt: m.createdAt,
      },
      branch: branch.name,
      exact: this.#exactState,
      state,
      changes: diffStates(parentState, state),
    };
  }

  async #stateAt(branch: Branch, messageId: string | null): Promise<JsonObject> {
    if (messageId === null) return this.#schema.initial('thread') as JsonObject;
    return (await stateAsOf(this.#store, this.#schema, {
      branchId: branch.id,
      messageId,
    })) as JsonObject;
  }

  /** Two branches' current states side by side, and the fields that differ. */
  async compare(threadId: string, params: URLSearchParams) {
    await this.#thread(threadId);
    const side = async (name: string | null, which: string) => {
      if (!name)
        throw invalid(`name the branches to compare: ?a=<branch>&b=<branch> (${which} missing)`);
      const b = await this.#branch(threadId, name);
      return {
        name: b.name,
        headMessageId: b.headMessageId,
        state: await this.#stateAt(b, b.headMessageId),
      };
    };
    const a = await side(params.get('a'), 'a');
    const b = await side(params.get('b'), 'b');
    return { exact: this.#exactState, a, b, changes: diffStates(a.state, b.state) };
  }

  async switchBranch(threadId: string, name: string) {
    await this.#thread(threadId);
    const active = await this.#store.setActiveBranch((await this.#branch(threadId, name)).id);
    return { active: active.name };
  }

  /**
   * A new branch whose head is the message ("rewind here"), made from the first branch
   * that holds it; named by the engine's rule (`main-v2`, ...) unless a name is given.
   * No state is written: the branch reads its parent's state as of the message until it
   * gets commits of its own, as the engine does for a branch without commits.
   */
  async fork(threadId: string, body: JsonObject) {
    const messageId = stringField(body, 'messageId');
    if (!messageId) throw invalid('name the message to fork at: { "messageId": ... }');
    const { m, branch: from } = await this.#located(threadId, messageId);
    const taken = (await this.#store.listBranches(threadId)).map((b) => b.name);
    const name = stringField(body, 'name') ?? forkBranchName(from.name, taken);
    const created = await this.#store.createBranch({
      threadId,
      name,
      headMessageId: m.id,
      parentBranchId: from.id,
      activate: body.activate === true,
    });
    return { branch: { id: created.id, name: created.name, isActive: created.isActive } };
  }

  /** Sets (or moves) a named checkpoint on a message of the thread. */
  async checkpoint(threadId: string, body: JsonObject) {
    const messageId = stringField(body, 'messageId');
    const name = stringField(body, 'name');
    if (!messageId || !name)
      throw invalid('name the checkpoint and its message: { "name": ..., "messageId": ... }');
    await this.#located(threadId, messageId);
    const saved = await this.#store.saveCheckpoint({ threadId, name, messageId });
    return { checkpoint: { name: saved.name, messageId: saved.messageId } };
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
    let vector: number[] | null = null;
    let vectorHits: MemoryHit[] = [];
    let keywordHits: MemoryHit[] = [];
    if (mode !== 'keyword' && this.#embedder) {
      const space = await this.#store.getEmbeddingSpace();
      if (space?.embedderId && space.embedderId !== this.#embedder.id) {
        throw invalid(
          `the store's vectors were made by ${space.embedderId}, not ${this.#embedder.id}: search by keyword`,
        );
      }
      [vector] = (await embedChecked(this.#embedder, [query])) as [number[]];
      vectorHits = await this.#store.searchMemories({ vector, filter, limit });
    }
    if (mode !== 'vector')
      keywordHits = await this.#store.searchMemories({ text: query, filter, limit });
    // Ranked as `recall` ranks: hybrid by its fusion, a single search by its own score.
    const hits: RecallHit[] =
      mode === 'hybrid'
        ? hybridFusion(vectorHits, keywordHits, vector).slice(0, limit)
        : (mode === 'vector' ? vectorHits : keywordHits).map((h, i) => ({
            memory: h.memory,
            score: h.score,
            sources: [mode],
            ranks: { [mode]: i + 1 },
            similarity: mode === 'vector' ? h.score : null,
            keywordScore: mode === 'keyword' ? h.score : null,
          }));
    return {
      query,
      mode,
      viewer: filter.viewer ?? null,
      hits: hits.map(({ memory: m, score, sources, ranks, similarity, keywordScore }) => ({
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
        similarity,
        keywordScore,
        // The messages it was learned from, and its place among the versions of its fact.
        provenance: m.source,
        validFrom: m.validFrom,
        validTo: m.validTo,
        supersededAt: m.supersededAt,
      })),
    };
  }
}

/** A short name for where a memory came from, read from common metadata keys. */
function sourceOf(metadata: JsonObject): string | null {
  for (const key of ['source', 'corpusId', 'upload', 'discoveryId', 'title']) {
    const v: JsonValue | undefined = metadata[key];
    if (typeof v === 'string' && v !== '') return v;
  }
  return null;
}
