import {
  type Branch,
  CairnError,
  type Checkpoint,
  type JsonObject,
  type Lease,
  type Memory,
  type Message,
  type StateCommit,
  type Thread,
  type Turn,
} from '@cairn/core';
import { ChangeEmitter } from './emitter.js';
import { AsyncLock } from './lock.js';
import { cosineSimilarity, keywordTokens, matchesMemoryFilter } from './memory-search.js';
import type {
  AcquiredLease,
  AcquireLeaseInput,
  ChainOptions,
  EmbeddingSpace,
  LatestCommitQuery,
  ListMemoriesOptions,
  ListThreadsOptions,
  MemoryFilter,
  MemoryHit,
  MemoryPatch,
  MemorySearch,
  NewBranch,
  NewCheckpoint,
  NewMemory,
  NewMessage,
  NewStateCommit,
  NewThread,
  Page,
  StateCommitRange,
  Store,
  StoreChange,
  StoreListener,
  ThreadPatch,
} from './store.js';
import {
  checkId,
  checkLeaseData,
  checkLeaseInput,
  checkLimit,
  checkMemoryFilter,
  checkMemoryPatch,
  checkMemorySearch,
  checkName,
  checkNewBranch,
  checkNewCheckpoint,
  checkNewThread,
  checkStateCommit,
  checkThreadPatch,
  checkTtl,
  checkTurn,
  checkVectorWidth,
  decodeCursor,
  encodeCursor,
  messageBatchLookups,
  normalizeNewMemories,
  normalizeNewMessages,
  planLeaseAcquire,
  planLeaseRelease,
  planLeaseRenew,
  planMessageBatch,
  resolveEmbeddingSpace,
} from './validate.js';

export interface MemoryStoreOptions {
  /** The clock for timestamps and lease expiry; `Date.now` by default. */
  now?: () => number;
}

interface Data {
  seq: number;
  threads: Map<string, Thread & { seq: number }>;
  messages: Map<string, Message>;
  branches: Map<string, Branch>;
  checkpoints: Map<string, Checkpoint & { seq: number }>;
  commits: Map<string, StateCommit[]>;
  turns: Map<string, Turn>;
  leases: Map<string, Lease>;
  memories: Map<string, Memory & { seq: number }>;
  space: EmbeddingSpace | null;
  embeddingCache: Map<string, number[]>;
}

const emptyData = (): Data => ({
  seq: 0,
  threads: new Map(),
  messages: new Map(),
  branches: new Map(),
  checkpoints: new Map(),
  commits: new Map(),
  turns: new Map(),
  leases: new Map(),
  memories: new Map(),
  space: null,
  embeddingCache: new Map(),
});

const copy = <T>(value: T): T => structuredClone(value);
const notFound = (what: string, id: string) =>
  new CairnError('NOT_FOUND', `${what} ${JSON.stringify(id)} not found`, { details: { id } });

function stripSeq<T extends { seq: number }>(row: T): Omit<T, 'seq'> {
  const { seq: _seq, ...rest } = row;
  return copy(rest);
}

const BM25_K1 = 1.2;
const BM25_B = 0.75;

/**
 * The operations on the data, synchronous. Every public call runs one of these under
 * the store's lock; a transaction runs several, restoring a copy of the data on error.
 */
class Operations {
  data: Data = emptyData();
  pending: StoreChange[] = [];
  constructor(readonly now: () => number) {}

