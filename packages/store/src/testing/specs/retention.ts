import type { JsonObject, Message } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { runLeaseKey, type Store, SWEEP_LEASE_KEY } from '../../store.js';
import { SLOW_TEST_TIMEOUT, type StoreConformanceOptions, useStore } from '../context.js';
import {
  expectCode,
  makeChain,
  makeThread,
  SWEEPABLE_FREED,
  SWEEPABLE_POLICY,
  sleep,
  turnOf,
  writeSweepable,
} from '../helpers.js';

/** A thread with a `main` branch on a chain of `n` messages and `commits` state commits on it. */
async function threadWithLog(
  store: Store,
  options: { n?: number; commits?: number; snapshotEvery?: number | null } = {},
) {
  const n = options.n ?? 10;
  const thread = await makeThread(store);
  const chain = await makeChain(store, thread.id, n);
  const main = await store.createBranch({
    threadId: thread.id,
    name: 'main',
    headMessageId: chain[n - 1]!.id,
    activate: true,
  });
  const every = options.snapshotEvery === undefined ? 10 : options.snapshotEvery;
  for (let v = 1; v <= (options.commits ?? 0); v++) {
    const update: JsonObject = { step: v, note: `commit ${v} of a state log` };
    // Commit v sits on message min(v, n) - 1, so an older message reads an older state.
    await store.appendStateCommit(
      {
        branchId: main.id,
        messageId: chain[Math.min(v, n) - 1]!.id,
        update,
        snapshot: every !== null && v % every === 0 ? { step: v, all: true } : null,
      },
      v - 1,
    );
  }
  return { thread, chain, main };
}

/** Waits until `Date.now()` has moved past what was just written, so a 1 ms TTL covers it. */
const tick = () => sleep(5);

