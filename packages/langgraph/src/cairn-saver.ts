import { createHash } from 'node:crypto';
import {
  AsyncLock,
  CairnError,
  checkKeys,
  invalidArgument,
  isCairnError,
  type JsonObject,
  type JsonValue,
  jsonEqual,
  keysOf,
  MAX_NAME_LENGTH,
  newId,
  type StateCommit,
  schemaVersionTooNew,
  type Thread,
} from '@cairn/core';
import type { NewMessage, Store } from '@cairn/store';
import { checkStore } from '@cairn/store/adapter';
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type DeltaChannelHistory,
  getCheckpointId,
  maxChannelVersion,
  type PendingWrite,
  type SerializerProtocol,
  TASKS,
  WRITES_IDX_MAP,
} from '@langchain/langgraph-checkpoint';
import {
  type CheckedSaverSchema,
  checkSaverSchema,
  migrateCheckpoint,
  type SaverSchema,
} from './channel-migrations.js';
import { Dumper } from './dump.js';
import { compactMessage, expandMessage, isJsonObject } from './message-data.js';
import { MessageReviver } from './revive.js';
import {
  type CachedNode,
  type ChannelRef,
  type CheckpointRecord,
  isStoredList,
  type LogRecord,
  type MessageRefs,
  NamespaceLog,
  type StoredList,
  type StoredValue,
  tailCovers,
  type WritesRecord,
} from './thread-log.js';

export interface CairnSaverOptions {
  /** How values are serialized; LangGraph's `JsonPlusSerializer` by default. */
  serde?: SerializerProtocol;
  /**
   * Channels whose list values are stored as Cairn messages, each version sharing its
   * parent checkpoint's chain up to the longest common prefix. Default `['messages']`.
   */
  messageChannels?: string[];
  /** How many threads' folded logs to keep in memory (least recently used go first). Default 100. */
  cachedThreads?: number;
  /**
   * The resource (a user or tenant) a thread the saver creates belongs to, read from the
   * run's config, e.g. `(config) => config.configurable?.user_id`. Then
   * `store.forget({ resourceId })` deletes that user's graph threads with everything in them,
   * and a later run on one is refused with `FORGOTTEN`. Asked when the saver creates a
   * thread; a thread made before keeps the resource it has. Default: none.
   */
  resourceId?: (config: RunnableConfig) => string | null | undefined;
  /**
   * The version of the graph's channel values and the migrations up to it, as
   * `defineState` takes them: a checkpoint written under an older version is read migrated
   * (`getTuple`, `list`), the first checkpoint written on top of it stores every channel's
   * value again in the new shape, and a thread a newer version wrote is refused
   * (`SCHEMA_TOO_NEW`) rather than read or written. Default: version 1, no migrations.
   *
   * @example
   * ```ts
   * const saver = new CairnSaver(store, {
   *   schema: {
   *     version: 2,
   *     migrations: [{
   *       from: 1, to: 2,
   *       rename: { name: 'title' },
   *       migrate: (values) => ({ ...values, score: { value: values.score } }),
   *     }],
   *   },
   * });
   * ```
   */
  schema?: SaverSchema;
}

/** `CairnSaver.prune`'s options. */
export interface PruneOptions {
  /**
   * `'keep_latest'` (the default) keeps the newest checkpoint of each namespace, its pending
   * writes and the messages they use; `'delete'` removes the threads' checkpoints entirely.
   */
  strategy?: 'keep_latest' | 'delete';
}

/** What `CairnSaver.prune` freed, summed over the threads. */
export interface PruneResult {
  /** Checkpoints removed. */
  checkpoints: number;
  /** Pending writes removed (one per task, channel and index). */
  writes: number;
  /** Message nodes removed from the store. */
  messages: number;
}

const STRATEGIES = ['keep_latest', 'delete'] as const;

/** `prune(threadIds, options)`'s arguments: `INVALID_ARGUMENT` naming what is wrong. */
function checkPruneArguments(threadIds: unknown, options: PruneOptions): void {
  if (!Array.isArray(threadIds) || !threadIds.every((id) => typeof id === 'string' && id !== ''))
    throw invalidArgument(
      `prune: threadIds must be an array of thread ids, got ${JSON.stringify(threadIds)}`,
    );
  checkKeys(options, 'prune options', keysOf<PruneOptions>()(['strategy']));
  if (options.strategy !== undefined && !STRATEGIES.includes(options.strategy))
    throw invalidArgument(
      `prune: strategy must be 'keep_latest' or 'delete', got ${JSON.stringify(options.strategy)}`,
    );
}

/** `new CairnSaver(store, options)`'s arguments: `INVALID_ARGUMENT` naming what is wrong. */
function checkSaverArguments(store: unknown, options: CairnSaverOptions): void {
  checkStore(store, 'new CairnSaver: the first argument');
  checkKeys(
    options,
    'CairnSaver options',
    keysOf<CairnSaverOptions>()([
      'serde',
      'messageChannels',
      'cachedThreads',
      'resourceId',
      'schema',
    ]),
  );
  if (options.resourceId !== undefined && typeof options.resourceId !== 'function')
    throw invalidArgument(
      `resourceId must be a function of the run's config, e.g. (config) => config.configurable?.user_id, got ${JSON.stringify(options.resourceId)}`,
    );
  const { messageChannels: channels, cachedThreads: cached } = options;
  if (
    channels !== undefined &&
    !(Array.isArray(channels) && channels.every((c) => typeof c === 'string' && c !== ''))
  )
    throw invalidArgument(
      `messageChannels must be an array of channel names, got ${JSON.stringify(channels)}`,
    );
  if (cached !== undefined && !(Number.isSafeInteger(cached) && cached >= 1))
    throw invalidArgument(`cachedThreads must be an integer >= 1, got ${JSON.stringify(cached)}`);
}

/**
 * The Cairn branch that holds the log of one checkpoint namespace: `langgraph` for the root,
 * `langgraph:<ns>` for a subgraph, and `langgraph#<SHA-256 of ns>` for a namespace too long
 * for a branch name (subgraphs nested 4 deep and more), whose log records carry `ns` itself.
 */
export function namespaceBranch(ns: string): string {
  if (ns === '') return 'langgraph';
  const name = `langgraph:${ns}`;
  return name.length <= MAX_NAME_LENGTH ? name : `${HASHED}${sha256(ns)}`;
}

const HASHED = 'langgraph#';
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** The namespace a branch holds the log of: its name, `HASHED` (named in its records), or null. */
function namespaceOf(branchName: string): string | typeof HASHED | null {
  if (branchName === 'langgraph') return '';
  if (branchName.startsWith(HASHED)) return HASHED;
  return branchName.startsWith('langgraph:') ? branchName.slice('langgraph:'.length) : null;
}

/**
 * Whether a Cairn thread is one a `CairnSaver` made (metadata `{ langgraph: true }`). A thread
 * of the same id made by the app (`@cairn/thread`, another integration) is not the saver's: it
 * never writes into it, reads it as absent and never deletes it.
 */
function isSaverThread(thread: Thread | null): thread is Thread {
  return thread !== null && thread.metadata.langgraph === true;
}

function notSaverThread(threadId: string): CairnError {
  return new CairnError(
    'CONFLICT',
    `thread ${JSON.stringify(threadId)} exists and was not made by a LangGraph checkpointer (it belongs to the app: @cairn/thread or another integration); its checkpoints would mix with the app's messages, so give the graph another thread_id`,
    { details: { threadId } },
  );
}

/** What an append stores, planned on its namespace's log in the transaction (null: nothing). */
type Plan = (
  log: NamespaceLog,
  tx: Store,
) => Promise<{
  record: CheckpointRecord | WritesRecord;
  /** Where the branch head goes (null: where it is). */
  messageId: string | null;
  /** The messages to add, and their nodes to cache once they are. */
  messages: NewMessage[];
  added: ReadonlyArray<readonly [string, CachedNode]>;
} | null>;

