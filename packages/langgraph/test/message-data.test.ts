// A LangChain message is stored as a Cairn message whose data is its kwargs without the fields at
// their class's defaults (src/message-data.ts), and read back as the serde's full form: exactly,
// for every class, also with non-default values in those fields, and for data stored in the full
// form (as earlier releases stored every message).
import { type JsonObject, type JsonValue, jsonEqual } from '@cairn/core';
import {
  AIMessage,
  AIMessageChunk,
  type BaseMessage,
  ChatMessage,
  ChatMessageChunk,
  FunctionMessage,
  FunctionMessageChunk,
  HumanMessage,
  HumanMessageChunk,
  SystemMessage,
  SystemMessageChunk,
  ToolMessage,
  ToolMessageChunk,
} from '@langchain/core/messages';
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  type BaseCheckpointSaver,
  END,
  MemorySaver,
  MessagesAnnotation,
  messagesStateReducer,
  START,
  StateGraph,
} from '@langchain/langgraph';
import { JsonPlusSerializer } from '@langchain/langgraph-checkpoint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CairnSaver } from '../src/index.js';
import { compactMessage, expandMessage } from '../src/message-data.js';
import { chatGraph, history, normalizer } from './scripts.js';
import { closePglite, removeTempDirs, storeKinds } from './stores.js';

const kinds = await storeKinds();
afterAll(async () => {
  await closePglite();
  removeTempDirs();
});

const serde = new JsonPlusSerializer();

/** The serde's JSON of a message, and its class name (the Cairn message's type). */
async function serialized(message: BaseMessage): Promise<{ type: string; full: JsonObject }> {
  const [, bytes] = await serde.dumpsTyped(message);
  const full = JSON.parse(typeof bytes === 'string' ? bytes : new TextDecoder().decode(bytes));
  return { type: full.id.at(-1), full };
}