export function describeRetention(options: StoreConformanceOptions): void {
  describe('retention (sweep)', () => {
    const store = useStore(options);

    it(
      'keeps the newest state commits back to the snapshot they replay from',
      async () => {
        // Enough commits for several stored groups (a store that packs commits in segments
        // rewrites the one the cut falls in).
        const { thread, main } = await threadWithLog(store(), { commits: 600, snapshotEvery: 50 });
        const before = await store().getStateCommits(main.id);
        const report = await store().sweep({ keepStateCommits: 120 }, { threadIds: [thread.id] });
        // The newest 120 start at 481, whose state replays from the snapshot at 450.
        expect(report).toMatchObject({ ran: true, scanned: 1, busy: 0, invalid: 0 });
        expect(report.freed).toEqual({
          threads: 0,
          branches: 0,
          stateCommits: 449,
          turns: 0,
          messages: 0,
          checkpoints: 0,
        });
        expect(await store().getStateCommits(main.id)).toEqual(before.slice(449));
        expect(
          await store().getStateCommits(main.id, { fromVersion: 400, toVersion: 460 }),
        ).toEqual(before.slice(449, 460));
        expect(
          await store().getLatestStateCommit(main.id, { withSnapshot: true, maxVersion: 460 }),
        ).toEqual(before[449]);
        expect(
          await store().getLatestStateCommit(main.id, { withSnapshot: true, maxVersion: 449 }),
        ).toBeNull();
        // The log goes on from where it was.
        const next = await store().appendStateCommit(
          { branchId: main.id, messageId: null, update: { step: 601 } },
          600,
        );
        expect(next.version).toBe(601);
        await expectCode(
          () => store().appendStateCommit({ branchId: main.id, messageId: null, update: {} }, 600),
          'CONFLICT',
        );
        // Swept again: nothing more to free until the log grows.
        const again = await store().sweep({ keepStateCommits: 120 }, { threadIds: [thread.id] });
        expect(again.freed.stateCommits).toBe(0);
      },
      SLOW_TEST_TIMEOUT,
    );

    it('keeps every commit of a log without snapshots, and a named checkpoint’s state', async () => {
      const plain = await threadWithLog(store(), { commits: 40, snapshotEvery: null });
      const marked = await threadWithLog(store(), { n: 40, commits: 40, snapshotEvery: 10 });
      // A checkpoint on message 15 reads commit 15, which replays from the snapshot at 10.
      await store().saveCheckpoint({
        threadId: marked.thread.id,
        name: 'before-tools',
        messageId: marked.chain[14]!.id,
      });
      const report = await store().sweep(
        { keepStateCommits: 5 },
        { threadIds: [plain.thread.id, marked.thread.id] },
      );
      expect(report.freed.stateCommits).toBe(9);
      expect(await store().getStateCommits(plain.main.id)).toHaveLength(40);
      const kept = await store().getStateCommits(marked.main.id);
      expect(kept.map((c) => c.version)).toEqual(Array.from({ length: 31 }, (_, i) => i + 10));
    });

    it('drops branches nobody visited, never the active one, a parent or a checkpoint’s', async () => {
      const { thread, chain, main } = await threadWithLog(store(), { commits: 3 });
      const branch = (name: string, head: Message, parent = main.id) =>
        store().createBranch({
          threadId: thread.id,
          name,
          headMessageId: head.id,
          parentBranchId: parent,
        });
      const idle = await branch('idle', chain[3]!);
      await store().appendStateCommit({ branchId: idle.id, messageId: null, update: { x: 1 } }, 0);
      const parent = await branch('parent', chain[4]!);
      const child = await branch('child', chain[4]!, parent.id);
      const marked = await branch('marked', chain[5]!);
      await store().saveCheckpoint({ threadId: thread.id, name: 'mark', messageId: chain[5]!.id });
      const visited = await branch('visited', chain[2]!);
      // Within the TTL every branch counts as visited.
      const report = await store().sweep({ branchTtlMs: 60_000 }, { threadIds: [thread.id] });
      expect(report.freed.branches).toBe(0);
      await tick();
      const swept = await store().sweep({ branchTtlMs: 1 }, { threadIds: [thread.id] });
      const names = (await store().listBranches(thread.id)).map((b) => b.name);
      // idle, visited, child and then parent (a leaf once child went) are dropped; marked
      // holds the checkpoint's message; main is active.
      expect(names.sort()).toEqual(['main', 'marked']);
      expect(swept.freed).toMatchObject({ branches: 4, stateCommits: 1 });
      for (const b of [idle, visited, child, parent])
        expect(await store().getBranchById(b.id)).toBeNull();
      expect(await store().getStateCommits(main.id)).toHaveLength(3);
      expect(await store().getMessage(chain[9]!.id)).not.toBeNull();
      expect((await store().getActiveBranch(thread.id))?.id).toBe(main.id);
      expect(await store().getBranchById(marked.id)).not.toBeNull();
    });

    it('deletes idle threads, counting what was under them, and leaves busy ones', async () => {
      const idle = await threadWithLog(store(), { commits: 2 });
      await store().putTurn(turnOf(idle.thread.id, { startedAt: Date.now() - 10 }));
      const leased = await threadWithLog(store(), { commits: 2 });
      const running = await threadWithLog(store(), { commits: 2 });
      await store().putTurn(turnOf(running.thread.id, { status: 'running' }));
      await store().acquireLease({
        key: runLeaseKey(leased.thread.id),
        owner: 'worker-1',
        ttlMs: 60_000,
      });
      await tick();
      const threadIds = [idle.thread.id, leased.thread.id, running.thread.id];
      const report = await store().sweep(
        { threadTtlMs: 1, keepStateCommits: 1, branchTtlMs: 1 },
        { threadIds },
      );
      expect(report).toMatchObject({ ran: true, scanned: 3, busy: 2 });
      expect(report.freed).toEqual({
        threads: 1,
        branches: 1,
        stateCommits: 2,
        turns: 1,
        messages: 10,
        checkpoints: 0,
      });
      expect(await store().getThread(idle.thread.id)).toBeNull();
      expect(await store().getStateCommits(leased.main.id)).toHaveLength(2);
      expect(await store().getStateCommits(running.main.id)).toHaveLength(2);
    });

    it('deletes finished turns older than the TTL, never a running one', async () => {
      const { thread } = await threadWithLog(store());
      const old = Date.now() - 60_000;
      const done = turnOf(thread.id, { startedAt: old, finishedAt: old + 5 });
      const live = turnOf(thread.id, { startedAt: old, status: 'running' });
      const fresh = turnOf(thread.id);
      for (const t of [done, live, fresh]) await store().putTurn(t);
      const report = await store().sweep({ turnTtlMs: 30_000 }, { threadIds: [thread.id] });
      expect(report.freed.turns).toBe(1);
      expect(report.busy).toBe(1);
      expect((await store().listTurns(thread.id)).map((t) => t.id).sort()).toEqual(
        [live.id, fresh.id].sort(),
      );
    });

    it('applies a thread’s own metadata `retention` over the sweep’s policy', async () => {
      const exempt = await threadWithLog(store(), { commits: 30 });
      await store().updateThread(exempt.thread.id, { metadata: { retention: false } });
      const own = await threadWithLog(store(), { commits: 30 });
      await store().updateThread(own.thread.id, {
        metadata: { retention: { keepStateCommits: 5 } },
      });
      const off = await threadWithLog(store(), { commits: 30 });
      await store().updateThread(off.thread.id, {
        metadata: { retention: { keepStateCommits: null } },
      });
      const bad = await threadWithLog(store(), { commits: 30 });
      await store().updateThread(bad.thread.id, { metadata: { retention: { keep: 1 } } });
      const report = await store().sweep(
        { keepStateCommits: 15 },
        { threadIds: [exempt, own, off, bad].map((t) => t.thread.id) },
      );
      expect(report).toMatchObject({ scanned: 4, invalid: 1 });
      // own: the newest 5 start at 26, which replays from the snapshot at 20.
      expect(report.freed.stateCommits).toBe(19);
      expect(await store().getStateCommits(own.main.id)).toHaveLength(11);
      for (const t of [exempt, off, bad])
        expect(await store().getStateCommits(t.main.id)).toHaveLength(30);
    });

    it('frees the same at any duty cycle (it only rests between threads)', async () => {
      const a = await threadWithLog(store(), { commits: 30 });
      const b = await threadWithLog(store(), { commits: 30 });
      const threadIds = [a.thread.id, b.thread.id];
      const report = await store().sweep({ keepStateCommits: 5 }, { threadIds, dutyCycle: 0.2 });
      expect(report).toMatchObject({ ran: true, scanned: 2 });
      // The newest 5 (26..30) replay from the snapshot at 20.
      expect(report.freed.stateCommits).toBe(38);
      const full = await threadWithLog(store(), { commits: 30 });
      const again = await store().sweep(
        { keepStateCommits: 5 },
        { threadIds: [full.thread.id], dutyCycle: 1 },
      );
      expect(again.freed.stateCommits).toBe(19);
    });

    it(
      'frees each thread of a long list as it frees it alone, whatever the others hold',
      async () => {
        // More threads than one write session of a sweep takes, of every kind, interleaved.
        const plain = await writeSweepable(store(), 12);
        const [running, leased, exempt, marked] = await writeSweepable(store(), 4);
        await store().putTurn(turnOf(running!, { status: 'running' }));
        await store().acquireLease({ key: runLeaseKey(leased!), owner: 'w', ttlMs: 60_000 });
        await store().updateThread(exempt!, { metadata: { retention: false } });
        // A checkpoint on the side branch's chain keeps the side branch.
        const side = await store().getBranch(marked!, 'side');
        await store().saveCheckpoint({
          threadId: marked!,
          name: 'keep',
          messageId: side!.headMessageId!,
        });
        await tick();
        const threadIds = [...plain.slice(0, 6), running!, leased!, exempt!, marked!];
        threadIds.push(...plain.slice(6), 'no-such-thread');
        const report = await store().sweep(SWEEPABLE_POLICY, { threadIds, batch: 100 });
        expect(report).toMatchObject({ ran: true, scanned: 16, busy: 2, invalid: 0 });
        // Every plain thread as alone; the busy ones their finished turns only; the marked
        // one all but its side branch (and the side branch's commit); the exempt one nothing.
        const { branches, stateCommits, turns } = SWEEPABLE_FREED;
        expect(report.freed).toEqual({
          threads: 0,
          branches: 12 * branches,
          stateCommits: 13 * stateCommits - 1,
          turns: 12 * turns + 2 + 1,
          messages: 0,
          checkpoints: 0,
        });
        for (const id of [...plain, marked!]) {
          const main = await store().getBranch(id, 'main');
          const kept = await store().getStateCommits(main!.id);
          expect(kept.map((c) => c.version)).toEqual([10, 11, 12]);
        }
        expect(await store().getBranch(marked!, 'side')).not.toBeNull();
        for (const id of [running!, leased!, exempt!])
          expect(await store().listBranches(id)).toHaveLength(2);
        expect(await store().listTurns(running!)).toHaveLength(1);
      },
      SLOW_TEST_TIMEOUT,
    );

    it('runs one sweeper at a time: a held sweep lease makes it do nothing', async () => {
      const { thread, main } = await threadWithLog(store(), { commits: 30 });
      await store().acquireLease({ key: SWEEP_LEASE_KEY, owner: 'other', ttlMs: 60_000 });
      const report = await store().sweep({ keepStateCommits: 1 }, { threadIds: [thread.id] });
      expect(report).toMatchObject({ ran: false, scanned: 0 });
      expect(await store().getStateCommits(main.id)).toHaveLength(30);
      await store().releaseLease(SWEEP_LEASE_KEY, 'other');
      const ran = await store().sweep({ keepStateCommits: 1 }, { threadIds: [thread.id] });
      expect(ran.freed.stateCommits).toBe(29);
      // Released once the sweep is over.
      expect((await store().getLease(SWEEP_LEASE_KEY))?.releasedAt).not.toBeNull();
    });

    it('dry run: frees what a sweep then frees, by the same rules, keeping and telling nothing', async () => {
      const idle = await threadWithLog(store(), { commits: 2 });
      await store().putTurn(turnOf(idle.thread.id, { startedAt: Date.now() - 10 }));
      const leased = await threadWithLog(store(), { commits: 2 });
      await store().acquireLease({
        key: runLeaseKey(leased.thread.id),
        owner: 'worker-1',
        ttlMs: 60_000,
      });
      const log = await threadWithLog(store(), { commits: 40 });
      await store().saveCheckpoint({
        threadId: log.thread.id,
        name: 'kept',
        messageId: log.chain[7]!.id,
      });
      const side = await store().createBranch({
        threadId: log.thread.id,
        name: 'side',
        headMessageId: log.chain[4]!.id,
        parentBranchId: log.main.id,
      });
      await store().appendStateCommit({ branchId: side.id, messageId: null, update: { x: 1 } }, 0);
      // Busy on its rules other than turns: its old turn still counts.
      const running = await threadWithLog(store(), { commits: 2 });
      const old = Date.now() - 60_000;
      await store().putTurn(turnOf(running.thread.id, { startedAt: old, finishedAt: old + 1 }));
      await store().putTurn(turnOf(running.thread.id, { status: 'running' }));
      await tick();
      const threadIds = [idle.thread.id, leased.thread.id, log.thread.id, running.thread.id];
      // The threads' own policies apply too: this one is never deleted as idle.
      await store().updateThread(log.thread.id, {
        metadata: { retention: { threadTtlMs: null } },
      });
      const policy = { threadTtlMs: 1, keepStateCommits: 5, branchTtlMs: 1, turnTtlMs: 1 };
      const heard: unknown[] = [];
      const stops = threadIds.map((id) => store().subscribe(id, (c) => heard.push(c)));
      const snapshot = async () => ({
        threads: await Promise.all(threadIds.map((id) => store().getThread(id))),
        branches: await Promise.all(threadIds.map((id) => store().listBranches(id))),
        commits: await Promise.all(
          [idle, leased, log, running].map((t) => store().getStateCommits(t.main.id)),
        ),
        turns: await Promise.all(threadIds.map((id) => store().listTurns(id))),
      });
      const before = await snapshot();
      // Beside a sweeper that holds the lease: a dry run takes none and writes nothing.
      await store().acquireLease({ key: SWEEP_LEASE_KEY, owner: 'other', ttlMs: 60_000 });
      const dry = await store().sweep(policy, { threadIds, dryRun: true, dutyCycle: 1 });
      expect(await snapshot()).toEqual(before);
      expect(heard).toEqual([]);
      expect((await store().getLease(SWEEP_LEASE_KEY))?.owner).toBe('other');
      await store().releaseLease(SWEEP_LEASE_KEY, 'other');
      const real = await store().sweep(policy, { threadIds, dutyCycle: 1 });
      for (const stop of stops) stop();
      expect(dry).toEqual(real);
      expect(real).toMatchObject({ ran: true, scanned: 4, busy: 2 });
      // The idle thread with all under it (its branch too), the log’s unvisited branch and old commits, the
      // busy thread's old turn.
      expect(real.freed).toMatchObject({ threads: 1, branches: 2, turns: 2 });
      expect(real.freed.stateCommits).toBeGreaterThan(1);
      expect(heard.length).toBeGreaterThan(0);
    });

    it('refuses a bad policy or options, and a call inside a transaction, writing nothing', async () => {
      const { thread, main } = await threadWithLog(store(), { commits: 30 });
      const threadIds = [thread.id];
      const lease = await store().getLease(SWEEP_LEASE_KEY);
      for (const policy of [
        { keepStateCommits: 0 },
        { keepStateCommits: 1.5 },
        { threadTtlMs: -1 },
        { turnTtlMs: '1d' },
        { keepLast: 3 },
      ])
        await expectCode(() => store().sweep(policy as never, { threadIds }), 'INVALID_ARGUMENT');
      await expectCode(() => store().sweep(null as never), 'INVALID_ARGUMENT');
      for (const o of [
        { batch: 0 },
        { threadIds: ['ok', 7] },
        { leaseTtlMs: 0 },
        { every: 1 },
        { dutyCycle: 0 },
        { dutyCycle: 1.5 },
        { dutyCycle: Number.NaN },
        { dutyCycle: '0.5' },
        { dryRun: 'yes' },
      ])
        await expectCode(
          () => store().sweep({ keepStateCommits: 1 }, o as never),
          'INVALID_ARGUMENT',
        );
      await expectCode(
        () => store().transaction((tx) => tx.sweep({ keepStateCommits: 1 }, { threadIds })),
        'INVALID_ARGUMENT',
      );
      expect(await store().getStateCommits(main.id)).toHaveLength(30);
      expect(await store().getLease(SWEEP_LEASE_KEY)).toEqual(lease);
    });
  });
}
