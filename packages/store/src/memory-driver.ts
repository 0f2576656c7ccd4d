import {
  AsyncLock,
  type Branch,
  type Checkpoint,
  type Entry,
  type Memory,
  type Message,
  type StateCommit,
  type Thread,
  type Turn,
} from '@cairn/core';
import type {
  DataKeyRow,
  Driver,
  DriverMemoryFilter,
  DriverSession,
  KeywordCandidate,
  MemoryRow,
  MessageBatchLookup,
  MessageJump,
  MessageLink,
  SessionOptions,
  StoredLease,
  ThreadRow,
  ThreadRowCounts,
  Tombstone,
  TombstoneKey,
} from './driver.js';
import type { EncryptionOptions, Tenant } from './encryption.js';
import { createStore } from './front-door.js';
import {
  bm25Scorer,
  branchAnchor,
  cosineSimilarity,
  matchesMemoryFilter,
} from './memory-search.js';
import type { EmbeddingSpace, Store, StoreCapabilities } from './store.js';

export interface MemoryStoreOptions {
  /** The clock for timestamps and lease expiry; `Date.now` by default. */
  now?: () => number;
  /** Seals what tenants wrote with a data key per tenant (see `CreateStoreOptions`). */
  encryption?: EncryptionOptions;
}

/**
 * A deep copy, as a database would hand it back: SQLite and Postgres keep JSON as text,
 * where `-0` is written `0`, so a copy turns `-0` into `0` too.
 */
const copy = <T>(value: T): T => positiveZeros(structuredClone(value));

function positiveZeros<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return Object.is(value, -0) ? (0 as T) : value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = positiveZeros(value[i]);
    return value;
  }
  const o = value as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    const v = o[k];
    if (Object.is(v, -0)) o[k] = 0;
    else if (typeof v === 'object' && v !== null) positiveZeros(v);
  }
  return value;
}

const tombstoneKey = (t: TombstoneKey) => `${t.kind}\u0000${t.key}`;
const tenantKey = (t: Tenant) => `${t.kind}\u0000${t.key}`;
const entryKey = (collection: string, id: string) => JSON.stringify([collection, id]);

type Seq<T> = T & { seq: number };

/** A map whose writes are journaled, so a session or savepoint can undo them. */
class Table<V> {
  readonly rows = new Map<string, V>();
  constructor(readonly journal: Array<() => void>) {}

  get(key: string): V | undefined {
    return this.rows.get(key);
  }
  set(key: string, value: V): void {
    const had = this.rows.has(key);
    const old = this.rows.get(key);
    this.journal.push(() => (had ? this.rows.set(key, old!) : this.rows.delete(key)));
    this.rows.set(key, value);
  }
  delete(key: string): boolean {
    if (!this.rows.has(key)) return false;
    const old = this.rows.get(key)!;
    this.journal.push(() => this.rows.set(key, old));
    return this.rows.delete(key);
  }
  values(): IterableIterator<V> {
    return this.rows.values();
  }
}

const stripSeq = <T extends { seq: number }>(row: T): Omit<T, 'seq'> => {
  const { seq: _seq, ...rest } = row;
  return copy(rest);
};

/** The order of SQL's binary collation: by UTF-8 bytes (code points), not UTF-16 units. */
function binaryOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** The rows whose key is after `after` (all when null), in binary order, at most `limit`. */
function afterKeyPage<T>(
  rows: T[],
  key: (row: T) => string,
  after: string | null,
  limit: number,
): T[] {
  return rows
    .filter((r) => after === null || binaryOrder(key(r), after) > 0)
    .sort((a, b) => binaryOrder(key(a), key(b)))
    .slice(0, limit);
}

/**
 * The in-memory driver: maps in the process, every write journaled so that a failed
 * session or savepoint is undone exactly. Sessions run one at a time.
 */
