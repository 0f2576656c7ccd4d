import { isCairnError, newId } from '@cairn/core';
import { describe, expect, it, type TestContext } from 'vitest';
import type { Store, StoreCapabilities, StoreChange } from '../../store.js';
import { disposeStore, SLOW_TEST_TIMEOUT, type StoreConformanceOptions } from '../context.js';
import { makeChain, makeThread } from '../helpers.js';

/**
 * Two stores on one database, as two processes would have: registered only when the
 * options say how to open the second one (`reopen`). Each test runs only when the
 * store's capabilities promise what it checks.
 */
export function describeSharedData(options: StoreConformanceOptions): void {
  if (!options.reopen) return;
  const reopen: (store: Store) => Promise<Store> = options.reopen;

  describe('a second store on the same data', () => {
    /**
     * Runs `fn` with two stores on one database; with `needs`, only when the store has
     * that capability (else the test is skipped, saying why).
     */
    function pair<K extends keyof StoreCapabilities>(
      fn: (a: Store, b: Store) => Promise<void>,
      needs?: [K, StoreCapabilities[K]],
    ) {
      return async (ctx: TestContext) => {
        const a = await options.create();
        try {
          if (needs && a.capabilities[needs[0]] !== needs[1]) {
            ctx.skip(`the store's ${needs[0]} is not ${String(needs[1])}`);
            return;
          }
          const b = await reopen(a);
          try {
            await fn(a, b);
          } finally {
            await b.close();
          }
        } finally {
          await disposeStore(options, a);
        }
      };
    }

    it(
      'wakes a lease waiter on one store when the other releases the lease',
      pair(async (a, b) => {
        const k = `lease-${newId()}`;
        await a.acquireLease({ key: k, owner: 'alice', ttlMs: 60_000 });
        const waiting = b.acquireLease({ key: k, owner: 'bob', ttlMs: 60_000, waitMs: 30_000 });
        await new Promise((resolve) => setTimeout(resolve, 50));
        await a.releaseLease(k, 'alice');
        expect((await waiting).lease.owner).toBe('bob');
      }),
    );

    it(
      'hands a freed lease to the waiters of both stores in the order they asked, before anyone else',
      pair(async (a, b) => {
        const k = `lease-${newId()}`;
        const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
        await a.acquireLease({ key: k, owner: 'alice', ttlMs: 60_000 });
        const order: string[] = [];
        const wait = (s: Store, owner: string) =>
          s.acquireLease({ key: k, owner, ttlMs: 60_000, waitMs: 30_000 }).then(async () => {
            order.push(owner);
            await sleep(20);
            await s.releaseLease(k, owner);
          });
        const bob = wait(b, 'bob');
        await sleep(100);
        const carol = wait(a, 'carol');
        await sleep(100);
        const erin = wait(b, 'erin');
        await sleep(100);
        await a.releaseLease(k, 'alice');
        // Free, but bob asked first: an acquisition of either store that does not wait loses.
        for (const s of [a, b]) {
          const e = await s.acquireLease({ key: k, owner: 'dave', ttlMs: 60_000 }).then(
            () => null,
            (e: unknown) => e,
          );
          expect(isCairnError(e, 'CONFLICT')).toBe(true);
        }
        await Promise.all([bob, carol, erin]);
        expect(order).toEqual(['bob', 'carol', 'erin']);
      }),
      SLOW_TEST_TIMEOUT,
    );

    it(
      'sees at once what the first store wrote',
      pair(async (a, b) => {
        const t = await makeThread(a);
        const chain = await makeChain(a, t.id, 4);
        const branch = await a.createBranch({
          threadId: t.id,
          name: 'main',
          headMessageId: chain[3]!.id,
        });
        expect(await b.getThread(t.id)).toEqual(t);
        expect(await b.getChain(chain[3]!.id)).toEqual(chain);
        expect(await b.getActiveBranch(t.id)).toEqual(branch);
        await b.moveHead(branch.id, chain[3]!.id, chain[1]!.id);
        expect((await a.getBranchById(branch.id))!.headMessageId).toBe(chain[1]!.id);
      }),
    );

    it(
      'keeps everything after the first store closes (durable)',
      pair(
        async (a, b) => {
          const t = await makeThread(a, { title: 'kept', metadata: { n: 1 } });
          const chain = await makeChain(a, t.id, 3);
          const branch = await a.createBranch({
            threadId: t.id,
            name: 'main',
            headMessageId: chain[2]!.id,
          });
          const commit = await a.appendStateCommit(
            { branchId: branch.id, messageId: chain[2]!.id, update: { a: 1 }, snapshot: { a: 1 } },
            0,
          );
          const cp = await a.saveCheckpoint({
            threadId: t.id,
            name: 'cp',
            messageId: chain[1]!.id,
          });
          const [memory] = await a.addMemories([
            { agentId: `d-${newId()}`, content: { text: 'durable walnut' }, embedding: [1, 0, 0] },
          ]);
          const key = `d-${newId()}`;
          const { lease } = await a.acquireLease({ key, owner: 'o', ttlMs: 60_000 });
          await a.close();
          expect(await b.getThread(t.id)).toEqual(t);
          expect(await b.getChain(chain[2]!.id)).toEqual(chain);
          expect(await b.getBranchById(branch.id)).toEqual(branch);
          expect(await b.getStateCommits(branch.id)).toEqual([commit]);
          expect(await b.getCheckpoint(t.id, 'cp')).toEqual(cp);
          expect(await b.getMemory(memory!.id)).toEqual(memory);
          expect(await b.getEmbeddingSpace()).toEqual({ embedderId: null, dimensions: 3 });
          expect(await b.getLease(key)).toEqual(lease);
          const [hit] = await b.searchMemories({
            text: 'walnut',
            filter: { agentId: memory!.agentId },
          });
          expect(hit!.memory.id).toBe(memory!.id);
        },
        ['durable', true],
      ),
    );

    it(
      'loses no state commit when writers on both stores race with retries (multiProcess)',
      pair(
        async (a, b) => {
          const t = await makeThread(a);
          const branch = await a.createBranch({
            threadId: t.id,
            name: 'main',
            headMessageId: null,
          });
          async function writer(s: Store, tag: string): Promise<void> {
            for (let attempt = 0; ; attempt++) {
              const latest = await s.getLatestStateCommit(branch.id);
              try {
                await s.appendStateCommit(
                  { branchId: branch.id, messageId: null, update: { tag } },
                  latest?.version ?? 0,
                );
                return;
              } catch (e) {
                if (!isCairnError(e, 'CONFLICT') || attempt > 500) throw e;
              }
            }
          }
          await Promise.all(Array.from({ length: 20 }, (_, i) => writer(i % 2 ? a : b, `w${i}`)));
          const commits = await b.getStateCommits(branch.id);
          expect(commits.map((c) => c.version)).toEqual(
            Array.from({ length: 20 }, (_, i) => i + 1),
          );
          expect(commits.map((c) => c.update.tag).sort()).toEqual(
            Array.from({ length: 20 }, (_, i) => `w${i}`).sort(),
          );
        },
        ['multiProcess', true],
      ),
      SLOW_TEST_TIMEOUT,
    );

    it(
      'queues writers that lock the branch: none loses a compare-and-set (multiProcess)',
      pair(
        async (a, b) => {
          const t = await makeThread(a);
          const chain = await makeChain(a, t.id, 1);
          const branch = await a.createBranch({
            threadId: t.id,
            name: 'main',
            headMessageId: chain[0]!.id,
          });
          // Locked writers on both stores, racing optimistic ones that may lose.
          const locked = (s: Store, tag: string) =>
            s.transaction(async (tx) => {
              const at = await tx.lockBranch(branch.id);
              const latest = await tx.getLatestStateCommit(branch.id);
              await tx.appendStateCommit(
                { branchId: branch.id, messageId: at.headMessageId, update: { tag } },
                latest?.version ?? 0,
              );
            });
          const optimistic = async (s: Store, tag: string) => {
            const latest = await s.getLatestStateCommit(branch.id);
            await s.appendStateCommit(
              { branchId: branch.id, messageId: null, update: { tag } },
              latest?.version ?? 0,
            );
          };
          const results = await Promise.allSettled(
            Array.from({ length: 24 }, (_, i) =>
              (i % 3 === 2 ? optimistic : locked)(i % 2 ? a : b, `w${i}`),
            ),
          );
          results.forEach((r, i) => {
            if (i % 3 !== 2) expect([i, r.status]).toEqual([i, 'fulfilled']);
            else if (r.status === 'rejected') expect(isCairnError(r.reason, 'CONFLICT')).toBe(true);
          });
          const commits = await b.getStateCommits(branch.id);
          const won = results.filter((r) => r.status === 'fulfilled').length;
          expect(commits.map((c) => c.version)).toEqual(
            Array.from({ length: won }, (_, i) => i + 1),
          );
          expect(await b.getStateCommits(branch.id)).toHaveLength(won);
          expect(await b.lockBranch(branch.id, { timeoutMs: 100 })).toEqual(
            await a.getBranchById(branch.id),
          );
        },
        ['multiProcess', true],
      ),
      SLOW_TEST_TIMEOUT,
    );

    it(
      'lets one of two stores win a head move, a message id and a branch name (multiProcess)',
      pair(
        async (a, b) => {
          const t = await makeThread(a);
          const chain = await makeChain(a, t.id, 2);
          const branch = await a.createBranch({
            threadId: t.id,
            name: 'main',
            headMessageId: chain[0]!.id,
          });
          const moves = await Promise.allSettled([
            a.moveHead(branch.id, chain[0]!.id, chain[1]!.id),
            b.moveHead(branch.id, chain[0]!.id, chain[1]!.id),
          ]);
          expect(moves.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
          const id = newId();
          const adds = await Promise.allSettled(
            [a, b].map((s, i) =>
              s.addMessages([
                { id, threadId: t.id, parentId: chain[1]!.id, role: 'user', data: i },
              ]),
            ),
          );
          expect(adds.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
          for (const r of adds)
            if (r.status === 'rejected') expect(isCairnError(r.reason, 'CONFLICT')).toBe(true);
          const names = await Promise.allSettled(
            [a, b].map((s) =>
              s.createBranch({ threadId: t.id, name: 'side', headMessageId: chain[0]!.id }),
            ),
          );
          expect(names.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
          expect((await a.listBranches(t.id)).filter((x) => x.isActive)).toHaveLength(1);
        },
        ['multiProcess', true],
      ),
      SLOW_TEST_TIMEOUT,
    );

    it(
      'tells a listener on one store about changes made through the other (cluster notifications)',
      pair(
        async (a, b) => {
          const t = await makeThread(a);
          const heard: StoreChange[] = [];
          const stop = b.subscribe(t.id, (c) => heard.push(c));
          try {
            // A listener may need a moment to be registered with the database: keep writing
            // until one change arrives.
            const chain = await makeChain(a, t.id, 1);
            const branch = await a.createBranch({
              threadId: t.id,
              name: 'main',
              headMessageId: chain[0]!.id,
            });
            let version = 0;
            while (
              !heard.some((c) => c.kind === 'state' && c.branchId === branch.id) &&
              version < 100
            ) {
              await a.appendStateCommit(
                { branchId: branch.id, messageId: null, update: { version } },
                version,
              );
              version++;
              await new Promise((resolve) => setTimeout(resolve, 50));
            }
            expect(heard.some((c) => c.kind === 'state' && c.branchId === branch.id)).toBe(true);
            expect(heard.every((c) => c.threadId === t.id)).toBe(true);
          } finally {
            stop();
          }
        },
        ['notifications', 'cluster'],
      ),
      SLOW_TEST_TIMEOUT,
    );
  });
}
