import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isCairnError, newId } from '@cairn/core';
import { afterAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'cairn-forget-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The file's bytes and its WAL's, as a stolen disk would give them. */
const rawBytes = (path: string) =>
  Buffer.concat([path, `${path}-wal`].filter((p) => existsSync(p)).map((p) => readFileSync(p)));

/** A unique lower-case word: one keyword-index term, found nowhere by chance. */
const canary = (label: string) => `canary${label}${newId().replaceAll('-', '')}`;

describe('forget on a SQLite file', () => {
  it('leaves no byte of the forgotten text in the file or its WAL, and keeps others’ text', async () => {
    const path = join(dir, `${newId()}.db`);
    const store = createSqliteStore({ path });
    const [inMessage, inLargeMessage, inMemory, inOldMemory, kept] = [
      canary('msg'),
      canary('large'),
      canary('mem'),
      canary('old'),
      canary('kept'),
    ];
    const user = `user-${newId()}`;
    const other = `user-${newId()}`;
    for (const [resourceId, words] of [
      [user, [inMessage, inLargeMessage]],
      [other, [kept, kept]],
    ] as const) {
      const { thread, branch } = await store.createThreadWithBranch({ resourceId });
      await store.addMessagesOnBranch(branch.id, null, [
        { threadId: thread.id, parentId: null, role: 'user', data: { text: `hi ${words[0]}` } },
      ]);
      // A payload on overflow pages of its own.
      await store.addMessages([
        {
          threadId: thread.id,
          parentId: null,
          role: 'user',
          data: `${'x'.repeat(20_000)} ${words[1]}`,
        },
      ]);
    }
    const [mem] = await store.addMemories([
      { agentId: 'a', entityId: user, content: { text: `the user said ${inOldMemory}` } },
      { agentId: 'a', entityId: other, content: { text: `the other said ${kept}` } },
    ]);
    // Freed before the forget: the old text's cell and keyword-index terms.
    await store.updateMemory(mem!.id, { content: { text: `the user said ${inMemory}` } });
    // Filler the forget does not touch, so pages stay in use around the deleted ones.
    for (let i = 0; i < 20; i++)
      await store.addMemories([
        { agentId: 'a', entityId: other, content: { text: `filler ${i}` } },
      ]);

    const before = rawBytes(path).toString('latin1');
    for (const word of [inMessage, inLargeMessage, inMemory, kept])
      expect(before.includes(word), `${word} is written before the forget`).toBe(true);

    const receipt = await store.forget({ resourceId: user, entityId: user });
    expect(receipt.counts).toMatchObject({ threads: 1, messages: 2, memories: 1 });

    const after = rawBytes(path).toString('latin1');
    for (const word of [inMessage, inLargeMessage, inMemory, inOldMemory])
      expect(after.includes(word), `${word} is gone from the file and WAL`).toBe(false);
    expect(after.includes(kept), 'the other user’s text stays').toBe(true);
    expect((await store.searchMemories({ text: kept })).length).toBe(1);
    await store.close();

    // The tombstone is in the file: a store opened on it later refuses the user.
    const reopened = createSqliteStore({ path });
    try {
      const e = await reopened.createThread({ resourceId: user }).catch((x: unknown) => x);
      expect(isCairnError(e, 'FORGOTTEN'), String(e)).toBe(true);
      const m = await reopened
        .addMemories([{ agentId: 'a', entityId: user, content: { text: 'late' } }])
        .catch((x: unknown) => x);
      expect(isCairnError(m, 'FORGOTTEN'), String(m)).toBe(true);
    } finally {
      await reopened.close();
    }
  });
});
