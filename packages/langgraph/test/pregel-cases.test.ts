// Graphs of LangGraph's own graph-execution suite (pregel.test.ts) that once went wrong on
// CairnSaver, run on MemorySaver and on CairnSaver over every store: what the graphs give back
// must be the same.

import type { Store } from '@cairn/store';
import { HumanMessage } from '@langchain/core/messages';
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  Annotation,
  type BaseCheckpointSaver,
  MemorySaver,
  MessagesAnnotation,
  START,
  StateGraph,
} from '@langchain/langgraph';
import { TASKS } from '@langchain/langgraph-checkpoint';
import { afterAll, describe, expect, it } from 'vitest';
import { CairnSaver } from '../src/index.js';
import { closePglite, removeTempDirs, storeKinds } from './stores.js';

const kinds = await storeKinds();
afterAll(async () => {
  await closePglite();
  removeTempDirs();
});

async function drain(stream: AsyncIterable<unknown>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const chunk of stream) out.push(chunk);
  return out;
}

/**
 * Every checkpoint of a thread's log reaches a root through its parents. Checked straight on
 * the store after each run, before a read could walk a cycle (a looping read never returns).
 */
async function expectAcyclic(store: Store | undefined, threadId: string) {
  if (!store) return;
  for (const branch of await store.listBranches(threadId)) {
    const parents = new Map<string, string | null>();
    for (const c of await store.getStateCommits(branch.id)) {
      const r = c.update as { lg?: string; id?: string; parent?: string | null };
      if (r.lg === 'checkpoint') parents.set(r.id!, r.parent ?? null);
    }
    for (const id of parents.keys()) {
      const seen = new Set<string>();
      for (let cur: string | null | undefined = id; cur != null; cur = parents.get(cur)) {
        expect(seen.has(cur), `${branch.name}: ${id} reaches ${cur} twice`).toBe(false);
        seen.add(cur);
      }
    }
  }
}

/** pregel.test.ts's "Subgraphs { durability: 'exit' } nested graph interrupts parallel". */
function nestedParallel(checkpointer: BaseCheckpointSaver, interruptBefore: string[] = []) {
  const inner = new StateGraph(
    Annotation.Root({
      myKey: Annotation<string>({ reducer: (a, b) => a + b, default: () => '' }),
      myOtherKey: Annotation<string>,
    }),
  )
    .addNode('inner1', async (state) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      return { myKey: 'got here', myOtherKey: state.myKey };
    })
    .addNode('inner2', (state) => ({ myKey: ' and there', myOtherKey: state.myKey }))
    .addEdge('inner1', 'inner2')
    .addEdge(START, 'inner1')
    .compile({ interruptBefore: ['inner2'] });
  return new StateGraph(
    Annotation.Root({
      myKey: Annotation<string>({ reducer: (a, b) => a + b, default: () => '' }),
    }),
  )
    .addNode('inner', inner)
    .addNode('outer1', () => ({ myKey: ' and parallel' }))
    .addNode('outer2', () => ({ myKey: ' and back again' }))
    .addEdge(START, 'inner')
    .addEdge(START, 'outer1')
    .addEdge(['inner', 'outer1'], 'outer2')
    .compile({ checkpointer, interruptBefore: interruptBefore as never });
}

/** Invokes and resumes the nested graph with durability 'exit'; what each run gave back. */
async function exitDurability(checkpointer: BaseCheckpointSaver, store?: Store) {
  const out: unknown[] = [];
  const app = nestedParallel(checkpointer);
  const config1 = { configurable: { thread_id: '1' }, durability: 'exit' as const };
  out.push(await app.invoke({ myKey: '' }, config1));
  await expectAcyclic(store, '1');
  out.push(await app.invoke(null, config1));
  await expectAcyclic(store, '1');
  out.push((await app.getState(config1)).values);

  const before = nestedParallel(checkpointer, ['outer1']);
  const config4 = {
    configurable: { thread_id: '4' },
    streamMode: 'values' as const,
    durability: 'exit' as const,
  };
  for (const input of [{ myKey: '' }, null, null]) {
    out.push(await drain(await before.stream(input, config4)));
    await expectAcyclic(store, '4');
  }
  out.push((await before.getState(config4)).values);
  return out;
}