describe('compactMessage and expandMessage', () => {
  it('store a message of each class at its defaults as its own fields only', async () => {
    const cases: Array<[BaseMessage, JsonObject]> = [
      [new HumanMessage({ id: 'h', content: 'hi' }), { id: 'h', content: 'hi' }],
      [new AIMessage({ id: 'a', content: 'yo' }), { id: 'a', content: 'yo' }],
      [new SystemMessage('be brief'), { content: 'be brief' }],
      [
        new ToolMessage({ content: 'found', tool_call_id: 'c1' }),
        { content: 'found', tool_call_id: 'c1' },
      ],
      [new FunctionMessage({ content: 'f', name: 'fn' }), { content: 'f', name: 'fn' }],
      [new ChatMessage({ content: 'c', role: 'critic' }), { content: 'c', role: 'critic' }],
      [new HumanMessageChunk('h'), { content: 'h' }],
      [new AIMessageChunk('a'), { content: 'a' }],
      [new SystemMessageChunk('s'), { content: 's' }],
      [
        new ToolMessageChunk({ content: 't', tool_call_id: 'c' }),
        { content: 't', tool_call_id: 'c' },
      ],
      [new FunctionMessageChunk({ content: 'f', name: 'n' }), { content: 'f', name: 'n' }],
      [new ChatMessageChunk({ content: 'c', role: 'r' }), { content: 'c', role: 'r' }],
    ];
    for (const [message, compact] of cases) {
      const { type, full } = await serialized(message);
      const data = compactMessage(type, full);
      expect(data, type).toStrictEqual(compact);
      // The serde's text, key order included.
      expect(JSON.stringify(expandMessage(type, data)), type).toBe(JSON.stringify(full));
    }
  });

  it('give back a message whose id LangGraph set, its keys in another order', async () => {
    // The reducer gives a message without an id one; the serde then writes it last.
    const [message] = messagesStateReducer([], [new HumanMessage('hi')]);
    const { type, full } = await serialized(message!);
    const id = (full.kwargs as JsonObject).id!;
    expect(Object.keys(full.kwargs as JsonObject).at(-1)).toBe('id');
    const data = compactMessage(type, full);
    expect(data).toStrictEqual({ content: 'hi', id });
    expect(jsonEqual(expandMessage(type, data), full)).toBe(true);
  });

  it('keep the fields that hold something else', async () => {
    const call = {
      id: 'call-1',
      name: 'search',
      args: { q: 'cairns' },
      type: 'tool_call' as const,
    };
    const { type, full } = await serialized(
      new AIMessage({
        id: 'a',
        content: '',
        tool_calls: [call],
        additional_kwargs: { trace: [1, { x: null }] },
        response_metadata: { model_name: 'fake', finish_reason: 'tool_calls' },
      }),
    );
    const data = compactMessage(type, full);
    expect(data).toStrictEqual({
      id: 'a',
      content: '',
      tool_calls: [call],
      additional_kwargs: { trace: [1, { x: null }] },
      response_metadata: { model_name: 'fake', finish_reason: 'tool_calls' },
    });
    expect(jsonEqual(expandMessage(type, data), full)).toBe(true);
    const chunk = await serialized(
      new AIMessageChunk({
        content: 'a',
        tool_call_chunks: [{ name: 'x', args: '{}', id: '1', index: 0, type: 'tool_call_chunk' }],
      }),
    );
    const chunkData = compactMessage(chunk.type, chunk.full);
    expect(chunkData).toHaveProperty('tool_call_chunks');
    expect(jsonEqual(expandMessage(chunk.type, chunkData), chunk.full)).toBe(true);
  });

  it('store as it is what they cannot give back exactly', async () => {
    const { full } = await serialized(new HumanMessage({ id: 'h', content: 'hi' }));
    const kwargs = full.kwargs as JsonObject;
    const { response_metadata: _, ...lacking } = kwargs;
    const stays: Array<[string | null, JsonValue]> = [
      // A key `lc` in kwargs would read as data stored whole.
      ['HumanMessage', { ...full, kwargs: { ...kwargs, lc: 1 } }],
      // Another class than the Cairn message's type, or a class of another package.
      ['AIMessage', full],
      ['HumanMessage', { ...full, id: ['my_pkg', 'messages', 'HumanMessage'] }],
      // No defaults known for the class (RemoveMessage is never a Cairn message), or no class.
      ['RemoveMessage', { ...full, id: ['langchain_core', 'messages', 'RemoveMessage'] }],
      [null, full],
      ['__proto__', { ...full, id: ['langchain_core', 'messages', '__proto__'] }],
      // Keys besides lc, type, id, kwargs; a default field missing (expanding would add it).
      ['HumanMessage', { ...full, extra: true }],
      ['HumanMessage', { ...full, kwargs: lacking }],
      ['HumanMessage', { ...full, kwargs: 'hi' }],
      ['item', { content: 'not a message' }],
    ];
    for (const [type, value] of stays) {
      expect(compactMessage(type, value), JSON.stringify(value)).toBe(value);
      // Data with an `lc` key (or of no known class) reads back as it is.
      expect(expandMessage(type, value)).toBe(value);
    }
  });
});

/** An agent that calls a tool each turn: messages with tool calls and response metadata. */
function toolGraph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (s) => {
      const q = String(s.messages.at(-1)!.content);
      return {
        messages: [
          new AIMessage({
            id: `call-${q}`,
            content: '',
            tool_calls: [{ id: `tc-${q}`, name: 'search', args: { q }, type: 'tool_call' }],
            response_metadata: { model_name: 'fake', finish_reason: 'tool_calls' },
          }),
          new ToolMessage({ id: `tool-${q}`, content: `found ${q}`, tool_call_id: `tc-${q}` }),
          new AIMessage({ id: `ai-${q}`, content: `about ${q}` }),
        ],
      };
    })
    .addEdge(START, 'agent')
    .addEdge('agent', END)
    .compile({ checkpointer });
}

type Graph = ReturnType<typeof toolGraph>;

const thread: RunnableConfig = { configurable: { thread_id: 'tools' } };

async function turns(graph: Graph, ids: string[]) {
  for (const id of ids)
    await graph.invoke({ messages: [new HumanMessage({ id, content: id })] }, thread);
}

const normalized = async (graph: Graph) => normalizer()(await history(graph, thread));

