import { createHash } from 'node:crypto';
import { endianness } from 'node:os';
import { isCairnError, type Lease, type Memory, type Thread } from '@cairn/core';
import type { EmbeddingSpace, Store, ThreadRecords } from '@cairn/store';
import { CliError } from './database.js';

/**
 * The dump format this code writes, and the newest it reads. 2: a memory's embedding whose
 * values are all float32s is base64 of them (in 1 always an array of numbers, still read).
 * 3: a memory's times, versions and source (`validFrom` … `source`; a memory of an older
 * dump is a first version, open and current).
 */
export const DUMP_VERSION = 3;

/** The tables a dump holds, in the order their records come. */
export const DUMP_TABLES = [
  'threads',
  'messages',
  'branches',
  'checkpoints',
  'stateCommits',
  'turns',
  'leases',
  'memories',
] as const;
export type DumpTable = (typeof DUMP_TABLES)[number];
export type Counts = Record<DumpTable, number>;

/** Each record kind's fields, in the order a dump writes them: the same bytes every time. */
const FIELDS = {
  thread: ['id', 'resourceId', 'title', 'metadata', 'createdAt', 'updatedAt'],
  message: ['id', 'threadId', 'parentId', 'role', 'type', 'data', 'createdAt', 'depth'],
  branch: [
    'id',
    'threadId',
    'name',
    'headMessageId',
    'isActive',
    'createdAt',
    'forkMessageId',
    'parentBranchId',
  ],
  checkpoint: ['id', 'threadId', 'name', 'messageId', 'createdAt'],
  stateCommit: [
    'branchId',
    'threadId',
    'version',
    'messageId',
    'messageDepth',
    'update',
    'snapshot',
    'createdAt',
  ],
  turn: [
    'id',
    'threadId',
    'messageId',
    'source',
    'userId',
    'status',
    'state',
    'steps',
    'startedAt',
    'finishedAt',
  ],
  lease: ['key', 'owner', 'acquiredAt', 'renewedAt', 'expiresAt', 'releasedAt', 'data'],
  memory: [
    'id',
    'type',
    'agentId',
    'entityId',
    'roomId',
    'worldId',
    'scope',
    'content',
    'metadata',
    'contentHash',
    'embedding',
    'createdAt',
    'validFrom',
    'validTo',
    'supersededAt',
    'supersedes',
    'lineageId',
    'source',
  ],
  embeddingSpace: ['embedderId', 'dimensions'],
} as const;
type Kind = keyof typeof FIELDS;

const TABLE_OF: Partial<Record<Kind, DumpTable>> = {
  thread: 'threads',
  message: 'messages',
  branch: 'branches',
  checkpoint: 'checkpoints',
  stateCommit: 'stateCommits',
  turn: 'turns',
  lease: 'leases',
  memory: 'memories',
};

const BIG_ENDIAN = endianness() === 'BE';

/**
 * An embedding as a dump holds it: base64 of its float32 values, little-endian, when each
 * is a float32 (as SQLite stores them); else (Postgres keeps doubles) the numbers as they are.
 */
function encodeEmbedding(embedding: number[]): string | number[] {
  const f = Float32Array.from(embedding);
  for (let i = 0; i < f.length; i++) if (f[i] !== embedding[i]) return embedding;
  return float32Base64(f);
}

/** Float32 values, little-endian, in base64. */
function float32Base64(f: Float32Array): string {
  const bytes = Buffer.from(f.buffer, f.byteOffset, f.byteLength);
  return (BIG_ENDIAN ? bytes.swap32() : bytes).toString('base64');
}

/** The numbers of an embedding `encodeEmbedding` wrote as base64; null when it is not that. */
function decodeEmbedding(text: string): number[] | null {
  const bytes = Buffer.from(text, 'base64');
  if (bytes.length % 4 !== 0 || bytes.toString('base64') !== text) return null;
  if (BIG_ENDIAN) bytes.swap32();
  // Copied: the bytes' offset in their buffer need not be a multiple of 4.
  const f = new Float32Array(bytes.length / 4);
  new Uint8Array(f.buffer).set(bytes);
  const numbers = new Array<number>(f.length);
  for (let i = 0; i < f.length; i++) numbers[i] = f[i]!;
  return numbers;
}

/**
 * One line of a dump: `{"kind":…, fields in their fixed order}`, one object stringified
 * whole.
 */
function line(kind: Kind, value: object): string {
  const v = value as Record<string, unknown>;
  const o: Record<string, unknown> = { kind };
  for (const f of FIELDS[kind]) o[f] = v[f] ?? null;
  if (Array.isArray(o.embedding)) o.embedding = encodeEmbedding(o.embedding);
  return `${JSON.stringify(o)}\n`;
}

