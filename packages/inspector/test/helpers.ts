import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Store } from '@cairn/store';
import { createSqliteStore } from '@cairn/store-sqlite';

/** A store on a fresh SQLite file. */
export function openTestStore(): Store {
  return createSqliteStore({ path: join(mkdtempSync(join(tmpdir(), 'cairn-inspector-')), 'db') });
}

/**
 * A thread of `length` messages on `main` (active) and a branch `alt` forked at the
 * second message with two messages of its own.
 */
export async function seedThread(store: Store, length = 5) {
  const thread = await store.createThread({ title: 'Seeded', resourceId: 'ada' });
  const main = await store.addMessages(
    Array.from({ length }, (_, i) => ({
      id: `${thread.id}-m${i}`,
      threadId: thread.id,
      parentId: i === 0 ? null : `${thread.id}-m${i - 1}`,
      role: i % 2 === 0 ? 'user' : 'assistant',
      data: `message ${i}`,
    })),
  );
  const alt = await store.addMessages([
    { threadId: thread.id, parentId: main[1]!.id, role: 'user', data: 'alt 0' },
  ]);
  const alt1 = await store.addMessages([
    { threadId: thread.id, parentId: alt[0]!.id, role: 'assistant', data: 'alt 1' },
  ]);
  const mainBranch = await store.createBranch({
    threadId: thread.id,
    name: 'main',
    headMessageId: main.at(-1)!.id,
  });
  // Forked at the second message, then grown, as an engine would.
  const forked = await store.createBranch({
    threadId: thread.id,
    name: 'alt',
    headMessageId: main[1]!.id,
    parentBranchId: mainBranch.id,
  });
  const altBranch = await store.moveHead(forked.id, main[1]!.id, alt1[0]!.id);
  return { threadId: thread.id, main, alt: [...alt, ...alt1], mainBranch, altBranch };
}

/** A thread of `length` messages in one chain on `main`, written in batches of 1,000. */
export async function addLongThread(store: Store, length: number): Promise<string> {
  const thread = await store.createThread({ title: `${length} messages`, resourceId: 'long' });
  const id = (i: number) => `${thread.id}-${i}`;
  for (let from = 0; from < length; from += 1000) {
    await store.addMessages(
      Array.from({ length: Math.min(1000, length - from) }, (_, k) => {
        const i = from + k;
        return {
          id: id(i),
          threadId: thread.id,
          parentId: i === 0 ? null : id(i - 1),
          role: i % 2 === 0 ? 'user' : 'assistant',
          data: `message ${i}: ${'lorem ipsum '.repeat(4)}`,
        };
      }),
    );
  }
  await store.createBranch({ threadId: thread.id, name: 'main', headMessageId: id(length - 1) });
  return thread.id;
}
