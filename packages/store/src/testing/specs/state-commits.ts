import { isCairnError, type JsonObject, newId } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import type { NewStateCommit, Store } from '../../store.js';
import { SLOW_TEST_TIMEOUT, type StoreConformanceOptions, useStore } from '../context.js';
import { expectCode, expectTimestamp, makeChain, makeThread, NON_JSON } from '../helpers.js';

export function describeStateCommits(options: StoreConformanceOptions): void {
  describe('state commits', () => {
    const store = useStore(options);

    async function branchWithChain(n = 5) {
      const thread = await makeThread(store());
      const chain = await makeChain(store(), thread.id, n);
      const branch = await store().createBranch({
        threadId: thread.id,
        name: 'main',
        headMessageId: chain[n - 1]!.id,
      });
      return { thread, chain, branch };
    }

    it('appends version 1 to a branch with no commits', async () => {
      const { thread, chain, branch } = await branchWithChain();
      const c = await store().appendStateCommit(
        { branchId: branch.id, messageId: chain[4]!.id, update: { topic: 'cats' } },
        0,
      );
      expect(c).toMatchObject({
        branchId: branch.id,
        threadId: thread.id,
        version: 1,
        messageId: chain[4]!.id,
        messageDepth: 4,
        update: { topic: 'cats' },
        snapshot: null,
      });
      expectTimestamp(c.createdAt);
      expect(await store().getStateCommits(branch.id)).toEqual([c]);
    });

    it('records a null message with a null depth', async () => {
      const { branch } = await branchWithChain();
      const c = await store().appendStateCommit(
        { branchId: branch.id, messageId: null, update: {} },
        0,
      );
      expect(c.messageId).toBeNull();
      expect(c.messageDepth).toBeNull();
    });

    it('stores a snapshot and nested JSON exactly', async () => {
      const { chain, branch } = await branchWithChain();
      const update: JsonObject = { list: [1, 'a', null, { deep: [true] }], empty: {}, s: 'é✓' };
      const snapshot: JsonObject = { ...update, all: { n: 3.25 } };
      const c = await store().appendStateCommit(
        { branchId: branch.id, messageId: chain[0]!.id, update, snapshot },
        0,
      );
      const [read] = await store().getStateCommits(branch.id);
      expect(read).toEqual(c);
      expect(read!.update).toEqual(update);
      expect(read!.snapshot).toEqual(snapshot);
    });

    it('numbers commits 1, 2, 3, ... and reads them back in order', async () => {
      const { chain, branch } = await branchWithChain();
      for (let v = 0; v < 5; v++) {
        const c = await store().appendStateCommit(
          { branchId: branch.id, messageId: chain[v]!.id, update: { step: v } },
          v,
        );
        expect(c.version).toBe(v + 1);
        expect(c.messageDepth).toBe(v);
      }
      const all = await store().getStateCommits(branch.id);
      expect(all.map((c) => c.version)).toEqual([1, 2, 3, 4, 5]);
      expect(all.map((c) => c.update)).toEqual([0, 1, 2, 3, 4].map((step) => ({ step })));
    });

    it('reads a version range, inclusive at both ends', async () => {
      const { branch } = await branchWithChain();
      for (let v = 0; v < 6; v++)
        await store().appendStateCommit(
          { branchId: branch.id, messageId: null, update: { v: v + 1 } },
          v,
        );
      const versions = async (range: { fromVersion?: number; toVersion?: number }) =>
        (await store().getStateCommits(branch.id, range)).map((c) => c.version);
      expect(await versions({ fromVersion: 2, toVersion: 4 })).toEqual([2, 3, 4]);
      expect(await versions({ fromVersion: 5 })).toEqual([5, 6]);
      expect(await versions({ toVersion: 2 })).toEqual([1, 2]);
      expect(await versions({ fromVersion: 3, toVersion: 3 })).toEqual([3]);
      expect(await versions({ fromVersion: 7 })).toEqual([]);
      expect(await versions({ fromVersion: 4, toVersion: 2 })).toEqual([]);
    });

    it('keeps versions per branch', async () => {
      const { thread, chain, branch } = await branchWithChain();
      const side = await store().createBranch({
        threadId: thread.id,
        name: 'side',
        headMessageId: chain[1]!.id,
      });
      await store().appendStateCommit(
        { branchId: branch.id, messageId: null, update: { a: 1 } },
        0,
      );
      await store().appendStateCommit(
        { branchId: branch.id, messageId: null, update: { a: 2 } },
        1,
      );
      const s1 = await store().appendStateCommit(
        { branchId: side.id, messageId: chain[1]!.id, update: { b: 1 } },
        0,
      );
      expect(s1.version).toBe(1);
      expect((await store().getStateCommits(side.id)).map((c) => c.update)).toEqual([{ b: 1 }]);
      expect((await store().getStateCommits(branch.id)).map((c) => c.version)).toEqual([1, 2]);
    });

    it('returns no commits for a branch without any', async () => {
      const { branch } = await branchWithChain();
      expect(await store().getStateCommits(branch.id)).toEqual([]);
      expect(await store().getLatestStateCommit(branch.id)).toBeNull();
    });

    it('fails to read the commits of an unknown branch (NOT_FOUND)', async () => {
      await expectCode(() => store().getStateCommits(newId()), 'NOT_FOUND');
      await expectCode(() => store().getLatestStateCommit(newId()), 'NOT_FOUND');
    });

    describe('compare-and-set', () => {
      it('fails with CONFLICT on a stale expected version and writes nothing', async () => {
        const { branch } = await branchWithChain();
        const c1 = await store().appendStateCommit(
          { branchId: branch.id, messageId: null, update: { a: 1 } },
          0,
        );
        await expectCode(
          () =>
            store().appendStateCommit(
              { branchId: branch.id, messageId: null, update: { a: 'lost' } },
              0,
            ),
          'CONFLICT',
        );
        expect(await store().getStateCommits(branch.id)).toEqual([c1]);
      });

      it('fails with CONFLICT on an expected version from the future', async () => {
        const { branch } = await branchWithChain();
        await expectCode(
          () => store().appendStateCommit({ branchId: branch.id, messageId: null, update: {} }, 3),
          'CONFLICT',
        );
        expect(await store().getStateCommits(branch.id)).toEqual([]);
      });

      it(
        'gives 24 racing writers that retry on CONFLICT versions 1..24 with no gap and no loss',
        async () => {
          const { branch } = await branchWithChain();
          const s = store();
          const writers = 24;
          const attempts: number[] = [];
          async function writer(i: number): Promise<void> {
            for (let attempt = 1; ; attempt++) {
              const latest = await s.getLatestStateCommit(branch.id);
              try {
                await s.appendStateCommit(
                  { branchId: branch.id, messageId: null, update: { writer: i } },
                  latest?.version ?? 0,
                );
                attempts.push(attempt);
                return;
              } catch (e) {
                if (!isCairnError(e, 'CONFLICT') || attempt > 200) throw e;
              }
            }
          }
          await Promise.all(Array.from({ length: writers }, (_, i) => writer(i)));
          const commits = await s.getStateCommits(branch.id);
          expect(commits.map((c) => c.version)).toEqual(
            Array.from({ length: writers }, (_, i) => i + 1),
          );
          expect(
            commits.map((c) => c.update.writer).sort((a, b) => (a as number) - (b as number)),
          ).toEqual(Array.from({ length: writers }, (_, i) => i));
          expect((await s.getLatestStateCommit(branch.id))!.version).toBe(writers);
          expect(attempts).toHaveLength(writers);
        },
        SLOW_TEST_TIMEOUT,
      );

      it('lets exactly one of many writers with the same expected version win', async () => {
        const { branch } = await branchWithChain();
        const results = await Promise.allSettled(
          Array.from({ length: 12 }, (_, i) =>
            store().appendStateCommit({ branchId: branch.id, messageId: null, update: { i } }, 0),
          ),
        );
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        for (const r of results)
          if (r.status === 'rejected') expect(isCairnError(r.reason, 'CONFLICT')).toBe(true);
        expect(await store().getStateCommits(branch.id)).toHaveLength(1);
      });
    });

    describe('getLatestStateCommit', () => {
      /** Versions 1..6 on a 6-message chain; snapshots on 2 and 4; version 1 has no message. */
      async function history(s: Store) {
        const { chain, branch } = await branchWithChain(6);
        const plan: Array<[string | null, boolean]> = [
          [null, false],
          [chain[1]!.id, true],
          [chain[2]!.id, false],
          [chain[3]!.id, true],
          [chain[3]!.id, false],
          [chain[5]!.id, false],
        ];
        for (const [v, [messageId, snap]] of plan.entries()) {
          const commit: NewStateCommit = { branchId: branch.id, messageId, update: { v: v + 1 } };
          if (snap) commit.snapshot = { upTo: v + 1 };
          await s.appendStateCommit(commit, v);
        }
        return branch;
      }

      it('returns the newest commit', async () => {
        const branch = await history(store());
        expect((await store().getLatestStateCommit(branch.id))!.version).toBe(6);
      });

      it('returns the newest commit with a snapshot', async () => {
        const branch = await history(store());
        const c = await store().getLatestStateCommit(branch.id, { withSnapshot: true });
        expect(c!.version).toBe(4);
        expect(c!.snapshot).toEqual({ upTo: 4 });
      });

      it('returns the newest commit at or below a version', async () => {
        const branch = await history(store());
        expect((await store().getLatestStateCommit(branch.id, { maxVersion: 3 }))!.version).toBe(3);
        expect(
          (await store().getLatestStateCommit(branch.id, { maxVersion: 3, withSnapshot: true }))!
            .version,
        ).toBe(2);
        expect((await store().getLatestStateCommit(branch.id, { maxVersion: 100 }))!.version).toBe(
          6,
        );
        expect(await store().getLatestStateCommit(branch.id, { maxVersion: 0 })).toBeNull();
      });

      it('returns the newest commit at or before a message depth', async () => {
        const branch = await history(store());
        expect(
          (await store().getLatestStateCommit(branch.id, { maxMessageDepth: 3 }))!.version,
        ).toBe(5);
        expect(
          (await store().getLatestStateCommit(branch.id, { maxMessageDepth: 4 }))!.version,
        ).toBe(5);
        expect(
          (await store().getLatestStateCommit(branch.id, { maxMessageDepth: 2 }))!.version,
        ).toBe(3);
        expect(
          (await store().getLatestStateCommit(branch.id, { maxMessageDepth: 5 }))!.version,
        ).toBe(6);
      });

      it('counts a commit without a message as depth -1', async () => {
        const branch = await history(store());
        expect(
          (await store().getLatestStateCommit(branch.id, { maxMessageDepth: 0 }))!.version,
        ).toBe(1);
        expect(
          (await store().getLatestStateCommit(branch.id, { maxMessageDepth: -1 }))!.version,
        ).toBe(1);
        expect(await store().getLatestStateCommit(branch.id, { maxMessageDepth: -2 })).toBeNull();
      });

      it('combines every condition', async () => {
        const branch = await history(store());
        const c = await store().getLatestStateCommit(branch.id, {
          withSnapshot: true,
          maxMessageDepth: 2,
          maxVersion: 6,
        });
        expect(c!.version).toBe(2);
        expect(
          await store().getLatestStateCommit(branch.id, { withSnapshot: true, maxMessageDepth: 0 }),
        ).toBeNull();
      });
    });

    it.each([
      ['a negative fromVersion', { fromVersion: -1 }],
      ['a fractional fromVersion', { fromVersion: 1.5 }],
      ['a NaN toVersion', { toVersion: Number.NaN }],
    ])('rejects a range with %s (INVALID_ARGUMENT)', async (_l, range) => {
      const { branch } = await branchWithChain();
      await expectCode(() => store().getStateCommits(branch.id, range), 'INVALID_ARGUMENT');
    });

    it.each([
      ['a fractional maxVersion', { maxVersion: 1.5 }],
      ['a NaN maxVersion', { maxVersion: Number.NaN }],
      ['a fractional maxMessageDepth', { maxMessageDepth: 0.5 }],
    ])('rejects a latest-commit query with %s (INVALID_ARGUMENT)', async (_l, query) => {
      const { branch } = await branchWithChain();
      await expectCode(() => store().getLatestStateCommit(branch.id, query), 'INVALID_ARGUMENT');
    });

    describe('bad input writes nothing', () => {
      it('rejects an unknown branch (NOT_FOUND)', async () => {
        const branchId = newId();
        await expectCode(
          () => store().appendStateCommit({ branchId, messageId: null, update: {} }, 0),
          'NOT_FOUND',
        );
        expect(await store().getBranchById(branchId)).toBeNull();
      });

      it('rejects an unknown message (NOT_FOUND)', async () => {
        const { branch } = await branchWithChain();
        await expectCode(
          () =>
            store().appendStateCommit({ branchId: branch.id, messageId: newId(), update: {} }, 0),
          'NOT_FOUND',
        );
        expect(await store().getStateCommits(branch.id)).toEqual([]);
      });

      it('rejects a message of another thread (INVALID_ARGUMENT)', async () => {
        const { branch } = await branchWithChain();
        const other = await branchWithChain();
        await expectCode(
          () =>
            store().appendStateCommit(
              { branchId: branch.id, messageId: other.chain[0]!.id, update: {} },
              0,
            ),
          'INVALID_ARGUMENT',
        );
        expect(await store().getStateCommits(branch.id)).toEqual([]);
      });

      it.each([
        ['negative', -1],
        ['fractional', 0.5],
        ['NaN', Number.NaN],
      ])('rejects a %s expected version (INVALID_ARGUMENT)', async (_l, expected) => {
        const { branch } = await branchWithChain();
        await expectCode(
          () =>
            store().appendStateCommit(
              { branchId: branch.id, messageId: null, update: {} },
              expected,
            ),
          'INVALID_ARGUMENT',
        );
        expect(await store().getStateCommits(branch.id)).toEqual([]);
      });

      it.each([
        ['an array', [1]],
        ['a string', 'x'],
        ['null', null],
      ])('rejects an update that is %s (INVALID_ARGUMENT)', async (_l, update) => {
        const { branch } = await branchWithChain();
        await expectCode(
          () =>
            store().appendStateCommit(
              { branchId: branch.id, messageId: null, update: update as unknown as JsonObject },
              0,
            ),
          'INVALID_ARGUMENT',
        );
        expect(await store().getStateCommits(branch.id)).toEqual([]);
      });

      it.each(NON_JSON)('rejects an update with %s (INVALID_ARGUMENT)', async (_l, make) => {
        const { branch } = await branchWithChain();
        await expectCode(
          () =>
            store().appendStateCommit(
              { branchId: branch.id, messageId: null, update: make() as JsonObject },
              0,
            ),
          'INVALID_ARGUMENT',
        );
        expect(await store().getStateCommits(branch.id)).toEqual([]);
      });

      it.each(NON_JSON)('rejects a snapshot with %s (INVALID_ARGUMENT)', async (_l, make) => {
        const { branch } = await branchWithChain();
        const c1 = await store().appendStateCommit(
          { branchId: branch.id, messageId: null, update: { ok: 1 } },
          0,
        );
        await expectCode(
          () =>
            store().appendStateCommit(
              { branchId: branch.id, messageId: null, update: {}, snapshot: make() as JsonObject },
              1,
            ),
          'INVALID_ARGUMENT',
        );
        expect(await store().getStateCommits(branch.id)).toEqual([c1]);
      });
    });
  });
}
