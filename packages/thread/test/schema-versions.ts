import {
  CairnError,
  defineState,
  field,
  isCairnError,
  reducers,
  SCHEMA_VERSION_KEY,
} from '@cairn/core';
import type { Store } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import { openThread, stateAsOf } from '../src/index.js';

/** Version 1 of a state: `name` is renamed to `title` and `score` becomes an object in version 2. */
const V1 = defineState({
  name: field<string>(),
  tags: field<string[]>({ reducer: reducers.appendUnique, default: () => [] }),
  score: field<number>({ default: () => 0 }),
});

const toV2 = {
  from: 1,
  to: 2,
  migrate: ({ name, score, ...rest }: Record<string, any>) => ({
    ...rest,
    title: name,
    score: { value: score },
  }),
};

const v2Fields = {
  title: field<string>(),
  tags: field<string[]>({ reducer: reducers.appendUnique, default: () => [] }),
  score: field<{ value: number }>({ default: () => ({ value: 0 }) }),
};

const V2 = defineState(v2Fields, { version: 2, migrations: [{ ...toV2, schema: V1 }] });
/** The same version 2 without the old schema: old updates fold through v2's reducers. */
const V2NoOldSchema = defineState(v2Fields, { version: 2, migrations: [toV2] });

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    return isCairnError(e) ? e.code : `not a CairnError: ${String(e)}`;
  }
  return 'no error';
}

/** Runs `fn` over `items`, `width` at a time. */
async function inBatches<T, R>(items: T[], width: number, fn: (x: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += width)
    out.push(...(await Promise.all(items.slice(i, i + width).map(fn))));
  return out;
}

/**
 * Versioned state schemas (`defineState(fields, { version, migrations })`) on one store:
 * states written under an older version are migrated on read, the next write records the
 * running version, and an engine of an older version refuses a newer state.
 */
