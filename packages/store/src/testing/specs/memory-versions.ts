import { type Memory, newId } from '@cairn/core';
import { beforeAll, describe, expect, it } from 'vitest';
import { holdsAt, matchesMemoryFilter } from '../../memory-search.js';
import type { MemoryFilter, NewMemory } from '../../store.js';
import { type StoreConformanceOptions, useStore } from '../context.js';
import { expectCode } from '../helpers.js';

const ids = (memories: Array<{ id: string }>) => memories.map((m) => m.id);
const sorted = (memories: Array<{ id: string }>) => ids(memories).sort();
const day = (d: number) => Date.UTC(2026, 0, d);

/**
 * A fact's versions and its two times: `supersedeMemory` closes a version and records the
 * next one, linked by `supersedes` and `lineageId`, deleting nothing; `lineageIds` lists a
 * fact's history; `validAt` (event time) and `knownAt` (system time) select what held at
 * an instant as known at another, inside every listing and search.
 */
export function describeMemoryVersions(options: StoreConformanceOptions): void {
  describe('memory versions and time', () => {
    const store = useStore(options);
    const agentId = `mv-${newId()}`;
    const add = async (m: Partial<NewMemory> & { text: string }) => {
      const { text, ...rest } = m;
      const [stored] = await store().addMemories([{ agentId, content: { text }, ...rest }]);
      return stored!;
    };

    it('records a new memory as open, since always, its own lineage, unless told otherwise', async () => {
      const m = await add({ text: 'a plain fact' });
      expect(m).toMatchObject({
        validFrom: null,
        validTo: null,
        supersededAt: null,
        supersedes: null,
        lineageId: m.id,
        source: null,
      });
      const dated = await add({
        text: 'a dated fact',
        validFrom: day(1),
        validTo: day(5),
        source: { threadId: 't', messageIds: ['m1'] },
      });
      expect(await store().getMemory(dated.id)).toMatchObject({
        validFrom: day(1),
        validTo: day(5),
        source: { threadId: 't', messageIds: ['m1'] },
      });
    });

    it('supersedes: closes the old version, records the new one linked to it, deletes nothing', async () => {
      const v1 = await add({
        text: 'Ada lives in Paris',
        type: 'description',
        validFrom: day(1),
        metadata: { topic: 'home' },
        entityId: 'ada',
        source: { threadId: 't1', branchId: 'b1', messageIds: ['m1'] },
      });
      const v2 = await store().supersedeMemory(v1.id, {
        content: { text: 'Ada lives in Berlin' },
        validFrom: day(10),
      });
      expect(v2).toMatchObject({
        type: v1.type,
        agentId,
        entityId: 'ada',
        scope: v1.scope,
        content: { text: 'Ada lives in Berlin' },
        metadata: { topic: 'home' },
        validFrom: day(10),
        validTo: null,
        supersededAt: null,
        supersedes: v1.id,
        lineageId: v1.id,
        source: { threadId: 't1', branchId: 'b1', messageIds: ['m1'] },
      });
      expect(v2.id).not.toBe(v1.id);
      expect(v2.createdAt).toBeGreaterThanOrEqual(v1.createdAt);
      expect(await store().getMemory(v1.id)).toEqual({
        ...v1,
        validTo: day(10),
        supersededAt: v2.createdAt,
      });
      expect(await store().getMemory(v2.id)).toEqual(v2);
      const v3 = await store().supersedeMemory(v2.id, {
        id: `v3-${newId()}`,
        content: { text: 'Ada lives in Rome' },
        metadata: { topic: 'home', sure: false },
        source: null,
        validFrom: day(20),
      });
      expect(v3).toMatchObject({ supersedes: v2.id, lineageId: v1.id, source: null });
      const history = await store().listMemories({ lineageIds: [v1.id] }, { order: 'oldest' });
      expect(ids(history)).toEqual([v1.id, v2.id, v3.id]);
      expect(history.map((m) => m.validTo)).toEqual([day(10), day(20), null]);
      expect(await store().countMemories({ lineageIds: [v1.id] })).toBe(3);
      // What holds now, and on a day of each version.
      const at = async (validAt: number) =>
        ids(await store().listMemories({ lineageIds: [v1.id], validAt }));
      expect(await at(Date.now())).toEqual([v3.id]);
      expect(await at(day(1))).toEqual([v1.id]);
      expect(await at(day(10) - 1)).toEqual([v1.id]);
      expect(await at(day(10))).toEqual([v2.id]);
      expect(await at(day(0))).toEqual([]);
    });

    it('takes the new validFrom equal to the old one (a correction) and defaults it to now', async () => {
      const v1 = await add({ text: 'born on the 3rd', validFrom: day(3) });
      const v2 = await store().supersedeMemory(v1.id, {
        content: { text: 'born on the 4th' },
        validFrom: day(3),
      });
      expect((await store().getMemory(v1.id))!.validTo).toBe(day(3));
      expect(ids(await store().listMemories({ lineageIds: [v1.id], validAt: day(3) }))).toEqual([
        v2.id,
      ]);
      const before = Date.now();
      const v3 = await store().supersedeMemory(v2.id, { content: { text: 'unknown birthday' } });
      expect(v3.validFrom).toBeGreaterThanOrEqual(before);
      expect(v3.validFrom).toBe(v3.createdAt);
      expect((await store().getMemory(v2.id))!.validTo).toBe(v3.validFrom);
    });

    it('refuses, writing nothing: a missing id, a superseded or closed version, bad times and ids', async () => {
      const v1 = await add({ text: 'the office is on floor 2', validFrom: day(5) });
      const v2 = await store().supersedeMemory(v1.id, {
        content: { text: 'the office is on floor 3' },
        validFrom: day(8),
      });
      const closed = await add({ text: 'a visit', validFrom: day(1), validTo: day(2) });
      const unchanged = async () => {
        expect(await store().getMemory(v1.id)).toEqual({
          ...v1,
          validTo: day(8),
          supersededAt: v2.createdAt,
        });
        expect(await store().getMemory(v2.id)).toEqual(v2);
        expect(await store().getMemory(closed.id)).toEqual(closed);
        expect(await store().countMemories({ agentId })).toBe(count);
      };
      const count = await store().countMemories({ agentId });
      const text = { content: { text: 'x' } };
      await expectCode(() => store().supersedeMemory(`missing-${newId()}`, text), 'NOT_FOUND');
      const again = await expectCode(() => store().supersedeMemory(v1.id, text), 'CONFLICT');
      expect(again.details).toMatchObject({ id: v1.id, supersededAt: v2.createdAt });
      await expectCode(() => store().supersedeMemory(closed.id, text), 'CONFLICT');
      await expectCode(
        () => store().supersedeMemory(v2.id, { ...text, validFrom: day(7) }),
        'INVALID_ARGUMENT',
      );
      await expectCode(
        () => store().supersedeMemory(v2.id, { ...text, validFrom: day(9), validTo: day(8) }),
        'INVALID_ARGUMENT',
      );
      await expectCode(
        () => store().supersedeMemory(v2.id, { ...text, validFrom: null as never }),
        'INVALID_ARGUMENT',
      );
      await expectCode(
        () => store().supersedeMemory(v2.id, { ...text, validFrom: 'soon' as never }),
        'INVALID_ARGUMENT',
      );
      await expectCode(
        () => store().supersedeMemory(v2.id, { ...text, text: 'x' } as never),
        'INVALID_ARGUMENT',
      );
      await expectCode(
        () => store().supersedeMemory(v2.id, { content: 'x' } as never),
        'INVALID_ARGUMENT',
      );
      await expectCode(
        () => store().supersedeMemory(v2.id, { ...text, id: closed.id }),
        'CONFLICT',
      );
      await expectCode(
        () => store().supersedeMemory(v2.id, { ...text, source: { threadId: 't' } as never }),
        'INVALID_ARGUMENT',
      );
      await expectCode(() => store().supersedeMemory('', text), 'INVALID_ARGUMENT');
      await unchanged();
      await expectCode(
        () => add({ text: 'backwards', validFrom: day(5), validTo: day(4) }),
        'INVALID_ARGUMENT',
      );
      await expectCode(
        () => add({ text: 'bad source', source: { threadId: 't', messageIds: 'm1' as never } }),
        'INVALID_ARGUMENT',
      );
      await expectCode(() => store().listMemories({ validAt: 'now' as never }), 'INVALID_ARGUMENT');
      await expectCode(() => store().countMemories({ knownAt: Number.NaN }), 'INVALID_ARGUMENT');
      await expectCode(
        () => store().listMemories({ lineageIds: 'x' as never }),
        'INVALID_ARGUMENT',
      );
      await unchanged();
    });

    it('closes a current version without a successor: history keeps it, now it is gone', async () => {
      const kept = await add({ text: 'Ada lives in Paris', validFrom: day(1) });
      const dup = await add({
        text: 'ada lives in paris',
        validFrom: day(2),
        createdAt: day(2),
        metadata: { n: 1 },
      });
      const before = Date.now();
      const closed = await store().closeMemory(dup.id, {
        validTo: day(9),
        expected: dup,
        metadata: { n: 1, mergedInto: kept.id },
      });
      expect(closed).toEqual({
        ...dup,
        validTo: day(9),
        supersededAt: closed.supersededAt,
        metadata: { n: 1, mergedInto: kept.id },
      });
      expect(closed.supersededAt).toBeGreaterThanOrEqual(before);
      expect(await store().getMemory(dup.id)).toEqual(closed);
      // Now: only the kept one; at day 3 as known then: both; its lineage: the closed one.
      expect(sorted(await store().listMemories({ agentId, validAt: Date.now() }))).toContain(
        kept.id,
      );
      expect(ids(await store().listMemories({ agentId, validAt: Date.now() }))).not.toContain(
        dup.id,
      );
      expect(
        ids(await store().listMemories({ agentId, validAt: day(3), knownAt: day(3) })),
      ).toContain(dup.id);
      expect(await store().listMemories({ lineageIds: [dup.id] })).toEqual([closed]);
      // Defaults: validTo now, metadata kept, no expectation.
      const plain = await add({ text: 'a plain fact to close' });
      const p = await store().closeMemory(plain.id);
      expect(p.validTo).toBe(p.supersededAt);
      expect(p.metadata).toEqual(plain.metadata);
    });

    it('updates a current version in place, and refuses to edit a closed one, naming the current', async () => {
      const v1 = await add({ text: 'Ada lives in Paris', validFrom: day(1), metadata: { a: 1 } });
      const v2 = await store().supersedeMemory(v1.id, {
        content: { text: 'Ada lives in Berlin' },
        validFrom: day(10),
      });
      const closedV1 = await store().getMemory(v1.id);
      // The superseded version is history: neither its text nor its metadata is edited.
      const e = await expectCode(
        () => store().updateMemory(v1.id, { content: { text: 'Ada lives in Rome' } }),
        'CONFLICT',
      );
      expect(e.details).toMatchObject({ id: v1.id, currentId: v2.id });
      expect(e.message).toContain(v2.id);
      await expectCode(() => store().updateMemory(v1.id, { metadata: { a: 2 } }), 'CONFLICT');
      expect(await store().getMemory(v1.id)).toEqual(closedV1);
      // The current version is updated in place, as before.
      const edited = await store().updateMemory(v2.id, { metadata: { checked: true } });
      expect(edited).toMatchObject({ id: v2.id, metadata: { checked: true }, supersededAt: null });
      // A version closed without a successor (a duplicate merged away): no current version.
      const dup = await add({ text: 'Ada likes tea' });
      await store().closeMemory(dup.id, { metadata: { mergedInto: v2.id } });
      const closedDup = await store().getMemory(dup.id);
      const f = await expectCode(() => store().updateMemory(dup.id, { metadata: {} }), 'CONFLICT');
      expect(f.details).toMatchObject({ id: dup.id, currentId: null });
      expect(await store().getMemory(dup.id)).toEqual(closedDup);
      // A version that ends on its own is still current: it is updated.
      const ends = await add({ text: 'the sale ends soon', validFrom: day(1), validTo: day(5) });
      expect(
        (await store().updateMemory(ends.id, { content: { text: 'the sale ends on the 5th' } }))
          .content.text,
      ).toBe('the sale ends on the 5th');
      await expectCode(() => store().updateMemory(`missing-${newId()}`, {}), 'NOT_FOUND');
    });

    it('closes nothing when the version changed since it was read, or cannot be closed', async () => {
      const m = await add({
        text: 'the office is on floor 2',
        validFrom: day(5),
        metadata: { a: 1 },
      });
      const seen = { contentHash: m.contentHash, metadata: { a: 1 } };
      // Key order does not make metadata differ.
      const seen2 = await add({ text: 'x2', metadata: { a: 1, b: { c: 2, d: 3 } } });
      const texted = await store().updateMemory(m.id, {
        content: { text: 'the office is on floor 4' },
      });
      const e = await expectCode(() => store().closeMemory(m.id, { expected: seen }), 'CONFLICT');
      expect(e.details).toMatchObject({ id: m.id });
      const meta = await store().updateMemory(m.id, { metadata: { a: 2 } });
      await expectCode(
        () => store().closeMemory(m.id, { expected: { ...seen, contentHash: texted.contentHash } }),
        'CONFLICT',
      );
      expect(await store().getMemory(m.id)).toEqual(meta);
      const count = await store().countMemories({ agentId });
      await expectCode(() => store().closeMemory(`missing-${newId()}`), 'NOT_FOUND');
      await expectCode(() => store().closeMemory(m.id, { validTo: day(4) }), 'INVALID_ARGUMENT');
      await expectCode(
        () => store().closeMemory(m.id, { validTo: 'now' as never }),
        'INVALID_ARGUMENT',
      );
      await expectCode(
        () => store().closeMemory(m.id, { until: day(9) } as never),
        'INVALID_ARGUMENT',
      );
      await expectCode(
        () => store().closeMemory(m.id, { metadata: [] as never }),
        'INVALID_ARGUMENT',
      );
      await expectCode(
        () => store().closeMemory(m.id, { expected: 'x' as never }),
        'INVALID_ARGUMENT',
      );
      await expectCode(
        () => store().closeMemory(m.id, { expected: { contentHash: meta.contentHash } as never }),
        'INVALID_ARGUMENT',
      );
      await expectCode(() => store().closeMemory(m.id, null as never), 'INVALID_ARGUMENT');
      await expectCode(() => store().closeMemory(''), 'INVALID_ARGUMENT');
      expect(await store().getMemory(m.id)).toEqual(meta);
      const closed = await store().closeMemory(seen2.id, {
        expected: { contentHash: seen2.contentHash, metadata: { b: { d: 3, c: 2 }, a: 1 } },
      });
      const again = await expectCode(() => store().closeMemory(seen2.id), 'CONFLICT');
      expect(again.details).toMatchObject({ id: seen2.id, supersededAt: closed.supersededAt });
      const ends = await add({ text: 'a visit', validFrom: day(1), validTo: day(2) });
      await expectCode(() => store().closeMemory(ends.id), 'CONFLICT');
      const v2 = await store().supersedeMemory(meta.id, {
        content: { text: 'floor 5' },
        validFrom: day(6),
      });
      await expectCode(() => store().closeMemory(meta.id), 'CONFLICT');
      expect(await store().countMemories({ agentId })).toBe(count + 2);
      expect((await store().getMemory(v2.id))!.supersededAt).toBeNull();
    });

    it.skipIf(options.encrypted)(
      'refuses a new version whose vector does not fit the store, and rolls back with a transaction',
      async () => {
        const v1 = await add({ text: 'width fixed', embedding: [1, 0, 0, 0] });
        await expectCode(
          () =>
            store().supersedeMemory(v1.id, {
              content: { text: 'too wide' },
              embedding: [1, 0, 0, 0, 0],
            }),
          'EMBEDDING_MISMATCH',
        );
        await expect(
          store().transaction(async (tx) => {
            await tx.supersedeMemory(v1.id, {
              content: { text: 'undone' },
              embedding: [0, 1, 0, 0],
            });
            throw new Error('roll back');
          }),
        ).rejects.toThrow('roll back');
        expect(await store().getMemory(v1.id)).toEqual(v1);
        expect(await store().countMemories({ lineageIds: [v1.id] })).toBe(1);
        const v2 = await store().supersedeMemory(v1.id, {
          content: { text: 'kept' },
          embedding: [0, 1, 0, 0],
        });
        const hits = await store().searchMemories({
          vector: [0, 1, 0, 0],
          filter: { lineageIds: [v1.id], validAt: Date.now() },
        });
        expect(ids(hits.map((h) => h.memory))).toEqual([v2.id]);
      },
    );

    it('lets one of many supersessions of a version racing each other win, the others CONFLICT', async () => {
      const v1 = await add({ text: 'race' });
      const results = await Promise.allSettled(
        Array.from({ length: 8 }, (_, i) =>
          store().supersedeMemory(v1.id, { content: { text: `racer ${i}` } }),
        ),
      );
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r) => r.status === 'rejected');
      expect(won).toHaveLength(1);
      expect(lost.map((r) => (r as PromiseRejectedResult).reason.code)).toEqual(
        Array(7).fill('CONFLICT'),
      );
      const history = await store().listMemories({ lineageIds: [v1.id] }, { order: 'oldest' });
      expect(ids(history)).toEqual([v1.id, (won[0] as PromiseFulfilledResult<Memory>).value.id]);
    });

    it('refuses a supersession that read the version before another one committed (CONFLICT)', async () => {
      const v1 = await add({ text: 'overtaken' });
      let late: Promise<Memory> | undefined;
      const first = await store().transaction(async (tx) => {
        const next = await tx.supersedeMemory(v1.id, { content: { text: 'first' } });
        // Started while this transaction holds the version: where transactions run side by
        // side it reads the version still open and waits for this one to commit.
        late = store().supersedeMemory(v1.id, { content: { text: 'late' } });
        late.catch(() => {});
        await new Promise((resolve) => setTimeout(resolve, 100));
        return next;
      });
      await expectCode(() => late!, 'CONFLICT');
      const history = await store().listMemories({ lineageIds: [v1.id] }, { order: 'oldest' });
      expect(ids(history)).toEqual([v1.id, first.id]);
    });

    describe.skipIf(options.encrypted)('validAt and knownAt', () => {
      // A history written as supersedeMemory writes it, with system times of its own:
      // recorded at 100; moved (recorded at 200) from day 10; moved again (at 300) from day 20.
      const lineage = `lin-${newId()}`;
      const vectorOf = (i: number) => [1, i / 10, 0, 0.5];
      const versions: NewMemory[] = [
        {
          id: lineage,
          createdAt: 100,
          validFrom: day(1),
          validTo: day(10),
          supersededAt: 200,
        },
        {
          id: `${lineage}-2`,
          createdAt: 200,
          validFrom: day(10),
          validTo: day(20),
          supersededAt: 300,
          supersedes: lineage,
        },
        { id: `${lineage}-3`, createdAt: 300, validFrom: day(20), supersedes: `${lineage}-2` },
        // A fact holding for ever, a bounded one, a future one, one recorded late.
        { id: `always-${newId()}`, createdAt: 100 },
        { id: `bounded-${newId()}`, createdAt: 100, validFrom: day(5), validTo: day(15) },
        { id: `future-${newId()}`, createdAt: 100, validFrom: Date.UTC(2999, 0, 1) },
        { id: `late-${newId()}`, createdAt: 250, validFrom: day(2) },
      ].map((v, i) => ({
        agentId,
        worldId: lineage,
        content: { text: `city version ${i}` },
        embedding: vectorOf(i),
        ...(i < 3 ? { lineageId: lineage } : {}),
        ...v,
      }));
      let data: Memory[] = [];
      beforeAll(async () => {
        data = await store().addMemories(versions);
      });
      const [v1, v2, v3, always, bounded, future, late] = versions.map((v) => v.id!);

      const instants = [day(0), day(1), day(10) - 1, day(10), day(15), day(20)];
      const known = [undefined, 99, 150, 200, 250, 300];
      const cases: MemoryFilter[] = [];
      for (const knownAt of known) {
        for (const validAt of [undefined, ...instants])
          cases.push({
            worldId: lineage,
            ...(validAt === undefined ? {} : { validAt }),
            ...(knownAt === undefined ? {} : { knownAt }),
          });
      }

      it('pins the rule on cases worked by hand', () => {
        const pick = (validAt?: number, knownAt?: number) =>
          data.filter((m) => holdsAt(m, validAt, knownAt)).map((m) => m.id);
        // Now, as known now: the newest version and what holds today.
        expect(pick(Date.now())).toEqual([v3, always, late]);
        // On day 12, as known now: version 2 (its validity closed by version 3), the bounded fact.
        expect(pick(day(12))).toEqual([v2, always, bounded, late]);
        // On day 12, as known at 150: version 1 was current then and open as it was written.
        expect(pick(day(12), 150)).toEqual([v1, always, bounded]);
        // Known at 250 alone: the versions current then.
        expect(pick(undefined, 250)).toEqual([v2, always, bounded, future, late]);
        // Before anything was recorded: nothing.
        expect(pick(day(12), 99)).toEqual([]);
      });

      it('lists, counts and searches by the rule, inside the query', async () => {
        for (const filter of cases) {
          const expected = data.filter((m) => matchesMemoryFilter(m, filter));
          const label = JSON.stringify(filter);
          expect(sorted(await store().listMemories(filter)), label).toEqual(sorted(expected));
          expect(await store().countMemories(filter), label).toBe(expected.length);
          const keyword = await store().searchMemories({ text: 'city', filter, limit: 100 });
          expect(sorted(keyword.map((h) => h.memory)), label).toEqual(sorted(expected));
        }
        // A search's limit counts only what the filter admits.
        const vector = await store().searchMemories({
          vector: vectorOf(0),
          filter: { worldId: lineage, validAt: day(12), knownAt: 150 },
          limit: 1,
        });
        if (store().capabilities.vectorSearch === 'exact')
          expect(ids(vector.map((h) => h.memory))).toEqual([v1]);
        else
          expect([v1, always, bounded]).toEqual(
            expect.arrayContaining(ids(vector.map((h) => h.memory))),
          );
        const now = await store().searchMemories({
          vector: vectorOf(0),
          filter: { worldId: lineage, validAt: Date.now() },
          limit: 3,
        });
        if (store().capabilities.vectorSearch === 'exact')
          expect(sorted(now.map((h) => h.memory))).toEqual([v3, always, late].sort());
        else
          expect([v3, always, late]).toEqual(expect.arrayContaining(ids(now.map((h) => h.memory))));
        expect(future).toBeDefined();
      });
    });
  });
}