const zeroCounts = (): Counts => Object.fromEntries(DUMP_TABLES.map((t) => [t, 0])) as Counts;

/** Every thread, oldest first (the order that recreates their creation order). */
export async function threadsOldestFirst(store: Store): Promise<Thread[]> {
  const threads: Thread[] = [];
  let cursor: string | null = null;
  do {
    const page = await store.listThreads({ limit: 1000, cursor });
    threads.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor !== null);
  return threads.reverse();
}

/** Every thread's id, oldest first. */
export async function threadIdsOldestFirst(store: Store): Promise<string[]> {
  return (await threadsOldestFirst(store)).map((t) => t.id);
}

/** Pages of a keyed listing, one after another. */
export async function* pages<T>(
  list: (cursor: string | null) => Promise<{ items: T[]; nextCursor: string | null }>,
): AsyncGenerator<T[]> {
  let cursor: string | null = null;
  do {
    const page = await list(cursor);
    if (page.items.length > 0) yield page.items;
    cursor = page.nextCursor;
  } while (cursor !== null);
}

/** The lines of one thread's records. */
function threadLines(r: ThreadRecords): string {
  let out = line('thread', r.thread);
  for (const m of r.messages) out += line('message', m);
  for (const b of r.branches) out += line('branch', b);
  for (const c of r.checkpoints) out += line('checkpoint', c);
  for (const c of r.stateCommits) out += line('stateCommit', c);
  for (const t of r.turns) out += line('turn', t);
  return `${out}{"kind":"threadEnd","id":${JSON.stringify(r.thread.id)}}\n`;
}

function countThread(counts: Counts, r: ThreadRecords): void {
  counts.threads++;
  counts.messages += r.messages.length;
  counts.branches += r.branches.length;
  counts.checkpoints += r.checkpoints.length;
  counts.stateCommits += r.stateCommits.length;
  counts.turns += r.turns.length;
}

