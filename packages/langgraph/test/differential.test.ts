// The same scripts on LangGraph's MemorySaver and on CairnSaver: every getState and every
// getStateHistory entry must be equal, also when the history is re-read through a fresh saver
// on a fresh store instance (another process, after a restart).
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import type { RunnableConfig } from '@langchain/core/runnables';
import { type BaseCheckpointSaver, MemorySaver } from '@langchain/langgraph';
import { afterAll, describe, expect, it } from 'vitest';
import { CairnSaver } from '../src/index.js';
import {
  approvalGraph,
  chatGraph,
  deltaGraph,
  history,
  normalizer,
  Recorder,
  researchGraph,
  scripts,
} from './scripts.js';
import { closePglite, removeTempDirs, storeKinds } from './stores.js';

const graphs = {
  chat: chatGraph,
  approvals: approvalGraph,
  research: researchGraph,
  delta: deltaGraph,
};

type ScriptName = keyof typeof scripts;

/** Runs a script, then reads back the whole history of its threads through `readBack` too. */
async function run(
  name: ScriptName,
  saver: BaseCheckpointSaver,
  readBack: () => Promise<BaseCheckpointSaver>,
) {
  const r = new Recorder();
  const { graph, threads } = await scripts[name](saver, r);
  const norm = normalizer();
  const transcript = r.transcript;
  const live: unknown[] = [];
  for (const t of threads) live.push(await history(graph, t));
  const again = await readBack();
  const fresh = graphs[name](again);
  const reread: unknown[] = [];
  for (const t of threads) reread.push(await history(fresh, t));
  // getState of the newest and of every checkpoint, live and through a saver that has read
  // nothing yet (CairnSaver then reads only the tail of the log the checkpoint needs).
  const unread = () =>
    graphs[name](again instanceof CairnSaver ? new CairnSaver(again.store) : again);
  const states: unknown[] = [];
  const cold: unknown[] = [];
  for (const [i, t] of threads.entries()) {
    const configs = [t, ...(live[i] as Array<{ config: RunnableConfig }>).map((s) => s.config)];
    for (const config of configs) {
      states.push(await graph.getState(config));
      cold.push(await unread().getState(config));
    }
  }
  // One normalizer over the histories, so the same checkpoint gets the same label in both.
  return {
    transcript,
    live: norm(live),
    reread: norm(reread),
    states: norm(states),
    cold: norm(cold),
  };
}

const kinds = await storeKinds();
afterAll(async () => {
  await closePglite();
  removeTempDirs();
});

describe.each(Object.keys(scripts) as ScriptName[])('the %s script', (name) => {
  let reference: Awaited<ReturnType<typeof run>>;
  it('runs on MemorySaver (the reference)', async () => {
    const saver = new MemorySaver();
    reference = await run(name, saver, async () => saver);
    expect(reference.transcript.length).toBeGreaterThan(3);
    expect(reference.reread).toEqual(reference.live);
    expect(reference.cold).toEqual(reference.states);
  });

  for (const kind of kinds) {
    it.skipIf(kind.skip)(
      `gives the same states and histories on ${kind.name}`,
      async () => {
        const db = await kind.open();
        try {
          const cairn = await run(
            name,
            new CairnSaver(db.store),
            async () => new CairnSaver(await db.reopen()),
          );
          expect(cairn.transcript).toEqual(reference.transcript);
          expect(cairn.live).toEqual(reference.live);
          expect(cairn.reread).toEqual(reference.live);
          expect(cairn.states).toEqual(reference.states);
          expect(cairn.cold).toEqual(reference.states);
        } finally {
          await db.dispose();
        }
      },
      60_000,
    );
  }
});

