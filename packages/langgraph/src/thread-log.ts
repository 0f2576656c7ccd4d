import { CairnError, type JsonValue } from '@cairn/core';
import { compareWritesSortKeys, writesSortKey } from '@langchain/langgraph-checkpoint';

/**
 * Messages a stored value refers to instead of holding them: where they sit (`null` for the
 * value itself, else a key of the value) and their Cairn message ids (a string for a lone
 * message, an array for a list). The payload holds `null` in their place.
 */
export type MessageRefs = Array<[key: string | null, ids: string | string[]]>;

/**
 * A value as the log stores it: `['json', parsed JSON]`, optionally with the messages it refers
 * to, or `[type, base64 bytes]` for any other serde type.
 */
export type StoredValue =
  | [type: string, payload: JsonValue]
  | [type: 'json', payload: JsonValue, refs: MessageRefs];

/** A list channel stored as Cairn messages: the head of its chain (null when empty) and its length. */
export interface StoredList {
  m: string | null;
  n: number;
}

/** What a checkpoint stored for one channel named in `newVersions`: a value, a message list, or nothing (0). */
export type ChannelRef = StoredValue | StoredList | 0;

/** A log entry for `put`: the checkpoint without `channel_values`, its metadata, and the channels it changed. */
export interface CheckpointRecord {
  lg: 'checkpoint';
  id: string;
  parent: string | null;
  header: StoredValue;
  meta: StoredValue;
  /** `[channel, version, value]` for every channel in `newVersions`. */
  vals: Array<[string, string | number, ChannelRef]>;
  /**
   * The namespace's newest checkpoint id once this record is folded (1: this one), and the log
   * version of the first writes for this checkpoint stored before it, if any: what a read of
   * the log's tail needs to know where to stop. Absent in records of earlier releases.
   */
  top?: string | 1;
  wf?: number;
  /** The namespace, in the records of one whose branch name is its hash (`namespaceBranch`). */
  ns?: string;
  /**
   * The version of the channels' shape the saver that wrote it had (`CairnSaverOptions.schema`);
   * absent: 1. A record of a newer version than its parent's holds every channel's value.
   */
  sv?: number;
}

/** A log entry for `putWrites`. */
export interface WritesRecord {
  lg: 'writes';
  cp: string;
  task: string;
  path: string;
  /** `[idx, channel, value]`; idx is `WRITES_IDX_MAP[channel]` or the write's position. */
  items: Array<[number, string, StoredValue]>;
  /** As in `CheckpointRecord`. */
  ns?: string;
}

/**
 * Several records stored in one commit, in the order they were made: what a `put` and the
 * writes that arrived with it (`CairnSaver` stores them in one transaction) add to a log.
 */
export interface BatchRecord {
  lg: 'batch';
  records: Array<CheckpointRecord | WritesRecord>;
}

export type LogRecord = CheckpointRecord | WritesRecord | BatchRecord;

/** The records a commit holds, oldest first. */
export function recordsOf(record: LogRecord): Array<CheckpointRecord | WritesRecord> {
  return record.lg === 'batch' ? record.records : [record];
}

export interface PendingWriteRecord {
  task: string;
  idx: number;
  channel: string;
  value: StoredValue;
  path: string;
}

interface Resolved {
  v: string | number;
  r: ChannelRef;
}

/**
 * One checkpoint namespace of one LangGraph thread, folded from its log (the state commits of
 * one Cairn branch). Entries are immutable once folded; `version` is the last commit folded.
 */
export class NamespaceLog {
  ns: string;
  /** The namespace its records name, if they do (a long namespace, whose branch is its hash). */
  recordedNs: string | undefined;
  readonly branchId: string;
  version = 0;
  head: string | null;
  latest: string | null = null;
  readonly checkpoints = new Map<string, CheckpointRecord>();
  readonly #writes = new Map<string, Map<string, PendingWriteRecord>>();
  /** The log version of each checkpoint's first writes. */
  readonly #firstWrites = new Map<string, number>();
  readonly #children = new Map<string, Set<string>>();
  #resolved = new Map<string, Map<string, Resolved>>();
  #sorted: string[] | null = null;