interface AppendJob {
  ns: string;
  plan: Plan;
  resolve: () => void;
  reject: (e: unknown) => void;
}

/** What LangGraph's thread is in Cairn: the folded logs of its namespaces and the message nodes they use. */
class ThreadLogs {
  readonly spaces = new Map<string, NamespaceLog>();
  readonly nodes = new Map<string, CachedNode>();
  readonly lock = new AsyncLock();
  /** The resource a thread this saver creates gets (`CairnSaverOptions.resourceId`). */
  resourceId: string | null = null;
  /** The `put`s of this saver in flight on the thread. */
  readonly puts = new Set<Promise<void>>();
  /** Appends waiting for the next transaction (`CairnSaver.#append`), and whether one drains them. */
  readonly queue: AppendJob[] = [];
  draining = false;
  constructor(readonly id: string) {}
}

const MESSAGE_ROLES: Record<string, string> = {
  HumanMessage: 'user',
  HumanMessageChunk: 'user',
  AIMessage: 'assistant',
  AIMessageChunk: 'assistant',
  SystemMessage: 'system',
  SystemMessageChunk: 'system',
  ToolMessage: 'tool',
  ToolMessageChunk: 'tool',
  FunctionMessage: 'function',
  RemoveMessage: 'remove',
};

/** The role and type a serialized list element gets as a Cairn message. */
function roleOf(value: JsonValue): { role: string; type: string | null } {
  if (isJsonObject(value)) {
    const id = value.id;
    if (value.lc === 1 && value.type === 'constructor' && Array.isArray(id)) {
      const name = String(id[id.length - 1]);
      const kwargs = value.kwargs as JsonObject | undefined;
      const chatRole = typeof kwargs?.role === 'string' && kwargs.role.trim() ? kwargs.role : null;
      return { role: MESSAGE_ROLES[name] ?? chatRole ?? 'message', type: name };
    }
  }
  return { role: 'item', type: null };
}

/** A serialized LangChain message that a value can refer to as a Cairn message (not a `RemoveMessage`). */
function isMessage(value: JsonValue): boolean {
  const { role, type } = roleOf(value);
  return type !== null && role !== 'remove';
}

/** Message list elements revived during one `list()`, by Cairn message id. */
type Revived = Map<string, unknown>;

/** The input channel: a graph's input is its value until the first step applies it. */
const START = '__start__';

const decoder = new TextDecoder();

function nodeJson(node: CachedNode): string {
  node.json ??= JSON.stringify(node.value);
  return node.json;
}

/**
 * Whether a cached message holds this serialized element. Compares the text first; a message
 * read back with its keys in another order (Postgres JSONB reorders them; `expandMessage` puts
 * an id LangGraph set before the defaults) is compared by content once and then keeps the
 * serializer's text.
 */
function sameContent(node: CachedNode, json: string): boolean {
  if (nodeJson(node) === json) return true;
  node.value ??= JSON.parse(node.json!) as JsonValue;
  if (!jsonEqual(node.value, JSON.parse(json) as JsonValue)) return false;
  node.json = json;
  return true;
}
const MAX_ATTEMPTS = 50;

/**
 * Where messages bound for a channel chain at a checkpoint: after the head of its list, at the
 * root before it has a value, nowhere (undefined: stored in place) when its value is not a list
 * (a delta channel, a list stored whole).
 */
function listHead(resolved: Map<string, { r: ChannelRef }> | undefined, channel: string) {
  const r = resolved?.get(channel)?.r;
  if (r === undefined) return null;
  return r !== 0 && isStoredList(r) ? r.m : undefined;
}

/**
 * The message nodes one `put` or `putWrites` adds. A message is stored once where it is first
 * seen (the graph's input, a task's write, or a list value) and chained after the list it will
 * be appended to; what follows reuses that node: `node()` returns a node of the pool (the
 * messages the checkpoint's values and pending writes refer to) with the same content and
 * parent before it makes a new one.
 */
class NodeWriter {
  readonly added: NewMessage[] = [];
  readonly cached: Array<readonly [string, CachedNode]> = [];
  constructor(
    private readonly thread: ThreadLogs,
    private readonly pool: string[],
  ) {}

  node(json: string, parentId: string | null): string {
    for (const id of this.pool) {
      const node = this.thread.nodes.get(id)!;
      if (node.parent === parentId && sameContent(node, json)) return id;
    }
    const id = newId();
    const full = JSON.parse(json) as JsonValue;
    const { role, type } = roleOf(full);
    const data = compactMessage(type, full);
    this.added.push({ id, threadId: this.thread.id, parentId, data, role, type });
    this.cached.push([id, { parent: parentId, json }]);
    return id;
  }
}

function configThreadId(config: RunnableConfig): string | undefined {
  const id: unknown = config.configurable?.thread_id;
  if (id === undefined || id === null || id === '') return undefined;
  if (typeof id === 'string') return id;
  if (typeof id === 'number' && Number.isFinite(id)) return String(id);
  throw invalidArgument(`thread_id must be a string, got ${JSON.stringify(id)}`);
}

function configNamespace(config: RunnableConfig): string {
  const ns: unknown = config.configurable?.checkpoint_ns ?? '';
  if (typeof ns !== 'string') {
    throw invalidArgument(`checkpoint_ns must be a string, got ${JSON.stringify(ns)}`);
  }
  return ns;
}

/**
 * LangGraph.js's checkpointer on any Cairn `Store` (in-memory, SQLite, Postgres, PGlite).
 *
 * A LangGraph thread is a Cairn thread of the same id; each checkpoint namespace is a branch
 * (`langgraph`, `langgraph:<ns>`) whose state commits are its log of checkpoints and pending
 * writes. A channel is stored only when `newVersions` names it. List values of the message
 * channels become Cairn messages: a new version shares its parent checkpoint's chain up to the
 * longest common prefix (compared by content) and adds only the rest, so forks are branches of
 * the message DAG and the inspector shows the conversation. Versions are minted unique per
 * lineage, so two forks of one checkpoint never share a stored value by accident.
 *
 * @example
 * ```ts
 * import { createSqliteStore } from '@cairn/store-sqlite';
 * import { CairnSaver } from '@cairn/langgraph';
 *
 * const checkpointer = new CairnSaver(createSqliteStore({ path: 'agent.db' }));
 * const graph = workflow.compile({ checkpointer });
 * await graph.invoke(input, { configurable: { thread_id: 'user-1' } });
 * ```
 */
export class CairnSaver extends BaseCheckpointSaver {
  readonly #store: Store;
  readonly #messageChannels: Set<string>;
  readonly #cachedThreads: number;
  readonly #resourceOf: CairnSaverOptions['resourceId'];
  readonly #threads = new Map<string, ThreadLogs>();
  readonly #reviver = new MessageReviver();
  readonly #dumper = new Dumper();
  readonly #schema: CheckedSaverSchema;

  constructor(store: Store, options: CairnSaverOptions = {}) {
    checkSaverArguments(store, options);
    const schema = checkSaverSchema(options.schema);
    super(options.serde);
    this.#schema = schema;
    this.#store = store;
    this.#messageChannels = new Set(options.messageChannels ?? ['messages']);
    this.#cachedThreads = options.cachedThreads ?? 100;
    this.#resourceOf = options.resourceId;
  }

  /** The store this saver writes to. */
  get store(): Store {
    return this.#store;
  }

  /**
   * Versions unique per lineage: the next integer plus a random fraction of six digits. Two
   * forks of one checkpoint that both write a channel get different versions (langgraphjs#1812;
   * values are looked up along a checkpoint's own lineage in any case), and versions stay
   * numbers, as LangGraph's typings expect, short in every checkpoint that names them.
   */
  override getNextVersion(current: number | undefined): number {
    const n = Math.floor(Number(current ?? 0)) || 0;
    // An integer divided by 1e6 prints as its six decimals ("12.345678").
    return ((n + 1) * 1e6 + 1 + Math.floor(Math.random() * 999_999)) / 1e6;
  }

