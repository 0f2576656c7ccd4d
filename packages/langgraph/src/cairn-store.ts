import { createHash } from 'node:crypto';
import {
  checkKeys,
  invalidArgument,
  isCairnError,
  type JsonObject,
  type JsonValue,
  jsonEqual,
  keysOf,
  MAX_NAME_LENGTH,
  type Memory,
} from '@cairn/core';
import {
  MAX_MEMORY_TEXT_LENGTH,
  type MemoryFilter,
  type NewMemory,
  type Store,
} from '@cairn/store';
import { checkId, checkStore } from '@cairn/store/adapter';
import {
  BaseStore,
  type GetOperation,
  getTextAtPath,
  type IndexConfig,
  InvalidNamespaceError,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
} from '@langchain/langgraph-checkpoint';

export interface CairnStoreOptions {
  /**
   * Semantic search: `embeddings` embeds the `fields` of each item (default `["$"]`, the
   * whole value) into vectors of `dims` dimensions. Without it, `query` is a keyword search.
   */
  index?: IndexConfig;
  /** The Cairn `agentId` the items are stored under; separate stores in one database use different ones. Default `"langgraph"`. */
  agentId?: string;
  /** The embedder id recorded in the store's embedding space. Default `langgraph:<dims>`. */
  embedderId?: string;
}

const PAGE = 10_000;
const SEARCH_MAX = 1000;
/** How often a batch of puts runs again after losing a race for an id to a concurrent write. */
const MAX_ATTEMPTS = 10;
/** The most labels a namespace prefix can have for the store to apply it in its query (`filter.metadataPrefix`). */
const MAX_PREFIX_LABELS = 100;
const OPERATORS = new Set(['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in', '$nin', '$exists']);

interface ItemMetadata {
  namespace: string[];
  key: string;
  updatedAt: number;
}

/** `new CairnStore(store, options)`'s arguments: `INVALID_ARGUMENT` naming what is wrong. */
function checkStoreOptions(store: unknown, options: CairnStoreOptions): void {
  checkStore(store, 'new CairnStore: the first argument');
  checkKeys(
    options,
    'CairnStore options',
    keysOf<CairnStoreOptions>()(['index', 'agentId', 'embedderId']),
  );
  if (options.agentId !== undefined) checkId(options.agentId, 'agentId');
  if (options.embedderId !== undefined) checkId(options.embedderId, 'embedderId');
  if (options.index !== undefined) {
    checkKeys(
      options.index,
      'CairnStore index',
      keysOf<IndexConfig>()(['dims', 'embeddings', 'fields']),
    );
    if (!(Number.isSafeInteger(options.index.dims) && options.index.dims >= 1))
      throw invalidArgument(
        `index.dims must be an integer >= 1, got ${JSON.stringify(options.index.dims)}`,
      );
  } else if (options.embedderId !== undefined) {
    throw invalidArgument('embedderId names the embeddings of index: give index too');
  }
}

/** The Cairn `worldId` of an item's first namespace label: the label, or its hash when longer than an id. */
function worldOf(label: string): string {
  if (label.length <= MAX_NAME_LENGTH) return label;
  return `langgraph-label-sha256-${createHash('sha256').update(label).digest('hex')}`;
}

/** At most `max` characters of `text`, never cutting a surrogate pair in two. */
function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  const code = text.charCodeAt(max - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? max - 1 : max);
}

/** What `put` and `get` check of a namespace in `batch()` too, as InMemoryStore's `batch` does. */
function checkNamespace(namespace: unknown, prefix: boolean): void {
  if (!Array.isArray(namespace))
    throw new InvalidNamespaceError(
      `Namespace must be an array of strings, got ${JSON.stringify(namespace)}.`,
    );
  if (!prefix && namespace.length === 0)
    throw new InvalidNamespaceError('Namespace cannot be empty.');
  for (const label of namespace) {
    if (typeof label !== 'string' || (!prefix && label === ''))
      throw new InvalidNamespaceError(
        `Namespace labels must be non-empty strings, got ${JSON.stringify(label)} in ${JSON.stringify(namespace)}.`,
      );
  }
}

/** Whole-label prefix: `["tenant","acme"]` matches `["tenant","acme","x"]`, never `["tenant","acme-corp"]`. */
function hasPrefix(namespace: string[], prefix: string[]): boolean {
  return prefix.length <= namespace.length && prefix.every((label, i) => namespace[i] === label);
}

