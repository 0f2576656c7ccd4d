import { newId } from '@cairn/core';

/** A message of the benches' chains, as the store takes it and as the raw baselines insert it. */
export interface Row {
  id: string;
  threadId: string;
  parentId: string | null;
  role: string;
  data: { text: string; i: number };
}

/** `n` messages in a chain after `parentId`, alternating user and assistant, each a short sentence. */
export function chainRows(threadId: string, n: number, parentId: string | null = null): Row[] {
  const ids = Array.from({ length: n }, () => newId());
  return ids.map((id, i) => ({
    id,
    threadId,
    parentId: i === 0 ? parentId : ids[i - 1]!,
    role: i % 2 === 0 ? 'user' : 'assistant',
    data: { text: `message ${i}: the quick brown fox jumps over the lazy dog`, i },
  }));
}