class MemoryDriver implements Driver, DriverSession {
  readonly capabilities: StoreCapabilities = Object.freeze({
    vectorSearch: 'exact',
    notifications: 'process',
    multiProcess: false,
    concurrentTransactions: false,
    durable: false,
  } as const);
  readonly #lock = new AsyncLock();
  readonly #journal: Array<() => void> = [];
  #seq = 0;
  readonly #threads = new Table<Seq<Thread>>(this.#journal);
  readonly #messages = new Table<Message>(this.#journal);
  readonly #jumps = new Table<MessageJump>(this.#journal);
  readonly #branches = new Table<Branch>(this.#journal);
  readonly #checkpoints = new Table<Seq<Checkpoint>>(this.#journal);
  readonly #commits = new Table<StateCommit[]>(this.#journal);
  readonly #turns = new Table<Turn>(this.#journal);
  readonly #leases = new Table<StoredLease>(this.#journal);
  /** By collection and id (`entryKey`). */
  readonly #entries = new Table<Entry>(this.#journal);
  readonly #memories = new Table<Seq<Memory>>(this.#journal);
  readonly #settings = new Table<EmbeddingSpace>(this.#journal);
  readonly #cache = new Table<number[]>(this.#journal);
  /** By kind and key (`tombstoneKey`). */
  readonly #tombstones = new Table<Tombstone>(this.#journal);
  /** By kind and key (`tenantKey`). */
  readonly #dataKeys = new Table<DataKeyRow>(this.#journal);