describe('messages as Cairn messages', () => {
  it('revives LangChain messages as message classes', async () => {
    const saver = new CairnSaver((await kinds[1]!.open()).store);
    const graph = chatGraph(saver);
    const config = { configurable: { thread_id: 't' } };
    await graph.invoke({ messages: [new HumanMessage({ id: 'h', content: 'hi' })] }, config);
    const fresh = chatGraph(new CairnSaver(saver.store));
    const { values } = await fresh.getState(config);
    expect(values.messages[0]).toBeInstanceOf(HumanMessage);
    expect(values.messages[1]).toBeInstanceOf(AIMessage);
    await saver.store.close();
  });

  it('revives each message once per history: snapshots share messages, never lists', async () => {
    const db = await kinds[0]!.open();
    const graph = chatGraph(new CairnSaver(db.store));
    const config = { configurable: { thread_id: 'shared' } };
    for (const id of ['h-1', 'h-2']) {
      await graph.invoke({ messages: [new HumanMessage({ id, content: id })] }, config);
    }
    const lists = ((await history(graph, config)) as Array<{ values: { messages?: unknown[] } }>)
      .map((s) => s.values.messages ?? [])
      .filter((m) => m.length > 0);
    // [h-1, ai, h-2, ai], then [h-1, ai, h-2], [h-1, ai] twice (after turn 1, before turn 2), [h-1].
    expect(lists.map((l) => l.length)).toEqual([4, 3, 2, 2, 1]);
    for (const list of lists) {
      for (const [i, m] of list.entries()) expect(m).toBe(lists[0]![i]);
    }
    // Each snapshot's list is its own array: changing one leaves the others as they were.
    expect(new Set(lists).size).toBe(lists.length);
    lists[2]!.pop();
    expect(lists[3]).toHaveLength(2);
    await db.dispose();
  });

  it('stores each message once: the thread is the DAG, forks are branches of it', async () => {
    const db = await kinds[0]!.open();
    const saver = new CairnSaver(db.store);
    const graph = chatGraph(saver);
    const config: RunnableConfig = { configurable: { thread_id: 'dag' } };
    for (let i = 1; i <= 5; i++) {
      await graph.invoke(
        { messages: [new HumanMessage({ id: `h-${i}`, content: `q${i}` })] },
        config,
      );
    }
    const branch = (await db.store.getBranch('dag', 'langgraph'))!;
    const chain = await db.store.getChain(branch.headMessageId!);
    expect(chain.map((m) => [m.role, m.type])).toEqual(
      Array.from({ length: 5 }, () => [
        ['user', 'HumanMessage'],
        ['assistant', 'AIMessage'],
      ]).flat(),
    );
    // Every checkpoint's messages are a prefix of that one chain: 10 messages in all.
    const heads = new Set<string>();
    for (const c of await db.store.getStateCommits(branch.id)) {
      if (c.messageId) heads.add(c.messageId);
    }
    const stored = new Set<string>();
    for (const h of heads) for (const m of await db.store.getChain(h)) stored.add(m.id);
    expect(stored.size).toBe(10);
    // The graph's input and the tasks' writes refer to those messages: none is serialized again.
    const log = JSON.stringify((await db.store.getStateCommits(branch.id)).map((c) => c.update));
    expect(log).not.toMatch(/Message/);
    // Cairn's ids are UUIDv7 (LangGraph's checkpoint and task ids are v6 and v5).
    const referred = new Set(
      [...log.matchAll(/"(\w{8}-\w{4}-7\w{3}-\w{4}-\w{12})"/g)].map((m) => m[1]),
    );
    expect(referred).toEqual(stored);

    // Two forks of the checkpoint after turn 2 share its four messages and add one pair each.
    const past = await history(graph, config);
    const turn2 = past.find((s: any) => s.values.messages.length === 4 && s.next.length === 0) as {
      config: RunnableConfig;
    };
    const tips: string[] = [];
    for (const id of ['a', 'b']) {
      await graph.invoke({ messages: [new HumanMessage({ id, content: id })] }, turn2.config);
      const commits = await db.store.getStateCommits(branch.id);
      tips.push(commits.filter((c) => c.messageId !== null).at(-1)!.messageId!);
    }
    const [a, b] = await Promise.all(tips.map((t) => db.store.getChain(t)));
    expect(a!.slice(0, 4)).toEqual(chain.slice(0, 4));
    expect(b!.slice(0, 4)).toEqual(chain.slice(0, 4));
    expect(a![4]!.id).not.toBe(b![4]!.id);
    expect(a!.length).toBe(6);
    await db.dispose();
  });
});