  #thread(id: string): Thread & { seq: number } {
    const t = this.data.threads.get(id);
    if (!t) throw notFound('thread', id);
    return t;
  }
  #branch(id: string): Branch {
    const b = this.data.branches.get(id);
    if (!b) throw notFound('branch', id);
    return b;
  }
  #message(id: string): Message {
    const m = this.data.messages.get(id);
    if (!m) throw notFound('message', id);
    return m;
  }
  #touch(threadId: string, kind: StoreChange['kind'], branchId?: string) {
    this.pending.push(branchId === undefined ? { threadId, kind } : { threadId, kind, branchId });
  }

  createThread(input: NewThread): Thread {
    const t = checkNewThread(input, this.now());
    if (this.data.threads.has(t.id)) {
      throw new CairnError('CONFLICT', `thread ${JSON.stringify(t.id)} already exists`, {
        details: { id: t.id },
      });
    }
    this.data.threads.set(t.id, { ...copy(t), seq: ++this.data.seq });
    this.#touch(t.id, 'thread');
    return t;
  }
  getThread(id: string): Thread | null {
    const t = this.data.threads.get(checkId(id, 'thread id'));
    return t ? stripSeq(t) : null;
  }
  updateThread(id: string, patch: ThreadPatch): Thread {
    const p = checkThreadPatch(patch);
    const t = this.#thread(checkId(id, 'thread id'));
    if (p.title !== undefined) t.title = p.title;
    if (p.metadata !== undefined) t.metadata = copy(p.metadata);
    t.updatedAt = this.now();
    this.#touch(t.id, 'thread');
    return stripSeq(t);
  }
  listThreads(options: ListThreadsOptions = {}): Page<Thread> {
    const limit = checkLimit(options.limit, 'limit', 50, 1000);
    const after =
      options.cursor == null ? Number.POSITIVE_INFINITY : Number(decodeCursor(options.cursor)[0]);
    const rows = [...this.data.threads.values()]
      .filter(
        (t) =>
          (options.resourceId === undefined || t.resourceId === options.resourceId) &&
          t.seq < after,
      )
      .sort((a, b) => b.seq - a.seq);
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    return {
      items: items.map(stripSeq),
      nextCursor: rows.length > limit && last ? encodeCursor([last.seq]) : null,
    };
  }
  deleteThread(id: string): boolean {
    checkId(id, 'thread id');
    if (!this.data.threads.delete(id)) return false;
    const d = this.data;
    for (const [k, m] of d.messages) if (m.threadId === id) d.messages.delete(k);
    for (const [k, b] of d.branches) {
      if (b.threadId === id) {
        d.branches.delete(k);
        d.commits.delete(k);
      }
    }
    for (const [k, c] of d.checkpoints) if (c.threadId === id) d.checkpoints.delete(k);
    for (const [k, t] of d.turns) if (t.threadId === id) d.turns.delete(k);
    this.#touch(id, 'thread');
    return true;
  }

  addMessages(batch: NewMessage[]): Message[] {
    const drafts = normalizeNewMessages(batch, this.now());
    const lookups = messageBatchLookups(drafts);
    const messages = new Map<string, { threadId: string; depth: number }>();
    for (const id of lookups.messageIds) {
      const m = this.data.messages.get(id);
      if (m) messages.set(id, m);
    }
    const threadIds = new Set(lookups.threadIds.filter((id) => this.data.threads.has(id)));
    const planned = planMessageBatch(drafts, { threadIds, messages });
    for (const m of planned) this.data.messages.set(m.id, copy(m));
    for (const threadId of new Set(planned.map((m) => m.threadId)))
      this.#touch(threadId, 'messages');
    return planned;
  }
  getMessage(id: string): Message | null {
    const m = this.data.messages.get(checkId(id, 'message id'));
    return m ? copy(m) : null;
  }
  getChain(headId: string, options: ChainOptions = {}): Message[] {
    const limit = checkLimit(
      options.limit,
      'limit',
      Number.MAX_SAFE_INTEGER,
      Number.MAX_SAFE_INTEGER,
    );
    if (
      options.beforeDepth !== undefined &&
      (!Number.isInteger(options.beforeDepth) || options.beforeDepth < 0)
    ) {
      throw new CairnError(
        'INVALID_ARGUMENT',
        `beforeDepth must be an integer >= 0, got ${options.beforeDepth}`,
      );
    }
    let m: Message | undefined = this.#message(checkId(headId, 'head id'));
    while (m && options.beforeDepth !== undefined && m.depth >= options.beforeDepth) {
      m = m.parentId === null ? undefined : this.data.messages.get(m.parentId);
    }
    const out: Message[] = [];
    while (m && out.length < limit) {
      out.push(copy(m));
      m = m.parentId === null ? undefined : this.data.messages.get(m.parentId);
    }
    return out.reverse();
  }

  createBranch(input: NewBranch): Branch {
    const b = checkNewBranch(input, this.now());
    this.#thread(b.threadId);
    if (this.data.branches.has(b.id))
      throw new CairnError('CONFLICT', `branch id ${JSON.stringify(b.id)} already exists`);
    if (b.headMessageId !== null) {
      const head = this.#message(b.headMessageId);
      if (head.threadId !== b.threadId)
        throw new CairnError(
          'INVALID_ARGUMENT',
          `head message ${JSON.stringify(b.headMessageId)} belongs to another thread`,
        );
    }
    if (
      b.parentBranchId !== null &&
      this.data.branches.get(b.parentBranchId)?.threadId !== b.threadId
    ) {
      throw notFound('parent branch', b.parentBranchId);
    }
    const siblings = [...this.data.branches.values()].filter((x) => x.threadId === b.threadId);
    if (siblings.some((x) => x.name === b.name)) {
      throw new CairnError(
        'CONFLICT',
        `branch ${JSON.stringify(b.name)} already exists in this thread`,
        { details: { name: b.name } },
      );
    }
    const activate = b.activate || siblings.length === 0;
    if (activate) for (const s of siblings) s.isActive = false;
    const { activate: _a, ...rest } = b;
    const branch: Branch = { ...rest, isActive: activate, seq: ++this.data.seq };
    this.data.branches.set(branch.id, branch);
    this.#touch(branch.threadId, 'branch', branch.id);
    return copy(branch);
  }
  getBranch(threadId: string, name: string): Branch | null {
    checkId(threadId, 'threadId');
    checkName(name, 'branch name');
    for (const b of this.data.branches.values())
      if (b.threadId === threadId && b.name === name) return copy(b);
    return null;
  }
  getBranchById(id: string): Branch | null {
    const b = this.data.branches.get(checkId(id, 'branch id'));
    return b ? copy(b) : null;
  }
  listBranches(threadId: string): Branch[] {
    checkId(threadId, 'threadId');
    return [...this.data.branches.values()]
      .filter((b) => b.threadId === threadId)
      .sort((a, b) => a.seq - b.seq)
      .map(copy);
  }
  getActiveBranch(threadId: string): Branch | null {
    checkId(threadId, 'threadId');
    for (const b of this.data.branches.values())
      if (b.threadId === threadId && b.isActive) return copy(b);
    return null;
  }
  setActiveBranch(branchId: string): Branch {
    const b = this.#branch(checkId(branchId, 'branch id'));
    for (const x of this.data.branches.values())
      if (x.threadId === b.threadId) x.isActive = x === b;
    this.#touch(b.threadId, 'branch', b.id);
    return copy(b);
  }
  moveHead(branchId: string, expectedHeadId: string | null, newHeadId: string): Branch {
    const b = this.#branch(checkId(branchId, 'branch id'));
    if (expectedHeadId !== null) checkId(expectedHeadId, 'expectedHeadId');
    const head = this.#message(checkId(newHeadId, 'new head id'));
    if (head.threadId !== b.threadId)
      throw new CairnError(
        'INVALID_ARGUMENT',
        `message ${JSON.stringify(newHeadId)} belongs to another thread`,
      );
    if (b.headMessageId !== expectedHeadId) {
      throw new CairnError(
        'CONFLICT',
        `branch ${JSON.stringify(b.name)} head is ${JSON.stringify(b.headMessageId)}, not ${JSON.stringify(expectedHeadId)}`,
        {
          details: { branchId: b.id, headMessageId: b.headMessageId },
        },
      );
    }
    b.headMessageId = newHeadId;
    this.#touch(b.threadId, 'branch', b.id);
    return copy(b);
  }

  saveCheckpoint(input: NewCheckpoint): Checkpoint {
    const c = checkNewCheckpoint(input, this.now());
    this.#thread(c.threadId);
    const m = this.#message(c.messageId);
    if (m.threadId !== c.threadId)
      throw new CairnError(
        'INVALID_ARGUMENT',
        `message ${JSON.stringify(c.messageId)} belongs to another thread`,
      );
    for (const existing of this.data.checkpoints.values()) {
      if (existing.threadId === c.threadId && existing.name === c.name) {
        existing.messageId = c.messageId;
        this.#touch(c.threadId, 'checkpoint');
        return stripSeq(existing);
      }
    }
    this.data.checkpoints.set(c.id, { ...c, seq: ++this.data.seq });
    this.#touch(c.threadId, 'checkpoint');
    return copy(c);
  }
  getCheckpoint(threadId: string, name: string): Checkpoint | null {
    checkId(threadId, 'threadId');
    checkName(name, 'checkpoint name');
    for (const c of this.data.checkpoints.values())
      if (c.threadId === threadId && c.name === name) return stripSeq(c);
    return null;
  }
  listCheckpoints(threadId: string): Checkpoint[] {
    checkId(threadId, 'threadId');
    return [...this.data.checkpoints.values()]
      .filter((c) => c.threadId === threadId)
      .sort((a, b) => a.seq - b.seq)
      .map(stripSeq);
  }
  deleteCheckpoint(threadId: string, name: string): boolean {
    checkId(threadId, 'threadId');
    checkName(name, 'checkpoint name');
    for (const [k, c] of this.data.checkpoints) {
      if (c.threadId === threadId && c.name === name) {
        this.data.checkpoints.delete(k);
        this.#touch(threadId, 'checkpoint');
        return true;
      }
    }
    return false;
  }

  appendStateCommit(input: NewStateCommit, expectedVersion: number): StateCommit {
    const c = checkStateCommit(input, expectedVersion);
    const b = this.#branch(c.branchId);
    const depth = c.messageId === null ? null : this.#message(c.messageId).depth;
    if (c.messageId !== null && this.data.messages.get(c.messageId)!.threadId !== b.threadId) {
      throw new CairnError(
        'INVALID_ARGUMENT',
        `message ${JSON.stringify(c.messageId)} belongs to another thread`,
      );
    }
    const list = this.data.commits.get(b.id) ?? [];
    const latest = list.length;
    if (latest !== expectedVersion) {
      throw new CairnError(
        'CONFLICT',
        `branch ${JSON.stringify(b.name)} is at state version ${latest}, not ${expectedVersion}`,
        {
          details: { branchId: b.id, version: latest },
        },
      );
    }
    const commit: StateCommit = {
      branchId: b.id,
      threadId: b.threadId,
      version: latest + 1,
      messageId: c.messageId,
      messageDepth: depth,
      update: copy(c.update),
      snapshot: c.snapshot === null ? null : copy(c.snapshot),
      createdAt: this.now(),
    };
    list.push(commit);
    this.data.commits.set(b.id, list);
    this.#touch(b.threadId, 'state', b.id);
    return copy(commit);
  }
  getStateCommits(branchId: string, range: StateCommitRange = {}): StateCommit[] {
    checkId(branchId, 'branch id');
    const from = range.fromVersion ?? 1;
    const to = range.toVersion ?? Number.MAX_SAFE_INTEGER;
    for (const [label, v] of [
      ['fromVersion', from],
      ['toVersion', to],
    ] as const) {
      if (!Number.isInteger(v) || v < 0)
        throw new CairnError('INVALID_ARGUMENT', `${label} must be an integer >= 0, got ${v}`);
    }
    this.#branch(branchId);
    return (this.data.commits.get(branchId) ?? [])
      .filter((c) => c.version >= from && c.version <= to)
      .map(copy);
  }
  getLatestStateCommit(branchId: string, query: LatestCommitQuery = {}): StateCommit | null {
    checkId(branchId, 'branch id');
    for (const label of ['maxVersion', 'maxMessageDepth'] as const) {
      const v = query[label];
      if (v !== undefined && !Number.isInteger(v))
        throw new CairnError('INVALID_ARGUMENT', `${label} must be an integer, got ${v}`);
    }
    this.#branch(branchId);
    const list = this.data.commits.get(branchId) ?? [];
    for (let i = list.length - 1; i >= 0; i--) {
      const c = list[i]!;
      if (query.maxVersion !== undefined && c.version > query.maxVersion) continue;
      if (query.withSnapshot && c.snapshot === null) continue;
      if (query.maxMessageDepth !== undefined && (c.messageDepth ?? -1) > query.maxMessageDepth)
        continue;
      return copy(c);
    }
    return null;
  }

  putTurn(turn: Turn): Turn {
    const t = checkTurn(turn);
    this.#thread(t.threadId);
    this.data.turns.set(t.id, copy(t));
    return copy(t);
  }
  getTurn(id: string): Turn | null {
    const t = this.data.turns.get(checkId(id, 'turn id'));
    return t ? copy(t) : null;
  }
  listTurns(threadId: string, options: { limit?: number } = {}): Turn[] {
    checkId(threadId, 'threadId');
    const limit = checkLimit(options.limit, 'limit', 100, 10_000);
    return [...this.data.turns.values()]
      .filter((t) => t.threadId === threadId)
      .sort((a, b) => b.startedAt - a.startedAt || (a.id < b.id ? 1 : -1))
      .slice(0, limit)
      .map(copy);
  }
  deleteTurn(id: string): boolean {
    return this.data.turns.delete(checkId(id, 'turn id'));
  }
  purgeTurns(options: { before: number; threadId?: string }): number {
    if (typeof options?.before !== 'number' || !Number.isFinite(options.before))
      throw new CairnError('INVALID_ARGUMENT', 'purgeTurns needs `before` (a timestamp)');
    if (options.threadId !== undefined) checkId(options.threadId, 'threadId');
    let n = 0;
    for (const [k, t] of this.data.turns) {
      if (t.status === 'running' || t.startedAt >= options.before) continue;
      if (options.threadId !== undefined && t.threadId !== options.threadId) continue;
      this.data.turns.delete(k);
      n++;
    }
    return n;
  }

  acquireLease(input: AcquireLeaseInput): AcquiredLease {
    const checked = checkLeaseInput(input);
    const result = planLeaseAcquire(this.data.leases.get(checked.key) ?? null, checked, this.now());
    this.data.leases.set(checked.key, copy(result.lease));
    return copy(result);
  }
  renewLease(key: string, owner: string, ttlMs: number, data?: JsonObject): Lease {
    checkName(key, 'lease key');
    checkName(owner, 'lease owner');
    const lease = planLeaseRenew(
      this.data.leases.get(key) ?? null,
      key,
      owner,
      checkTtl(ttlMs),
      checkLeaseData(data),
      this.now(),
    );
    this.data.leases.set(key, copy(lease));
    return lease;
  }
  releaseLease(key: string, owner: string, data?: JsonObject): Lease {
    checkName(key, 'lease key');
    checkName(owner, 'lease owner');
    const lease = planLeaseRelease(
      this.data.leases.get(key) ?? null,
      key,
      owner,
      checkLeaseData(data),
      this.now(),
    );
    this.data.leases.set(key, copy(lease));
    return lease;
  }
  getLease(key: string): Lease | null {
    const l = this.data.leases.get(checkName(key, 'lease key'));
    return l ? copy(l) : null;
  }

  addMemories(batch: NewMemory[]): Memory[] {
    const memories = normalizeNewMemories(batch, this.now());
    const seen = new Set<string>();
    for (const m of memories) {
      if (this.data.memories.has(m.id) || seen.has(m.id))
        throw new CairnError('CONFLICT', `memory id ${JSON.stringify(m.id)} is already used`);
      seen.add(m.id);
      if (m.embedding) checkVectorWidth(this.data.space, m.embedding, `memory ${m.id} embedding`);
    }
    const first = memories.find((m) => m.embedding);
    if (first && !this.data.space)
      this.data.space = { embedderId: null, dimensions: first.embedding!.length };
    for (const m of memories) this.data.memories.set(m.id, { ...copy(m), seq: ++this.data.seq });
    return memories;
  }
  getMemory(id: string): Memory | null {
    const m = this.data.memories.get(checkId(id, 'memory id'));
    return m ? stripSeq(m) : null;
  }
  updateMemory(id: string, patch: MemoryPatch): Memory {
    const p = checkMemoryPatch(patch);
    const m = this.data.memories.get(checkId(id, 'memory id'));
    if (!m) throw notFound('memory', id);
    if (p.embedding) {
      checkVectorWidth(this.data.space, p.embedding, 'embedding');
      this.data.space ??= { embedderId: null, dimensions: p.embedding.length };
    }
    if (p.content !== undefined) m.content = copy(p.content);
    if (p.contentHash !== undefined) m.contentHash = p.contentHash;
    if (p.metadata !== undefined) m.metadata = copy(p.metadata);
    if (p.embedding !== undefined) m.embedding = p.embedding === null ? null : [...p.embedding];
    return stripSeq(m);
  }
  deleteMemories(ids: string[]): number {
    if (!Array.isArray(ids))
      throw new CairnError('INVALID_ARGUMENT', 'deleteMemories expects an array of ids');
    let n = 0;
    for (const id of ids) if (this.data.memories.delete(checkId(id, 'memory id'))) n++;
    return n;
  }
  #admitted(filter: MemoryFilter | undefined): Array<Memory & { seq: number }> {
    const f = checkMemoryFilter(filter);
    return [...this.data.memories.values()].filter((m) => matchesMemoryFilter(m, f));
  }
  listMemories(filter?: MemoryFilter, options: ListMemoriesOptions = {}): Memory[] {
    const limit = checkLimit(options.limit, 'limit', 100, 10_000);
    const order = options.order ?? 'newest';
    if (order !== 'newest' && order !== 'oldest')
      throw new CairnError(
        'INVALID_ARGUMENT',
        `order must be newest or oldest, got ${JSON.stringify(order)}`,
      );
    const sign = order === 'oldest' ? 1 : -1;
    return this.#admitted(filter)
      .sort((a, b) => sign * (a.createdAt - b.createdAt || a.seq - b.seq))
      .slice(0, limit)
      .map(stripSeq);
  }
  countMemories(filter?: MemoryFilter): number {
    return this.#admitted(filter).length;
  }
  searchMemories(search: MemorySearch): MemoryHit[] {
    const s = checkMemorySearch(search);
    const admitted = this.#admitted(s.filter);
    let hits: Array<{ m: Memory & { seq: number }; score: number }>;
    if (s.vector) {
      checkVectorWidth(this.data.space, s.vector, 'query vector');
      hits = admitted
        .filter((m) => m.embedding)
        .map((m) => ({ m, score: cosineSimilarity(s.vector!, m.embedding!) }))
        .filter((h) => s.threshold === undefined || h.score >= s.threshold);
    } else {
      hits = this.#bm25(keywordTokens(s.text!), admitted);
    }
    return hits
      .sort((a, b) => b.score - a.score || a.m.seq - b.m.seq)
      .slice(0, s.limit)
      .map((h) => ({ memory: stripSeq(h.m), score: h.score }));
  }
  /** BM25 with collection statistics over every stored memory (as FTS5 computes them). */
  #bm25(terms: string[], admitted: Array<Memory & { seq: number }>) {
    const unique = [...new Set(terms)];
    if (unique.length === 0) return [];
    const all = [...this.data.memories.values()].map((m) => keywordTokens(m.content.text));
    const n = all.length;
    const avgdl = all.reduce((s, t) => s + t.length, 0) / Math.max(1, n);
    const df = new Map(unique.map((t) => [t, all.filter((toks) => toks.includes(t)).length]));
    const out: Array<{ m: Memory & { seq: number }; score: number }> = [];
    for (const m of admitted) {
      const toks = keywordTokens(m.content.text);
      let score = 0;
      for (const t of unique) {
        const tf = toks.filter((x) => x === t).length;
        if (tf === 0) continue;
        const d = df.get(t)!;
        const idf = Math.log(1 + (n - d + 0.5) / (d + 0.5));
        score +=
          (idf * tf * (BM25_K1 + 1)) /
          (tf + BM25_K1 * (1 - BM25_B + (BM25_B * toks.length) / avgdl));
      }
      if (score > 0) out.push({ m, score });
    }
    return out;
  }
  ensureEmbeddingSpace(space: { embedderId: string; dimensions: number }): EmbeddingSpace {
    const r = resolveEmbeddingSpace(this.data.space, space);
    this.data.space = r.space;
    return copy(r.space);
  }
  getEmbeddingSpace(): EmbeddingSpace | null {
    return this.data.space ? copy(this.data.space) : null;
  }
  getCachedEmbeddings(embedderId: string, contentHashes: string[]): Map<string, number[]> {
    checkId(embedderId, 'embedderId');
    const out = new Map<string, number[]>();
    for (const h of contentHashes) {
      const e = this.data.embeddingCache.get(`${embedderId}\u0000${h}`);
      if (e) out.set(h, [...e]);
    }
    return out;
  }
  putCachedEmbeddings(
    embedderId: string,
    entries: Array<{ contentHash: string; embedding: number[] }>,
  ): void {
    checkId(embedderId, 'embedderId');
    if (!Array.isArray(entries))
      throw new CairnError('INVALID_ARGUMENT', 'putCachedEmbeddings expects an array of entries');
    for (const e of entries) {
      checkId(e?.contentHash, 'contentHash');
      const v = e.embedding;
      if (
        !Array.isArray(v) ||
        v.length === 0 ||
        !v.every((x) => typeof x === 'number' && Number.isFinite(x))
      )
        throw new CairnError(
          'INVALID_ARGUMENT',
          `cached embedding of ${JSON.stringify(e.contentHash)} must be a non-empty array of finite numbers`,
        );
      checkVectorWidth(this.data.space, v, 'cached embedding');
    }
    for (const e of entries)
      this.data.embeddingCache.set(`${embedderId}\u0000${e.contentHash}`, [...e.embedding]);
  }
}

