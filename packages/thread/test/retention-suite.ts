import type { Branch, Message } from '@cairn/core';
import { createMemoryStore, type RetentionPolicy, type Store } from '@cairn/store';
import { Rng } from '@cairn/store/testing';
import { expect, it } from 'vitest';
import { type CairnThread, openThread, stateAsOf } from '../src/index.js';
import { Research } from './schema.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Threads the differential test writes; `CAIRN_RETENTION_THREADS=1000` scales it up. */
const THREADS = Number(process.env.CAIRN_RETENTION_THREADS ?? 6);

type T = CairnThread<typeof Research>;

/** A thread with branches, checkpoints, turns and a state log with snapshots, from `rng`. */
async function writeThread(store: Store, rng: Rng): Promise<string> {
  const t = await openThread(store, { schema: Research, snapshotPolicy: { maxCommits: 3 } });
  const say = async (text: string) => {
    t.add([{ role: 'user', data: text }]);
    await t.save();
  };
  let n = 0;
  for (let step = 0; step < 30; step++) {
    const r = rng.next();
    const saved = await t.history();
    if (r < 0.35) await say(`message ${n++}`);
    else if (r < 0.7) await t.update({ counter: t.state.counter + 1, keyInsights: [`i${n++}`] });
    else if (r < 0.78) await t.update({ notes: { [`k${n % 4}`]: `v${n++}` } });
    else if (r < 0.84 && saved.length > 0)
      await t.checkpoint(`cp${n++}`, saved[Math.floor(rng.next() * saved.length)]!.id);
    else if (r < 0.9 && saved.length > 0)
      await t.rewind(saved[Math.floor(rng.next() * saved.length)]!.id);
    else if (r < 0.93) await t.btw();
    else if (r < 0.95 && saved.length > 0)
      // A branch made outside the engine: no commits, it reads its parent's state as of its fork.
      await store.createBranch({
        threadId: t.id,
        name: `raw${n++}`,
        headMessageId: saved[Math.floor(rng.next() * saved.length)]!.id,
        parentBranchId: t.branchId,
      });
    else {
      const turn = await t.beginTurn();
      await turn.finish();
    }
  }
  await t.close();
  return t.id;
}

/** What a thread reads on a branch at its head and at each named checkpoint on its chain. */
async function reads(store: Store, b: Branch, checkpoints: Message[]) {
  const head = b.headMessageId;
  const at: Record<string, unknown> = {};
  if (head !== null) {
    at.head = await stateAsOf(store, Research, { branchId: b.id, messageId: head });
    at.chain = await store.getChain(head);
    for (const m of checkpoints)
      if (await store.isAncestor(m.id, head))
        at[m.id] = await stateAsOf(store, Research, { branchId: b.id, messageId: m.id });
  }
  return at;
}

/** Everything a thread can resume from, on `store`, for the branches of `ids`. */
async function resumable(store: Store, threadId: string, branchIds: Set<string>) {
  const checkpoints = await store.listCheckpoints(threadId);
  const marks = await Promise.all(checkpoints.map((c) => store.getMessage(c.messageId)));
  const out: Record<string, unknown> = { checkpoints };
  for (const b of await store.listBranches(threadId))
    if (branchIds.has(b.id)) {
      // `seq` is the store's own creation order, not the thread's.
      const { seq: _, ...branch } = b;
      out[b.id] = { branch, ...(await reads(store, b, marks as Message[])) };
    }
  const t = await openThread(store, { schema: Research, threadId });
  out.active = { branch: t.branchName, state: t.state, history: await t.history() };
  await t.close();
  return out;
}

/** Opens the thread, writes one more turn's worth, and returns what it reads then. */
async function resume(store: Store, threadId: string) {
  const t: T = await openThread(store, { schema: Research, threadId });
  await t.update({ counter: t.state.counter + 100, keyInsights: ['resumed'] });
  t.add([{ id: `resumed-${threadId}`, role: 'user', data: 'resumed', createdAt: 1 }]);
  await t.save();
  const out = { state: t.state, version: t.stateVersion, history: await t.history() };
  await t.close();
  return out;
}

/**
 * Retention against an unpruned copy: threads written on `store()` are copied into a
 * memory store, then swept policy after policy; after each, every thread reads on every
 * branch still there the same head, state at the head and at each named checkpoint, and
 * messages as the copy, its active branch is still there, and it resumes as the copy does.
 */
