// CairnSaver.prune: threads built by a real human-in-the-loop graph (forks, pending interrupts,
// a task's writes waiting beside an interrupted one) are copied to a second database; the copy
// is pruned with keep_latest, then both are resumed to the end. The pruned copy must end in the
// same state with the same node executions and tool runs, and storage must actually be freed.
import { createMemoryStore, type Store, type ThreadRecords } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import {
  dropSchema,
  freshSchema,
  POSTGRES_TEST_URL,
  postgresTestSkip,
} from '@cairn/store-postgres/testing';
import { createSqliteStore } from '@cairn/store-sqlite';
import { HumanMessage } from '@langchain/core/messages';
import { Command } from '@langchain/langgraph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CairnSaver, type PruneResult } from '../src/index.js';
import { buildThread, type Counts, hitlGraph, resumeAll, threadConfig } from './prune-graph.js';
import { approvalGraph, deltaGraph } from './scripts.js';
import { removeTempDirs, tempDir } from './stores.js';

afterAll(removeTempDirs);

const skipServer = await postgresTestSkip('langgraph prune');
const schemas: string[] = [];
afterAll(async () => {
  for (const s of schemas) await dropSchema(s);
});

// Threads are built once, on the in-memory store, and copied into each kind's two databases.
// CAIRN_PRUNE_THREADS=1000 runs the differential at the scale.
const THREADS = Number(process.env.CAIRN_PRUNE_THREADS ?? 30);

interface Kind {
  name: string;
  skip: string | false;
  /** How many of the built threads this kind runs (the SQL stores run fewer: they are slower). */
  threads: number;
  open(): Store | Promise<Store>;
}
const kinds: Kind[] = [
  { name: 'the in-memory store', skip: false, threads: THREADS, open: () => createMemoryStore() },
  {
    name: 'a SQLite file',
    skip: false,
    threads: Math.ceil(THREADS / 3),
    open: () => createSqliteStore({ path: `${tempDir()}/agent.db` }),
  },
  {
    name: 'the PostgreSQL server',
    skip: skipServer,
    threads: Math.ceil(THREADS / 6),
    open: () => {
      const schema = freshSchema('langgraph_prune');
      schemas.push(schema);
      return createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema });
    },
  },
];

/** Runs `fn` on every item, `width` at a time. */
async function inBatches<T>(items: T[], width: number, fn: (item: T) => Promise<void>) {
  for (let i = 0; i < items.length; i += width)
    await Promise.all(items.slice(i, i + width).map(fn));
}

/** Every message and state commit of the threads: what the store holds for them. */
async function stored(store: Store, ids: string[]) {
  const total = { messages: 0, commits: 0 };
  for (const id of ids) {
    const r = (await store.exportThread(id))!;
    total.messages += r.messages.length;
    total.commits += r.stateCommits.length;
  }
  return total;
}

/** Resumes a thread to its end, then one more turn (answered to its end too). */
async function finish(graph: ReturnType<typeof hitlGraph>, id: string) {
  const config = threadConfig(id);
  await resumeAll(graph, config, 'resume');
  await graph.invoke({ messages: [new HumanMessage({ id: 'h-more', content: 'more' })] }, config);
  await resumeAll(graph, config, 'again');
  const state = await graph.getState(config);
  return { values: JSON.parse(JSON.stringify(state.values)), next: state.next };
}

const sorted = (counts: Counts) => [...counts.entries()].sort(([a], [b]) => (a < b ? -1 : 1));

let built: ThreadRecords[] = [];
beforeAll(async () => {
  const store = createMemoryStore();
  const graph = hitlGraph(new CairnSaver(store), new Map());
  const ids = Array.from({ length: THREADS }, (_, i) => `t-${i}`);
  await inBatches([...ids.entries()], 10, ([i, id]) => buildThread(graph, id, i));
  built = await Promise.all(ids.map(async (id) => (await store.exportThread(id))!));
});