  run<T>(fn: (session: DriverSession) => Promise<T>, _options: SessionOptions): Promise<T> {
    return this.#lock.run(async () => {
      try {
        return await fn(this);
      } catch (e) {
        this.#undo(0);
        throw e;
      } finally {
        this.#journal.length = 0;
      }
    });
  }

  async savepoint<T>(fn: () => Promise<T>): Promise<T> {
    const mark = this.#journal.length;
    try {
      return await fn();
    } catch (e) {
      this.#undo(mark);
      throw e;
    }
  }

  #undo(mark: number): void {
    while (this.#journal.length > mark) this.#journal.pop()!();
  }

  async migrate(): Promise<void> {}
  async close(): Promise<void> {}

  // ---------------------------------------------------------------- threads

  insertThread(t: Thread): boolean {
    if (this.#threads.get(t.id)) return false;
    this.#threads.set(t.id, { ...copy(t), seq: ++this.#seq });
    return true;
  }
  getThread(id: string): Thread | null {
    const t = this.#threads.get(id);
    return t ? stripSeq(t) : null;
  }
  updateThread(
    id: string,
    patch: { title?: string | null; metadata?: Thread['metadata'] },
    updatedAt: number,
  ): Thread | null {
    const t = this.#threads.get(id);
    if (!t) return null;
    const next = { ...t, updatedAt };
    if (patch.title !== undefined) next.title = patch.title;
    if (patch.metadata !== undefined) next.metadata = copy(patch.metadata);
    this.#threads.set(id, next);
    return stripSeq(next);
  }
  listThreads(q: { resourceId?: string; beforeSeq?: number; limit: number }): ThreadRow[] {
    const before = q.beforeSeq ?? Number.POSITIVE_INFINITY;
    return [...this.#threads.values()]
      .filter(
        (t) => (q.resourceId === undefined || t.resourceId === q.resourceId) && t.seq < before,
      )
      .sort((a, b) => b.seq - a.seq)
      .slice(0, q.limit)
      .map((t) => ({ thread: stripSeq(t), seq: t.seq }));
  }
  latestMessageAt(threadId: string): number | null {
    let newest: number | null = null;
    for (const m of this.#messages.values())
      if (m.threadId === threadId && (newest === null || m.createdAt > newest))
        newest = m.createdAt;
    return newest;
  }
  deleteThread(id: string): boolean {
    if (!this.#threads.delete(id)) return false;
    for (const m of [...this.#messages.values()])
      if (m.threadId === id) {
        this.#messages.delete(m.id);
        this.#jumps.delete(m.id);
      }
    for (const b of [...this.#branches.values()]) {
      if (b.threadId !== id) continue;
      this.#branches.delete(b.id);
      this.#commits.delete(b.id);
    }
    for (const c of [...this.#checkpoints.values()])
      if (c.threadId === id) this.#checkpoints.delete(c.id);
    for (const t of [...this.#turns.values()]) if (t.threadId === id) this.#turns.delete(t.id);
    return true;
  }

  // ---------------------------------------------------------------- messages

  lookupMessageBatch(ids: { threadIds: string[]; messageIds: string[] }): MessageBatchLookup {
    const messages = new Map<string, MessageLink>();
    for (let id of ids.messageIds) {
      // The message, then its jump spine.
      for (let m = this.#messages.get(id); m && !messages.has(id); m = this.#messages.get(id)) {
        const jump = this.#jumps.get(id)!;
        messages.set(id, { threadId: m.threadId, depth: m.depth, ...jump });
        if (jump.jumpId === null) break;
        id = jump.jumpId;
      }
    }
    return { threadIds: new Set(ids.threadIds.filter((id) => this.#threads.get(id))), messages };
  }
  insertMessages(messages: Message[], jumps: MessageJump[]): void {
    messages.forEach((m, i) => {
      this.#messages.set(m.id, copy(m));
      this.#jumps.set(m.id, { ...jumps[i]! });
    });
  }
  getMessage(id: string): Message | null {
    const m = this.#messages.get(id);
    return m ? copy(m) : null;
  }
  listMessages(threadId: string): Message[] {
    return [...this.#messages.values()]
      .filter((m) => m.threadId === threadId)
      .sort((a, b) => a.depth - b.depth || binaryOrder(a.id, b.id))
      .map(copy);
  }
  getChain(headId: string, minDepth: number, maxDepth: number): Message[] {
    let m = this.#messages.get(headId);
    // Jumps (or parent steps) up to maxDepth, then parent steps down to minDepth.
    while (m && m.depth > maxDepth) {
      const { jumpId, jumpDepth } = this.#jumps.get(m.id)!;
      const next = jumpId !== null && jumpDepth >= maxDepth ? jumpId : m.parentId;
      m = next === null ? undefined : this.#messages.get(next);
    }
    const out: Message[] = [];
    for (
      ;
      m && m.depth >= minDepth;
      m = m.parentId === null ? undefined : this.#messages.get(m.parentId)
    )
      out.push(copy(m));
    return out.reverse();
  }

  // ---------------------------------------------------------------- branches

  insertBranch(b: Omit<Branch, 'seq'>): Branch | null {
    if (this.#branches.get(b.id)) return null;
    for (const x of this.#branches.values())
      if (x.threadId === b.threadId && x.name === b.name) return null;
    const branch: Branch = { ...copy(b), seq: ++this.#seq };
    this.#branches.set(b.id, branch);
    return copy(branch);
  }
  getBranchById(id: string): Branch | null {
    const b = this.#branches.get(id);
    return b ? copy(b) : null;
  }
  getBranch(threadId: string, name: string): Branch | null {
    for (const b of this.#branches.values())
      if (b.threadId === threadId && b.name === name) return copy(b);
    return null;
  }
  listBranches(threadId: string): Branch[] {
    return [...this.#branches.values()]
      .filter((b) => b.threadId === threadId)
      .sort((a, b) => a.seq - b.seq)
      .map(copy);
  }
  getActiveBranch(threadId: string): Branch | null {
    for (const b of this.#branches.values())
      if (b.threadId === threadId && b.isActive) return copy(b);
    return null;
  }
  setActiveBranch(threadId: string, branchId: string): Branch | null {
    if (this.#branches.get(branchId)?.threadId !== threadId) return null;
    for (const b of [...this.#branches.values()]) {
      if (b.threadId !== threadId) continue;
      const active = b.id === branchId;
      if (b.isActive !== active) this.#branches.set(b.id, { ...b, isActive: active });
    }
    return copy(this.#branches.get(branchId)!);
  }
  moveHead(branchId: string, expectedHeadId: string | null, newHeadId: string): Branch | null {
    const b = this.#branches.get(branchId);
    const m = this.#messages.get(newHeadId);
    if (!b || !m || m.threadId !== b.threadId || b.headMessageId !== expectedHeadId) return null;
    const next = { ...b, headMessageId: newHeadId };
    this.#branches.set(branchId, next);
    return copy(next);
  }
  deleteBranch(branchId: string): number | null {
    if (!this.#branches.delete(branchId)) return null;
    const commits = this.#commits.get(branchId)?.length ?? 0;
    this.#commits.delete(branchId);
    return commits;
  }

  // ---------------------------------------------------------------- checkpoints

  putCheckpoint(c: Checkpoint): Checkpoint {
    for (const existing of this.#checkpoints.values()) {
      if (existing.threadId === c.threadId && existing.name === c.name) {
        const next = { ...existing, messageId: c.messageId };
        this.#checkpoints.set(existing.id, next);
        return stripSeq(next);
      }
    }
    this.#checkpoints.set(c.id, { ...copy(c), seq: ++this.#seq });
    return copy(c);
  }
  getCheckpoint(threadId: string, name: string): Checkpoint | null {
    for (const c of this.#checkpoints.values())
      if (c.threadId === threadId && c.name === name) return stripSeq(c);
    return null;
  }
  getCheckpointById(id: string): Checkpoint | null {
    const c = this.#checkpoints.get(id);
    return c ? stripSeq(c) : null;
  }
  listCheckpoints(threadId: string): Checkpoint[] {
    return [...this.#checkpoints.values()]
      .filter((c) => c.threadId === threadId)
      .sort((a, b) => a.seq - b.seq)
      .map(stripSeq);
  }
  deleteCheckpoint(threadId: string, name: string): boolean {
    for (const c of this.#checkpoints.values())
      if (c.threadId === threadId && c.name === name) return this.#checkpoints.delete(c.id);
    return false;
  }

  // ---------------------------------------------------------------- state

  insertStateCommit(c: StateCommit): void {
    this.#commits.set(c.branchId, [...(this.#commits.get(c.branchId) ?? []), copy(c)]);
  }
  latestStateVersion(branchId: string): number {
    return this.#commits.get(branchId)?.at(-1)?.version ?? 0;
  }
  deleteStateCommits(branchId: string, beforeVersion: number): number {
    const list = this.#commits.get(branchId) ?? [];
    const kept = list.filter((c) => c.version >= beforeVersion);
    if (kept.length < list.length) this.#commits.set(branchId, kept);
    return list.length - kept.length;
  }
  getStateCommits(branchId: string, from: number, to: number): StateCommit[] {
    return (this.#commits.get(branchId) ?? [])
      .filter((c) => c.version >= from && c.version <= to)
      .map(copy);
  }
  getLatestStateCommit(
    branchId: string,
    q: { withSnapshot?: boolean; maxVersion?: number; maxMessageDepth?: number },
  ): StateCommit | null {
    const list = this.#commits.get(branchId) ?? [];
    for (let i = list.length - 1; i >= 0; i--) {
      const c = list[i]!;
      if (q.maxVersion !== undefined && c.version > q.maxVersion) continue;
      if (q.withSnapshot && c.snapshot === null) continue;
      if (q.maxMessageDepth !== undefined && (c.messageDepth ?? -1) > q.maxMessageDepth) continue;
      return copy(c);
    }
    return null;
  }

  // ---------------------------------------------------------------- turns

  putTurn(turn: Turn): void {
    this.#turns.set(turn.id, copy(turn));
  }
  getTurn(id: string): Turn | null {
    const t = this.#turns.get(id);
    return t ? copy(t) : null;
  }
  listTurns(threadId: string, limit: number): Turn[] {
    return [...this.#turns.values()]
      .filter((t) => t.threadId === threadId)
      .sort((a, b) => b.startedAt - a.startedAt || (a.id < b.id ? 1 : -1))
      .slice(0, limit)
      .map(copy);
  }
  deleteTurn(id: string): boolean {
    return this.#turns.delete(id);
  }
  purgeTurns(before: number, threadId: string | undefined): number {
    let n = 0;
    for (const t of [...this.#turns.values()]) {
      if (t.status === 'running' || t.startedAt >= before) continue;
      if (threadId !== undefined && t.threadId !== threadId) continue;
      this.#turns.delete(t.id);
      n++;
    }
    return n;
  }

  // ---------------------------------------------------------------- leases

  getLease(key: string): StoredLease | null {
    const l = this.#leases.get(key);
    return l ? copy(l) : null;
  }
  putLease(lease: StoredLease, insert: boolean): boolean {
    if (insert && this.#leases.get(lease.key)) return false;
    this.#leases.set(lease.key, copy(lease));
    return true;
  }
  listLeases(afterKey: string | null, limit: number): StoredLease[] {
    return afterKeyPage([...this.#leases.values()], (l) => l.key, afterKey, limit).map(copy);
  }

  // ---------------------------------------------------------------- entries

  getEntry(collection: string, id: string): Entry | null {
    const e = this.#entries.get(entryKey(collection, id));
    return e ? copy(e) : null;
  }
  putEntry(entry: Entry, insert: boolean): boolean {
    const key = entryKey(entry.collection, entry.id);
    if (insert && this.#entries.get(key)) return false;
    this.#entries.set(key, copy(entry));
    return true;
  }
  listEntries(
    collection: string,
    group: string | null,
    afterId: string | null,
    limit: number,
  ): Entry[] {
    const rows = [...this.#entries.values()].filter(
      (e) => e.collection === collection && (group === null || e.group === group),
    );
    return afterKeyPage(rows, (e) => e.id, afterId, limit).map(copy);
  }
  deleteEntries(
    collection: string,
    selector: { ids: string[] } | { group: string },
  ): Array<{ id: string; group: string | null }> {
    const doomed =
      'ids' in selector
        ? selector.ids.flatMap((id) => this.#entries.get(entryKey(collection, id)) ?? [])
        : [...this.#entries.values()].filter(
            (e) => e.collection === collection && e.group === selector.group,
          );
    for (const e of doomed) this.#entries.delete(entryKey(collection, e.id));
    return doomed.map(({ id, group }) => ({ id, group }));
  }

  // ---------------------------------------------------------------- memories

  takenMemoryIds(ids: string[]): string[] {
    return ids.filter((id) => this.#memories.get(id));
  }
  insertMemories(memories: Memory[]): Memory[] {
    for (const m of memories) this.#memories.set(m.id, { ...copy(m), seq: ++this.#seq });
    return memories.map(copy);
  }
  getMemory(id: string): Memory | null {
    const m = this.#memories.get(id);
    return m ? stripSeq(m) : null;
  }
  replaceMemory(memory: Memory): Memory {
    const seq = this.#memories.get(memory.id)!.seq;
    this.#memories.set(memory.id, { ...copy(memory), seq });
    return copy(memory);
  }
  closeMemory(id: string, validTo: number, supersededAt: number): boolean {
    const m = this.#memories.get(id);
    if (!m || m.validTo !== null || m.supersededAt !== null) return false;
    this.#memories.set(id, { ...m, validTo, supersededAt });
    return true;
  }
  deleteMemories(ids: string[]): number {
    let n = 0;
    for (const id of new Set(ids)) if (this.#memories.delete(id)) n++;
    return n;
  }
  #admitted(filter: DriverMemoryFilter): Array<Seq<Memory>> {
    return [...this.#memories.values()].filter((m) => matchesMemoryFilter(m, filter));
  }
  listMemories(filter: DriverMemoryFilter, limit: number, order: 'newest' | 'oldest'): Memory[] {
    const sign = order === 'oldest' ? 1 : -1;
    return this.#admitted(filter)
      .sort((a, b) => sign * (a.createdAt - b.createdAt || a.seq - b.seq))
      .slice(0, limit)
      .map(stripSeq);
  }
  scanMemories(afterId: string | null, limit: number): Memory[] {
    return afterKeyPage([...this.#memories.values()], (m) => m.id, afterId, limit).map(stripSeq);
  }
  branchAnchors(threadId: string, maxDepth: number): Array<{ id: string; depth: number }> {
    const out = new Map<string, number>();
    for (const m of this.#memories.values()) {
      const anchor = m.source?.threadId === threadId ? branchAnchor(m) : null;
      const message = anchor === null ? undefined : this.#messages.get(anchor);
      if (message && message.threadId === threadId && message.depth <= maxDepth)
        out.set(message.id, message.depth);
    }
    return [...out].map(([id, depth]) => ({ id, depth }));
  }
  countMemories(filter: DriverMemoryFilter): number {
    return this.#admitted(filter).length;
  }
  vectorCandidates(q: {
    vector: number[];
    filter: DriverMemoryFilter;
    count: number;
    minSimilarity?: number;
  }): MemoryRow[] {
    return this.#admitted(q.filter)
      .filter((m) => m.embedding)
      .map((m) => ({ m, score: cosineSimilarity(q.vector, m.embedding!) }))
      .filter((h) => q.minSimilarity === undefined || h.score >= q.minSimilarity)
      .sort((a, b) => b.score - a.score || a.m.seq - b.m.seq)
      .slice(0, q.count)
      .map((h) => ({ memory: stripSeq(h.m), seq: h.m.seq }));
  }
  /** BM25 with collection statistics over every stored memory (as FTS5 computes them). */
  keywordCandidates(q: {
    terms: string[];
    filter: DriverMemoryFilter;
    count: number;
  }): KeywordCandidate[] {
    const relevanceOf = bm25Scorer(
      [...this.#memories.values()].map((m) => m.content.text),
      q.terms,
    );
    const out: Array<{ m: Seq<Memory>; relevance: number }> = [];
    for (const m of this.#admitted(q.filter)) {
      const relevance = relevanceOf(m.content.text);
      if (relevance > 0) out.push({ m, relevance });
    }
    return out
      .sort((a, b) => b.relevance - a.relevance || a.m.seq - b.m.seq)
      .slice(0, q.count)
      .map((h) => ({ memory: stripSeq(h.m), seq: h.m.seq, relevance: h.relevance }));
  }
  // ---------------------------------------------------------------- forgetting

  putTombstones(tombstones: Tombstone[]): void {
    for (const t of tombstones)
      if (!this.#tombstones.get(tombstoneKey(t))) this.#tombstones.set(tombstoneKey(t), copy(t));
  }
  findTombstones(keys: TombstoneKey[]): Tombstone[] {
    const found = new Map<string, Tombstone>();
    for (const k of keys) {
      const t = this.#tombstones.get(tombstoneKey(k));
      if (t) found.set(tombstoneKey(k), copy(t));
    }
    return [...found.values()];
  }
  countThreadRows(threadId: string): ThreadRowCounts {
    const counts = { messages: 0, branches: 0, stateCommits: 0, checkpoints: 0, turns: 0 };
    for (const m of this.#messages.values()) if (m.threadId === threadId) counts.messages++;
    for (const b of this.#branches.values()) {
      if (b.threadId !== threadId) continue;
      counts.branches++;
      counts.stateCommits += this.#commits.get(b.id)?.length ?? 0;
    }
    for (const c of this.#checkpoints.values()) if (c.threadId === threadId) counts.checkpoints++;
    for (const t of this.#turns.values()) if (t.threadId === threadId) counts.turns++;
    return counts;
  }
  memoryHashesInUse(contentHashes: string[]): string[] {
    const wanted = new Set(contentHashes);
    const found = new Set<string>();
    for (const m of this.#memories.values())
      if (wanted.has(m.contentHash)) found.add(m.contentHash);
    return [...found];
  }
  deleteLeases(keys: string[]): number {
    let n = 0;
    for (const key of new Set(keys)) if (this.#leases.delete(key)) n++;
    return n;
  }
  deleteCachedEmbeddings(contentHashes: string[]): number {
    const hashes = new Set(contentHashes);
    let n = 0;
    for (const key of [...this.#cache.rows.keys()])
      if (hashes.has(key.slice(key.indexOf('\u0000') + 1)) && this.#cache.delete(key)) n++;
    return n;
  }

  // ---------------------------------------------------------------- data keys

  getDataKeys(tenants: Tenant[]): DataKeyRow[] {
    const found = new Map<string, DataKeyRow>();
    for (const t of tenants) {
      const row = this.#dataKeys.get(tenantKey(t));
      if (row) found.set(tenantKey(t), copy(row));
    }
    return [...found.values()];
  }
  insertDataKey(row: DataKeyRow): boolean {
    if (this.#dataKeys.get(tenantKey(row))) return false;
    this.#dataKeys.set(tenantKey(row), copy(row));
    return true;
  }
  deleteDataKeys(tenants: Tenant[]): number {
    let n = 0;
    for (const key of new Set(tenants.map(tenantKey))) if (this.#dataKeys.delete(key)) n++;
    return n;
  }
  listDataKeys(after: Tenant | null, limit: number): DataKeyRow[] {
    const page = afterKeyPage(
      [...this.#dataKeys.values()],
      tenantKey,
      after && tenantKey(after),
      limit,
    );
    return page.map(copy);
  }
  replaceDataKey(row: DataKeyRow, expectedWrapped: string): boolean {
    const current = this.#dataKeys.get(tenantKey(row));
    if (current?.wrapped !== expectedWrapped) return false;
    this.#dataKeys.set(tenantKey(row), { ...current, keyId: row.keyId, wrapped: row.wrapped });
    return true;
  }

  getEmbeddingSpace(): EmbeddingSpace | null {
    const s = this.#settings.get('space');
    return s ? copy(s) : null;
  }
  setEmbeddingSpace(space: EmbeddingSpace): void {
    this.#settings.set('space', copy(space));
  }
  getCachedEmbeddings(embedderId: string, contentHashes: string[]): Map<string, number[]> {
    const out = new Map<string, number[]>();
    for (const h of contentHashes) {
      const e = this.#cache.get(`${embedderId}\u0000${h}`);
      if (e) out.set(h, [...e]);
    }
    return out;
  }
  putCachedEmbeddings(
    embedderId: string,
    entries: Array<{ contentHash: string; embedding: number[] }>,
  ): void {
    for (const e of entries)
      this.#cache.set(`${embedderId}\u0000${e.contentHash}`, [...e.embedding]);
  }
}

/**
 * A new in-memory driver, for `createStore`: the reference the conformance suite
 * compares every store with.
 */
export function memoryDriver(): Driver {
  return new MemoryDriver();
}

/**
 * The in-memory reference store: complete and exact (brute-force cosine for vectors,
 * BM25 for keywords), for tests and for trying Cairn out. Data lives as long as the
 * store object. It is `createStore(memoryDriver())`: the same front door as every
 * other store.
 *
 * @example
 * ```ts
 * import { createMemoryStore } from '@cairn/store';
 * const store = createMemoryStore();
 * const thread = await store.createThread({ title: 'Soil carbon' });
 * ```
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): Store {
  return createStore(memoryDriver(), options);
}