export function describeSchemaVersions(getStore: () => Store, storedThreads: number): void {
  describe('state schema versions', () => {
    /** A thread written by version-1 code: two updates, two messages. */
    async function writeV1(i: number) {
      const store = getStore();
      // Odd threads store their second commit as a snapshot, even ones only updates.
      const t = await openThread(store, {
        schema: V1,
        snapshotPolicy: { maxCommits: i % 2 ? 2 : 50 },
      });
      t.add({ role: 'user', data: `hi ${i}` });
      const [m1] = await t.save();
      await t.update({ name: `thread ${i}`, tags: ['a'], score: i });
      t.add({ role: 'user', data: 'more' });
      const [m2] = await t.save();
      await t.update({ tags: ['b'], score: i + 1 });
      await t.close();
      return { i, id: t.id, branchId: t.branchId, m1: m1!.id, m2: m2!.id };
    }

    it('a v1 → v2 change (a renamed field, a changed type): every stored thread loads under v2, old points too, and nothing is rewritten by reading', async () => {
      const store = getStore();
      const written = await inBatches(
        Array.from({ length: storedThreads }, (_, i) => i),
        25,
        writeV1,
      );
      const loaded = await inBatches(written, 25, async (w) => {
        const t = await openThread(store, { schema: V2, threadId: w.id });
        expect(t.state).toEqual({
          title: `thread ${w.i}`,
          tags: ['a', 'b'],
          score: { value: w.i + 1 },
        });
        expect(t.stateVersion).toBe(2);
        const atFirst = { title: `thread ${w.i}`, tags: ['a'], score: { value: w.i } };
        expect(await t.stateAt(w.m1)).toEqual(atFirst);
        expect(await stateAsOf(store, V2, { branchId: w.branchId, messageId: w.m1 })).toEqual(
          atFirst,
        );
        await t.close();
        // Read lazily: the stored commits are still version 1's.
        const latest = await store.getLatestStateCommit(w.branchId);
        expect(latest?.version).toBe(2);
        if (latest?.snapshot)
          expect(Object.hasOwn(latest.snapshot, SCHEMA_VERSION_KEY)).toBe(false);
        return true;
      });
      expect(loaded.filter(Boolean)).toHaveLength(storedThreads);
    }, 20_000);

    it('the next v2 write records version 2; a v1 engine then refuses to write or read that state (SCHEMA_TOO_NEW) and writes nothing', async () => {
      const store = getStore();
      const w = await writeV1(7);
      const old = await openThread(store, { schema: V1, threadId: w.id });
      const t = await openThread(store, { schema: V2, threadId: w.id });
      expect(await t.update({ tags: ['c'] })).toEqual({
        title: 'thread 7',
        tags: ['a', 'b', 'c'],
        score: { value: 8 },
      });
      const upgraded = await store.getLatestStateCommit(w.branchId);
      expect(upgraded?.snapshot).toEqual({
        title: 'thread 7',
        tags: ['a', 'b', 'c'],
        score: { value: 8 },
        [SCHEMA_VERSION_KEY]: 2,
      });
      // Later v2 updates fold on that snapshot with v2's reducers.
      await t.update({ tags: ['d'], score: { value: 9 } });
      const again = await openThread(store, { schema: V2, threadId: w.id });
      expect(again.state).toEqual({
        title: 'thread 7',
        tags: ['a', 'b', 'c', 'd'],
        score: { value: 9 },
      });
      expect(await again.stateAt(w.m1)).toEqual({
        title: 'thread 7',
        tags: ['a'],
        score: { value: 7 },
      });

      // Version-1 code: opening it, or writing through an engine opened before, is refused.
      let refused: unknown;
      try {
        await openThread(store, { schema: V1, threadId: w.id });
      } catch (e) {
        refused = e;
      }
      expect(refused).toBeInstanceOf(CairnError);
      expect((refused as CairnError).code).toBe('SCHEMA_TOO_NEW');
      expect((refused as CairnError).details).toMatchObject({
        found: 2,
        supported: 1,
        threadId: w.id,
      });
      expect((refused as CairnError).message).toContain('state schema version 2');
      const before = (await store.getLatestStateCommit(w.branchId))?.version;
      expect(await codeOf(old.update({ score: 99 }))).toBe('SCHEMA_TOO_NEW');
      expect((await store.getLatestStateCommit(w.branchId))?.version).toBe(before);
      // The points it wrote itself stay readable by it; the newer ones are not.
      expect(await stateAsOf(store, V1, { branchId: w.branchId, messageId: w.m1 })).toEqual({
        name: 'thread 7',
        tags: ['a'],
        score: 7,
      });
      expect(await codeOf(stateAsOf(store, V1, { branchId: w.branchId, messageId: w.m2 }))).toBe(
        'SCHEMA_TOO_NEW',
      );
      expect(await codeOf(old.stateAt(w.m2))).toBe('SCHEMA_TOO_NEW');

      // A v2 fork from a v1 point stores its migrated state as version 2.
      const b = await again.rewind(w.m1);
      expect(again.state).toEqual({ title: 'thread 7', tags: ['a'], score: { value: 7 } });
      expect((await store.getLatestStateCommit(b.id))?.snapshot).toMatchObject({
        [SCHEMA_VERSION_KEY]: 2,
      });
      await Promise.all([old.close(), t.close(), again.close()]);
    });

    it('a v1 engine cannot switch to a branch a v2 engine wrote: the active branch stays', async () => {
      const store = getStore();
      const w = await writeV1(3);
      const old = await openThread(store, { schema: V1, threadId: w.id });
      const t = await openThread(store, { schema: V2, threadId: w.id });
      await t.btw(); // main-v2, at the head, not switched to
      await t.switchBranch('main-v2');
      await t.update({ title: 'renamed' });
      await t.switchBranch('main');
      expect(await codeOf(old.switchBranch('main-v2'))).toBe('SCHEMA_TOO_NEW');
      expect((await store.getActiveBranch(w.id))?.name).toBe('main');
      expect(old.branchName).toBe('main');
      expect(old.state).toEqual({ name: 'thread 3', tags: ['a', 'b'], score: 4 });
      await Promise.all([old.close(), t.close()]);
    });

    it('a new thread of a v2 schema records version 2 from its first commit', async () => {
      const store = getStore();
      const t = await openThread(store, { schema: V2 });
      expect(t.state).toEqual({ tags: [], score: { value: 0 } });
      await t.update({ title: 'fresh' });
      expect((await store.getLatestStateCommit(t.branchId))?.snapshot).toEqual({
        title: 'fresh',
        tags: [],
        score: { value: 0 },
        [SCHEMA_VERSION_KEY]: 2,
      });
      expect(await codeOf(openThread(store, { schema: V1, threadId: t.id }))).toBe(
        'SCHEMA_TOO_NEW',
      );
      await t.close();
    });

    it('without the old schema, stored v1 updates fold through the v2 reducer of the same name', async () => {
      const store = getStore();
      const w = await writeV1(4); // even: only updates, no snapshot
      const t = await openThread(store, { schema: V2NoOldSchema, threadId: w.id });
      expect(t.state).toEqual({ title: 'thread 4', tags: ['a', 'b'], score: { value: 5 } });
      await t.close();
    });
  });
}