/**
 * LangGraph 1.4 with durability 'exit' (the version of pregel.test.ts): a resumed run that
 * ends in an interrupt without finishing a step puts the checkpoint it started from again,
 * `put({ checkpoint_id: X }, { id: X, ... }, metadata, {})`. Done here as LangGraph 1.4 does
 * it, to the newest checkpoint of each namespace, between the interrupted run and its resume.
 */
async function reput(checkpointer: BaseCheckpointSaver, store?: Store) {
  const app = nestedParallel(checkpointer);
  const config = { configurable: { thread_id: 'again' }, durability: 'exit' as const };
  const out: unknown[] = [await app.invoke({ myKey: '' }, config)];
  const newest = new Map<string, Awaited<ReturnType<typeof checkpointer.getTuple>>>();
  for await (const t of checkpointer.list({ configurable: { thread_id: 'again' } })) {
    const ns = t.config.configurable?.checkpoint_ns ?? '';
    if (!newest.has(ns)) newest.set(ns, t);
  }
  expect(newest.size).toBe(2);
  for (const t of newest.values()) {
    await checkpointer.put(t!.config, t!.checkpoint, t!.metadata!, {});
    await expectAcyclic(store, 'again');
  }
  for (const t of newest.values()) {
    const again = await checkpointer.getTuple(t!.config);
    // Unversioned channels (empty task lists and barriers) are not stored: see the last test.
    const versioned = Object.entries(again?.checkpoint.channel_values ?? {}).filter(
      ([channel]) => channel in (again?.checkpoint.channel_versions ?? {}),
    );
    out.push(Object.fromEntries(versioned), again?.parentConfig?.configurable?.checkpoint_id);
    // MemorySaver records the checkpoint itself as the parent it was put again under.
    if (store) expect(again?.parentConfig).toEqual(t!.parentConfig);
  }
  out.push(await app.invoke(null, config));
  out.push((await app.getState(config)).values);
  return out;
}

/** A `__copy__` fork of a past checkpoint: its values and what the graph does from it. */
function echoGraph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(MessagesAnnotation)
    .addNode('echo', (s) => ({ messages: [{ role: 'ai', content: `echo ${s.messages.length}` }] }))
    .addEdge(START, 'echo')
    .compile({ checkpointer });
}

const text = (m: unknown) => (m as { content: string }).content;

async function copyFork(checkpointer: BaseCheckpointSaver) {
  const graph = echoGraph(checkpointer);
  const config = { configurable: { thread_id: 'fork' } };
  for (const id of ['h-1', 'h-2']) {
    await graph.invoke({ messages: [new HumanMessage({ id, content: id })] }, config);
  }
  const past: Array<{ config: RunnableConfig; values: { messages?: unknown[] } }> = [];
  for await (const s of graph.getStateHistory(config)) past.push(s as never);
  const source = past.find((s) => s.values.messages?.length === 2)!;
  const forked = await graph.updateState(source.config, undefined, '__copy__');
  const copy = await graph.getState(forked);
  const after = await graph.invoke(
    { messages: [new HumanMessage({ id: 'h-3', content: 'h-3' })] },
    forked,
  );
  return {
    copy: { values: copy.values.messages.map(text), next: copy.next },
    parentIsSourcesParent:
      copy.parentConfig?.configurable?.checkpoint_id ===
      past[past.indexOf(source) + 1]?.config.configurable?.checkpoint_id,
    after: after.messages.map(text),
    newest: (await graph.getState(config)).values.messages.map(text),
  };
}