function matches(condition: MatchCondition, namespace: string[]): boolean {
  const { path } = condition;
  if (path.length > namespace.length) return false;
  const offset = condition.matchType === 'suffix' ? namespace.length - path.length : 0;
  return path.every((label, i) => label === '*' || namespace[offset + i] === label);
}

function isOperators(v: unknown): v is Record<string, unknown> {
  return (
    typeof v === 'object' &&
    v !== null &&
    !Array.isArray(v) &&
    Object.keys(v).length > 0 &&
    Object.keys(v).every((k) => OPERATORS.has(k))
  );
}

function compare(a: unknown, b: unknown): number | null {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  return null;
}

/** One filter condition on one field of an item's value. */
function satisfies(actual: unknown, wanted: unknown): boolean {
  if (!isOperators(wanted)) return jsonEqual(actual as JsonValue, wanted as JsonValue);
  return Object.entries(wanted).every(([op, v]) => {
    const c = compare(actual, v);
    switch (op) {
      case '$eq':
        return jsonEqual(actual as JsonValue, v as JsonValue);
      case '$ne':
        return !jsonEqual(actual as JsonValue, v as JsonValue);
      case '$gt':
        return c !== null && c > 0;
      case '$gte':
        return c !== null && c >= 0;
      case '$lt':
        return c !== null && c < 0;
      case '$lte':
        return c !== null && c <= 0;
      case '$in':
        return Array.isArray(v) && v.some((x) => jsonEqual(actual as JsonValue, x));
      case '$nin':
        return !Array.isArray(v) || !v.some((x) => jsonEqual(actual as JsonValue, x));
      case '$exists':
        return (actual !== undefined) === Boolean(v);
      default:
        return false;
    }
  });
}

/**
 * LangGraph.js's long-term memory store (`BaseStore`) on Cairn memories, on any Cairn store.
 *
 * Each item is a Cairn memory of type `custom` under one `agentId`, its value in `content.value`,
 * its namespace and key in `metadata`, its indexed text in `content.text` (keyword search) and,
 * with `index`, one embedding (vector search). Namespaces match by whole labels: a search under
 * `["tenant", "acme"]` never returns `["tenant", "acme-corp"]` (langgraphjs#2721), `search([])`
 * returns everything, and `_` or `%` are ordinary characters.
 *
 * @example
 * ```ts
 * import { createSqliteStore } from '@cairn/store-sqlite';
 * import { CairnStore } from '@cairn/langgraph';
 *
 * const store = new CairnStore(createSqliteStore({ path: 'agent.db' }));
 * await store.put(['users', 'u1', 'prefs'], 'theme', { color: 'green' });
 * const hits = await store.search(['users', 'u1'], { filter: { color: 'green' } });
 * const graph = workflow.compile({ checkpointer, store });
 * ```
 */
export class CairnStore extends BaseStore {
  readonly #store: Store;
  readonly #agentId: string;
  readonly #index: IndexConfig | undefined;
  readonly #embedderId: string | undefined;
  #space: Promise<unknown> | undefined;

  constructor(store: Store, options: CairnStoreOptions = {}) {
    checkStoreOptions(store, options);
    super();
    this.#store = store;
    this.#agentId = options.agentId ?? 'langgraph';
    if (options.index) {
      this.#index = options.index;
      this.#embedderId = options.embedderId ?? `langgraph:${options.index.dims}`;
    }
  }

  /** The Cairn store the items live in. */
  get store(): Store {
    return this.#store;
  }

