/**
 * Consolidation: a background pass over an agent's current memories that merges duplicates
 * and ends facts a newer one contradicts, by a rule that can be replaced. It only closes
 * versions (`Store.closeMemory`): nothing is deleted, and a version that changed since the
 * pass read it is left alone (the next pass decides again).
 */
import {
  checkKeys,
  invalidArgument,
  isCairnError,
  type JsonObject,
  keysOf,
  type Memory,
  newId,
} from '@cairn/core';
import {
  type CloseMemoryOptions,
  contentHash,
  cosineSimilarity,
  type Page,
  type Store,
} from '@cairn/store';
import { branchAnchor } from '@cairn/store/adapter';

const invalid = invalidArgument;

/** What every consolidation lease key starts with (see `consolidationLeaseKey`). */
export const CONSOLIDATION_LEASE_PREFIX = 'cairn:consolidate:';

/** Where a pass looks: one agent's memories, optionally of one entity, room or world. */
export interface ConsolidationScope {
  entityId?: string;
  roomId?: string;
  worldId?: string;
}

/**
 * The lease a pass over `agentId`'s memories in `scope` holds: one runner per scope across
 * processes (another finds `ran: false`).
 */
export function consolidationLeaseKey(agentId: string, scope: ConsolidationScope = {}): string {
  const key = JSON.stringify([
    agentId,
    scope.entityId ?? null,
    scope.roomId ?? null,
    scope.worldId ?? null,
  ]);
  return `${CONSOLIDATION_LEASE_PREFIX}${contentHash(key)}`;
}

/**
 * Why memories were put in one group. All of a group are current, open memories of one
 * place: the same agent, type, entity, room, world, scope and branch (a branch-scoped
 * memory only with those learned at the same message) — never across them.
 *
 * - `same-text`: their texts are equal after `normalizeText`.
 * - `same-key`: they declare the same `metadata.factKey` (a string): values of one fact.
 * - `similar`: their embeddings' cosine similarity is at least `similarity` (only when
 *   that option is given).
 */
export type CandidateReason = 'same-text' | 'same-key' | 'similar';

export interface CandidateGroup {
  reason: CandidateReason;
  /**
   * Two or more memories, oldest first (by `validFrom`, none first, then `createdAt`);
   * `embedding` is null unless the pass was given `similarity`.
   */
  memories: Memory[];
}

/**
 * A rule's decision about a group (ids of the group's memories):
 * - `merge`: `duplicates` say what `keep` says; they are closed now, pointing at it.
 * - `supersede`: `by` replaces `old`; `old` is closed as of `by`'s `validFrom` (now if
 *   none), which must not be before `old`'s.
 * - `keep`: nothing changes (the same as returning no decision).
 * `reason` is recorded on what is closed.
 */
export type ConsolidationDecision =
  | { action: 'merge'; keep: string; duplicates: string[]; reason?: string }
  | { action: 'supersede'; old: string; by: string; reason?: string }
  | { action: 'keep'; reason?: string };

/**
 * Decides what to do with one group. Anything can stand behind it: the deterministic
 * `defaultConsolidationRule`, or a model asked whether two texts say the same thing.
 * It runs off the hot path, between small transactions, and may take its time.
 */
export type ConsolidationRule = (
  group: CandidateGroup,
  context: { signal?: AbortSignal },
) => ConsolidationDecision[] | Promise<ConsolidationDecision[]>;

export interface ConsolidateOptions extends ConsolidationScope {
  /** Default `defaultConsolidationRule`. */
  rule?: ConsolidationRule;
  /**
   * Also group memories whose embeddings are at least this similar (cosine, above 0, at
   * most 1), for a rule that can tell paraphrases apart. Default: off (the default rule
   * ignores `similar` groups).
   */
  similarity?: number;
  /**
   * The most current memories one pass looks at (default 100,000, at most 1,000,000), the
   * first in id order. Their embeddings are held only with `similarity`.
   */
  limit?: number;
  /** The owner recorded on the lease; a fresh id by default. */
  owner?: string;
  /** The lease's time to live (ms), renewed between groups. Default 60,000. */
  leaseTtlMs?: number;
  signal?: AbortSignal;
}