describe("durability 'exit': a resumed run puts the checkpoint it started from again", () => {
  let reference: unknown[];
  it('runs on MemorySaver (the reference)', async () => {
    reference = await exitDurability(new MemorySaver());
    expect(reference[1]).toEqual({ myKey: 'got here and there and parallel and back again' });
  });
  for (const kind of kinds) {
    it.skipIf(kind.skip)(`gives the same on ${kind.name}, the log without cycles`, async () => {
      const db = await kind.open();
      try {
        expect(await exitDurability(new CairnSaver(db.store), db.store)).toEqual(reference);
        // Read again by a saver that has read nothing (the tail of the log, then all of it).
        const fresh = nestedParallel(new CairnSaver(await db.reopen()));
        for (const thread_id of ['1', '4']) {
          const { values } = await fresh.getState({ configurable: { thread_id } });
          expect(values).toEqual({ myKey: 'got here and there and parallel and back again' });
        }
      } finally {
        await db.dispose();
      }
    });
  }
});

describe('a checkpoint put again under its id is updated in place', () => {
  let reference: unknown[];
  it('runs on MemorySaver (the reference)', async () => {
    reference = await reput(new MemorySaver());
    expect(reference.at(-1)).toEqual({ myKey: 'got here and there and parallel and back again' });
  });
  for (const kind of kinds) {
    it.skipIf(kind.skip)(`keeps its parent and values on ${kind.name}`, async () => {
      const db = await kind.open();
      try {
        const cairn = await reput(new CairnSaver(db.store), db.store);
        // MemorySaver keeps the checkpoint whole; the parent it records is the checkpoint itself.
        expect(cairn.filter((_, i) => i !== 2 && i !== 4)).toEqual(
          reference.filter((_, i) => i !== 2 && i !== 4),
        );
        const fresh = nestedParallel(new CairnSaver(await db.reopen()));
        const { values } = await fresh.getState({ configurable: { thread_id: 'again' } });
        expect(values).toEqual(reference.at(-1));
      } finally {
        await db.dispose();
      }
    });
  }
});

describe("updateState(config, undefined, '__copy__'): a fork holds its source's values", () => {
  let reference: Awaited<ReturnType<typeof copyFork>>;
  it('runs on MemorySaver (the reference)', async () => {
    reference = await copyFork(new MemorySaver());
    expect(reference.copy.values).toEqual(['h-1', 'echo 1']);
    expect(reference.after).toEqual(['h-1', 'echo 1', 'h-3', 'echo 3']);
  });
  for (const kind of kinds) {
    it.skipIf(kind.skip)(`gives the same on ${kind.name}`, async () => {
      const db = await kind.open();
      try {
        expect(await copyFork(new CairnSaver(db.store))).toEqual(reference);
        // And through a saver that has read nothing yet.
        const fresh = echoGraph(new CairnSaver(await db.reopen()));
        const { values } = await fresh.getState({ configurable: { thread_id: 'fork' } });
        expect(values.messages.map(text)).toEqual(reference.newest);
      } finally {
        await db.dispose();
      }
    });
  }
});

describe('channel_values of a raw read', () => {
  // An unversioned channel's value (LangGraph's empty task list) is not stored, as with
  // PostgresSaver: graphs behave the same, a raw `get` does not show it (README).
  it(`leaves out ${TASKS}, which MemorySaver keeps as []`, async () => {
    const memory = new MemorySaver();
    const cairn = new CairnSaver((await kinds[0]!.open()).store);
    const values: unknown[] = [];
    for (const saver of [memory, cairn]) {
      const graph = new StateGraph(
        Annotation.Root({ input: Annotation<number>, output: Annotation<number> }),
      )
        .addNode('one', (s) => ({ output: s.input }))
        .addEdge(START, 'one')
        .compile({ checkpointer: saver });
      const config = { configurable: { thread_id: '1' } };
      await graph.invoke({ input: 1 }, config);
      values.push((await saver.get(config))?.channel_values);
    }
    expect(values[0]).toEqual({ input: 1, output: 1, [TASKS]: [] });
    expect(values[1]).toEqual({ input: 1, output: 1 });
  });
});
