import {
  AsyncLock,
  CairnError,
  checkKeys,
  invalidArgument,
  isCairnError,
  type JsonObject,
  keysOf,
  MEMORY_SCOPES,
  MEMORY_TYPES,
  type Memory,
  type MemoryScope,
  type MemorySource,
  type MemoryType,
  newId,
  type Timestamp,
  type Viewer,
} from '@cairn/core';
import {
  type BranchView,
  contentHash,
  MAX_MEMORY_TEXT_LENGTH,
  type MemoryFilter,
  type MemoryHit,
  type NewMemory,
  type Store,
} from '@cairn/store';
import {
  branchAnchor,
  checkId,
  checkMemoryPatch,
  checkMemoryVersion,
  normalizeNewMemories,
  planSupersede,
} from '@cairn/store/adapter';
import { type ChunkOptions, checkChunkOptions, chunkText } from './chunk-text.js';
import {
  type ConsolidateOptions,
  type ConsolidationReport,
  checkConsolidateOptions,
  consolidatePass,
} from './consolidation.js';
import { checkEmbedder, type Embedder, embedChecked } from './embedder.js';
import { hashingEmbedder } from './hashing-embedder.js';
import { hybridFusion, type RankingName } from './rank-fusion.js';

export interface CreateMemoryOptions {
  store: Store;
  /** Default: `hashingEmbedder({ dimensions: 384 })` — words and their parts, not meaning. */
  embedder?: Embedder;
  /** The agent this memory belongs to: the author of what it remembers. */
  agentId: string;
  /** Texts per embedder call on bulk writes (default 64). */
  embedBatchSize?: number;
}

/** What `remember` stores. */
export interface RememberInput {
  text: string;
  /** Default `custom`. */
  type?: MemoryType;
  entityId?: string | null;
  roomId?: string | null;
  worldId?: string | null;
  /**
   * Who may see it. Default `private`: only this agent — whatever room or world is given.
   * Pass `room` (needs `roomId`) or `shared` (needs `worldId`) to share it.
   */
  scope?: MemoryScope;
  metadata?: JsonObject;
  id?: string;
  createdAt?: Timestamp;
  /** When the fact starts to hold (ms); default null: since always. */
  validFrom?: Timestamp | null;
  /** When it stops holding (exclusive); default null: open. */
  validTo?: Timestamp | null;
  /**
   * The messages it was learned from; recall hits carry it (`hit.memory.source`). With
   * `branchScoped: true` the memory is recalled only from a branch whose chain holds the
   * last of these messages (see `RecallOptions.branch`).
   */
  source?: MemorySource | null;
}

/** The new value of a fact, for `supersede`. */
export interface SupersedeInput {
  text: string;
  /** When the new value starts to hold; default now. The old value holds until then. */
  validFrom?: Timestamp;
  /** Default null: open. */
  validTo?: Timestamp | null;
  /** Default: the old version's metadata. */
  metadata?: JsonObject;
  /** Default: the old version's source. */
  source?: MemorySource | null;
}

/**
 * The instant a recall answers for. A number `t`: what the agent believed at `t` about `t`
 * (`{ validAt: t, knownAt: t }`). `validAt`: what held then (event time); `knownAt`
 * (default: now): as the store knew it then (system time), each version read as it was
 * recorded by that instant.
 */
export type AsOf = Timestamp | { validAt: Timestamp; knownAt?: Timestamp };

export interface WriteOptions {
  /** Store the text again even when the same text is already stored in the same place. */
  allowDuplicate?: boolean;
  signal?: AbortSignal;
}

export interface Progress {
  phase: 'embedding' | 'storing';
  /** Texts embedded (or found in the embedding cache) so far, or memories stored. */
  done: number;
  total: number;
}

export interface RememberManyOptions extends WriteOptions {
  onProgress?: (progress: Progress) => void;
}

export interface DocumentInput {
  text: string;
  title?: string;
  entityId?: string | null;
  roomId?: string | null;
  worldId?: string | null;
  /** Default `private`, as for `remember`. */
  scope?: MemoryScope;
  metadata?: JsonObject;
  createdAt?: Timestamp;
}

export interface IngestOptions extends ChunkOptions, RememberManyOptions {}

export interface IngestedDocument {
  /**
   * Type `document`, without an embedding: the whole text (its first
   * `MAX_MEMORY_TEXT_LENGTH` characters when longer; `metadata.textLength` is the whole).
   */
  document: Memory;
  /** The chunks, type `fragment`, embedded, `metadata.documentId` = the document's id. */
  fragments: Memory[];
  /** True when the same document was already stored and nothing was written. */
  existing: boolean;
}

export type RecallMode = 'hybrid' | 'vector' | 'keyword';

export interface RecallOptions {
  /**
   * Whose eyes: only memories `canSee(viewer, memory)` allows are returned, enforced inside
   * the store's query. Default: this agent, in the `roomId` and `worldId` given here (so,
   * without them, only its own private memories).
   */
  viewer?: Viewer;
  types?: MemoryType[];
  roomId?: string;
  worldId?: string;
  entityId?: string;
  /** Default 10, at most 1000. */
  limit?: number;
  /**
   * - `vector`: the lowest cosine similarity (-1..1) a hit may have; applied in the store.
   * - `hybrid`: the same cosine floor, on the vector ranking before fusion; keyword hits
   *   enter the fusion regardless (they contain query words).
   * - `keyword`: the lowest `score`, the store's keyword relevance (its scale is the
   *   store's: compare only within one store).
   */
  threshold?: number;
  /** Default `hybrid`. */
  mode?: RecallMode;
  /** When given, each score is multiplied by 0.5^(age / half-life) after the threshold. */
  recencyHalfLifeMs?: number;
  /** The clock for recency and for what holds now (default `Date.now()`). */
  now?: Timestamp;
  /**
   * Answer as of another instant (see `AsOf`). Default: what holds now, as known now:
   * the current version of each fact, and only facts whose validity includes now.
   */
  asOf?: AsOf;
  /**
   * Where the conversation stands: a thread and one of its branches (default: the
   * thread's active branch). Branch-scoped memories (`source.branchScoped`) are recalled
   * only when their message is on that branch's chain: from the branch they were learned
   * on and branches forked after it, not from one forked before or rewound past it.
   * Without it no branch-scoped memory is recalled. Other memories are unaffected.
   */
  branch?: BranchView;
  signal?: AbortSignal;
}

