import { newId } from '@cairn/core';
import type { Store } from '@cairn/store';

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

/** Stores a chain of `n` messages on the thread, 10,000 per call; returns its head's id. */
export async function appendChain(store: Store, threadId: string, n: number): Promise<string> {
  let parent: string | null = null;
  for (let start = 0; start < n; start += 10_000) {
    const rows = chainRows(threadId, Math.min(10_000, n - start), parent);
    await store.addMessages(rows);
    parent = rows[rows.length - 1]!.id;
  }
  return parent!;
}
