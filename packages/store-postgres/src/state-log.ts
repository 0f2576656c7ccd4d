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
 */
export function appendTo(
  tail: Segment | null,
  c: StateCommit,
): { tail: Segment; sealed: Segment | null } {
  if (tail && tail.lastVersion - tail.firstVersion + 1 < SEGMENT_COMMITS) {
    const grown = withCommit(tail, c);
    if (grown.commits.byteLength <= segmentBytes(c)) return { tail: grown, sealed: null };
  }
  return { tail: withCommit(null, c), sealed: tail };
}

/** `open` with `c` (the next version) added, or a new segment of `c` alone when `open` is null. */
function withCommit(open: Segment | null, c: StateCommit): Segment {
  const entry: Entry = [c.messageId, c.messageDepth, c.update, c.snapshot, c.createdAt];
  const json = JSON.stringify(entry);
  const text = open ? `${unpackText(open.commits).slice(0, -1)},${json}]` : `[${json}]`;
  const depth = c.messageDepth ?? -1;
  return {
    firstVersion: open?.firstVersion ?? c.version,
    lastVersion: c.version,
    hasSnapshot: (open?.hasSnapshot ?? false) || c.snapshot !== null,
    minDepth: open ? Math.min(open.minDepth, depth) : depth,
    commits: packText(text),
  };
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
