import { DeltaSnapshot, type SerializerProtocol } from '@langchain/langgraph-checkpoint';
import { isStockSerde } from './revive.js';

/** `_encodeConstructorArgs` of the stock serde. */
const constructed = (name: string, method: string | null, args: unknown[]) => ({
  lc: 2,
  type: 'constructor',
  id: [name],
  method,
  args,
  kwargs: {},
});

/**
 * The stock serde's replacer (`_default` of `JsonPlusSerializer`), in the same order, with a
 * primitive or a plain object or array returned at once: it is called for every value of
 * every value serialized.
 */
function stockReplacer(_key: string, obj: unknown): unknown {
  if (obj === undefined) return { lc: 2, type: 'undefined' };
  if (typeof obj !== 'object' || obj === null) return obj;
  const proto = Object.getPrototypeOf(obj);
  if (proto === Object.prototype || proto === Array.prototype || proto === null) {
    return (obj as { lg_name?: unknown }).lg_name === 'Send' ? send(obj) : obj;
  }
  if (obj instanceof DeltaSnapshot) return { lc: 2, type: 'delta_snapshot', value: obj.value };
  if (obj instanceof Set || obj instanceof Map)
    return constructed(obj.constructor.name, null, [Array.from(obj)]);
  if (obj instanceof RegExp) return constructed('RegExp', null, [obj.source, obj.flags]);
  if (obj instanceof Error) return constructed('Error', null, [obj.message]);
  if ((obj as { lg_name?: unknown }).lg_name === 'Send') return send(obj);
  if (obj instanceof Uint8Array) return constructed('Uint8Array', 'from', [Array.from(obj)]);
  return obj;
}

function send(obj: object): unknown {
  const { node, args, timeout } = obj as { node: unknown; args: unknown; timeout?: unknown };
  return { node, args, ...(timeout !== undefined ? { timeout } : {}) };
}

/**
 * `serde.dumpsTyped(value)` as text. The stock serde (`JsonPlusSerializer`, its `dumpsTyped`
 * and `_dumps` not overridden) writes `JSON.stringify(value, its replacer)` (through
 * fast-safe-stringify, which gives the same text for a value without cycles) encoded as UTF-8:
 * that text is made here directly, without the cycle walk and the encoding the saver would
 * decode again. A value it cannot write that way (a cycle: `JSON.stringify` throws; nothing to
 * write) goes to the serde, as does every value of another serde.
 */
export class Dumper {
  #serde: SerializerProtocol | undefined;
  #stock = false;

  /** Whether `serde` is the stock serde, whose text `dump` makes itself. */
  covers(serde: SerializerProtocol): boolean {
    if (serde !== this.#serde) {
      this.#serde = serde;
      this.#stock = isStockSerde(serde, ['dumpsTyped', '_dumps']);
    }
    return this.#stock;
  }

  /** `[type, text]` for JSON, else `[type, bytes]`, as `serde.dumpsTyped(value)` gives them. */
  async dump(serde: SerializerProtocol, value: unknown): Promise<[string, string | Uint8Array]> {
    if (this.covers(serde) && !(value instanceof Uint8Array)) {
      let text: string | undefined;
      try {
        text = JSON.stringify(value, stockReplacer);
      } catch {
        text = undefined;
      }
      if (typeof text === 'string') return ['json', text];
    }
    return serde.dumpsTyped(value);
  }
}
