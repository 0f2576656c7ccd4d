import { type Branch, isCairnError, newId } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import type { NewBranch } from '../../store.js';
import { type StoreConformanceOptions, useStore } from '../context.js';
import {
  expectCode,
  expectTimestamp,
  LONG_NAME,
  LONGEST_NAME,
  makeChain,
  makeThread,
} from '../helpers.js';

export function describeBranches(options: StoreConformanceOptions): void {
  describe('branches', () => {
    const store = useStore(options);

    async function threadWithChain(n = 3) {
      const thread = await makeThread(store());
      const chain = await makeChain(store(), thread.id, n);
      return { thread, chain };
    }

    function expectOneActive(branches: Branch[], activeId: string): void {
      expect(branches.filter((b) => b.isActive).map((b) => b.id)).toEqual([activeId]);
    }

    it('creates the first branch active, with its fork at the head', async () => {
      const { thread, chain } = await threadWithChain();
      const b = await store().createBranch({
        threadId: thread.id,
        name: 'main',
        headMessageId: chain[2]!.id,
      });
      expect(b).toMatchObject({
        threadId: thread.id,
        name: 'main',
        headMessageId: chain[2]!.id,
        forkMessageId: chain[2]!.id,
        parentBranchId: null,
        isActive: true,
      });
      expect(typeof b.id).toBe('string');
      expect(typeof b.seq).toBe('number');
      expectTimestamp(b.createdAt);
      expect(await store().getBranchById(b.id)).toEqual(b);
      expect(await store().getBranch(thread.id, 'main')).toEqual(b);
      expect(await store().getActiveBranch(thread.id)).toEqual(b);
    });

    it('makes the first branch active even when asked not to', async () => {
      const { thread } = await threadWithChain();
      const b = await store().createBranch({
        threadId: thread.id,
        name: 'main',
        headMessageId: null,
        activate: false,
      });
      expect(b.isActive).toBe(true);
    });

    it('keeps a given id, a null head and a parent branch', async () => {
      const { thread, chain } = await threadWithChain();
      const main = await store().createBranch({
        threadId: thread.id,
        name: 'main',
        headMessageId: chain[0]!.id,
      });
      const id = newId();
      const side = await store().createBranch({
        id,
        threadId: thread.id,
        name: 'empty',
        headMessageId: null,
        parentBranchId: main.id,
      });
      expect(side).toMatchObject({
        id,
        headMessageId: null,
        forkMessageId: null,
        parentBranchId: main.id,
        isActive: false,
      });
      expect(await store().getBranchById(id)).toEqual(side);
    });

    it('does not activate a later branch unless asked', async () => {
      const { thread, chain } = await threadWithChain();
      const main = await store().createBranch({
        threadId: thread.id,
        name: 'main',
        headMessageId: chain[2]!.id,
      });
      const side = await store().createBranch({
        threadId: thread.id,
        name: 'side',
        headMessageId: chain[1]!.id,
      });
      expect(side.isActive).toBe(false);
      expect((await store().getActiveBranch(thread.id))!.id).toBe(main.id);
      expectOneActive(await store().listBranches(thread.id), main.id);
    });

    it('activates a later branch when asked, deactivating the old one', async () => {
      const { thread, chain } = await threadWithChain();
      const main = await store().createBranch({
        threadId: thread.id,
        name: 'main',
        headMessageId: chain[2]!.id,
      });
      const side = await store().createBranch({
        threadId: thread.id,
        name: 'side',
        headMessageId: chain[1]!.id,
        activate: true,
      });
      expect(side.isActive).toBe(true);
      expect((await store().getBranchById(main.id))!.isActive).toBe(false);
      expect((await store().getActiveBranch(thread.id))!.id).toBe(side.id);
      expectOneActive(await store().listBranches(thread.id), side.id);
    });

    it('lists branches in creation order', async () => {
      const { thread, chain } = await threadWithChain();
      const names = ['main', 'zeta', 'alpha', 'main-v2', 'beta'];
      const made: Branch[] = [];
      for (const name of names)
        made.push(
          await store().createBranch({ threadId: thread.id, name, headMessageId: chain[0]!.id }),
        );
      const listed = await store().listBranches(thread.id);
      expect(listed.map((b) => b.name)).toEqual(names);
      expect(listed.map((b) => b.id)).toEqual(made.map((b) => b.id));
      const seqs = listed.map((b) => b.seq);
      expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
      expect(new Set(seqs).size).toBe(seqs.length);
    });

    it('returns nothing for unknown branches and threads without branches', async () => {
      const { thread } = await threadWithChain();
      expect(await store().getBranch(thread.id, 'main')).toBeNull();
      expect(await store().getBranchById(newId())).toBeNull();
      expect(await store().getActiveBranch(thread.id)).toBeNull();
      expect(await store().listBranches(thread.id)).toEqual([]);
      expect(await store().listBranches(newId())).toEqual([]);
    });

    it('keeps exactly one active branch through many switches', async () => {
      const { thread, chain } = await threadWithChain();
      const branches: Branch[] = [];
      for (let i = 0; i < 5; i++) {
        branches.push(
          await store().createBranch({
            threadId: thread.id,
            name: `b${i}`,
            headMessageId: chain[i % 3]!.id,
          }),
        );
      }
      for (const i of [3, 1, 4, 4, 0, 2]) {
        const active = await store().setActiveBranch(branches[i]!.id);
        expect(active.id).toBe(branches[i]!.id);
        expect(active.isActive).toBe(true);
        expectOneActive(await store().listBranches(thread.id), branches[i]!.id);
        expect((await store().getActiveBranch(thread.id))!.id).toBe(branches[i]!.id);
      }
    });

    it('keeps exactly one active branch when switches race', async () => {
      const { thread, chain } = await threadWithChain();
      const branches: Branch[] = [];
      for (let i = 0; i < 6; i++) {
        branches.push(
          await store().createBranch({
            threadId: thread.id,
            name: `r${i}`,
            headMessageId: chain[0]!.id,
          }),
        );
      }
      await Promise.all(branches.map((b) => store().setActiveBranch(b.id)));
      const listed = await store().listBranches(thread.id);
      expect(listed.filter((b) => b.isActive)).toHaveLength(1);
    });

    it('switching the active branch of one thread leaves other threads alone', async () => {
      const a = await threadWithChain();
      const b = await threadWithChain();
      const aMain = await store().createBranch({
        threadId: a.thread.id,
        name: 'main',
        headMessageId: a.chain[0]!.id,
      });
      const bMain = await store().createBranch({
        threadId: b.thread.id,
        name: 'main',
        headMessageId: b.chain[0]!.id,
      });
      const bSide = await store().createBranch({
        threadId: b.thread.id,
        name: 'side',
        headMessageId: b.chain[1]!.id,
      });
      await store().setActiveBranch(bSide.id);
      expect((await store().getActiveBranch(a.thread.id))!.id).toBe(aMain.id);
      expect((await store().getBranchById(bMain.id))!.isActive).toBe(false);
    });

    it('fails to activate an unknown branch with NOT_FOUND', async () => {
      await expectCode(() => store().setActiveBranch(newId()), 'NOT_FOUND');
    });

    describe('names and ids', () => {
      it('rejects a name already used in the thread (CONFLICT) and changes nothing', async () => {
        const { thread, chain } = await threadWithChain();
        const main = await store().createBranch({
          threadId: thread.id,
          name: 'main',
          headMessageId: chain[2]!.id,
        });
        await expectCode(
          () =>
            store().createBranch({
              threadId: thread.id,
              name: 'main',
              headMessageId: chain[0]!.id,
              activate: true,
            }),
          'CONFLICT',
        );
        expect(await store().listBranches(thread.id)).toEqual([main]);
      });

      it('lets two threads use the same name', async () => {
        const a = await threadWithChain();
        const b = await threadWithChain();
        const x = await store().createBranch({
          threadId: a.thread.id,
          name: 'main',
          headMessageId: a.chain[0]!.id,
        });
        const y = await store().createBranch({
          threadId: b.thread.id,
          name: 'main',
          headMessageId: b.chain[0]!.id,
        });
        expect(x.id).not.toBe(y.id);
        expect((await store().getBranch(a.thread.id, 'main'))!.id).toBe(x.id);
        expect((await store().getBranch(b.thread.id, 'main'))!.id).toBe(y.id);
      });

      it('treats names as case-sensitive and exact', async () => {
        const { thread, chain } = await threadWithChain();
        await store().createBranch({
          threadId: thread.id,
          name: 'main',
          headMessageId: chain[0]!.id,
        });
        const upper = await store().createBranch({
          threadId: thread.id,
          name: 'Main',
          headMessageId: chain[0]!.id,
        });
        const spaced = await store().createBranch({
          threadId: thread.id,
          name: 'main ',
          headMessageId: chain[0]!.id,
        });
        expect((await store().getBranch(thread.id, 'Main'))!.id).toBe(upper.id);
        expect((await store().getBranch(thread.id, 'main '))!.id).toBe(spaced.id);
        expect(await store().getBranch(thread.id, 'MAIN')).toBeNull();
      });

      it('accepts a name of exactly 200 characters and unicode names', async () => {
        const { thread, chain } = await threadWithChain();
        const long = await store().createBranch({
          threadId: thread.id,
          name: LONGEST_NAME,
          headMessageId: chain[0]!.id,
        });
        expect((await store().getBranch(thread.id, LONGEST_NAME))!.id).toBe(long.id);
        const uni = await store().createBranch({
          threadId: thread.id,
          name: 'ветка — 分支 🌿',
          headMessageId: chain[0]!.id,
        });
        expect((await store().getBranch(thread.id, 'ветка — 分支 🌿'))!.id).toBe(uni.id);
      });

      it('rejects a branch id already used, even in another thread (CONFLICT)', async () => {
        const a = await threadWithChain();
        const b = await threadWithChain();
        const x = await store().createBranch({
          threadId: a.thread.id,
          name: 'main',
          headMessageId: a.chain[0]!.id,
        });
        await expectCode(
          () =>
            store().createBranch({
              id: x.id,
              threadId: b.thread.id,
              name: 'main',
              headMessageId: b.chain[0]!.id,
            }),
          'CONFLICT',
        );
        expect(await store().getBranchById(x.id)).toEqual(x);
        expect(await store().listBranches(b.thread.id)).toEqual([]);
      });

      it('lets exactly one of many racing creations of one name win', async () => {
        const { thread, chain } = await threadWithChain();
        const results = await Promise.allSettled(
          Array.from({ length: 8 }, () =>
            store().createBranch({
              threadId: thread.id,
              name: 'race',
              headMessageId: chain[0]!.id,
            }),
          ),
        );
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        for (const r of results)
          if (r.status === 'rejected') expect(isCairnError(r.reason, 'CONFLICT')).toBe(true);
        expect(await store().listBranches(thread.id)).toHaveLength(1);
      });
    });

    describe('bad input writes nothing', () => {
      async function expectNoBranches(threadId: string) {
        expect(await store().listBranches(threadId)).toEqual([]);
        expect(await store().getActiveBranch(threadId)).toBeNull();
      }

      it.each([
        ['an empty name', ''],
        ['a blank name', '   '],
        ['a name over 200 characters', LONG_NAME],
        ['a non-string name', 42 as unknown as string],
      ])('rejects %s (INVALID_ARGUMENT)', async (_l, name) => {
        const { thread, chain } = await threadWithChain();
        await expectCode(
          () => store().createBranch({ threadId: thread.id, name, headMessageId: chain[0]!.id }),
          'INVALID_ARGUMENT',
        );
        await expectNoBranches(thread.id);
      });

      it('rejects an unknown thread (NOT_FOUND)', async () => {
        const threadId = newId();
        await expectCode(
          () => store().createBranch({ threadId, name: 'main', headMessageId: null }),
          'NOT_FOUND',
        );
        await expectNoBranches(threadId);
      });

      it('rejects an unknown head message (NOT_FOUND)', async () => {
        const { thread } = await threadWithChain();
        await expectCode(
          () => store().createBranch({ threadId: thread.id, name: 'main', headMessageId: newId() }),
          'NOT_FOUND',
        );
        await expectNoBranches(thread.id);
      });

      it('rejects a head message in another thread (INVALID_ARGUMENT)', async () => {
        const a = await threadWithChain();
        const b = await threadWithChain();
        await expectCode(
          () =>
            store().createBranch({
              threadId: a.thread.id,
              name: 'main',
              headMessageId: b.chain[0]!.id,
            }),
          'INVALID_ARGUMENT',
        );
        await expectNoBranches(a.thread.id);
      });

      it('rejects an unknown parent branch (NOT_FOUND)', async () => {
        const { thread, chain } = await threadWithChain();
        await expectCode(
          () =>
            store().createBranch({
              threadId: thread.id,
              name: 'main',
              headMessageId: chain[0]!.id,
              parentBranchId: newId(),
            }),
          'NOT_FOUND',
        );
        await expectNoBranches(thread.id);
      });

      // A branch of another thread is no parent this thread can have: both stores so far
      // treat it as a missing parent branch.
      it('rejects a parent branch of another thread (NOT_FOUND)', async () => {
        const a = await threadWithChain();
        const b = await threadWithChain();
        const foreign = await store().createBranch({
          threadId: b.thread.id,
          name: 'main',
          headMessageId: b.chain[0]!.id,
        });
        await expectCode(
          () =>
            store().createBranch({
              threadId: a.thread.id,
              name: 'main',
              headMessageId: a.chain[0]!.id,
              parentBranchId: foreign.id,
            }),
          'NOT_FOUND',
        );
        await expectNoBranches(a.thread.id);
      });

      it('rejects an input that is not an object (INVALID_ARGUMENT)', async () => {
        await expectCode(
          () => store().createBranch(null as unknown as NewBranch),
          'INVALID_ARGUMENT',
        );
      });
    });

    describe('lockBranch', () => {
      it('returns the branch as stored, inside a transaction and outside one', async () => {
        const { thread, chain } = await threadWithChain(3);
        const b = await store().createBranch({
          threadId: thread.id,
          name: 'main',
          headMessageId: chain[0]!.id,
        });
        expect(await store().lockBranch(b.id)).toEqual(b);
        const moved = await store().transaction(async (tx) => {
          const locked = await tx.lockBranch(b.id, { timeoutMs: 1000 });
          expect(locked).toEqual(b);
          // What a lock holder read stays true until it commits: its compare-and-sets hold.
          const version = (await tx.getLatestStateCommit(b.id))?.version ?? 0;
          await tx.appendStateCommit(
            { branchId: b.id, messageId: locked.headMessageId, update: { n: 1 } },
            version,
          );
          return tx.moveHead(b.id, locked.headMessageId, chain[2]!.id);
        });
        expect(await store().getBranchById(b.id)).toEqual(moved);
        expect((await store().getStateCommits(b.id)).map((c) => c.version)).toEqual([1]);
        // The lock ended with the transaction.
        expect(await store().lockBranch(b.id, { timeoutMs: 0 })).toEqual(moved);
      });

      it('rejects an unknown branch (NOT_FOUND) and bad options (INVALID_ARGUMENT)', async () => {
        const { thread } = await threadWithChain(1);
        const b = await store().createBranch({
          threadId: thread.id,
          name: 'main',
          headMessageId: null,
        });
        await expectCode(() => store().lockBranch(`missing-${newId()}`), 'NOT_FOUND');
        await expectCode(
          () => store().transaction((tx) => tx.lockBranch(`missing-${newId()}`)),
          'NOT_FOUND',
        );
        for (const bad of [-1, 1.5, '100', Number.NaN, 3_600_001]) {
          await expectCode(
            () => store().lockBranch(b.id, { timeoutMs: bad as never }),
            'INVALID_ARGUMENT',
          );
        }
        await expectCode(() => store().lockBranch(b.id, 5 as never), 'INVALID_ARGUMENT');
        await expectCode(() => store().lockBranch('' as never), 'INVALID_ARGUMENT');
      });
    });

    describe('addMessagesOnBranch', () => {
      it('adds the batch and moves the head onto its last message', async () => {
        const { thread, branch } = await store().createThreadWithBranch({});
        const first = await store().addMessagesOnBranch(branch.id, null, [
          { threadId: thread.id, parentId: null, role: 'user', data: 'hi' },
        ]);
        const [hi] = first.messages;
        expect(first.branch).toEqual({ ...branch, headMessageId: hi!.id });
        const next = await store().addMessagesOnBranch(branch.id, hi!.id, [
          { threadId: thread.id, parentId: hi!.id, role: 'assistant', data: 'hello' },
          { threadId: thread.id, parentId: null, role: 'user', data: 'bye' },
        ]);
        expect(next.messages.map((m) => m.depth)).toEqual([1, 0]);
        expect(await store().getBranchById(branch.id)).toEqual(next.branch);
        expect(next.branch.headMessageId).toBe(next.messages[1]!.id);
      });

      it('writes nothing when the head moved (CONFLICT naming the branch)', async () => {
        const { thread, branch } = await store().createThreadWithBranch({});
        const [root] = await makeChain(store(), thread.id, 1);
        await store().moveHead(branch.id, null, root!.id);
        const id = newId();
        const e = await store()
          .addMessagesOnBranch(branch.id, null, [
            { id, threadId: thread.id, parentId: null, role: 'user', data: 'late' },
          ])
          .catch((x: unknown) => x);
        expect(isCairnError(e, 'CONFLICT') && e.details.branchId).toBe(branch.id);
        expect(await store().getMessage(id)).toBeNull();
        expect((await store().getBranchById(branch.id))!.headMessageId).toBe(root!.id);
      });

      it('rejects an empty batch (INVALID_ARGUMENT) and an unknown branch (NOT_FOUND)', async () => {
        const { thread, branch } = await store().createThreadWithBranch({});
        await expectCode(
          () => store().addMessagesOnBranch(branch.id, null, []),
          'INVALID_ARGUMENT',
        );
        const id = newId();
        await expectCode(
          () =>
            store().addMessagesOnBranch(newId(), null, [
              { id, threadId: thread.id, parentId: null, role: 'user', data: 'x' },
            ]),
          'NOT_FOUND',
        );
        expect(await store().getMessage(id)).toBeNull();
      });

      it('refuses a batch of roots with a taken id (CONFLICT) or an unknown thread (NOT_FOUND), writing nothing, in a transaction too', async () => {
        const { thread, branch } = await store().createThreadWithBranch({});
        const [taken] = await makeChain(store(), thread.id, 1);
        const fresh = newId();
        const roots = (threadId: string) => [
          { id: fresh, threadId, parentId: null, role: 'user', data: 'a' },
          { id: taken!.id, threadId, parentId: fresh, role: 'assistant', data: 'b' },
        ];
        const e = await expectCode(
          () => store().addMessagesOnBranch(branch.id, null, roots(thread.id)),
          'CONFLICT',
        );
        expect(e.details.id).toBe(taken!.id);
        const missing = newId();
        const f = await expectCode(
          () => store().addMessagesOnBranch(branch.id, null, [roots(missing)[0]!]),
          'NOT_FOUND',
        );
        expect(f.details.threadId).toBe(missing);
        const saved = await store().transaction(async (tx) => {
          await expectCode(
            () => tx.addMessagesOnBranch(branch.id, null, roots(thread.id)),
            'CONFLICT',
          );
          return tx.addMessagesOnBranch(branch.id, null, [roots(thread.id)[0]!]);
        });
        expect(saved.messages.map((m) => m.id)).toEqual([fresh]);
        expect(await store().getBranchById(branch.id)).toEqual({ ...branch, headMessageId: fresh });
        expect(await store().getMessage(fresh)).toEqual(saved.messages[0]);
        expect(await store().getMessage(taken!.id)).toEqual(taken);
      });

      it("writes nothing when the new head is in another thread than the branch's (INVALID_ARGUMENT)", async () => {
        const { branch } = await store().createThreadWithBranch({});
        const other = await makeThread(store());
        const id = newId();
        await expectCode(
          () =>
            store().addMessagesOnBranch(branch.id, null, [
              { id, threadId: other.id, parentId: null, role: 'user', data: 'elsewhere' },
            ]),
          'INVALID_ARGUMENT',
        );
        expect(await store().getMessage(id)).toBeNull();
        expect(await store().getBranchById(branch.id)).toEqual(branch);
      });
    });

    describe('moveHead', () => {
      it('moves the head when the expected head matches, keeping the fork', async () => {
        const { thread, chain } = await threadWithChain(4);
        const b = await store().createBranch({
          threadId: thread.id,
          name: 'main',
          headMessageId: chain[1]!.id,
        });
        const moved = await store().moveHead(b.id, chain[1]!.id, chain[3]!.id);
        expect(moved).toMatchObject({
          id: b.id,
          headMessageId: chain[3]!.id,
          forkMessageId: chain[1]!.id,
          name: 'main',
          isActive: true,
        });
        expect(await store().getBranchById(b.id)).toEqual(moved);
        expect((await store().getBranch(thread.id, 'main'))!.headMessageId).toBe(chain[3]!.id);
      });

      it('moves a branch with no head when null is expected', async () => {
        const { thread, chain } = await threadWithChain();
        const b = await store().createBranch({
          threadId: thread.id,
          name: 'main',
          headMessageId: null,
        });
        const moved = await store().moveHead(b.id, null, chain[0]!.id);
        expect(moved.headMessageId).toBe(chain[0]!.id);
      });

      it('may move the head anywhere in the thread, even backwards', async () => {
        const { thread, chain } = await threadWithChain(4);
        const b = await store().createBranch({
          threadId: thread.id,
          name: 'main',
          headMessageId: chain[3]!.id,
        });
        const moved = await store().moveHead(b.id, chain[3]!.id, chain[0]!.id);
        expect(moved.headMessageId).toBe(chain[0]!.id);
      });

      it('fails with CONFLICT when the head moved, and keeps the head', async () => {
        const { thread, chain } = await threadWithChain(4);
        const b = await store().createBranch({
          threadId: thread.id,
          name: 'main',
          headMessageId: chain[1]!.id,
        });
        await store().moveHead(b.id, chain[1]!.id, chain[2]!.id);
        await expectCode(() => store().moveHead(b.id, chain[1]!.id, chain[3]!.id), 'CONFLICT');
        expect((await store().getBranchById(b.id))!.headMessageId).toBe(chain[2]!.id);
      });

      it('fails with CONFLICT when null is expected but there is a head', async () => {
        const { thread, chain } = await threadWithChain();
        const b = await store().createBranch({
          threadId: thread.id,
          name: 'main',
          headMessageId: chain[0]!.id,
        });
        await expectCode(() => store().moveHead(b.id, null, chain[2]!.id), 'CONFLICT');
        expect((await store().getBranchById(b.id))!.headMessageId).toBe(chain[0]!.id);
      });

      it('lets exactly one of many racing moves from the same head win', async () => {
        const { thread, chain } = await threadWithChain(2);
        const b = await store().createBranch({
          threadId: thread.id,
          name: 'main',
          headMessageId: chain[1]!.id,
        });
        const tips = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            makeChain(store(), thread.id, 1, chain[1]!.id, `tip${i}`),
          ),
        );
        const results = await Promise.allSettled(
          tips.map(([tip]) => store().moveHead(b.id, chain[1]!.id, tip!.id)),
        );
        const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [tips[i]![0]!.id] : []));
        expect(won).toHaveLength(1);
        for (const r of results)
          if (r.status === 'rejected') expect(isCairnError(r.reason, 'CONFLICT')).toBe(true);
        expect((await store().getBranchById(b.id))!.headMessageId).toBe(won[0]);
      });

      it('fails for an unknown branch (NOT_FOUND)', async () => {
        const { chain } = await threadWithChain();
        await expectCode(() => store().moveHead(newId(), null, chain[0]!.id), 'NOT_FOUND');
      });

      it('fails for an unknown message (NOT_FOUND) and keeps the head', async () => {
        const { thread, chain } = await threadWithChain();
        const b = await store().createBranch({
          threadId: thread.id,
          name: 'main',
          headMessageId: chain[0]!.id,
        });
        await expectCode(() => store().moveHead(b.id, chain[0]!.id, newId()), 'NOT_FOUND');
        expect((await store().getBranchById(b.id))!.headMessageId).toBe(chain[0]!.id);
      });

      it('fails for a message in another thread (INVALID_ARGUMENT) and keeps the head', async () => {
        const a = await threadWithChain();
        const other = await threadWithChain();
        const b = await store().createBranch({
          threadId: a.thread.id,
          name: 'main',
          headMessageId: a.chain[0]!.id,
        });
        await expectCode(
          () => store().moveHead(b.id, a.chain[0]!.id, other.chain[2]!.id),
          'INVALID_ARGUMENT',
        );
        expect((await store().getBranchById(b.id))!.headMessageId).toBe(a.chain[0]!.id);
      });

      it('moves one branch without touching the others of the thread', async () => {
        const { thread, chain } = await threadWithChain(3);
        const main = await store().createBranch({
          threadId: thread.id,
          name: 'main',
          headMessageId: chain[0]!.id,
        });
        const side = await store().createBranch({
          threadId: thread.id,
          name: 'side',
          headMessageId: chain[0]!.id,
        });
        await store().moveHead(side.id, chain[0]!.id, chain[2]!.id);
        expect(await store().getBranchById(main.id)).toEqual(main);
      });
    });
  });
}
