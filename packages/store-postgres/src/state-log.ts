import { createHash } from 'node:crypto';
import type { JsonObject, StateCommit } from '@cairn/core';
import { packText, unpackText } from './packed.js';

/**
 * A branch's state log is stored as segments: runs of consecutive commits packed together
 * (`packText` of a JSON array). A commit row costs ~200 bytes of row header, key and index
 * entry before its data, and a log's commits repeat one another's keys and ids, which only
 * compression across commits removes: the log of 1,000 turns of the bench's LangGraph chat
 * (5,000 commits, 2.5 MB of JSON) packs ~7x, into 0.33 MB.
 *
 * A branch's newest segment is its tail, a row of its own (`state_tail`): an append rewrites
 * it with the commit added while that keeps it within `segmentBytes` packed bytes and
 * `SEGMENT_COMMITS` commits; else the tail is sealed (moved, as it is, to `state_segments`,
 * which only ever grows by inserts) and the commit starts a new one. Within that size a
 * tail stays in its row, so the rewrite is an in-page (HOT) update whose old version the
 * page reclaims without VACUUM.
 */

/**
 * The most packed bytes of commits a segment holds, so that four sealed ones fill a page. A
 * segment of long ids holds less (`segmentBytes`).
 */
const SEGMENT_BYTES = 1900;
/**
 * Postgres moves a value out of its row (TOAST) once the row passes 2,032 bytes; a segment's
 * row holds up to 50 besides its packed commits and its two ids (tuple header, the other
 * columns, length headers, alignment: `lp_len` measured on PostgreSQL 15).
 */
const ROW_IN_PLACE = 2032 - 50;

/** The most packed bytes of commits a segment of this branch holds and stays in its row. */
export function segmentBytes(c: { branchId: string; threadId: string }): number {
  const ids = Buffer.byteLength(c.branchId) + Buffer.byteLength(c.threadId);
  return Math.min(SEGMENT_BYTES, ROW_IN_PLACE - ids);
}

/** The most commits a segment holds, whatever their size. */
export const SEGMENT_COMMITS = 256;

/** One commit in a segment; its version is the segment's first plus its position. */
type Entry = [
  messageId: string | null,
  messageDepth: number | null,
  update: JsonObject,
  snapshot: JsonObject | null,
  createdAt: number,
];

/** A segment as its row holds it. */
export interface Segment {
  firstVersion: number;
  lastVersion: number;
  /** Whether a commit in it has a snapshot. */
  hasSnapshot: boolean;
  /** The lowest `messageDepth` of its commits, a null depth counting as -1. */
  minDepth: number;
  commits: Uint8Array;
}

/**
 * The branch's tail once `c` (its next version) is appended: `tail` with `c` added, or, when
 * that would not fit, a new tail of `c` alone, `tail` being `sealed`.
 *
 * An append packs the whole tail again, so the tail is packed fast (`FAST`, ~4x faster than
 * full quality and ~15% larger): a segment closes where its commits no longer fit packed
 * fast, and is sealed packed at full quality, once. Only the tail's row, rewritten in place,
 * holds commits packed fast. (Packing the tail at full quality once it no longer fits fast,
 * to close the segment where that no longer fits, stores ~8% fewer bytes of a LangGraph
 * chat's log, for ~2.5x the packing time of every append.)
 */
export function appendTo(
  tail: Segment | null,
  c: StateCommit,
): { tail: Segment; sealed: Segment | null } {
  const entry = JSON.stringify([
    c.messageId,
    c.messageDepth,
    c.update,
    c.snapshot,
    c.createdAt,
  ] satisfies Entry);
  const depth = c.messageDepth ?? -1;
  const most = segmentBytes(c);
  const alone = (): Segment => {
    const text = `[${entry}]`;
    let commits = packText(text, FAST);
    // One commit too large to fit fast: at full quality (a commit more seals it).
    if (commits.byteLength > most) commits = packText(text);
    remember(c.branchId, { commits, text });
    return {
      firstVersion: c.version,
      lastVersion: c.version,
      hasSnapshot: c.snapshot !== null,
      minDepth: depth,
      commits,
    };
  };
  if (!tail) return { tail: alone(), sealed: null };
  const known = lastTail(c.branchId, tail.commits);
  const text = known?.text ?? unpackText(tail.commits);
  if (tail.lastVersion - tail.firstVersion + 1 < SEGMENT_COMMITS) {
    const grown = `${text.slice(0, -1)},${entry}]`;
    const commits = packText(grown, FAST);
    if (commits.byteLength <= most) {
      const next: Segment = {
        firstVersion: tail.firstVersion,
        lastVersion: c.version,
        hasSnapshot: tail.hasSnapshot || c.snapshot !== null,
        minDepth: Math.min(tail.minDepth, depth),
        commits,
      };
      remember(c.branchId, { commits, text: grown });
      return { tail: next, sealed: null };
    }
  }
  // Sealed packed at full quality (the same bytes if it is already: Brotli is deterministic).
  const sealed = { ...tail, commits: packText(text) };
  return { tail: alone(), sealed };
}

/** How fast a tail is packed while that fits (see `appendTo`). */
const FAST = 3;

/**
 * The last tails this process packed, by branch: the next append to a branch finds the tail
 * it wrote (the same bytes) and need not unpack it.
 */
interface KnownTail {
  commits: Uint8Array;
  text: string;
}
const lastTails = new Map<string, KnownTail & { sha256: Buffer | null }>();
const LAST_TAILS = 64;

function remember(branchId: string, tail: KnownTail): void {
  lastTails.delete(branchId);
  lastTails.set(branchId, { ...tail, sha256: null });
  if (lastTails.size > LAST_TAILS) lastTails.delete(lastTails.keys().next().value!);
}

/**
 * The tail this process wrote last to `branchId`, if it remembers it, and its SHA-256: the
 * branch's tail is the same bytes when its hash is.
 */
export function rememberedTail(
  branchId: string,
): { commits: Uint8Array; sha256: Buffer } | undefined {
  const known = lastTails.get(branchId);
  if (!known) return undefined;
  known.sha256 ??= createHash('sha256').update(known.commits).digest();
  return { commits: known.commits, sha256: known.sha256 };
}

/** The tail remembered for `branchId` if it is `commits` (else another process moved it on). */
function lastTail(branchId: string, commits: Uint8Array): KnownTail | undefined {
  const known = lastTails.get(branchId);
  return known && Buffer.compare(known.commits, commits) === 0 ? known : undefined;
}

/** The segments holding `commits`, consecutive versions of one branch in order: the last is the tail. */
export function segmentsOf(commits: Iterable<StateCommit>): Segment[] {
  const out: Segment[] = [];
  let tail: Segment | null = null;
  for (const c of commits) {
    const next = appendTo(tail, c);
    if (next.sealed) out.push(next.sealed);
    tail = next.tail;
  }
  return tail ? [...out, tail] : out;
}

/** The commits of a segment of branch `branchId` in thread `threadId`, oldest first. */
export function commitsOf(
  branchId: string,
  threadId: string,
  firstVersion: number,
  commits: Uint8Array,
): StateCommit[] {
  const entries = JSON.parse(unpackText(commits)) as Entry[];
  return entries.map(([messageId, messageDepth, update, snapshot, createdAt], i) => ({
    branchId,
    threadId,
    version: firstVersion + i,
    messageId,
    messageDepth,
    update,
    snapshot,
    createdAt,
  }));
}
