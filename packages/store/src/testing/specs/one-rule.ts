import { isCairnError, MAX_JSON_DEPTH, newId } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import type { Store } from '../../store.js';
import { encodeCursor, MAX_MEMORY_TEXT_LENGTH } from '../../validate.js';
import { type StoreConformanceOptions, useStore, withFreshStore } from '../context.js';
import { expectCode, LONGEST_NAME, makeChain, makeThread, turnOf } from '../helpers.js';

const LONE = 'Great work 😀'.slice(0, 12); // ends in a lone high surrogate, at position 11
const NUL = 'a\u0000b'; // a NUL at position 1
const INDEX_BUSTER = 'r'.repeat(2_700);

const nested = (depth: number): unknown => {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = i % 2 ? { k: v } : [v];
  return v;
};

/** Bad text in `field` at `position`: INVALID_ARGUMENT naming both. */
async function expectBadText(call: () => Promise<unknown>, field: string, position: number) {
  const e = await expectCode(call, 'INVALID_ARGUMENT');
  expect(e.message).toContain(field);
  expect(e.message).toContain(`position ${position}`);
  expect(e.details.position).toBe(position);
}

/**
 * The rules written once in the front door, which every store must answer alike: the
 * rows of issue 11's table (ended transactions, `close()` inside one, batch checks
 * before writes, one compare-and-set `details` shape, foreign cursors) and the one rule
 * for text and size (NUL and lone surrogates, index-sized ids, memory text, JSON depth,
 * keyword stop words and score scale).
 */
