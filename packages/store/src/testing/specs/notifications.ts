import { newId } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import type { Store, StoreChange } from '../../store.js';
import { type StoreConformanceOptions, useStore } from '../context.js';
import { makeChain, makeThread, waitFor } from '../helpers.js';

export function describeNotifications(options: StoreConformanceOptions): void {
  describe('notifications', () => {
    const store = useStore(options);

    /** Subscribes to a thread and collects what it hears. */
    function listen(s: Store, threadId: string) {
      const heard: StoreChange[] = [];
      const stop = s.subscribe(threadId, (c) => heard.push(c));
      return {
        heard,
        stop,
        until: (pred: (c: StoreChange) => boolean, what: string) =>
          waitFor(() => heard.some(pred), what),
      };
    }

    async function setup() {
      const s = store();
      const thread = await makeThread(s);
      const chain = await makeChain(s, thread.id, 3);
      const branch = await s.createBranch({
        threadId: thread.id,
        name: 'main',
        headMessageId: chain[2]!.id,
      });
      return { s, thread, chain, branch };
    }

    it('hears new messages on its thread', async () => {
      const { s, thread, chain } = await setup();
      const l = listen(s, thread.id);
      await makeChain(s, thread.id, 1, chain[2]!.id);
      await l.until((c) => c.kind === 'messages', 'a messages change');
      expect(l.heard.every((c) => c.threadId === thread.id)).toBe(true);
      l.stop();
    });

    it('hears a new branch, a moved head and a switch, with the branch id and its head', async () => {
      const { s, thread, chain, branch } = await setup();
      const l = listen(s, thread.id);
      const side = await s.createBranch({
        threadId: thread.id,
        name: 'side',
        headMessageId: chain[0]!.id,
      });
      const at = (b: string, head: string | null) => (c: StoreChange) =>
        c.kind === 'branch' && c.branchId === b && c.headMessageId === head;
      await l.until(at(side.id, chain[0]!.id), 'createBranch');
      const [tip] = await makeChain(s, thread.id, 1, chain[2]!.id);
      l.heard.length = 0;
      await s.moveHead(branch.id, chain[2]!.id, tip!.id);
      await l.until(at(branch.id, tip!.id), 'moveHead');
      l.heard.length = 0;
      await s.setActiveBranch(side.id);
      await l.until(at(side.id, chain[0]!.id), 'setActiveBranch');
      l.stop();
    });

    it('hears checkpoints saved and deleted', async () => {
      const { s, thread, chain } = await setup();
      const l = listen(s, thread.id);
      await s.saveCheckpoint({ threadId: thread.id, name: 'cp', messageId: chain[1]!.id });
      await l.until((c) => c.kind === 'checkpoint', 'saveCheckpoint');
      l.heard.length = 0;
      await s.deleteCheckpoint(thread.id, 'cp');
      await l.until((c) => c.kind === 'checkpoint', 'deleteCheckpoint');
      l.stop();
    });

    it('hears state commits with the branch id and the version', async () => {
      const { s, thread, branch } = await setup();
      const l = listen(s, thread.id);
      await s.appendStateCommit({ branchId: branch.id, messageId: null, update: { a: 1 } }, 0);
      await s.appendStateCommit({ branchId: branch.id, messageId: null, update: { a: 2 } }, 1);
      await l.until(
        (c) => c.kind === 'state' && c.branchId === branch.id && c.version === 2,
        'appendStateCommit',
      );
      l.stop();
    });

    it('hears the thread updated and deleted', async () => {
      const { s, thread } = await setup();
      const l = listen(s, thread.id);
      await s.updateThread(thread.id, { title: 'new' });
      await l.until((c) => c.kind === 'thread', 'updateThread');
      l.heard.length = 0;
      await s.deleteThread(thread.id);
      await l.until((c) => c.kind === 'thread', 'deleteThread');
      l.stop();
    });

    it('hears changes made in a committed transaction', async () => {
      const { s, thread, chain } = await setup();
      const l = listen(s, thread.id);
      await s.transaction(async (tx) => {
        await makeChain(tx, thread.id, 2, chain[2]!.id);
      });
      await l.until((c) => c.kind === 'messages', 'a messages change after commit');
      l.stop();
    });

    it('hears nothing of a transaction that rolled back', async () => {
      const { s, thread, chain } = await setup();
      const l = listen(s, thread.id);
      await expect(
        s.transaction(async (tx) => {
          await makeChain(tx, thread.id, 2, chain[2]!.id);
          throw new Error('roll back');
        }),
      ).rejects.toThrow('roll back');
      await s.saveCheckpoint({ threadId: thread.id, name: 'sentinel', messageId: chain[0]!.id });
      await l.until((c) => c.kind === 'checkpoint', 'the change after the rollback');
      expect(l.heard.filter((c) => c.kind === 'messages')).toEqual([]);
      l.stop();
    });

    it('hears a thread being created when it subscribed first', async () => {
      const s = store();
      const id = newId();
      const l = listen(s, id);
      await s.createThread({ id });
      await l.until((c) => c.kind === 'thread' && c.threadId === id, 'createThread');
      l.stop();
    });

    it('tells each thread of a batch that spans two', async () => {
      const a = await setup();
      const b = await setup();
      const la = listen(a.s, a.thread.id);
      const lb = listen(b.s, b.thread.id);
      await a.s.addMessages([
        { threadId: a.thread.id, parentId: a.chain[2]!.id, role: 'user', data: 'a' },
        { threadId: b.thread.id, parentId: b.chain[2]!.id, role: 'user', data: 'b' },
      ]);
      await la.until((c) => c.kind === 'messages', 'the first thread');
      await lb.until((c) => c.kind === 'messages', 'the second thread');
      la.stop();
      lb.stop();
    });

    it('hears only its own thread', async () => {
      const a = await setup();
      const b = await setup();
      const la = listen(a.s, a.thread.id);
      // Changes to b first, then one to a: once a's arrives, b's would have too.
      await makeChain(b.s, b.thread.id, 2, b.chain[2]!.id);
      await b.s.appendStateCommit({ branchId: b.branch.id, messageId: null, update: {} }, 0);
      await b.s.saveCheckpoint({ threadId: b.thread.id, name: 'x', messageId: b.chain[0]!.id });
      await makeChain(a.s, a.thread.id, 1, a.chain[2]!.id);
      await la.until((c) => c.kind === 'messages', "its own thread's change");
      expect(la.heard.every((c) => c.threadId === a.thread.id)).toBe(true);
      la.stop();
    });

    it('stops hearing after unsubscribing, while other listeners go on', async () => {
      const { s, thread, chain } = await setup();
      const first = listen(s, thread.id);
      const second = listen(s, thread.id);
      await makeChain(s, thread.id, 1, chain[2]!.id);
      await first.until((c) => c.kind === 'messages', 'first listener');
      await second.until((c) => c.kind === 'messages', 'second listener');
      first.stop();
      first.heard.length = 0;
      second.heard.length = 0;
      await s.saveCheckpoint({ threadId: thread.id, name: 'after', messageId: chain[0]!.id });
      await second.until((c) => c.kind === 'checkpoint', 'the listener still subscribed');
      expect(first.heard).toEqual([]);
      second.stop();
    });

    it('lets unsubscribe be called twice', async () => {
      const { s, thread } = await setup();
      const l = listen(s, thread.id);
      l.stop();
      expect(() => l.stop()).not.toThrow();
    });
  });
}
