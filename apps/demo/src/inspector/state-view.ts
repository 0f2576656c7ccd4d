import {
  type Branch,
  CairnError,
  type JsonObject,
  type JsonValue,
  jsonEqual,
  type Message,
} from '@cairn/core';

/** One field that differs between a message's state and its parent's. */
export interface FieldChange {
  field: string;
  kind: 'added' | 'changed' | 'removed';
  before: JsonValue | null;
  after: JsonValue | null;
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