export function describeOneRule(options: StoreConformanceOptions): void {
  describe('one rule for every store', () => {
    const store = useStore(options);

    describe('guards and sessions', () => {
      it('deleteMemories([id, 42]) writes nothing: the batch is checked before any delete', async () => {
        const id = newId();
        await store().addMemories([{ id, agentId: 'one-rule', content: { text: 'kept' } }]);
        await expectCode(
          () => store().deleteMemories([id, 42 as unknown as string]),
          'INVALID_ARGUMENT',
        );
        expect(await store().getMemory(id)).not.toBeNull();
      });

      it('a transaction handle dies with its transaction: CLOSED, nothing written', async () => {
        let handle: Store | undefined;
        await store().transaction(async (tx) => {
          handle = tx;
        });
        const id = newId();
        await expectCode(() => handle!.createThread({ id }), 'CLOSED');
        await expectCode(() => handle!.getThread(id), 'CLOSED');
        await expectCode(() => handle!.transaction(async () => 1), 'CLOSED');
        expect(await store().getThread(id)).toBeNull();
      });

      it('tx.close() inside a transaction is INVALID_ARGUMENT and leaves the store open', async () => {
        const id = newId();
        await store().transaction(async (tx) => {
          await expectCode(() => tx.close(), 'INVALID_ARGUMENT');
          await tx.createThread({ id });
        });
        expect(await store().getThread(id)).not.toBeNull();
      });

      it('transaction() without a function is INVALID_ARGUMENT', async () => {
        for (const bad of [42, 'fn', null, undefined, {}]) {
          await expectCode(
            () => store().transaction(bad as unknown as () => Promise<void>),
            'INVALID_ARGUMENT',
          );
        }
      });

      it('a closed store answers CLOSED before it looks at the arguments', async () => {
        await withFreshStore(options, async (s) => {
          await s.close();
          await expectCode(() => s.getThread(42 as unknown as string), 'CLOSED');
          await expectCode(() => s.createThread({ id: '' }), 'CLOSED');
          await expectCode(() => s.deleteMemories('x' as unknown as string[]), 'CLOSED');
          expect(() => s.subscribe('t', () => {})).toThrow(/closed/);
          try {
            s.subscribe('t', () => {});
          } catch (e) {
            expect(isCairnError(e, 'CLOSED')).toBe(true);
          }
        });
      });

      it('a cursor this store did not issue, or a resourceId that is not an id, is INVALID_ARGUMENT', async () => {
        for (const cursor of [
          'not-a-cursor',
          encodeCursor([1.5]),
          encodeCursor(['x']),
          encodeCursor([1, 2]),
          Buffer.from('{"a":1}').toString('base64url'),
        ]) {
          await expectCode(() => store().listThreads({ cursor }), 'INVALID_ARGUMENT');
        }
        await expectCode(
          () => store().listThreads({ resourceId: 5 as unknown as string }),
          'INVALID_ARGUMENT',
        );
      });

      it('compare-and-set conflicts report { branchId, expected, actual }', async () => {
        const t = await makeThread(store());
        const [a, b] = await makeChain(store(), t.id, 2);
        const br = await store().createBranch({
          threadId: t.id,
          name: 'main',
          headMessageId: a!.id,
        });
        const head = await expectCode(() => store().moveHead(br.id, b!.id, b!.id), 'CONFLICT');
        expect(head.details).toEqual({ branchId: br.id, expected: b!.id, actual: a!.id });
        await store().appendStateCommit({ branchId: br.id, messageId: a!.id, update: { n: 1 } }, 0);
        const state = await expectCode(
          () =>
            store().appendStateCommit({ branchId: br.id, messageId: a!.id, update: { n: 2 } }, 0),
          'CONFLICT',
        );
        expect(state.details).toEqual({ branchId: br.id, expected: 0, actual: 1 });
      });
    });

    describe('text: NUL and lone surrogates are refused, naming the field and position', () => {
      it('in ids, names and titles, before anything is written', async () => {
        await expectBadText(() => store().createThread({ id: `thread-${LONE}` }), 'thread id', 18);
        expect(
          (await store().listThreads({ limit: 1000 })).items.some((t) =>
            t.id.startsWith('thread-Great'),
          ),
        ).toBe(false);
        await expectBadText(() => store().createThread({ title: NUL }), 'title', 1);
        await expectBadText(() => store().createThread({ resourceId: LONE }), 'resourceId', 11);
        const t = await makeThread(store());
        await expectBadText(
          () => store().addMessages([{ threadId: t.id, parentId: null, role: LONE, data: 'x' }]),
          'role',
          11,
        );
        await expectBadText(
          () => store().createBranch({ threadId: t.id, name: NUL, headMessageId: null }),
          'branch name',
          1,
        );
        await expectBadText(
          () => store().acquireLease({ key: NUL, owner: 'o', ttlMs: 1000 }),
          'lease key',
          1,
        );
        expect(await store().listBranches(t.id)).toEqual([]);
      });

      it('in message data, state updates, metadata and memories', async () => {
        const t = await makeThread(store());
        await expectBadText(
          () => store().addMessages([{ threadId: t.id, parentId: null, role: 'user', data: LONE }]),
          'messages[0].data',
          11,
        );
        await expectBadText(
          () =>
            store().addMessages([
              { threadId: t.id, parentId: null, role: 'user', data: 'fine' },
              { threadId: t.id, parentId: null, role: 'user', data: { text: [NUL] } },
            ]),
          'messages[1].data.text[0]',
          1,
        );
        expect(await store().getActiveBranch(t.id)).toBeNull();
        const [m] = await makeChain(store(), t.id, 1);
        const br = await store().createBranch({
          threadId: t.id,
          name: 'main',
          headMessageId: m!.id,
        });
        await expectBadText(
          () =>
            store().appendStateCommit(
              { branchId: br.id, messageId: m!.id, update: { note: LONE } },
              0,
            ),
          'update.note',
          11,
        );
        expect(await store().getStateCommits(br.id)).toEqual([]);
        await expectBadText(
          () => store().updateThread(t.id, { metadata: { [LONE]: 1 } }),
          'metadata',
          11,
        );
        await expectBadText(
          () => store().addMemories([{ agentId: 'one-rule', content: { text: `launch ${LONE}` } }]),
          'memories[0].content.text',
          18,
        );
        await expectBadText(
          () =>
            store().addMemories([
              { agentId: 'one-rule', roomId: NUL, scope: 'room', content: { text: 'x' } },
            ]),
          'memories[0].roomId',
          1,
        );
        await expectBadText(
          () => store().putTurn(turnOf(t.id, { state: { s: NUL } })),
          'turn state.s',
          1,
        );
      });

      it('in the ids a read looks for', async () => {
        await expectBadText(() => store().getThread(NUL), 'thread id', 1);
        await expectBadText(() => store().getMessage(LONE), 'message id', 11);
        await expectBadText(() => store().listMemories({ roomId: NUL }), 'filter.roomId', 1);
        await expectBadText(
          () =>
            store().searchMemories({
              text: 'launch',
              filter: { viewer: { agentId: 'a', roomId: NUL } },
            }),
          'filter.viewer.roomId',
          1,
        );
        await expectBadText(
          () => store().searchMemories({ text: `launch ${NUL}` }),
          'search text',
          8,
        );
      });
    });

    describe('sizes every store can index', () => {
      it(`ids and resource, room, world and entity ids: at most 200 characters`, async () => {
        await expectCode(
          () => store().createThread({ resourceId: INDEX_BUSTER }),
          'INVALID_ARGUMENT',
        );
        await expectCode(
          () => store().listThreads({ resourceId: INDEX_BUSTER }),
          'INVALID_ARGUMENT',
        );
        for (const key of ['roomId', 'worldId', 'entityId'] as const) {
          await expectCode(
            () =>
              store().addMemories([
                {
                  agentId: 'one-rule',
                  scope: 'shared',
                  worldId: 'w',
                  roomId: 'r',
                  [key]: INDEX_BUSTER,
                  content: { text: 'x' },
                },
              ]),
            'INVALID_ARGUMENT',
          );
          await expectCode(() => store().listMemories({ [key]: INDEX_BUSTER }), 'INVALID_ARGUMENT');
        }
        const t = await store().createThread({ resourceId: LONGEST_NAME });
        expect((await store().getThread(t.id))!.resourceId).toBe(LONGEST_NAME);
      });

      it.skipIf(options.encrypted)(
        `memory text: at most ${MAX_MEMORY_TEXT_LENGTH} characters, and that much is searchable`,
        async () => {
          const agentId = `big-${newId()}`;
          await expectCode(
            () =>
              store().addMemories([
                { agentId, content: { text: 'x'.repeat(MAX_MEMORY_TEXT_LENGTH + 1) } },
              ]),
            'INVALID_ARGUMENT',
          );
          // Many distinct words: the worst case for a full-text index.
          const words: string[] = [];
          let length = 0;
          for (let i = 0; length < MAX_MEMORY_TEXT_LENGTH - 20; i++) {
            const w = `w${i.toString(36)}q`;
            words.push(w);
            length += w.length + 1;
          }
          const text = words.join(' ').slice(0, MAX_MEMORY_TEXT_LENGTH);
          const [m] = await store().addMemories([{ agentId, content: { text } }]);
          expect((await store().getMemory(m!.id))!.content.text).toBe(text);
          const hits = await store().searchMemories({ text: words[1234]!, filter: { agentId } });
          expect(hits.map((h) => h.memory.id)).toEqual([m!.id]);
        },
      );

      it(`JSON: ${MAX_JSON_DEPTH} levels deep round-trips; deeper is INVALID_ARGUMENT, never a stack overflow`, async () => {
        const t = await makeThread(store());
        const ok = nested(MAX_JSON_DEPTH) as never;
        const [m] = await store().addMessages([
          { threadId: t.id, parentId: null, role: 'user', data: ok },
        ]);
        expect((await store().getMessage(m!.id))!.data).toEqual(ok);
        const deep = nested(4_000) as never;
        await expectCode(
          () =>
            store().addMessages([{ threadId: t.id, parentId: m!.id, role: 'user', data: deep }]),
          'INVALID_ARGUMENT',
        );
        await expectCode(
          () => store().updateThread(t.id, { metadata: { deep } }),
          'INVALID_ARGUMENT',
        );
        const br = await store().createBranch({
          threadId: t.id,
          name: 'main',
          headMessageId: m!.id,
        });
        await expectCode(
          () =>
            store().appendStateCommit({ branchId: br.id, messageId: m!.id, update: { deep } }, 0),
          'INVALID_ARGUMENT',
        );
        await expectCode(
          () => store().addMemories([{ agentId: 'one-rule', content: { text: 'deep', deep } }]),
          'INVALID_ARGUMENT',
        );
        expect(await store().getChain(m!.id)).toHaveLength(1);
      });
    });

    describe('options and inputs: an unknown key is INVALID_ARGUMENT naming it, before anything is written', () => {
      /** The refusal of `call`: INVALID_ARGUMENT whose message and `details.key` name `key`. */
      async function expectUnknownKey(call: () => Promise<unknown>, key: string) {
        const e = await expectCode(call, 'INVALID_ARGUMENT');
        expect(e.message).toContain(`unknown key ${JSON.stringify(key)}`);
        expect(e.details.key).toBe(key);
        return e;
      }

      /** A thread of one message, on its branch `main`. */
      async function threadOnBranch() {
        const t = await makeThread(store());
        const [m] = await makeChain(store(), t.id, 1);
        const br = await store().createBranch({
          threadId: t.id,
          name: 'main',
          headMessageId: m!.id,
        });
        return { t, m: m!, br };
      }

      it.skipIf(options.encrypted)(
        'a misplaced or misspelled viewer never reads another agent’s private memories',
        async () => {
          const tag = newId();
          await store().addMemories([
            { agentId: `alice-${tag}`, content: { text: `alice private diary ${tag}` } },
            { agentId: `bob-${tag}`, content: { text: `bob private diary ${tag}` } },
          ]);
          const bob = { agentId: `bob-${tag}` };
          expect(await store().listMemories({ viewer: bob })).toHaveLength(1);
          expect(
            (
              await expectUnknownKey(
                () => store().searchMemories({ text: tag, viewer: bob } as never),
                'viewer',
              )
            ).message,
          ).toBe('searchMemories: unknown key "viewer"; the viewer goes in filter.viewer');
          expect(
            (await expectUnknownKey(() => store().listMemories({ veiwer: bob } as never), 'veiwer'))
              .message,
          ).toBe('listMemories: unknown key "veiwer" (did you mean "viewer"?)');
          await expectUnknownKey(() => store().countMemories({ Viewer: bob } as never), 'Viewer');
          await expectUnknownKey(
            () => store().searchMemories({ text: tag, filter: { veiwer: bob } as never }),
            'veiwer',
          );
          await expectUnknownKey(
            () => store().listMemories({ viewer: { agentID: bob.agentId } as never }),
            'agentID',
          );
          await expectUnknownKey(() => store().listMemories({ limit: 1 } as never, {}), 'limit');
          await expectUnknownKey(() => store().listMemories({}, { limt: 1 } as never), 'limt');
          expect(
            (await store().searchMemories({ text: tag, filter: { viewer: bob } })).length,
          ).toBe(1);
        },
      );

      it('every write refuses an unknown key and writes nothing', async () => {
        const { t, m, br } = await threadOnBranch();
        const old = turnOf(t.id, { startedAt: 1 });
        await store().putTurn(old);
        const agentId = `keys-${newId()}`;
        const [mem] = await store().addMemories([{ agentId, content: { text: 'kept as is' } }]);
        const space = await store().getEmbeddingSpace();
        const id = newId();

        await expectUnknownKey(() => store().createThread({ id, titel: 'x' } as never), 'titel');
        await expectUnknownKey(
          () => store().createThreadWithBranch({ id, brnach: 'main' } as never),
          'brnach',
        );
        expect(await store().getThread(id)).toBeNull();
        await expectUnknownKey(
          () => store().updateThread(t.id, { title: 'changed', titel: 'x' } as never),
          'titel',
        );
        await expectUnknownKey(
          () => store().deleteThread(t.id, { idleSnce: Date.now() } as never),
          'idleSnce',
        );
        expect((await store().getThread(t.id))!.title).toBe(t.title);

        const message = { id, threadId: t.id, parentId: m!.id, role: 'user', data: 'x' };
        await expectUnknownKey(
          () => store().addMessages([{ ...message, metadata: {} } as never]),
          'metadata',
        );
        await expectUnknownKey(
          () =>
            store().addMessagesOnBranch(br.id, m!.id, [{ ...message, parentID: m!.id } as never]),
          'parentID',
        );
        expect(await store().getMessage(id)).toBeNull();
        await expectUnknownKey(
          () =>
            store().createBranch({
              threadId: t.id,
              name: 'b2',
              headMessageId: null,
              active: true,
            } as never),
          'active',
        );
        expect(await store().getBranch(t.id, 'b2')).toBeNull();
        await expectUnknownKey(
          () =>
            store().saveCheckpoint({
              threadId: t.id,
              name: 'cp',
              messageId: m!.id,
              createdAt: 1,
            } as never),
          'createdAt',
        );
        expect(await store().getCheckpoint(t.id, 'cp')).toBeNull();
        await expectUnknownKey(
          () =>
            store().appendStateCommit(
              { branchId: br.id, messageId: m!.id, update: { n: 1 }, version: 1 } as never,
              0,
            ),
          'version',
        );
        expect(await store().getStateCommits(br.id)).toEqual([]);
        await expectUnknownKey(
          () => store().putTurn({ ...turnOf(t.id), id, extra: 1 } as never),
          'extra',
        );
        expect(await store().getTurn(id)).toBeNull();
        await expectUnknownKey(
          () => store().purgeTurns({ before: Date.now(), threadID: t.id } as never),
          'threadID',
        );
        expect(await store().getTurn(old.id)).not.toBeNull();

        await expectUnknownKey(
          () => store().acquireLease({ key: id, owner: 'o', ttlMs: 1000, ttl: 5 } as never),
          'ttl',
        );
        expect(await store().getLease(id)).toBeNull();
        const lease = {
          key: id,
          owner: 'o',
          acquiredAt: 1,
          renewedAt: 1,
          expiresAt: 2,
          releasedAt: null,
          data: {},
        };
        await expectUnknownKey(
          () => store().restoreLeases([{ ...lease, extra: 1 } as never]),
          'extra',
        );
        expect(await store().getLease(id)).toBeNull();

        await expectUnknownKey(
          () =>
            store().addMemories([{ id, agentId, content: { text: 'x' }, tags: ['a'] } as never]),
          'tags',
        );
        expect(await store().getMemory(id)).toBeNull();
        await expectUnknownKey(
          () => store().updateMemory(mem!.id, { content: { text: 'changed' }, meta: {} } as never),
          'meta',
        );
        expect((await store().getMemory(mem!.id))!.content.text).toBe('kept as is');
        await expectUnknownKey(
          () => store().ensureEmbeddingSpace({ embedderId: 'e', dimensions: 3, dims: 3 } as never),
          'dims',
        );
        await expectUnknownKey(
          () =>
            store().putCachedEmbeddings(`e-${id}`, [
              { contentHash: 'h', embedding: [1], hash: 'h' } as never,
            ]),
          'hash',
        );
        expect(await store().getEmbeddingSpace()).toEqual(space);
        expect((await store().getCachedEmbeddings(`e-${id}`, ['h'])).size).toBe(0);
      });

      it('restoreThread refuses an unknown key in the records or any record, writing nothing', async () => {
        const id = newId();
        const records = {
          thread: { id, resourceId: null, title: null, metadata: {}, createdAt: 1, updatedAt: 1 },
          messages: [
            {
              id: `${id}-m`,
              threadId: id,
              parentId: null,
              role: 'user',
              type: null,
              data: 'x',
              createdAt: 1,
              depth: 0,
            },
          ],
          branches: [
            {
              id: `${id}-b`,
              threadId: id,
              name: 'main',
              headMessageId: `${id}-m`,
              isActive: true,
              createdAt: 1,
              forkMessageId: null,
              parentBranchId: null,
            },
          ],
          checkpoints: [],
          stateCommits: [],
          turns: [],
        };
        await expectUnknownKey(
          () => store().restoreThread({ ...records, leases: [] } as never),
          'leases',
        );
        await expectUnknownKey(
          () =>
            store().restoreThread({ ...records, thread: { ...records.thread, seq: 1 } } as never),
          'seq',
        );
        await expectUnknownKey(
          () =>
            store().restoreThread({
              ...records,
              branches: [{ ...records.branches[0]!, seq: 1 }],
            } as never),
          'seq',
        );
        await expectUnknownKey(
          () =>
            store().restoreThread({
              ...records,
              messages: [{ ...records.messages[0]!, jumpId: null }],
            } as never),
          'jumpId',
        );
        expect(await store().getThread(id)).toBeNull();
        await store().restoreThread(records as never);
        expect((await store().exportThread(id))!.branches).toEqual(records.branches);
      });

      it('every read refuses an unknown key in its options', async () => {
        const { t, m, br } = await threadOnBranch();
        const cases: Array<[() => Promise<unknown>, string]> = [
          [() => store().listThreads({ limt: 1 } as never), 'limt'],
          [() => store().getChain(m!.id, { limt: 1 } as never), 'limt'],
          [() => store().lockBranch(br.id, { timeout: 5 } as never), 'timeout'],
          [() => store().getStateCommits(br.id, { from: 1 } as never), 'from'],
          [() => store().getLatestStateCommit(br.id, { snapshot: true } as never), 'snapshot'],
          [() => store().listTurns(t.id, { limt: 1 } as never), 'limt'],
          [() => store().listLeases({ limt: 1 } as never), 'limt'],
          [() => store().scanMemories({ limt: 1 } as never), 'limt'],
          [() => store().searchMemories({ text: 'x', order: 'newest' } as never), 'order'],
          [() => store().searchMemories({ text: 'x', filter: { text: 'x' } } as never), 'text'],
        ];
        for (const [call, key] of cases) await expectUnknownKey(call, key);
      });
    });

    describe.skipIf(options.encrypted)(
      'keyword search: one stop-word rule, scores relative to the best hit',
      () => {
        it('leaves stop words out of the query', async () => {
          const agentId = `kw-${newId()}`;
          const [parking, launch] = await store().addMemories([
            { agentId, content: { text: 'The parking lot is closed on weekends' } },
            { agentId, content: { text: 'Launch day: Friday, after the review' } },
          ]);
          const hits = await store().searchMemories({
            text: 'when is the launch?',
            filter: { agentId },
          });
          expect(hits.map((h) => h.memory.id)).toEqual([launch!.id]);
          expect(parking).toBeDefined();
          expect(
            await store().searchMemories({ text: 'when is the', filter: { agentId } }),
          ).toEqual([]);
        });

        it('scores in (0, 1], the best hit 1, even when every memory holds the word', async () => {
          const agentId = `kw-${newId()}`;
          await store().addMemories(
            ['apples and pears', 'apples, apples, apples', 'green apples in the orchard'].map(
              (text) => ({
                agentId,
                content: { text },
              }),
            ),
          );
          const hits = await store().searchMemories({ text: 'apples', filter: { agentId } });
          expect(hits).toHaveLength(3);
          expect(hits[0]!.score).toBe(1);
          for (const h of hits) {
            expect(h.score).toBeGreaterThan(0.01);
            expect(h.score).toBeLessThanOrEqual(1);
          }
          for (let i = 1; i < hits.length; i++)
            expect(hits[i]!.score).toBeLessThanOrEqual(hits[i - 1]!.score);
        });
      },
    );
  });
}