  constructor(ns: string, branchId: string, head: string | null) {
    this.ns = ns;
    this.branchId = branchId;
    this.head = head;
  }

  /** Folds one commit; commits must arrive in version order, and ones already folded are skipped. */
  fold(version: number, record: LogRecord): void {
    if (version <= this.version) return;
    this.version = version;
    for (const r of recordsOf(record)) this.#apply(version, r);
  }

  /**
   * Folds one record of the commit `version` that is being written (the records of one
   * `BatchRecord` are folded one by one as they are planned, each on the ones before it).
   */
  add(version: number, record: CheckpointRecord | WritesRecord): void {
    this.version = version;
    this.#apply(version, record);
  }

  #apply(version: number, record: CheckpointRecord | WritesRecord): void {
    if (record.ns !== undefined) this.recordedNs ??= record.ns;
    if (record.lg === 'checkpoint') {
      const old = this.checkpoints.get(record.id);
      // Earlier releases stored a checkpoint put again under its own id (LangGraph 1.4,
      // durability 'exit') as its own parent, without values: it keeps the old record's.
      if (record.parent === record.id) {
        const vals = record.vals.map(([channel]) => channel);
        record = {
          ...record,
          parent: old?.parent ?? null,
          vals: [...(old?.vals.filter(([c]) => !vals.includes(c)) ?? []), ...record.vals],
        };
      }
      // A checkpoint stored again under its id replaces the old one; what its descendants resolved may change.
      if (old) this.#resolved = new Map();
      this.checkpoints.set(record.id, record);
      if (record.parent !== null) {
        const siblings = this.#children.get(record.parent) ?? new Set<string>();
        this.#children.set(record.parent, siblings.add(record.id));
      }
      this.#sorted = null;
      if (this.latest === null || record.id > this.latest) this.latest = record.id;
      return;
    }
    const writes = this.#writes.get(record.cp) ?? new Map<string, PendingWriteRecord>();
    this.#writes.set(record.cp, writes);
    if (!this.#firstWrites.has(record.cp)) this.#firstWrites.set(record.cp, version);
    for (const [idx, channel, value] of record.items) {
      const key = `${record.task}\u0000${idx}`;
      // Special channels (negative idx) replace; ordinary writes are insert-or-ignore.
      if (idx >= 0 && writes.has(key)) continue;
      writes.set(key, { task: record.task, idx, channel, value, path: record.path });
    }
  }

