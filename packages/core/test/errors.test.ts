import { describe, expect, it } from 'vitest';
import { assertJson, CairnError, findNonJson, isCairnError, newId } from '../src/index.js';

describe('CairnError', () => {
  it('carries a code, a message and details', () => {
    const e = new CairnError('NOT_FOUND', 'thread "t" not found', { details: { id: 't' } });
    expect(e.code).toBe('NOT_FOUND');
    expect(e.message).toBe('thread "t" not found');
    expect(e.details).toEqual({ id: 't' });
    expect(e.name).toBe('CairnError');
    expect(e).toBeInstanceOf(Error);
  });
  it('keeps the cause', () => {
    const cause = new Error('socket');
    expect(new CairnError('TIMEOUT', 'x', { cause }).cause).toBe(cause);
  });
});

describe('isCairnError', () => {
  it('recognises a copy from another package instance by name and code', () => {
    const foreign = Object.assign(new Error('x'), { name: 'CairnError', code: 'CONFLICT' });
    expect(isCairnError(foreign)).toBe(true);
    expect(isCairnError(foreign, 'CONFLICT')).toBe(true);
    expect(isCairnError(foreign, 'NOT_FOUND')).toBe(false);
  });
  it('rejects other errors and unknown codes', () => {
    expect(isCairnError(new Error('x'))).toBe(false);
    expect(isCairnError({ name: 'CairnError', code: 'WHATEVER' })).toBe(false);
    expect(isCairnError(null)).toBe(false);
    expect(isCairnError('CONFLICT')).toBe(false);
  });
});

describe('JSON checks', () => {
  it('accepts plain JSON, including null-prototype objects', () => {
    expect(findNonJson({ a: [1, 'x', null, true, { b: {} }] })).toBeNull();
    expect(findNonJson(Object.assign(Object.create(null), { a: 1 }))).toBeNull();
  });
  it('names the path of the first bad value', () => {
    expect(findNonJson({ a: { b: [0, Symbol('s')] } }, 'data')).toEqual({
      path: 'data.a.b[1]',
      reason: 'a symbol is not JSON',
    });
    expect(() => assertJson({ x: -Infinity }, 'data')).toThrowError(/data\.x/);
  });
});

describe('newId', () => {
  it('makes unique, time-ordered UUIDv7 strings', () => {
    const ids = Array.from({ length: 5000 }, newId);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    expect(ids[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
