/**
 * Consolidation (`AgentMemory.consolidate` / `startConsolidation`), run against one store
 * per call: every store must give the same answers.
 */
import { isCairnError, type Memory } from '@cairn/core';
import type { Store } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import {
  type CandidateGroup,
  type ConsolidationRule,
  consolidationLeaseKey,
  createMemory,
  defaultConsolidationRule,
} from '../src/index.js';
import { freshStores, rejects } from './helpers.js';

export interface ConsolidationFactory {
  /** A fresh, empty store. */
  create(): Promise<Store>;
  /** Two store instances on one fresh database (another process's view), where a store can. */
  twins?(): Promise<[Store, Store]>;
  timeoutMs?: number;
}

const day = (d: number) => Date.UTC(2026, 0, d);

/** A promise and the function that settles it. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

export function describeConsolidationSuite(name: string, factory: ConsolidationFactory) {
  describe(`consolidation on ${name}`, { timeout: factory.timeoutMs ?? 5000 }, () => {
    const newStore = freshStores(factory.create);
    const current = (store: Store, agentId: string) =>
      store
        .listMemories({ agentId, validAt: Date.now() }, { limit: 1000, order: 'oldest' })
        .then((ms) => ms.map((m) => m.content.text).sort());

    it('merges duplicates into the oldest within one place only, keeping every version in history', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a' });
      const keep = await memory.remember({ text: 'Ada likes green tea', entityId: 'ada' });
      const twice = { allowDuplicate: true };
      const dup1 = await memory.remember({ text: 'ada likes green tea.', entityId: 'ada' });
      const dup2 = await memory.remember(
        { text: '  Ada  likes GREEN tea ', entityId: 'ada' },
        twice,
      );
      // Elsewhere: another entity, room scope, another agent, a branch-scoped memory, a
      // document's fragment. None of them is the same place: all stay.
      const others = [
        await memory.remember({ text: 'Ada likes green tea', entityId: 'bob' }, twice),
        await memory.remember({ text: 'Ada likes green tea', roomId: 'r1', scope: 'room' }, twice),
        await createMemory({ store, agentId: 'b' }).remember({
          text: 'Ada likes green tea',
          entityId: 'ada',
        }),
        await memory.remember({
          text: 'Ada likes green tea',
          entityId: 'ada',
          source: { threadId: 't', messageIds: ['m1'], branchScoped: true },
        }),
        ...(await memory.ingestDocument({ text: 'Ada likes green tea', entityId: 'ada' }))
          .fragments,
      ];
      // A millisecond apart, so that `before - 1` knows all of them and nothing of the pass.
      await new Promise((resolve) => setTimeout(resolve, 2));
      const before = Date.now();
      const version = memory.version;
      const report = await memory.consolidate();
      expect(report).toEqual({
        ran: true,
        scanned: 6,
        groups: 1,
        merged: 2,
        superseded: 0,
        skipped: 0,
      });
      expect(memory.version).toBeGreaterThan(version);
      for (const dup of [dup1, dup2]) {
        const closed = (await memory.get(dup.id))!;
        expect(closed).toMatchObject({
          content: dup.content,
          supersededAt: expect.any(Number),
          metadata: {
            consolidated: {
              action: 'merge',
              into: keep.id,
              reason: 'same text after normalisation',
            },
          },
        });
        expect(closed.validTo).toBeGreaterThanOrEqual(before);
        expect((await memory.history(dup.id)).map((m) => m.id)).toEqual([dup.id]);
      }
      for (const m of [keep, ...others]) expect((await memory.get(m.id))!.supersededAt).toBeNull();
      const hits = await memory.recall('green tea', {
        entityId: 'ada',
        types: ['custom'],
        mode: 'keyword',
      });
      expect(hits.map((h) => h.memory.id)).toEqual([keep.id]);
      // As the agent knew it before the pass: all three.
      const then = await memory.recall('green tea', {
        entityId: 'ada',
        types: ['custom'],
        mode: 'keyword',
        asOf: { validAt: Date.now(), knownAt: before - 1 },
      });
      expect(then.map((h) => h.memory.id).sort()).toEqual([keep.id, dup1.id, dup2.id].sort());
      // Again: nothing left to do; the lease is released.
      expect(await memory.consolidate()).toMatchObject({ ran: true, merged: 0, groups: 0 });
      expect((await store.getLease(consolidationLeaseKey('a')))?.releasedAt).not.toBeNull();
    });

    it('finds every duplicate of a batch written in one millisecond, however large', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a' });
      const createdAt = Date.now();
      const texts = Array.from({ length: 300 }, (_, i) => `fact number ${i}`);
      await memory.rememberMany(
        [...texts, ...texts.map((t) => t.toUpperCase())].map((text) => ({ text, createdAt })),
      );
      expect(await memory.consolidate()).toMatchObject({ scanned: 600, groups: 300, merged: 300 });
      expect(await current(store, 'a')).toEqual([...texts].sort());
    });

    it('ends an older value of a declared factKey by the newer one, and only then', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a' });
      const key = { factKey: 'ada.home' };
      const paris = await memory.remember({
        text: 'Ada lives in Paris',
        metadata: key,
        validFrom: day(1),
      });
      const berlin = await memory.remember({
        text: 'Ada lives in Berlin',
        metadata: key,
        validFrom: day(9),
      });
      // No key: never taken for a contradiction. A tie on validFrom: kept as it is.
      await memory.remember({ text: 'Bob lives in Paris', validFrom: day(1) });
      await memory.remember({ text: 'Bob lives in Rome', validFrom: day(9) });
      const tie = { factKey: 'cy.home' };
      await memory.remember({ text: 'Cy lives in Oslo', metadata: tie, validFrom: day(3) });
      await memory.remember({ text: 'Cy lives in Lima', metadata: tie, validFrom: day(3) });
      const report = await memory.consolidate();
      expect(report).toMatchObject({ ran: true, groups: 2, merged: 0, superseded: 1, skipped: 0 });
      expect(await memory.get(paris.id)).toMatchObject({
        validTo: day(9),
        supersededAt: expect.any(Number),
        metadata: { factKey: 'ada.home', consolidated: { action: 'supersede', into: berlin.id } },
      });
      expect(await current(store, 'a')).toEqual([
        'Ada lives in Berlin',
        'Bob lives in Paris',
        'Bob lives in Rome',
        'Cy lives in Lima',
        'Cy lives in Oslo',
      ]);
      const asOf = await memory.recall('Ada lives', { mode: 'keyword', asOf: { validAt: day(5) } });
      expect(
        asOf.filter((h) => h.memory.metadata.factKey === 'ada.home').map((h) => h.memory.id),
      ).toEqual([paris.id]);
    });

    it('never loses a write made while a pass decides: the write wins, the decision is skipped', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a' });
      const keep = await memory.remember({ text: 'The deadline is Friday' });
      const edited = await memory.remember(
        { text: 'the deadline is friday', metadata: { n: 1 } },
        { allowDuplicate: true },
      );
      const revised = await memory.remember(
        { text: 'The deadline is Friday!' },
        { allowDuplicate: true },
      );
      const retagged = await memory.remember(
        { text: 'THE DEADLINE IS FRIDAY' },
        { allowDuplicate: true },
      );
      const merged = await memory.remember(
        { text: 'The deadline is Friday.' },
        { allowDuplicate: true },
      );
      let added: Memory | undefined;
      // The rule is where a model would take seconds: other writers go on meanwhile.
      const slowRule: ConsolidationRule = async (group) => {
        await memory.update(edited.id, { text: 'The deadline moved to Monday' });
        await memory.supersede(revised.id, { text: 'The deadline is Tuesday' });
        await memory.update(retagged.id, { metadata: { checked: true } });
        added = await memory.remember({ text: 'The launch is in May' });
        return defaultConsolidationRule(group, {});
      };
      const report = await memory.consolidate({ rule: slowRule });
      expect(report).toMatchObject({ ran: true, merged: 1, skipped: 3 });
      expect((await memory.get(merged.id))!.supersededAt).not.toBeNull();
      expect(await current(store, 'a')).toEqual([
        'THE DEADLINE IS FRIDAY',
        'The deadline is Friday',
        'The deadline is Tuesday',
        'The deadline moved to Monday',
        'The launch is in May',
      ]);
      expect((await memory.get(retagged.id))!.metadata).toEqual({ checked: true });
      expect((await memory.get(added!.id))!.supersededAt).toBeNull();
      expect((await memory.get(keep.id))!.supersededAt).toBeNull();
      // The next pass sees the writes: the retagged duplicate goes now, the others differ.
      expect(await memory.consolidate()).toMatchObject({ merged: 1, skipped: 0 });
    });

    it('does not merge into, or supersede by, a memory changed or forgotten while the pass decided', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a' });
      const twice = { allowDuplicate: true };
      const keep = await memory.remember({ text: 'Ada likes tea' });
      const dup = await memory.remember({ text: 'ada likes tea' }, twice);
      const key = { factKey: 'bob.home' };
      const old = await memory.remember({
        text: 'Bob lives in Rome',
        metadata: key,
        validFrom: day(1),
      });
      const by = await memory.remember({
        text: 'Bob lives in Oslo',
        metadata: key,
        validFrom: day(2),
      });
      const report = await memory.consolidate({
        rule: async (group) => {
          // Meanwhile: the kept memory now says something else; the newer value is forgotten.
          if (group.reason === 'same-text')
            await memory.update(keep.id, { text: 'Ada likes coffee' });
          else await memory.forget(by.id);
          return defaultConsolidationRule(group, {});
        },
      });
      expect(report).toMatchObject({ groups: 2, merged: 0, superseded: 0, skipped: 2 });
      for (const m of [dup, old]) expect((await memory.get(m.id))!.supersededAt).toBeNull();
      expect(await current(store, 'a')).toEqual([
        'Ada likes coffee',
        'Bob lives in Rome',
        'ada likes tea',
      ]);
    });

    it('runs one pass per scope across store instances: another runner finds ran: false', async () => {
      const [s1, s2] = factory.twins ? await factory.twins() : [await newStore(), undefined];
      if (factory.twins) newStore.keep(s1, s2!);
      const here = createMemory({ store: s1, agentId: 'a' });
      const there = createMemory({ store: s2 ?? s1, agentId: 'a' });
      await here.remember({ text: 'Ada likes tea', entityId: 'ada' });
      await here.remember({ text: 'ada likes tea', entityId: 'ada' }, { allowDuplicate: true });
      const inRule = gate();
      const release = gate();
      const first = here.consolidate({
        rule: async (group) => {
          inRule.open();
          await release.opened;
          return defaultConsolidationRule(group, {});
        },
      });
      await inRule.opened;
      const lease = await (s2 ?? s1).getLease(consolidationLeaseKey('a'));
      expect(lease).toMatchObject({ releasedAt: null });
      expect(await there.consolidate()).toEqual({
        ran: false,
        scanned: 0,
        groups: 0,
        merged: 0,
        superseded: 0,
        skipped: 0,
      });
      // Another scope has a lease of its own.
      expect(await there.consolidate({ entityId: 'bob' })).toMatchObject({ ran: true });
      release.open();
      expect(await first).toMatchObject({ ran: true, merged: 1 });
      expect(await there.consolidate()).toMatchObject({ ran: true, merged: 0 });
    });

    it('honours a custom rule (the shape of an LLM hook), with groups of similar memories', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a' });
      const old = await memory.remember({ text: 'The user drives a red car', validFrom: day(1) });
      const now = await memory.remember({ text: 'The user drives a blue car', validFrom: day(4) });
      const aside = await memory.remember({
        text: 'The user drives a red car',
        roomId: 'r',
        scope: 'room',
      });
      const seen: CandidateGroup[] = [];
      const report = await memory.consolidate({
        similarity: 0.5,
        rule: async (group, context) => {
          seen.push(group);
          expect(context).toEqual({});
          if (group.reason !== 'similar') return [];
          // What a model would answer: the blue car replaced the red one.
          const [a, b] = group.memories;
          return [{ action: 'supersede', old: a!.id, by: b!.id, reason: 'the model says so' }];
        },
      });
      expect(seen.map((g) => [g.reason, g.memories.map((m) => m.id)])).toEqual([
        ['similar', [old.id, now.id]],
      ]);
      expect(report).toMatchObject({ groups: 1, superseded: 1 });
      expect(await memory.get(old.id)).toMatchObject({
        validTo: day(4),
        metadata: {
          consolidated: { action: 'supersede', into: now.id, reason: 'the model says so' },
        },
      });
      expect((await memory.get(aside.id))!.supersededAt).toBeNull();
      // A rule that keeps everything changes nothing.
      await memory.remember({ text: 'the user drives a blue car' }, { allowDuplicate: true });
      expect(await memory.consolidate({ rule: () => [{ action: 'keep' }] })).toMatchObject({
        groups: 1,
        merged: 0,
      });
    });

    it('runs in the background until stopped', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a' });
      await memory.remember({ text: 'Ada likes tea' });
      await memory.remember({ text: 'ada likes tea' }, { allowDuplicate: true });
      const reports: unknown[] = [];
      const done = gate();
      const runner = memory.startConsolidation({
        intervalMs: 60_000,
        onReport: (r) => {
          reports.push(r);
          done.open();
        },
      });
      await done.opened;
      await runner.stop();
      expect(reports).toEqual([expect.objectContaining({ ran: true, merged: 1 })]);
      expect(runner.lastReport).toMatchObject({ merged: 1 });
      expect(runner.lastError).toBeUndefined();
      expect(await current(store, 'a')).toEqual(['Ada likes tea']);
    });

    it('goes on after a failed pass: the error goes to onError and lastError', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a' });
      await memory.remember({ text: 'Ada likes tea' });
      await memory.remember({ text: 'ada likes tea' }, { allowDuplicate: true });
      const failure = new Error('the model is down');
      let calls = 0;
      const errors: unknown[] = [];
      const done = gate();
      const runner = memory.startConsolidation({
        intervalMs: 1,
        rule: (group) => {
          if (++calls === 1) throw failure;
          return defaultConsolidationRule(group, {});
        },
        onError: (e) => errors.push(e),
        onReport: (r) => {
          if (r.merged > 0) done.open();
        },
      });
      await done.opened;
      await runner.stop();
      expect(errors).toEqual([failure]);
      expect(runner.lastError).toBe(failure);
      expect(runner.lastReport).toMatchObject({ merged: 1 });
      expect(await current(store, 'a')).toEqual(['Ada likes tea']);
    });

    it('refuses bad options and bad decisions with INVALID_ARGUMENT, closing nothing of the group', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a' });
      const a = await memory.remember({ text: 'Ada likes tea', validFrom: day(5) });
      const b = await memory.remember(
        { text: 'ada likes tea', validFrom: day(2) },
        { allowDuplicate: true },
      );
      const elsewhere = await memory.remember({ text: 'Bob likes tea' });
      const code = async (p: Promise<unknown>) => {
        const e = await rejects(p);
        expect(isCairnError(e) && e.code).toBe('INVALID_ARGUMENT');
        return e;
      };
      for (const bad of [
        { scope: 'all' },
        { similarity: 2 },
        { similarity: 0 },
        { limit: 0 },
        { leaseTtlMs: -1 },
        { rule: 'llm' },
        { entityId: '' },
        { owner: ' ' },
      ])
        await code(memory.consolidate(bad as never));
      await code(memory.consolidate(null as never));
      for (const bad of [{ intervalMs: 0 }, { onReport: 1 }, { every: 5 }])
        expect(() => memory.startConsolidation(bad as never)).toThrow(
          expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
        );
      const decide =
        (decisions: unknown): ConsolidationRule =>
        () =>
          decisions as never;
      for (const decisions of [
        'merge',
        [{ action: 'delete', ids: [a.id] }],
        [{ action: 'merge', keep: a.id, duplicates: [elsewhere.id] }],
        [{ action: 'merge', keep: a.id, duplicates: [a.id] }],
        [{ action: 'merge', keep: a.id, duplicates: [] }],
        [{ action: 'merge', keep: a.id, duplicates: [b.id], why: 'x' }],
        // Valid first, invalid second: neither is applied.
        [
          { action: 'merge', keep: a.id, duplicates: [b.id] },
          { action: 'supersede', old: a.id, by: 'nobody' },
        ],
        // b starts before a: it cannot replace it.
        [{ action: 'supersede', old: a.id, by: b.id }],
        [{ action: 'keep', reason: 7 }],
      ])
        await code(memory.consolidate({ rule: decide(decisions) }));
      expect(await current(store, 'a')).toEqual([
        'Ada likes tea',
        'Bob likes tea',
        'ada likes tea',
      ]);
      expect((await store.getLease(consolidationLeaseKey('a')))?.releasedAt).not.toBeNull();
    });
  });
}