  async batch<Op extends readonly Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    const puts = new Map<string, PutOperation>();
    for (const op of operations) {
      if ('namespacePrefix' in op) checkNamespace(op.namespacePrefix, true);
      else if ('namespace' in op) checkNamespace(op.namespace, false);
    }
    // Reads see the store as it was before the batch's puts, as in InMemoryStore.
    for (const op of operations) {
      if ('value' in op) {
        puts.set(JSON.stringify([...op.namespace, op.key]), op);
        results.push(undefined);
      } else if ('namespacePrefix' in op) {
        results.push(await this.#search(op));
      } else if ('key' in op) {
        results.push(await this.#get(op));
      } else {
        results.push(await this.#listNamespaces(op));
      }
    }
    await this.#putAll([...puts.values()]);
    return results as OperationResults<Op>;
  }

  #id(namespace: string[], key: string): string {
    const hash = createHash('sha256').update(JSON.stringify([this.#agentId, namespace, key]));
    return `lg-item-${hash.digest('hex')}`;
  }

  #item(m: Memory): Item {
    const meta = m.metadata as unknown as ItemMetadata;
    return {
      namespace: [...meta.namespace],
      key: meta.key,
      value: (m.content as JsonObject).value as Record<string, any>,
      createdAt: new Date(m.createdAt),
      updatedAt: new Date(meta.updatedAt),
    };
  }

  async #get(op: GetOperation): Promise<Item | null> {
    const m = await this.#store.getMemory(this.#id(op.namespace, op.key));
    return m ? this.#item(m) : null;
  }

  /**
   * The store's filter for the items under a namespace prefix: the first label is the item's
   * `worldId` (indexed), the whole prefix a `metadataPrefix` on its namespace, so searches take
   * their top hits among these items only.
   */
  #filter(prefix: string[]): MemoryFilter {
    const filter: MemoryFilter = { agentId: this.#agentId, types: ['custom'] };
    if (prefix.length > 0) filter.worldId = worldOf(prefix[0]!);
    if (prefix.length > 0 && prefix.length <= MAX_PREFIX_LABELS)
      filter.metadataPrefix = { namespace: prefix };
    return filter;
  }

  /** Every item under a namespace prefix, oldest first. */
  async #scan(prefix: string[]): Promise<Memory[]> {
    const filter = this.#filter(prefix);
    const seen = new Set<string>();
    const out: Memory[] = [];
    for (let after: number | undefined; ; ) {
      const page = await this.#store.listMemories(
        after === undefined ? filter : { ...filter, createdAfter: after - 1 },
        { limit: PAGE, order: 'oldest' },
      );
      let fresh = 0;
      for (const m of page) {
        if (seen.has(m.id)) continue;
        seen.add(m.id);
        fresh++;
        out.push(m);
      }
      if (page.length < PAGE || fresh === 0) break;
      after = page[page.length - 1]!.createdAt;
    }
    return out.filter((m) => hasPrefix((m.metadata as unknown as ItemMetadata).namespace, prefix));
  }

