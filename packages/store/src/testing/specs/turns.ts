import { newId, type Turn } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { type StoreConformanceOptions, useStore } from '../context.js';
import { expectCode, makeChain, makeThread, NON_JSON, turnOf } from '../helpers.js';

export function describeTurns(options: StoreConformanceOptions): void {
  describe('turns', () => {
    const store = useStore(options);

    it('stores a turn and reads it back exactly', async () => {
      const thread = await makeThread(store());
      const [m] = await makeChain(store(), thread.id, 1);
      const turn = turnOf(thread.id, {
        messageId: m!.id,
        source: 'discord',
        userId: 'user-7',
        status: 'running',
        state: { uploadedFiles: [{ name: 'a.pdf', size: 12 }], flag: true },
        steps: [{ name: 'retrieve', start: 1_700_000_000_000, end: null, error: null }],
        startedAt: 1_700_000_000_000,
      });
      expect(await store().putTurn(turn)).toEqual(turn);
      expect(await store().getTurn(turn.id)).toEqual(turn);
    });

    it('replaces a turn when put again with the same id', async () => {
      const thread = await makeThread(store());
      const turn = turnOf(thread.id, { status: 'running' });
      await store().putTurn(turn);
      const done: Turn = {
        ...turn,
        status: 'failed',
        steps: [
          { name: 'model', start: turn.startedAt, end: turn.startedAt + 5, error: 'rate limited' },
        ],
        state: { retried: 1 },
        finishedAt: turn.startedAt + 6,
      };
      expect(await store().putTurn(done)).toEqual(done);
      expect(await store().getTurn(turn.id)).toEqual(done);
      expect(await store().listTurns(thread.id)).toEqual([done]);
    });

    it('returns null for an unknown turn', async () => {
      expect(await store().getTurn(newId())).toBeNull();
    });

    it('lists the turns of a thread newest first, with a limit', async () => {
      const thread = await makeThread(store());
      const other = await makeThread(store());
      const base = 1_700_000_000_000;
      const order = [3, 0, 4, 1, 2];
      const turns = order.map((k) => turnOf(thread.id, { startedAt: base + k * 1000 }));
      for (const t of turns) await store().putTurn(t);
      await store().putTurn(turnOf(other.id, { startedAt: base + 10_000 }));
      const listed = await store().listTurns(thread.id);
      expect(listed.map((t) => t.startedAt)).toEqual([4, 3, 2, 1, 0].map((k) => base + k * 1000));
      const limited = await store().listTurns(thread.id, { limit: 2 });
      expect(limited.map((t) => t.startedAt)).toEqual([base + 4000, base + 3000]);
      expect(await store().listTurns(newId())).toEqual([]);
    });

    it('deletes a turn and says whether it existed', async () => {
      const thread = await makeThread(store());
      const turn = await store().putTurn(turnOf(thread.id));
      expect(await store().deleteTurn(turn.id)).toBe(true);
      expect(await store().getTurn(turn.id)).toBeNull();
      expect(await store().deleteTurn(turn.id)).toBe(false);
      expect(await store().deleteTurn(newId())).toBe(false);
    });

    describe('purgeTurns', () => {
      it('deletes finished and failed turns started before the cut-off, never running ones', async () => {
        const thread = await makeThread(store());
        const cut = 1_600_000_000_000;
        const oldFinished = turnOf(thread.id, { status: 'finished', startedAt: cut - 10 });
        const oldFailed = turnOf(thread.id, { status: 'failed', startedAt: cut - 5 });
        const oldRunning = turnOf(thread.id, { status: 'running', startedAt: cut - 100 });
        const atCut = turnOf(thread.id, { status: 'finished', startedAt: cut });
        const recent = turnOf(thread.id, { status: 'finished', startedAt: cut + 10 });
        for (const t of [oldFinished, oldFailed, oldRunning, atCut, recent])
          await store().putTurn(t);
        expect(await store().purgeTurns({ before: cut, threadId: thread.id })).toBe(2);
        expect(await store().getTurn(oldFinished.id)).toBeNull();
        expect(await store().getTurn(oldFailed.id)).toBeNull();
        expect(await store().getTurn(oldRunning.id)).toEqual(oldRunning);
        expect(await store().getTurn(atCut.id)).toEqual(atCut);
        expect(await store().getTurn(recent.id)).toEqual(recent);
        expect(await store().purgeTurns({ before: cut, threadId: thread.id })).toBe(0);
      });

      it('limits the purge to one thread when asked', async () => {
        const a = await makeThread(store());
        const b = await makeThread(store());
        const ta = await store().putTurn(turnOf(a.id, { startedAt: 1000 }));
        const tb = await store().putTurn(turnOf(b.id, { startedAt: 1000 }));
        expect(await store().purgeTurns({ before: 2000, threadId: a.id })).toBe(1);
        expect(await store().getTurn(ta.id)).toBeNull();
        expect(await store().getTurn(tb.id)).toEqual(tb);
      });

      it('purges every thread when no thread is given', async () => {
        const a = await makeThread(store());
        const b = await makeThread(store());
        const ta = await store().putTurn(turnOf(a.id, { startedAt: 500 }));
        const tb = await store().putTurn(turnOf(b.id, { startedAt: 600 }));
        const running = await store().putTurn(turnOf(b.id, { startedAt: 600, status: 'running' }));
        expect(await store().purgeTurns({ before: 700 })).toBeGreaterThanOrEqual(2);
        expect(await store().getTurn(ta.id)).toBeNull();
        expect(await store().getTurn(tb.id)).toBeNull();
        expect(await store().getTurn(running.id)).toEqual(running);
      });

      it('rejects a cut-off that is not a number (INVALID_ARGUMENT)', async () => {
        const thread = await makeThread(store());
        const t = await store().putTurn(turnOf(thread.id, { startedAt: 1 }));
        await expectCode(() => store().purgeTurns({ before: Number.NaN }), 'INVALID_ARGUMENT');
        await expectCode(
          () => store().purgeTurns({ before: 'now' as unknown as number }),
          'INVALID_ARGUMENT',
        );
        expect(await store().getTurn(t.id)).toEqual(t);
      });
    });

    describe('bad input writes nothing', () => {
      it('rejects a turn of an unknown thread (NOT_FOUND)', async () => {
        const turn = turnOf(newId());
        await expectCode(() => store().putTurn(turn), 'NOT_FOUND');
        expect(await store().getTurn(turn.id)).toBeNull();
      });

      it.each([
        ['an unknown status', { status: 'paused' as Turn['status'] }],
        ['an empty id', { id: '' }],
        ['state that is not an object', { state: [] as unknown as Turn['state'] }],
        ['steps that are not an array', { steps: {} as unknown as Turn['steps'] }],
        ['a NaN startedAt', { startedAt: Number.NaN }],
      ])('rejects %s (INVALID_ARGUMENT)', async (_l, patch) => {
        const thread = await makeThread(store());
        const turn = turnOf(thread.id, patch);
        await expectCode(() => store().putTurn(turn), 'INVALID_ARGUMENT');
        expect(await store().listTurns(thread.id)).toEqual([]);
      });

      it.each(NON_JSON)('rejects state with %s (INVALID_ARGUMENT)', async (_l, make) => {
        const thread = await makeThread(store());
        const turn = turnOf(thread.id, { state: make() as Turn['state'] });
        await expectCode(() => store().putTurn(turn), 'INVALID_ARGUMENT');
        expect(await store().getTurn(turn.id)).toBeNull();
      });

      it('rejects a messageId that is not a message of the turn thread, storing nothing', async () => {
        const thread = await makeThread(store());
        const other = await makeThread(store());
        const [theirs] = await makeChain(store(), other.id, 1);
        const [mine] = await makeChain(store(), thread.id, 1);
        const foreign = turnOf(thread.id, { messageId: theirs!.id });
        await expectCode(() => store().putTurn(foreign), 'INVALID_ARGUMENT');
        const missing = turnOf(thread.id, { messageId: newId() });
        await expectCode(() => store().putTurn(missing), 'NOT_FOUND');
        expect(await store().listTurns(thread.id)).toEqual([]);
        const ok = await store().putTurn(turnOf(thread.id, { messageId: mine!.id }));
        await expectCode(
          () => store().putTurn({ ...ok, messageId: theirs!.id }),
          'INVALID_ARGUMENT',
        );
        expect(await store().getTurn(ok.id)).toEqual(ok);
      });

      it('does not change a stored turn when the replacement is bad', async () => {
        const thread = await makeThread(store());
        const turn = await store().putTurn(turnOf(thread.id, { state: { a: 1 } }));
        await expectCode(
          () => store().putTurn({ ...turn, state: { a: Number.NaN } }),
          'INVALID_ARGUMENT',
        );
        expect(await store().getTurn(turn.id)).toEqual(turn);
      });

      it.each([
        ['zero', 0],
        ['negative', -2],
        ['fractional', 1.5],
      ])('rejects a %s list limit (INVALID_ARGUMENT)', async (_l, limit) => {
        const thread = await makeThread(store());
        await expectCode(() => store().listTurns(thread.id, { limit }), 'INVALID_ARGUMENT');
      });
    });
  });
}