  // ------------------------------------------------------------------ reads

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = configThreadId(config);
    if (threadId === undefined) return undefined;
    const ns = configNamespace(config);
    const thread = this.#thread(threadId);
    const wanted = getCheckpointId(config) || undefined;
    const found = await thread.lock.run(async () => {
      const tail = thread.spaces.has(ns) ? 'all' : await this.#tail(thread, ns, wanted);
      if (tail !== 'all') return tail;
      const log = await this.#namespace(thread, ns, false);
      return log && { log, id: wanted ?? log.latest };
    });
    const record = found?.id ? found.log.checkpoints.get(found.id) : undefined;
    return record ? this.#tuple(thread, found!.log, record) : undefined;
  }

  async *list(
    config: RunnableConfig,
    options: CheckpointListOptions = {},
  ): AsyncGenerator<CheckpointTuple> {
    const { before, filter } = options;
    let limit = options.limit;
    const threadId = configThreadId(config);
    const wantedNs: unknown = config.configurable?.checkpoint_ns;
    const wantedId = getCheckpointId(config);
    const beforeId = before ? getCheckpointId(before) : '';
    const threadIds = threadId !== undefined ? [threadId] : await this.#langgraphThreads();
    for (const id of threadIds) {
      const thread = this.#thread(id);
      // Each message revived once for the whole listing: the snapshots' lists share it.
      const revived: Revived = new Map();
      const logs = await thread.lock.run(() => this.#namespaces(thread));
      for (const log of logs) {
        if (wantedNs !== undefined && log.ns !== wantedNs) continue;
        for (const checkpointId of log.newestFirst()) {
          if (wantedId && checkpointId !== wantedId) continue;
          if (beforeId && checkpointId >= beforeId) continue;
          const record = log.checkpoints.get(checkpointId)!;
          if (filter && Object.keys(filter).length > 0) {
            const metadata = (await this.#decode(record.meta)) as Record<string, unknown>;
            if (!Object.entries(filter).every(([k, v]) => metadata[k] === v)) continue;
          }
          if (limit !== undefined) {
            if (limit <= 0) return;
            limit -= 1;
          }
          yield await this.#tuple(thread, log, record, revived);
        }
      }
    }
  }

  /**
   * Every requested channel's writes along the target's ancestors, oldest first, and the
   * value stored at the nearest ancestor that has one (the seed). Reads the namespace's log
   * once (one query for what is new since the last read), then walks it in memory.
   */
  override async getDeltaChannelHistory(options: {
    config: RunnableConfig;
    channels: string[];
  }): Promise<Record<string, DeltaChannelHistory>> {
    const { config, channels } = options;
    if (channels.length === 0) return {};
    const result: Record<string, DeltaChannelHistory> = {};
    const collected = new Map<string, CheckpointPendingWrite[]>(channels.map((c) => [c, []]));
    const seeds = new Map<string, unknown>();
    const threadId = configThreadId(config);
    const thread = threadId === undefined ? undefined : this.#thread(threadId);
    const log = thread
      ? await thread.lock.run(() => this.#namespace(thread, configNamespace(config), false))
      : undefined;
    if (thread && log) {
      const targetId = getCheckpointId(config) || log.latest;
      const remaining = new Set(channels);
      const parentId = targetId ? (log.checkpoints.get(targetId)?.parent ?? null) : null;
      for (const ancestor of log.ancestry(parentId)) {
        if (remaining.size === 0) break;
        const writes = log.writes(ancestor.id);
        for (let i = writes.length - 1; i >= 0; i--) {
          const w = writes[i]!;
          if (!remaining.has(w.channel)) continue;
          collected.get(w.channel)!.push([w.task, w.channel, await this.#decode(w.value, thread)]);
        }
        const versions = await this.#channelVersions(ancestor);
        const resolved = log.resolve(ancestor.id);
        for (const channel of [...remaining]) {
          const r = resolved.get(channel);
          if (!r || r.r === 0 || !(channel in versions) || versions[channel] !== r.v) continue;
          seeds.set(channel, await this.#value(thread, r.r));
          remaining.delete(channel);
        }
      }
    }
    for (const channel of channels) {
      const entry: DeltaChannelHistory = { writes: collected.get(channel)!.reverse() };
      if (seeds.has(channel)) entry.seed = seeds.get(channel);
      result[channel] = entry;
    }
    return result;
  }

  // ------------------------------------------------------------------ writes

  async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    if (!config.configurable) throw new Error('Empty configuration supplied.');
    const threadId = configThreadId(config);
    if (threadId === undefined) {
      throw new Error('Missing "thread_id" field in passed "config.configurable".');
    }
    const ns = configNamespace(config);
    const parent = getCheckpointId(config) || null;
    if (typeof checkpoint?.id !== 'string' || checkpoint.id === '') {
      throw invalidArgument(
        `checkpoint.id must be a non-empty string, got ${JSON.stringify(checkpoint?.id)}`,
      );
    }
    // The header leaves out the values (stored per channel below) and the id (the record's).
    const { channel_values: values, id: _id, ...rest } = checkpoint;
    const header = await this.#encode(rest);
    const meta = await this.#encode(metadata);
    // A channel's stored value, the elements of a message list, or 0 (absent).
    type Prepared = [string, string | number, { value: StoredValue } | { list: string[] } | 0];
    const prepare = async (channel: string, version: string | number): Promise<Prepared> => {
      const value = values?.[channel];
      if (value === undefined) return [channel, version, 0];
      if (this.#messageChannels.has(channel) && Array.isArray(value)) {
        // Each element serialized on its own is byte-equal to its part of the whole list.
        const items = await Promise.all(value.map((v) => this.#dumper.dump(this.serde, v)));
        // Elements the serializer writes as bytes: the whole value is stored instead.
        if (items.every(([type]) => type === 'json')) {
          const list = items.map(([, b]) => (typeof b === 'string' ? b : decoder.decode(b)));
          return [channel, version, { list }];
        }
      }
      return [channel, version, { value: await this.#encode(value) }];
    };
    const named: Prepared[] = await Promise.all(
      Object.entries(newVersions).map(([channel, version]) => prepare(channel, version)),
    );
    const thread = this.#thread(threadId, config);
    const done = this.#append(thread, ns, async (log, tx) => {
      // A checkpoint put again under its id (LangGraph 1.4 does, with durability 'exit', to
      // the checkpoint a resumed run started from) is updated in place: it keeps its parent
      // and the values stored with it, and stores only what newVersions names on top.
      const existing = log.checkpoints.get(checkpoint.id);
      const parentId = existing ? existing.parent : parent === checkpoint.id ? null : parent;
      const known = parentId !== null && log.checkpoints.has(parentId);
      const base = known ? log.resolve(parentId) : undefined;
      const current = existing ? log.resolve(existing.id) : base;
      // A `__copy__` fork (metadata source `fork`) is put with empty newVersions under its
      // source's parent: a channel at a version its lineage does not hold has its value
      // stored with the copy. Any other put stores only what newVersions names (the
      // checkpoint contract's delta rule).
      const copy = metadata?.source === 'fork';
      // A thread written by a newer schema is refused; the first checkpoint of a newer schema
      // on a lineage stores every channel's value (its ancestors' are of the older shape).
      const version = this.#schema.version;
      const latestSv = log.latest === null ? 1 : (log.checkpoints.get(log.latest)?.sv ?? 1);
      const baseSv = existing
        ? (existing.sv ?? 1)
        : known
          ? (log.checkpoints.get(parentId)!.sv ?? 1)
          : version;
      if (Math.max(latestSv, baseSv) > version)
        throw schemaVersionTooNew('thread', Math.max(latestSv, baseSv), version);
      const rebase = baseSv < version;
      const unnamed = Object.entries(checkpoint.channel_versions ?? {}).filter(
        ([channel, version]) =>
          !(channel in newVersions) &&
          (rebase ||
            (copy && values?.[channel] !== undefined && current?.get(channel)?.v !== version)),
      );
      const prepared = [
        ...named,
        ...(await Promise.all(unnamed.map(([channel, version]) => prepare(channel, version)))),
      ];
      const nodes = new NodeWriter(
        thread,
        known ? await this.#pool(thread, log, parentId, tx) : [],
      );
      const vals = new Map<string, CheckpointRecord['vals'][number]>();
      // Message lists first: the values after them (the graph's input) chain after their heads.
      const heads = new Map<string, string | null>();
      for (const [channel, version, value] of prepared) {
        if (value === 0 || !('list' in value)) continue;
        const items = value.list;
        const baseRef = base?.get(channel)?.r;
        const baseIds =
          baseRef && isStoredList(baseRef) ? await this.#chainIds(thread, baseRef, tx) : [];
        let k = 0;
        while (
          k < items.length &&
          k < baseIds.length &&
          sameContent(thread.nodes.get(baseIds[k]!)!, items[k]!)
        ) {
          k++;
        }
        let head = k > 0 ? baseIds[k - 1]! : null;
        for (let i = k; i < items.length; i++) head = nodes.node(items[i]!, head);
        heads.set(channel, head);
        vals.set(channel, [channel, version, { m: head, n: items.length }]);
      }
      const headOf = (channel: string) => {
        const own = prepared.find(([c]) => c === channel);
        if (!own) return listHead(current, channel);
        return own[2] !== 0 && 'list' in own[2] ? heads.get(channel)! : undefined;
      };
      for (const [channel, version, value] of prepared) {
        if (value === 0) vals.set(channel, [channel, version, 0]);
        else if ('value' in value) {
          vals.set(channel, [channel, version, this.#refer(channel, value.value, headOf, nodes)]);
        }
      }
      const record: CheckpointRecord = {
        lg: 'checkpoint',
        id: checkpoint.id,
        parent: parentId,
        header,
        meta,
        vals: [
          ...(existing?.vals.filter(([channel]) => !vals.has(channel)) ?? []),
          ...prepared.map(([channel]) => vals.get(channel)!),
        ],
        top: log.latest === null || checkpoint.id >= log.latest ? 1 : log.latest,
      };
      if (namespaceBranch(ns).startsWith(HASHED)) record.ns = ns;
      if (version > 1) record.sv = version;
      const wf = log.firstWrites(checkpoint.id);
      if (wf !== undefined) record.wf = wf;
      return {
        record,
        messageId: headOf([...this.#messageChannels][0]!) ?? null,
        messages: nodes.added,
        added: nodes.cached,
      };
    });
    thread.puts.add(done);
    try {
      await done;
    } finally {
      thread.puts.delete(done);
    }
    return {
      configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id },
    };
  }

  async putWrites(
    config: RunnableConfig,
    writes: PendingWrite[],
    taskId: string,
    taskPath?: string,
  ): Promise<void> {
    if (!config.configurable) throw new Error('Empty configuration supplied.');
    const threadId = configThreadId(config);
    if (threadId === undefined) throw new Error('Missing thread_id field in config.configurable.');
    const checkpointId = getCheckpointId(config);
    if (!checkpointId) throw new Error('Missing checkpoint_id field in config.configurable.');
    if (typeof taskId !== 'string') {
      throw invalidArgument(`taskId must be a string, got ${JSON.stringify(taskId)}`);
    }
    const ns = configNamespace(config);
    const items = await Promise.all(
      writes.map(
        async ([channel, value], i) =>
          [WRITES_IDX_MAP[channel] ?? i, channel, await this.#encode(value)] as [
            number,
            string,
            StoredValue,
          ],
      ),
    );
    if (items.length === 0) return;
    const thread = this.#thread(threadId, config);
    await this.#arrival(thread, ns, checkpointId);
    await this.#append(thread, ns, async (log, tx) => {
      const kept = items.filter(([idx]) => idx < 0 || !log.hasWrite(checkpointId, taskId, idx));
      if (kept.length === 0) return null;
      // Messages written for a checkpoint chain after its lists, reusing the nodes of its input.
      const nodes = new NodeWriter(thread, await this.#pool(thread, log, checkpointId, tx));
      const current = log.checkpoints.has(checkpointId) ? log.resolve(checkpointId) : undefined;
      const headOf = (channel: string) => listHead(current, channel);
      const referred = kept.map(
        ([idx, channel, value]) =>
          [idx, channel, this.#refer(channel, value, headOf, nodes)] as [
            number,
            string,
            StoredValue,
          ],
      );
      const record: WritesRecord = {
        lg: 'writes',
        cp: checkpointId,
        task: taskId,
        path: taskPath ?? '',
        items: referred,
      };
      if (namespaceBranch(ns).startsWith(HASHED)) record.ns = ns;
      return { record, messageId: null, messages: nodes.added, added: nodes.cached };
    });
  }

  /** Deletes a thread this saver made; a thread of the same id that is the app's stays as it is. */
  async deleteThread(threadId: string): Promise<void> {
    const thread = this.#thread(String(threadId));
    await thread.lock.run(async () => {
      thread.spaces.clear();
      thread.nodes.clear();
      await this.#store.transaction(async (tx) => {
        if (isSaverThread(await tx.getThread(thread.id))) await tx.deleteThread(thread.id);
      });
    });
    this.#threads.delete(thread.id);
  }

  /**
   * Frees the storage of old checkpoints, the shape of LangGraph Python savers' `prune`.
   * `'delete'` removes the threads (as `deleteThread`). `'keep_latest'` keeps, in each
   * checkpoint namespace, only the newest checkpoint (what `getTuple` without a
   * `checkpoint_id` returns) and its pending writes, so a pending `interrupt()` resumes
   * with `Command({ resume })` and tasks that finished in its step do not run again.
   *
   * The kept checkpoint is rewritten with every channel value stored with it, so its
   * values no longer depend on its ancestors; `getTuple` returns it exactly as before,
   * `parentConfig` included (it names the parent, which is no longer stored, as Python's
   * savers do). A namespace whose newest checkpoint reads values from its ancestors (a
   * `DeltaChannel` since its last snapshot, or a checkpoint format before v4, whose sends
   * are in its parent's writes) keeps that checkpoint's whole lineage, and drops only other
   * forks. Message nodes no kept checkpoint, write, app branch, named checkpoint or turn
   * uses are removed.
   *
   * Each thread is rewritten in one transaction (its branches locked, then the thread
   * exported, deleted and restored compactly, so a failure leaves it as it was); its
   * namespace branches get new ids, so a saver in another process that had the old log
   * cached reads the new one. Prune threads no run is writing to: a write that meets the
   * prune waits for it or fails (on PostgreSQL one of the two can be aborted as a deadlock),
   * and never sees half of it. A thread that is not the
   * saver's, or is absent, is left alone; one with nothing to free is not written.
   * Subscribers of a rewritten thread see it deleted and written again.
   *
   * @example
   * ```ts
   * const freed = await checkpointer.prune(['user-1'], { strategy: 'keep_latest' });
   * console.log(freed); // { checkpoints: 12, writes: 30, messages: 4 }
   * ```
   */
  async prune(threadIds: string[], options: PruneOptions = {}): Promise<PruneResult> {
    checkPruneArguments(threadIds, options);
    const strategy = options.strategy ?? 'keep_latest';
    const freed: PruneResult = { checkpoints: 0, writes: 0, messages: 0 };
    for (const id of new Set(threadIds)) {
      const thread = this.#thread(id);
      await thread.lock.run(async () => {
        try {
          const done = await this.#store.transaction((tx) => this.#prune(tx, id, strategy));
          freed.checkpoints += done.checkpoints;
          freed.writes += done.writes;
          freed.messages += done.messages;
        } finally {
          thread.spaces.clear();
          thread.nodes.clear();
        }
      });
      if (strategy === 'delete') this.#threads.delete(id);
    }
    return freed;
  }

  /** One thread of `prune`, inside its transaction. */
  async #prune(
    tx: Store,
    threadId: string,
    strategy: 'keep_latest' | 'delete',
  ): Promise<PruneResult> {
    const none = { checkpoints: 0, writes: 0, messages: 0 };
    if (!isSaverThread(await tx.getThread(threadId))) return none;
    // Writers of other processes wait until the thread is rewritten, then find its branches gone.
    for (const b of await tx.listBranches(threadId)) await tx.lockBranch(b.id);
    const records = await tx.exportThread(threadId);
    if (!records) return none;
    const commits = new Map<string, StateCommit[]>();
    for (const c of records.stateCommits) {
      commits.set(c.branchId, [...(commits.get(c.branchId) ?? []), c]);
    }
    const spaces: NamespaceLog[] = [];
    for (const b of records.branches) {
      const ns = namespaceOf(b.name);
      if (ns === null) continue;
      const log = new NamespaceLog(ns === HASHED ? '' : ns, b.id, b.headMessageId);
      for (const c of commits.get(b.id) ?? [])
        log.fold(c.version, c.update as unknown as LogRecord);
      if (ns === HASHED) log.ns = log.recordedNs ?? '';
      spaces.push(log);
    }
    const countWrites = (log: NamespaceLog, ids: Iterable<string>) =>
      [...ids].reduce((n, id) => n + log.writes(id).length, 0);
    const before = {
      checkpoints: spaces.reduce((n, log) => n + log.checkpoints.size, 0),
      writes: spaces.reduce((n, log) => n + countWrites(log, log.written()), 0),
      messages: records.messages.length,
    };
    if (strategy === 'delete') {
      await tx.deleteThread(threadId);
      return before;
    }
    // The compact log of each namespace branch, and the messages what is kept refers to.
    const logs = new Map<string, { records: LogRecord[]; head: string | null }>();
    const used = new Set<string>();
    const useValue = (value: StoredValue) => {
      for (const [, ids] of value[2] ?? []) for (const m of [ids].flat()) used.add(m);
    };
    let kept = { checkpoints: 0, writes: 0 };
    for (const log of spaces) {
      const out: LogRecord[] = [];
      const latest = log.latest;
      const keep: CheckpointRecord[] = [];
      if (latest !== null) {
        const record = log.checkpoints.get(latest)!;
        if (await this.#readsAncestors(record)) keep.push(...[...log.ancestry(latest)].reverse());
        else keep.push({ ...record, vals: await this.#allValues(log, record) });
      }
      // Writes stored before their checkpoint (a put still coming from another process).
      const early = log.written().filter((id) => !log.checkpoints.has(id) && id > (latest ?? ''));
      // The checkpoints first, oldest first, then their writes: no record needs `wf`.
      for (const record of keep) {
        const { wf: _wf, ...rest } = record;
        out.push({ ...rest, top: record.id === latest ? 1 : latest! });
      }
      for (const id of [...keep.map((r) => r.id), ...early]) {
        const byTask = new Map<string, WritesRecord>();
        for (const w of log.writes(id)) {
          const key = `${w.task}\u0000${w.path}`;
          let record = byTask.get(key);
          if (!record) {
            record = { lg: 'writes', cp: id, task: w.task, path: w.path, items: [] };
            if (log.recordedNs !== undefined) record.ns = log.recordedNs;
            byTask.set(key, record);
            out.push(record);
          }
          record.items.push([w.idx, w.channel, w.value]);
          useValue(w.value);
        }
      }
      for (const record of keep) {
        for (const [, , r] of record.vals) {
          if (r !== 0 && isStoredList(r)) {
            if (r.m !== null) used.add(r.m);
          } else if (r !== 0) useValue(r);
        }
      }
      kept = {
        checkpoints: kept.checkpoints + keep.length,
        writes: kept.writes + countWrites(log, [...keep.map((r) => r.id), ...early]),
      };
      const resolved = latest === null ? undefined : log.resolve(latest);
      const head = listHead(resolved, [...this.#messageChannels][0]!) ?? null;
      if (head !== null) used.add(head);
      logs.set(log.branchId, { records: out, head });
    }
    // What the app keeps on the thread: its branches, their commits, named checkpoints, turns.
    for (const b of records.branches) {
      if (logs.has(b.id)) continue;
      if (b.headMessageId !== null) used.add(b.headMessageId);
      for (const c of commits.get(b.id) ?? []) if (c.messageId !== null) used.add(c.messageId);
    }
    for (const c of records.checkpoints) used.add(c.messageId);
    for (const t of records.turns) if (t.messageId !== null) used.add(t.messageId);
    const parents = new Map(records.messages.map((m) => [m.id, m.parentId]));
    const needed = new Set<string>();
    for (const id of used) {
      for (let cur: string | null | undefined = id; cur && !needed.has(cur); cur = parents.get(cur))
        needed.add(cur);
    }
    const freed = {
      checkpoints: before.checkpoints - kept.checkpoints,
      writes: before.writes - kept.writes,
      messages: before.messages - needed.size,
    };
    if (freed.checkpoints === 0 && freed.writes === 0 && freed.messages === 0) return none;
    const ids = new Map([...logs.keys()].map((id) => [id, newId()]));
    const stateCommits: StateCommit[] = [];
    for (const b of records.branches) {
      const log = logs.get(b.id);
      const original = commits.get(b.id) ?? [];
      if (!log) {
        stateCommits.push(...original);
        continue;
      }
      const createdAt = original[original.length - 1]?.createdAt ?? records.thread.createdAt;
      log.records.forEach((record, i) => {
        const latest = record.lg === 'checkpoint' && record.top === 1;
        stateCommits.push({
          branchId: ids.get(b.id)!,
          threadId,
          version: i + 1,
          messageId: latest ? log.head : null,
          messageDepth: null,
          update: record as unknown as JsonObject,
          snapshot: null,
          createdAt,
        });
      });
    }
    await tx.deleteThread(threadId);
    await tx.restoreThread({
      ...records,
      messages: records.messages.filter((m) => needed.has(m.id)),
      branches: records.branches.map((b) =>
        logs.has(b.id) ? { ...b, id: ids.get(b.id)!, headMessageId: logs.get(b.id)!.head } : b,
      ),
      stateCommits,
    });
    return freed;
  }

  /**
   * Whether a checkpoint's values are read from its ancestors as well as its own records: a
   * `DeltaChannel` written since its last snapshot (LangGraph replays the ancestors' writes),
   * or a checkpoint before v4 (its sends are its parent's writes).
   */
  async #readsAncestors(record: CheckpointRecord): Promise<boolean> {
    const [type, header] = record.header;
    const v =
      type === 'json'
        ? (header as { v?: number }).v
        : ((await this.#decode(record.header)) as Checkpoint).v;
    if ((v ?? 0) < 4) return true;
    const meta = (await this.#decode(record.meta)) as { counters_since_delta_snapshot?: object };
    const counters = meta?.counters_since_delta_snapshot;
    return typeof counters === 'object' && counters !== null && Object.keys(counters).length > 0;
  }

  /**
   * A checkpoint's values as `vals` of its own: every channel of its `channel_versions`, with
   * what its lineage resolves it to at that version, or 0 (what `#tuple` leaves out).
   */
  async #allValues(log: NamespaceLog, record: CheckpointRecord): Promise<CheckpointRecord['vals']> {
    const resolved = log.resolve(record.id);
    return Object.entries(await this.#channelVersions(record)).map(([channel, version]) => {
      const r = resolved.get(channel);
      return [channel, version, r && r.v === version ? r.r : 0];
    });
  }

  // ------------------------------------------------------------------ internals

  /**
   * Waits until a checkpoint this saver is putting is stored. LangGraph calls `putWrites` as soon
   * as a task ends but chains each `put` after the previous one, so a task's writes can arrive
   * before the checkpoint they belong to; waiting lets their messages chain after its lists.
   * Returns at once for a checkpoint already stored, else when no put of this saver is coming.
   */
  async #arrival(thread: ThreadLogs, ns: string, id: string): Promise<void> {
    for (let i = 0; i < MAX_ATTEMPTS; i++) {
      if (thread.spaces.get(ns)?.checkpoints.has(id)) return;
      if (i > 0 && thread.puts.size === 0) return;
      if (thread.puts.size > 0) await Promise.race([...thread.puts].map((p) => p.catch(() => {})));
      // The next put of LangGraph's chain is called in the microtasks after the previous one.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** The thread's folded logs; a writer's `config` says the resource a new thread gets. */
  #thread(id: string, config?: RunnableConfig): ThreadLogs {
    let thread = this.#threads.get(id);
    if (thread) {
      this.#threads.delete(id);
    } else {
      thread = new ThreadLogs(id);
      while (this.#threads.size >= this.#cachedThreads) {
        this.#threads.delete(this.#threads.keys().next().value!);
      }
    }
    this.#threads.set(id, thread);
    if (config && this.#resourceOf) thread.resourceId = this.#resourceOf(config) ?? null;
    return thread;
  }

  async #langgraphThreads(): Promise<string[]> {
    const ids: string[] = [];
    let cursor: string | null = null;
    do {
      const page: Awaited<ReturnType<Store['listThreads']>> = await this.#store.listThreads({
        limit: 1000,
        cursor,
      });
      for (const t of page.items) if (t.metadata.langgraph === true) ids.push(t.id);
      cursor = page.nextCursor;
    } while (cursor !== null);
    return ids;
  }

  /** Brings a namespace's log up to date (one query); creates its thread and branch when asked. */
  async #namespace(
    thread: ThreadLogs,
    ns: string,
    create: boolean,
  ): Promise<NamespaceLog | undefined> {
    let log = thread.spaces.get(ns);
    const cached = log !== undefined;
    if (!log) {
      let branch = isSaverThread(await this.#store.getThread(thread.id))
        ? await this.#store.getBranch(thread.id, namespaceBranch(ns))
        : null;
      if (!branch) {
        if (!create) return undefined;
        branch = await this.#createNamespace(thread, ns);
      }
      log = new NamespaceLog(ns, branch.id, branch.headMessageId);
      thread.spaces.set(ns, log);
    }
    await this.#refresh(thread, log);
    if (thread.spaces.has(ns)) return log;
    // The branch went meanwhile: the thread was deleted, or `prune` rewrote it (its branches
    // are new). A log read from the cache is read afresh.
    return create || cached ? this.#namespace(thread, ns, create) : undefined;
  }

  /** Every namespace of a thread, each brought up to date. */
  async #namespaces(thread: ThreadLogs): Promise<NamespaceLog[]> {
    if (!isSaverThread(await this.#store.getThread(thread.id))) {
      thread.spaces.clear();
      return [];
    }
    const known = new Set([...thread.spaces.values()].map((log) => log.branchId));
    for (const branch of await this.#store.listBranches(thread.id)) {
      const ns = namespaceOf(branch.name);
      if (ns === null || known.has(branch.id)) continue;
      if (ns !== HASHED) {
        thread.spaces.set(ns, new NamespaceLog(ns, branch.id, branch.headMessageId));
        continue;
      }
      // A long namespace: its records name it.
      const log = new NamespaceLog('', branch.id, branch.headMessageId);
      await this.#refresh(thread, log);
      if (log.recordedNs !== undefined) {
        log.ns = log.recordedNs;
        thread.spaces.set(log.ns, log);
      }
    }
    const logs = [...thread.spaces.values()];
    for (const log of logs) await this.#refresh(thread, log);
    return [...thread.spaces.values()];
  }

  /**
   * A checkpoint (`wanted`, else the newest) of a namespace not read yet, in a log folded from
   * only as many of its newest commits as its tuple needs (`tailCovers`), read in growing
   * pages. A thread of 1,000 turns reads one page instead of 5,000 records. A tail is not kept
   * (a partial log would mislead every other read); a whole log read is. `'all'`: read the
   * whole log (`#namespace`), the records cannot say how far back to go.
   */
  async #tail(
    thread: ThreadLogs,
    ns: string,
    wanted: string | undefined,
  ): Promise<{ log: NamespaceLog; id: string } | 'all' | undefined> {
    const branch = isSaverThread(await this.#store.getThread(thread.id))
      ? await this.#store.getBranch(thread.id, namespaceBranch(ns))
      : null;
    if (!branch) return undefined;
    const commits: StateCommit[] = [];
    let covered: ReturnType<typeof tailCovers> = 'more';
    let from = 1;
    try {
      const newest = await this.#store.getLatestStateCommit(branch.id);
      from = (newest?.version ?? 0) + 1;
      for (let page = 8; from > 1 && covered === 'more'; page *= 4) {
        const to = from - 1;
        from = Math.max(1, from - page);
        commits.unshift(
          ...(await this.#store.getStateCommits(branch.id, { fromVersion: from, toVersion: to })),
        );
        covered = tailCovers([...commits].reverse(), from, wanted);
      }
    } catch (e) {
      if (!isCairnError(e, 'NOT_FOUND')) throw e;
      // The branch went meanwhile (deleted, or rewritten by `prune`): read it afresh.
      return 'all';
    }
    if (covered === 'all' && from > 1) return 'all';
    const log = new NamespaceLog(ns, branch.id, branch.headMessageId);
    for (const c of commits) log.fold(c.version, c.update as unknown as LogRecord);
    if (typeof covered === 'object') return { log, id: covered.id };
    thread.spaces.set(ns, log);
    return 'all';
  }

  async #refresh(thread: ThreadLogs, log: NamespaceLog): Promise<void> {
    let commits: StateCommit[];
    try {
      commits = await this.#store.getStateCommits(log.branchId, { fromVersion: log.version + 1 });
    } catch (e) {
      // Deleted by another process: forget it, and read it afresh next time.
      if (isCairnError(e, 'NOT_FOUND')) {
        thread.spaces.clear();
        thread.nodes.clear();
        return;
      }
      throw e;
    }
    for (const c of commits) log.fold(c.version, c.update as unknown as LogRecord);
  }

  async #createNamespace(logs: ThreadLogs, ns: string) {
    const threadId = logs.id;
    let thread = await this.#store.getThread(threadId);
    if (!thread) {
      await this.#ignoreConflict(() =>
        // A namespace branch a subgraph has not written to for a while still holds its
        // checkpoints: `Store.sweep` never drops this thread's branches (prune is `prune`).
        this.#store.createThread({
          id: threadId,
          resourceId: logs.resourceId,
          metadata: { langgraph: true, retention: { branchTtlMs: null } },
        }),
      );
      // Made here or, a moment earlier, by someone else: whose it is decides.
      thread = await this.#store.getThread(threadId);
    }
    if (!isSaverThread(thread)) throw notSaverThread(threadId);
    const name = namespaceBranch(ns);
    await this.#ignoreConflict(() =>
      this.#store.createBranch({ threadId, name, headMessageId: null }),
    );
    const branch = await this.#store.getBranch(threadId, name);
    if (!branch)
      throw new CairnError('NOT_FOUND', `branch ${JSON.stringify(name)} vanished while created`);
    return branch;
  }

  async #ignoreConflict(fn: () => Promise<unknown>): Promise<void> {
    try {
      await fn();
    } catch (e) {
      if (!isCairnError(e, 'CONFLICT')) throw e;
    }
  }

  /**
   * Appends one log record to a namespace, planned by `plan` on the namespace's folded log
   * inside the transaction that stores it. Appends to one thread are committed in order and
   * together: the ones that arrive while a transaction of the thread is running (LangGraph
   * puts a task's writes and the next checkpoint while the previous one is being stored) are
   * stored by the next transaction, each planned on the log with the ones before it folded.
   */
  #append(thread: ThreadLogs, ns: string, plan: Plan): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      thread.queue.push({ ns, plan, resolve, reject });
      if (!thread.draining) this.#drain(thread);
    });
  }

  /** Commits the queued appends of a thread, a batch a transaction, until none is left. */
  #drain(thread: ThreadLogs): void {
    thread.draining = true;
    void thread.lock
      .run(async () => {
        while (thread.queue.length > 0) {
          // The appends that the one just stored lets LangGraph make join this batch.
          await new Promise((resolve) => setImmediate(resolve));
          const batch = thread.queue.splice(0);
          try {
            await this.#commit(thread, batch);
            for (const job of batch) job.resolve();
          } catch (e) {
            if (batch.length === 1) {
              batch[0]!.reject(e);
              continue;
            }
            // One append's failure is its own: each is stored again alone.
            for (const job of batch) {
              try {
                await this.#commit(thread, [job]);
                job.resolve();
              } catch (one) {
                job.reject(one);
              }
            }
          }
        }
      })
      .finally(() => {
        thread.draining = false;
        if (thread.queue.length > 0) this.#drain(thread);
      });
  }

  /**
   * Stores a batch of appends in one transaction: the records of each namespace in one
   * commit (a `BatchRecord` when there are several), each record planned on the log with the
   * ones before it folded. A commit is written against the log version this process has
   * folded (the expected version is the check), without reading the log first. When another
   * process appended or moved the head first (CONFLICT), it reads what is new of both and
   * plans again; when the branch is gone (NOT_FOUND: the thread deleted by another process),
   * it reads the thread afresh. A batch that fails forgets the namespaces it folded records
   * into (they are read again) and the message nodes it cached.
   */
  async #commit(thread: ThreadLogs, batch: AppendJob[]): Promise<void> {
    let read = false;
    for (let attempt = 1; ; attempt++) {
      const logs = new Map<string, NamespaceLog>();
      for (const { ns } of batch) {
        if (logs.has(ns)) continue;
        let log = thread.spaces.get(ns);
        if (!log) {
          log = (await this.#namespace(thread, ns, true))!;
          read = true;
        }
        logs.set(ns, log);
      }
      interface Commit {
        expected: number;
        head: string | null;
        records: Array<CheckpointRecord | WritesRecord>;
        messages: NewMessage[];
        messageId: string | null;
      }
      const commits = new Map<string, Commit>();
      const added: string[] = [];
      // The namespaces that get several records.
      const shared = new Set(batch.map((j) => j.ns).filter((ns, i, all) => all.indexOf(ns) !== i));
      try {
        await this.#store.transaction(async (tx) => {
          for (const { ns, plan } of batch) {
            const log = logs.get(ns)!;
            const planned = await plan(log, tx);
            if (!planned) continue;
            let c = commits.get(ns);
            if (!c) {
              c = {
                expected: log.version,
                head: log.head,
                records: [],
                messages: [],
                messageId: null,
              };
              commits.set(ns, c);
            }
            c.records.push(planned.record);
            c.messages.push(...planned.messages);
            if (planned.messageId !== null) c.messageId = planned.messageId;
            for (const [id, node] of planned.added) {
              thread.nodes.set(id, node);
              added.push(id);
            }
            // The next record of the namespace in the batch is planned on this one: folded
            // now (a failure forgets the namespace), else once stored.
            if (shared.has(ns)) {
              log.add(c.expected + 1, planned.record);
              if (planned.messageId !== null) log.head = planned.messageId;
            }
          }
          for (const [ns, c] of commits) {
            const { branchId } = logs.get(ns)!;
            const moves = c.messageId !== null && c.messageId !== c.head;
            // Messages that end at the new head are added and the head moved in one write.
            const onBranch = moves && c.messages.at(-1)?.id === c.messageId;
            if (onBranch) await tx.addMessagesOnBranch(branchId, c.head, c.messages);
            else if (c.messages.length > 0) await tx.addMessages(c.messages);
            const record: LogRecord =
              c.records.length === 1 ? c.records[0]! : { lg: 'batch', records: c.records };
            await tx.appendStateCommit(
              { branchId, messageId: c.messageId, update: record as unknown as JsonObject },
              c.expected,
            );
            if (moves && !onBranch) await tx.moveHead(branchId, c.head, c.messageId!);
          }
        });
        for (const [ns, c] of commits) {
          if (shared.has(ns)) continue;
          const log = logs.get(ns)!;
          log.fold(c.expected + 1, c.records[0]!);
          if (c.messageId !== null) log.head = c.messageId;
        }
        return;
      } catch (e) {
        for (const ns of shared) thread.spaces.delete(ns);
        for (const id of added) thread.nodes.delete(id);
        if (attempt >= MAX_ATTEMPTS) throw e;
        if (isCairnError(e, 'CONFLICT')) {
          // Another writer moved a log or a branch head: read what is new of both.
          for (const [ns, log] of logs) {
            if (thread.spaces.get(ns) !== log) continue;
            await this.#refresh(thread, log);
            const branch = thread.spaces.has(ns)
              ? await this.#store.getBranchById(log.branchId)
              : null;
            if (branch) log.head = branch.headMessageId;
            else thread.spaces.delete(ns);
          }
        } else if (isCairnError(e, 'NOT_FOUND') && !read) {
          // Planned on what this process read before: the thread may be gone meanwhile, or
          // rewritten by `prune` (its namespace branches are new).
          thread.spaces.clear();
          thread.nodes.clear();
        } else throw e;
      }
    }
  }

  /** The message ids of a stored list, root first, reading the chain once if it is not cached. */
  async #chainIds(
    thread: ThreadLogs,
    list: StoredList,
    store: Store = this.#store,
  ): Promise<string[]> {
    if (list.m === null) return [];
    for (let attempt = 0; attempt < 2; attempt++) {
      const ids: string[] = [];
      let cur: string | null = list.m;
      // Bounded by the recorded length: a chain longer than that is not this list's.
      while (cur !== null && ids.length <= list.n) {
        const node = thread.nodes.get(cur);
        if (!node) break;
        ids.push(cur);
        cur = node.parent;
      }
      if (cur === null || ids.length > list.n) {
        if (ids.length !== list.n) {
          const has = cur === null ? `${ids.length}` : `more than ${list.n}`;
          throw new CairnError(
            'INVALID_UPDATE',
            `message chain ${JSON.stringify(list.m)} has ${has} messages, the checkpoint recorded ${list.n}`,
          );
        }
        return ids.reverse();
      }
      for (const m of await store.getChain(list.m)) {
        thread.nodes.set(m.id, { parent: m.parentId, value: expandMessage(m.type, m.data) });
      }
    }
    throw new CairnError('NOT_FOUND', `message chain ${JSON.stringify(list.m)} is incomplete`);
  }

  /**
   * Where a value written to `channel` holds messages bound for a message channel: the value
   * itself for a message channel, the channel's key of the graph's input. `[key, channel]`.
   */
  #slots(channel: string, payload: JsonValue): Array<[string | null, string]> {
    if (this.#messageChannels.has(channel)) return [[null, channel]];
    if (channel !== START || typeof payload !== 'object' || payload === null) return [];
    if (Array.isArray(payload)) return [];
    return Object.keys(payload)
      .filter((key) => this.#messageChannels.has(key))
      .map((key) => [key, key]);
  }

  /**
   * A value with the messages it holds for a message channel (a message, or a list of them)
   * stored as Cairn messages chained after that channel's head, and referred to by id.
   */
  #refer(
    channel: string,
    value: StoredValue,
    headOf: (channel: string) => string | null | undefined,
    nodes: NodeWriter,
  ): StoredValue {
    const [type, payload] = value;
    if (type !== 'json') return value;
    const refs: MessageRefs = [];
    let rest = payload;
    for (const [key, target] of this.#slots(channel, payload)) {
      const slot = key === null ? payload : (payload as JsonObject)[key]!;
      const items = Array.isArray(slot) ? slot : [slot];
      if (items.length === 0 || !items.every(isMessage)) continue;
      const after = headOf(target);
      if (after === undefined) continue;
      let head = after;
      const ids = items.map((item) => {
        head = nodes.node(JSON.stringify(item), head);
        return head;
      });
      refs.push([key, Array.isArray(slot) ? ids : ids[0]!]);
      rest = key === null ? null : { ...(rest as JsonObject), [key]: null };
    }
    return refs.length > 0 ? ['json', rest, refs] : value;
  }

  /**
   * The messages stored for what follows a checkpoint, their nodes cached: the ones its values
   * (the graph's input) and pending writes refer to, and the ones its children's lists added
   * after its own (a child can be stored before its parent's writes arrive).
   */
  async #pool(thread: ThreadLogs, log: NamespaceLog, id: string, store: Store): Promise<string[]> {
    const ids: string[] = [];
    const collect = (value: StoredValue) => {
      for (const [, refs] of value[2] ?? [])
        ids.push(...(typeof refs === 'string' ? [refs] : refs));
    };
    for (const [, , r] of log.checkpoints.get(id)?.vals ?? []) {
      if (r !== 0 && !isStoredList(r)) collect(r);
    }
    for (const w of log.writes(id)) collect(w.value);
    await this.#load(thread, ids, store);
    const own = log.checkpoints.has(id) ? log.resolve(id) : undefined;
    for (const child of log.children(id)) {
      for (const [channel, , r] of child.vals) {
        if (r === 0 || !isStoredList(r)) continue;
        const mine = own?.get(channel)?.r;
        const chain = await this.#chainIds(thread, r, store);
        ids.push(...chain.slice(mine && isStoredList(mine) ? mine.n : 0));
      }
    }
    return ids;
  }

  /** Caches the message nodes not yet cached. */
  async #load(thread: ThreadLogs, ids: string[], store: Store = this.#store): Promise<void> {
    for (const id of ids) {
      if (thread.nodes.has(id)) continue;
      const m = await store.getMessage(id);
      if (!m) throw new CairnError('NOT_FOUND', `message ${JSON.stringify(id)} is missing`);
      thread.nodes.set(id, { parent: m.parentId, value: expandMessage(m.type, m.data) });
    }
  }

  /**
   * A stored value. A message list is revived as a whole, or element by element (each element
   * was serialized on its own by `put`, so reviving it on its own gives the same value): with
   * the default serde, through `MessageReviver`'s direct build; given `revived`, from the
   * elements revived so far, a new array per call, its elements shared.
   */
  async #value(
    thread: ThreadLogs,
    ref: StoredValue | StoredList,
    revived?: Revived,
  ): Promise<unknown> {
    if (!isStoredList(ref)) return this.#decode(ref, thread);
    const ids = await this.#chainIds(thread, ref);
    const fast = this.#reviver.covers(this.serde);
    if (!revived && !fast) {
      const json = `[${ids.map((id) => nodeJson(thread.nodes.get(id)!)).join(',')}]`;
      return this.serde.loadsTyped('json', json);
    }
    const list: unknown[] = [];
    for (const id of ids) {
      let value = revived?.get(id);
      if (value === undefined) {
        const node = thread.nodes.get(id)!;
        const slow = () => this.serde.loadsTyped('json', nodeJson(node));
        value = await (fast ? this.#reviver.revive(node, slow) : slow());
        revived?.set(id, value);
      }
      list.push(value);
    }
    return list;
  }

  async #encode(value: unknown): Promise<StoredValue> {
    const [type, bytes] = await this.#dumper.dump(this.serde, value);
    if (type === 'json') {
      return ['json', JSON.parse(typeof bytes === 'string' ? bytes : decoder.decode(bytes))];
    }
    return [type, Buffer.from(bytes).toString('base64')];
  }

  async #decode([type, payload, refs]: StoredValue, thread?: ThreadLogs): Promise<unknown> {
    if (type !== 'json')
      return this.serde.loadsTyped(type, Buffer.from(payload as string, 'base64'));
    if (!refs) return this.serde.loadsTyped('json', JSON.stringify(payload));
    if (!thread) throw new CairnError('INVALID_UPDATE', 'a stored value refers to messages');
    const list = (ids: string | string[]) =>
      typeof ids === 'string'
        ? nodeJson(thread.nodes.get(ids)!)
        : `[${ids.map((id) => nodeJson(thread.nodes.get(id)!)).join(',')}]`;
    await this.#load(
      thread,
      refs.flatMap(([, ids]) => ids),
    );
    if (refs.length === 1 && refs[0]![0] === null) {
      return this.serde.loadsTyped('json', list(refs[0]![1]));
    }
    const value = { ...(payload as JsonObject) };
    for (const [key, ids] of refs) value[key!] = JSON.parse(list(ids)) as JsonValue;
    return this.serde.loadsTyped('json', JSON.stringify(value));
  }

  async #channelVersions(record: CheckpointRecord): Promise<ChannelVersions> {
    const [type, payload] = record.header;
    if (type === 'json') return ((payload as JsonObject).channel_versions ?? {}) as ChannelVersions;
    return ((await this.#decode(record.header)) as Checkpoint).channel_versions ?? {};
  }

  async #tuple(
    thread: ThreadLogs,
    log: NamespaceLog,
    record: CheckpointRecord,
    revived?: Revived,
  ): Promise<CheckpointTuple> {
    const checkpoint = {
      id: record.id,
      ...((await this.#decode(record.header)) as object),
    } as Checkpoint;
    const channelValues: Record<string, unknown> = {};
    const resolved = log.resolve(record.id);
    for (const [channel, version] of Object.entries(checkpoint.channel_versions ?? {})) {
      const r = resolved.get(channel);
      if (!r || r.r === 0 || r.v !== version) continue;
      channelValues[channel] = await this.#value(thread, r.r, revived);
    }
    checkpoint.channel_values = channelValues;
    const pending = log.writes(record.id);
    const pendingWrites = await Promise.all(
      pending.map(
        async (w): Promise<CheckpointPendingWrite> => [
          w.task,
          w.channel,
          await this.#decode(w.value, thread),
        ],
      ),
    );
    migrateCheckpoint(this.#schema, checkpoint, pendingWrites, record.sv ?? 1, () =>
      this.getNextVersion(undefined),
    );
    if (checkpoint.v < 4 && record.parent !== null) {
      // Checkpoints before v4 kept sends in the parent's TASKS writes.
      const sends = log.writes(record.parent).filter((w) => w.channel === TASKS);
      channelValues[TASKS] = await Promise.all(sends.map((w) => this.#decode(w.value, thread)));
      const versions = Object.values(checkpoint.channel_versions ?? {});
      checkpoint.channel_versions = {
        ...checkpoint.channel_versions,
        [TASKS]:
          versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined),
      };
    }
    const tuple: CheckpointTuple = {
      config: {
        configurable: { thread_id: thread.id, checkpoint_ns: log.ns, checkpoint_id: record.id },
      },
      checkpoint,
      metadata: (await this.#decode(record.meta)) as CheckpointMetadata,
      pendingWrites,
    };
    if (record.parent !== null) {
      tuple.parentConfig = {
        configurable: { thread_id: thread.id, checkpoint_ns: log.ns, checkpoint_id: record.parent },
      };
    }
    return tuple;
  }
}
