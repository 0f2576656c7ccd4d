import { newId } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import type { Store, ThreadRecords } from '../../store.js';
import { disposeStore, type StoreConformanceOptions, TEST_TIMEOUT, useStore } from '../context.js';
import { allPages, expectCode, makeChain, makeThread } from '../helpers.js';

/** A thread with two branches, a fork, a checkpoint, state commits on both and two turns. */
async function richThread(store: Store) {
  const thread = await makeThread(store, { title: 'records', metadata: { k: [1, 'two'] } });
  const chain = await makeChain(store, thread.id, 4);
  const [side] = await store.addMessages([
    {
      threadId: thread.id,
      parentId: chain[1]!.id,
      role: 'assistant',
      type: 'text',
      data: { alt: true },
    },
  ]);
  const main = await store.createBranch({
    threadId: thread.id,
    name: 'main',
    headMessageId: chain[1]!.id,
  });
  await store.moveHead(main.id, chain[1]!.id, chain[3]!.id);
  const alt = await store.createBranch({
    threadId: thread.id,
    name: 'alt',
    headMessageId: side!.id,
    parentBranchId: main.id,
    activate: true,
  });
  await store.saveCheckpoint({ threadId: thread.id, name: 'cp', messageId: chain[2]!.id });
  await store.appendStateCommit(
    { branchId: main.id, messageId: chain[3]!.id, update: { a: 1 }, snapshot: { a: 1 } },
    0,
  );
  await store.appendStateCommit(
    { branchId: main.id, messageId: chain[3]!.id, update: { b: 2 } },
    1,
  );
  await store.appendStateCommit({ branchId: alt.id, messageId: null, update: { c: 3 } }, 0);
  for (const [i, status] of (['finished', 'running'] as const).entries()) {
    await store.putTurn({
      id: newId(),
      threadId: thread.id,
      messageId: chain[i]!.id,
      source: 'test',
      userId: null,
      status,
      state: { i },
      steps: [{ name: 'think', start: 1000 + i, end: null, error: null }],
      startedAt: 1000 + i,
      finishedAt: status === 'finished' ? 2000 : null,
    });
  }
  return { thread, chain, main, alt };
}

