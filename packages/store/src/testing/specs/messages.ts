import { isCairnError, type JsonValue, type Message, newId } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import type { NewMessage, Store } from '../../store.js';
import { type StoreConformanceOptions, useStore } from '../context.js';
import {
  expectCode,
  expectTimestamp,
  JSON_SAMPLES,
  LONG_NAME,
  makeChain,
  makeThread,
  NON_JSON,
} from '../helpers.js';

export function describeMessages(options: StoreConformanceOptions): void {
  describe('messages and chains', () => {
    const store = useStore(options);

    /** The thread's whole state as far as messages go, to prove a failed call wrote nothing. */
    async function snapshotChain(s: Store, headId: string): Promise<Message[]> {
      return s.getChain(headId);
    }

    describe('addMessages', () => {
      it('stores a root with depth 0, a generated id and defaults', async () => {
        const t = await makeThread(store());
        const [m] = await store().addMessages([
          { threadId: t.id, parentId: null, role: 'user', data: 'hi' },
        ]);
        expect(m).toMatchObject({
          threadId: t.id,
          parentId: null,
          role: 'user',
          type: null,
          data: 'hi',
          depth: 0,
        });
        expect(typeof m!.id).toBe('string');
        expect(m!.id.length).toBeGreaterThan(0);
        expectTimestamp(m!.createdAt);
        expect(await store().getMessage(m!.id)).toEqual(m);
      });

      it('keeps a given id, type and createdAt', async () => {
        const t = await makeThread(store());
        const id = newId();
        const [m] = await store().addMessages([
          {
            id,
            threadId: t.id,
            parentId: null,
            role: 'tool',
            type: 'tool-result',
            data: { ok: true },
            createdAt: 1_700_000_000_123,
          },
        ]);
        expect(m).toEqual({
          id,
          threadId: t.id,
          parentId: null,
          role: 'tool',
          type: 'tool-result',
          data: { ok: true },
          createdAt: 1_700_000_000_123,
          depth: 0,
        });
        expect(await store().getMessage(id)).toEqual(m);
      });

      it('returns a batch in input order with depths counted from the parent', async () => {
        const t = await makeThread(store());
        const chain = await makeChain(store(), t.id, 6);
        expect(chain.map((m) => m.depth)).toEqual([0, 1, 2, 3, 4, 5]);
        for (let i = 1; i < chain.length; i++) expect(chain[i]!.parentId).toBe(chain[i - 1]!.id);
        const more = await makeChain(store(), t.id, 3, chain[5]!.id);
        expect(more.map((m) => m.depth)).toEqual([6, 7, 8]);
        expect(more[0]!.parentId).toBe(chain[5]!.id);
      });

      it('generates distinct ids within a batch', async () => {
        const t = await makeThread(store());
        const batch: NewMessage[] = Array.from({ length: 20 }, () => ({
          threadId: t.id,
          parentId: null,
          role: 'user',
          data: 1,
        }));
        const stored = await store().addMessages(batch);
        expect(new Set(stored.map((m) => m.id)).size).toBe(20);
      });

      it('accepts a batch spanning two threads', async () => {
        const a = await makeThread(store());
        const b = await makeThread(store());
        const ra = newId();
        const rb = newId();
        const stored = await store().addMessages([
          { id: ra, threadId: a.id, parentId: null, role: 'user', data: 'a' },
          { id: rb, threadId: b.id, parentId: null, role: 'user', data: 'b' },
          { threadId: a.id, parentId: ra, role: 'assistant', data: 'a2' },
        ]);
        expect(stored.map((m) => [m.threadId, m.depth])).toEqual([
          [a.id, 0],
          [b.id, 0],
          [a.id, 1],
        ]);
      });

      it('stores an empty batch as nothing', async () => {
        expect(await store().addMessages([])).toEqual([]);
      });

      it('accepts ids that are not UUIDs, for messages and branches', async () => {
        const t = await makeThread(store());
        const root = `msg:root/ü-${newId()}`;
        const child = `msg #2 ${newId()}`;
        const stored = await store().addMessages([
          { id: root, threadId: t.id, parentId: null, role: 'user', data: 1 },
          { id: child, threadId: t.id, parentId: root, role: 'assistant', data: 2 },
        ]);
        expect(stored.map((m) => m.id)).toEqual([root, child]);
        expect((await store().getChain(child)).map((m) => m.id)).toEqual([root, child]);
        const b = await store().createBranch({
          id: `branch:${newId()}`,
          threadId: t.id,
          name: 'main',
          headMessageId: child,
        });
        expect((await store().getBranchById(b.id))!.headMessageId).toBe(child);
      });

      it('lets exactly one of two racing batches with the same id win', async () => {
        const t = await makeThread(store());
        const id = newId();
        const results = await Promise.allSettled(
          [1, 2, 3, 4].map((n) =>
            store().addMessages([{ id, threadId: t.id, parentId: null, role: 'user', data: n }]),
          ),
        );
        const won = results.flatMap((r) => (r.status === 'fulfilled' ? r.value : []));
        expect(won).toHaveLength(1);
        for (const r of results)
          if (r.status === 'rejected') expect(isCairnError(r.reason, 'CONFLICT')).toBe(true);
        expect(await store().getMessage(id)).toEqual(won[0]);
      });

      it('returns null for an unknown message', async () => {
        expect(await store().getMessage(newId())).toBeNull();
      });

      it.each(JSON_SAMPLES)('stores %s as data exactly', async (_label, data) => {
        const t = await makeThread(store());
        const [m] = await store().addMessages([
          { threadId: t.id, parentId: null, role: 'user', data },
        ]);
        expect(m!.data).toEqual(data);
        expect((await store().getMessage(m!.id))!.data).toEqual(data);
      });
    });

    describe('getChain', () => {
      it('reads a 25-message chain root first', async () => {
        const t = await makeThread(store());
        const chain = await makeChain(store(), t.id, 25);
        const read = await store().getChain(chain[24]!.id);
        expect(read).toEqual(chain);
        expect(read.map((m) => m.depth)).toEqual(Array.from({ length: 25 }, (_, i) => i));
      });

      it('reads only up to the given head', async () => {
        const t = await makeThread(store());
        const chain = await makeChain(store(), t.id, 10);
        expect((await store().getChain(chain[4]!.id)).map((m) => m.id)).toEqual(
          chain.slice(0, 5).map((m) => m.id),
        );
        expect(await store().getChain(chain[0]!.id)).toEqual([chain[0]]);
      });

      it('with a limit, returns the messages nearest the head, root first', async () => {
        const t = await makeThread(store());
        const chain = await makeChain(store(), t.id, 25);
        const page = await store().getChain(chain[24]!.id, { limit: 10 });
        expect(page.map((m) => m.depth)).toEqual([15, 16, 17, 18, 19, 20, 21, 22, 23, 24]);
        expect(page).toEqual(chain.slice(15));
      });

      it('pages a 25-message chain from the head in pages of 10', async () => {
        const t = await makeThread(store());
        const chain = await makeChain(store(), t.id, 25);
        const head = chain[24]!.id;
        const p1 = await store().getChain(head, { limit: 10 });
        const p2 = await store().getChain(head, { limit: 10, beforeDepth: p1[0]!.depth });
        const p3 = await store().getChain(head, { limit: 10, beforeDepth: p2[0]!.depth });
        const p4 = await store().getChain(head, { limit: 10, beforeDepth: p3[0]!.depth });
        expect(p1.map((m) => m.depth)).toEqual([15, 16, 17, 18, 19, 20, 21, 22, 23, 24]);
        expect(p2.map((m) => m.depth)).toEqual([5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
        expect(p3.map((m) => m.depth)).toEqual([0, 1, 2, 3, 4]);
        expect(p4).toEqual([]);
        expect([...p3, ...p2, ...p1]).toEqual(chain);
      });

      it('with only beforeDepth, returns everything above that depth', async () => {
        const t = await makeThread(store());
        const chain = await makeChain(store(), t.id, 8);
        const read = await store().getChain(chain[7]!.id, { beforeDepth: 3 });
        expect(read).toEqual(chain.slice(0, 3));
        expect(await store().getChain(chain[7]!.id, { beforeDepth: 0 })).toEqual([]);
        expect(await store().getChain(chain[7]!.id, { beforeDepth: 100 })).toEqual(chain);
      });

      it('returns the whole chain when the limit exceeds it', async () => {
        const t = await makeThread(store());
        const chain = await makeChain(store(), t.id, 3);
        expect(await store().getChain(chain[2]!.id, { limit: 50 })).toEqual(chain);
      });

      it('follows only the lineage of a branch point', async () => {
        const t = await makeThread(store());
        const trunk = await makeChain(store(), t.id, 4, null, 'trunk');
        const left = await makeChain(store(), t.id, 3, trunk[1]!.id, 'left');
        const right = await makeChain(store(), t.id, 2, trunk[1]!.id, 'right');
        const viaLeft = await store().getChain(left[2]!.id);
        expect(viaLeft.map((m) => m.id)).toEqual([
          trunk[0]!.id,
          trunk[1]!.id,
          ...left.map((m) => m.id),
        ]);
        const viaRight = await store().getChain(right[1]!.id);
        expect(viaRight.map((m) => m.id)).toEqual([
          trunk[0]!.id,
          trunk[1]!.id,
          ...right.map((m) => m.id),
        ]);
        const viaTrunk = await store().getChain(trunk[3]!.id);
        expect(viaTrunk.map((m) => m.id)).toEqual(trunk.map((m) => m.id));
        expect(await store().getChain(trunk[1]!.id)).toEqual(trunk.slice(0, 2));
        expect(viaRight.map((m) => m.depth)).toEqual([0, 1, 2, 3]);
      });

      it('pages along one lineage of a fork without crossing into the other', async () => {
        const t = await makeThread(store());
        const trunk = await makeChain(store(), t.id, 6, null, 'trunk');
        const a = await makeChain(store(), t.id, 6, trunk[5]!.id, 'a');
        const b = await makeChain(store(), t.id, 6, trunk[5]!.id, 'b');
        const page = await store().getChain(b[5]!.id, { limit: 4, beforeDepth: 9 });
        expect(page.map((m) => m.id)).toEqual([trunk[5]!.id, b[0]!.id, b[1]!.id, b[2]!.id]);
        expect(page.some((m) => a.some((x) => x.id === m.id))).toBe(false);
      });

      it('reads a 600-message chain built over many batches, whole and in pages', async () => {
        const t = await makeThread(store());
        const chain: Message[] = [];
        let parent: string | null = null;
        for (let b = 0; b < 30; b++) {
          const part = await makeChain(store(), t.id, 20, parent, `b${b}-`);
          chain.push(...part);
          parent = part[19]!.id;
        }
        const head = chain[599]!.id;
        expect((await store().getChain(head)).map((m) => m.id)).toEqual(chain.map((m) => m.id));
        const page = await store().getChain(head, { limit: 7, beforeDepth: 300 });
        expect(page.map((m) => m.depth)).toEqual([293, 294, 295, 296, 297, 298, 299]);
        expect(page.map((m) => m.id)).toEqual(chain.slice(293, 300).map((m) => m.id));
      });

      it('orders a chain by depth, not by createdAt', async () => {
        const t = await makeThread(store());
        const ids = [newId(), newId(), newId()];
        const stored = await store().addMessages(
          ids.map((id, i) => ({
            id,
            threadId: t.id,
            parentId: i === 0 ? null : ids[i - 1]!,
            role: 'user',
            data: i,
            createdAt: 1_700_000_000_000 - i * 1000,
          })),
        );
        expect((await store().getChain(ids[2]!)).map((m) => m.id)).toEqual(ids);
        expect(await store().getChain(ids[2]!, { limit: 2 })).toEqual(stored.slice(1));
      });

      it('fails for an unknown head with NOT_FOUND', async () => {
        await expectCode(() => store().getChain(newId()), 'NOT_FOUND');
      });

      it.each([
        ['zero', 0],
        ['negative', -3],
        ['fractional', 1.5],
        ['NaN', Number.NaN],
      ])('rejects a %s limit with INVALID_ARGUMENT', async (_l, limit) => {
        const t = await makeThread(store());
        const chain = await makeChain(store(), t.id, 2);
        await expectCode(() => store().getChain(chain[1]!.id, { limit }), 'INVALID_ARGUMENT');
      });

      it.each([
        ['negative', -1],
        ['fractional', 2.5],
        ['NaN', Number.NaN],
      ])('rejects a %s beforeDepth with INVALID_ARGUMENT', async (_l, beforeDepth) => {
        const t = await makeThread(store());
        const chain = await makeChain(store(), t.id, 2);
        await expectCode(() => store().getChain(chain[1]!.id, { beforeDepth }), 'INVALID_ARGUMENT');
      });
    });

    describe('bad input writes nothing', () => {
      /** A thread with a 3-message chain, and a way to check that it did not change. */
      async function fixture() {
        const s = store();
        const thread = await makeThread(s);
        const chain = await makeChain(s, thread.id, 3);
        const head = chain[2]!;
        return {
          s,
          thread,
          chain,
          head,
          async unchanged(absentIds: string[] = []) {
            expect(await snapshotChain(s, head.id)).toEqual(chain);
            for (const id of absentIds) expect(await s.getMessage(id)).toBeNull();
          },
        };
      }

      it('rejects a message that is its own parent (INVALID_ARGUMENT)', async () => {
        const f = await fixture();
        const id = newId();
        await expectCode(
          () =>
            f.s.addMessages([{ id, threadId: f.thread.id, parentId: id, role: 'user', data: 'x' }]),
          'INVALID_ARGUMENT',
        );
        await f.unchanged([id]);
      });

      it('rejects a missing parent (NOT_FOUND)', async () => {
        const f = await fixture();
        const id = newId();
        await expectCode(
          () =>
            f.s.addMessages([
              { id, threadId: f.thread.id, parentId: newId(), role: 'user', data: 'x' },
            ]),
          'NOT_FOUND',
        );
        await f.unchanged([id]);
      });

      it('rejects a parent that comes later in the batch (NOT_FOUND)', async () => {
        const f = await fixture();
        const child = newId();
        const parent = newId();
        await expectCode(
          () =>
            f.s.addMessages([
              { id: child, threadId: f.thread.id, parentId: parent, role: 'user', data: 'child' },
              {
                id: parent,
                threadId: f.thread.id,
                parentId: f.head.id,
                role: 'user',
                data: 'parent',
              },
            ]),
          'NOT_FOUND',
        );
        await f.unchanged([child, parent]);
      });

      it('rejects a parent in another thread (INVALID_ARGUMENT)', async () => {
        const f = await fixture();
        const other = await makeThread(f.s);
        const [foreign] = await makeChain(f.s, other.id, 1);
        const id = newId();
        await expectCode(
          () =>
            f.s.addMessages([
              { id, threadId: f.thread.id, parentId: foreign!.id, role: 'user', data: 'x' },
            ]),
          'INVALID_ARGUMENT',
        );
        await f.unchanged([id]);
        expect(await f.s.getChain(foreign!.id)).toEqual([foreign]);
      });

      it('rejects a parent from another thread earlier in the same batch (INVALID_ARGUMENT)', async () => {
        const f = await fixture();
        const other = await makeThread(f.s);
        const a = newId();
        const b = newId();
        await expectCode(
          () =>
            f.s.addMessages([
              { id: a, threadId: other.id, parentId: null, role: 'user', data: 'a' },
              { id: b, threadId: f.thread.id, parentId: a, role: 'user', data: 'b' },
            ]),
          'INVALID_ARGUMENT',
        );
        await f.unchanged([a, b]);
      });

      it('rejects an unknown thread (NOT_FOUND)', async () => {
        const id = newId();
        await expectCode(
          () =>
            store().addMessages([
              { id, threadId: newId(), parentId: null, role: 'user', data: 'x' },
            ]),
          'NOT_FOUND',
        );
        expect(await store().getMessage(id)).toBeNull();
      });

      it('rejects an id already used in the same thread (CONFLICT) and never overwrites', async () => {
        const f = await fixture();
        await expectCode(
          () =>
            f.s.addMessages([
              {
                id: f.chain[1]!.id,
                threadId: f.thread.id,
                parentId: null,
                role: 'system',
                data: 'overwrite',
              },
            ]),
          'CONFLICT',
        );
        await f.unchanged();
        expect(await f.s.getMessage(f.chain[1]!.id)).toEqual(f.chain[1]);
      });

      it('rejects an id already used in another thread (CONFLICT) and never overwrites', async () => {
        const f = await fixture();
        const other = await makeThread(f.s);
        await expectCode(
          () =>
            f.s.addMessages([
              { id: f.head.id, threadId: other.id, parentId: null, role: 'user', data: 'stolen' },
            ]),
          'CONFLICT',
        );
        await f.unchanged();
        expect(await f.s.getMessage(f.head.id)).toEqual(f.head);
      });

      it('rejects re-adding an identical message (CONFLICT): messages are immutable, not upserted', async () => {
        const f = await fixture();
        const { depth: _depth, ...same } = f.head;
        await expectCode(() => f.s.addMessages([same]), 'CONFLICT');
        await f.unchanged();
      });

      it('rejects an id used twice in one batch (CONFLICT)', async () => {
        const f = await fixture();
        const id = newId();
        await expectCode(
          () =>
            f.s.addMessages([
              { id, threadId: f.thread.id, parentId: f.head.id, role: 'user', data: 1 },
              { id, threadId: f.thread.id, parentId: f.head.id, role: 'user', data: 2 },
            ]),
          'CONFLICT',
        );
        await f.unchanged([id]);
      });

      it.each([
        ['an empty id', { id: '' }],
        ['an id over 200 characters', { id: LONG_NAME }],
        ['an empty role', { role: '' }],
        ['a blank role', { role: '   ' }],
        ['a role over 200 characters', { role: LONG_NAME }],
        ['a non-string role', { role: 7 as unknown as string }],
        ['a non-string type', { type: 7 as unknown as string }],
        ['a NaN createdAt', { createdAt: Number.NaN }],
        ['a string createdAt', { createdAt: 'yesterday' as unknown as number }],
        ['missing data', { data: undefined as unknown as JsonValue }],
      ])('rejects %s (INVALID_ARGUMENT)', async (_l, patch) => {
        const f = await fixture();
        const fresh = newId();
        const message = {
          id: fresh,
          threadId: f.thread.id,
          parentId: f.head.id,
          role: 'user',
          data: 'x',
          ...patch,
        } as NewMessage;
        await expectCode(() => f.s.addMessages([message]), 'INVALID_ARGUMENT');
        await f.unchanged([fresh]);
      });

      it.each([
        ['NaN', () => Number.NaN],
        ['Infinity', () => Number.NEGATIVE_INFINITY],
        ['a BigInt', () => 1n],
        ['a function', () => () => 1],
        ['a Date', () => new Date(0)],
        ['an array holding undefined', () => [undefined]],
        ['a sparse array', () => new Array(2)],
      ])('rejects top-level data that is %s (INVALID_ARGUMENT)', async (_l, make) => {
        const f = await fixture();
        const id = newId();
        await expectCode(
          () =>
            f.s.addMessages([
              {
                id,
                threadId: f.thread.id,
                parentId: f.head.id,
                role: 'user',
                data: make() as JsonValue,
              },
            ]),
          'INVALID_ARGUMENT',
        );
        await f.unchanged([id]);
      });

      it.each(NON_JSON)('rejects data with %s (INVALID_ARGUMENT)', async (_l, make) => {
        const f = await fixture();
        const id = newId();
        await expectCode(
          () =>
            f.s.addMessages([
              {
                id,
                threadId: f.thread.id,
                parentId: f.head.id,
                role: 'user',
                data: make() as JsonValue,
              },
            ]),
          'INVALID_ARGUMENT',
        );
        await f.unchanged([id]);
      });

      it.each([
        ['a self-parent', 'INVALID_ARGUMENT'],
        ['a missing parent', 'NOT_FOUND'],
        ['a parent in another thread', 'INVALID_ARGUMENT'],
        ['a taken id', 'CONFLICT'],
        ['non-JSON data', 'INVALID_ARGUMENT'],
        ['an unknown thread', 'NOT_FOUND'],
      ] as const)(
        'leaves nothing of a batch of good messages followed by %s',
        async (kind, code) => {
          const f = await fixture();
          const other = await makeThread(f.s);
          const [foreign] = await makeChain(f.s, other.id, 1);
          const good = [newId(), newId(), newId()];
          const batch: NewMessage[] = good.map((id, i) => ({
            id,
            threadId: f.thread.id,
            parentId: i === 0 ? f.head.id : good[i - 1]!,
            role: 'user',
            data: { i },
          }));
          const badId = newId();
          const bad: NewMessage = {
            id: badId,
            threadId: f.thread.id,
            parentId: good[2]!,
            role: 'user',
            data: 'bad',
          };
          if (kind === 'a self-parent') bad.parentId = badId;
          if (kind === 'a missing parent') bad.parentId = newId();
          if (kind === 'a parent in another thread') bad.parentId = foreign!.id;
          if (kind === 'a taken id') bad.id = f.chain[0]!.id;
          if (kind === 'non-JSON data') bad.data = { n: Number.NaN };
          if (kind === 'an unknown thread') {
            bad.threadId = newId();
            bad.parentId = null;
          }
          await expectCode(() => f.s.addMessages([...batch, bad]), code);
          await f.unchanged([...good, badId]);
          expect(await f.s.getMessage(f.chain[0]!.id)).toEqual(f.chain[0]);
          expect(await f.s.getChain(foreign!.id)).toEqual([foreign]);
        },
      );

      it('leaves nothing when a batch fails on its first message', async () => {
        const f = await fixture();
        const good = newId();
        await expectCode(
          () =>
            f.s.addMessages([
              { threadId: f.thread.id, parentId: newId(), role: 'user', data: 'bad' },
              { id: good, threadId: f.thread.id, parentId: f.head.id, role: 'user', data: 'good' },
            ]),
          'NOT_FOUND',
        );
        await f.unchanged([good]);
      });

      it('rejects a batch that is not an array (INVALID_ARGUMENT)', async () => {
        await expectCode(
          () => store().addMessages({} as unknown as NewMessage[]),
          'INVALID_ARGUMENT',
        );
      });
    });
  });
}