type OperationName = Exclude<keyof Operations, 'data' | 'pending' | 'now'>;
const OPERATIONS = Object.getOwnPropertyNames(Operations.prototype).filter(
  (n) => n !== 'constructor',
) as OperationName[];

/**
 * The in-memory reference store: complete and exact (brute-force cosine for vectors,
 * BM25 for keywords), for tests and for trying Cairn out. Data lives as long as the
 * store object.
 *
 * @example
 * ```ts
 * import { createMemoryStore } from '@cairn/store';
 * const store = createMemoryStore();
 * const thread = await store.createThread({ title: 'Soil carbon' });
 * ```
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): Store {
  const ops = new Operations(options.now ?? Date.now);
  const lock = new AsyncLock();
  const emitter = new ChangeEmitter();
  let closed = false;

  const flush = () => {
    const changes = ops.pending;
    ops.pending = [];
    for (const c of changes) emitter.emit(c);
  };
  const guard = () => {
    if (closed) throw new CairnError('CLOSED', 'this store is closed');
  };

  // One facade for direct calls (each under the lock) and one for the calls inside a
  // transaction (already holding it).
  const build = (run: <T>(fn: () => T) => Promise<T>, inTx: boolean): Store => {
    const facade = {} as Record<string, unknown>;
    for (const name of OPERATIONS) {
      const method = (ops[name] as (...args: unknown[]) => unknown).bind(ops);
      facade[name] = (...args: unknown[]) => run(() => method(...args));
    }
    facade.capabilities = capabilities;
    facade.transaction = inTx
      ? <T>(fn: (tx: Store) => Promise<T>) => fn(facade as unknown as Store)
      : <T>(fn: (tx: Store) => Promise<T>) =>
          lock.run(async () => {
            guard();
            const saved = copy(ops.data);
            try {
              const result = await fn(txStore);
              flush();
              return result;
            } catch (e) {
              ops.data = saved;
              ops.pending = [];
              throw e;
            }
          });
    facade.subscribe = (threadId: string, listener: StoreListener) =>
      emitter.subscribe(threadId, listener);
    facade.migrate = async () => guard();
    facade.close = async () => {
      closed = true;
      emitter.clear();
    };
    facade[Symbol.asyncDispose as unknown as string] = facade.close;
    return facade as unknown as Store;
  };

  const capabilities = Object.freeze({
    vectorSearch: 'exact',
    notifications: 'process',
    multiProcess: false,
    durable: false,
  } as const);
  const txStore = build(async (fn) => {
    guard();
    return fn();
  }, true);
  return build(
    (fn) =>
      lock.run(() => {
        guard();
        try {
          return fn();
        } finally {
          flush();
        }
      }),
    false,
  );
}
