// `store.forget({ resourceId })` reaches a LangGraph user's graph threads when the saver is told
// which resource a run's thread belongs to (CairnSaverOptions.resourceId).
import { isCairnError } from '@cairn/core';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { afterAll, describe, expect, it } from 'vitest';
import { CairnSaver } from '../src/index.js';
import { closePglite, removeTempDirs, storeKinds } from './stores.js';

const chat = (checkpointer: CairnSaver) =>
  new StateGraph(MessagesAnnotation)
    .addNode('agent', (s) => ({ messages: [new AIMessage(`reply to ${s.messages.length}`)] }))
    .addEdge(START, 'agent')
    .addEdge('agent', END)
    .compile({ checkpointer });

const run = (graph: ReturnType<typeof chat>, thread_id: string, user_id: string) =>
  graph.invoke(
    { messages: [new HumanMessage(`a secret of ${user_id}`)] },
    { configurable: { thread_id, user_id } },
  );

const saverOf = (store: CairnSaver['store']) =>
  new CairnSaver(store, {
    resourceId: (config) => config.configurable?.user_id as string | undefined,
  });

afterAll(async () => {
  removeTempDirs();
  await closePglite();
});

describe.each(await storeKinds())('forgetting a LangGraph user on $name', (kind) => {
  it.skipIf(kind.skip)(
    'deletes the threads of the resource the saver was told, and refuses a later run on them',
    async () => {
      const { store, reopen, dispose } = await kind.open();
      try {
        const graph = chat(saverOf(store));
        await run(graph, 'ada-1', 'ada');
        await run(graph, 'ada-2', 'ada');
        await run(graph, 'bob-1', 'bob');
        expect((await store.getThread('ada-1'))?.resourceId).toBe('ada');
        const receipt = await store.forget({ resourceId: 'ada' });
        expect(receipt.counts.threads).toBe(2);
        expect(receipt.counts.messages).toBeGreaterThan(0);
        const fresh = saverOf(await reopen());
        expect(await fresh.getTuple({ configurable: { thread_id: 'ada-1' } })).toBeUndefined();
        expect(await fresh.getTuple({ configurable: { thread_id: 'bob-1' } })).toBeDefined();
        // A run finishing late on the saver that knew the thread, one on a fresh saver, and a
        // new thread of the forgotten user: each refused, none writes.
        for (const [g, thread] of [
          [graph, 'ada-1'],
          [chat(fresh), 'ada-2'],
          [chat(fresh), 'ada-3'],
        ] as const) {
          const e = await run(g, thread, 'ada').catch((error: unknown) => error);
          expect(isCairnError(e, 'FORGOTTEN'), `${thread}: ${String(e)}`).toBe(true);
        }
        expect((await store.listThreads({ resourceId: 'ada' })).items).toEqual([]);
        await run(chat(fresh), 'bob-1', 'bob');
      } finally {
        await dispose();
      }
    },
  );

  it.skipIf(kind.skip)('refuses a resourceId that is not a function', async () => {
    const { store, dispose } = await kind.open();
    try {
      expect(() => new CairnSaver(store, { resourceId: 'ada' as never })).toThrow(
        /resourceId must be a function/,
      );
    } finally {
      await dispose();
    }
  });
});
