import {
  applyUpdate,
  type Branch,
  CairnError,
  type JsonObject,
  type JsonValue,
  jsonEqual,
  type Message,
} from '@cairn/core';
import type { Store } from '@cairn/store';
import { Research } from '../research-state.js';

/** One field that differs between a message's state and its parent's. */
export interface FieldChange {
  field: string;
  kind: 'added' | 'changed' | 'removed';
  before: JsonValue | null;
  after: JsonValue | null;
}

/**
 * The thread state as of `depth` on `branch`'s lineage, read from the commit log without
 * touching the thread (the inspector must not switch the active branch to look): the
 * branch's last snapshot at or before that depth plus the commits after it, or, for a
 * depth before the branch's fork, its parent branch's.
 */
export async function stateOnLineage(
  store: Store,
  branches: ReadonlyMap<string, Branch>,
  branch: Branch,
  depth: number,
): Promise<JsonObject> {
  let b: Branch | undefined = branch;
  for (let hops = 0; b && hops < 1000; hops++) {
    const state = await readBranch(store, b.id, depth);
    if (state) return state;
    b = b.parentBranchId ? branches.get(b.parentBranchId) : undefined;
  }
  return Research.initial('thread') as unknown as JsonObject;
}

async function readBranch(
  store: Store,
  branchId: string,
  depth: number,
): Promise<JsonObject | null> {
  const base = await store.getLatestStateCommit(branchId, {
    withSnapshot: true,
    maxMessageDepth: depth,
  });
  const commits = await store.getStateCommits(
    branchId,
    base ? { fromVersion: base.version + 1 } : {},
  );
  const upTo = commits.filter((c) => (c.messageDepth ?? -1) <= depth);
  if (!base && upTo.length === 0) return null;
  let state = (base?.snapshot ?? Research.initial('thread')) as unknown as JsonObject;
  for (const c of upTo) {
    state = applyUpdate(Research, state as never, c.update as never, { scope: 'thread' })
      .state as unknown as JsonObject;
  }
  return state;
}

/** The first branch (in creation order) whose chain holds the message. */
export function branchOf(
  message: Message,
  branches: readonly Branch[],
  chains: ReadonlyMap<string, ReadonlySet<string>>,
): Branch {
  const found = branches.find((b) => chains.get(b.id)?.has(message.id));
  if (!found) throw new CairnError('NOT_FOUND', `message ${message.id} is on no branch`);
  return found;
}

/** The fields that differ between two states. */
export function diffStates(before: JsonObject, after: JsonObject): FieldChange[] {
  const changes: FieldChange[] = [];
  for (const field of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const a = before[field];
    const b = after[field];
    if (a !== undefined && b !== undefined && jsonEqual(a, b)) continue;
    changes.push({
      field,
      kind: a === undefined ? 'added' : b === undefined ? 'removed' : 'changed',
      before: a ?? null,
      after: b ?? null,
    });
  }
  return changes;
}