export interface RecallHit {
  memory: Memory;
  /**
   * Higher is better. `vector`: cosine similarity. `keyword`: the store's keyword
   * relevance. `hybrid`: `1 / (1 + e^-z)` (0 to 1), z the hit's largest standard score in
   * the two searches (see `recall`). Times the recency factor when `recencyHalfLifeMs` is
   * given.
   */
  score: number;
  /** The rankings that found it: `['vector']`, `['keyword']` or both. */
  sources: RankingName[];
  /** Its 1-based rank in each ranking that found it. */
  ranks: Partial<Record<RankingName, number>>;
  /** Cosine similarity to the query, when both have embeddings (null in keyword mode). */
  similarity: number | null;
  /** The store's keyword relevance, when the keyword ranking found it. */
  keywordScore: number | null;
}

export interface RecentOptions {
  roomId?: string;
  types?: MemoryType[];
  /** Default 20, at most 10000. */
  limit?: number;
  /** Default: this agent, in `roomId`. */
  viewer?: Viewer;
  /** Where the conversation stands, for branch-scoped memories (see `RecallOptions.branch`). */
  branch?: BranchView;
}

export interface UpdateInput {
  text?: string;
  /** Replaces the metadata. */
  metadata?: JsonObject;
}

/** `startConsolidation`'s options: `consolidate`'s, and when and where to report. */
export interface ConsolidationRunnerOptions extends ConsolidateOptions {
  /** The pause after each pass before the next (ms). Default 60,000. */
  intervalMs?: number;
  onReport?: (report: ConsolidationReport) => void;
  /** A pass that failed; the next one still runs on time. */
  onError?: (error: unknown) => void;
}

/** A background consolidation started by `startConsolidation`. */
export interface ConsolidationRunner {
  /** The last pass's report; null before the first ends. */
  readonly lastReport: ConsolidationReport | null;
  /** The last failed pass's error; undefined when none failed. */
  readonly lastError: unknown;
  /** Stops: no pass starts after it, the running one ends after its current decision. */
  stop(): Promise<void>;
}

const LOOKUP_CHUNK = 500;

const invalid = invalidArgument;

/** A field's label: `at.name`, or the bare name for a single call's own input (`at` ''). */
const fieldOf = (at: string, name: string) => (at === '' ? name : `${at}.${name}`);

function checkText(value: unknown, label: string): string {
  if (typeof value !== 'string' || value.trim() === '')
    throw invalid(`${label} must be a non-blank string`, { field: label });
  return value;
}

function optionalString(value: unknown, label: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || value === '')
    throw invalid(`${label} must be a non-empty string or null`, { field: label, value });
  return value;
}

function checkLimit(value: unknown, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > max) {
    throw invalid(`limit must be an integer from 1 to ${max}, got ${String(value)}`);
  }
  return value as number;
}

function checkViewer(viewer: unknown): Viewer {
  const v = viewer as Viewer | null;
  if (typeof v !== 'object' || v === null || typeof v.agentId !== 'string' || v.agentId === '') {
    throw invalid('viewer must be an object with a non-empty agentId');
  }
  checkKeys(v, 'viewer', keysOf<Viewer>()(['agentId', 'roomId', 'worldId']));
  return v;
}

const WRITE_KEYS = keysOf<WriteOptions>()(['allowDuplicate', 'signal']);
const REMEMBER_MANY_KEYS = keysOf<RememberManyOptions>()([
  'allowDuplicate',
  'signal',
  'onProgress',
]);
const REMEMBER_KEYS = keysOf<RememberInput>()([
  'text',
  'type',
  'entityId',
  'roomId',
  'worldId',
  'scope',
  'metadata',
  'id',
  'createdAt',
  'validFrom',
  'validTo',
  'source',
]);
/** Where an option given inside a memory's input goes. */
const OPTIONS_ELSEWHERE = Object.fromEntries(
  [...REMEMBER_MANY_KEYS, 'chunkSize', 'overlap'].map((k) => [
    k,
    `${k} is an option: pass it in the second argument`,
  ]),
);

/**
 * The longest document `ingestDocument` takes, in characters (UTF-16 code units, as
 * `text.length` counts): ten million, some 5,000 pages, about 11,000 fragments at the
 * default chunk size, stored in one atomic write.
 */
export const MAX_DOCUMENT_LENGTH = 10_000_000;

/** The first `max` characters of `text`, not cutting a surrogate pair in two. */
function beginning(text: string, max: number): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

/** Where a new memory goes and who may see it. */
type Placed = Pick<Memory, 'type' | 'agentId' | 'entityId' | 'roomId' | 'worldId' | 'scope'>;

function place(
  input: RememberInput | DocumentInput,
  agentId: string,
  type: MemoryType,
  at: string,
): Placed {
  const scope = input.scope ?? 'private';
  if (!MEMORY_SCOPES.includes(scope))
    throw invalid(
      `${fieldOf(at, 'scope')} must be one of ${MEMORY_SCOPES.join(', ')}, got ${JSON.stringify(scope)}`,
      { field: fieldOf(at, 'scope'), value: scope },
    );
  if (!MEMORY_TYPES.includes(type))
    throw invalid(
      `${fieldOf(at, 'type')} must be one of ${MEMORY_TYPES.join(', ')}, got ${JSON.stringify(type)}`,
      { field: fieldOf(at, 'type'), value: type },
    );
  const placed: Placed = {
    type,
    agentId,
    entityId: optionalString(input.entityId, fieldOf(at, 'entityId')),
    roomId: optionalString(input.roomId, fieldOf(at, 'roomId')),
    worldId: optionalString(input.worldId, fieldOf(at, 'worldId')),
    scope,
  };
  const needs = scope === 'room' ? 'roomId' : scope === 'shared' ? 'worldId' : null;
  if (needs !== null && placed[needs] === null) {
    throw invalid(
      `${fieldOf(at, needs)} is required: a ${scope === 'room' ? 'room-scoped' : 'shared'} memory needs a ${needs}`,
      { field: fieldOf(at, needs), scope },
    );
  }
  if (
    input.metadata !== undefined &&
    (typeof input.metadata !== 'object' || input.metadata === null || Array.isArray(input.metadata))
  ) {
    throw invalid(`${fieldOf(at, 'metadata')} must be an object`, {
      field: fieldOf(at, 'metadata'),
    });
  }
  return placed;
}

