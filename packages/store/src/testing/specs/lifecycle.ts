import { newId } from '@cairn/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store, StoreCapabilities } from '../../store.js';
import {
  disposeStore,
  HOOK_TIMEOUT,
  type StoreConformanceOptions,
  withFreshStore,
} from '../context.js';
import { expectCode, makeChain, makeThread, turnOf } from '../helpers.js';

const CLOSED_CALLS: Array<[string, (s: Store) => Promise<unknown>]> = [
  ['createThread', (s) => s.createThread({})],
  ['getThread', (s) => s.getThread(newId())],
  ['updateThread', (s) => s.updateThread(newId(), { title: 'x' })],
  ['listThreads', (s) => s.listThreads()],
  ['deleteThread', (s) => s.deleteThread(newId())],
  [
    'addMessages',
    (s) => s.addMessages([{ threadId: newId(), parentId: null, role: 'user', data: 1 }]),
  ],
  ['getMessage', (s) => s.getMessage(newId())],
  ['getChain', (s) => s.getChain(newId())],
  ['createBranch', (s) => s.createBranch({ threadId: newId(), name: 'main', headMessageId: null })],
  ['getBranch', (s) => s.getBranch(newId(), 'main')],
  ['getBranchById', (s) => s.getBranchById(newId())],
  ['listBranches', (s) => s.listBranches(newId())],
  ['getActiveBranch', (s) => s.getActiveBranch(newId())],
  ['setActiveBranch', (s) => s.setActiveBranch(newId())],
  ['moveHead', (s) => s.moveHead(newId(), null, newId())],
  [
    'saveCheckpoint',
    (s) => s.saveCheckpoint({ threadId: newId(), name: 'cp', messageId: newId() }),
  ],
  ['getCheckpoint', (s) => s.getCheckpoint(newId(), 'cp')],
  ['listCheckpoints', (s) => s.listCheckpoints(newId())],
  ['deleteCheckpoint', (s) => s.deleteCheckpoint(newId(), 'cp')],
  [
    'appendStateCommit',
    (s) => s.appendStateCommit({ branchId: newId(), messageId: null, update: {} }, 0),
  ],
  ['getStateCommits', (s) => s.getStateCommits(newId())],
  ['getLatestStateCommit', (s) => s.getLatestStateCommit(newId())],
  ['putTurn', (s) => s.putTurn(turnOf(newId()))],
  ['getTurn', (s) => s.getTurn(newId())],
  ['listTurns', (s) => s.listTurns(newId())],
  ['deleteTurn', (s) => s.deleteTurn(newId())],
  ['purgeTurns', (s) => s.purgeTurns({ before: Date.now() })],
  ['acquireLease', (s) => s.acquireLease({ key: 'k', owner: 'o', ttlMs: 1000 })],
  ['renewLease', (s) => s.renewLease('k', 'o', 1000)],
  ['releaseLease', (s) => s.releaseLease('k', 'o')],
  ['getLease', (s) => s.getLease('k')],
  ['addMemories', (s) => s.addMemories([{ agentId: 'a', content: { text: 'x' } }])],
  ['getMemory', (s) => s.getMemory(newId())],
  ['updateMemory', (s) => s.updateMemory(newId(), { metadata: {} })],
  ['closeMemory', (s) => s.closeMemory(newId())],
  ['deleteMemories', (s) => s.deleteMemories([newId()])],
  ['listMemories', (s) => s.listMemories()],
  ['countMemories', (s) => s.countMemories()],
  ['searchMemories', (s) => s.searchMemories({ text: 'x' })],
  ['ensureEmbeddingSpace', (s) => s.ensureEmbeddingSpace({ embedderId: 'e', dimensions: 3 })],
  ['getEmbeddingSpace', (s) => s.getEmbeddingSpace()],
  ['getCachedEmbeddings', (s) => s.getCachedEmbeddings('e', ['h'])],
  [
    'putCachedEmbeddings',
    (s) => s.putCachedEmbeddings('e', [{ contentHash: 'h', embedding: [1] }]),
  ],
  ['forget', (s) => s.forget({ resourceId: 'r' })],
  ['transaction', (s) => s.transaction(async () => 1)],
  ['migrate', (s) => s.migrate()],
];

export function describeLifecycle(options: StoreConformanceOptions): void {
  describe('capabilities and lifecycle', () => {
    it('reports its capabilities with valid values', async () => {
      await withFreshStore(options, async (s) => {
        const c = s.capabilities;
        expect(['exact', 'approximate']).toContain(c.vectorSearch);
        expect(['process', 'cluster']).toContain(c.notifications);
        expect(typeof c.multiProcess).toBe('boolean');
        expect(typeof c.concurrentTransactions).toBe('boolean');
        expect(typeof c.durable).toBe('boolean');
      });
    });

    if (options.capabilities) {
      const declared = options.capabilities;
      it.each(Object.keys(declared) as Array<keyof StoreCapabilities>)(
        'reports the declared capability %s',
        async (key) => {
          await withFreshStore(options, async (s) => {
            expect(s.capabilities[key]).toBe(declared[key]);
          });
        },
      );
    }

    it('migrates again harmlessly, keeping the data', async () => {
      await withFreshStore(options, async (s) => {
        const t = await makeThread(s);
        const chain = await makeChain(s, t.id, 3);
        await s.migrate();
        await s.migrate();
        expect(await s.getThread(t.id)).toEqual(t);
        expect(await s.getChain(chain[2]!.id)).toEqual(chain);
      });
    });

    describe('after close()', () => {
      // One closed store for every method: opening a store per call is slow on a server.
      let closed: Store | undefined;
      beforeAll(async () => {
        closed = await options.create();
        await closed.close();
      }, HOOK_TIMEOUT);
      afterAll(async () => {
        if (closed) await disposeStore(options, closed);
      }, HOOK_TIMEOUT);

      it.each(CLOSED_CALLS)('rejects %s with CLOSED', async (_name, call) => {
        await expectCode(() => call(closed!), 'CLOSED');
      });
    });

    it('closes through Symbol.asyncDispose (await using)', async () => {
      await withFreshStore(options, async (s) => {
        await s[Symbol.asyncDispose]();
        await expectCode(() => s.getThread(newId()), 'CLOSED');
        await s.close();
      });
    });

    it('closes twice harmlessly', async () => {
      await withFreshStore(options, async (s) => {
        await s.close();
        await s.close();
        await expectCode(() => s.getThread(newId()), 'CLOSED');
      });
    });

    it('rejects calls through a transaction handle once the store is closed', async () => {
      await withFreshStore(options, async (s) => {
        let handle: Store | undefined;
        await s.transaction(async (tx) => {
          handle = tx;
        });
        await s.close();
        await expectCode(() => handle!.getThread(newId()), 'CLOSED');
      });
    });
  });
}