  /** The checkpoints stored with this one as their parent. */
  children(id: string): CheckpointRecord[] {
    return [...(this.#children.get(id) ?? [])].map((c) => this.checkpoints.get(c)!);
  }

  /** The log version of a checkpoint's first writes, if it has any. */
  firstWrites(checkpointId: string): number | undefined {
    return this.#firstWrites.get(checkpointId);
  }

  /** The ids of the checkpoints that have pending writes (stored or not yet). */
  written(): string[] {
    return [...this.#writes.keys()];
  }

  hasWrite(checkpointId: string, task: string, idx: number): boolean {
    return this.#writes.get(checkpointId)?.has(`${task}\u0000${idx}`) ?? false;
  }

  /** The pending writes of a checkpoint in `writesSortKey(task_path, task_id, idx)` order. */
  writes(checkpointId: string): PendingWriteRecord[] {
    const writes = this.#writes.get(checkpointId);
    if (!writes) return [];
    return [...writes.values()]
      .map((w) => ({ w, key: writesSortKey(w.path, w.task, w.idx) }))
      .sort((a, b) => compareWritesSortKeys(a.key, b.key))
      .map(({ w }) => w);
  }

  /** Checkpoint ids, newest first. */
  newestFirst(): string[] {
    this.#sorted ??= [...this.checkpoints.keys()].sort().reverse();
    return this.#sorted;
  }

  /**
   * Marks a checkpoint seen on a walk up its parents: a checkpoint met twice is a cycle in the
   * log, an error rather than a walk that never ends.
   */
  #visit(seen: Set<string>, id: string): void {
    if (seen.has(id)) throw parentCycle(this.ns, id);
    seen.add(id);
  }

  /** The checkpoint ids from one up its parents (itself first), stopping at one not in the log. */
  *ancestry(id: string | null): Generator<CheckpointRecord> {
    const seen = new Set<string>();
    for (let cur = id; cur !== null; ) {
      const record = this.checkpoints.get(cur);
      if (!record) return;
      this.#visit(seen, cur);
      yield record;
      cur = record.parent;
    }
  }

  /**
   * What each channel holds at a checkpoint: the nearest value stored for it on the
   * checkpoint's own lineage (itself, then its parent, ...), with the version it was stored at.
   */
  resolve(id: string): Map<string, Resolved> {
    const known = this.#resolved.get(id);
    if (known) return known;
    const path: CheckpointRecord[] = [];
    const seen = new Set<string>();
    let base: Map<string, Resolved> | undefined;
    for (let cur: string | null = id; cur !== null; ) {
      base = this.#resolved.get(cur);
      if (base) break;
      const record = this.checkpoints.get(cur);
      if (!record) break;
      this.#visit(seen, cur);
      path.push(record);
      cur = record.parent;
    }
    let map = base ?? new Map<string, Resolved>();
    for (let i = path.length - 1; i >= 0; i--) {
      const record = path[i]!;
      map = new Map(map);
      for (const [channel, v, r] of record.vals) map.set(channel, { v, r });
      this.#resolved.set(record.id, map);
    }
    return map;
  }
}

function parentCycle(ns: string, id: string): CairnError {
  return new CairnError(
    'INVALID_UPDATE',
    `the checkpoint log of namespace ${JSON.stringify(ns)} has a cycle: checkpoint ${JSON.stringify(id)} is its own ancestor`,
  );
}

/**
 * A message node as cached: its parent and the serde's JSON of the message (its Cairn data as
 * `expandMessage` gives it back), parsed or serialized (at least one).
 */
export interface CachedNode {
  parent: string | null;
  value?: JsonValue;
  json?: string;
  /** What the fast path of `MessageReviver` knows it by (null: the serde revives it), once known. */
  sig?: string | null;
}

export function isStoredList(ref: ChannelRef): ref is StoredList {
  return typeof ref === 'object' && !Array.isArray(ref);
}

/**
 * Whether the newest commits of a namespace's log (newest first, down to log version `from`)
 * hold all a checkpoint's tuple needs: the checkpoint (`wanted`, else the newest), the records
 * of its lineage up to each of its channels' values, its pending writes. `'more'`: read further
 * back; `'all'`: the records cannot say (written by an earlier release, or a checkpoint before
 * v4, whose sends are in its parent's writes). Else the checkpoint's id.
 */
export function tailCovers(
  commits: ReadonlyArray<{ version: number; update: unknown }>,
  from: number,
  wanted: string | undefined,
): { id: string } | 'more' | 'all' {
  // The newest record of each checkpoint wins, as when the log is folded.
  const newest = new Map<string, CheckpointRecord>();
  let target = wanted;
  const records = commits.flatMap(({ update }) => [...recordsOf(update as LogRecord)].reverse());
  for (const record of records) {
    if (record.lg !== 'checkpoint' || newest.has(record.id)) continue;
    if (target === undefined) {
      if (record.top === undefined) return 'all';
      target = record.top === 1 ? record.id : record.top;
    }
    newest.set(record.id, record);
  }
  const record = target === undefined ? undefined : newest.get(target);
  if (!record) return 'more';
  const [type, header] = record.header;
  if (record.top === undefined || type !== 'json') return 'all';
  const { v, channel_versions } = header as { v?: number; channel_versions?: object };
  if ((v ?? 0) < 4) return 'all';
  if (record.wf !== undefined && from > record.wf) return 'more';
  const remaining = new Set(Object.keys(channel_versions ?? {}));
  const seen = new Set<string>();
  for (let cur: CheckpointRecord | undefined = record; remaining.size > 0; ) {
    // A cycle (an earlier release's record of a checkpoint put again, its own parent): the
    // whole log, folded, mends it.
    if (seen.has(cur.id) || cur.parent === cur.id) return 'all';
    seen.add(cur.id);
    for (const [channel] of cur.vals) remaining.delete(channel);
    if (remaining.size === 0 || cur.parent === null) break;
    cur = newest.get(cur.parent);
    if (!cur) return 'more';
  }
  return { id: record.id };
}
