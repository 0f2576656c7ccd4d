// Messages of a message channel are revived without the default serde's round trip when that
// gives the serde's value (src/revive.ts): here every kind of LangChain message, read live and
// through a fresh saver on every store, must equal what MemorySaver (the serde itself) gives,
// class and every field; a custom serde must see every message.
import {
  AIMessage,
  AIMessageChunk,
  ChatMessage,
  FunctionMessage,
  HumanMessage,
  SystemMessage,
  ToolMessage,
} from '@langchain/core/messages';
import type { RunnableConfig } from '@langchain/core/runnables';
import { MemorySaver } from '@langchain/langgraph';
import {
  type BaseCheckpointSaver,
  type Checkpoint,
  emptyCheckpoint,
  JsonPlusSerializer,
  uuid6,
} from '@langchain/langgraph-checkpoint';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { CairnSaver } from '../src/index.js';
import { closePglite, removeTempDirs, storeKinds } from './stores.js';

const kinds = await storeKinds();
afterAll(async () => {
  await closePglite();
  removeTempDirs();
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** Messages of every class, with the fields their constructors map or parse. */
function messages() {
  return [
    new SystemMessage({ id: 's', content: 'Be brief.' }),
    new HumanMessage({
      id: 'h',
      name: 'ada',
      content: [
        { type: 'text', text: 'What is in this picture?' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA', detail: 'low' } },
      ],
      additional_kwargs: { trace: { depth: [1, 2, { x: null }], 'snake_key-x y': true } },
    }),
    new AIMessage({
      id: 'a',
      content: '',
      tool_calls: [{ id: 'call-1', name: 'search', args: { query: 'cairns', top_k: 3 } }],
      invalid_tool_calls: [{ id: 'call-2', name: 'bad', args: '{"x"', error: 'not JSON' }],
      usage_metadata: { input_tokens: 10, output_tokens: 5, total_tokens: 15 },
      response_metadata: { model_name: 'fake', finish_reason: 'tool_calls', score: -1.5e-7 },
    }),
    new ToolMessage({
      id: 't',
      content: 'found 3',
      tool_call_id: 'call-1',
      name: 'search',
      status: 'success',
      artifact: { hits: ['a', 'b', 'c'] },
    }),
    new AIMessageChunk({ id: 'c', content: 'partial', tool_call_chunks: [] }),
    new ChatMessage({ id: 'r', content: 'as a critic', role: 'critic' }),
    new FunctionMessage({ id: 'f', content: '{"ok":true}', name: 'lookup' }),
    // What the serde writes as records of its own: undefined (the fast path drops it as the
    // serde does), a key `lc` (escaped by LangChain; revived by the serde).
    new HumanMessage({ id: 'u', content: 'undefined', additional_kwargs: { u: undefined, k: 1 } }),
    new HumanMessage({ id: 'l', content: 'lc', additional_kwargs: { lc: 1, type: 'secret' } }),
    // A field of no alias: `load` passes it camelCased (`trace_id` as `traceId`).
    new AIMessage({ id: 'a2', content: 'done', trace_id: 'x-1' } as never),
  ];
}

const config: RunnableConfig = { configurable: { thread_id: 't', checkpoint_ns: '' } };

/** The `messages` channel of the thread's latest checkpoint, read through `saver`. */
const read = async (saver: BaseCheckpointSaver) =>
  (await saver.getTuple(config))!.checkpoint.channel_values.messages as unknown[];

/** Stores the messages as one checkpoint's `messages` channel, then reads it back. */
async function roundTrip(saver: BaseCheckpointSaver, list = messages()) {
  const checkpoint: Checkpoint = {
    ...emptyCheckpoint(),
    id: uuid6(0),
    channel_values: { messages: list },
    channel_versions: { messages: 1 },
  };
  await saver.put(config, checkpoint, { source: 'loop', step: 0, parents: {} }, { messages: 1 });
  return read(saver);
}

describe('reviving messages', () => {
  for (const kind of kinds) {
    it.skipIf(kind.skip)(`gives what the serde gives on ${kind.name}`, async () => {
      const expected = await roundTrip(new MemorySaver());
      const db = await kind.open();
      try {
        const saver = new CairnSaver(db.store);
        const other = new CairnSaver(await db.reopen());
        const live = await roundTrip(saver);
        const fresh = await read(other);
        // Read again, only the message the serde must revive (`l`) goes through it, once per saver.
        const loads = vi.spyOn(JsonPlusSerializer.prototype, 'loadsTyped');
        const again = await read(saver);
        const freshAgain = await read(other);
        const revived = loads.mock.calls.filter(([, data]) => String(data).includes('"lc":1'));
        expect(revived).toHaveLength(2);
        for (const got of [live, fresh, again, freshAgain]) {
          expect(got).toStrictEqual(expected);
          expect(got.map((m) => (m as object).constructor.name)).toEqual(
            expected.map((m) => (m as object).constructor.name),
          );
        }
        const byId = new Map((again as HumanMessage[]).map((m) => [m.id, m]));
        expect(Object.keys(byId.get('u')!.additional_kwargs)).toEqual(['k']);
        expect(byId.get('l')!.additional_kwargs).toEqual({ lc: 1, type: 'secret' });
      } finally {
        await db.dispose();
      }
    });
  }

  it('gives each read its own messages', async () => {
    const db = await kinds[1]!.open();
    try {
      // Alike: the serde revives the first (learning its class), the fast path the others.
      const list = () =>
        ['q1', 'q2', 'q3'].map(
          (id) => new HumanMessage({ id, content: id, additional_kwargs: { tags: [id] } }),
        );
      const saver = new CairnSaver(db.store);
      const mutate = (got: unknown) => {
        for (const m of got as HumanMessage[]) {
          m.content = 'changed';
          (m.additional_kwargs.tags as string[]).push('changed');
        }
      };
      mutate(await roundTrip(saver, list()));
      for (const s of [saver, new CairnSaver(await db.reopen())]) {
        for (let i = 0; i < 3; i++) {
          const got = await read(s);
          expect(got).toStrictEqual(list());
          mutate(got);
        }
      }
    } finally {
      await db.dispose();
    }
  });

  it('revives every message through a custom serde', async () => {
    class Tagging extends JsonPlusSerializer {
      override async loadsTyped(type: string, data: Uint8Array | string) {
        const value = await super.loadsTyped(type, data);
        for (const m of Array.isArray(value) ? value : [value]) {
          if (m instanceof HumanMessage || m instanceof AIMessage) m.name = 'tagged';
        }
        return value;
      }
    }
    const db = await kinds[1]!.open();
    try {
      const list = [new HumanMessage({ id: 'h', content: 'hi' }), new AIMessage('hello')];
      const saver = new CairnSaver(db.store, { serde: new Tagging() });
      const fresh = () => new CairnSaver(saver.store, { serde: new Tagging() });
      for (const got of [await roundTrip(saver, list), await read(saver), await read(fresh())]) {
        expect((got as HumanMessage[]).map((m) => m.name)).toEqual(['tagged', 'tagged']);
      }
    } finally {
      await db.dispose();
    }
  });
});
