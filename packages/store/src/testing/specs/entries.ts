import { type Entry, isCairnError, newId } from '@cairn/core';
import { describe, expect, it, type TestContext } from 'vitest';
import type { EntryChange, Store } from '../../store.js';
import { disposeStore, type StoreConformanceOptions, useStore } from '../context.js';
import { expectCode, expectTimestamp, LONG_NAME, NON_JSON, waitFor } from '../helpers.js';

export function describeEntries(options: StoreConformanceOptions): void {
  describe('entries', () => {
    const store = useStore(options);
    const collection = () => `c-${newId()}`;

    it('writes a new entry at version 1 and reads it back', async () => {
      const c = collection();
      const [e] = await store().putEntries([
        { collection: c, id: 'a', group: 'g', data: { n: 1, nested: { x: [1, 'two'] } } },
      ]);
      expect(e).toMatchObject({ collection: c, id: 'a', group: 'g', version: 1 });
      expect(e!.data).toEqual({ n: 1, nested: { x: [1, 'two'] } });
      expectTimestamp(e!.createdAt);
      expect(e!.updatedAt).toBe(e!.createdAt);
      expect(await store().getEntry(c, 'a')).toEqual(e);
      expect(await store().getEntry(c, 'b')).toBeNull();
      expect(await store().getEntry(collection(), 'a')).toBeNull();
    });

    it('defaults the group to null', async () => {
      const c = collection();
      const [e] = await store().putEntries([{ collection: c, id: 'a', data: {} }]);
      expect(e!.group).toBeNull();
      expect((await store().getEntry(c, 'a'))!.group).toBeNull();
    });

    it('rewrites an entry at the next version, keeping createdAt', async () => {
      const c = collection();
      const [first] = await store().putEntries([{ collection: c, id: 'a', data: { n: 1 } }]);
      const [second] = await store().putEntries([
        { collection: c, id: 'a', group: 'g', data: { n: 2 } },
      ]);
      expect(second).toMatchObject({ version: 2, group: 'g', data: { n: 2 } });
      expect(second!.createdAt).toBe(first!.createdAt);
      expect(second!.updatedAt).toBeGreaterThanOrEqual(first!.updatedAt);
      expect(await store().getEntry(c, 'a')).toEqual(second);
    });

    it('compares and sets: null only for a new entry, a number only over that version', async () => {
      const c = collection();
      const [e] = await store().putEntries([
        { collection: c, id: 'a', data: { n: 1 }, expectedVersion: null },
      ]);
      await expectCode(
        () =>
          store().putEntries([{ collection: c, id: 'a', data: { n: 9 }, expectedVersion: null }]),
        'CONFLICT',
      );
      await expectCode(
        () => store().putEntries([{ collection: c, id: 'a', data: { n: 9 }, expectedVersion: 2 }]),
        'CONFLICT',
      );
      await expectCode(
        () => store().putEntries([{ collection: c, id: 'b', data: { n: 9 }, expectedVersion: 1 }]),
        'CONFLICT',
      );
      expect(await store().getEntry(c, 'a')).toEqual(e);
      expect(await store().getEntry(c, 'b')).toBeNull();
      const [next] = await store().putEntries([
        { collection: c, id: 'a', data: { n: 2 }, expectedVersion: 1 },
      ]);
      expect(next).toMatchObject({ version: 2, data: { n: 2 } });
    });

    it('writes a batch atomically: one failed compare writes none of it', async () => {
      const c = collection();
      await store().putEntries([{ collection: c, id: 'a', data: { n: 1 } }]);
      await expectCode(
        () =>
          store().putEntries([
            { collection: c, id: 'b', data: {} },
            { collection: c, id: 'a', data: { n: 2 }, expectedVersion: 5 },
          ]),
        'CONFLICT',
      );
      expect(await store().getEntry(c, 'b')).toBeNull();
      expect((await store().getEntry(c, 'a'))!.data).toEqual({ n: 1 });
    });

    it('lets exactly one of concurrent creators of an id win', async () => {
      const c = collection();
      const results = await Promise.allSettled(
        [1, 2, 3, 4].map((n) =>
          store().putEntries([{ collection: c, id: 'a', data: { n }, expectedVersion: null }]),
        ),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results)
        if (r.status === 'rejected') expect(isCairnError(r.reason, 'CONFLICT')).toBe(true);
    });

    it('lists by id in binary order, by group, a page at a time', async () => {
      const c = collection();
      const ids = ['b', 'a', 'B', 'é', 'a2', 'z'];
      await store().putEntries(
        ids.map((id, i) => ({ collection: c, id, group: i % 2 ? 'odd' : 'even', data: { i } })),
      );
      await store().putEntries([{ collection: collection(), id: 'a', data: {} }]);
      const all = await store().listEntries(c);
      expect(all.map((e) => e.id)).toEqual(['B', 'a', 'a2', 'b', 'z', 'é']);
      const odd = await store().listEntries(c, { group: 'odd' });
      expect(odd.map((e) => e.id)).toEqual(['a', 'z', 'é']);
      const page1 = await store().listEntries(c, { limit: 2 });
      const page2 = await store().listEntries(c, { limit: 2, afterId: page1.at(-1)!.id });
      expect([...page1, ...page2].map((e) => e.id)).toEqual(['B', 'a', 'a2', 'b']);
      expect(await store().listEntries(c, { group: 'odd', afterId: 'a' })).toEqual(odd.slice(1));
      expect(await store().listEntries(c, { group: 'none' })).toEqual([]);
    });

    it('deletes by ids and by group, counting what there was', async () => {
      const c = collection();
      await store().putEntries([
        { collection: c, id: 'a', group: 'g', data: {} },
        { collection: c, id: 'b', group: 'g', data: {} },
        { collection: c, id: 'c', group: 'h', data: {} },
        { collection: c, id: 'd', data: {} },
      ]);
      expect(await store().deleteEntries(c, { ids: ['d', 'missing'] })).toBe(1);
      expect(await store().deleteEntries(c, { ids: [] })).toBe(0);
      expect(await store().deleteEntries(c, { group: 'g' })).toBe(2);
      expect((await store().listEntries(c)).map((e) => e.id)).toEqual(['c']);
      expect(await store().deleteEntries(c, { group: 'g' })).toBe(0);
    });

    it('refuses bad input with INVALID_ARGUMENT, writing nothing', async () => {
      const c = collection();
      const bad: unknown[] = [
        [{ collection: '', id: 'a', data: {} }],
        [{ collection: c, id: LONG_NAME, data: {} }],
        [{ collection: c, id: 'a', data: [] }],
        ...NON_JSON.map(([, make]) => [{ collection: c, id: 'a', data: make() }]),
        [{ collection: c, id: 'a', data: {}, expectedVersion: 0 }],
        [{ collection: c, id: 'a', data: {}, group: 7 }],
        [
          { collection: c, id: 'a', data: {} },
          { collection: c, id: 'a', data: {} },
        ],
        'not an array',
      ];
      for (const batch of bad)
        await expectCode(() => store().putEntries(batch as never), 'INVALID_ARGUMENT');
      expect(await store().listEntries(c)).toEqual([]);
      await expectCode(() => store().listEntries(c, { limit: 0 }), 'INVALID_ARGUMENT');
      await expectCode(() => store().getEntry(c, ''), 'INVALID_ARGUMENT');
      await expectCode(() => store().deleteEntries(c, {} as never), 'INVALID_ARGUMENT');
      await expectCode(
        () => store().deleteEntries(c, { ids: ['a'], group: 'g' } as never),
        'INVALID_ARGUMENT',
      );
    });

    it('rolls entries back with the transaction that wrote them', async () => {
      const c = collection();
      await expect(
        store().transaction(async (tx) => {
          await tx.putEntries([{ collection: c, id: 'a', data: {} }]);
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect(await store().getEntry(c, 'a')).toBeNull();
    });

    it('tells a collection listener about writes and deletes, with id, group and version', async () => {
      const c = collection();
      const heard: EntryChange[] = [];
      const stop = store().subscribeEntries(c, (change) => heard.push(change));
      const other: EntryChange[] = [];
      const stopOther = store().subscribeEntries(collection(), (change) => other.push(change));
      await store().putEntries([{ collection: c, id: 'a', group: 'g', data: {} }]);
      await store().putEntries([{ collection: c, id: 'a', group: 'g', data: { n: 1 } }]);
      await store().deleteEntries(c, { group: 'g' });
      await waitFor(() => heard.length >= 3, 'three entry changes');
      expect(heard).toEqual([
        { collection: c, id: 'a', group: 'g', version: 1 },
        { collection: c, id: 'a', group: 'g', version: 2 },
        { collection: c, id: 'a', group: 'g', version: null },
      ]);
      expect(other).toEqual([]);
      stop();
      stopOther();
    });

    if (options.reopen) {
      const reopen = options.reopen;
      /** Runs `fn` with two stores on one database, when the store has `multiProcess`. */
      const pair = (fn: (a: Store, b: Store) => Promise<void>) => async (ctx: TestContext) => {
        const a = await options.create();
        try {
          if (!a.capabilities.multiProcess) {
            ctx.skip("the store's multiProcess is not true");
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

      it(
        'lets one of two stores win a compare-and-set (multiProcess)',
        pair(async (a, b) => {
          const c = collection();
          const [e] = await a.putEntries([{ collection: c, id: 'a', data: { n: 0 } }]);
          const results = await Promise.allSettled(
            [a, b].map((s, n) =>
              s.putEntries([{ collection: c, id: 'a', data: { n }, expectedVersion: e!.version }]),
            ),
          );
          expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
          const won = results.find((r) => r.status === 'fulfilled') as PromiseFulfilledResult<
            Entry[]
          >;
          expect(await b.getEntry(c, 'a')).toEqual(won.value[0]);
        }),
      );

      it(
        'tells a listener on one store about entries written through the other (cluster notifications)',
        pair(async (a, b) => {
          if (a.capabilities.notifications !== 'cluster') return;
          const c = collection();
          const heard: EntryChange[] = [];
          const stop = b.subscribeEntries(c, (change) => heard.push(change));
          try {
            // A listener may need a moment to be registered with the database: keep writing.
            for (let n = 0; n < 100 && heard.length === 0; n++) {
              await a.putEntries([{ collection: c, id: `e${n}`, group: 'g', data: { n } }]);
              await new Promise((r) => setTimeout(r, 20));
            }
            expect(heard[0]).toMatchObject({ collection: c, group: 'g', version: 1 });
          } finally {
            stop();
          }
        }),
      );
    }
  });
}