describe('messages stored compactly', () => {
  // The reference: the same turns on MemorySaver.
  const reference = toolGraph(new MemorySaver());
  beforeAll(() => turns(reference, ['q-1', 'q-2', 'q-3']));

  for (const kind of kinds) {
    it.skipIf(kind.skip)(`are their own fields, read back exactly on ${kind.name}`, async () => {
      const db = await kind.open();
      try {
        const chat = chatGraph(new CairnSaver(db.store));
        const config = { configurable: { thread_id: 'chat' } };
        await chat.invoke({ messages: [new HumanMessage({ id: 'h-1', content: 'hi' })] }, config);
        const head = (await db.store.getBranch('chat', 'langgraph'))!.headMessageId!;
        const [human, ai] = await Promise.all(
          (await db.store.getChain(head)).map((m) => db.store.getMessage(m.id)),
        );
        expect([human!.type, human!.data]).toEqual(['HumanMessage', { id: 'h-1', content: 'hi' }]);
        expect([ai!.type, ai!.data]).toEqual([
          'AIMessage',
          { id: 'ai-1', content: 'reply 1 to hi (1 in context)' },
        ]);

        const graph = toolGraph(new CairnSaver(db.store));
        await turns(graph, ['q-1', 'q-2', 'q-3']);
        const chain = await db.store.getChain(
          (await db.store.getBranch('tools', 'langgraph'))!.headMessageId!,
        );
        expect(chain.map((m) => m.data)).toContainEqual({
          id: 'call-q-2',
          content: '',
          tool_calls: [{ id: 'tc-q-2', name: 'search', args: { q: 'q-2' }, type: 'tool_call' }],
          response_metadata: { model_name: 'fake', finish_reason: 'tool_calls' },
        });
        expect(chain.map((m) => m.data)).toContainEqual({
          id: 'tool-q-2',
          content: 'found q-2',
          tool_call_id: 'tc-q-2',
        });
        const expected = await normalized(reference);
        expect(await normalized(graph)).toEqual(expected);
        expect(await normalized(toolGraph(new CairnSaver(await db.reopen())))).toEqual(expected);
      } finally {
        await db.dispose();
      }
    });
  }

  for (const kind of kinds) {
    it.skipIf(kind.skip)(`read data stored whole (earlier releases) on ${kind.name}`, async () => {
      // The thread as this release writes it, then stored again with each message's data as
      // the serde's JSON of it (what earlier releases stored), on a new database.
      const written = await kinds[0]!.open();
      const db = await kind.open();
      try {
        await turns(toolGraph(new CairnSaver(written.store)), ['q-1', 'q-2', 'q-3']);
        const records = (await written.store.exportThread('tools'))!;
        const byId = new Map<JsonValue, JsonObject>();
        for (const m of (await reference.getState(thread)).values.messages) {
          const { full } = await serialized(m);
          byId.set((full.kwargs as JsonObject).id!, full);
        }
        const messages = records.messages.map((m) => {
          const full = byId.get((m.data as JsonObject).id!)!;
          expect(m.data).not.toHaveProperty('lc');
          expect(jsonEqual(expandMessage(m.type, m.data), full)).toBe(true);
          return { ...m, data: full };
        });
        expect(messages).toHaveLength(12);
        await db.store.restoreThread({ ...records, messages });

        const graph = toolGraph(new CairnSaver(await db.reopen()));
        expect(await normalized(graph)).toEqual(await normalized(reference));
        // Going on: the new messages are stored compactly after the ones stored whole.
        const more = toolGraph(new MemorySaver());
        await turns(more, ['q-1', 'q-2', 'q-3', 'q-4']);
        await graph.invoke({ messages: [new HumanMessage({ id: 'q-4', content: 'q-4' })] }, thread);
        expect(await normalized(graph)).toEqual(await normalized(more));
        const chain = await db.store.getChain(
          (await db.store.getBranch('tools', 'langgraph'))!.headMessageId!,
        );
        expect(chain.map((m) => 'lc' in (m.data as JsonObject))).toEqual([
          ...Array(12).fill(true),
          ...Array(4).fill(false),
        ]);
      } finally {
        await written.dispose();
        await db.dispose();
      }
    });
  }
});
