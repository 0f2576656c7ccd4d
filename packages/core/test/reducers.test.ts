import { describe, expect, it } from 'vitest';
import { isCairnError, reducers } from '../src/index.js';

const { replace, append, appendUnique, union, mergeRecord, messages } = reducers;

describe('replace', () => {
  it('takes the update', () => expect(replace(1, 2)).toBe(2));
  it('keeps the existing value when the update is undefined', () =>
    expect(replace('a', undefined)).toBe('a'));
  it('takes the update when nothing exists', () => expect(replace(undefined, 'x')).toBe('x'));
  it('null is a value, not a missing update', () =>
    expect(replace<number | null>(3, null)).toBeNull());
});

describe('append', () => {
  it('concatenates, keeping duplicates', () =>
    expect(append([1, 2], [2, 3])).toEqual([1, 2, 2, 3]));
  it('missing existing takes the update', () => expect(append(undefined, [1])).toEqual([1]));
  it('both missing gives []', () => expect(append(undefined, undefined)).toEqual([]));
  it('missing update keeps existing (same identity)', () => {
    const e = [1];
    expect(append(e, undefined)).toBe(e);
  });
  it('does not mutate its inputs', () => {
    const e = [1];
    const u = [2];
    append(e, u);
    expect(e).toEqual([1]);
    expect(u).toEqual([2]);
  });
  it('rejects a non-array update', () => {
    expect(() => append([1], 2 as never)).toThrowError(
      expect.objectContaining({ code: 'INVALID_UPDATE' }),
    );
  });
});

describe('appendUnique', () => {
  it('removes duplicates keeping the first occurrence and the order', () => {
    expect(appendUnique(['b', 'a'], ['c', 'a', 'b', 'd', 'c'])).toEqual(['b', 'a', 'c', 'd']);
  });
  it('missing existing takes the update as it is', () =>
    expect(appendUnique(undefined, ['x', 'x'])).toEqual(['x', 'x']));
  it('both missing gives []', () => expect(appendUnique(undefined, undefined)).toEqual([]));
  it('missing update keeps existing', () => {
    const e = ['a'];
    expect(appendUnique(e, undefined)).toBe(e);
  });
  it('compares objects by value, whatever their key order', () => {
    expect(appendUnique([{ a: 1, b: 2 }], [{ b: 2, a: 1 }, { a: 2 }])).toEqual([
      { a: 1, b: 2 },
      { a: 2 },
    ]);
  });
  it('does not confuse 1 and "1"', () =>
    expect(appendUnique<unknown>([1], ['1'])).toEqual([1, '1']));
});

describe('union', () => {
  it('never removes and keeps insertion order', () =>
    expect(union([3, 1], [2, 1, 4])).toEqual([3, 1, 2, 4]));
  it('is a set even when nothing existed', () =>
    expect(union(undefined, [1, 1, 2])).toEqual([1, 2]));
  it('missing update keeps existing', () => expect(union([1], undefined)).toEqual([1]));
  it('missing both gives []', () => expect(union(undefined, undefined)).toEqual([]));
});

describe('mergeRecord', () => {
  it('merges shallowly, update wins', () =>
    expect(mergeRecord<Record<string, number>>({ a: 1, b: 1 }, { b: 2, c: 3 })).toEqual({
      a: 1,
      b: 2,
      c: 3,
    }));
  it('an update with no keys clears to {}', () => expect(mergeRecord({ a: 1 }, {})).toEqual({}));
  it('missing existing takes the update', () =>
    expect(mergeRecord(undefined, { a: 1 })).toEqual({ a: 1 }));
  it('missing both gives {}', () => expect(mergeRecord(undefined, undefined)).toEqual({}));
  it('keeps a "__proto__" key as data (spread copies own properties)', () => {
    const update = JSON.parse('{"__proto__": {"isAdmin": true}}') as Record<string, unknown>;
    for (const merged of [mergeRecord({ a: 1 }, update), mergeRecord(undefined, update)]) {
      expect(Object.keys(merged)).toContain('__proto__');
      expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
      expect((merged as { isAdmin?: unknown }).isAdmin).toBeUndefined();
    }
  });
  it('missing update keeps existing (same identity)', () => {
    const e = { a: 1 };
    expect(mergeRecord(e, undefined)).toBe(e);
  });
  it('does not mutate existing', () => {
    const e = { a: 1 };
    mergeRecord(e, { b: 2 } as never);
    expect(e).toEqual({ a: 1 });
  });
  it('rejects an array update', () => {
    expect(() => mergeRecord({ a: 1 }, [1] as never)).toThrowError(
      expect.objectContaining({ code: 'INVALID_UPDATE' }),
    );
  });
});

describe('messages', () => {
  const m = (id: string, text: string) => ({ id, text });
  it('appends new ids', () =>
    expect(messages([m('1', 'a')], [m('2', 'b')])).toEqual([m('1', 'a'), m('2', 'b')]));
  it('replaces an existing id in place', () => {
    expect(messages([m('1', 'a'), m('2', 'b')], [m('1', 'A')])).toEqual([m('1', 'A'), m('2', 'b')]);
  });
  it('removes by { remove: id }', () => {
    expect(messages([m('1', 'a'), m('2', 'b'), m('3', 'c')], [{ remove: '2' }])).toEqual([
      m('1', 'a'),
      m('3', 'c'),
    ]);
  });
  it('removing an unknown id is a no-op', () =>
    expect(messages([m('1', 'a')], [{ remove: 'x' }])).toEqual([m('1', 'a')]));
  it('applies items in order: add, remove, add again appends at the end', () => {
    expect(messages([m('1', 'a'), m('2', 'b')], [{ remove: '1' }, m('1', 'z')])).toEqual([
      m('2', 'b'),
      m('1', 'z'),
    ]);
  });
  it('an id repeated in one update replaces the earlier item', () => {
    expect(messages(undefined, [m('1', 'a'), m('1', 'b')])).toEqual([m('1', 'b')]);
  });
  it('missing existing starts from []', () =>
    expect(messages(undefined, [m('1', 'a')])).toEqual([m('1', 'a')]));
  it('does not mutate existing', () => {
    const e = [m('1', 'a')];
    messages(e, [m('1', 'b'), { remove: '1' }]);
    expect(e).toEqual([m('1', 'a')]);
  });
  it('rejects an item without an id', () => {
    try {
      messages([], [{ text: 'x' } as never]);
      expect.unreachable();
    } catch (e) {
      expect(isCairnError(e, 'INVALID_UPDATE')).toBe(true);
    }
  });
});
