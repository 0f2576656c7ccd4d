import { isCairnError, type Message } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { COMPOSER_DEFAULTS, createComposer, type Provider } from '../src/index.js';
import { counting, hangUntilAborted, msg } from './helpers.js';

const base = { cache: { max: 100 }, timeoutMs: 1000 };

describe('ordering and merging', () => {
  it('orders by position ascending, then by name on ties, whatever the registration order', async () => {
    const composer = createComposer({
      ...base,
      providers: [
        counting('zeta', { text: 'zeta' }, { position: 1 }),
        counting('beta', { text: 'beta' }, { position: 1 }),
        counting('late', { text: 'late' }, { position: 5 }),
        counting('early', { text: 'early' }, { position: -3 }),
        counting('Alpha', { text: 'Alpha' }, { position: 1 }),
        counting('nopos', { text: 'nopos' }),
      ],
    });
    const composed = await composer.compose(msg('m1'));
    // Names compare by code unit: uppercase sorts before lowercase; no position means 0.
    expect(composed.text).toBe(['early', 'nopos', 'Alpha', 'beta', 'zeta', 'late'].join('\n'));
    expect(Object.keys(composed.data.providers)).toEqual([
      'early',
      'nopos',
      'Alpha',
      'beta',
      'zeta',
      'late',
    ]);
    expect(composer.providers.map((p) => p.name)).toEqual([
      'early',
      'nopos',
      'Alpha',
      'beta',
      'zeta',
      'late',
    ]);
  });

  it('joins non-empty texts with a newline and skips empty, blank and missing ones', async () => {
    const composer = createComposer({
      ...base,
      providers: [
        counting('a', { text: 'first' }, { position: 1 }),
        counting('b', { text: '' }, { position: 2 }),
        counting('c', { values: { only: 'values' } }, { position: 3 }),
        counting('d', { text: '  \n ' }, { position: 4 }),
        counting('e', { text: 'last\nline' }, { position: 5 }),
      ],
    });
    const composed = await composer.compose(msg('m1'));
    expect(composed.text).toBe('first\nlast\nline');
  });

  it('merges values and data in provider order, later providers winning, and keeps each result under data.providers', async () => {
    const composer = createComposer({
      ...base,
      providers: [
        counting(
          'second',
          { values: { shared: 'second', b: 2 }, data: { shared: 'second' } },
          { position: 2 },
        ),
        counting(
          'first',
          { values: { shared: 'first', a: 1 }, data: { shared: 'first', a: 1 } },
          { position: 1 },
        ),
        counting(
          'third',
          { values: { shared: 'third' }, data: { providers: 'cannot clobber' } },
          { position: 3 },
        ),
      ],
    });
    const composed = await composer.compose(msg('m1'));
    expect(composed.values).toEqual({ shared: 'third', a: 1, b: 2 });
    expect(composed.data.shared).toBe('second');
    expect(composed.data.a).toBe(1);
    expect(composed.data.providers).toEqual({
      first: { values: { shared: 'first', a: 1 }, data: { shared: 'first', a: 1 } },
      second: { values: { shared: 'second', b: 2 }, data: { shared: 'second' } },
      third: { values: { shared: 'third' }, data: { providers: 'cannot clobber' } },
    });
    expect(composed.diagnostics).toEqual([]);
  });

  it('keeps a "__proto__" key as data instead of changing prototypes', async () => {
    const evil = JSON.parse('{"__proto__": {"polluted": true}, "ok": 1}') as Record<
      string,
      unknown
    >;
    const composer = createComposer({ ...base, providers: [counting('evil', { values: evil })] });
    const composed = await composer.compose(msg('m1'));
    expect(Object.getPrototypeOf(composed.values)).toBe(Object.prototype);
    expect((composed.values as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.keys(composed.values)).toEqual(['__proto__', 'ok']);
  });

  it('passes message, state and version to every provider', async () => {
    const p = counting('p', {});
    const composer = createComposer<{ id: string; role: string; text: string }, { mood: string }>({
      ...base,
      providers: [p],
    });
    const m = msg('m1');
    await composer.compose(m, { state: { mood: 'calm' }, version: 7 });
    expect(p.calls).toHaveLength(1);
    expect(p.calls[0]!.message).toBe(m);
    expect(p.calls[0]!.state).toEqual({ mood: 'calm' });
    expect(p.calls[0]!.version).toBe(7);
    expect(p.calls[0]!.signal).toBeInstanceOf(AbortSignal);
    expect(p.calls[0]!.signal.aborted).toBe(false);
  });

  it('is generic over the message type and accepts providers written for any message with an id', async () => {
    const generic = counting('generic', ({ message }) => ({ values: { id: message.id } }));
    const typed: Provider<Message> = {
      name: 'typed',
      position: 1,
      get: ({ message }) => ({ values: { role: message.role, depth: message.depth } }),
    };
    const composer = createComposer<Message>({ ...base, providers: [generic, typed] });
    const message: Message = {
      id: 'm1',
      threadId: 't1',
      parentId: null,
      role: 'user',
      type: null,
      data: { text: 'hi' },
      createdAt: 0,
      depth: 0,
    };
    expect((await composer.compose(message)).values).toEqual({ id: 'm1', role: 'user', depth: 0 });
  });

  it('accepts synchronous providers and ones that return nothing', async () => {
    const composer = createComposer({
      ...base,
      providers: [
        { name: 'sync', get: () => ({ text: 'sync' }) },
        { name: 'nothing', get: () => undefined },
      ],
    });
    const composed = await composer.compose(msg('m1'));
    expect(composed.text).toBe('sync');
    expect(composed.data.providers).toEqual({ nothing: {}, sync: { text: 'sync' } });
  });
});

describe('selection', () => {
  function setup() {
    const providers = {
      plain: counting('plain', { text: 'plain' }, { position: 1 }),
      other: counting('other', { text: 'other' }, { position: 2 }),
      dyn: counting('dyn', { text: 'dyn' }, { position: 3, dynamic: true }),
      priv: counting('priv', { text: 'priv' }, { position: 4, private: true }),
    };
    const composer = createComposer({ ...base, providers: Object.values(providers) });
    return { composer, providers };
  }

  it('runs by default every provider that is neither dynamic nor private', async () => {
    const { composer, providers } = setup();
    const composed = await composer.compose(msg('m1'));
    expect(composed.text).toBe('plain\nother');
    expect(providers.dyn.calls).toHaveLength(0);
    expect(providers.priv.calls).toHaveLength(0);
  });

  it('adds dynamic and private providers named in include, keeping the order', async () => {
    const { composer } = setup();
    expect((await composer.compose(msg('m1'), { include: ['priv'] })).text).toBe(
      'plain\nother\npriv',
    );
    expect((await composer.compose(msg('m1'), { include: ['dyn', 'priv', 'dyn'] })).text).toBe(
      'plain\nother\ndyn\npriv',
    );
    expect((await composer.compose(msg('m1'), { include: ['plain'] })).text).toBe('plain\nother');
  });

  it('runs exactly the providers named in only', async () => {
    const { composer, providers } = setup();
    const composed = await composer.compose(msg('m1'), { only: ['priv', 'other'] });
    expect(composed.text).toBe('other\npriv');
    expect(Object.keys(composed.data.providers)).toEqual(['other', 'priv']);
    expect(providers.plain.calls).toHaveLength(0);
    expect((await composer.compose(msg('m2'), { only: [] })).text).toBe('');
    expect(providers.plain.calls).toHaveLength(0);
  });

  it('rejects an unknown name with INVALID_ARGUMENT before running any provider', async () => {
    const { composer, providers } = setup();
    for (const options of [
      { include: ['dyn', 'nope'] },
      { only: ['plain', 'nope', 'also-nope'] },
    ]) {
      const error = await composer.compose(msg('m1'), options).catch((e: unknown) => e);
      expect(isCairnError(error, 'INVALID_ARGUMENT')).toBe(true);
      expect((error as Error).message).toContain('"nope"');
    }
    const error = await composer
      .compose(msg('m1'), { only: ['plain', 'nope', 'also-nope'] })
      .catch((e: unknown) => e);
    expect((error as { details: unknown }).details).toEqual({ unknown: ['nope', 'also-nope'] });
    for (const p of Object.values(providers)) expect(p.calls).toHaveLength(0);
    expect(composer.stats).toMatchObject({ hits: 0, misses: 0 });
  });

  it('rejects only together with include, and names that are not strings', async () => {
    const { composer, providers } = setup();
    await expect(
      composer.compose(msg('m1'), { only: ['plain'], include: ['dyn'] }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(composer.compose(msg('m1'), { include: 'dyn' as never })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(composer.compose(msg('m1'), { only: [1] as never })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    for (const p of Object.values(providers)) expect(p.calls).toHaveLength(0);
  });

  it('rejects a message without an id and a bad version', async () => {
    const { composer } = setup();
    await expect(composer.compose({} as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(composer.compose({ id: '' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(composer.compose(null as never)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(composer.compose(msg('m1'), { version: {} as never })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(composer.compose(msg('m1'), { version: Number.NaN })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });
});

describe('registration', () => {
  it('registers providers at run time and rejects a duplicate name', async () => {
    const composer = createComposer({ ...base, providers: [counting('a', { text: 'a' })] });
    composer.registerProvider(counting('b', { text: 'b' }));
    expect((await composer.compose(msg('m1'))).text).toBe('a\nb');
    expect(() => composer.registerProvider(counting('a', { text: 'again' }))).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }) as Error,
    );
    expect((await composer.compose(msg('m2'))).text).toBe('a\nb');
  });

  it('rejects duplicate names and malformed providers at creation', () => {
    const make =
      (providers: Provider[], extra: object = {}) =>
      () =>
        createComposer({ ...base, ...extra, providers });
    expect(make([counting('a', {}), counting('a', {})])).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }) as Error,
    );
    expect(make([{ name: '', get: () => ({}) }])).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }) as Error,
    );
    expect(make([{ name: 'x' } as never])).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }) as Error,
    );
    expect(make([counting('x', {}, { position: Number.NaN })])).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }) as Error,
    );
    expect(make([counting('x', {}, { timeoutMs: 0 })])).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }) as Error,
    );
    expect(make([counting('x', {}, { cache: { ttlMs: -1 } })])).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }) as Error,
    );
    expect(make([], { cache: { max: 0 } })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }) as Error,
    );
    expect(make([], { cache: { max: 10, ttlMs: 0 } })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }) as Error,
    );
    expect(make([], { timeoutMs: Infinity })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }) as Error,
    );
    expect(make([], { timeoutMs: 2 ** 31 })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }) as Error,
    );
  });

  it('needs no options: cache and timeoutMs have defaults', async () => {
    expect(COMPOSER_DEFAULTS).toEqual({ cache: { max: 1000 }, timeoutMs: 5000 });
    const hang = counting('hang', (ctx) => hangUntilAborted(ctx.signal));
    const composer = createComposer({ providers: [counting('a', { text: 'a' }), hang] });
    const composed = await composer.compose(msg('m1'));
    expect(composed.text).toBe('a');
    expect(composed.diagnostics).toEqual([
      expect.objectContaining({ name: 'hang', outcome: 'timeout', timeoutMs: 5000 }),
    ]);
    const quick = createComposer({ providers: [counting('a', { text: 'a' })] });
    await quick.compose(msg('m1'));
    await quick.compose(msg('m1'));
    expect(quick.stats).toMatchObject({ hits: 1, misses: 1 });
    expect(createComposer().stats.size).toBe(0);
  }, 15_000);

  it('unregisters a provider so it no longer runs or can be named; unknown names return false', async () => {
    const b = counting('b', { text: 'b' }, { dynamic: true });
    const composer = createComposer({ ...base, providers: [counting('a', { text: 'a' }), b] });
    expect((await composer.compose(msg('m1'), { include: ['b'] })).text).toBe('a\nb');
    expect(composer.unregisterProvider('b')).toBe(true);
    expect(composer.unregisterProvider('b')).toBe(false);
    await expect(composer.compose(msg('m1'), { include: ['b'] })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect((await composer.compose(msg('m1'))).text).toBe('a');
    expect(b.calls).toHaveLength(1);
  });
});
