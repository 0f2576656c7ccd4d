import { describe, expect, it } from 'vitest';
import {
  assertJson,
  findNonJson,
  isCairnError,
  MAX_JSON_DEPTH,
  textProblem,
} from '../src/index.js';

const nested = (depth: number): unknown => {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = i % 2 ? { k: v } : [v];
  return v;
};

describe('textProblem', () => {
  it('accepts well-formed text, surrogate pairs included', () => {
    expect(textProblem('')).toBeNull();
    expect(textProblem('Great work 😀 — ünïcödé')).toBeNull();
  });

  it('finds a NUL and a lone surrogate with their positions', () => {
    expect(textProblem('ab\u0000c')).toEqual({ position: 2, reason: 'a NUL character' });
    expect(textProblem('Great work 😀'.slice(0, 12))).toEqual({
      position: 11,
      reason: 'a lone surrogate (U+D83D)',
    });
    expect(textProblem('x\ude00')).toEqual({ position: 1, reason: 'a lone surrogate (U+DE00)' });
    expect(textProblem('😀\ud800😀')?.position).toBe(2);
  });
});

describe('findNonJson: text and depth', () => {
  it('names the path and position of a bad text, in values and in keys', () => {
    expect(findNonJson({ a: ['ok', 'b\u0000'] }, 'data')).toEqual({
      path: 'data.a[1]',
      reason: 'the text holds a NUL character at position 1; stored text cannot',
      position: 1,
    });
    expect(findNonJson({ 'k\ud800': 1 })).toMatchObject({ path: '$.k\ud800', position: 1 });
    expect(findNonJson('\ud800', 'data')).toMatchObject({ path: 'data', position: 0 });
  });

  it(`accepts ${MAX_JSON_DEPTH} levels and rejects one more, without recursion`, () => {
    expect(findNonJson(nested(MAX_JSON_DEPTH))).toBeNull();
    expect(findNonJson(nested(MAX_JSON_DEPTH + 1))?.reason).toMatch(/deeper than 512/);
    // Far deeper than a recursive walk survives.
    for (const depth of [4_000, 200_000]) {
      let error: unknown;
      try {
        assertJson(nested(depth), 'data');
      } catch (e) {
        error = e;
      }
      expect(isCairnError(error, 'INVALID_ARGUMENT')).toBe(true);
    }
  });

  it('still finds a cycle and still allows the same object twice side by side', () => {
    const shared = { x: 1 };
    expect(findNonJson({ a: shared, b: shared })).toBeNull();
    const cyclic: Record<string, unknown> = { a: [] };
    (cyclic.a as unknown[]).push(cyclic);
    expect(findNonJson(cyclic)).toEqual({ path: '$.a[0]', reason: 'a cycle is not JSON' });
  });
});