/** What one pass did. */
export interface ConsolidationReport {
  /** False when another runner held this scope's lease: the call did nothing. */
  ran: boolean;
  /** Current memories looked at. */
  scanned: number;
  /** Groups handed to the rule. */
  groups: number;
  /** Duplicates closed into the memory kept. */
  merged: number;
  /** Facts closed because a newer one replaces them. */
  superseded: number;
  /**
   * Decisions not applied because a memory changed (or was closed or deleted) since the
   * pass read it: a concurrent write wins, and the next pass decides again.
   */
  skipped: number;
}

/**
 * A text as the default rule compares it: Unicode-normalised (NFKC), lower-case, runs of
 * white space as one space, without white space or `.,;:!?` at either end.
 */
export function normalizeText(text: string): string {
  return text
    .normalize('NFKC')
    .toLowerCase()
    .replace(/\s+/g, ' ')
    .replace(/^[\s.,;:!?]+|[\s.,;:!?]+$/g, '');
}

/**
 * The rule used when none is given; it needs no model and explains itself:
 * - `same-text` groups merge into their oldest memory ("same text after normalisation").
 * - `same-key` groups: the memory with the latest `validFrom` supersedes every other one,
 *   but only when that `validFrom` is later than all of theirs; a tie is kept as it is.
 * - `similar` groups are kept: similar is not the same, and only a model can tell.
 */
export const defaultConsolidationRule: ConsolidationRule = (group) => {
  const [first, ...rest] = group.memories;
  if (!first || rest.length === 0) return [];
  if (group.reason === 'same-text')
    return [
      {
        action: 'merge',
        keep: first.id,
        duplicates: rest.map((m) => m.id),
        reason: 'same text after normalisation',
      },
    ];
  if (group.reason !== 'same-key') return [];
  const newest = group.memories.at(-1)!;
  const from = newest.validFrom;
  if (from === null) return [];
  const older = group.memories.slice(0, -1);
  if (older.some((m) => m.validFrom !== null && m.validFrom >= from)) return [];
  return older.map((m) => ({
    action: 'supersede' as const,
    old: m.id,
    by: newest.id,
    reason: `a newer value of ${JSON.stringify(m.metadata.factKey)} holds from ${new Date(from).toISOString()}`,
  }));
};

/** `consolidate`'s options with defaults filled in. */
export interface CheckedConsolidate {
  scope: ConsolidationScope;
  rule: ConsolidationRule;
  similarity: number | null;
  limit: number;
  owner: string | undefined;
  leaseTtlMs: number;
  signal: AbortSignal | undefined;
}

const CONSOLIDATE_KEYS = keysOf<ConsolidateOptions>()([
  'entityId',
  'roomId',
  'worldId',
  'rule',
  'similarity',
  'limit',
  'owner',
  'leaseTtlMs',
  'signal',
]);

/** Checks `consolidate`'s options; `INVALID_ARGUMENT` naming the one it cannot take. */
export function checkConsolidateOptions(
  options: unknown,
  label = 'consolidate options',
  extraKeys: readonly string[] = [],
): CheckedConsolidate {
  if (typeof options !== 'object' || options === null || Array.isArray(options))
    throw invalid(`${label} must be an object`);
  checkKeys(options, label, [...CONSOLIDATE_KEYS, ...extraKeys]);
  const o = options as ConsolidateOptions;
  const scope: ConsolidationScope = {};
  for (const k of ['entityId', 'roomId', 'worldId'] as const) {
    const v = o[k];
    if (v === undefined) continue;
    if (typeof v !== 'string' || v === '')
      throw invalid(`${k} must be a non-empty string, got ${JSON.stringify(v)}`, { field: k });
    scope[k] = v;
  }
  if (o.rule !== undefined && typeof o.rule !== 'function')
    throw invalid('rule must be a function (group, context) => decisions', { field: 'rule' });
  const { similarity } = o;
  if (
    similarity !== undefined &&
    !(typeof similarity === 'number' && similarity > 0 && similarity <= 1)
  )
    throw invalid(`similarity must be a number above 0 and at most 1, got ${String(similarity)}`, {
      field: 'similarity',
    });
  const int = (v: unknown, name: string, fallback: number, max: number) => {
    if (v === undefined) return fallback;
    if (!Number.isInteger(v) || (v as number) < 1 || (v as number) > max)
      throw invalid(`${name} must be an integer from 1 to ${max}, got ${String(v)}`, {
        field: name,
      });
    return v as number;
  };
  if (o.owner !== undefined && (typeof o.owner !== 'string' || o.owner.trim() === ''))
    throw invalid('owner must be a non-blank string', { field: 'owner' });
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal))
    throw invalid('signal must be an AbortSignal', { field: 'signal' });
  return {
    scope,
    rule: o.rule ?? defaultConsolidationRule,
    similarity: similarity ?? null,
    limit: int(o.limit, 'limit', 100_000, 1_000_000),
    owner: o.owner,
    leaseTtlMs: int(o.leaseTtlMs, 'leaseTtlMs', 60_000, 86_400_000),
    signal: o.signal,
  };
}