export function describeRecords(options: StoreConformanceOptions): void {
  describe('whole records (export, restore, scans)', () => {
    const store = useStore(options);

    /** A second, empty store for the duration of `fn`. */
    async function withOther(fn: (other: Store) => Promise<void>) {
      const other = await options.create();
      try {
        await fn(other);
      } finally {
        await disposeStore(options, other);
      }
    }

    /** `richThread` in the store under test, with its records as `exportThread` gives them. */
    async function exportedRichThread() {
      const rich = await richThread(store());
      return { ...rich, r: (await store().exportThread(rich.thread.id))! };
    }

    it(
      'exports a thread whole, in a fixed order',
      async () => {
        const { thread, chain, main, alt, r } = await exportedRichThread();
        expect(r.thread).toEqual(thread);
        expect(r.messages.map((m) => m.depth)).toEqual([0, 1, 2, 2, 3]);
        expect(new Set(r.messages.map((m) => m.id))).toEqual(
          new Set([...chain.map((m) => m.id), r.messages[3]!.id, r.messages[2]!.id]),
        );
        expect(r.branches.map((b) => [b.name, b.isActive])).toEqual([
          ['main', false],
          ['alt', true],
        ]);
        expect(r.branches[0]).not.toHaveProperty('seq');
        expect(r.branches[0]!.forkMessageId).toBe(chain[1]!.id);
        expect(r.stateCommits.map((c) => [c.branchId, c.version])).toEqual([
          [main.id, 1],
          [main.id, 2],
          [alt.id, 1],
        ]);
        expect(r.checkpoints.map((c) => c.name)).toEqual(['cp']);
        expect(r.turns.map((t) => t.startedAt)).toEqual([1000, 1001]);
        expect(await store().exportThread(`missing-${newId()}`)).toBeNull();
      },
      TEST_TIMEOUT,
    );

    it(
      'restores a thread exactly as exported, into another store',
      async () => {
        const { thread, r } = await exportedRichThread();
        await withOther(async (other) => {
          await other.restoreThread(r);
          expect(await other.exportThread(thread.id)).toEqual(r);
          expect((await other.getActiveBranch(thread.id))!.name).toBe('alt');
          const main = (await other.getBranch(thread.id, 'main'))!;
          expect((await other.getChain(main.headMessageId!)).map((m) => m.id)).toEqual(
            (await store().getChain(main.headMessageId!)).map((m) => m.id),
          );
          // The restored branch goes on as any other.
          await other.appendStateCommit(
            { branchId: main.id, messageId: main.headMessageId, update: { d: 4 } },
            2,
          );
        });
      },
      TEST_TIMEOUT,
    );

    it(
      'refuses a thread whose id or message ids are taken, writing nothing',
      async () => {
        const { r } = await exportedRichThread();
        await expectCode(() => store().restoreThread(r), 'CONFLICT');
        const renamed: ThreadRecords = {
          ...r,
          thread: { ...r.thread, id: newId() },
          branches: [],
          stateCommits: [],
          checkpoints: [],
          turns: [],
        };
        renamed.messages = r.messages.map((m) => ({ ...m, threadId: renamed.thread.id }));
        await expectCode(() => store().restoreThread(renamed), 'CONFLICT');
        expect(await store().getThread(renamed.thread.id)).toBeNull();
      },
      TEST_TIMEOUT,
    );

    it(
      'refuses a checkpoint id another thread already uses (CONFLICT), writing nothing',
      async () => {
        const { thread, r } = await exportedRichThread();
        const id = newId();
        const ids = new Map(r.messages.map((m) => [m.id, newId()]));
        const copy: ThreadRecords = {
          thread: { ...r.thread, id },
          messages: r.messages.map((m) => ({
            ...m,
            id: ids.get(m.id)!,
            threadId: id,
            parentId: m.parentId === null ? null : ids.get(m.parentId)!,
          })),
          branches: [],
          stateCommits: [],
          turns: [],
          // Its own thread and message, but the id of the first thread's checkpoint.
          checkpoints: r.checkpoints.map((c) => ({
            ...c,
            threadId: id,
            messageId: ids.get(c.messageId)!,
          })),
        };
        const e = await expectCode(() => store().restoreThread(copy), 'CONFLICT');
        expect(e.message).toContain(r.checkpoints[0]!.id);
        expect(await store().getThread(id)).toBeNull();
        expect(await store().listCheckpoints(thread.id)).toEqual(r.checkpoints);
        // With an id of its own it restores.
        const own = { ...copy, checkpoints: copy.checkpoints.map((c) => ({ ...c, id: newId() })) };
        await store().restoreThread(own);
        expect(await store().exportThread(id)).toEqual(own);
      },
      TEST_TIMEOUT,
    );

    it(
      'checks the records before writing anything',
      async () => {
        const { thread, r } = await exportedRichThread();
        await withOther(async (other) => {
          const broken: Array<[string, ThreadRecords]> = [
            ['a child before its parent', { ...r, messages: [...r.messages].reverse() }],
            [
              'a head outside the thread',
              {
                ...r,
                branches: r.branches.map((b, i) =>
                  i === 0 ? { ...b, headMessageId: 'elsewhere' } : b,
                ),
              },
            ],
            [
              'two active branches',
              { ...r, branches: r.branches.map((b) => ({ ...b, isActive: true })) },
            ],
            ['a version gap', { ...r, stateCommits: r.stateCommits.slice(1) }],
            [
              'a turn of another thread',
              { ...r, turns: r.turns.map((t) => ({ ...t, threadId: 'other' })) },
            ],
            [
              'a turn naming a message outside the thread',
              { ...r, turns: r.turns.map((t) => ({ ...t, messageId: 'elsewhere' })) },
            ],
            [
              'a missing timestamp',
              { ...r, thread: { ...r.thread, createdAt: undefined as unknown as number } },
            ],
          ];
          for (const [what, records] of broken) {
            const e = await expectCode(
              () => other.restoreThread(records),
              records === broken[0]![1] ? 'NOT_FOUND' : 'INVALID_ARGUMENT',
            );
            expect(e.message, what).toBeTruthy();
            expect(await other.getThread(thread.id), what).toBeNull();
          }
        });
      },
      TEST_TIMEOUT,
    );

    it(
      'lists leases by key in pages and restores them with their timestamps',
      async () => {
        const prefix = `lease-${newId()}-`;
        for (const k of ['b', 'a', 'c'])
          await store().acquireLease({ key: prefix + k, owner: 'o', ttlMs: 60_000, data: { k } });
        const all = await allPages((cursor) => store().listLeases({ limit: 1, cursor }));
        const mine = all.filter((l) => l.key.startsWith(prefix));
        expect(mine.map((l) => l.key)).toEqual([`${prefix}a`, `${prefix}b`, `${prefix}c`]);
        const keys = all.map((l) => l.key);
        expect(keys).toEqual(
          [...keys].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y))),
        );
        await withOther(async (other) => {
          const old = { ...mine[0]!, acquiredAt: 5, renewedAt: 6, expiresAt: 7, releasedAt: 8 };
          await other.restoreLeases([old, ...mine.slice(1)]);
          expect(await other.getLease(old.key)).toEqual(old);
          await other.restoreLeases([mine[0]!]);
          expect((await other.listLeases()).items).toEqual(mine);
          await expectCode(
            () => other.restoreLeases([{ ...old, expiresAt: Number.NaN }]),
            'INVALID_ARGUMENT',
          );
        });
      },
      TEST_TIMEOUT,
    );

    it(
      'scans every memory by id in pages; addMemories writes them back as they were',
      async () => {
        const agentId = `agent-${newId()}`;
        const added = await store().addMemories(
          Array.from({ length: 5 }, (_, i) => ({
            agentId,
            content: { text: `fact ${i}` },
            createdAt: 100 + (i % 2),
          })),
        );
        const scanned = await allPages((cursor) => store().scanMemories({ limit: 2, cursor }));
        const ids = scanned.map((m) => m.id);
        expect(ids).toEqual(
          [...ids].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y))),
        );
        const mine = scanned.filter((m) => m.agentId === agentId);
        expect(new Set(mine.map((m) => m.id))).toEqual(new Set(added.map((m) => m.id)));
        await withOther(async (other) => {
          await other.addMemories(mine);
          expect((await other.scanMemories()).items).toEqual(mine);
        });
        await expectCode(() => store().scanMemories({ limit: 0 }), 'INVALID_ARGUMENT');
        await expectCode(() => store().listLeases({ cursor: 'nonsense' }), 'INVALID_ARGUMENT');
      },
      TEST_TIMEOUT,
    );

    it(
      'refuses a forged cursor whose key is not storable text (INVALID_ARGUMENT)',
      async () => {
        for (const key of ['a\u0000b', 'a\ud800b']) {
          const cursor = Buffer.from(JSON.stringify([key]), 'utf8').toString('base64url');
          await expectCode(() => store().listLeases({ cursor }), 'INVALID_ARGUMENT');
          await expectCode(() => store().scanMemories({ cursor }), 'INVALID_ARGUMENT');
        }
      },
      TEST_TIMEOUT,
    );
  });
}
