import { describe, expect, it } from 'vitest';
import { isCairnError, toJson } from '../src/index.js';

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
});
