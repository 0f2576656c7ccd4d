import { newId } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { type StoreConformanceOptions, useStore } from '../context.js';
import {
  expectCode,
  expectTimestamp,
  LONG_NAME,
  LONGEST_NAME,
  makeChain,
  makeThread,
} from '../helpers.js';

export function describeCheckpoints(options: StoreConformanceOptions): void {
  describe('checkpoints', () => {
    const store = useStore(options);

    async function threadWithChain(n = 4) {
      const thread = await makeThread(store());
      const chain = await makeChain(store(), thread.id, n);
      return { thread, chain };
    }

    it('saves a checkpoint and reads it back by name', async () => {
      const { thread, chain } = await threadWithChain();
      const cp = await store().saveCheckpoint({
        threadId: thread.id,
        name: 'before-tools',
        messageId: chain[1]!.id,
      });
      expect(cp).toMatchObject({
        threadId: thread.id,
        name: 'before-tools',
        messageId: chain[1]!.id,
      });
      expect(typeof cp.id).toBe('string');
      expectTimestamp(cp.createdAt);
      expect(await store().getCheckpoint(thread.id, 'before-tools')).toEqual(cp);
    });

    it('moves a checkpoint when its name is saved again, keeping one of that name', async () => {
      const { thread, chain } = await threadWithChain();
      await store().saveCheckpoint({ threadId: thread.id, name: 'cp', messageId: chain[0]!.id });
      const moved = await store().saveCheckpoint({
        threadId: thread.id,
        name: 'cp',
        messageId: chain[3]!.id,
      });
      expect(moved.messageId).toBe(chain[3]!.id);
      expect((await store().getCheckpoint(thread.id, 'cp'))!.messageId).toBe(chain[3]!.id);
      const listed = await store().listCheckpoints(thread.id);
      expect(listed.map((c) => [c.name, c.messageId])).toEqual([['cp', chain[3]!.id]]);
    });

    it('lists checkpoints in creation order; moving one keeps its place', async () => {
      const { thread, chain } = await threadWithChain();
      for (const name of ['zulu', 'alpha', 'mike']) {
        await store().saveCheckpoint({ threadId: thread.id, name, messageId: chain[0]!.id });
      }
      await store().saveCheckpoint({ threadId: thread.id, name: 'zulu', messageId: chain[2]!.id });
      const listed = await store().listCheckpoints(thread.id);
      expect(listed.map((c) => c.name)).toEqual(['zulu', 'alpha', 'mike']);
      expect(listed[0]!.messageId).toBe(chain[2]!.id);
    });

    it('keeps checkpoints of the same name in different threads apart', async () => {
      const a = await threadWithChain();
      const b = await threadWithChain();
      await store().saveCheckpoint({
        threadId: a.thread.id,
        name: 'cp',
        messageId: a.chain[0]!.id,
      });
      await store().saveCheckpoint({
        threadId: b.thread.id,
        name: 'cp',
        messageId: b.chain[1]!.id,
      });
      await store().saveCheckpoint({
        threadId: b.thread.id,
        name: 'cp',
        messageId: b.chain[2]!.id,
      });
      expect((await store().getCheckpoint(a.thread.id, 'cp'))!.messageId).toBe(a.chain[0]!.id);
      expect((await store().getCheckpoint(b.thread.id, 'cp'))!.messageId).toBe(b.chain[2]!.id);
    });

    it('returns null and an empty list when there are none', async () => {
      const { thread } = await threadWithChain();
      expect(await store().getCheckpoint(thread.id, 'nope')).toBeNull();
      expect(await store().listCheckpoints(thread.id)).toEqual([]);
    });

    it('deletes a checkpoint by name and says whether it existed', async () => {
      const { thread, chain } = await threadWithChain();
      await store().saveCheckpoint({ threadId: thread.id, name: 'a', messageId: chain[0]!.id });
      const b = await store().saveCheckpoint({
        threadId: thread.id,
        name: 'b',
        messageId: chain[1]!.id,
      });
      expect(await store().deleteCheckpoint(thread.id, 'a')).toBe(true);
      expect(await store().getCheckpoint(thread.id, 'a')).toBeNull();
      expect(await store().deleteCheckpoint(thread.id, 'a')).toBe(false);
      expect(await store().deleteCheckpoint(thread.id, 'never')).toBe(false);
      expect(await store().listCheckpoints(thread.id)).toEqual([b]);
      const again = await store().saveCheckpoint({
        threadId: thread.id,
        name: 'a',
        messageId: chain[2]!.id,
      });
      expect((await store().listCheckpoints(thread.id)).map((c) => c.name)).toEqual(['b', 'a']);
      expect(again.messageId).toBe(chain[2]!.id);
    });

    it('does not delete the message a checkpoint pointed at', async () => {
      const { thread, chain } = await threadWithChain();
      await store().saveCheckpoint({ threadId: thread.id, name: 'a', messageId: chain[1]!.id });
      await store().deleteCheckpoint(thread.id, 'a');
      expect(await store().getMessage(chain[1]!.id)).toEqual(chain[1]);
    });

    it('accepts a name of exactly 200 characters', async () => {
      const { thread, chain } = await threadWithChain();
      await store().saveCheckpoint({
        threadId: thread.id,
        name: LONGEST_NAME,
        messageId: chain[0]!.id,
      });
      expect((await store().getCheckpoint(thread.id, LONGEST_NAME))!.name).toBe(LONGEST_NAME);
    });

    describe('bad input writes nothing', () => {
      it.each([
        ['an empty name', ''],
        ['a blank name', ' \t '],
        ['a name over 200 characters', LONG_NAME],
      ])('rejects %s (INVALID_ARGUMENT)', async (_l, name) => {
        const { thread, chain } = await threadWithChain();
        await expectCode(
          () => store().saveCheckpoint({ threadId: thread.id, name, messageId: chain[0]!.id }),
          'INVALID_ARGUMENT',
        );
        expect(await store().listCheckpoints(thread.id)).toEqual([]);
      });

      it('rejects an unknown message (NOT_FOUND)', async () => {
        const { thread } = await threadWithChain();
        await expectCode(
          () => store().saveCheckpoint({ threadId: thread.id, name: 'cp', messageId: newId() }),
          'NOT_FOUND',
        );
        expect(await store().listCheckpoints(thread.id)).toEqual([]);
      });

      it('rejects a message of another thread (INVALID_ARGUMENT)', async () => {
        const a = await threadWithChain();
        const b = await threadWithChain();
        await expectCode(
          () =>
            store().saveCheckpoint({
              threadId: a.thread.id,
              name: 'cp',
              messageId: b.chain[0]!.id,
            }),
          'INVALID_ARGUMENT',
        );
        expect(await store().listCheckpoints(a.thread.id)).toEqual([]);
      });

      it('rejects an unknown thread (NOT_FOUND)', async () => {
        const { chain } = await threadWithChain();
        const threadId = newId();
        await expectCode(
          () => store().saveCheckpoint({ threadId, name: 'cp', messageId: chain[0]!.id }),
          'NOT_FOUND',
        );
        expect(await store().listCheckpoints(threadId)).toEqual([]);
      });

      it('does not move an existing checkpoint when the new message is bad', async () => {
        const a = await threadWithChain();
        const b = await threadWithChain();
        const cp = await store().saveCheckpoint({
          threadId: a.thread.id,
          name: 'cp',
          messageId: a.chain[0]!.id,
        });
        await expectCode(
          () => store().saveCheckpoint({ threadId: a.thread.id, name: 'cp', messageId: newId() }),
          'NOT_FOUND',
        );
        await expectCode(
          () =>
            store().saveCheckpoint({
              threadId: a.thread.id,
              name: 'cp',
              messageId: b.chain[0]!.id,
            }),
          'INVALID_ARGUMENT',
        );
        expect(await store().listCheckpoints(a.thread.id)).toEqual([cp]);
      });
    });
  });
}
