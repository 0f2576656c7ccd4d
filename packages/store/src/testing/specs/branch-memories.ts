import { type Branch, type Memory, type Message, newId, type Thread } from '@cairn/core';
import { beforeAll, describe, expect, it } from 'vitest';
import type { MemoryFilter, MemorySearch, NewMemory } from '../../store.js';
import { type StoreConformanceOptions, useStore } from '../context.js';
import { expectCode, makeChain, makeThread } from '../helpers.js';

const sorted = (memories: Array<{ id: string }>) => memories.map((m) => m.id).sort();

/**
 * Branch-scoped memories (`source.branchScoped`): seen through `visibleFrom` only from a
 * branch whose chain holds the memory's last source message — the branch it was written
 * on and those forked after that message, never one forked before it, one rewound past
 * it, another thread or no branch — inside every listing, count and search, so a limit
 * counts only what is seen. Memories that are not branch-scoped are seen from anywhere.
 */
export function describeBranchMemories(options: StoreConformanceOptions): void {
  describe('branch-scoped memories', () => {
    const store = useStore(options);
    const agentId = `bm-${newId()}`;
    // main: m0 … m5 (active). early: forked at m1, then e2 e3. late: forked at m4, then l5.
    let thread: Thread;
    let other: Thread;
    let m: Message[];
    let e: Message[];
    let l: Message[];
    let main: Branch;
    let early: Branch;
    let late: Branch;
    // a: learned at m2 … m3 on main; b: at m5 on main; c: at e3 on early; plain: not scoped.
    let a: Memory;
    let b: Memory;
    let c: Memory;
    let plain: Memory;
    const scoped = (
      text: string,
      messages: Message[],
      branch: Branch,
      rest: Partial<NewMemory> = {},
    ) => ({
      agentId,
      content: { text },
      source: {
        threadId: branch.threadId,
        branchId: branch.id,
        messageIds: messages.map((x) => x.id),
        branchScoped: true,
      },
      ...rest,
    });

    beforeAll(async () => {
      thread = await makeThread(store());
      other = await makeThread(store());
      m = await makeChain(store(), thread.id, 6);
      main = await store().createBranch({
        threadId: thread.id,
        name: 'main',
        headMessageId: m[5]!.id,
      });
      e = await makeChain(store(), thread.id, 2, m[1]!.id, 'e');
      early = await store().createBranch({
        threadId: thread.id,
        name: 'early',
        headMessageId: e[1]!.id,
        parentBranchId: main.id,
      });
      l = await makeChain(store(), thread.id, 1, m[4]!.id, 'l');
      late = await store().createBranch({
        threadId: thread.id,
        name: 'late',
        headMessageId: l[0]!.id,
        parentBranchId: main.id,
      });
      const [otherHead] = await makeChain(store(), other.id, 1);
      await store().createBranch({
        threadId: other.id,
        name: 'main',
        headMessageId: otherHead!.id,
      });
      [a, b, c, plain] = (await store().addMemories([
        scoped('Ada lives in Paris', [m[2]!, m[3]!], main, { embedding: [1, 0, 0] }),
        scoped('Ada owns a cat', [m[5]!], main, { embedding: [1, 0.1, 0] }),
        scoped('Ada dislikes Paris', [e[1]!], early, { embedding: [1, 0.2, 0] }),
        {
          agentId,
          content: { text: 'Ada speaks French' },
          embedding: [0, 1, 0],
          source: { threadId: thread.id, messageIds: [m[0]!.id] },
        },
      ])) as [Memory, Memory, Memory, Memory];
    });

    const seen = async (visibleFrom: MemoryFilter['visibleFrom']) => {
      const filter: MemoryFilter = { agentId, visibleFrom };
      const listed = await store().listMemories(filter);
      expect(await store().countMemories(filter)).toBe(listed.length);
      const found = await store().searchMemories({ text: 'Ada', filter, limit: 100 });
      expect(sorted(found.map((h) => h.memory))).toEqual(sorted(listed));
      return sorted(listed);
    };

    it('keeps the flag as written and lists every memory when no viewing point is given', async () => {
      expect(a.source).toEqual({
        threadId: thread.id,
        branchId: main.id,
        messageIds: [m[2]!.id, m[3]!.id],
        branchScoped: true,
      });
      expect(await store().getMemory(a.id)).toEqual(a);
      expect(plain.source).toEqual({ threadId: thread.id, messageIds: [m[0]!.id] });
      expect(sorted(await store().listMemories({ agentId }))).toEqual(sorted([a, b, c, plain]));
    });

    it('is seen from its branch and branches forked after its message, not before', async () => {
      expect(await seen({ threadId: thread.id, branchId: main.id })).toEqual(sorted([a, b, plain]));
      expect(await seen({ threadId: thread.id, branchId: late.id })).toEqual(sorted([a, plain]));
      expect(await seen({ threadId: thread.id, branchId: early.id })).toEqual(sorted([c, plain]));
      // The thread's active branch when no branch is named.
      expect(await seen({ threadId: thread.id })).toEqual(sorted([a, b, plain]));
    });

    it('is not seen from another thread or from no branch', async () => {
      expect(await seen({ threadId: other.id })).toEqual(sorted([plain]));
      expect(await seen(null)).toEqual(sorted([plain]));
    });

    it('hides it from a branch rewound past its message, and shows it again when the head returns', async () => {
      const rewound = await store().createBranch({
        threadId: thread.id,
        name: `rewound-${newId()}`,
        headMessageId: m[3]!.id,
        activate: true,
      });
      expect(await seen({ threadId: thread.id })).toEqual(sorted([a, plain]));
      const back = await store().moveHead(rewound.id, m[3]!.id, m[2]!.id);
      expect(await seen({ threadId: thread.id, branchId: back.id })).toEqual(sorted([plain]));
      await store().moveHead(rewound.id, m[2]!.id, m[5]!.id);
      expect(await seen({ threadId: thread.id, branchId: rewound.id })).toEqual(
        sorted([a, b, plain]),
      );
      await store().setActiveBranch(main.id);
    });

    it('fills a search limit with what the viewing point sees', async () => {
      const hidden = await store().addMemories(
        Array.from({ length: 5 }, (_, i) =>
          scoped(`Ada Ada Ada hidden ${i}`, [m[5]!], main, {
            embedding: [1, 0, 0],
            worldId: `w-${agentId}`,
          }),
        ),
      );
      const shown = await store().addMemories(
        Array.from({ length: 3 }, (_, i) => ({
          agentId,
          worldId: `w-${agentId}`,
          content: { text: `Ada shown ${i}` },
          embedding: [0.5, 1, 0],
        })),
      );
      const filter: MemoryFilter = {
        worldId: `w-${agentId}`,
        visibleFrom: { threadId: thread.id, branchId: early.id },
      };
      const searches: MemorySearch[] = [
        { text: 'Ada', filter, limit: 2 },
        { vector: [1, 0, 0], filter, limit: 2 },
      ];
      for (const search of searches) {
        const hits = await store().searchMemories(search);
        expect(hits).toHaveLength(2);
        expect(sorted(shown)).toEqual(expect.arrayContaining(sorted(hits.map((h) => h.memory))));
      }
      expect(sorted(await store().listMemories(filter, { limit: 3 }))).toEqual(sorted(shown));
      // From main the hidden ones rank first.
      const fromMain = await store().searchMemories({
        text: 'Ada',
        filter: { ...filter, visibleFrom: { threadId: thread.id, branchId: main.id } },
        limit: 5,
      });
      expect(sorted(fromMain.map((h) => h.memory))).toEqual(sorted(hidden));
    });

    it('keeps its scope across a supersession', async () => {
      const [v1] = await store().addMemories([scoped('Ada is 30', [m[4]!], main)]);
      const v2 = await store().supersedeMemory(v1!.id, { content: { text: 'Ada is 31' } });
      expect(v2.source).toEqual(v1!.source);
      const from = (branch: Branch) =>
        store().listMemories({
          lineageIds: [v1!.id],
          visibleFrom: { threadId: thread.id, branchId: branch.id },
        });
      expect(sorted(await from(main))).toEqual(sorted([v1!, v2]));
      expect(await from(early)).toEqual([]);
      const v3 = await store().supersedeMemory(v2.id, {
        content: { text: 'Ada is 32' },
        source: { threadId: thread.id, messageIds: [e[0]!.id], branchScoped: true },
      });
      expect(sorted(await from(early))).toEqual([v3.id]);
    });

    it('refuses a bad flag, an empty source and bad viewing points, writing nothing', async () => {
      const count = await store().countMemories({ agentId });
      const add = (source: unknown) =>
        store().addMemories([
          { agentId, content: { text: 'fine' } },
          { agentId, content: { text: 'bad' }, source: source as never },
        ]);
      await expectCode(
        () => add({ threadId: thread.id, messageIds: [], branchScoped: true }),
        'INVALID_ARGUMENT',
      );
      await expectCode(
        () => add({ threadId: thread.id, messageIds: [m[0]!.id], branchScoped: 'yes' }),
        'INVALID_ARGUMENT',
      );
      await expectCode(
        () =>
          store().supersedeMemory(a.id, {
            content: { text: 'x' },
            source: { threadId: thread.id, messageIds: [], branchScoped: true },
          }),
        'INVALID_ARGUMENT',
      );
      expect(await store().getMemory(a.id)).toEqual(a);
      expect(await store().countMemories({ agentId })).toBe(count);
      await expectCode(() => seen({ threadId: `missing-${newId()}` }), 'NOT_FOUND');
      await expectCode(
        () => seen({ threadId: thread.id, branchId: `missing-${newId()}` }),
        'NOT_FOUND',
      );
      const [otherBranch] = await store().listBranches(other.id);
      await expectCode(() => seen({ threadId: thread.id, branchId: otherBranch!.id }), 'NOT_FOUND');
      await expectCode(() => seen('main' as never), 'INVALID_ARGUMENT');
      await expectCode(
        () => seen({ threadId: thread.id, branch: 'main' } as never),
        'INVALID_ARGUMENT',
      );
    });

    it('checks anchors far apart on a long chain, each on its own', async () => {
      const long = await makeThread(store());
      const chain = await makeChain(store(), long.id, 120);
      // Forked at depth 70: shares depths 0-70 with the main line, then its own.
      const fork = await makeChain(store(), long.id, 30, chain[70]!.id, 'f');
      const mainLine = await store().createBranch({
        threadId: long.id,
        name: 'main',
        headMessageId: chain[119]!.id,
      });
      const side = await store().createBranch({
        threadId: long.id,
        name: 'side',
        headMessageId: fork[29]!.id,
      });
      const at = [
        chain[2]!,
        chain[40]!,
        chain[41]!,
        chain[69]!,
        chain[71]!,
        chain[119]!,
        fork[0]!,
        fork[29]!,
      ];
      const memories = await store().addMemories(
        at.map((message, i) => ({
          agentId: `${agentId}-long`,
          content: { text: `far ${i}` },
          source: { threadId: long.id, messageIds: [message.id], branchScoped: true },
        })),
      );
      const from = async (branch: Branch) =>
        sorted(
          await store().listMemories({
            agentId: `${agentId}-long`,
            visibleFrom: { threadId: long.id, branchId: branch.id },
          }),
        );
      expect(await from(mainLine)).toEqual(sorted(memories.slice(0, 6)));
      expect(await from(side)).toEqual(sorted([...memories.slice(0, 4), ...memories.slice(6)]));
    });

    it('keeps a source naming messages not stored, seen once they are (a copy writing memories first)', async () => {
      const later = await makeThread(store());
      const id = `later-${newId()}`;
      const [memory] = await store().addMemories([
        {
          agentId: `${agentId}-later`,
          content: { text: 'Ada plays chess' },
          source: { threadId: later.id, messageIds: [id], branchScoped: true },
        },
      ]);
      const fromLater = { ids: [memory!.id], visibleFrom: { threadId: later.id } };
      expect(await store().listMemories(fromLater)).toEqual([]);
      const [head] = await store().addMessages([
        { id, threadId: later.id, parentId: null, role: 'user', data: 'chess' },
      ]);
      await store().createBranch({ threadId: later.id, name: 'main', headMessageId: head!.id });
      expect(sorted(await store().listMemories(fromLater))).toEqual([memory!.id]);
    });

    it('is seen from nowhere once its thread is deleted, and still listed', async () => {
      const gone = await makeThread(store());
      const [head] = await makeChain(store(), gone.id, 1);
      const branch = await store().createBranch({
        threadId: gone.id,
        name: 'main',
        headMessageId: head!.id,
      });
      const [memory] = await store().addMemories([scoped('Ada had a dog', [head!], branch)]);
      expect(
        sorted(
          await store().listMemories({ ids: [memory!.id], visibleFrom: { threadId: gone.id } }),
        ),
      ).toEqual([memory!.id]);
      await store().deleteThread(gone.id);
      expect(await store().listMemories({ ids: [memory!.id], visibleFrom: null })).toEqual([]);
      expect(
        await store().listMemories({ ids: [memory!.id], visibleFrom: { threadId: other.id } }),
      ).toEqual([]);
      expect(await store().listMemories({ ids: [memory!.id] })).toHaveLength(1);
    });
  });
}