describe.each(kinds)('prune keep_latest on $name', (kind) => {
  it.skipIf(kind.skip)(
    'resumes every thread exactly as the unpruned copy does, and frees what it reports',
    async () => {
      const original = await kind.open();
      const copy = await kind.open();
      try {
        const records = built.slice(0, kind.threads);
        const ids = records.map((r) => r.thread.id);
        for (const r of records) {
          await original.restoreThread(r);
          await copy.restoreThread(r);
        }
        const before = new Map<string, unknown>();
        const reader = new CairnSaver(copy);
        for (const id of ids) before.set(id, await reader.getTuple(threadConfig(id)));
        const sizeBefore = await stored(copy, ids);
        const freed: PruneResult = await reader.prune(ids, { strategy: 'keep_latest' });
        const sizeAfter = await stored(copy, ids);

        // Storage freed, as reported: every thread had older checkpoints and their writes,
        // and a fork leaves the messages of the lineage it left behind.
        expect(freed.checkpoints).toBeGreaterThan(ids.length);
        expect(freed.writes).toBeGreaterThan(0);
        expect(freed.messages).toBeGreaterThan(0);
        expect(sizeAfter.messages).toBe(sizeBefore.messages - freed.messages);
        expect(sizeAfter.commits).toBeLessThan(sizeBefore.commits - freed.checkpoints);
        // Each thread: one checkpoint, read back as it was (by a saver that has read nothing).
        const fresh = new CairnSaver(copy);
        for (const id of ids) {
          const listed = [];
          for await (const t of fresh.list(threadConfig(id))) listed.push(t);
          expect(listed.map((t) => t.config)).toEqual([
            (before.get(id) as (typeof listed)[0]).config,
          ]);
          expect(await fresh.getTuple(threadConfig(id))).toEqual(before.get(id));
          expect(await reader.getTuple(threadConfig(id))).toEqual(before.get(id));
        }
        // Pruning again finds nothing to free.
        expect(await reader.prune(ids)).toEqual({ checkpoints: 0, writes: 0, messages: 0 });

        const runs = { original: new Map() as Counts, pruned: new Map() as Counts };
        const graphs = {
          original: hitlGraph(new CairnSaver(original), runs.original),
          pruned: hitlGraph(new CairnSaver(copy), runs.pruned),
        };
        const ends = { original: new Map<string, unknown>(), pruned: new Map<string, unknown>() };
        await inBatches(ids, 10, async (id) => {
          ends.original.set(id, await finish(graphs.original, id));
          ends.pruned.set(id, await finish(graphs.pruned, id));
        });
        for (const id of ids) expect(ends.pruned.get(id)).toEqual(ends.original.get(id));
        expect(sorted(runs.pruned)).toEqual(sorted(runs.original));
        // Thread 0 stopped at round 1's search, beside calc's writes: calc ran again only in
        // round 2, search and publish in rounds 1 and 2, the agent in rounds 2, 3 and 4.
        expect(sorted(runs.pruned).filter(([k]) => k.startsWith('t-0:'))).toEqual([
          ['t-0:agent', 3],
          ['t-0:calc', 1],
          ['t-0:review', 4],
          ['t-0:search', 3],
          ['t-0:tool:calc', 1],
          ['t-0:tool:publish', 2],
          ['t-0:tool:search', 2],
        ]);
      } finally {
        await original.close();
        await copy.close();
      }
    },
  );
});

