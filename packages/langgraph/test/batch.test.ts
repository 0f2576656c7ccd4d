// A LangGraph turn puts a checkpoint, then its tasks' writes and the next checkpoint while the
// one before is being stored: CairnSaver stores what queues behind a transaction in the next
// one, a namespace's records in one state commit, and reads back what MemorySaver does.
import { HumanMessage } from '@langchain/core/messages';
import { MemorySaver } from '@langchain/langgraph';
import { afterAll, describe, expect, it } from 'vitest';
import { CairnSaver } from '../src/index.js';
import { closePglite, removeTempDirs, storeKinds } from './stores.js';
import { turnGraph } from './turn-graph.js';

const config = { configurable: { thread_id: 't' } };
const turn = (graph: ReturnType<typeof turnGraph>, i: number) =>
  graph.invoke({ messages: [new HumanMessage(`question ${i}`)] }, config);

/** What a reader of the thread sees: every checkpoint's values, next nodes and step, newest first. */
async function history(graph: ReturnType<typeof turnGraph>) {
  const out: unknown[] = [];
  for await (const s of graph.getStateHistory(config)) {
    const { messages, ...rest } = s.values as { messages: { content: unknown }[] };
    out.push({
      messages: messages?.map((m) => m.content),
      ...rest,
      next: s.next,
      step: s.metadata?.step,
    });
  }
  return out;
}

afterAll(async () => {
  removeTempDirs();
  await closePglite();
});

describe.each(await storeKinds())('a LangGraph turn on $name', (kind) => {
  it.skipIf(kind.skip)(
    'stores each checkpoint with the writes that arrived with it: 5 state commits, not 9',
    async () => {
      const { store, reopen, dispose } = await kind.open();
      try {
        const graph = turnGraph(new CairnSaver(store));
        const reference = turnGraph(new MemorySaver());
        const commits = async () => {
          const branch = await store.getBranch('t', 'langgraph');
          return (await store.getStateCommits(branch!.id)).length;
        };
        await turn(graph, 0);
        await turn(reference, 0);
        const before = await commits();
        await turn(graph, 1);
        await turn(reference, 1);
        // The input checkpoint alone, then each checkpoint with the writes of the task before.
        expect((await commits()) - before).toBe(5);
        expect(await history(graph)).toEqual(await history(reference));
        // A fresh instance reads the commits back as the same history.
        expect(await history(turnGraph(new CairnSaver(await reopen())))).toEqual(
          await history(reference),
        );
      } finally {
        await dispose();
      }
    },
  );
});