/** Writes to a stream, waiting when it asks to (large dumps never sit in memory). */
class Output {
  #buffer = '';
  constructor(readonly stream: NodeJS.WritableStream) {}
  async write(text: string): Promise<void> {
    this.#buffer += text;
    if (this.#buffer.length >= 1 << 20) await this.flush();
  }
  async flush(): Promise<void> {
    if (this.#buffer === '') return;
    const ok = this.stream.write(this.#buffer);
    this.#buffer = '';
    if (!ok) await new Promise((resolve) => this.stream.once('drain', resolve));
  }
}

/**
 * Writes the dump of `store` (or of the given threads only: then without leases and
 * memories) to `out`. Returns what it wrote, by table, and how many listed threads were
 * deleted before they were read.
 *
 * The database may be live: each thread is read whole in one read, and the listings page
 * by key, so writers change nothing of what is written; a thread deleted after the listing
 * is left out (counted in `vanished`), one created after it may be missing. A thread named
 * in `threadIds` that is not there is an error.
 */
export async function exportDump(
  store: Store,
  out: NodeJS.WritableStream,
  options: { threadIds?: string[] } = {},
): Promise<Counts & { vanished: number }> {
  const counts = zeroCounts();
  let vanished = 0;
  const o = new Output(out);
  await o.write(`{"cairn":"dump","version":${DUMP_VERSION}}\n`);
  const whole = options.threadIds === undefined;
  const space = whole ? await store.getEmbeddingSpace() : null;
  if (space) await o.write(line('embeddingSpace', space));
  for (const id of options.threadIds ?? (await threadIdsOldestFirst(store))) {
    const r = await store.exportThread(id);
    if (!r && !whole) throw new CliError(`thread ${JSON.stringify(id)} not found`);
    if (!r) {
      vanished++; // deleted since the listing
      continue;
    }
    countThread(counts, r);
    await o.write(threadLines(r));
  }
  if (whole) {
    for await (const leases of pages((cursor) => store.listLeases({ limit: 1000, cursor }))) {
      counts.leases += leases.length;
      for (const l of leases) await o.write(line('lease', l));
    }
    for await (const memories of pages((cursor) => store.scanMemories({ limit: 1000, cursor }))) {
      counts.memories += memories.length;
      for (const m of memories) await o.write(line('memory', m));
    }
  }
  await o.write(`{"kind":"end","counts":${JSON.stringify(counts)}}\n`);
  await o.flush();
  return { ...counts, vanished };
}

/** Reads the first line of a dump: refuses anything but a dump of a format this code reads. */
export function checkHeader(text: string | undefined): void {
  let header: { cairn?: unknown; version?: unknown } | undefined;
  try {
    header = text === undefined ? undefined : JSON.parse(text);
  } catch {}
  if (header?.cairn !== 'dump' || header.version === undefined)
    throw new CliError('the input is not a Cairn dump (its first line is not {"cairn":"dump",…})');
  if (!Number.isSafeInteger(header.version) || (header.version as number) < 1)
    throw new CliError(
      `the input is not a Cairn dump: its format version must be a positive integer, got ${JSON.stringify(header.version)}`,
    );
  if ((header.version as number) > DUMP_VERSION)
    throw new CliError(
      `the dump is format version ${header.version}, newer than this cairn reads (${DUMP_VERSION}); upgrade @cairn/cli`,
    );
}

/** What restoring writes in one transaction: whole threads, each atomically. */
const THREADS_PER_BATCH = 100;
const MESSAGES_PER_BATCH = 5000;
const MEMORIES_PER_BATCH = 1000;

/**
 * Writes threads into `store` in batches of whole threads, each batch one transaction.
 * With `skipExisting`, a thread already there is left as it is (a re-run after a kill
 * finishes the job: a thread is written whole or not at all).
 */
export class ThreadWriter {
  #batch: ThreadRecords[] = [];
  #messages = 0;
  readonly written = zeroCounts();
  skipped = 0;

  constructor(
    readonly store: Store,
    readonly skipExisting: boolean,
    readonly threadsPerBatch = THREADS_PER_BATCH,
  ) {}

  async add(r: ThreadRecords): Promise<void> {
    this.#batch.push(r);
    this.#messages += r.messages.length;
    if (this.#batch.length >= this.threadsPerBatch || this.#messages >= MESSAGES_PER_BATCH)
      await this.flush();
  }

  async flush(): Promise<void> {
    const batch = this.#batch;
    if (batch.length === 0) return;
    this.#batch = [];
    this.#messages = 0;
    const written = await this.store.transaction(async (tx) => {
      const done: ThreadRecords[] = [];
      for (const r of batch) {
        if (this.skipExisting && (await tx.getThread(r.thread.id))) continue;
        await tx.restoreThread(r);
        done.push(r);
      }
      return done;
    });
    for (const r of written) countThread(this.written, r);
    this.skipped += batch.length - written.length;
  }
}

/** Adds memories in batches; with `skipExisting`, ids already stored are left out. */
export async function writeMemories(
  store: Store,
  memories: Memory[],
  skipExisting: boolean,
): Promise<number> {
  let todo = memories;
  if (todo.length === 0) return 0;
  if (skipExisting) {
    const ids = memories.map((m) => m.id);
    const have = new Set(
      (await store.listMemories({ ids }, { limit: ids.length })).map((m) => m.id),
    );
    todo = memories.filter((m) => !have.has(m.id));
  }
  if (todo.length > 0) await store.addMemories(todo);
  return todo.length;
}

/** Whether a lease is held now: not released, not expired. */
export const isLive = (l: Lease, now = Date.now()) => l.releasedAt === null && l.expiresAt > now;

/**
 * Restores leases, except where the store holds a live one of that key (unless it is the
 * same record, which the store leaves as it is): a restore never takes or extends a lease
 * someone holds (the store refuses it; those are left out here and counted as kept). A
 * lease taken meanwhile is looked up again.
 */
export async function writeLeases(
  store: Store,
  leases: Lease[],
): Promise<{ written: number; kept: number }> {
  for (let attempt = 1; ; attempt++) {
    const todo: Lease[] = [];
    for (const l of leases) {
      const there = await store.getLease(l.key);
      if (!there || !isLive(there) || sameRecord(there, l)) todo.push(l);
    }
    try {
      if (todo.length > 0) await store.restoreLeases(todo);
      return { written: todo.length, kept: leases.length - todo.length };
    } catch (e) {
      if (!isCairnError(e, 'CONFLICT') || attempt >= 3) throw e;
    }
  }
}

/** Records the source's embedding space in the target (a no-op when it is the same). */
export async function writeEmbeddingSpace(
  store: Store,
  space: EmbeddingSpace | null,
): Promise<void> {
  if (space?.embedderId)
    await store.ensureEmbeddingSpace({
      embedderId: space.embedderId,
      dimensions: space.dimensions,
    });
}

/**
 * Reads a dump from `input` into `store`: threads atomically each (in transactions of a
 * few at once), then leases and memories in batches. Checks the trailer's counts.
 */
export async function importDump(
  store: Store,
  lines: AsyncIterator<string>,
  options: { skipExisting?: boolean } = {},
): Promise<{ written: Counts; skippedThreads: number; keptLeases: number }> {
  const skipExisting = options.skipExisting ?? false;
  const writer = new ThreadWriter(store, skipExisting);
  const read = zeroCounts();
  let current: ThreadRecords | null = null;
  let leases: Lease[] = [];
  let memories: Memory[] = [];
  let memoriesWritten = 0;
  let leasesWritten = 0;
  let leasesKept = 0;
  let end: Counts | null = null;
  let n = 1;
  const flushOthers = async () => {
    const l = await writeLeases(store, leases);
    leasesWritten += l.written;
    leasesKept += l.kept;
    memoriesWritten += await writeMemories(store, memories, skipExisting);
    leases = [];
    memories = [];
  };
  for (let next = await lines.next(); !next.done; next = await lines.next()) {
    n++;
    if (next.value === '') continue;
    if (end) throw new CliError(`line ${n}: records after the end of the dump`);
    let rec: Record<string, unknown> & { kind?: unknown };
    try {
      rec = JSON.parse(next.value);
    } catch {
      if ((await lines.next()).done) {
        // The input ends inside this line: a dump cut short (a copy killed mid-write). What
        // was complete before it is written, as for a dump cut at a line end.
        await writer.flush();
        await flushOthers();
        throw new CliError(
          `line ${n}: the dump is cut short inside this line (what came before it was imported)`,
        );
      }
      throw new CliError(`line ${n}: not JSON`);
    }
    const { kind, ...value } = rec;
    const table = TABLE_OF[kind as Kind];
    if (table) read[table]++;
    const inThread = current !== null;
    switch (kind) {
      case 'embeddingSpace':
        await writeEmbeddingSpace(store, value as unknown as EmbeddingSpace);
        break;
      case 'thread':
        if (inThread)
          throw new CliError(`line ${n}: a thread starts before the previous one ended`);
        current = {
          thread: value as never,
          messages: [],
          branches: [],
          checkpoints: [],
          stateCommits: [],
          turns: [],
        };
        break;
      case 'message':
      case 'branch':
      case 'checkpoint':
      case 'stateCommit':
      case 'turn': {
        if (!current) throw new CliError(`line ${n}: a ${kind} outside a thread`);
        const list = {
          message: 'messages',
          branch: 'branches',
          checkpoint: 'checkpoints',
          stateCommit: 'stateCommits',
          turn: 'turns',
        }[kind] as Exclude<keyof ThreadRecords, 'thread'>;
        (current[list] as unknown[]).push(value);
        break;
      }
      case 'threadEnd':
        if (!current || value.id !== current.thread.id)
          throw new CliError(`line ${n}: threadEnd without its thread`);
        await writer.add(current);
        current = null;
        break;
      case 'lease':
      case 'memory':
        if (inThread) throw new CliError(`line ${n}: a ${kind} inside a thread`);
        if (kind === 'lease') leases.push(value as unknown as Lease);
        else memories.push(memoryOf(value, n));
        if (leases.length + memories.length >= MEMORIES_PER_BATCH) {
          await writer.flush();
          await flushOthers();
        }
        break;
      case 'end':
        if (inThread) throw new CliError(`line ${n}: the dump ends inside a thread`);
        end = value.counts as Counts;
        break;
      default:
        throw new CliError(`line ${n}: unknown record kind ${JSON.stringify(kind)}`);
    }
  }
  await writer.flush();
  await flushOthers();
  if (!end)
    throw new CliError(
      'the dump is truncated: it has no end record (what came before it was imported)',
    );
  for (const t of DUMP_TABLES) {
    if (end[t] !== read[t])
      throw new CliError(`the dump's end record counts ${end[t]} ${t}, the dump holds ${read[t]}`);
  }
  const written = { ...writer.written, leases: leasesWritten, memories: memoriesWritten };
  return { written, skippedThreads: writer.skipped, keptLeases: leasesKept };
}

/** A memory record as the store takes it: an embedding in base64 decoded. */
function memoryOf(value: Record<string, unknown>, n: number): Memory {
  if (typeof value.embedding === 'string') {
    const numbers = decodeEmbedding(value.embedding);
    if (!numbers) throw new CliError(`line ${n}: a memory's embedding is not base64 of float32s`);
    value.embedding = numbers;
  }
  return value as unknown as Memory;
}

/** The longest line a dump may hold: a record longer than this is refused, not parsed. */
export const MAX_LINE_BYTES = 256 * 1024 * 1024;

/**
 * The lines of a stream of UTF-8, without their line ends (`\n` or `\r\n`). Bytes that are
 * not UTF-8 are an error naming the line (never replaced by U+FFFD), and so is a line over
 * `maxLineBytes`, found before it is held whole.
 */
export async function* readLines(
  input: NodeJS.ReadableStream | AsyncIterable<Buffer | string>,
  maxLineBytes = MAX_LINE_BYTES,
): AsyncGenerator<string, void, undefined> {
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  let parts: Buffer[] = [];
  let size = 0;
  let n = 0;
  const tooLong = () =>
    new CliError(
      `line ${n + 1} is over ${maxLineBytes.toLocaleString('en-US')} bytes: no dump record is that long`,
    );
  const decode = (bytes: Buffer): string => {
    n++;
    const end =
      bytes.length > 0 && bytes[bytes.length - 1] === 0x0d ? bytes.length - 1 : bytes.length;
    try {
      return decoder.decode(bytes.subarray(0, end));
    } catch {
      throw new CliError(`line ${n}: not valid UTF-8`);
    }
  };
  for await (const chunk of input as AsyncIterable<Buffer | string>) {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    let at = 0;
    // A line end byte never occurs inside a UTF-8 sequence: lines split on bytes.
    for (let nl = buf.indexOf(0x0a, at); nl !== -1; nl = buf.indexOf(0x0a, at)) {
      const piece = buf.subarray(at, nl);
      if (size + piece.length > maxLineBytes) throw tooLong();
      const line = parts.length === 0 ? piece : Buffer.concat([...parts, piece]);
      parts = [];
      size = 0;
      at = nl + 1;
      yield decode(line);
    }
    if (at < buf.length) {
      size += buf.length - at;
      if (size > maxLineBytes) throw tooLong();
      parts.push(buf.subarray(at));
    }
  }
  if (size > 0) yield decode(Buffer.concat(parts));
}

/** The lines of a dump on a stream (`readLines`). */
export function linesOf(input: NodeJS.ReadableStream): AsyncIterator<string> {
  return readLines(input);
}

/**
 * A checksum of a table that does not depend on the store: each record's canonical JSON
 * (keys sorted, vectors as their float32s in base64: SQLite keeps no more) hashed, the
 * hashes summed, so the order the rows come in does not matter.
 */
class TableChecksum {
  #sum = 0n;
  count = 0;
  add(value: unknown): void {
    const h = createHash('sha256').update(canonical(value)).digest('hex');
    this.#sum = (this.#sum + BigInt(`0x${h}`)) % (1n << 256n);
    this.count++;
  }
  get hex(): string {
    return this.#sum.toString(16).padStart(64, '0');
  }
}

function canonical(value: unknown, key = ''): string {
  if (Array.isArray(value))
    return key === 'embedding' && value.every((v) => typeof v === 'number')
      ? JSON.stringify(float32Base64(Float32Array.from(value)))
      : `[${value.map((v) => canonical(v)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value)
      .filter(([k]) => k !== 'seq')
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v, k)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** Whether two records are the same as a checksum sees them (key order and float32 rounding aside). */
export const sameRecord = (a: unknown, b: unknown) => canonical(a) === canonical(b);

/** A count and checksum per table, fed record by record. */
export class Checksums {
  readonly tables = Object.fromEntries(DUMP_TABLES.map((t) => [t, new TableChecksum()])) as Record<
    DumpTable,
    TableChecksum
  >;

  addThread(r: ThreadRecords): void {
    const t = this.tables;
    t.threads.add(r.thread);
    for (const m of r.messages) t.messages.add(m);
    for (const b of r.branches) t.branches.add(b);
    for (const c of r.checkpoints) t.checkpoints.add(c);
    for (const c of r.stateCommits) t.stateCommits.add(c);
    for (const x of r.turns) t.turns.add(x);
  }
}

/** Counts and checksums of every table of `store`. */
export async function checksums(store: Store): Promise<Checksums> {
  const sums = new Checksums();
  for (const id of await threadIdsOldestFirst(store)) {
    const r = await store.exportThread(id);
    if (r) sums.addThread(r); // else deleted meanwhile
  }
  for await (const leases of pages((cursor) => store.listLeases({ limit: 1000, cursor })))
    for (const l of leases) sums.tables.leases.add(l);
  for await (const memories of pages((cursor) => store.scanMemories({ limit: 1000, cursor })))
    for (const m of memories) sums.tables.memories.add(m);
  return sums;
}