describe('prune', () => {
  it('keeps the interrupt inside a subgraph resumable, also for a saver that read the thread before', async () => {
    const store = createMemoryStore();
    const saver = new CairnSaver(store);
    const a = threadConfig('a');
    const b = threadConfig('b');
    // A graph per thread: its fake model numbers its replies.
    const graphs = [approvalGraph(saver), approvalGraph(saver)];
    for (const [i, config] of [a, b].entries()) {
      const graph = graphs[i]!;
      await graph.invoke({ messages: [new HumanMessage({ id: 'q-1', content: 'q-1' })] }, config);
      await graph.invoke(new Command({ resume: 'yes' }), config);
      await graph.invoke({ messages: [new HumanMessage({ id: 'q-2', content: 'q-2' })] }, config);
    }
    const cached = await saver.getTuple(b);
    const all = [];
    for await (const t of saver.list(b)) all.push(t);
    // Pruned by another saver (another process): `saver` has the old logs cached.
    const freed = await new CairnSaver(store).prune(['b']);
    expect(freed.checkpoints).toBeGreaterThan(0);
    const namespaces = new Map<string, number>();
    for await (const t of saver.list(b)) {
      const ns = t.config.configurable!.checkpoint_ns as string;
      namespaces.set(ns, (namespaces.get(ns) ?? 0) + 1);
    }
    // One checkpoint left in each namespace.
    const before = new Set(all.map((t) => t.config.configurable!.checkpoint_ns));
    expect(namespaces).toEqual(new Map([...before].map((ns) => [ns, 1])));
    expect(namespaces.size).toBeGreaterThan(1);
    expect(await saver.getTuple(b)).toEqual(cached);
    const states = [];
    for (const [i, config] of [a, b].entries()) {
      const graph = graphs[i]!;
      await graph.invoke(new Command({ resume: 'no' }), config);
      states.push((await graph.getState(config, { subgraphs: true })).values);
    }
    expect(states[1]).toEqual(states[0]);
  });

  it("a store sweep leaves a saver thread's namespaces resumable, interrupt inside a subgraph included", async () => {
    const stores = [createMemoryStore(), createMemoryStore()];
    const config = threadConfig('swept');
    const graphs = stores.map((s) => approvalGraph(new CairnSaver(s)));
    for (const graph of graphs) {
      await graph.invoke({ messages: [new HumanMessage({ id: 'q-1', content: 'q-1' })] }, config);
      await graph.invoke(new Command({ resume: 'yes' }), config);
      await graph.invoke({ messages: [new HumanMessage({ id: 'q-2', content: 'q-2' })] }, config);
    }
    const swept = stores[0]!;
    const branches = await swept.listBranches('swept');
    expect(branches.length).toBeGreaterThan(1);
    await new Promise((r) => setTimeout(r, 5));
    const report = await swept.sweep({ branchTtlMs: 1, keepStateCommits: 1, turnTtlMs: 1 });
    expect(report).toMatchObject({ ran: true, scanned: 1 });
    expect(report.freed.branches).toBe(0);
    expect(await swept.listBranches('swept')).toEqual(branches);
    const states = [];
    for (const graph of graphs) {
      await graph.invoke(new Command({ resume: 'no' }), config);
      states.push((await graph.getState(config, { subgraphs: true })).values);
    }
    expect(states[0]).toEqual(states[1]);
  });

  it('keeps the lineage a DeltaChannel is replayed from, and drops the other forks', async () => {
    const store = createMemoryStore();
    const config = threadConfig('delta');
    const human = (id: string) => ({ messages: [new HumanMessage({ id, content: id })] });
    const graph = deltaGraph(new CairnSaver(store));
    for (const id of ['d-1', 'd-2', 'd-3']) await graph.invoke(human(id), config);
    // A fork by a turn from the checkpoint after the first turn.
    let first: { config: typeof config } | undefined;
    for await (const s of graph.getStateHistory(config))
      if ((s.values as { messages: unknown[] }).messages.length === 2 && s.next.length === 0)
        first = s;
    await graph.invoke(human('f'), first!.config);
    const copy = createMemoryStore();
    await copy.restoreThread((await store.exportThread('delta'))!);
    const saver = new CairnSaver(copy);
    const before = await saver.getTuple(config);
    const freed = await saver.prune(['delta']);
    // The second and third turns' checkpoints (input, loop, end: 3 each) went; the rest is
    // the fork's lineage, which its messages are replayed from.
    expect(freed.checkpoints).toBe(6);
    expect(await new CairnSaver(copy).getTuple(config)).toEqual(before);
    const ends = [];
    for (const s of [store, copy]) {
      const again = deltaGraph(new CairnSaver(s));
      await again.invoke(human('d-4'), config);
      ends.push((await again.getState(config)).values);
    }
    expect(ends[1]).toEqual(ends[0]);
    // The new graph's model numbers from 1 again: its reply replaces `delta-1` in place.
    const ids = (ends[0] as { messages: Array<{ id: string }> }).messages.map((m) => m.id);
    expect(ids).toEqual(['d-1', 'delta-1', 'f', 'delta-4', 'd-4']);
  });

  it("deletes threads with 'delete', leaves the app's threads and absent ones alone", async () => {
    const store = createMemoryStore();
    const saver = new CairnSaver(store);
    const graph = approvalGraph(saver);
    await graph.invoke(
      { messages: [new HumanMessage({ id: 'q', content: 'q' })] },
      threadConfig('x'),
    );
    const app = await store.createThreadWithBranch({ id: 'app' });
    await store.addMessages([
      { threadId: app.thread.id, parentId: null, role: 'user', data: 'mine' },
    ]);
    const freed = await saver.prune(['x', 'app', 'absent'], { strategy: 'delete' });
    expect(freed.checkpoints).toBeGreaterThan(0);
    expect(freed.messages).toBeGreaterThan(0);
    expect(await store.getThread('x')).toBeNull();
    expect(await saver.getTuple(threadConfig('x'))).toBeUndefined();
    expect((await store.exportThread('app'))!.messages).toHaveLength(1);
    expect(await saver.prune(['app'])).toEqual({ checkpoints: 0, writes: 0, messages: 0 });
  });

  it("keeps what the app keeps on a saver's thread: named checkpoints, branches, turns", async () => {
    const store = createMemoryStore();
    const graph = hitlGraph(new CairnSaver(store), new Map());
    await buildThread(graph, 'f', 3);
    // Which messages a prune frees, found on a copy.
    const copy = createMemoryStore();
    await copy.restoreThread((await store.exportThread('f'))!);
    await new CairnSaver(copy).prune(['f']);
    const left = new Set((await copy.exportThread('f'))!.messages.map((m) => m.id));
    const dropped = (await store.exportThread('f'))!.messages.filter((m) => !left.has(m.id));
    expect(dropped.length).toBeGreaterThan(2);
    const [named, onBranch, inTurn] = dropped.slice(-3).map((m) => m.id);
    await store.saveCheckpoint({ threadId: 'f', name: 'mine', messageId: named! });
    const branch = await store.createBranch({ threadId: 'f', name: 'app', headMessageId: null });
    await store.appendStateCommit({ branchId: branch.id, messageId: onBranch!, update: {} }, 0);
    await store.putTurn({
      id: 'turn-1',
      threadId: 'f',
      messageId: inTurn!,
      source: null,
      userId: null,
      status: 'finished',
      state: {},
      steps: [],
      startedAt: 1,
      finishedAt: 2,
    });
    const before = (await store.exportThread('f'))!.messages.length;
    const freed = await new CairnSaver(store).prune(['f']);
    const after = (await store.exportThread('f'))!;
    expect(after.checkpoints.map((c) => [c.name, c.messageId])).toEqual([['mine', named]]);
    expect(after.branches.find((b) => b.name === 'app')?.id).toBe(branch.id);
    expect(after.stateCommits.filter((c) => c.branchId === branch.id)).toHaveLength(1);
    expect(after.turns.map((t) => t.messageId)).toEqual([inTurn]);
    const kept = new Set(after.messages.map((m) => m.id));
    for (const id of [named, onBranch, inTurn]) expect(kept.has(id!)).toBe(true);
    expect(freed.messages).toBe(before - after.messages.length);
    expect(freed.messages).toBeGreaterThan(0);
  });

  it('refuses bad arguments before it writes anything', async () => {
    const saver = new CairnSaver(createMemoryStore());
    const bad = [
      () => saver.prune('t' as never),
      () => saver.prune([1] as never),
      () => saver.prune(['t'], { strategy: 'oldest' as never }),
      () => saver.prune(['t'], { keep: 1 } as never),
    ];
    for (const call of bad)
      await expect(call()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});