export function describeRetentionDifferential(store: () => Store): void {
  it(`keeps every point ${THREADS} threads resume from, policy after policy, as an unpruned copy reads it`, async () => {
    const rng = new Rng(30);
    const ids: string[] = [];
    for (let i = 0; i < THREADS; i++) ids.push(await writeThread(store(), rng));
    const copy = createMemoryStore();
    for (const id of ids) await copy.restoreThread((await store().exportThread(id))!);
    await sleep(5);
    const policies: RetentionPolicy[] = [
      { keepStateCommits: 2 },
      { turnTtlMs: 1 },
      { branchTtlMs: 1 },
      { keepStateCommits: 1, branchTtlMs: 1, turnTtlMs: 1 },
    ];
    let freed = 0;
    for (const policy of policies) {
      const report = await store().sweep(policy, { threadIds: ids, batch: 4 });
      expect(report).toMatchObject({ ran: true, scanned: THREADS, busy: 0, invalid: 0 });
      freed += report.freed.stateCommits + report.freed.branches + report.freed.turns;
      for (const id of ids) {
        const kept = new Set((await store().listBranches(id)).map((b) => b.id));
        expect(await resumable(store(), id, kept)).toEqual(await resumable(copy, id, kept));
      }
    }
    // The policies did free something, and every thread still resumes as its copy does.
    expect(freed).toBeGreaterThan(0);
    for (const id of ids) expect(await resume(store(), id)).toEqual(await resume(copy, id));
    await copy.close();
  }, 600_000);

  it('does not break a turn that runs while the sweep runs', async () => {
    const t = await openThread(store(), { schema: Research, snapshotPolicy: { maxCommits: 2 } });
    for (let i = 0; i < 12; i++) await t.update({ counter: i + 1 });
    const other = await openThread(store(), {
      schema: Research,
      threadId: t.id,
      snapshotPolicy: { maxCommits: 2 },
    });
    const turn = await t.beginTurn();
    const run = await t.acquireRun({ owner: 'worker', ttlMs: 60_000 });
    await sleep(5);
    // Sweeps race a turn writing messages and state from another opening of the thread.
    const writes = (async () => {
      for (let i = 0; i < 10; i++) {
        other.add([{ role: 'user', data: `during ${i}` }]);
        await other.save();
        await other.update({ counter: other.state.counter + 1, keyInsights: [`d${i}`] });
      }
    })();
    const sweeps = (async () => {
      for (let i = 0; i < 5; i++)
        await store().sweep(
          { keepStateCommits: 1, branchTtlMs: 1, turnTtlMs: 1, threadTtlMs: 1 },
          { threadIds: [t.id] },
        );
    })();
    await Promise.all([writes, sweeps]);
    await turn.finish();
    await run.release({ result: 'completed' });
    expect(other.state.counter).toBe(22);
    const fresh = await openThread(store(), { schema: Research, threadId: t.id });
    expect(fresh.state).toEqual(other.state);
    expect((await fresh.history()).map((m) => m.data)).toEqual(
      Array.from({ length: 10 }, (_, i) => `during ${i}`),
    );
    // Once the turn is over and the run released, the sweep prunes the log.
    await sleep(5);
    const report = await store().sweep({ keepStateCommits: 1 }, { threadIds: [t.id] });
    expect(report.busy).toBe(0);
    expect(report.freed.stateCommits).toBeGreaterThan(0);
    const after = await openThread(store(), {
      schema: Research,
      threadId: t.id,
      snapshotPolicy: { maxCommits: 2 },
    });
    expect(after.state).toEqual(other.state);
    // No run now: each step, a sweep prunes while two writers commit state and save messages.
    let pruned = 0;
    for (let i = 0; i < 10; i++) {
      const sweep = store().sweep({ keepStateCommits: 1 }, { threadIds: [t.id] });
      after.add([{ role: 'user', data: `racing ${i}` }]);
      await after.save();
      await after.update({ counter: after.state.counter + 1, notes: { [`n${i}`]: 'x' } });
      await other.update({ keyInsights: [`o${i}`] });
      pruned += (await sweep).freed.stateCommits;
    }
    const last = await openThread(store(), { schema: Research, threadId: t.id });
    expect(last.state.counter).toBe(32);
    expect(last.state.keyInsights).toEqual(
      expect.arrayContaining(Array.from({ length: 10 }, (_, i) => `o${i}`)),
    );
    expect(Object.keys(last.state.notes)).toHaveLength(10);
    expect((await last.history()).map((m) => m.data)).toHaveLength(20);
    expect(pruned).toBeGreaterThan(0);
    for (const x of [t, other, fresh, after, last]) await x.close();
  }, 120_000);
}
