import { isCairnError, type Message } from '@cairn/core';
import type { Store } from '@cairn/store';
import type { TestStoreKind } from '@cairn/store/testing';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type CairnThread, openThread, stateAsOf, type ThreadEvent } from '../src/index.js';
import { describeRetentionDifferential } from './retention-suite.js';
import { Research } from './schema.js';
import { describeSchemaVersions } from './schema-versions.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function code(p: Promise<unknown> | (() => unknown)): Promise<string> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    return isCairnError(e) ? e.code : `not a CairnError: ${String(e)}`;
  }
  return 'no error';
}

const texts = (ms: Message[]) => ms.map((m) => m.data);

/** The same store, but `hook` runs (another writer, say) before each save's write starts. */
function beforeSave(store: Store, hook: () => unknown): Store {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'addMessagesOnBranch') {
        return async (...args: Parameters<Store['addMessagesOnBranch']>) => {
          await hook();
          return target.addMessagesOnBranch(...args);
        };
      }
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

/**
 * The engine's behaviour on one store. Each store runs it with one line:
 * `describeThreadEngine({ name, create, destroy })`. `storedThreads`: how many threads the
 * schema-version test writes under v1 and reads under v2 (fewer on slower stores). Default 200.
 */
export function describeThreadEngine(
  s: TestStoreKind,
  options: { storedThreads?: number } = {},
): void {
  describe.skipIf(Boolean(s.skip))(`@cairn/thread on ${s.name}`, () => {
    let store: Store;
    const open = (o: Partial<Parameters<typeof openThread<typeof Research>>[1]> = {}) =>
      openThread(store, { schema: Research, ...o });
    const say = async (t: CairnThread<typeof Research>, ...data: string[]) => {
      t.add(data.map((d, i) => ({ role: i % 2 ? 'assistant' : 'user', data: d })));
      return t.save();
    };

    beforeAll(async () => {
      store = await s.create();
    }, 60_000);
    afterAll(async () => {
      if (store) await s.destroy(store);
    }, 60_000);

    describe('opening', () => {
      it('creates a thread with an active main branch and the initial state', async () => {
        const t = await open({ resourceId: 'user-1', title: 'Cairns' });
        expect(t.branchName).toBe('main');
        expect(t.head).toBeNull();
        expect(t.state).toEqual({ keyInsights: [], notes: {}, counter: 0 });
        const rec = await store.getThread(t.id);
        expect(rec?.resourceId).toBe('user-1');
        expect(rec?.title).toBe('Cairns');
        expect((await store.getActiveBranch(t.id))?.id).toBe(t.branchId);
      });

      it('reopens a thread by id on its active branch with its state', async () => {
        const a = await open();
        await say(a, 'hi');
        await a.update({ objective: 'stones' });
        const b = await open({ threadId: a.id });
        expect(b.branchId).toBe(a.branchId);
        expect(b.head).toBe(a.head);
        expect(b.state.objective).toBe('stones');
        expect(texts(await b.history())).toEqual(['hi']);
      });

      it('creates a thread with a given id, and opens a named branch (NOT_FOUND for an unknown one)', async () => {
        const id = `t-${Math.random().toString(36).slice(2)}`;
        const a = await open({ threadId: id });
        expect(a.id).toBe(id);
        await say(a, 'x');
        await a.btw();
        const b = await open({ threadId: id, branch: 'main-v2' });
        expect(b.branchName).toBe('main-v2');
        expect((await store.getActiveBranch(id))?.name).toBe('main-v2');
        expect(await code(open({ threadId: id, branch: 'nope' }))).toBe('NOT_FOUND');
      });

      it('rejects a schema not made with defineState with INVALID_ARGUMENT', async () => {
        expect(await code(openThread(store, { schema: {} as never }))).toBe('INVALID_ARGUMENT');
        expect(await code(openThread(store, null as never))).toBe('INVALID_ARGUMENT');
        expect(await code(openThread(store, { maxRetries: -1 }))).toBe('INVALID_ARGUMENT');
      });

      it('opens without a schema for plain history: messages and branches, no state fields', async () => {
        const t = await openThread(store);
        expect(t.state).toEqual({});
        t.add([
          { role: 'user', data: 'hi' },
          { role: 'assistant', data: 'hello' },
        ]);
        const [hi] = await t.save();
        expect(await code(t.update({ counter: 1 } as never))).toBe('INVALID_UPDATE');
        // The same thread opened with a schema sees the messages and its own defaults.
        const typed = await open({ threadId: t.id });
        expect(typed.state).toEqual({ keyInsights: [], notes: {}, counter: 0 });
        expect(texts(await typed.history())).toEqual(['hi', 'hello']);
        const again = await openThread(store, { threadId: t.id });
        expect(texts(await again.history())).toEqual(['hi', 'hello']);
        await again.rewind(hi!.id);
        expect(again.branchName).toBe('main-v2');
        expect(await again.stateAt(hi!.id)).toEqual({});
        expect(texts(await again.history())).toEqual(['hi']);
      });
    });

    describe('messages', () => {
      it('save chains pending messages after the head; history is root to head', async () => {
        const t = await open();
        t.add({ role: 'user', data: 'one' });
        t.add([
          { role: 'assistant', data: 'two' },
          { role: 'user', type: 'note', data: { text: 'three' } },
        ]);
        expect(t.pending).toHaveLength(3);
        const saved = await t.save();
        expect(saved.map((m) => m.depth)).toEqual([0, 1, 2]);
        expect(saved[1]!.parentId).toBe(saved[0]!.id);
        expect(t.pending).toHaveLength(0);
        expect(t.head).toBe(saved[2]!.id);
        await say(t, 'four');
        expect(texts(await t.history())).toEqual(['one', 'two', { text: 'three' }, 'four']);
        expect(texts(await t.history({ limit: 2 }))).toEqual([{ text: 'three' }, 'four']);
        expect((await t.history())[2]!.type).toBe('note');
        expect(await t.save()).toEqual([]);
      });

      it('save() stores what was pending when it was called; later adds wait for the next save', async () => {
        const t = await open();
        t.add({ role: 'user', data: 'first' });
        const saving = t.save();
        t.add({ role: 'user', data: 'second' });
        expect(texts(await saving)).toEqual(['first']);
        expect(t.pending.map((p) => p.data)).toEqual(['second']);
        await t.save();
        expect(texts(await t.history())).toEqual(['first', 'second']);
      });

      it('rejects bad messages at add, and a failing save stores nothing and keeps pending', async () => {
        const t = await open();
        expect(await code(() => t.add({ role: '', data: 'x' }))).toBe('INVALID_ARGUMENT');
        expect(await code(() => t.add({ role: 'user', data: { bad: undefined } as never }))).toBe(
          'INVALID_ARGUMENT',
        );
        expect(await code(() => t.add({ role: 'user', data: Number.NaN }))).toBe(
          'INVALID_ARGUMENT',
        );
        expect(t.pending).toHaveLength(0);
        const other = await open();
        const [foreign] = await say(other, 'elsewhere');
        t.add([
          { role: 'user', data: 'ok' },
          { id: foreign!.id, role: 'user', data: 'steal' },
        ]);
        expect(await code(t.save())).toBe('INVALID_ARGUMENT');
        expect(await t.history()).toEqual([]);
        expect(t.pending).toHaveLength(2);
      });

      it('add() checks a message as save() would: what save() refuses never becomes pending', async () => {
        const t = await open();
        const long = 'x'.repeat(201);
        const refused: Array<[string, unknown]> = [
          ['a blank role', { role: '   ', data: 'x' }],
          ['a 201-character role', { role: long, data: 'x' }],
          ['a 201-character id', { id: long, role: 'user', data: 'x' }],
          ['an empty id', { id: '', role: 'user', data: 'x' }],
          ['a createdAt that is not a number', { role: 'user', data: 'x', createdAt: 'yesterday' }],
          ['a non-finite createdAt', { role: 'user', data: 'x', createdAt: Number.NaN }],
          ['a type that is not a string', { role: 'user', type: 5, data: 'x' }],
          ['no data', { role: 'user' }],
          ['not an object', 'hello'],
        ];
        for (const [what, m] of refused) {
          expect([what, await code(() => t.add(m as never))]).toEqual([what, 'INVALID_ARGUMENT']);
        }
        // One id twice: the store's batch rule (CONFLICT), within one add or against pending.
        expect(
          await code(() =>
            t.add([
              { id: 'same', role: 'user', data: 1 },
              { id: 'same', role: 'user', data: 2 },
            ]),
          ),
        ).toBe('CONFLICT');
        expect(t.pending).toHaveLength(0);
        const [ok] = t.add({ role: 'user', data: 'ok', createdAt: 1_700_000_000_000 });
        expect(await code(() => t.add({ id: ok!.id, role: 'user', data: 'again' }))).toBe(
          'CONFLICT',
        );
        const saved = await t.save();
        expect(saved.map((m) => [m.data, m.createdAt])).toEqual([['ok', 1_700_000_000_000]]);
        await say(t, 'later');
        expect(texts(await t.history())).toEqual(['ok', 'later']);
      });

      it('two engines saving to one branch never lose a message (A1, A2 / B1)', async () => {
        for (const order of ['A2 saved first', 'A2 saved while B saves', 'both at once'] as const) {
          const a = await open();
          await say(a, 'A1');
          // B opened after A1; its store lets A save A2 just before B's save writes
          let hook: (() => Promise<unknown>) | null = null;
          const b = await openThread(
            beforeSave(store, () => hook?.()),
            { schema: Research, threadId: a.id },
          );
          a.add({ role: 'user', data: 'A2' });
          b.add({ role: 'user', data: 'B1' });
          if (order === 'A2 saved first') {
            await a.save();
            await b.save();
          } else if (order === 'A2 saved while B saves') {
            let a2: string | undefined;
            hook = async () => {
              hook = null;
              a2 = (await a.save())[0]!.id;
            };
            const [b1] = await b.save();
            expect(b1!.parentId).toBe(a2); // re-parented onto A2
          } else {
            await Promise.all([b.save(), a.save()]);
          }
          const stored = texts(
            await store.getChain((await store.getBranchById(a.branchId))!.headMessageId!),
          );
          expect(stored).toHaveLength(3);
          expect(stored[0]).toBe('A1');
          expect([...stored].sort()).toEqual(['A1', 'A2', 'B1']);
          if (order !== 'both at once') expect(stored).toEqual(['A1', 'A2', 'B1']);
          expect(texts(await a.history())).toEqual(stored);
          expect(texts(await b.history())).toEqual(stored);
        }
      });

      it("save({ onConflict: 'fail' }) throws CONFLICT when another writer moved the head, keeping pending", async () => {
        const a = await open();
        await say(a, 'A1');
        let hook: (() => Promise<unknown>) | null = null;
        const b = await openThread(
          beforeSave(store, () => hook?.()),
          { schema: Research, threadId: a.id },
        );
        a.add({ role: 'user', data: 'A2' });
        b.add({ role: 'user', data: 'B1' });
        hook = () => {
          hook = null;
          return a.save();
        };
        expect(await code(b.save({ onConflict: 'fail' }))).toBe('CONFLICT');
        expect(b.pending.map((p) => p.data)).toEqual(['B1']);
        expect(texts(await a.history())).toEqual(['A1', 'A2']);
        await b.save();
        expect(texts(await a.history())).toEqual(['A1', 'A2', 'B1']);
      });

      it('a save that lost a race, its user forgotten before it tries again, is FORGOTTEN', async () => {
        const resourceId = `user-${Date.now()}-${Math.random()}`;
        const a = await open({ resourceId });
        await say(a, 'A1');
        let hook: (() => Promise<unknown>) | null = null;
        const b = await openThread(
          beforeSave(store, () => hook?.()),
          { schema: Research, threadId: a.id },
        );
        a.add({ role: 'user', data: 'A2' });
        b.add({ role: 'user', data: 'B1' });
        // B's first write loses to A's; then, before B tries again, the user is forgotten.
        hook = async () => {
          hook = null;
          await a.save();
          const getBranchById = store.getBranchById.bind(store);
          vi.spyOn(store, 'getBranchById').mockImplementationOnce(async (id) => {
            await store.forget({ resourceId });
            return getBranchById(id);
          });
        };
        expect(await code(b.save())).toBe('FORGOTTEN');
        vi.restoreAllMocks();
      });

      it('saving an edit of a stored message makes a new branch from its parent with a new id', async () => {
        const t = await open();
        const [m1, m2, m3] = await say(t, 'q1', 'a1', 'q2');
        await t.update({ counter: 1 });
        t.add({ id: m2!.id, role: 'assistant', data: 'a1 (edited)' });
        t.add({ role: 'user', data: 'q2 again' });
        const [edit, after] = await t.save();
        expect(t.branchName).toBe('main-v2');
        expect(edit!.id).not.toBe(m2!.id);
        expect(edit!.parentId).toBe(m1!.id);
        expect(after!.parentId).toBe(edit!.id);
        expect(texts(await t.history())).toEqual(['q1', 'a1 (edited)', 'q2 again']);
        // the original and its branch are untouched
        expect(await store.getMessage(m2!.id)).toMatchObject({ data: 'a1', parentId: m1!.id });
        const main = await store.getBranch(t.id, 'main');
        expect(main!.headMessageId).toBe(m3!.id);
        expect(texts(await store.getChain(main!.headMessageId!))).toEqual(['q1', 'a1', 'q2']);
        // the edit's branch starts from the state as of the parent (before counter: 1)
        expect(t.state.counter).toBe(0);
      });

      it('an edit of the root message starts a branch with no head', async () => {
        const t = await open();
        const [root] = await say(t, 'first', 'reply');
        t.add({ id: root!.id, role: 'user', data: 'first, edited' });
        const [edit] = await t.save();
        expect(edit!.parentId).toBeNull();
        expect(t.branchName).toBe('main-v2');
        expect(texts(await t.history())).toEqual(['first, edited']);
        expect(
          texts(await store.getChain((await store.getBranch(t.id, 'main'))!.headMessageId!)),
        ).toEqual(['first', 'reply']);
      });
    });

    describe('branches', () => {
      it('rewind names main-v2, main-v3, then main-v4 from main-v2, switches and drops pending', async () => {
        const t = await open();
        const [m1] = await say(t, 'a', 'b', 'c');
        t.add({ role: 'user', data: 'unsaved' });
        const v2 = await t.rewind(m1!.id);
        expect(v2.name).toBe('main-v2');
        expect(t.branchName).toBe('main-v2');
        expect(t.pending).toHaveLength(0);
        expect(texts(await t.history())).toEqual(['a']);
        expect((await store.getActiveBranch(t.id))?.name).toBe('main-v2');
        await t.switchBranch('main');
        expect((await t.rewind(m1!.id)).name).toBe('main-v3');
        // A fork of main-v2 is named from its root, main: the next number, not main-v2-v2.
        await t.switchBranch('main-v2');
        expect((await t.rewind(m1!.id)).name).toBe('main-v4');
        await t.switchBranch('main');
        expect((await t.rewind(m1!.id)).name).toBe('main-v5');
        expect((await t.branches()).map((b) => b.name)).toEqual([
          'main',
          'main-v2',
          'main-v3',
          'main-v4',
          'main-v5',
        ]);
        expect(await code(t.rewind('no-such-message'))).toBe('NOT_FOUND');
      });

      it('rewind(null) starts an empty branch with the initial state; the old one keeps its messages', async () => {
        const t = await open();
        await say(t, 'a', 'b');
        await t.update({ objective: 'x' });
        const empty = await t.rewind(null);
        expect(empty).toMatchObject({ name: 'main-v2', headMessageId: null, isActive: true });
        expect(await t.history()).toEqual([]);
        expect(t.state.objective).toBeUndefined();
        await say(t, 'c');
        expect(texts(await t.history())).toEqual(['c']);
        await t.switchBranch('main');
        expect(texts(await t.history())).toEqual(['a', 'b']);
        expect(t.state.objective).toBe('x');
      });

      it('rewind takes the next free number when the computed name exists', async () => {
        const t = await open();
        const [m1] = await say(t, 'a');
        await store.createBranch({ threadId: t.id, name: 'main-v3', headMessageId: m1!.id });
        // The highest number there is, plus one: main-v4 (main-v2 stays free).
        expect((await t.rewind(m1!.id)).name).toBe('main-v4');
      });

      it('120 rewinds, restores and btws of the active branch all succeed; names stay short and unique', async () => {
        const t = await open();
        const [m1] = await say(t, 'a', 'b');
        await t.checkpoint('start', m1!.id);
        const made: string[] = [];
        for (let i = 0; i < 120; i++) {
          const b = await (i % 3 === 0
            ? t.rewind(m1!.id)
            : i % 3 === 1
              ? t.restore('start')
              : t.btw());
          made.push(b.name);
          if (i % 3 === 2) await t.switchBranch(b.name);
        }
        expect(made).toEqual(Array.from({ length: 120 }, (_, i) => `main-v${i + 2}`));
        expect(t.branchName).toBe('main-v121');
        expect(texts(await t.history())).toEqual(['a']);
      }, 60_000);

      it('a branch named near the length limit forks to names that fit, 120 times over', async () => {
        // 199 characters, with a surrogate pair where the first cut falls: it must not split it.
        const long = `${'b'.repeat(196)}😀c`;
        const t = await open({ branch: long });
        const [m1] = await say(t, 'a');
        const names = new Set<string>([long]);
        for (let i = 0; i < 120; i++) {
          const b = await t.rewind(m1!.id);
          expect(b.name.length).toBeLessThanOrEqual(200);
          expect(b.name.isWellFormed()).toBe(true);
          names.add(b.name);
        }
        expect(names.size).toBe(121);
        expect((await t.branches()).map((b) => b.name)).toEqual([...names]);
      }, 60_000);

      it('two engines rewinding or btw-ing at once both succeed with distinct names', async () => {
        const a = await open();
        const [m1] = await say(a, 'a', 'b');
        const b = await open({ threadId: a.id });
        const [x, y] = await Promise.all([a.rewind(m1!.id), b.rewind(m1!.id)]);
        expect(new Set([x.name, y.name])).toEqual(new Set(['main-v2', 'main-v3']));
        const c = await open({ threadId: a.id, branch: 'main' });
        const d = await open({ threadId: a.id, branch: 'main' });
        const [p, q] = await Promise.all([c.btw(), d.btw()]);
        expect(p.name).not.toBe(q.name);
        expect(new Set([p.name, q.name])).toEqual(new Set(['main-v4', 'main-v5']));
      });

      it('btw branches at the head without switching and keeps pending; the branch starts with the state', async () => {
        const t = await open();
        const [, m2] = await say(t, 'a', 'b');
        await t.update({ keyInsights: ['x'] });
        t.add({ role: 'user', data: 'still pending' });
        const side = await t.btw();
        expect(side.name).toBe('main-v2');
        expect(side.headMessageId).toBe(m2!.id);
        expect(t.branchName).toBe('main');
        expect(t.pending.map((p) => p.data)).toEqual(['still pending']);
        await t.save();
        expect(texts(await t.history())).toEqual(['a', 'b', 'still pending']);
        await t.update({ keyInsights: ['y'] });
        await t.switchBranch('main-v2');
        expect(t.state.keyInsights).toEqual(['x']);
        expect(texts(await t.history())).toEqual(['a', 'b']);
      });

      it('switchBranch activates the branch, loads its state and drops pending; NOT_FOUND for unknown', async () => {
        const t = await open();
        const [m1] = await say(t, 'a');
        await t.update({ objective: 'main objective' });
        await t.rewind(m1!.id);
        await t.update({ objective: 'side objective' });
        t.add({ role: 'user', data: 'dropped' });
        await t.switchBranch('main');
        expect(t.pending).toHaveLength(0);
        expect(t.state.objective).toBe('main objective');
        expect((await store.getActiveBranch(t.id))?.name).toBe('main');
        await t.switchBranch('main-v2');
        expect(t.state.objective).toBe('side objective');
        expect(await code(t.switchBranch('missing'))).toBe('NOT_FOUND');
        expect(t.branchName).toBe('main-v2');
      });

      it('lists branches in creation order, which does not depend on the clock', async () => {
        const t = await open();
        const [m1] = await say(t, 'a');
        for (let i = 0; i < 4; i++) await t.btw();
        const names = (await t.branches()).map((b) => b.name);
        expect(names).toEqual(['main', 'main-v2', 'main-v3', 'main-v4', 'main-v5']);
        expect(m1).toBeDefined();
      });
    });

    describe('checkpoints', () => {
      it('checkpoint bookmarks the head; restore rewinds to it and never moves an existing branch', async () => {
        const t = await open();
        const [, m2] = await say(t, 'a', 'b');
        await t.update({ counter: 2 });
        const cp = await t.checkpoint('before-c');
        expect(cp.messageId).toBe(m2!.id);
        const [, m4] = await say(t, 'c', 'd');
        await t.update({ counter: 4 });
        const restored = await t.restore('before-c');
        expect(restored.name).toBe('main-v2');
        expect(t.branchName).toBe('main-v2');
        expect(texts(await t.history())).toEqual(['a', 'b']);
        expect(t.state.counter).toBe(2);
        expect((await store.getBranch(t.id, 'main'))!.headMessageId).toBe(m4!.id);
        expect((await t.checkpoints()).map((c) => c.name)).toEqual(['before-c']);
        // saving the name again moves it
        await t.checkpoint('before-c', m4!.id);
        expect((await t.checkpoints())[0]!.messageId).toBe(m4!.id);
        expect(await code(t.restore('missing'))).toBe('NOT_FOUND');
        const empty = await open();
        expect(await code(empty.checkpoint('x'))).toBe('INVALID_ARGUMENT');
      });
    });

    describe('state', () => {
      it('update merges through reducers and commits each change', async () => {
        const t = await open();
        await t.update({ keyInsights: ['a', 'b'], notes: { x: '1' } });
        await t.update({ keyInsights: ['b', 'c'], notes: { y: '2' }, counter: 3 });
        expect(t.state).toEqual({
          keyInsights: ['a', 'b', 'c'],
          notes: { x: '1', y: '2' },
          counter: 3,
        });
        const commits = await store.getStateCommits(t.branchId);
        expect(commits.map((c) => c.version)).toEqual([1, 2]);
        expect(commits[1]!.update).toEqual({
          keyInsights: ['b', 'c'],
          notes: { y: '2' },
          counter: 3,
        });
        expect(t.stateVersion).toBe(2);
        const again = await open({ threadId: t.id });
        expect(again.state).toEqual(t.state);
      });

      it('state keys named like Object.prototype members are INVALID_UPDATE naming the field', async () => {
        const t = await open();
        await t.update({ counter: 1 });
        const updates: Array<[string, unknown]> = [
          ['constructor', { constructor: 1 }],
          ['toString', { toString: 'x' }],
          ['valueOf', { valueOf: 2, counter: 5 }],
          ['__proto__', JSON.parse('{"__proto__": {"counter": 7}}')],
          ['__proto__', JSON.parse('{"counter": 8, "__proto__": {"counter": 9}}')],
        ];
        for (const [name, update] of updates) {
          let error: unknown;
          await t.update(update as never).catch((e: unknown) => {
            error = e;
          });
          expect(isCairnError(error, 'INVALID_UPDATE')).toBe(true);
          expect((error as { details: unknown }).details).toEqual({ field: name });
          expect((error as Error).message).toContain(`"${name}"`);
        }
        expect((await store.getStateCommits(t.branchId)).length).toBe(1);
        expect(t.state.counter).toBe(1);
        const turn = await t.beginTurn();
        expect(await code(turn.update({ toString: 'x' } as never))).toBe('INVALID_UPDATE');
        await turn.finish();
      });

      it('a bad update is INVALID_UPDATE and writes nothing', async () => {
        const t = await open();
        await t.update({ counter: 1 });
        expect(await code(t.update({ nope: 1 } as never))).toBe('INVALID_UPDATE');
        expect(await code(t.update({ files: ['x'] } as never))).toBe('INVALID_UPDATE');
        expect(await code(t.update({ keyInsights: 'x' } as never))).toBe('INVALID_UPDATE');
        expect(await code(t.update({ counter: Number.POSITIVE_INFINITY }))).toBe('INVALID_UPDATE');
        expect((await store.getStateCommits(t.branchId)).length).toBe(1);
        expect(t.state.counter).toBe(1);
      });

      it('an update nested far too deep is INVALID_UPDATE, not a stack overflow', async () => {
        const t = await open();
        let deep: unknown = 'leaf';
        for (let i = 0; i < 20_000; i++) deep = { d: deep };
        expect(await code(t.update({ objective: deep } as never))).toBe('INVALID_UPDATE');
        expect(await store.getStateCommits(t.branchId)).toEqual([]);
        await t.update({ counter: 1 });
        expect(t.state.counter).toBe(1);
      });

      it('updates apply in call order, one at a time, and a failing one does not block the rest', async () => {
        const t = await open();
        const results = await Promise.allSettled([
          t.update({ objective: 'first', keyInsights: ['1'] }),
          t.update({ nope: true } as never),
          t.update({ objective: 'third', keyInsights: ['3'] }),
          t.update({ keyInsights: ['4'] }),
        ]);
        expect(results.map((r) => r.status)).toEqual([
          'fulfilled',
          'rejected',
          'fulfilled',
          'fulfilled',
        ]);
        expect(t.state.objective).toBe('third');
        expect(t.state.keyInsights).toEqual(['1', '3', '4']);
        expect((await store.getStateCommits(t.branchId)).map((c) => c.update.keyInsights)).toEqual([
          ['1'],
          ['3'],
          ['4'],
        ]);
      });

      it('re-reads neither head nor state after its own writes; another engine adopts them', async () => {
        const reads: string[] = [];
        const counting: Store = new Proxy(store, {
          get(target, prop, receiver) {
            const v = Reflect.get(target, prop, receiver);
            if (typeof v !== 'function') return v;
            return (...args: unknown[]) => {
              if (prop === 'getBranchById' || prop === 'getStateCommits') reads.push(prop);
              return v.apply(target, args);
            };
          },
        });
        const t = await openThread(counting, { schema: Research });
        const other = await open({ threadId: t.id });
        t.add({ role: 'user', data: 'hi' });
        await t.save();
        await t.update({ counter: 1 });
        await t.close();
        expect(reads).toEqual([]);
        await vi.waitFor(() => expect(other.stateVersion).toBe(1));
        expect(other.head).toBe(t.head);
        expect(other.state.counter).toBe(1);
      });

      it('two engines updating one branch lose nothing: the stale one re-reads and re-applies', async () => {
        const a = await open();
        const b = await open({ threadId: a.id });
        await a.update({ keyInsights: ['from a'] });
        // b has not seen a's commit unless notified; either way its update must merge
        await b.update({ keyInsights: ['from b'] });
        await a.update({ keyInsights: ['a again'] });
        const fresh = await open({ threadId: a.id });
        expect(fresh.state.keyInsights).toEqual(['from a', 'from b', 'a again']);
        expect(a.state.keyInsights).toEqual(['from a', 'from b', 'a again']);
      });

      it('a writer that always wins the race does not starve an update: it queues on the branch lock', async () => {
        const t0 = await open();
        // A real writer that commits on the branch just before each of the engine's attempts.
        let rival = 0;
        const racing: Store = new Proxy(store, {
          get(target, prop, receiver) {
            if (prop === 'appendStateCommit') {
              return async (
                commit: Parameters<Store['appendStateCommit']>[0],
                expected: number,
              ) => {
                const latest = await target.getLatestStateCommit(commit.branchId);
                await target.appendStateCommit(
                  {
                    branchId: commit.branchId,
                    messageId: null,
                    update: { keyInsights: [`rival ${rival++}`] },
                  },
                  latest?.version ?? 0,
                );
                return target.appendStateCommit(commit, expected);
              };
            }
            const v = Reflect.get(target, prop, receiver);
            return typeof v === 'function' ? v.bind(target) : v;
          },
        });
        // One retry is enough: after its first conflict the update waits for the branch's
        // lock (store.lockBranch) and commits under it; the rival's next commit waits.
        const t = await openThread(racing, { schema: Research, threadId: t0.id, maxRetries: 1 });
        expect(await t.update({ keyInsights: ['mine'] })).toMatchObject({
          keyInsights: ['rival 0', 'mine'],
        });
        expect(rival).toBe(1);
        const fresh = await open({ threadId: t0.id });
        expect(fresh.state.keyInsights).toEqual(['rival 0', 'mine']);
        expect(await code(t.update({ keyInsights: ['again'] }))).toBe('no error');
        expect(t.state.keyInsights).toEqual(['rival 0', 'mine', 'rival 1', 'again']);
      });

      it('stateAt answers for any message on the lineage, through the parent branch before a fork', async () => {
        const t = await open();
        const [m1] = await say(t, 'm1');
        await t.update({ keyInsights: ['a'] });
        const [m2] = await say(t, 'm2');
        await t.update({ keyInsights: ['b'] });
        const [m3] = await say(t, 'm3');
        expect(await t.stateAt(m1!.id)).toMatchObject({ keyInsights: ['a'] });
        expect(await t.stateAt(m2!.id)).toMatchObject({ keyInsights: ['a', 'b'] });
        expect(await t.stateAt(m3!.id)).toMatchObject({ keyInsights: ['a', 'b'] });
        // rewind to m2: the new branch starts with the state as of m2
        await t.rewind(m2!.id);
        expect(t.state.keyInsights).toEqual(['a', 'b']);
        const first = (await store.getStateCommits(t.branchId))[0]!;
        expect(first).toMatchObject({
          version: 1,
          messageId: m2!.id,
          snapshot: { keyInsights: ['a', 'b'] },
        });
        await t.update({ keyInsights: ['c'] });
        const [m4] = await say(t, 'm4');
        expect(await t.stateAt(m4!.id)).toMatchObject({ keyInsights: ['a', 'b', 'c'] });
        // before the fork: resolved through main
        expect(await t.stateAt(m1!.id)).toMatchObject({ keyInsights: ['a'] });
        // m3 is on main only
        expect(await code(t.stateAt(m3!.id))).toBe('NOT_FOUND');
        expect(await code(t.stateAt('missing'))).toBe('NOT_FOUND');
        // rewinding to m1 from main-v2 forks the state as of m1
        await t.rewind(m1!.id);
        expect(t.branchName).toBe('main-v3');
        expect(t.state.keyInsights).toEqual(['a']);
      });

      it('stateAsOf reads any branch lineage without opening or switching it', async () => {
        const t = await open();
        const [m0] = await say(t, 'm0');
        await t.update({ keyInsights: ['a'] });
        const [m1] = await say(t, 'm1');
        await t.update({ keyInsights: ['b'] });
        const [m2] = await say(t, 'm2');
        const main = t.branchId;
        await t.rewind(m1!.id);
        await t.update({ keyInsights: ['z'] });
        const [m3] = await say(t, 'm3');
        const v2 = t.branchId;
        const at = (branchId: string, messageId: string) =>
          stateAsOf(store, Research, { branchId, messageId });
        expect(await at(main, m2!.id)).toMatchObject({ keyInsights: ['a', 'b'] });
        expect(await at(v2, m3!.id)).toMatchObject({ keyInsights: ['a', 'b', 'z'] });
        // before main-v2's fork it reads main's commits
        expect(await at(v2, m0!.id)).toMatchObject({ keyInsights: ['a'] });
        expect(await code(at(v2, m2!.id))).toBe('NOT_FOUND');
        expect(await code(at('nope', m1!.id))).toBe('NOT_FOUND');
        // reading did not switch the active branch
        expect((await store.getActiveBranch(t.id))?.id).toBe(v2);
      });

      it('a branch made outside the engine reads its parent state as of the fork, past the fork too', async () => {
        const t = await open();
        const [m0] = await say(t, 'm0');
        await t.update({ keyInsights: ['a'] });
        await say(t, 'm1');
        await t.update({ keyInsights: ['b'] });
        const main = t.branch;
        await t.close();
        // Forked at m0 by a plain store call (an inspector's "fork here"), then grown.
        const side = await store.createBranch({
          threadId: main.threadId,
          name: 'side',
          headMessageId: m0!.id,
          parentBranchId: main.id,
        });
        const [s1] = await store.addMessages([
          { threadId: main.threadId, parentId: m0!.id, role: 'user', data: 's1' },
        ]);
        await store.moveHead(side.id, m0!.id, s1!.id);
        const asOf = await stateAsOf(store, Research, { branchId: side.id, messageId: s1!.id });
        expect(asOf.keyInsights).toEqual(['a']);
        const opened = await openThread(store, {
          schema: Research,
          threadId: main.threadId,
          branch: 'side',
        });
        expect(opened.state).toEqual(asOf);
        await opened.close();
      });

      it('rewinding to a message on another branch forks the state as of it there', async () => {
        const t = await open();
        const [m1] = await say(t, 'm1');
        await t.rewind(m1!.id);
        await t.update({ objective: 'side' });
        const [s1] = await say(t, 's1');
        await t.switchBranch('main');
        expect(t.state.objective).toBeUndefined();
        await t.rewind(s1!.id);
        expect(t.state.objective).toBe('side');
      });

      it('a branch forked from another branch reads, before its fork, the lineage that holds its fork', async () => {
        const t = await open();
        const [m1] = await say(t, 'm1');
        await t.update({ objective: 'a' });
        await say(t, 'm2');
        await t.rewind(m1!.id); // main-v2: objective 'a' as of m1
        await t.update({ objective: 'b' });
        const [s2] = await say(t, 's2');
        await t.update({ objective: 'c' });
        const [s3] = await say(t, 's3');
        await t.switchBranch('main');
        // From main, to a message only main-v2 holds: the new branch's past is main-v2's.
        const v3 = await t.rewind(s3!.id);
        expect(v3.parentBranchId).toBe((await store.getBranch(t.id, 'main-v2'))!.id);
        expect(await t.stateAt(s3!.id)).toMatchObject({ objective: 'c' });
        expect(await t.stateAt(s2!.id)).toMatchObject({ objective: 'c' });
        expect(await t.stateAt(m1!.id)).toMatchObject({ objective: 'b' });
        expect(await stateAsOf(store, Research, { branchId: v3.id, messageId: s2!.id })).toEqual(
          await t.stateAt(s2!.id),
        );
      });

      it('commits store the update; snapshots come from the size-aware policy, and reading replays a bounded tail', async () => {
        const t = await open({ snapshotPolicy: { maxCommits: 5 } });
        for (let i = 0; i < 23; i++) await t.update({ keyInsights: [`i${i}`] });
        const commits = await store.getStateCommits(t.branchId);
        expect(commits).toHaveLength(23);
        expect(commits.filter((c) => c.snapshot).map((c) => c.version)).toEqual([5, 10, 15, 20]);
        expect(commits[21]!.update).toEqual({ keyInsights: ['i21'] });
        expect(commits[19]!.snapshot).toMatchObject({
          keyInsights: Array.from({ length: 20 }, (_, i) => `i${i}`),
        });
        // reopening reads one snapshot and the 3 commits after it
        const reads: string[] = [];
        const counting: Store = new Proxy(store, {
          get(target, prop, receiver) {
            const v = Reflect.get(target, prop, receiver);
            if (typeof v !== 'function') return v;
            return async (...args: unknown[]) => {
              const r = await v.apply(target, args);
              if (prop === 'getStateCommits' || prop === 'getLatestStateCommit')
                reads.push(`${String(prop)}:${Array.isArray(r) ? r.length : r ? 1 : 0}`);
              return r;
            };
          },
        });
        const again = await openThread(counting, { schema: Research, threadId: t.id });
        expect(again.state).toEqual(t.state);
        expect(reads).toEqual([
          'getLatestStateCommit:1',
          'getLatestStateCommit:1',
          'getStateCommits:3',
        ]);
      });

      it('snapshots sooner when updates are large next to the state, later when small', async () => {
        const t = await open({ snapshotPolicy: { maxCommits: 1000, minBytes: 0, bytesRatio: 1 } });
        await t.update({ blob: 'x'.repeat(5000) }); // bigger than the initial state: snapshot
        for (let i = 0; i < 30; i++) await t.update({ counter: i + 1 }); // ~14 bytes each: no snapshot
        await t.update({ objective: 'y'.repeat(6000) }); // more than the 5 KB state: snapshot
        const snaps = (await store.getStateCommits(t.branchId))
          .filter((c) => c.snapshot)
          .map((c) => c.version);
        expect(snaps).toEqual([1, 32]);
      });
    });

    describe('turns', () => {
      it('beginTurn resets turn fields; steps record start, end and error; turns are stored', async () => {
        const t = await open();
        const [m] = await say(t, 'question');
        const turn = await t.beginTurn({ messageId: m!.id, source: 'web', userId: 'u1' });
        expect(turn.state).toEqual({ files: [], phase: 'idle' });
        await turn.update({ files: ['a.md'], phase: 'planning' });
        expect(await turn.step('plan', async () => 42)).toBe(42);
        await expect(
          turn.step('search', async () => {
            throw new Error('offline');
          }),
        ).rejects.toThrow('offline');
        expect(await code(turn.update({ counter: 1 } as never))).toBe('INVALID_UPDATE');
        const stored = await store.getTurn(turn.id);
        expect(stored).toMatchObject({
          messageId: m!.id,
          source: 'web',
          userId: 'u1',
          status: 'running',
          state: { files: ['a.md'], phase: 'planning' },
        });
        expect(stored!.steps.map((s) => [s.name, s.error])).toEqual([
          ['plan', null],
          ['search', 'offline'],
        ]);
        for (const s of stored!.steps) expect(s.end).toBeGreaterThanOrEqual(s.start);
        await turn.finish();
        expect((await store.getTurn(turn.id))?.status).toBe('finished');
        expect(await code(turn.update({ phase: 'late' }))).toBe('CONFLICT');
        const next = await t.beginTurn({ messageId: m!.id });
        expect(next.state).toEqual({ files: [], phase: 'idle' });
        expect(await code(t.beginTurn({ messageId: 'missing' }))).toBe('NOT_FOUND');
      });

      it('finished turns are purged by turnRetentionMs; running ones stay', async () => {
        const t = await open({ turnRetentionMs: 0 });
        const keep = await open({ threadId: t.id });
        const old = await keep.beginTurn();
        await old.finish();
        const running = await t.beginTurn();
        await sleep(5);
        const done = await t.beginTurn();
        await sleep(5);
        await done.finish();
        const ids = (await store.listTurns(t.id)).map((x) => x.id);
        expect(ids).toContain(running.id);
        expect(ids).not.toContain(old.id);
        // a turn finished under the default (24 h) retention stays
        const u = await open();
        const kept = await u.beginTurn();
        await sleep(5);
        await kept.finish();
        expect((await store.listTurns(u.id)).map((x) => x.id)).toEqual([kept.id]);
      });
    });

    describe('runs', () => {
      it('one run at a time; an expired run is taken over as stale_recovered; the old owner is refused', async () => {
        const t = await open();
        expect(await t.runStatus()).toBeNull();
        // Long enough that the calls below finish before it expires on a loaded machine.
        const r1 = await t.acquireRun({ owner: 'w1', ttlMs: 500 });
        expect(await code(t.acquireRun({ owner: 'w2', ttlMs: 500 }))).toBe('CONFLICT');
        const live = await t.runStatus();
        expect(live).toMatchObject({
          owner: 'w1',
          isRunning: true,
          lastResult: null,
          endedAt: null,
        });
        expect(live!.expiresAt).toBeGreaterThan(live!.startedAt);
        await r1.heartbeat();
        await sleep(600);
        expect((await t.runStatus())?.isRunning).toBe(false);
        const r2 = await t.acquireRun({ owner: 'w2', ttlMs: 5000 });
        const took = await t.runStatus();
        expect(took).toMatchObject({ owner: 'w2', isRunning: true, lastResult: 'stale_recovered' });
        expect(took!.recoveredFrom?.owner).toBe('w1');
        expect(took!.lastError).toContain('w1');
        expect(await code(r1.heartbeat())).toBe('CONFLICT');
        expect(await code(r1.release({ result: 'completed' }))).toBe('CONFLICT');
        await r2.heartbeat();
        const done = await r2.release({ result: 'failed', error: 'model timeout' });
        expect(done).toMatchObject({
          isRunning: false,
          lastResult: 'failed',
          lastError: 'model timeout',
        });
        const rec = await t.runStatus();
        expect(rec).toMatchObject({
          owner: 'w2',
          isRunning: false,
          lastResult: 'failed',
          lastError: 'model timeout',
        });
        expect(rec!.endedAt).not.toBeNull();
        expect(rec!.lastHeartbeatAt).toBeGreaterThanOrEqual(rec!.startedAt);
        // a released run can be taken at once, and completes
        const r3 = await t.acquireRun({ owner: 'w3', ttlMs: 5000 });
        expect((await t.runStatus())?.lastResult).toBe('failed');
        await r3.release({ result: 'completed' });
        expect(await t.runStatus()).toMatchObject({
          isRunning: false,
          lastResult: 'completed',
          lastError: null,
        });
        expect(await code(r3.release({ result: 'nope' as never }))).toBe('INVALID_ARGUMENT');
      });

      it('waits for a live run to end (waitMs), and records how that run ended', async () => {
        const t = await open();
        const r1 = await t.acquireRun({ owner: 'w1', ttlMs: 60_000 });
        const waiting = t.acquireRun({ owner: 'w2', ttlMs: 60_000, waitMs: 30_000 });
        await sleep(50);
        await r1.release({ result: 'failed', error: 'tool crashed' });
        const r2 = await waiting;
        // The record reads the run that ended while w2 waited, not the one w2 first saw.
        expect(r2.record).toMatchObject({
          owner: 'w2',
          isRunning: true,
          lastResult: 'failed',
          lastError: 'tool crashed',
          recoveredFrom: null,
        });
        expect(await t.runStatus()).toMatchObject({ owner: 'w2', lastResult: 'failed' });
        expect(await code(t.acquireRun({ owner: 'w3', ttlMs: 60_000, waitMs: 50 }))).toBe(
          'TIMEOUT',
        );
        expect(await code(t.acquireRun({ owner: 'w3', ttlMs: 10, waitMs: -1 }))).toBe(
          'INVALID_ARGUMENT',
        );
        await r2.release({ result: 'completed' });
      });
    });

    describeSchemaVersions(() => store, options.storedThreads ?? 200);
    describe('retention', () => describeRetentionDifferential(() => store));

    describe('events and version', () => {
      it('emits local events for own changes and relays other engines changes', async () => {
        const a = await open();
        const b = await open({ threadId: a.id });
        const seenA: ThreadEvent[] = [];
        const seenB: ThreadEvent[] = [];
        a.subscribe((e) => seenA.push(e));
        const off = b.subscribe((e) => seenB.push(e));
        const [m1] = await say(a, 'hello');
        await a.update({ objective: 'o' });
        await a.checkpoint('cp');
        await a.btw();
        expect(seenA.map((e) => `${e.kind}:${e.source}`)).toEqual([
          'messages:local',
          'state:local',
          'checkpoint:local',
          'branch:local',
        ]);
        const until = async (f: () => boolean) => {
          for (let i = 0; i < 200 && !f(); i++) await sleep(10);
        };
        await until(
          () =>
            b.state.objective === 'o' &&
            b.head === m1!.id &&
            seenB.some((e) => e.kind === 'checkpoint'),
        );
        expect(b.head).toBe(m1!.id);
        expect(b.state.objective).toBe('o');
        const kinds = new Set(seenB.map((e) => `${e.kind}:${e.source}`));
        expect(kinds.has('messages:remote')).toBe(true);
        expect(kinds.has('state:remote')).toBe(true);
        expect(kinds.has('checkpoint:remote')).toBe(true);
        off();
        const before = seenB.length;
        await say(a, 'more');
        await sleep(50);
        expect(seenB.length).toBe(before);
      });

      it('version changes whenever the head, the state or the branch changes', async () => {
        const t = await open();
        const seen = new Set([t.version]);
        const [m1] = await say(t, 'a');
        seen.add(t.version);
        await t.update({ counter: 1 });
        seen.add(t.version);
        const v = t.version;
        await t.update({ counter: 1 }); // no change, no commit
        expect(t.version).toBe(v);
        await t.rewind(m1!.id);
        seen.add(t.version);
        expect(seen.size).toBe(4);
      });

      it('after close, calls fail with CLOSED', async () => {
        const t = await open();
        await t.close();
        expect(await code(t.update({ counter: 1 }))).toBe('CLOSED');
        expect(await code(t.history())).toBe('CLOSED');
      });
    });
  });
}
