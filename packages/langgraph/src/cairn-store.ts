import { createHash } from 'node:crypto';
import {
  checkKeys,
  invalidArgument,
  type JsonObject,
  type JsonValue,
  jsonEqual,
  keysOf,
  type Memory,
} from '@cairn/core';
import type { MemoryFilter, Store } from '@cairn/store';
import { checkId, checkStore } from '@cairn/store/adapter';
import {
  BaseStore,
  type GetOperation,
  getTextAtPath,
  type IndexConfig,
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
    for (const op of puts.values()) await this.#put(op);
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

  /** Every item under a namespace prefix, oldest first. */
  async #scan(prefix: string[]): Promise<Memory[]> {
    const filter: MemoryFilter = { agentId: this.#agentId, types: ['custom'] };
    if (prefix.length > 0 && prefix[0]!.length <= 200) filter.worldId = prefix[0]!;
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
    if (!op.query) {
      const all = (await this.#scan(op.namespacePrefix)).filter(keep);
      return all.slice(offset, offset + limit).map((m) => ({ ...this.#item(m), score: undefined }));
    }
    const filter: MemoryFilter = { agentId: this.#agentId, types: ['custom'] };
    if (op.namespacePrefix.length > 0 && op.namespacePrefix[0]!.length <= 200) {
      filter.worldId = op.namespacePrefix[0]!;
    }
    const search = this.#index
      ? { vector: await this.#index.embeddings.embedQuery(op.query), filter, limit: SEARCH_MAX }
      : { text: op.query, filter, limit: SEARCH_MAX };
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

  async #put(op: PutOperation): Promise<void> {
    const id = this.#id(op.namespace, op.key);
    if (op.value === null) {
      await this.#store.deleteMemories([id]);
      return;
    }
    if (typeof op.value !== 'object' || Array.isArray(op.value)) {
      throw invalidArgument(
        `a store item's value must be an object, got ${JSON.stringify(op.value)}`,
      );
    }
    const text = this.#text(op);
    let embedding: number[] | null = null;
    if (this.#index && text !== null) {
      this.#space ??= this.#store.ensureEmbeddingSpace({
        embedderId: this.#embedderId!,
        dimensions: this.#index.dims,
      });
      await this.#space;
      embedding = (await this.#index.embeddings.embedDocuments([text]))[0] ?? null;
    }
    const content = { text: text ?? '', value: op.value as JsonObject };
    const now = Date.now();
    const metadata = { namespace: op.namespace, key: op.key, updatedAt: now };
    await this.#store.transaction(async (tx) => {
      if (await tx.getMemory(id)) {
        await tx.updateMemory(id, { content, metadata, embedding });
      } else {
        await tx.addMemories([
          {
            id,
            type: 'custom',
            agentId: this.#agentId,
            worldId: op.namespace[0]!.length <= 200 ? op.namespace[0]! : null,
            scope: 'shared',
            content,
            metadata,
            embedding,
            createdAt: now,
          },
        ]);
      }
    });
  }
}