  #keep(op: SearchOperation) {
    const filter = op.filter ?? {};
    return (m: Memory) =>
      hasPrefix((m.metadata as unknown as ItemMetadata).namespace, op.namespacePrefix) &&
      Object.entries(filter).every(([k, v]) =>
        satisfies(((m.content as JsonObject).value as JsonObject)[k], v),
      );
  }

  async #search(op: SearchOperation): Promise<SearchItem[]> {
    const offset = op.offset ?? 0;
    const limit = op.limit ?? 10;
    const keep = this.#keep(op);
    // Without an index the query is a keyword search, which a blank query has nothing for.
    if (!op.query || (!this.#index && !/\S/.test(op.query))) {
      const all = (await this.#scan(op.namespacePrefix)).filter(keep);
      return all.slice(offset, offset + limit).map((m) => ({ ...this.#item(m), score: undefined }));
    }
    const filter = this.#filter(op.namespacePrefix);
    if (Object.keys(op.filter ?? {}).length > 0 || op.namespacePrefix.length > MAX_PREFIX_LABELS) {
      // Conditions on values (or a prefix too deep for the store's filter) are checked here:
      // the search runs among the ids that meet them, so its top hits are theirs.
      filter.ids = (await this.#scan(op.namespacePrefix)).filter(keep).map((m) => m.id);
      if (filter.ids.length === 0) return [];
    }
    const want = Math.min(SEARCH_MAX, offset + limit);
    const search = this.#index
      ? { vector: await this.#index.embeddings.embedQuery(op.query), filter, limit: want }
      : { text: truncate(op.query, MAX_MEMORY_TEXT_LENGTH), filter, limit: want };
    const hits = (await this.#store.searchMemories(search)).filter((h) => keep(h.memory));
    const scored: SearchItem[] = hits.map((h) => ({ ...this.#item(h.memory), score: h.score }));
    if (this.#index && scored.length < offset + limit) {
      // Items stored with `index: false` have no vector; like InMemoryStore, they follow the scored ones.
      const ids = new Set(hits.map((h) => h.memory.id));
      for (const m of (await this.#scan(op.namespacePrefix)).filter(keep)) {
        if (!ids.has(m.id) && m.embedding == null)
          scored.push({ ...this.#item(m), score: undefined });
      }
    }
    return scored.slice(offset, offset + limit);
  }

  async #listNamespaces(op: ListNamespacesOperation): Promise<string[][]> {
    const byKey = new Map<string, string[]>();
    for (const m of await this.#scan([])) {
      let ns = (m.metadata as unknown as ItemMetadata).namespace;
      if (!(op.matchConditions ?? []).every((c) => matches(c, ns))) continue;
      if (op.maxDepth !== undefined) ns = ns.slice(0, op.maxDepth);
      byKey.set(JSON.stringify(ns), ns);
    }
    const all = [...byKey.values()].sort((a, b) => a.join(':').localeCompare(b.join(':')));
    const offset = op.offset ?? 0;
    return all.slice(offset, offset + (op.limit ?? all.length));
  }

  /** The text an item is indexed by: the configured fields (or the item's own list), or none. */
  #text(op: PutOperation): string | null {
    if (op.index === false || op.value === null) return null;
    const fields = op.index ?? this.#index?.fields ?? ['$'];
    const texts: string[] = [];
    for (const field of fields) {
      if (field === '$') texts.push(JSON.stringify(op.value));
      else texts.push(...getTextAtPath(op.value, field));
    }
    return texts.filter((t) => t !== '').join('\n');
  }

  /**
   * A batch's puts, in one transaction: every value checked and embedded (one
   * `embedDocuments` call, as InMemoryStore does) before anything is written, so a bad item
   * or a failing embedder leaves the store as it was.
   */
  async #putAll(ops: PutOperation[]): Promise<void> {
    if (ops.length === 0) return;
    for (const op of ops) {
      if (op.value !== null && (typeof op.value !== 'object' || Array.isArray(op.value))) {
        throw invalidArgument(
          `a store item's value must be an object, got ${JSON.stringify(op.value)}`,
        );
      }
    }
    const texts = ops.map((op) => this.#text(op));
    const vectors: Array<number[] | null> = ops.map(() => null);
    const embed = texts.flatMap((t, i) => (t === null ? [] : [i]));
    if (this.#index && embed.length > 0) {
      this.#space ??= this.#store.ensureEmbeddingSpace({
        embedderId: this.#embedderId!,
        dimensions: this.#index.dims,
      });
      await this.#space;
      const embedded = await this.#index.embeddings.embedDocuments(embed.map((i) => texts[i]!));
      embed.forEach((i, j) => {
        vectors[i] = embedded[j] ?? null;
      });
    }
    const ids = ops.map((op) => this.#id(op.namespace, op.key));
    const now = Date.now();
    // A put is an upsert: one that found an id missing and lost the insert to a concurrent
    // put (CONFLICT), or found it present and lost it to a concurrent delete (NOT_FOUND),
    // runs again and sees the other's write. Nothing of a failed attempt was written.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#writeAll(ops, ids, vectors, texts, now);
      } catch (e) {
        const raced = isCairnError(e, 'CONFLICT') || isCairnError(e, 'NOT_FOUND');
        if (!raced || attempt >= MAX_ATTEMPTS) throw e;
      }
    }
  }

  async #writeAll(
    ops: PutOperation[],
    ids: string[],
    vectors: Array<number[] | null>,
    texts: Array<string | null>,
    now: number,
  ): Promise<void> {
    await this.#store.transaction(async (tx) => {
      const existing = new Set<string>();
      for (let i = 0; i < ids.length; i += PAGE) {
        const page = await tx.listMemories({ ids: ids.slice(i, i + PAGE) }, { limit: PAGE });
        for (const m of page) existing.add(m.id);
      }
      const gone = ids.filter((id, i) => ops[i]!.value === null && existing.has(id));
      if (gone.length > 0) await tx.deleteMemories(gone);
      const added: NewMemory[] = [];
      for (const [i, op] of ops.entries()) {
        if (op.value === null) continue;
        // Keyword search sees the first MAX_MEMORY_TEXT_LENGTH characters (the store's limit
        // on a memory's text); the embedder, the value and every other read see all of it.
        const content = {
          text: truncate(texts[i] ?? '', MAX_MEMORY_TEXT_LENGTH),
          value: op.value as JsonObject,
        };
        const metadata = { namespace: op.namespace, key: op.key, updatedAt: now };
        const embedding = vectors[i]!;
        if (existing.has(ids[i]!)) {
          await tx.updateMemory(ids[i]!, { content, metadata, embedding });
        } else {
          added.push({
            id: ids[i]!,
            type: 'custom',
            agentId: this.#agentId,
            worldId: worldOf(op.namespace[0]!),
            scope: 'shared',
            content,
            metadata,
            embedding,
            // At most PAGE items per millisecond: `#scan` pages by creation time.
            createdAt: now + Math.floor(added.length / PAGE),
          });
        }
      }
      if (added.length > 0) await tx.addMemories(added);
    });
  }
}
