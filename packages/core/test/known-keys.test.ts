import { describe, expect, it } from 'vitest';
import { type CairnError, checkKeys, keysOf } from '../src/index.js';

const SEARCH = ['vector', 'text', 'filter', 'limit', 'threshold'];

function refusal(value: object, known = SEARCH, elsewhere = {}): CairnError {
  try {
    checkKeys(value, 'searchMemories', known, elsewhere);
  } catch (e) {
    return e as CairnError;
  }
  throw new Error('accepted');
}

describe('checkKeys', () => {
  it('accepts known keys, whatever their values', () => {
    expect(() =>
      checkKeys({ text: 'a', limit: undefined }, 'searchMemories', SEARCH),
    ).not.toThrow();
    expect(() => checkKeys({}, 'searchMemories', SEARCH)).not.toThrow();
  });

  it('refuses a key that belongs elsewhere, saying where', () => {
    const e = refusal({ text: 'a', viewer: { agentId: 'bob' } }, SEARCH, {
      viewer: 'the viewer goes in filter.viewer',
    });
    expect(e.code).toBe('INVALID_ARGUMENT');
    expect(e.message).toBe(
      'searchMemories: unknown key "viewer"; the viewer goes in filter.viewer',
    );
    expect(e.details).toEqual({ key: 'viewer' });
  });

  it('names the key a near-miss spelling meant: case, a swap, a letter, the start', () => {
    const known = ['viewer', 'agentId', 'maxConnections', 'busyTimeoutMs', 'maxRetries', 'error'];
    for (const [typo, meant] of [
      ['veiwer', 'viewer'],
      ['Viewer', 'viewer'],
      ['agentID', 'agentId'],
      ['maxConections', 'maxConnections'],
      ['busyTimeout', 'busyTimeoutMs'],
      ['maxRetry', 'maxRetries'],
      ['err', 'error'],
    ]) {
      const e = refusal({ [typo!]: 1 }, known);
      expect(e.message).toBe(`searchMemories: unknown key "${typo}" (did you mean "${meant}"?)`);
      expect(e.details).toEqual({ key: typo, suggestion: meant });
    }
  });

  it('a near miss of a key that belongs elsewhere says both', () => {
    const e = refusal({ veiwer: {} }, SEARCH, { viewer: 'the viewer goes in filter.viewer' });
    expect(e.message).toBe(
      'searchMemories: unknown key "veiwer" (did you mean "viewer"?); the viewer goes in filter.viewer',
    );
  });

  it('lists the known keys when nothing is near', () => {
    expect(refusal({ cachedThread: true }).message).toBe(
      'searchMemories: unknown key "cachedThread"; expected one of vector, text, filter, limit, threshold',
    );
  });

  it('counts a key whose value is undefined, and ignores inherited keys', () => {
    expect(refusal({ text: 'a', veiwer: undefined }).details).toEqual({ key: 'veiwer' });
    const inherited = Object.create({ viewer: 1 }) as object;
    expect(() => checkKeys(inherited, 'searchMemories', SEARCH)).not.toThrow();
  });

  it('a key named like an Object.prototype member is just unknown', () => {
    expect(refusal({ ['__proto__']: 1, text: 'a' }).details).toEqual({ key: '__proto__' });
    expect(refusal(JSON.parse('{"__proto__": 1}')).details).toEqual({ key: '__proto__' });
    expect(refusal({ toString: 1 }).details).toEqual({ key: 'toString' });
  });

  it('refuses a value that is not an object', () => {
    for (const [value, got] of [
      [null, 'null'],
      [['text'], 'an array'],
      ['text', 'string'],
    ] as const) {
      expect(() => checkKeys(value, 'searchMemories', SEARCH)).toThrow(
        `searchMemories must be an object, got ${got}`,
      );
    }
  });
});

describe('keysOf', () => {
  it('returns the list it was given', () => {
    expect(keysOf<{ a?: number; b: string }>()(['a', 'b'])).toEqual(['a', 'b']);
  });
});
