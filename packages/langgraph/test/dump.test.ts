// The saver writes the stock serde's text itself (src/dump.ts): for every kind of value the
// serde treats specially it must be the serde's own text, byte for byte, and a value with a
// cycle, a custom serde and bytes must go to the serde.
import {
  AIMessage,
  HumanMessage,
  RemoveMessage,
  SystemMessage,
  ToolMessage,
} from '@langchain/core/messages';
import { Send } from '@langchain/langgraph';
import { DeltaSnapshot, JsonPlusSerializer } from '@langchain/langgraph-checkpoint';
import { describe, expect, it, vi } from 'vitest';
import { Dumper } from '../src/dump.js';

const decoder = new TextDecoder();

class Custom extends Error {}
class Tagged extends Set<number> {}

function values(): unknown[] {
  return [
    'text',
    42,
    -0,
    null,
    true,
    undefined,
    [1, undefined, 'two', null],
    { a: undefined, b: 1, nested: { c: [undefined] } },
    new HumanMessage({ id: 'h', content: 'hi \u{1F600} \ud800 lone' }),
    new AIMessage({
      id: 'a',
      content: [{ type: 'text', text: 'x' }],
      tool_calls: [{ id: 't', name: 'search', args: { q: 'cairn' } }],
      additional_kwargs: { when: new Date(0) },
    }),
    new ToolMessage({ id: 't1', content: 'ok', tool_call_id: 't' }),
    new SystemMessage('no id'),
    new RemoveMessage({ id: 'h' }),
    new Set([1, 2]),
    new Map<string, unknown>([['k', new Set(['v'])]]),
    new Tagged([3]),
    /a+b/gi,
    new Error('boom'),
    new Custom('custom'),
    new Send('node', { messages: [new HumanMessage('sent')] }),
    { lg_name: 'Send', node: 'n', args: 1, timeout: 5 },
    Object.assign([1], { lg_name: 'Send', node: 'n', args: 2 }),
    new Uint8Array([1, 2, 3]),
    { bytes: new Uint8Array([4]) },
    new DeltaSnapshot([new AIMessage('delta')]),
    Object.assign(Object.create(null) as object, { bare: true }),
    new Date(1_000),
    { toJSON: () => ({ replaced: true }) },
  ];
}

describe('Dumper', () => {
  it("writes the stock serde's text for every kind of value", async () => {
    const serde = new JsonPlusSerializer();
    const dumper = new Dumper();
    expect(dumper.covers(serde)).toBe(true);
    const dumps = vi.spyOn(serde, 'dumpsTyped');
    for (const value of values()) {
      const [type, bytes] = await new JsonPlusSerializer().dumpsTyped(value);
      const [ownType, own] = await dumper.dump(serde, value);
      expect(ownType).toBe(type);
      expect(typeof own === 'string' ? own : decoder.decode(own)).toBe(
        typeof bytes === 'string' ? bytes : decoder.decode(bytes),
      );
    }
    // Only the top-level bytes went to the serde.
    expect(dumps).toHaveBeenCalledTimes(1);
  });

  it('leaves a value with a cycle to the serde', async () => {
    const serde = new JsonPlusSerializer();
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const dumps = vi.spyOn(serde, 'dumpsTyped');
    const [type, text] = await new Dumper().dump(serde, cyclic);
    expect(dumps).toHaveBeenCalledTimes(1);
    expect(type).toBe('json');
    expect(decoder.decode(text as Uint8Array)).toBe('{"a":1,"self":"[Circular]"}');
  });

  it('leaves every value of a serde that writes its own way to it', async () => {
    class Upper extends JsonPlusSerializer {
      override async dumpsTyped(obj: unknown): Promise<[string, Uint8Array]> {
        const [type, bytes] = await super.dumpsTyped(obj);
        return [type, new TextEncoder().encode(decoder.decode(bytes).toUpperCase())];
      }
    }
    const serde = new Upper();
    const dumper = new Dumper();
    expect(dumper.covers(serde)).toBe(false);
    const [, text] = await dumper.dump(serde, { a: 'b' });
    expect(decoder.decode(text as Uint8Array)).toBe('{"A":"B"}');
  });
});
