import { describe, expect, it } from 'vitest';
import { findNonJson, isCairnError, MAX_JSON_DEPTH, setOwn, toJson } from '../src/index.js';

function message(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (isCairnError(e, 'INVALID_ARGUMENT')) return e.message;
    throw e;
  }
  return 'no error';
}

describe('toJson', () => {
  it('copies JSON, leaving out object keys whose value is undefined', () => {
    const input = {
      id: 'm',
      metadata: undefined,
      parts: [{ type: 'text', text: 'hi', extra: undefined }],
    };
    const out = toJson(input, 'm');
    expect(out).toEqual({ id: 'm', parts: [{ type: 'text', text: 'hi' }] });
    expect(Object.keys(out as object)).toEqual(['id', 'parts']);
    expect(out).not.toBe(input);
    expect(toJson('s', 'x')).toBe('s');
    expect(toJson(null, 'x')).toBeNull();
  });

  it('rejects what is not plain JSON, naming the path', () => {
    expect(message(() => toJson({ m: { at: new Date(0) } }, 'messages[3]'))).toBe(
      'messages[3].m.at: an instance of Date is not plain JSON',
    );
    expect(message(() => toJson([1, undefined], 'a'))).toBe('a[1]: undefined is not JSON');
    expect(message(() => toJson({ n: Number.NaN }, 'a'))).toBe('a.n: NaN is not a JSON number');
    expect(message(() => toJson({ f: () => 1 }, 'a'))).toBe('a.f: a function is not JSON');
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(message(() => toJson(cycle, 'a'))).toBe('a.self: a cycle is not JSON');
    // A shared (not cyclic) object is fine.
    const shared = { x: 1 };
    expect(toJson({ a: shared, b: shared }, 'a')).toEqual({ a: { x: 1 }, b: { x: 1 } });
  });

  it('copies a "__proto__" key as an own property, leaving prototypes alone', () => {
    const input = JSON.parse('{"__proto__": {"isAdmin": true}, "a": {"__proto__": [1]}}');
    const out = toJson(input, 'x') as Record<string, unknown>;
    expect(Object.keys(out)).toEqual(['__proto__', 'a']);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(out.isAdmin).toBeUndefined();
    expect(Object.getOwnPropertyDescriptor(out, '__proto__')?.value).toEqual(
      JSON.parse('{"isAdmin": true}'),
    );
    expect(Object.keys(out.a as object)).toEqual(['__proto__']);
    expect(JSON.stringify(out)).toBe(JSON.stringify(input));
    expect(findNonJson(out)).toBeNull();
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
  });

  it('setOwn keeps "__proto__" as data', () => {
    const target: Record<string, unknown> = {};
    setOwn(target, '__proto__', { polluted: true });
    setOwn(target, 'b', 2);
    expect(Object.keys(target)).toEqual(['__proto__', 'b']);
    expect(Object.getPrototypeOf(target)).toBe(Object.prototype);
    expect(target.polluted).toBeUndefined();
  });

  it('refuses nesting deeper than the stores take, at any depth, without overflowing the stack', () => {
    const nest = (depth: number): unknown => {
      let v: unknown = 'leaf';
      for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { v };
      return v;
    };
    // The same limit as findNonJson (every store's): the deepest it takes, then one more.
    expect(findNonJson(nest(MAX_JSON_DEPTH))).toBeNull();
    expect(toJson(nest(MAX_JSON_DEPTH), 'm')).toEqual(nest(MAX_JSON_DEPTH));
    const tooDeep = findNonJson(nest(MAX_JSON_DEPTH + 1), 'm');
    expect(message(() => toJson(nest(MAX_JSON_DEPTH + 1), 'm'))).toBe(
      `${tooDeep?.path}: ${tooDeep?.reason}`,
    );
    for (const depth of [600, 10_000, 100_000]) {
      expect(message(() => toJson(nest(depth), 'm'))).toMatch(/^m(\.v|\[0\])+: it nests deeper/);
    }
  });

  it('refuses what a store refuses in keys and texts, naming the path and position', () => {
    expect(message(() => toJson({ a: { 'cut \ud83d': 1 } }, 'm'))).toBe(
      'm.a.cut \ud83d: the key holds a lone surrogate (U+D83D) at position 4; stored text cannot',
    );
    expect(message(() => toJson({ a: ['ok', 'x\u0000'] }, 'm'))).toBe(
      'm.a[1]: the text holds a NUL character at position 1; stored text cannot',
    );
    // A key left out (its value is undefined) is not checked.
    expect(toJson({ 'x\u0000': undefined, b: 1 }, 'm')).toEqual({ b: 1 });
  });
});
