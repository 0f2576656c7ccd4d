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

      it(`memory text: at most ${MAX_MEMORY_TEXT_LENGTH} characters, and that much is searchable`, async () => {
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
      });

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

    describe('keyword search: one stop-word rule, scores relative to the best hit', () => {
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
        expect(await store().searchMemories({ text: 'when is the', filter: { agentId } })).toEqual(
          [],
        );
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
    });
  });
}
