import { isCairnError, newId } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { type StoreConformanceOptions, useStore } from '../context.js';
import { expectCode, makeChain, makeThread, turnOf } from '../helpers.js';

export function describeTransactions(options: StoreConformanceOptions): void {
  describe('transactions', () => {
    const store = useStore(options);

    it('commits on success and returns the value of the function', async () => {
      const id = newId();
      const result = await store().transaction(async (tx) => {
        const t = await tx.createThread({ id, title: 'in tx' });
        await makeChain(tx, t.id, 3);
        return 'done';
      });
      expect(result).toBe('done');
      expect((await store().getThread(id))!.title).toBe('in tx');
    });

    it('rolls back everything it wrote when the function throws, rethrowing the error', async () => {
      const threadId = newId();
      const memoryId = newId();
      const leaseKey = `tx-${newId()}`;
      const turn = turnOf(threadId);
      let messageIds: string[] = [];
      let branchId = '';
      const boom = new Error('boom');
      await expect(
        store().transaction(async (tx) => {
          await tx.createThread({ id: threadId });
          const chain = await makeChain(tx, threadId, 4);
          messageIds = chain.map((m) => m.id);
          const b = await tx.createBranch({ threadId, name: 'main', headMessageId: chain[3]!.id });
          branchId = b.id;
          await tx.saveCheckpoint({ threadId, name: 'cp', messageId: chain[1]!.id });
          await tx.appendStateCommit(
            { branchId: b.id, messageId: chain[3]!.id, update: { a: 1 } },
            0,
          );
          await tx.putTurn(turn);
          await tx.addMemories([
            { id: memoryId, agentId: 'tx-agent', content: { text: 'rolled back' } },
          ]);
          await tx.acquireLease({ key: leaseKey, owner: 'o', ttlMs: 60_000 });
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(messageIds).toHaveLength(4);
      expect(await store().getThread(threadId)).toBeNull();
      for (const id of messageIds) expect(await store().getMessage(id)).toBeNull();
      expect(await store().getBranchById(branchId)).toBeNull();
      expect(await store().listBranches(threadId)).toEqual([]);
      expect(await store().getCheckpoint(threadId, 'cp')).toBeNull();
      await expectCode(() => store().getStateCommits(branchId), 'NOT_FOUND');
      expect(await store().getTurn(turn.id)).toBeNull();
      expect(await store().getMemory(memoryId)).toBeNull();
      expect(await store().getLease(leaseKey)).toBeNull();
    });

    it('rolls back changes to data that existed before', async () => {
      const s = store();
      const thread = await makeThread(s, { title: 'before' });
      const chain = await makeChain(s, thread.id, 4);
      const main = await s.createBranch({
        threadId: thread.id,
        name: 'main',
        headMessageId: chain[1]!.id,
      });
      const side = await s.createBranch({
        threadId: thread.id,
        name: 'side',
        headMessageId: chain[0]!.id,
      });
      const c1 = await s.appendStateCommit(
        { branchId: main.id, messageId: chain[1]!.id, update: { v: 1 } },
        0,
      );
      const [memory] = await s.addMemories([
        { agentId: `a-${newId()}`, content: { text: 'kept' } },
      ]);
      await expect(
        s.transaction(async (tx) => {
          await tx.updateThread(thread.id, { title: 'after' });
          await tx.moveHead(main.id, chain[1]!.id, chain[3]!.id);
          await tx.setActiveBranch(side.id);
          await tx.appendStateCommit(
            { branchId: main.id, messageId: chain[3]!.id, update: { v: 2 } },
            1,
          );
          await tx.deleteMemories([memory!.id]);
          await tx.updateThread(thread.id, { metadata: { x: 1 } });
          throw new Error('undo');
        }),
      ).rejects.toThrow('undo');
      expect(await s.getThread(thread.id)).toEqual(thread);
      expect(await s.getBranchById(main.id)).toEqual(main);
      expect(await s.getBranchById(side.id)).toEqual(side);
      expect(await s.getStateCommits(main.id)).toEqual([c1]);
      expect(await s.getMemory(memory!.id)).toEqual(memory);
    });

    it('rolls back a deleted thread with everything under it', async () => {
      const s = store();
      const thread = await makeThread(s);
      const chain = await makeChain(s, thread.id, 3);
      const branch = await s.createBranch({
        threadId: thread.id,
        name: 'main',
        headMessageId: chain[2]!.id,
      });
      await expect(
        s.transaction(async (tx) => {
          expect(await tx.deleteThread(thread.id)).toBe(true);
          throw new Error('undo delete');
        }),
      ).rejects.toThrow('undo delete');
      expect(await s.getThread(thread.id)).toEqual(thread);
      expect(await s.getChain(chain[2]!.id)).toEqual(chain);
      expect(await s.getBranchById(branch.id)).toEqual(branch);
    });

    it('rolls back earlier writes when a store call inside fails', async () => {
      const threadId = newId();
      await expectCode(
        () =>
          store().transaction(async (tx) => {
            await tx.createThread({ id: threadId });
            await tx.addMessages([{ threadId, parentId: newId(), role: 'user', data: 'orphan' }]);
          }),
        'NOT_FOUND',
      );
      expect(await store().getThread(threadId)).toBeNull();
    });

    it('sees its own writes inside', async () => {
      await store().transaction(async (tx) => {
        const t = await makeThread(tx);
        const chain = await makeChain(tx, t.id, 5);
        expect(await tx.getThread(t.id)).toEqual(t);
        expect(await tx.getChain(chain[4]!.id)).toEqual(chain);
        const b = await tx.createBranch({
          threadId: t.id,
          name: 'main',
          headMessageId: chain[4]!.id,
        });
        expect((await tx.getActiveBranch(t.id))!.id).toBe(b.id);
      });
    });

    it('joins a nested transaction to the outer one: the outer throw undoes both', async () => {
      const outerId = newId();
      const innerId = newId();
      await expect(
        store().transaction(async (tx) => {
          await tx.createThread({ id: outerId });
          const inner = await tx.transaction(async (tx2) => {
            await tx2.createThread({ id: innerId });
            return 'inner';
          });
          expect(inner).toBe('inner');
          expect(await tx.getThread(innerId)).not.toBeNull();
          throw new Error('outer fails');
        }),
      ).rejects.toThrow('outer fails');
      expect(await store().getThread(outerId)).toBeNull();
      expect(await store().getThread(innerId)).toBeNull();
    });

    it('commits a nested transaction with the outer one', async () => {
      const outerId = newId();
      const innerId = newId();
      await store().transaction(async (tx) => {
        await tx.createThread({ id: outerId });
        await tx.transaction(async (tx2) => {
          await tx2.createThread({ id: innerId });
        });
      });
      expect(await store().getThread(outerId)).not.toBeNull();
      expect(await store().getThread(innerId)).not.toBeNull();
    });

    it('rolls back the whole transaction when a nested one throws through it', async () => {
      const outerId = newId();
      const innerId = newId();
      await expect(
        store().transaction(async (tx) => {
          await tx.createThread({ id: outerId });
          await tx.transaction(async (tx2) => {
            await tx2.createThread({ id: innerId });
            throw new Error('inner fails');
          });
        }),
      ).rejects.toThrow('inner fails');
      expect(await store().getThread(outerId)).toBeNull();
      expect(await store().getThread(innerId)).toBeNull();
    });

    it('never shows a write that is rolled back to a reader outside', async () => {
      const id = newId();
      let release!: () => void;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let started!: () => void;
      const written = new Promise<void>((resolve) => {
        started = resolve;
      });
      const tx = store().transaction(async (t) => {
        await t.createThread({ id });
        started();
        await gate;
        throw new Error('roll back');
      });
      await written;
      const outside = store().getThread(id);
      release();
      await expect(tx).rejects.toThrow('roll back');
      expect(await outside).toBeNull();
      expect(await store().getThread(id)).toBeNull();
    });

    it('goes on after a failed call that the function caught, committing the rest', async () => {
      const s = store();
      const thread = await makeThread(s);
      const [root] = await makeChain(s, thread.id, 1);
      const fresh = newId();
      const result = await s.transaction(async (tx) => {
        await tx.updateThread(thread.id, { title: 'inside' });
        const conflict = await tx
          .addMessages([
            { id: root!.id, threadId: thread.id, parentId: null, role: 'user', data: 'dup' },
          ])
          .then(
            () => 'stored',
            (e) => (isCairnError(e) ? e.code : 'other'),
          );
        const missing = await tx
          .addMessages([{ threadId: thread.id, parentId: newId(), role: 'user', data: 'orphan' }])
          .then(
            () => 'stored',
            (e) => (isCairnError(e) ? e.code : 'other'),
          );
        await tx.addMessages([
          { id: fresh, threadId: thread.id, parentId: root!.id, role: 'user', data: 'after' },
        ]);
        return [conflict, missing];
      });
      expect(result).toEqual(['CONFLICT', 'NOT_FOUND']);
      expect((await s.getThread(thread.id))!.title).toBe('inside');
      expect(await s.getMessage(root!.id)).toEqual(root);
      expect((await s.getChain(fresh)).map((m) => m.id)).toEqual([root!.id, fresh]);
    });

    it('makes a write from outside that races a transaction on the same id fail with CONFLICT', async () => {
      const id = newId();
      let release!: () => void;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let started!: () => void;
      const written = new Promise<void>((resolve) => {
        started = resolve;
      });
      const tx = store().transaction(async (t) => {
        await t.createThread({ id, title: 'tx' });
        started();
        await gate;
      });
      await written;
      const outside = store()
        .createThread({ id, title: 'outside' })
        .then(
          () => 'stored',
          (e) => (isCairnError(e) ? e.code : String(e)),
        );
      await new Promise((resolve) => setTimeout(resolve, 20));
      release();
      await tx;
      expect(await outside).toBe('CONFLICT');
      expect((await store().getThread(id))!.title).toBe('tx');
    });

    it('runs transactions side by side and lets reads through (concurrentTransactions)', async (ctx) => {
      if (!store().capabilities.concurrentTransactions)
        ctx.skip("the store's concurrentTransactions is not true");
      const [first, second] = [newId(), newId()];
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let started!: () => void;
      const written = new Promise<void>((resolve) => {
        started = resolve;
      });
      const open = store().transaction(async (tx) => {
        await tx.createThread({ id: first });
        started();
        await held;
      });
      await written;
      // While it is open: a read sees only what committed, and a whole second
      // transaction commits (one at a time, both would wait for the first forever).
      expect(await store().getThread(first)).toBeNull();
      await store().transaction(async (tx) => {
        await tx.createThread({ id: second });
      });
      expect(await store().getThread(second)).not.toBeNull();
      release();
      await open;
      expect(await store().getThread(first)).not.toBeNull();
    });

    it('leaves the store usable after a failed transaction', async () => {
      await expect(
        store().transaction(async () => {
          throw new Error('nothing written');
        }),
      ).rejects.toThrow('nothing written');
      const t = await makeThread(store());
      expect(await store().getThread(t.id)).toEqual(t);
    });

    it('runs concurrent transactions on different threads to completion', async () => {
      const ids = Array.from({ length: 5 }, () => newId());
      await Promise.all(
        ids.map((id) =>
          store().transaction(async (tx) => {
            await tx.createThread({ id });
            await makeChain(tx, id, 3);
          }),
        ),
      );
      for (const id of ids) expect(await store().getThread(id)).not.toBeNull();
    });
  });
}
