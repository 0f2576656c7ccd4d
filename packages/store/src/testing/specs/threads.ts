import { newId, type Thread } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { runLeaseKey, type Store } from '../../store.js';
import { type StoreConformanceOptions, useStore } from '../context.js';
import {
  expectCode,
  expectTimestamp,
  makeChain,
  makeThread,
  NON_JSON,
  turnOf,
} from '../helpers.js';

export function describeThreads(options: StoreConformanceOptions): void {
  describe('threads', () => {
    const store = useStore(options);

    it('creates a thread with defaults and a generated id', async () => {
      const t = await store().createThread({});
      expect(typeof t.id).toBe('string');
      expect(t.id.length).toBeGreaterThan(0);
      expect(t.resourceId).toBeNull();
      expect(t.title).toBeNull();
      expect(t.metadata).toEqual({});
      expectTimestamp(t.createdAt);
      expect(t.updatedAt).toBeGreaterThanOrEqual(t.createdAt);
      expect(await store().getThread(t.id)).toEqual(t);
    });

    it('generates a different id for every thread', async () => {
      const threads = await Promise.all(Array.from({ length: 10 }, () => store().createThread({})));
      expect(new Set(threads.map((t) => t.id)).size).toBe(10);
    });

    it('stores the given id, resource, title and metadata', async () => {
      const id = newId();
      const metadata = { tags: ['a', 'b'], nested: { n: 1, ok: true, none: null } };
      const t = await store().createThread({ id, resourceId: 'user-1', title: 'Hello', metadata });
      expect(t).toMatchObject({ id, resourceId: 'user-1', title: 'Hello', metadata });
      expect(await store().getThread(id)).toEqual(t);
    });

    it('reads -0 back as 0, as JSON text does', async () => {
      const t = await store().createThread({ metadata: { z: -0, list: [-0, { y: -0 }] } });
      const read = (await store().getThread(t.id))!.metadata as {
        z: number;
        list: [number, { y: number }];
      };
      expect(Object.is(read.z, 0)).toBe(true);
      expect(Object.is(read.list[0], 0)).toBe(true);
      expect(Object.is(read.list[1].y, 0)).toBe(true);
    });

    it('returns null for an unknown thread', async () => {
      expect(await store().getThread(newId())).toBeNull();
    });

    it('rejects an id that is already taken with CONFLICT and keeps the original', async () => {
      const t = await makeThread(store(), { title: 'original' });
      await expectCode(() => store().createThread({ id: t.id, title: 'intruder' }), 'CONFLICT');
      expect(await store().getThread(t.id)).toEqual(t);
    });

    describe('createThreadWithBranch', () => {
      it('creates a thread and its first branch, empty and active, named main by default', async () => {
        const { thread, branch } = await store().createThreadWithBranch({ title: 'T' });
        expect(await store().getThread(thread.id)).toEqual(thread);
        expect(branch).toMatchObject({
          threadId: thread.id,
          name: 'main',
          headMessageId: null,
          forkMessageId: null,
          parentBranchId: null,
          isActive: true,
        });
        expect(await store().getActiveBranch(thread.id)).toEqual(branch);
        expect(await store().listBranches(thread.id)).toEqual([branch]);
      });

      it('names the branch as asked, also inside a transaction', async () => {
        const id = newId();
        const { branch } = await store().transaction((tx) =>
          tx.createThreadWithBranch({ id, branch: 'draft' }),
        );
        expect(await store().getActiveBranch(id)).toEqual(branch);
        expect(branch.name).toBe('draft');
      });

      it('writes nothing on a taken thread id (CONFLICT) or a bad branch name (INVALID_ARGUMENT)', async () => {
        const t = await makeThread(store());
        await expectCode(() => store().createThreadWithBranch({ id: t.id }), 'CONFLICT');
        expect(await store().listBranches(t.id)).toEqual([]);
        const id = newId();
        await expectCode(
          () => store().createThreadWithBranch({ id, branch: '' }),
          'INVALID_ARGUMENT',
        );
        expect(await store().getThread(id)).toBeNull();
      });
    });

    it('rejects an empty id with INVALID_ARGUMENT', async () => {
      await expectCode(() => store().createThread({ id: '' }), 'INVALID_ARGUMENT');
    });

    it.each([
      ['a numeric resourceId', { resourceId: 5 as unknown as string }],
      ['a numeric title', { title: 5 as unknown as string }],
      ['an id over 200 characters', { id: 'i'.repeat(201) }],
    ])('rejects %s (INVALID_ARGUMENT)', async (_l, input) => {
      const resourceId = `res-${newId()}`;
      await expectCode(() => store().createThread({ resourceId, ...input }), 'INVALID_ARGUMENT');
      expect((await store().listThreads({ resourceId })).items).toEqual([]);
    });

    it('accepts any string of up to 200 characters as an id, not only UUIDs', async () => {
      for (const id of [`thread/ü:${newId()}`, `x${newId()}`.padEnd(200, 'z'), `  ${newId()} `]) {
        const t = await store().createThread({ id });
        expect(t.id).toBe(id);
        expect(await store().getThread(id)).toEqual(t);
      }
    });

    it('rejects metadata that is not an object', async () => {
      const id = newId();
      await expectCode(
        () => store().createThread({ id, metadata: [1, 2] as unknown as Record<string, never> }),
        'INVALID_ARGUMENT',
      );
      expect(await store().getThread(id)).toBeNull();
    });

    it.each(NON_JSON)('rejects metadata with %s and creates nothing', async (_label, make) => {
      const id = newId();
      await expectCode(
        () => store().createThread({ id, metadata: make() as Record<string, never> }),
        'INVALID_ARGUMENT',
      );
      expect(await store().getThread(id)).toBeNull();
    });

    it('updates the title and metadata, keeping the rest', async () => {
      const t = await makeThread(store(), { title: 'before', metadata: { a: 1 } });
      const u = await store().updateThread(t.id, { title: 'after', metadata: { b: 2 } });
      expect(u).toMatchObject({
        id: t.id,
        resourceId: t.resourceId,
        title: 'after',
        metadata: { b: 2 },
      });
      expect(u.createdAt).toBe(t.createdAt);
      expect(u.updatedAt).toBeGreaterThanOrEqual(t.updatedAt);
      expect(await store().getThread(t.id)).toEqual(u);
    });

    it('updates only the fields the patch names', async () => {
      const t = await makeThread(store(), { title: 'keep me', metadata: { keep: true } });
      const onlyTitle = await store().updateThread(t.id, { title: 'new title' });
      expect(onlyTitle.metadata).toEqual({ keep: true });
      const onlyMeta = await store().updateThread(t.id, { metadata: { other: 1 } });
      expect(onlyMeta.title).toBe('new title');
      const cleared = await store().updateThread(t.id, { title: null });
      expect(cleared.title).toBeNull();
      expect(cleared.metadata).toEqual({ other: 1 });
    });

    it('fails to update an unknown thread with NOT_FOUND', async () => {
      const id = newId();
      await expectCode(() => store().updateThread(id, { title: 'x' }), 'NOT_FOUND');
      expect(await store().getThread(id)).toBeNull();
    });

    it.each(NON_JSON)(
      'rejects an update whose metadata has %s and changes nothing',
      async (_l, make) => {
        const t = await makeThread(store(), { metadata: { a: 1 } });
        await expectCode(
          () =>
            store().updateThread(t.id, {
              title: 'changed',
              metadata: make() as Record<string, never>,
            }),
          'INVALID_ARGUMENT',
        );
        expect(await store().getThread(t.id)).toEqual(t);
      },
    );

    describe('listThreads', () => {
      async function threadsOf(resourceId: string, n: number): Promise<Thread[]> {
        const out: Thread[] = [];
        for (let i = 0; i < n; i++)
          out.push(await store().createThread({ resourceId, title: `t${i}` }));
        return out;
      }

      it('lists the threads of a resource, newest first', async () => {
        const resourceId = `res-${newId()}`;
        const made = await threadsOf(resourceId, 7);
        await makeThread(store()); // another resource
        const page = await store().listThreads({ resourceId });
        expect(page.items.map((t) => t.id)).toEqual(made.map((t) => t.id).reverse());
        expect(page.items).toEqual([...made].reverse());
        expect(page.nextCursor).toBeNull();
      });

      it('returns an empty page for a resource with no threads', async () => {
        const page = await store().listThreads({ resourceId: `res-${newId()}` });
        expect(page).toEqual({ items: [], nextCursor: null });
      });

      it('pages through 23 threads five at a time with no duplicate and no gap', async () => {
        const resourceId = `res-${newId()}`;
        const made = await threadsOf(resourceId, 23);
        const seen: string[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const page = await store().listThreads({ resourceId, limit: 5, cursor });
          pages++;
          expect(page.items.length).toBeLessThanOrEqual(5);
          if (page.nextCursor !== null) expect(page.items.length).toBe(5);
          seen.push(...page.items.map((t) => t.id));
          cursor = page.nextCursor;
          expect(pages).toBeLessThanOrEqual(10);
        } while (cursor !== null);
        expect(pages).toBe(5);
        expect(seen).toEqual(made.map((t) => t.id).reverse());
      });

      it('returns 50 threads by default', async () => {
        const resourceId = `res-${newId()}`;
        const made = await threadsOf(resourceId, 53);
        const first = await store().listThreads({ resourceId });
        expect(first.items).toHaveLength(50);
        expect(first.nextCursor).not.toBeNull();
        const rest = await store().listThreads({ resourceId, cursor: first.nextCursor });
        expect(rest.items.map((t) => t.id)).toEqual(
          made
            .slice(0, 3)
            .map((t) => t.id)
            .reverse(),
        );
        expect(rest.nextCursor).toBeNull();
      });

      it('says there is no next page when the page is the last one, even when full', async () => {
        const resourceId = `res-${newId()}`;
        const made = await threadsOf(resourceId, 4);
        const page = await store().listThreads({ resourceId, limit: 4 });
        expect(page.items.map((t) => t.id)).toEqual(made.map((t) => t.id).reverse());
        expect(page.nextCursor).toBeNull();
      });

      it('keeps paging stable when a thread is created between pages', async () => {
        const resourceId = `res-${newId()}`;
        const made = await threadsOf(resourceId, 9);
        const first = await store().listThreads({ resourceId, limit: 4 });
        const late = await store().createThread({ resourceId });
        const seen = [...first.items.map((t) => t.id)];
        let cursor = first.nextCursor;
        while (cursor !== null) {
          const page = await store().listThreads({ resourceId, limit: 4, cursor });
          seen.push(...page.items.map((t) => t.id));
          cursor = page.nextCursor;
        }
        expect(seen).toEqual(made.map((t) => t.id).reverse());
        expect(seen).not.toContain(late.id);
      });

      it('pages correctly after a thread on an earlier page is deleted', async () => {
        const resourceId = `res-${newId()}`;
        const made = await threadsOf(resourceId, 6);
        const first = await store().listThreads({ resourceId, limit: 3 });
        await store().deleteThread(first.items[0]!.id);
        const second = await store().listThreads({
          resourceId,
          limit: 3,
          cursor: first.nextCursor,
        });
        expect(second.items.map((t) => t.id)).toEqual(
          made
            .slice(0, 3)
            .map((t) => t.id)
            .reverse(),
        );
        expect(second.nextCursor).toBeNull();
      });

      it('lists threads of every resource, newest first, when no resource is given', async () => {
        const a = await makeThread(store());
        const b = await makeThread(store());
        const page = await store().listThreads({ limit: 2 });
        expect(page.items.map((t) => t.id)).toEqual([b.id, a.id]);
        expect(page.nextCursor).not.toBeNull();
      });

      it('shows an updated title in the list', async () => {
        const t = await makeThread(store(), { title: 'old' });
        await store().updateThread(t.id, { title: 'new' });
        const page = await store().listThreads({ resourceId: t.resourceId! });
        expect(page.items.map((x) => x.title)).toEqual(['new']);
      });

      it.each([
        ['zero', 0],
        ['negative', -1],
        ['fractional', 2.5],
        ['over 1000', 1001],
        ['NaN', Number.NaN],
        ['Infinity', Number.POSITIVE_INFINITY],
      ])('rejects a %s limit with INVALID_ARGUMENT', async (_l, limit) => {
        await expectCode(() => store().listThreads({ limit }), 'INVALID_ARGUMENT');
      });

      it('accepts the largest limit, 1000', async () => {
        const t = await makeThread(store());
        const page = await store().listThreads({ resourceId: t.resourceId!, limit: 1000 });
        expect(page.items.map((x) => x.id)).toEqual([t.id]);
      });

      it('rejects a cursor it did not make with INVALID_ARGUMENT', async () => {
        await expectCode(() => store().listThreads({ cursor: 'not-a-cursor' }), 'INVALID_ARGUMENT');
      });
    });

    describe('deleteThread', () => {
      it('deletes a thread and says so; a second delete says false', async () => {
        const t = await makeThread(store());
        expect(await store().deleteThread(t.id)).toBe(true);
        expect(await store().getThread(t.id)).toBeNull();
        expect(await store().deleteThread(t.id)).toBe(false);
      });

      it('returns false for an unknown thread', async () => {
        expect(await store().deleteThread(newId())).toBe(false);
      });

      it('with idleSince, deletes only a thread neither updated nor given a message since', async () => {
        const s = store();
        const t = await makeThread(s);
        await expectCode(() => s.deleteThread(t.id, { idleSince: Number.NaN }), 'INVALID_ARGUMENT');
        expect(await s.deleteThread(t.id, { idleSince: t.updatedAt })).toBe(false);
        const later = t.updatedAt + 60_000;
        const [m] = await s.addMessages([
          { threadId: t.id, parentId: null, role: 'user', data: 'late', createdAt: later },
        ]);
        expect(await s.deleteThread(t.id, { idleSince: later })).toBe(false);
        expect(await s.getThread(t.id)).not.toBeNull();
        expect(await s.deleteThread(t.id, { idleSince: later + 1 })).toBe(true);
        expect(await s.getThread(t.id)).toBeNull();
        expect(await s.getMessage(m!.id)).toBeNull();
        expect(await s.deleteThread(newId(), { idleSince: later })).toBe(false);
      });

      const DAY = 86_400_000;

      /** A thread written to three days ago and never since, restored with its timestamps. */
      async function oldThread(s: Store) {
        const old = Date.now() - 3 * DAY;
        const id = newId();
        const message = {
          id: newId(),
          threadId: id,
          parentId: null,
          role: 'user',
          type: null,
          data: 'old',
          createdAt: old,
          depth: 0,
        };
        const branch = {
          id: newId(),
          threadId: id,
          name: 'main',
          headMessageId: message.id,
          isActive: true,
          createdAt: old,
          forkMessageId: message.id,
          parentBranchId: null,
        };
        await s.restoreThread({
          thread: {
            id,
            resourceId: null,
            title: null,
            metadata: {},
            createdAt: old,
            updatedAt: old,
          },
          messages: [message],
          branches: [branch],
          checkpoints: [
            { id: newId(), threadId: id, name: 'cp', messageId: message.id, createdAt: old },
          ],
          stateCommits: [
            {
              branchId: branch.id,
              threadId: id,
              version: 1,
              messageId: message.id,
              messageDepth: 0,
              update: { a: 1 },
              snapshot: { a: 1 },
              createdAt: old,
            },
          ],
          turns: [turnOf(id, { messageId: message.id, startedAt: old, finishedAt: old + 1 })],
        });
        // A run that ended long ago is no activity.
        await s.restoreLeases([
          {
            key: runLeaseKey(id),
            owner: 'worker',
            acquiredAt: old,
            renewedAt: old,
            expiresAt: old + 60_000,
            releasedAt: old + 1,
            data: {},
          },
        ]);
        return { id, message, branch };
      }

      it('with idleSince, any write to the thread or any work on it keeps it (isThreadIdle agrees)', async () => {
        const s = store();
        const since = Date.now() - DAY;
        const old = Date.now() - 3 * DAY;
        const activities: Array<[string, (t: Awaited<ReturnType<typeof oldThread>>) => unknown]> = [
          ['a title update', (t) => s.updateThread(t.id, { title: 'new' })],
          [
            'a message',
            (t) =>
              s.addMessagesOnBranch(t.branch.id, t.message.id, [
                { threadId: t.id, parentId: t.message.id, role: 'user', data: 'hi' },
              ]),
          ],
          [
            'a state commit',
            (t) =>
              s.appendStateCommit(
                { branchId: t.branch.id, messageId: t.message.id, update: { b: 2 } },
                1,
              ),
          ],
          [
            'a checkpoint',
            (t) => s.saveCheckpoint({ threadId: t.id, name: 'now', messageId: t.message.id }),
          ],
          [
            'a fork',
            (t) =>
              s.createBranch({
                threadId: t.id,
                name: 'fork',
                headMessageId: t.message.id,
                parentBranchId: t.branch.id,
                activate: true,
              }),
          ],
          [
            'a live run lease',
            (t) => s.acquireLease({ key: runLeaseKey(t.id), owner: 'o', ttlMs: 3_600_000 }),
          ],
          [
            'a run lease released since',
            async (t) => {
              await s.acquireLease({ key: runLeaseKey(t.id), owner: 'o', ttlMs: 1 });
              await s.releaseLease(runLeaseKey(t.id), 'o');
            },
          ],
          [
            'a running turn started long ago',
            (t) => s.putTurn(turnOf(t.id, { status: 'running', startedAt: old })),
          ],
          [
            'a turn finished since',
            (t) => s.putTurn(turnOf(t.id, { startedAt: old, finishedAt: Date.now() })),
          ],
        ];
        for (const [what, act] of activities) {
          const t = await oldThread(s);
          expect(await s.isThreadIdle(t.id, since), what).toBe(true);
          await act(t);
          expect(await s.isThreadIdle(t.id, since), what).toBe(false);
          expect(await s.deleteThread(t.id, { idleSince: since }), what).toBe(false);
          expect(await s.getThread(t.id), what).not.toBeNull();
        }
        const idle = await oldThread(s);
        expect(await s.deleteThread(idle.id, { idleSince: since })).toBe(true);
        expect(await s.getThread(idle.id)).toBeNull();
        expect(await s.isThreadIdle(idle.id, since)).toBe(false);
        await expectCode(() => s.isThreadIdle(idle.id, Number.NaN), 'INVALID_ARGUMENT');
        await expectCode(() => s.isThreadIdle('', since), 'INVALID_ARGUMENT');
      });

      it('with idleSince, never deletes a thread a racing write reached', async () => {
        const s = store();
        const writes: Array<(t: Awaited<ReturnType<typeof oldThread>>) => Promise<unknown>> = [
          (t) =>
            s.appendStateCommit(
              { branchId: t.branch.id, messageId: t.message.id, update: { b: 2 } },
              1,
            ),
          (t) => s.putTurn(turnOf(t.id, { status: 'running' })),
        ];
        for (let i = 0; i < 6; i++) {
          const t = await oldThread(s);
          const [write, deleted] = await Promise.allSettled([
            writes[i % writes.length]!(t),
            s.deleteThread(t.id, { idleSince: Date.now() - DAY }),
          ]);
          expect(deleted.status).toBe('fulfilled');
          // Either the write came first and the thread stays, or the delete did and the write failed.
          const gone = (await s.getThread(t.id)) === null;
          expect(gone).toBe(write.status === 'rejected');
          if (deleted.status === 'fulfilled') expect(deleted.value).toBe(gone);
        }
      });

      it('removes the thread from its resource list', async () => {
        const t = await makeThread(store());
        await store().deleteThread(t.id);
        expect((await store().listThreads({ resourceId: t.resourceId! })).items).toEqual([]);
      });

      it('cascades to messages, branches, checkpoints, state commits and turns, and nothing else', async () => {
        const s = store();
        async function populate() {
          const thread = await makeThread(s);
          const chain = await makeChain(s, thread.id, 5);
          const fork = await makeChain(s, thread.id, 2, chain[1]!.id, 'f');
          const main = await s.createBranch({
            threadId: thread.id,
            name: 'main',
            headMessageId: chain[4]!.id,
          });
          const side = await s.createBranch({
            threadId: thread.id,
            name: 'side',
            headMessageId: fork[1]!.id,
          });
          const cp = await s.saveCheckpoint({
            threadId: thread.id,
            name: 'cp',
            messageId: chain[2]!.id,
          });
          await s.appendStateCommit(
            { branchId: main.id, messageId: chain[4]!.id, update: { a: 1 } },
            0,
          );
          await s.appendStateCommit(
            { branchId: side.id, messageId: fork[1]!.id, update: { b: 1 } },
            0,
          );
          const turn = await s.putTurn(
            turnOf(thread.id, { messageId: chain[4]!.id, status: 'running' }),
          );
          return { thread, messages: [...chain, ...fork], branches: [main, side], cp, turn };
        }
        const doomed = await populate();
        const kept = await populate();

        expect(await s.deleteThread(doomed.thread.id)).toBe(true);

        for (const m of doomed.messages) expect(await s.getMessage(m.id)).toBeNull();
        for (const b of doomed.branches) expect(await s.getBranchById(b.id)).toBeNull();
        expect(await s.listBranches(doomed.thread.id)).toEqual([]);
        expect(await s.getActiveBranch(doomed.thread.id)).toBeNull();
        expect(await s.getBranch(doomed.thread.id, 'main')).toBeNull();
        expect(await s.getCheckpoint(doomed.thread.id, 'cp')).toBeNull();
        expect(await s.listCheckpoints(doomed.thread.id)).toEqual([]);
        for (const b of doomed.branches) {
          await expectCode(() => s.getStateCommits(b.id), 'NOT_FOUND');
          await expectCode(() => s.getLatestStateCommit(b.id), 'NOT_FOUND');
        }
        expect(await s.getTurn(doomed.turn.id)).toBeNull();
        expect(await s.listTurns(doomed.thread.id)).toEqual([]);

        expect(await s.getThread(kept.thread.id)).toEqual(kept.thread);
        for (const m of kept.messages) expect(await s.getMessage(m.id)).toEqual(m);
        expect((await s.listBranches(kept.thread.id)).map((b) => b.id)).toEqual(
          kept.branches.map((b) => b.id),
        );
        expect(await s.getCheckpoint(kept.thread.id, 'cp')).toEqual(kept.cp);
        for (const b of kept.branches)
          expect((await s.getStateCommits(b.id)).map((c) => c.version)).toEqual([1]);
        expect(await s.getTurn(kept.turn.id)).toEqual(kept.turn);
      });

      it('lets a deleted thread id and its message ids be used again', async () => {
        const t = await makeThread(store());
        const [m] = await makeChain(store(), t.id, 1);
        await store().deleteThread(t.id);
        const again = await store().createThread({ id: t.id });
        const [m2] = await store().addMessages([
          { id: m!.id, threadId: again.id, parentId: null, role: 'user', data: 'again' },
        ]);
        expect(m2!.data).toBe('again');
        expect(await store().getMessage(m!.id)).toEqual(m2);
      });
    });
  });
}