/** Two memories are the same remembrance when these agree. */
function dedupeKey(
  p: Pick<Memory, 'type' | 'agentId' | 'scope' | 'contentHash'> & {
    roomId?: string | null;
    worldId?: string | null;
    validFrom?: Timestamp | null;
    validTo?: Timestamp | null;
    source?: MemorySource | null;
  },
): string {
  return JSON.stringify([
    p.type,
    p.agentId,
    p.scope,
    p.roomId ?? null,
    p.worldId ?? null,
    p.contentHash,
    p.validFrom ?? null,
    p.validTo ?? null,
    // A branch-scoped memory is the same only where it hangs on the same message.
    branchAnchor({ source: p.source ?? null }),
  ]);
}

/** `RecallOptions.asOf` (or now) as the store's filter. */
function timeFilter(
  asOf: AsOf | undefined,
  now: Timestamp,
): Pick<MemoryFilter, 'validAt' | 'knownAt'> {
  if (asOf === undefined) return { validAt: now };
  const instant = (v: unknown, label: string) => {
    if (typeof v !== 'number' || !Number.isFinite(v))
      throw invalid(`${label} must be a timestamp (ms since the epoch), got ${String(v)}`, {
        field: label,
      });
    return v;
  };
  if (typeof asOf === 'number') return { validAt: instant(asOf, 'asOf'), knownAt: asOf };
  if (typeof asOf !== 'object' || asOf === null)
    throw invalid(`asOf must be a timestamp or { validAt, knownAt? }, got ${String(asOf)}`, {
      field: 'asOf',
    });
  checkKeys(asOf, 'asOf', keysOf<Exclude<AsOf, number>>()(['validAt', 'knownAt']));
  return {
    validAt: instant(asOf.validAt, 'asOf.validAt'),
    ...(asOf.knownAt === undefined ? {} : { knownAt: instant(asOf.knownAt, 'asOf.knownAt') }),
  };
}

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * The store's own checks of new memories (text length and characters, ids, metadata as
 * JSON), run before anything is embedded: input the store would refuse costs no embedder
 * call and fails with the error the store gives. Ids are checked one by one: the same id
 * may come twice with the same text, which is stored once.
 */
function checkAsStored(memories: Draft['memory'][]): void {
  normalizeNewMemories(
    memories.map(({ id: _, ...m }) => m),
    0,
  );
  memories.forEach((m, i) => {
    if (m.id !== undefined) checkId(m.id, `memories[${i}].id`);
  });
}

interface Draft {
  memory: NewMemory & Placed & { contentHash: string };
  /** Index of the draft it duplicates in the same batch, or -1. */
  sameAs: number;
  /** Whether to embed it. */
  embed: boolean;
}

/**
 * An agent's long-term memory over any Cairn store. Create it with `createMemory`.
 *
 * Writes through one instance run one at a time, so the duplicate check and the insert
 * of one call are not interleaved with another call's; instances in other processes can
 * still race to store the same text twice.
 */
export class AgentMemory {
  readonly agentId: string;
  readonly embedder: Embedder;
  #store: Store;
  #batchSize: number;
  #lock = new AsyncLock();
  #version = 0;
  #spaceChecked = false;
  #queryVectors = new Map<string, number[]>();

  constructor(options: CreateMemoryOptions) {
    if (typeof options !== 'object' || options === null)
      throw invalid('createMemory expects { store, agentId, embedder? }');
    checkKeys(
      options,
      'createMemory options',
      keysOf<CreateMemoryOptions>()(['store', 'embedder', 'agentId', 'embedBatchSize']),
    );
    const { store } = options;
    if (typeof store !== 'object' || store === null || typeof store.searchMemories !== 'function') {
      throw invalid('createMemory: store must be a Cairn Store');
    }
    if (typeof options.agentId !== 'string' || options.agentId === '')
      throw invalid('createMemory: agentId must be a non-empty string');
    this.#store = store;
    this.agentId = options.agentId;
    this.embedder = checkEmbedder(options.embedder ?? hashingEmbedder({ dimensions: 384 }));
    this.#batchSize = checkLimit(options.embedBatchSize, 64, 10_000);
  }

  /**
   * A number that changes whenever a memory is added, updated or removed through this
   * instance. Use it in cache keys (e.g. @cairn/compose's `version`).
   */
  get version(): number {
    return this.#version;
  }

  /**
   * Stores one memory, embedded. If the same text (same type, agent, scope, room and
   * world) is already stored, returns that memory instead unless `allowDuplicate`.
   *
   * @example
   * ```ts
   * await memory.remember({ text: 'Ada prefers short answers', entityId: 'ada' });          // private
   * await memory.remember({ text: 'The deadline is Friday', roomId: 'r1', scope: 'room' });
   * ```
   */
  async remember(input: RememberInput, options: WriteOptions = {}): Promise<Memory> {
    checkKeys(options, 'remember options', WRITE_KEYS);
    const [memory] = await this.#rememberAll([input], options, () => '');
    return memory!;
  }

  /**
   * Stores many memories with batched embedding, all or none. Returns them in input order
   * (an existing memory in place of a duplicate).
   *
   * @example
   * ```ts
   * await memory.rememberMany(notes.map((text) => ({ text })), {
   *   onProgress: ({ phase, done, total }) => console.log(phase, done, total),
   * });
   * ```
   */
  async rememberMany(items: RememberInput[], options: RememberManyOptions = {}): Promise<Memory[]> {
    if (!Array.isArray(items)) throw invalid('rememberMany expects an array');
    checkKeys(options, 'rememberMany options', REMEMBER_MANY_KEYS);
    return this.#rememberAll(items, options, (i) => `memories[${i}]`);
  }