/** Memories read per page: small reads, so a pass never holds the store long. */
const PAGE = 64;
/** Pairs compared for similarity between two yields to other work. */
const COMPARE_SLICE = 4096;

const yieldToOthers = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Where a memory is and who may see it: a group never spans two places. */
const placeOf = (m: Memory) =>
  JSON.stringify([m.agentId, m.type, m.entityId, m.roomId, m.worldId, m.scope, branchAnchor(m)]);

const oldestFirst = (a: Memory, b: Memory) =>
  (a.validFrom ?? Number.NEGATIVE_INFINITY) - (b.validFrom ?? Number.NEGATIVE_INFINITY) ||
  a.createdAt - b.createdAt ||
  (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** Groups of two or more, by `key` (null: in no group), each oldest first. */
function groupBy(memories: Memory[], key: (m: Memory) => string | null): Memory[][] {
  const groups = new Map<string, Memory[]>();
  for (const m of memories) {
    const k = key(m);
    if (k === null) continue;
    const full = `${placeOf(m)}\u0000${k}`;
    const g = groups.get(full);
    if (g) g.push(m);
    else groups.set(full, [m]);
  }
  return [...groups.values()].filter((g) => g.length > 1).map((g) => g.sort(oldestFirst));
}

/** Connected groups of memories at least `threshold` similar, within each place. */
async function similarGroups(memories: Memory[], threshold: number): Promise<Memory[][]> {
  const out: Memory[][] = [];
  for (const bucket of groupBy(memories, () => '')) {
    const withVector = bucket.filter((m) => m.embedding !== null);
    const parent = withVector.map((_, i) => i);
    const root = (i: number): number => {
      while (parent[i] !== i) i = parent[i] = parent[parent[i]!]!;
      return i;
    };
    let compared = 0;
    for (let i = 0; i < withVector.length; i++) {
      for (let j = i + 1; j < withVector.length; j++) {
        if (++compared % COMPARE_SLICE === 0) await yieldToOthers();
        const a = withVector[i]!.embedding!;
        const b = withVector[j]!.embedding!;
        if (a.length === b.length && cosineSimilarity(a, b) >= threshold) parent[root(j)] = root(i);
      }
    }
    const byRoot = new Map<number, Memory[]>();
    withVector.forEach((m, i) => {
      const r = root(i);
      byRoot.set(r, [...(byRoot.get(r) ?? []), m]);
    });
    for (const g of byRoot.values()) if (g.length > 1) out.push(g.sort(oldestFirst));
  }
  return out;
}

/** The kinds consolidated: documents and their fragments are parts of a whole, never merged. */
const KINDS = ['message', 'description', 'custom'] as const;

/**
 * The current, open memories of the scope, a small page of the store at a time (by id,
 * so that a batch written in one millisecond is paged like any other): no read holds the
 * store, or this process, long. Embeddings are kept only when `similarity` needs them.
 */
async function readCurrent(
  store: Store,
  agentId: string,
  o: CheckedConsolidate,
): Promise<Memory[]> {
  const out: Memory[] = [];
  const { entityId, roomId, worldId } = o.scope;
  let cursor: string | null = null;
  do {
    const page: Page<Memory> = await store.scanMemories({ limit: PAGE, cursor });
    for (const m of page.items) {
      if (
        m.agentId !== agentId ||
        !(KINDS as readonly string[]).includes(m.type) ||
        m.supersededAt !== null ||
        m.validTo !== null ||
        (entityId !== undefined && m.entityId !== entityId) ||
        (roomId !== undefined && m.roomId !== roomId) ||
        (worldId !== undefined && m.worldId !== worldId)
      )
        continue;
      out.push(o.similarity === null ? { ...m, embedding: null } : m);
      if (out.length >= o.limit) return out;
    }
    cursor = page.nextCursor;
    await yieldToOthers();
  } while (cursor !== null && !o.signal?.aborted);
  return out;
}

/** One decision, checked against its group: `INVALID_ARGUMENT` for what the rule got wrong. */
function checkDecision(d: unknown, group: CandidateGroup, at: string): ConsolidationDecision {
  const ids = new Set(group.memories.map((m) => m.id));
  const member = (v: unknown, field: string) => {
    if (typeof v !== 'string' || !ids.has(v))
      throw invalid(
        `${at}.${field} must be the id of a memory of the group, got ${JSON.stringify(v)}`,
        { field: `${at}.${field}` },
      );
    return v;
  };
  if (typeof d !== 'object' || d === null)
    throw invalid(`${at} must be a decision { action: 'merge' | 'supersede' | 'keep', ... }`);
  const action = (d as { action?: unknown }).action;
  const reason = (d as { reason?: unknown }).reason;
  if (reason !== undefined && typeof reason !== 'string')
    throw invalid(`${at}.reason must be a string`, { field: `${at}.reason` });
  if (action === 'keep') {
    checkKeys(d, at, ['action', 'reason']);
    return d as ConsolidationDecision;
  }
  if (action === 'merge') {
    checkKeys(d, at, ['action', 'keep', 'duplicates', 'reason']);
    const m = d as { keep: unknown; duplicates: unknown };
    const keep = member(m.keep, 'keep');
    if (!Array.isArray(m.duplicates) || m.duplicates.length === 0)
      throw invalid(`${at}.duplicates must be a non-empty array of ids of the group`, {
        field: `${at}.duplicates`,
      });
    const dups = m.duplicates.map((x, i) => member(x, `duplicates[${i}]`));
    if (dups.includes(keep) || new Set(dups).size !== dups.length)
      throw invalid(`${at}: duplicates must be distinct and must not hold keep (${keep})`, {
        field: `${at}.duplicates`,
      });
    return { action, keep, duplicates: dups, ...(reason === undefined ? {} : { reason }) };
  }
  if (action === 'supersede') {
    checkKeys(d, at, ['action', 'old', 'by', 'reason']);
    const s = d as { old: unknown; by: unknown };
    const old = member(s.old, 'old');
    const by = member(s.by, 'by');
    if (old === by) throw invalid(`${at}: a memory cannot supersede itself`, { field: `${at}.by` });
    const byFrom = group.memories.find((m) => m.id === by)!.validFrom;
    const oldFrom = group.memories.find((m) => m.id === old)!.validFrom;
    // The old one holds until the new one starts (now, when it holds since always).
    const until = byFrom ?? Date.now();
    if (oldFrom !== null && until < oldFrom)
      throw invalid(
        `${at}: ${by} (validFrom ${byFrom ?? 'none: from now'}) starts before ${old} (validFrom ${oldFrom}) and cannot supersede it`,
        { field: `${at}.by` },
      );
    return { action, old, by, ...(reason === undefined ? {} : { reason }) };
  }
  throw invalid(`${at}.action must be merge, supersede or keep, got ${JSON.stringify(action)}`, {
    field: `${at}.action`,
  });
}

/**
 * Closes `memory` as replaced by `into`, in a transaction of its own: only if it is still
 * as read and `into` is still current with the text (and `factKey`) read. False when a
 * concurrent write got there first.
 */
async function closeInto(
  store: Store,
  memory: Memory,
  into: Memory,
  action: 'merge' | 'supersede',
  reason: string | undefined,
): Promise<boolean> {
  const note: JsonObject = { action, into: into.id, ...(reason === undefined ? {} : { reason }) };
  const close: CloseMemoryOptions = {
    expected: memory,
    metadata: { ...memory.metadata, consolidated: note },
  };
  if (action === 'supersede') close.validTo = into.validFrom ?? Date.now();
  else close.validTo = Math.max(Date.now(), memory.validFrom ?? 0);
  try {
    return await store.transaction(async (tx) => {
      // What replaces it must still say what the rule saw (and be there, and current).
      const target = await tx.getMemory(into.id);
      if (
        !target ||
        target.supersededAt !== null ||
        target.contentHash !== into.contentHash ||
        target.metadata.factKey !== into.metadata.factKey
      )
        return false;
      await tx.closeMemory(memory.id, close);
      return true;
    });
  } catch (e) {
    if (isCairnError(e, 'CONFLICT') || isCairnError(e, 'NOT_FOUND')) return false;
    throw e;
  }
}

/**
 * One pass of consolidation over `agentId`'s memories (see `AgentMemory.consolidate`).
 * `changed` is called after each memory it closes.
 */
export async function consolidatePass(
  store: Store,
  agentId: string,
  o: CheckedConsolidate,
  changed: () => void,
): Promise<ConsolidationReport> {
  const report: ConsolidationReport = {
    ran: false,
    scanned: 0,
    groups: 0,
    merged: 0,
    superseded: 0,
    skipped: 0,
  };
  const lease = {
    key: consolidationLeaseKey(agentId, o.scope),
    owner: o.owner ?? `consolidate-${newId()}`,
    ttlMs: o.leaseTtlMs,
  };
  try {
    await store.acquireLease(lease);
  } catch (e) {
    if (isCairnError(e, 'CONFLICT')) return report;
    throw e;
  }
  report.ran = true;
  let renewedAt = Date.now();
  try {
    const memories = await readCurrent(store, agentId, o);
    report.scanned = memories.length;
    const closed = new Set<string>();
    const live = () => memories.filter((m) => !closed.has(m.id));
    const kinds: Array<[CandidateReason, () => Promise<Memory[][]>]> = [
      ['same-text', async () => groupBy(live(), (m) => normalizeText(m.content.text))],
      [
        'same-key',
        async () =>
          groupBy(live(), (m) =>
            typeof m.metadata.factKey === 'string' && m.metadata.factKey !== ''
              ? m.metadata.factKey
              : null,
          ),
      ],
    ];
    if (o.similarity !== null) {
      const threshold = o.similarity;
      kinds.push(['similar', () => similarGroups(live(), threshold)]);
    }
    for (const [reason, find] of kinds) {
      for (const memoriesOfGroup of await find()) {
        if (o.signal?.aborted) return report;
        // A memory closed by an earlier group of this pass is no longer a candidate.
        const members = memoriesOfGroup.filter((m) => !closed.has(m.id));
        if (members.length < 2) continue;
        const group: CandidateGroup = { reason, memories: members };
        report.groups++;
        const raw = await o.rule(group, o.signal ? { signal: o.signal } : {});
        if (!Array.isArray(raw))
          throw invalid(`the consolidation rule must return an array of decisions`, {
            field: 'rule',
          });
        const decisions = raw.map((d, i) => checkDecision(d, group, `decisions[${i}]`));
        const byId = new Map(members.map((m) => [m.id, m]));
        for (const d of decisions) {
          if (d.action === 'keep') continue;
          const steps: Array<[Memory, Memory]> =
            d.action === 'merge'
              ? d.duplicates.map((id) => [byId.get(id)!, byId.get(d.keep)!])
              : [[byId.get(d.old)!, byId.get(d.by)!]];
          for (const [memory, into] of steps) {
            if (closed.has(memory.id) || closed.has(into.id)) {
              report.skipped++;
              continue;
            }
            if (await closeInto(store, memory, into, d.action, d.reason)) {
              closed.add(memory.id);
              changed();
              if (d.action === 'merge') report.merged++;
              else report.superseded++;
            } else report.skipped++;
            // Off the hot path: writers that queued meanwhile go first.
            await yieldToOthers();
          }
        }
        if (Date.now() - renewedAt < lease.ttlMs / 3) continue;
        // A runner that lost its lease (it expired and another took it) stops here.
        renewedAt = Date.now();
        const renewed = await store.renewLease(lease.key, lease.owner, lease.ttlMs).then(
          () => true,
          (e: unknown) => {
            if (isCairnError(e, 'CONFLICT') || isCairnError(e, 'NOT_FOUND')) return false;
            throw e;
          },
        );
        if (!renewed) return report;
      }
    }
    return report;
  } finally {
    await store.releaseLease(lease.key, lease.owner).catch(() => undefined);
  }
}
