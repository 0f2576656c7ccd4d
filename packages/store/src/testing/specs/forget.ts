import { isCairnError, newId, type Thread } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { type ForgetCounts, type ForgetReceipt, runLeaseKey, type Store } from '../../store.js';
import { type StoreConformanceOptions, useStore } from '../context.js';
import { allPages, expectCode, makeChain, sha256, sleep, turnOf, waitFor } from '../helpers.js';

/** A thread of `resourceId` with something of every kind under it; returns what it made. */
async function seedThread(store: Store, resourceId: string | null) {
  const { thread, branch } = await store.createThreadWithBranch({ resourceId, title: 'seeded' });
  const chain = await makeChain(store, thread.id, 3, null, `msg-${thread.id}-`);
  await store.moveHead(branch.id, null, chain[2]!.id);
  const side = await store.createBranch({
    threadId: thread.id,
    name: 'side',
    headMessageId: chain[0]!.id,
  });
  await store.appendStateCommit(
    { branchId: branch.id, messageId: chain[1]!.id, update: { a: 1 } },
    0,
  );
  await store.appendStateCommit(
    { branchId: branch.id, messageId: chain[2]!.id, update: { a: 2 } },
    1,
  );
  await store.appendStateCommit(
    { branchId: side.id, messageId: chain[0]!.id, update: { b: 1 } },
    0,
  );
  await store.saveCheckpoint({ threadId: thread.id, name: 'cp', messageId: chain[1]!.id });
  await store.putTurn(turnOf(thread.id, { messageId: chain[2]!.id }));
  await store.acquireLease({ key: runLeaseKey(thread.id), owner: 'worker', ttlMs: 60_000 });
  return { thread, branch, side, chain };
}

/** What one seeded thread holds, for the receipt's counts. */
const SEEDED: Omit<ForgetCounts, 'memories' | 'embeddings' | 'cachedEmbeddings' | 'dataKeys'> = {
  threads: 1,
  branches: 2,
  messages: 3,
  stateCommits: 3,
  checkpoints: 1,
  turns: 1,
  leases: 1,
};

const times = (n: number, c: Partial<ForgetCounts>): ForgetCounts => {
  const out: ForgetCounts = {
    threads: 0,
    branches: 0,
    messages: 0,
    stateCommits: 0,
    checkpoints: 0,
    turns: 0,
    leases: 0,
    memories: 0,
    embeddings: 0,
    cachedEmbeddings: 0,
    dataKeys: 0,
  };
  for (const [k, v] of Object.entries(c)) out[k as keyof ForgetCounts] = v * n;
  return out;
};

/** Everything a store holds that a listing reaches: threads with all under them, leases, memories. */
async function listing(store: Store, resourceIds: string[]) {
  const threads: unknown[] = [];
  for (const resourceId of resourceIds) {
    const page = await allPages((cursor) => store.listThreads({ resourceId, cursor, limit: 1000 }));
    for (const t of page) threads.push(await store.exportThread(t.id));
  }
  const leases = await allPages((cursor) => store.listLeases({ cursor }));
  const memories = await allPages((cursor) => store.scanMemories({ cursor }));
  return { threads, leases, memories };
}