  /** `labelOf(i)` names item i in error messages: a batch position, or '' for a single call. */
  async #rememberAll(
    items: RememberInput[],
    options: RememberManyOptions,
    labelOf: (i: number) => string,
  ): Promise<Memory[]> {
    const drafts = items.map((input, i): Draft => {
      const at = labelOf(i);
      if (typeof input !== 'object' || input === null)
        throw invalid(
          `${at === '' ? 'remember expects' : `${at} must be`} an object { text, ... }`,
        );
      checkKeys(input, at === '' ? 'remember' : at, REMEMBER_KEYS, OPTIONS_ELSEWHERE);
      const text = checkText(input.text, fieldOf(at, 'text'));
      const memory = {
        ...place(input, this.agentId, input.type ?? 'custom', at),
        content: { text },
        contentHash: contentHash(text),
        ...(input.metadata === undefined ? {} : { metadata: input.metadata }),
        ...(input.id === undefined ? {} : { id: input.id }),
        ...(input.createdAt === undefined ? {} : { createdAt: input.createdAt }),
        ...(input.validFrom === undefined ? {} : { validFrom: input.validFrom }),
        ...(input.validTo === undefined ? {} : { validTo: input.validTo }),
        ...(input.source === undefined ? {} : { source: input.source }),
      };
      return { memory, sameAs: -1, embed: true };
    });
    checkAsStored(drafts.map((d) => d.memory));
    return this.#lock.run(() => this.#write(drafts, options));
  }

  /**
   * Stores a document and its fragments: the text is cut into chunks (`chunkSize`
   * characters, `overlap` repeated), each stored as a `fragment` memory with
   * `metadata.documentId` and `metadata.position`, embedded in batches; the document
   * itself is stored without an embedding (long texts exceed many models' input), with
   * `metadata.fragmentIds` and `metadata.textLength`, holding the whole text up to
   * `MAX_MEMORY_TEXT_LENGTH` characters and its beginning beyond (the fragments hold it
   * all). Documents up to `MAX_DOCUMENT_LENGTH` characters. All in one atomic write.
   * Ingesting the same text again in the same place returns what is stored
   * (`existing: true`) unless `allowDuplicate`.
   *
   * @example
   * ```ts
   * const { document, fragments } = await memory.ingestDocument(
   *   { text: paper, title: 'On cairns', scope: 'shared', worldId: 'lab' },
   *   { chunkSize: 800, overlap: 80, onProgress: (p) => bar.update(p.done / p.total) },
   * );
   * ```
   */
  async ingestDocument(
    input: DocumentInput,
    options: IngestOptions = {},
  ): Promise<IngestedDocument> {
    if (typeof input !== 'object' || input === null)
      throw invalid('ingestDocument expects { text, title?, ... }');
    checkKeys(
      input,
      'ingestDocument',
      keysOf<DocumentInput>()([
        'text',
        'title',
        'entityId',
        'roomId',
        'worldId',
        'scope',
        'metadata',
        'createdAt',
      ]),
      OPTIONS_ELSEWHERE,
    );
    checkKeys(
      options,
      'ingestDocument options',
      keysOf<IngestOptions>()(['chunkSize', 'overlap', ...REMEMBER_MANY_KEYS]),
    );
    const text = checkText(input.text, 'document.text');
    if (text.length > MAX_DOCUMENT_LENGTH)
      throw invalid(
        `document.text must be at most ${MAX_DOCUMENT_LENGTH} characters, got ${text.length}`,
        { field: 'document.text' },
      );
    if (input.title !== undefined && typeof input.title !== 'string')
      throw invalid('document.title must be a string');
    const chunkOptions = checkChunkOptions(options);
    if (chunkOptions.chunkSize > MAX_MEMORY_TEXT_LENGTH)
      throw invalid(
        `chunkSize must be at most ${MAX_MEMORY_TEXT_LENGTH} (a fragment is a memory), got ${chunkOptions.chunkSize}`,
        { field: 'chunkSize' },
      );
    const placed = place(input, this.agentId, 'document', 'document');
    const pieces = chunkText(text, chunkOptions);
    const documentId = newId();
    const fragmentIds = pieces.map(() => newId());
    const title: JsonObject = input.title === undefined ? {} : { title: input.title };
    const createdAt = input.createdAt === undefined ? {} : { createdAt: input.createdAt };
    const document: Draft = {
      memory: {
        ...placed,
        id: documentId,
        // A memory's text has a limit; the document's is its fragments' (the whole text,
        // in parts). The record keeps as much as fits, and is found by the whole text's hash.
        content: { text: beginning(text, MAX_MEMORY_TEXT_LENGTH), ...title },
        contentHash: contentHash(text),
        metadata: {
          ...input.metadata,
          ...title,
          textLength: text.length,
          fragmentIds,
          chunkSize: chunkOptions.chunkSize,
          overlap: chunkOptions.overlap,
        },
        ...createdAt,
      },
      sameAs: -1,
      embed: false,
    };
    const fragments = pieces.map(
      (piece, position): Draft => ({
        memory: {
          ...placed,
          type: 'fragment',
          id: fragmentIds[position]!,
          content: { text: piece },
          contentHash: contentHash(piece),
          metadata: { ...input.metadata, ...title, documentId, position },
          ...createdAt,
        },
        sameAs: -1,
        embed: true,
      }),
    );
    checkAsStored([document, ...fragments].map((d) => d.memory));
    return this.#lock.run(async () => {
      if (!options.allowDuplicate) {
        const existing = (await this.#findExisting([document.memory])).get(
          dedupeKey(document.memory),
        );
        if (existing) {
          const ids = Array.isArray(existing.metadata.fragmentIds)
            ? (existing.metadata.fragmentIds as string[])
            : [];
          const stored = await this.#listByIds(ids);
          return {
            document: existing,
            fragments: ids.map((id) => stored.get(id)).filter((m): m is Memory => m !== undefined),
            existing: true,
          };
        }
      }
      // Fragments are parts of this document: they are never merged with other memories.
      const [doc, ...frags] = await this.#write([document, ...fragments], {
        ...options,
        allowDuplicate: true,
      });
      return { document: doc!, fragments: frags, existing: false };
    });
  }

  /**
   * The memories most relevant to `query` that `viewer` may see.
   *
   * - `vector`: cosine similarity between the query's embedding and each memory's.
   * - `keyword`: the store's full-text ranking (memories sharing words with the query).
   * - `hybrid` (default): both rankings, each fetched `max(4 × limit, 20)` deep. A
   *   candidate's standard score in a ranking is how many standard deviations its score
   *   (cosine, or keyword relevance) lies above that ranking's mean; it scores
   *   `1 / (1 + e^-z)` for its largest (a keyword-only hit's cosine is computed from its
   *   embedding). Whichever search singles a memory out ranks it high, and neither search's
   *   scale swamps the other's: an incidental word match shared by many memories stands
   *   out in neither, and a semantic match sharing no word with the query keeps its rank.
   *
   * The scope rule and every filter are applied inside the store's query.
   *
   * @example
   * ```ts
   * const hits = await memory.recall('when is the deadline?', {
   *   viewer: { agentId: 'assistant', roomId: 'r1', worldId: 'acme' },
   *   limit: 5,
   * });
   * for (const h of hits) console.log(h.score.toFixed(4), h.sources, h.memory.content.text);
   * ```
   */
  async recall(query: string, options: RecallOptions = {}): Promise<RecallHit[]> {
    checkText(query, 'recall query');
    checkKeys(
      options,
      'recall options',
      keysOf<RecallOptions>()([
        'viewer',
        'types',
        'roomId',
        'worldId',
        'entityId',
        'limit',
        'threshold',
        'mode',
        'recencyHalfLifeMs',
        'now',
        'asOf',
        'branch',
        'signal',
      ]),
    );
    const mode = options.mode ?? 'hybrid';
    if (mode !== 'hybrid' && mode !== 'vector' && mode !== 'keyword')
      throw invalid(`mode must be hybrid, vector or keyword, got ${JSON.stringify(mode)}`);
    const limit = checkLimit(options.limit, 10, 1000);
    const { threshold, recencyHalfLifeMs } = options;
    if (threshold !== undefined) {
      if (typeof threshold !== 'number' || !Number.isFinite(threshold))
        throw invalid(`threshold must be a finite number, got ${String(threshold)}`);
      if (mode !== 'keyword' && (threshold < -1 || threshold > 1)) {
        throw invalid(
          `threshold in ${mode} mode is a cosine similarity from -1 to 1, got ${threshold}`,
        );
      }
    }
    if (
      recencyHalfLifeMs !== undefined &&
      !(
        typeof recencyHalfLifeMs === 'number' &&
        recencyHalfLifeMs > 0 &&
        Number.isFinite(recencyHalfLifeMs)
      )
    ) {
      throw invalid(
        `recencyHalfLifeMs must be a positive number, got ${String(recencyHalfLifeMs)}`,
      );
    }
    const viewer = checkViewer(
      options.viewer ?? {
        agentId: this.agentId,
        roomId: options.roomId ?? null,
        worldId: options.worldId ?? null,
      },
    );
    if (
      options.now !== undefined &&
      (typeof options.now !== 'number' || !Number.isFinite(options.now))
    )
      throw invalid(`now must be a timestamp (ms since the epoch), got ${String(options.now)}`);
    const filter: MemoryFilter = {
      viewer,
      ...timeFilter(options.asOf, options.now ?? Date.now()),
      visibleFrom: options.branch ?? null,
    };
    if (options.types !== undefined) filter.types = options.types;
    if (options.roomId !== undefined) filter.roomId = options.roomId;
    if (options.worldId !== undefined) filter.worldId = options.worldId;
    if (options.entityId !== undefined) filter.entityId = options.entityId;

    const deep = Math.min(1000, Math.max(limit * 4, 20));
    const fetch = mode === 'hybrid' || recencyHalfLifeMs !== undefined ? deep : limit;
    const wantVector = mode !== 'keyword';
    const wantKeyword = mode !== 'vector';
    const queryVector = wantVector ? await this.#queryVector(query, options.signal) : null;

    const [vectorHits, keywordHits] = await Promise.all([
      queryVector
        ? this.#store.searchMemories({
            vector: queryVector,
            filter,
            limit: fetch,
            ...(threshold === undefined ? {} : { threshold }),
          })
        : Promise.resolve<MemoryHit[]>([]),
      wantKeyword
        ? this.#store.searchMemories({ text: query, filter, limit: fetch })
        : Promise.resolve<MemoryHit[]>([]),
    ]);

    let hits: RecallHit[];
    if (mode === 'vector') {
      hits = vectorHits.map((h, i) => ({
        memory: h.memory,
        score: h.score,
        sources: ['vector'],
        ranks: { vector: i + 1 },
        similarity: h.score,
        keywordScore: null,
      }));
    } else if (mode === 'keyword') {
      hits = keywordHits
        .filter((h) => threshold === undefined || h.score >= threshold)
        .map((h, i) => ({
          memory: h.memory,
          score: h.score,
          sources: ['keyword'],
          ranks: { keyword: i + 1 },
          similarity: null,
          keywordScore: h.score,
        }));
    } else {
      hits = hybridFusion(vectorHits, keywordHits, queryVector);
    }
    if (recencyHalfLifeMs !== undefined) {
      const now = options.now ?? Date.now();
      for (const h of hits)
        h.score *= 0.5 ** (Math.max(0, now - h.memory.createdAt) / recencyHalfLifeMs);
      hits.sort((a, b) => b.score - a.score);
    }
    return hits.slice(0, limit);
  }

  /**
   * The newest memories (newest first) that the viewer may see and that hold now (current
   * versions only), optionally of one room.
   *
   * @example
   * ```ts
   * const last = await memory.recent({ roomId: 'r1', limit: 10 });
   * ```
   */
  async recent(options: RecentOptions = {}): Promise<Memory[]> {
    checkKeys(
      options,
      'recent options',
      keysOf<RecentOptions>()(['roomId', 'types', 'limit', 'viewer', 'branch']),
    );
    const limit = checkLimit(options.limit, 20, 10_000);
    const roomId = optionalString(options.roomId, 'roomId');
    const viewer = checkViewer(options.viewer ?? { agentId: this.agentId, roomId });
    const filter: MemoryFilter = {
      viewer,
      validAt: Date.now(),
      visibleFrom: options.branch ?? null,
    };
    if (roomId !== null) filter.roomId = roomId;
    if (options.types !== undefined) filter.types = options.types;
    return this.#store.listMemories(filter, { limit, order: 'newest' });
  }

  /** One memory by id, or null. (No scope check: ids are not guessable, but do not hand them out.) */
  async get(id: string): Promise<Memory | null> {
    return this.#store.getMemory(id);
  }

  /**
   * Changes a memory's text (re-embedding it) and/or replaces its metadata. `NOT_FOUND`
   * when there is no such memory. A document's text cannot be changed: forget it and
   * ingest the new text.
   *
   * @example
   * ```ts
   * await memory.update(m.id, { text: 'Ada prefers detailed answers' });
   * ```
   */
  async update(
    id: string,
    input: UpdateInput,
    options: { signal?: AbortSignal } = {},
  ): Promise<Memory> {
    if (typeof id !== 'string' || id === '') throw invalid('update: id must be a non-empty string');
    if (typeof input !== 'object' || input === null)
      throw invalid('update expects { text?, metadata? }');
    checkKeys(input, 'update', keysOf<UpdateInput>()(['text', 'metadata']));
    checkKeys(options, 'update options', ['signal']);
    const text = input.text === undefined ? undefined : checkText(input.text, 'text');
    if (
      input.metadata !== undefined &&
      (typeof input.metadata !== 'object' ||
        input.metadata === null ||
        Array.isArray(input.metadata))
    ) {
      throw invalid('metadata must be an object');
    }
    // The store's checks, before the embedder sees the text.
    checkMemoryPatch({
      ...(text === undefined ? {} : { content: { text } }),
      ...(input.metadata === undefined ? {} : { metadata: input.metadata }),
    });
    return this.#lock.run(async () => {
      const current = await this.#store.getMemory(id);
      if (!current)
        throw new CairnError('NOT_FOUND', `no memory ${JSON.stringify(id)}`, { details: { id } });
      // A closed version is history: the store refuses it (naming the current version)
      // before anything is embedded.
      if (current.supersededAt !== null) return this.#store.updateMemory(id, {});
      if (text !== undefined && current.type === 'document') {
        throw invalid(
          `memory ${JSON.stringify(id)} is a document: forget it and ingest the new text instead of updating it`,
        );
      }
      if (text === undefined) {
        if (input.metadata === undefined) return current;
        const updated = await this.#store.updateMemory(id, { metadata: input.metadata });
        this.#version++;
        return updated;
      }
      await this.#checkSpace();
      const hash = contentHash(text);
      const { vectors, fresh } = await this.#embedWithCache([{ hash, text }], options.signal);
      const embedding = vectors.get(hash)!;
      const updated = await this.#store.transaction(async (tx) => {
        await this.#ensureSpace(tx);
        if (fresh.length) await tx.putCachedEmbeddings(this.embedder.id, fresh);
        return tx.updateMemory(id, {
          content: { ...current.content, text },
          contentHash: hash,
          embedding,
          ...(input.metadata === undefined ? {} : { metadata: input.metadata }),
        });
      });
      this.#version++;
      return updated;
    });
  }

  /**
   * Records that a fact changed: the version `id` stays, closed (it holds until the new
   * `validFrom`, default now, and is no longer current), and the new text is stored,
   * embedded, as the next version of the same fact (`supersedes: id`, the same
   * `lineageId`, the same place and scope). Nothing is deleted: `history` lists every
   * version, and `recall` with `asOf` finds the one that held at an instant.
   * `NOT_FOUND` when there is no memory `id`, `CONFLICT` when it was already superseded
   * (supersede the newest version) or ends on its own, `INVALID_ARGUMENT` when the new
   * version would start before the old one; nothing is written then. A document's text
   * cannot be superseded: forget it and ingest the new text.
   *
   * @example
   * ```ts
   * const home = await memory.remember({ text: 'Ada lives in Paris', validFrom: Date.UTC(2024, 0, 1) });
   * await memory.supersede(home.id, { text: 'Ada lives in Berlin', validFrom: Date.UTC(2026, 4, 3) });
   * ```
   */
  async supersede(
    id: string,
    input: SupersedeInput,
    options: { signal?: AbortSignal } = {},
  ): Promise<Memory> {
    if (typeof id !== 'string' || id === '')
      throw invalid('supersede: id must be a non-empty string');
    if (typeof input !== 'object' || input === null)
      throw invalid('supersede expects { text, validFrom?, validTo?, metadata?, source? }');
    checkKeys(
      input,
      'supersede',
      keysOf<SupersedeInput>()(['text', 'validFrom', 'validTo', 'metadata', 'source']),
    );
    checkKeys(options, 'supersede options', ['signal']);
    const text = checkText(input.text, 'text');
    const version = {
      content: { text },
      ...(input.validFrom === undefined ? {} : { validFrom: input.validFrom }),
      ...(input.validTo === undefined ? {} : { validTo: input.validTo }),
      ...(input.metadata === undefined ? {} : { metadata: input.metadata }),
      ...(input.source === undefined ? {} : { source: input.source }),
    };
    // The store's checks of the version, before the embedder sees the text.
    checkMemoryVersion(version, 0);
    return this.#lock.run(async () => {
      const current = await this.#store.getMemory(id);
      if (!current)
        throw new CairnError('NOT_FOUND', `no memory ${JSON.stringify(id)}`, { details: { id } });
      if (current.type === 'document')
        throw invalid(
          `memory ${JSON.stringify(id)} is a document: forget it and ingest the new text instead of superseding it`,
        );
      // Before any embedding: the store's own decision, on the version as read now (a
      // default validFrom is the store's clock, so only a given one is compared here).
      const from = input.validFrom ?? current.validFrom ?? 0;
      planSupersede(id, current, checkMemoryVersion({ ...version, validFrom: from }, 0), 0);
      await this.#checkSpace();
      const hash = contentHash(text);
      const { vectors, fresh } = await this.#embedWithCache([{ hash, text }], options.signal);
      const next = await this.#store.transaction(async (tx) => {
        await this.#ensureSpace(tx);
        if (fresh.length) await tx.putCachedEmbeddings(this.embedder.id, fresh);
        return tx.supersedeMemory(id, {
          ...version,
          content: { ...current.content, text },
          contentHash: hash,
          embedding: vectors.get(hash)!,
        });
      });
      this.#version++;
      return next;
    });
  }

  /**
   * Every version of the fact `id` is a version of, oldest first (the current one last);
   * empty when there is no memory `id`.
   *
   * @example
   * ```ts
   * for (const v of await memory.history(id)) console.log(v.validFrom, v.validTo, v.content.text);
   * ```
   */
  async history(id: string): Promise<Memory[]> {
    if (typeof id !== 'string' || id === '')
      throw invalid('history: id must be a non-empty string');
    const memory = await this.#store.getMemory(id);
    if (!memory) return [];
    return this.#store.listMemories(
      { lineageIds: [memory.lineageId] },
      { limit: 10_000, order: 'oldest' },
    );
  }

  /**
   * Deletes a memory and every version of its fact (see `history`); for a document, its
   * fragments too. False when there was none.
   *
   * @example
   * ```ts
   * await memory.forget(m.id);
   * ```
   */
  async forget(id: string): Promise<boolean> {
    if (typeof id !== 'string' || id === '') throw invalid('forget: id must be a non-empty string');
    return this.#lock.run(async () => {
      const current = await this.#store.getMemory(id);
      if (!current) return false;
      const ids = [id];
      for (const v of await this.#store.listMemories(
        { lineageIds: [current.lineageId] },
        { limit: 10_000 },
      ))
        if (v.id !== id) ids.push(v.id);
      if (current.type === 'document' && Array.isArray(current.metadata.fragmentIds)) {
        ids.push(
          ...(current.metadata.fragmentIds as string[]).filter((x) => typeof x === 'string'),
        );
      }
      let removed = 0;
      await this.#store.transaction(async (tx) => {
        for (const part of chunks(ids, LOOKUP_CHUNK)) removed += await tx.deleteMemories(part);
      });
      if (removed > 0) this.#version++;
      return removed > 0;
    });
  }

  /**
   * One pass of consolidation over this agent's current memories (optionally of one
   * entity, room or world), off the hot path: it merges duplicates and ends facts that a
   * newer one contradicts, by `rule` (default `defaultConsolidationRule`: same text after
   * normalisation merges into the oldest; among memories declaring the same
   * `metadata.factKey`, the one with the latest `validFrom` supersedes the others).
   * Candidates are grouped within one place only — agent, type, entity, room, world,
   * scope and branch — never across them; documents and fragments are left alone.
   *
   * Nothing is deleted: what is merged or superseded is closed (`Store.closeMemory`), its
   * `metadata.consolidated` saying by what and why, so `history` and `recall({ asOf })`
   * still find it. Each close is a small transaction of its own that applies only if the
   * memory is still as the pass read it: a concurrent write wins and the pass skips that
   * decision (`skipped`). The pass holds the lease `consolidationLeaseKey(agentId, scope)`:
   * one runner per scope across processes; another finds `ran: false`. It does not queue
   * behind this instance's writes, nor they behind it. Bad options, or a rule's decision
   * naming a memory outside its group, are `INVALID_ARGUMENT` (a group's decisions are
   * all checked before any of them is applied).
   *
   * @example
   * ```ts
   * const report = await memory.consolidate();
   * console.log(report.merged, report.superseded); // e.g. 3 1
   * // An LLM decides instead (any async function returning decisions):
   * await memory.consolidate({ similarity: 0.9, rule: async (group) => askModel(group.memories) });
   * ```
   */
  async consolidate(options: ConsolidateOptions = {}): Promise<ConsolidationReport> {
    const o = checkConsolidateOptions(options);
    return consolidatePass(this.#store, this.agentId, o, () => {
      this.#version++;
    });
  }

  /**
   * Runs `consolidate` in the background: a first pass at once, then one `intervalMs`
   * (default 60,000) after each pass ends, until `stop()`. Each pass reports to
   * `onReport`; a failed pass goes to `onError` (and `lastError`) and the next one runs
   * on time. Options as for `consolidate`. The timer does not keep the process alive.
   *
   * @example
   * ```ts
   * const runner = memory.startConsolidation({ intervalMs: 5 * 60_000 });
   * // ... on shutdown:
   * await runner.stop();
   * ```
   */
  startConsolidation(options: ConsolidationRunnerOptions = {}): ConsolidationRunner {
    const o = checkConsolidateOptions(options, 'startConsolidation options', [
      'intervalMs',
      'onReport',
      'onError',
    ]);
    const { intervalMs = 60_000, onReport, onError } = options;
    if (!Number.isInteger(intervalMs) || intervalMs < 1 || intervalMs > 2_147_483_647)
      throw invalid(`intervalMs must be a positive integer, got ${String(intervalMs)}`, {
        field: 'intervalMs',
      });
    for (const [name, fn] of [
      ['onReport', onReport],
      ['onError', onError],
    ] as const)
      if (fn !== undefined && typeof fn !== 'function')
        throw invalid(`${name} must be a function`, { field: name });
    const stopping = new AbortController();
    const signal = o.signal ? AbortSignal.any([o.signal, stopping.signal]) : stopping.signal;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let pass: Promise<void> = Promise.resolve();
    const state: { lastReport: ConsolidationReport | null; lastError: unknown } = {
      lastReport: null,
      lastError: undefined,
    };
    const run = () => {
      timer = undefined;
      pass = consolidatePass(this.#store, this.agentId, { ...o, signal }, () => {
        this.#version++;
      })
        .then(
          (report) => {
            state.lastReport = report;
            onReport?.(report);
          },
          (e: unknown) => {
            state.lastError = e;
            onError?.(e);
          },
        )
        .finally(() => {
          if (signal.aborted) return;
          timer = setTimeout(run, intervalMs);
          timer.unref?.();
        });
    };
    timer = setTimeout(run, 0);
    timer.unref?.();
    return {
      get lastReport() {
        return state.lastReport;
      },
      get lastError() {
        return state.lastError;
      },
      async stop() {
        stopping.abort();
        if (timer !== undefined) clearTimeout(timer);
        timer = undefined;
        await pass;
      },
    };
  }

  // ------------------------------------------------------------------ internals

  async #write(drafts: Draft[], options: RememberManyOptions): Promise<Memory[]> {
    const { onProgress, signal } = options;
    // Duplicates within the batch point at their first occurrence.
    if (!options.allowDuplicate) {
      const first = new Map<string, number>();
      drafts.forEach((d, i) => {
        const key = dedupeKey(d.memory);
        const at = first.get(key);
        if (at === undefined) first.set(key, i);
        else d.sameAs = at;
      });
    }
    const existing = options.allowDuplicate
      ? new Map<string, Memory>()
      : await this.#findExisting(drafts.map((d) => d.memory));
    const toWrite = drafts.filter((d) => d.sameAs < 0 && !existing.has(dedupeKey(d.memory)));
    const toEmbed = toWrite.filter((d) => d.embed);
    if (toEmbed.length) await this.#checkSpace();
    const { vectors, fresh } = await this.#embedWithCache(
      toEmbed.map((d) => ({ hash: d.memory.contentHash, text: d.memory.content.text })),
      signal,
      onProgress && ((done, total) => onProgress({ phase: 'embedding', done, total })),
    );
    if (signal?.aborted) {
      throw new CairnError('ABORTED', 'the write was aborted by the caller; nothing was stored', {
        cause: signal.reason,
      });
    }
    let stored: Memory[] = [];
    if (toWrite.length) {
      const batch = toWrite.map((d) =>
        d.embed ? { ...d.memory, embedding: vectors.get(d.memory.contentHash)! } : d.memory,
      );
      stored = await this.#store.transaction(async (tx) => {
        if (toEmbed.length) await this.#ensureSpace(tx);
        if (fresh.length) {
          for (const part of chunks(fresh, LOOKUP_CHUNK))
            await tx.putCachedEmbeddings(this.embedder.id, part);
        }
        const out: Memory[] = [];
        for (const part of chunks(batch, LOOKUP_CHUNK)) out.push(...(await tx.addMemories(part)));
        return out;
      });
      this.#version++;
    }
    onProgress?.({ phase: 'storing', done: stored.length, total: stored.length });
    const results: Memory[] = [];
    let next = 0;
    for (const d of drafts) {
      if (d.sameAs >= 0) results.push(results[d.sameAs]!);
      else results.push(existing.get(dedupeKey(d.memory)) ?? stored[next++]!);
    }
    return results;
  }

  /** Stored memories that match a draft's dedupe key, by key (the oldest when several). */
  async #findExisting(memories: Draft['memory'][]): Promise<Map<string, Memory>> {
    const found = new Map<string, Memory>();
    const wanted = new Set(memories.map(dedupeKey));
    const hashes = [...new Set(memories.map((m) => m.contentHash))];
    const types = [...new Set(memories.map((m) => m.type))];
    for (const part of chunks(hashes, LOOKUP_CHUNK)) {
      const rows = await this.#store.listMemories(
        { agentId: this.agentId, types, contentHashes: part },
        { limit: 10_000, order: 'oldest' },
      );
      for (const m of rows) {
        // A replaced version is history: remembering its text again is a new memory.
        if (m.supersededAt !== null) continue;
        const key = dedupeKey(m);
        if (wanted.has(key) && !found.has(key)) found.set(key, m);
      }
    }
    return found;
  }

  async #listByIds(ids: string[]): Promise<Map<string, Memory>> {
    const out = new Map<string, Memory>();
    for (const part of chunks(ids, LOOKUP_CHUNK)) {
      for (const m of await this.#store.listMemories({ ids: part }, { limit: 10_000 }))
        out.set(m.id, m);
    }
    return out;
  }

  /**
   * Vectors for the texts, from the store's cache where present (by embedder id and
   * content hash) and from the embedder, in batches, otherwise. `fresh` are the ones to
   * add to the cache. Nothing is written here.
   */
  async #embedWithCache(
    texts: Array<{ hash: string; text: string }>,
    signal: AbortSignal | undefined,
    progress?: (done: number, total: number) => void,
  ): Promise<{
    vectors: Map<string, number[]>;
    fresh: Array<{ contentHash: string; embedding: number[] }>;
  }> {
    const unique = new Map<string, string>();
    for (const t of texts) unique.set(t.hash, t.text);
    const vectors = new Map<string, number[]>();
    const fresh: Array<{ contentHash: string; embedding: number[] }> = [];
    if (unique.size === 0) return { vectors, fresh };
    for (const part of chunks([...unique.keys()], LOOKUP_CHUNK)) {
      const cached = await this.#store.getCachedEmbeddings(this.embedder.id, part);
      for (const [hash, v] of cached)
        if (v.length === this.embedder.dimensions) vectors.set(hash, v);
    }
    const missing = [...unique].filter(([hash]) => !vectors.has(hash));
    const total = unique.size;
    let done = total - missing.length;
    progress?.(done, total);
    for (const batch of chunks(missing, this.#batchSize)) {
      const embedded = await embedChecked(
        this.embedder,
        batch.map(([, text]) => text),
        signal,
      );
      batch.forEach(([hash], i) => {
        vectors.set(hash, embedded[i]!);
        fresh.push({ contentHash: hash, embedding: embedded[i]! });
      });
      done += batch.length;
      progress?.(done, total);
    }
    return { vectors, fresh };
  }

  async #queryVector(query: string, signal: AbortSignal | undefined): Promise<number[] | null> {
    // No vectors stored yet: nothing to compare with, and no space to check against.
    if (!this.#spaceChecked && (await this.#store.getEmbeddingSpace()) === null) return null;
    await this.#checkSpace();
    const cached = this.#queryVectors.get(query);
    if (cached) return cached;
    const [v] = await embedChecked(this.embedder, [query], signal);
    this.#queryVectors.set(query, v!);
    if (this.#queryVectors.size > 256)
      this.#queryVectors.delete(this.#queryVectors.keys().next().value!);
    return v!;
  }

  /** Read-only check that the store's vectors are this embedder's, before any work. */
  async #checkSpace(): Promise<void> {
    if (this.#spaceChecked) return;
    const space = await this.#store.getEmbeddingSpace();
    if (!space) return;
    if (
      space.dimensions !== this.embedder.dimensions ||
      (space.embedderId !== null && space.embedderId !== this.embedder.id)
    ) {
      throw this.#mismatch(space);
    }
    if (space.embedderId !== null) this.#spaceChecked = true;
  }

  /** Records (or confirms) the embedding space as part of a write. */
  async #ensureSpace(tx: Store): Promise<void> {
    try {
      await tx.ensureEmbeddingSpace({
        embedderId: this.embedder.id,
        dimensions: this.embedder.dimensions,
      });
      this.#spaceChecked = true;
    } catch (e) {
      if (!isCairnError(e, 'EMBEDDING_MISMATCH')) throw e;
      throw this.#mismatch((await tx.getEmbeddingSpace()) ?? null, e);
    }
  }

  #mismatch(
    space: { embedderId: string | null; dimensions: number } | null,
    cause?: unknown,
  ): CairnError {
    const stored = space
      ? `${JSON.stringify(space.embedderId ?? 'an unnamed embedder')} with ${space.dimensions} dimensions`
      : 'another embedding space';
    return new CairnError(
      'EMBEDDING_MISMATCH',
      `the store holds embeddings of ${stored}; this memory's embedder is ${JSON.stringify(this.embedder.id)} with ${this.embedder.dimensions} dimensions. Use the same embedder, or another store.`,
      {
        ...(cause === undefined ? {} : { cause }),
        details: {
          stored: space,
          embedder: { embedderId: this.embedder.id, dimensions: this.embedder.dimensions },
        },
      },
    );
  }
}

/**
 * An agent's long-term memory on a Cairn store: remember facts, ingest documents, recall
 * by meaning and by keyword within what a viewer may see.
 *
 * Scopes: a memory is `private` unless you say otherwise (only this agent sees it),
 * `room` (viewers in its room) or `shared` (viewers in its world) — see `canSee`.
 *
 * @example
 * ```ts
 * import { createMemory } from '@cairn/memory';
 * const memory = createMemory({ store, agentId: 'assistant' }); // hashing embedder by default
 * await memory.remember({ text: 'The user is allergic to peanuts', roomId: 'r1', scope: 'room' });
 * const hits = await memory.recall('peanut allergy', { viewer: { agentId: 'assistant', roomId: 'r1' } });
 * ```
 */
export function createMemory(options: CreateMemoryOptions): AgentMemory {
  return new AgentMemory(options);
}
