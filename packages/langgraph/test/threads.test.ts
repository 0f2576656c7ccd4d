// Which Cairn threads CairnSaver uses (only its own, never an app's thread of the same id),
// and checkpoint namespaces of any length (subgraphs nested deeper than a branch name holds),
// each compared with LangGraph's MemorySaver.
import { isCairnError } from '@cairn/core';
import type { Store } from '@cairn/store';
import { AIMessage, type BaseMessage, HumanMessage } from '@langchain/core/messages';
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  type BaseCheckpointSaver,
  Command,
  END,
  interrupt,
  MemorySaver,
  MessagesAnnotation,
  START,
  StateGraph,
} from '@langchain/langgraph';
import { afterAll, describe, expect, it } from 'vitest';
import { CairnSaver } from '../src/index.js';
import { chatGraph, history, normalizer } from './scripts.js';
import { closePglite, removeTempDirs, storeKinds } from './stores.js';

const kinds = await storeKinds();
afterAll(async () => {
  await closePglite();
  removeTempDirs();
});

const config = (thread_id: string): RunnableConfig => ({ configurable: { thread_id } });

/** An app's own thread: made through the Store, with a message on its active branch. */
async function appThread(store: Store, id: string) {
  await store.createThread({ id, metadata: { app: 'chat' } });
  await store.addMessages([
    { id: `${id}-m1`, threadId: id, parentId: null, role: 'user', data: 'private app data' },
  ]);
  await store.createBranch({ threadId: id, name: 'main', headMessageId: `${id}-m1` });
}

/** A graph whose subgraphs nest `depth` deep, the innermost asking for approval (an interrupt). */
function nestedGraph(checkpointer: BaseCheckpointSaver, depth: number) {
  // Each level's compiled graph is the next level's node (its type differs per level).
  let inner: unknown = new StateGraph(MessagesAnnotation)
    .addNode('ask', async (s) => {
      const answer = interrupt({ question: 'approve?', depth });
      return {
        messages: [new AIMessage({ id: `a-${s.messages.length}`, content: `approved: ${answer}` })],
      };
    })
    .addEdge(START, 'ask')
    .addEdge('ask', END)
    .compile();
  for (let level = depth; level >= 1; level--) {
    const name = `research_subgraph${level}`;
    const graph = new StateGraph(MessagesAnnotation)
      .addNode(name, inner as never)
      .addEdge(START, name)
      .addEdge(name, END);
    if (level === 1) return graph.compile({ checkpointer });
    inner = graph.compile();
  }
  throw new Error('depth must be at least 1');
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/** The script on one checkpointer: an interrupt 6 deep, the state, a resume, then what was stored. */
async function nestedScript(
  saver: BaseCheckpointSaver,
  readBack: () => Promise<BaseCheckpointSaver>,
) {
  const graph = nestedGraph(saver, 6);
  const thread = config('nested');
  const norm = normalizer();
  const out: unknown[] = [];
  out.push(
    await graph.invoke({ messages: [new HumanMessage({ id: 'h-1', content: 'go' })] }, thread),
  );
  out.push(await graph.getState(thread, { subgraphs: true }));
  out.push(await nestedGraph(await readBack(), 6).getState(thread, { subgraphs: true }));
  out.push(await graph.invoke(new Command({ resume: 'yes' }), thread));
  out.push(await history(graph, thread));
  const namespaces = new Set<string>();
  // Listed through a saver that has read nothing yet: it finds every namespace from the store.
  for await (const t of (await readBack()).list(thread))
    namespaces.add(t.config.configurable!.checkpoint_ns);
  const longest = Math.max(...[...namespaces].map((ns) => ns.length));
  const shapes = [...namespaces].map((ns) => ns.replace(UUID, '<task>')).sort();
  return { transcript: norm(out), shapes, longest };
}

describe('subgraphs nested deeper than a branch name holds (F13)', () => {
  let reference: Awaited<ReturnType<typeof nestedScript>>;
  it('MemorySaver (the reference) runs a graph nested 6 deep', async () => {
    const saver = new MemorySaver();
    reference = await nestedScript(saver, async () => saver);
    expect(reference.shapes).toHaveLength(7);
    expect(reference.longest).toBeGreaterThan(300);
  });

  // Not on PGlite: it runs the server's SQL, about 6 s for this graph in WASM.
  for (const kind of kinds.filter((k) => k.name !== 'PGlite')) {
    it.skipIf(kind.skip)(
      `CairnSaver answers as MemorySaver on ${kind.name}`,
      async () => {
        const db = await kind.open();
        try {
          const got = await nestedScript(new CairnSaver(db.store), async () => {
            return new CairnSaver(await db.reopen());
          });
          expect(got).toEqual(reference);
        } finally {
          await db.dispose();
        }
      },
      60_000,
    );
  }
});

describe("an app's thread of the same id (F11)", () => {
  for (const kind of kinds) {
    it.skipIf(kind.skip)(
      `is never written, read or deleted by CairnSaver on ${kind.name}`,
      async () => {
        const db = await kind.open();
        const store = db.store;
        try {
          await appThread(store, 'chat-1');
          const before = await store.exportThread('chat-1');
          const saver = new CairnSaver(store);
          const input = { messages: [new HumanMessage({ id: 'h-1', content: 'hi' })] };
          const error = await chatGraph(saver)
            .invoke(input, config('chat-1'))
            .catch((e: unknown) => e);
          expect(isCairnError(error, 'CONFLICT')).toBe(true);
          expect((error as Error).message).toMatch(/not made by a LangGraph checkpointer/);
          // Nothing read from it, nothing written into it, and deleting leaves it alone.
          expect(await saver.getTuple(config('chat-1'))).toBeUndefined();
          const listed = [];
          for await (const t of saver.list({ configurable: {} })) listed.push(t);
          expect(listed).toEqual([]);
          await saver.deleteThread('chat-1');
          expect(await store.exportThread('chat-1')).toEqual(before);

          // The saver's own threads work as MemorySaver's do, deleteThread included.
          const reference = new MemorySaver();
          const answers = async (checkpointer: BaseCheckpointSaver) => {
            const graph = chatGraph(checkpointer);
            const out: unknown[] = [await graph.invoke(input, config('lg-1'))];
            await checkpointer.deleteThread('lg-1');
            await checkpointer.deleteThread('chat-1');
            out.push(await checkpointer.getTuple(config('lg-1')));
            out.push(
              ((await graph.invoke(input, config('lg-1'))) as { messages: BaseMessage[] }).messages
                .length,
            );
            return normalizer()(out);
          };
          expect(await answers(new CairnSaver(store))).toEqual(await answers(reference));
          expect(await store.exportThread('chat-1')).toEqual(before);
        } finally {
          await db.dispose();
        }
      },
      60_000,
    );
  }
});