/** `forget`: a subject's data deleted for good, late writes refused, nothing else touched. */
export function describeForget(options: StoreConformanceOptions): void {
  describe('forget', () => {
    const store = useStore(options);

    it('deletes every thread of the resource and all under it, and nothing of anyone else', async () => {
      const gone = `res-${newId()}`;
      const kept = `res-${newId()}`;
      const a = await seedThread(store(), gone);
      const b = await seedThread(store(), gone);
      await seedThread(store(), kept);
      await seedThread(store(), null);
      await store().addMemories([
        {
          agentId: 'agent',
          entityId: gone,
          content: { text: 'kept: memories are keyed by entity' },
        },
      ]);
      const others = async () => {
        const all = await allPages((cursor) => store().listThreads({ cursor, limit: 1000 }));
        const ids = [...new Set(all.map((t) => t.resourceId))].filter(
          (r) => r !== gone && r !== null,
        );
        const noResource = all.filter((t) => t.resourceId === null);
        const { leases, ...rest } = await listing(store(), ids as string[]);
        const goneLeases = [a, b].map((s) => runLeaseKey(s.thread.id));
        return {
          ...rest,
          leases: leases.filter((l) => !goneLeases.includes(l.key)),
          noResource: await Promise.all(noResource.map((t) => store().exportThread(t.id))),
        };
      };
      const before = await others();

      const receipt = await store().forget({ resourceId: gone });

      expect(receipt.subject).toEqual({ resourceId: gone });
      // On a store with encryption, the resource's data key goes too.
      expect(receipt.counts).toEqual({ ...times(2, SEEDED), dataKeys: options.encrypted ? 1 : 0 });
      expect(Number.isInteger(receipt.at)).toBe(true);
      expect((await store().listThreads({ resourceId: gone })).items).toEqual([]);
      for (const s of [a, b]) {
        expect(await store().getThread(s.thread.id)).toBeNull();
        expect(await store().exportThread(s.thread.id)).toBeNull();
        expect(await store().getBranchById(s.branch.id)).toBeNull();
        expect(await store().getBranchById(s.side.id)).toBeNull();
        for (const m of s.chain) expect(await store().getMessage(m.id)).toBeNull();
        expect(await store().listTurns(s.thread.id)).toEqual([]);
        expect(await store().listCheckpoints(s.thread.id)).toEqual([]);
        expect(await store().getLease(runLeaseKey(s.thread.id))).toBeNull();
      }
      expect(await others()).toEqual(before);
    });

    it('deletes an entity’s memories with their embeddings and the cached embeddings no one else uses', async () => {
      const gone = `ent-${newId()}`;
      const kept = `ent-${newId()}`;
      const canary = `canary${newId().replaceAll('-', '')}`;
      const shared = `shared text ${newId()}`;
      const own = `${canary} alone`;
      const space = await store().ensureEmbeddingSpace({
        embedderId: 'forget-test',
        dimensions: 4,
      });
      expect(space.dimensions).toBe(4);
      await store().addMemories([
        { agentId: 'agent', entityId: gone, content: { text: own }, embedding: [1, 0, 0, 0] },
        { agentId: 'agent', entityId: gone, content: { text: shared }, embedding: [0, 1, 0, 0] },
        { agentId: 'agent', entityId: gone, content: { text: `${canary} no vector` } },
        { agentId: 'agent', entityId: kept, content: { text: shared }, embedding: [0, 1, 0, 0] },
        { agentId: 'agent', entityId: kept, content: { text: 'other' }, embedding: [0, 0, 1, 0] },
      ]);
      await store().putCachedEmbeddings('forget-test', [
        { contentHash: sha256(own), embedding: [1, 0, 0, 0] },
        { contentHash: sha256(shared), embedding: [0, 1, 0, 0] },
      ]);
      const keptBefore = await store().listMemories({ entityId: kept }, { order: 'oldest' });
      expect((await store().searchMemories({ text: canary })).length).toBe(2);

      const receipt = await store().forget({ entityId: gone });

      // A store with encryption caches no embeddings, and destroys the entity's data key.
      expect(receipt.counts).toEqual(
        options.encrypted
          ? times(1, { memories: 3, embeddings: 2, dataKeys: 1 })
          : times(1, { memories: 3, embeddings: 2, cachedEmbeddings: 1 }),
      );
      expect(await store().listMemories({ entityId: gone })).toEqual([]);
      expect(await store().searchMemories({ text: canary })).toEqual([]);
      const hits = await store().searchMemories({ vector: [1, 0, 0, 0], limit: 1000 });
      expect(hits.filter((h) => h.memory.entityId === gone)).toEqual([]);
      const cached = await store().getCachedEmbeddings('forget-test', [
        sha256(own),
        sha256(shared),
      ]);
      expect([...cached.keys()]).toEqual(options.encrypted ? [] : [sha256(shared)]);
      expect(await store().listMemories({ entityId: kept }, { order: 'oldest' })).toEqual(
        keptBefore,
      );
    });

    it.skipIf(options.encrypted)(
      'deletes a world’s memories, and each subject key given in one call',
      async () => {
        const world = `world-${newId()}`;
        const entity = `ent-${newId()}`;
        const resource = `res-${newId()}`;
        await store().addMemories([
          { agentId: 'agent', worldId: world, content: { text: 'in the world' } },
          { agentId: 'agent', worldId: world, entityId: entity, content: { text: 'both' } },
          { agentId: 'agent', entityId: entity, content: { text: 'entity only' } },
        ]);
        await seedThread(store(), resource);
        const receipt = await store().forget({
          worldId: world,
          resourceId: resource,
          entityId: entity,
        });
        expect(receipt.subject).toEqual({ resourceId: resource, entityId: entity, worldId: world });
        expect(receipt.counts).toEqual({
          ...times(1, SEEDED),
          memories: 3,
          embeddings: 0,
          cachedEmbeddings: 0,
        });
        expect(await store().countMemories({ worldId: world })).toBe(0);
        expect(await store().countMemories({ entityId: entity })).toBe(0);
      },
    );

    it('works a page at a time through more threads and memories than one page holds', async () => {
      const resource = `res-${newId()}`;
      const entity = `ent-${newId()}`;
      for (let i = 0; i < 21; i++) await store().createThread({ resourceId: resource });
      await store().addMemories(
        Array.from({ length: 201 }, (_, i) => ({
          agentId: 'agent',
          entityId: entity,
          content: { text: `memory ${i}` },
        })),
      );
      const receipt = await store().forget({ resourceId: resource, entityId: entity });
      // The threads hold nothing sealed: only the entity has a data key.
      expect(receipt.counts).toEqual(
        times(1, { threads: 21, memories: 201, dataKeys: options.encrypted ? 1 : 0 }),
      );
      expect((await store().listThreads({ resourceId: resource })).items).toEqual([]);
      expect(await store().countMemories({ entityId: entity })).toBe(0);
    });

    it('refuses every later write that would bring the subject’s data back, with FORGOTTEN', async () => {
      const resource = `res-${newId()}`;
      const entity = `ent-${newId()}`;
      const world = `world-${newId()}`;
      const s = await seedThread(store(), resource);
      const records = (await store().exportThread(s.thread.id))!;
      const receipt = await store().forget({
        resourceId: resource,
        entityId: entity,
        worldId: world,
      });
      const t = s.thread.id;
      const late: Array<[string, () => Promise<unknown>, string, string]> = [
        [
          'createThread',
          () => store().createThread({ resourceId: resource }),
          'resource',
          resource,
        ],
        [
          'createThreadWithBranch',
          () => store().createThreadWithBranch({ resourceId: resource }),
          'resource',
          resource,
        ],
        ['createThread of the thread id', () => store().createThread({ id: t }), 'thread', t],
        ['restoreThread', () => store().restoreThread(records), 'thread', t],
        [
          'addMessages',
          () => store().addMessages([{ threadId: t, parentId: null, role: 'user', data: 'late' }]),
          'thread',
          t,
        ],
        [
          'addMessagesOnBranch',
          () =>
            store().addMessagesOnBranch(s.branch.id, s.chain[2]!.id, [
              { threadId: t, parentId: s.chain[2]!.id, role: 'assistant', data: 'late' },
            ]),
          'thread',
          t,
        ],
        [
          'appendStateCommit',
          () =>
            store().appendStateCommit({ branchId: s.branch.id, messageId: null, update: {} }, 2),
          'branch',
          s.branch.id,
        ],
        ['putTurn', () => store().putTurn(turnOf(t)), 'thread', t],
        [
          'createBranch',
          () => store().createBranch({ threadId: t, name: 'late', headMessageId: null }),
          'thread',
          t,
        ],
        ['updateThread', () => store().updateThread(t, { title: 'late' }), 'thread', t],
        [
          'acquireLease of its run lease',
          () => store().acquireLease({ key: runLeaseKey(t), owner: 'late', ttlMs: 1000 }),
          'thread',
          t,
        ],
        [
          'addMemories of the entity',
          () =>
            store().addMemories([{ agentId: 'a', entityId: entity, content: { text: 'late' } }]),
          'entity',
          entity,
        ],
        [
          'addMemories of the world',
          () => store().addMemories([{ agentId: 'a', worldId: world, content: { text: 'late' } }]),
          'world',
          world,
        ],
        [
          'createThread inside a transaction',
          () => store().transaction((tx) => tx.createThread({ resourceId: resource })),
          'resource',
          resource,
        ],
      ];
      for (const [name, call, kind, key] of late) {
        const e = await expectCode(call, 'FORGOTTEN').catch((error: unknown) => {
          throw new Error(`${name}: ${String(error)}`);
        });
        expect(e.details, name).toEqual({ kind, key, at: receipt.at });
      }
      expect((await store().listThreads({ resourceId: resource })).items).toEqual([]);
      expect(await store().getLease(runLeaseKey(t))).toBeNull();
      expect(await store().countMemories({ entityId: entity })).toBe(0);
      expect(await store().countMemories({ worldId: world })).toBe(0);
      // Others are not refused, and a write that misses for another reason keeps its code.
      await store().createThread({ resourceId: `res-${newId()}` });
      await expectCode(() => store().putTurn(turnOf(newId())), 'NOT_FOUND');
      // Forgetting again finds nothing more and is not refused.
      const again = await store().forget({ resourceId: resource });
      expect(again.counts).toEqual(times(0, {}));
    });

    it('deletes the branch-scoped memories learned on the resource’s threads, and refuses late ones', async () => {
      const resource = `res-${newId()}`;
      const s = await seedThread(store(), resource);
      const other = await seedThread(store(), `res-${newId()}`);
      const learned = (thread: Thread, messageId: string, branchScoped: boolean) => ({
        agentId: 'a',
        content: { text: `learned on ${thread.id}` },
        source: { threadId: thread.id, messageIds: [messageId], branchScoped },
      });
      const [scoped] = await store().addMemories([
        learned(s.thread, s.chain[1]!.id, true),
        learned(s.thread, s.chain[2]!.id, true),
      ]);
      const [plain, elsewhere] = await store().addMemories([
        learned(s.thread, s.chain[2]!.id, false),
        learned(other.thread, other.chain[2]!.id, true),
      ]);
      const receipt = await store().forget({ resourceId: resource });
      expect(receipt.counts).toEqual({
        ...times(1, SEEDED),
        memories: 2,
        dataKeys: options.encrypted ? 1 : 0,
      });
      expect(await store().getMemory(scoped!.id)).toBeNull();
      // Not branch-scoped: its entity's or world's, not the thread's.
      expect(await store().getMemory(plain!.id)).not.toBeNull();
      expect(await store().getMemory(elsewhere!.id)).not.toBeNull();
      for (const branchScoped of [true, false]) {
        const e = await expectCode(
          () => store().addMemories([learned(s.thread, s.chain[2]!.id, branchScoped)]),
          'FORGOTTEN',
        );
        expect(e.details).toEqual({ kind: 'thread', key: s.thread.id, at: receipt.at });
      }
      await store().addMemories([learned(other.thread, other.chain[1]!.id, true)]);
    });

    it('deletes what a write in progress for the subject commits while the forget begins', async () => {
      const resource = `res-${newId()}`;
      const entity = `ent-${newId()}`;
      const pending: { forget?: Promise<ForgetReceipt> } = {};
      await store().transaction(async (tx) => {
        await tx.createThread({ resourceId: resource });
        await tx.addMemories([{ agentId: 'a', entityId: entity, content: { text: 'in flight' } }]);
        // The forget starts while this write is open. It must wait for it, or it would miss
        // what this commits; a forget that did not wait is over by the time this commits.
        pending.forget = store().forget({ resourceId: resource, entityId: entity });
        await Promise.race([pending.forget, sleep(200)]);
      });
      const receipt = await pending.forget!;
      expect(receipt.counts).toMatchObject({ threads: 1, memories: 1 });
      expect((await store().listThreads({ resourceId: resource })).items).toEqual([]);
      expect(await store().countMemories({ entityId: entity })).toBe(0);
    });

    it('leaves nothing of the subject when writes for it race the forget', async () => {
      const resource = `res-${newId()}`;
      const entity = `ent-${newId()}`;
      const settle = (write: Promise<unknown>) =>
        write.then(
          () => 'written',
          (e: unknown) => {
            if (isCairnError(e, 'FORGOTTEN')) return 'refused';
            throw e;
          },
        );
      const writes: Array<Promise<string>> = [];
      for (let i = 0; i < 10; i++) {
        writes.push(settle(store().createThreadWithBranch({ resourceId: resource })));
        writes.push(
          settle(
            store().addMemories([{ agentId: 'a', entityId: entity, content: { text: `w${i}` } }]),
          ),
        );
      }
      const forgetting = store().forget({ resourceId: resource, entityId: entity });
      for (let i = 0; i < 10; i++)
        writes.push(settle(store().createThread({ resourceId: resource })));
      const outcomes = await Promise.all(writes);
      await forgetting;
      // Each write was either refused (FORGOTTEN, nothing else) or deleted by the forget:
      // none of it is left.
      expect(outcomes.length).toBe(30);
      expect((await store().listThreads({ resourceId: resource })).items).toEqual([]);
      expect(await store().countMemories({ entityId: entity })).toBe(0);
    });

    it('refuses a bad subject before anything is written', async () => {
      const resource = `res-${newId()}`;
      const thread = await store().createThread({ resourceId: resource });
      const bad: unknown[] = [
        undefined,
        null,
        'res-1',
        [],
        {},
        { resourceId: undefined },
        { resourceId: '' },
        { resourceId: 42 },
        { entityId: 'x'.repeat(201) },
        { resourceId: resource, userId: resource },
        { resourceId: resource, entityId: null },
      ];
      for (const subject of bad)
        await expectCode(
          () => store().forget(subject as Parameters<Store['forget']>[0]),
          'INVALID_ARGUMENT',
        );
      await expectCode(
        () => store().transaction((tx) => tx.forget({ resourceId: resource })),
        'INVALID_ARGUMENT',
      );
      // Nothing was deleted and no tombstone was recorded.
      expect(await store().getThread(thread.id)).toEqual(thread);
      const more: Thread = await store().createThread({ resourceId: resource });
      expect(more.resourceId).toBe(resource);
    });

    it('tells subscribeForgets listeners once the subject’s data is gone, before it returns', async () => {
      const resource = `res-${newId()}`;
      const other = `res-${newId()}`;
      await seedThread(store(), resource);
      await seedThread(store(), other);
      await store().addMemories([{ agentId: 'a', entityId: resource, content: { text: 'x' } }]);
      const heard: Array<{ notice: unknown; reads: Promise<[number, number]> }> = [];
      const stop = store().subscribeForgets((notice) => {
        // What a listener reads from here on holds nothing of the subject.
        const reads = Promise.all([
          store()
            .listThreads({ resourceId: resource })
            .then((p) => p.items.length),
          store().countMemories({ entityId: resource }),
        ]);
        heard.push({ notice, reads });
      });
      const unheard: unknown[] = [];
      store().subscribeForgets((n) => unheard.push(n))();
      const receipt = await store().forget({ resourceId: resource, entityId: resource });
      expect(heard.map((h) => h.notice)).toEqual([
        { subject: { resourceId: resource, entityId: resource }, at: receipt.at },
      ]);
      expect(await heard[0]!.reads).toEqual([0, 0]);
      expect(unheard).toEqual([]);
      // Each forget is told once, a forget of nothing too (a cache cannot know it held nothing).
      await store().forget({ worldId: `w-${newId()}` });
      expect(heard).toHaveLength(2);
      stop();
      await store().forget({ resourceId: other });
      expect(heard).toHaveLength(2);
      expect(() => store().subscribeForgets('no' as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
      );
    });

    if (options.reopen) {
      const reopen = options.reopen;
      it('keeps its tombstones in the database: a second store on it refuses too', async () => {
        const resource = `res-${newId()}`;
        await seedThread(store(), resource);
        await store().forget({ resourceId: resource });
        const other = await reopen(store());
        try {
          const e = await other.createThread({ resourceId: resource }).catch((x: unknown) => x);
          expect(isCairnError(e, 'FORGOTTEN'), String(e)).toBe(true);
        } finally {
          await other.close();
        }
      });

      it('tells a second store on the database of a forget through the first', async () => {
        // A store in this process on the same file or PGlite, or on a Postgres server (as
        // another process would be): each hears the forget (see subscribeForgets).
        const other = await reopen(store());
        try {
          const heard: unknown[] = [];
          other.subscribeForgets((n) => heard.push(n));
          const resource = `res-${newId()}`;
          await seedThread(store(), resource);
          const receipt = await store().forget({ resourceId: resource });
          await waitFor(() => heard.length > 0, 'the forget notice on the second store');
          expect(heard).toEqual([{ subject: { resourceId: resource }, at: receipt.at }]);
        } finally {
          await other.close();
        }
      });
    }
  });
}
