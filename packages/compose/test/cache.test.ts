import { describe, expect, it } from 'vitest';
import { createComposer, type ProviderContext } from '../src/index.js';
import { counting, deferred, msg, sleep } from './helpers.js';

describe('composition cache', () => {
  it('serves a second compose of the same message from the cache and counts hits and misses', async () => {
    const p = counting('p', { text: 'p' });
    const composer = createComposer({ cache: { max: 10 }, timeoutMs: 1000, providers: [p] });
    const first = await composer.compose(msg('m1'));
    const second = await composer.compose(msg('m1'));
    expect(second).toBe(first);
    expect(p.calls).toHaveLength(1);
    expect(composer.stats).toEqual({ hits: 1, misses: 1, joined: 0, size: 1 });
  });

  it('shares one computation between concurrent calls for the same key', async () => {
    const gate = deferred();
    const p = counting('slow', async () => {
      await gate.promise;
      return { text: 'once' };
    });
    const composer = createComposer({ cache: { max: 10 }, timeoutMs: 1000, providers: [p] });
    const a = composer.compose(msg('m1'), { version: 1 });
    const b = composer.compose(msg('m1'), { version: 1 });
    const other = composer.compose(msg('m1'), { version: 2 });
    gate.resolve();
    const [ra, rb, ro] = await Promise.all([a, b, other]);
    expect(ra).toBe(rb);
    expect(ra.text).toBe('once');
    expect(ro).not.toBe(ra);
    expect(p.calls).toHaveLength(2);
    expect(composer.stats).toMatchObject({ misses: 2, joined: 1, hits: 0 });
  });

  it('evicts the least recently used composition at max', async () => {
    const p = counting('p', ({ message }) => ({ text: message.id }));
    const composer = createComposer({ cache: { max: 2 }, timeoutMs: 1000, providers: [p] });
    await composer.compose(msg('m1'));
    await composer.compose(msg('m2'));
    await composer.compose(msg('m1')); // m1 is now the most recently used
    await composer.compose(msg('m3')); // evicts m2
    expect(composer.stats.size).toBe(2);
    expect(p.calls.map((c) => c.message.id)).toEqual(['m1', 'm2', 'm3']);
    await composer.compose(msg('m1'));
    expect(p.calls).toHaveLength(3);
    await composer.compose(msg('m2'));
    expect(p.calls.map((c) => c.message.id)).toEqual(['m1', 'm2', 'm3', 'm2']);
    expect(composer.stats.size).toBe(2);
  });

  it('never serves an entry computed under another version token', async () => {
    let stateVersion = 1;
    const p = counting('state', () => ({ values: { v: stateVersion } }));
    const composer = createComposer({ cache: { max: 10 }, timeoutMs: 1000, providers: [p] });
    expect((await composer.compose(msg('m1'), { version: 1 })).values).toEqual({ v: 1 });
    stateVersion = 2;
    expect((await composer.compose(msg('m1'), { version: 2 })).values).toEqual({ v: 2 });
    // "1" (string) and 1 (number) are different tokens; no token is different from both.
    stateVersion = 3;
    expect((await composer.compose(msg('m1'), { version: '1' })).values).toEqual({ v: 3 });
    stateVersion = 4;
    expect((await composer.compose(msg('m1'))).values).toEqual({ v: 4 });
    expect(p.calls).toHaveLength(4);
    // Each version's entry still stands on its own.
    expect((await composer.compose(msg('m1'), { version: 1 })).values).toEqual({ v: 1 });
    expect((await composer.compose(msg('m1'), { version: 2 })).values).toEqual({ v: 2 });
    expect(p.calls).toHaveLength(4);
  });

  it('never serves an entry computed for another provider set, and nothing leaks between sets', async () => {
    const a = counting('a', { values: { k: 'from a', a: true } }, { position: 1 });
    const b = counting('b', { values: { k: 'from b', b: true } }, { position: 2, dynamic: true });
    const composer = createComposer({ cache: { max: 10 }, timeoutMs: 1000, providers: [a, b] });
    const withB = await composer.compose(msg('m1'), { include: ['b'] });
    expect(withB.values).toEqual({ k: 'from b', a: true, b: true });
    const withoutB = await composer.compose(msg('m1'));
    expect(withoutB.values).toEqual({ k: 'from a', a: true });
    const onlyB = await composer.compose(msg('m1'), { only: ['b'] });
    expect(onlyB.values).toEqual({ k: 'from b', b: true });
    expect(a.calls).toHaveLength(2);
    expect(b.calls).toHaveLength(2);
    // The same set named differently is the same key.
    expect(await composer.compose(msg('m1'), { only: ['b', 'a'] })).toBe(withB);
  });

  it('keeps fresh values fresh: a cached composition of one message never feeds another', async () => {
    const p = counting('p', ({ message }) =>
      message.id === 'm1' ? { values: { onlyM1: 1, shared: 'm1' } } : { values: { shared: 'm2' } },
    );
    const composer = createComposer({ cache: { max: 10 }, timeoutMs: 1000, providers: [p] });
    await composer.compose(msg('m1'));
    expect((await composer.compose(msg('m2'))).values).toEqual({ shared: 'm2' });
  });

  it('skipCache runs the providers again and refreshes the entry', async () => {
    let n = 0;
    const p = counting('p', () => ({ values: { n: ++n } }));
    const composer = createComposer({ cache: { max: 10 }, timeoutMs: 1000, providers: [p] });
    expect((await composer.compose(msg('m1'))).values).toEqual({ n: 1 });
    expect((await composer.compose(msg('m1'), { skipCache: true })).values).toEqual({ n: 2 });
    expect((await composer.compose(msg('m1'))).values).toEqual({ n: 2 });
    expect(p.calls).toHaveLength(2);
    expect(composer.stats).toMatchObject({ hits: 1, misses: 2 });
  });

  it('expires compositions after cache.ttlMs', async () => {
    const p = counting('p', {});
    const composer = createComposer({
      cache: { max: 10, ttlMs: 20 },
      timeoutMs: 1000,
      providers: [p],
    });
    await composer.compose(msg('m1'));
    await sleep(50);
    await composer.compose(msg('m1'));
    expect(p.calls).toHaveLength(2);
  });

  it('returns deeply frozen compositions that share nothing mutable with the providers', async () => {
    const own = { values: { list: [1, 2], nested: { deep: 'x' } }, data: { rows: [{ id: 1 }] } };
    const p = counting('p', own);
    const composer = createComposer({ cache: { max: 10 }, timeoutMs: 1000, providers: [p] });
    const composed = await composer.compose(msg('m1'));
    expect(Object.isFrozen(composed)).toBe(true);
    expect(Object.isFrozen(composed.values)).toBe(true);
    expect(Object.isFrozen(composed.values.list)).toBe(true);
    expect(Object.isFrozen(composed.values.nested)).toBe(true);
    expect(Object.isFrozen(composed.data)).toBe(true);
    expect(Object.isFrozen(composed.data.providers)).toBe(true);
    expect(Object.isFrozen((composed.data.rows as object[])[0])).toBe(true);
    expect(Object.isFrozen(composed.diagnostics)).toBe(true);
    expect(() => {
      (composed.values as Record<string, unknown>).injected = 1;
    }).toThrow(TypeError);
    expect(() => (composed.values.list as number[]).push(3)).toThrow(TypeError);
    // The provider's own objects were copied, not frozen, and changing them later does not reach the cache.
    expect(Object.isFrozen(own.values)).toBe(false);
    own.values.list.push(99);
    own.values.nested.deep = 'changed';
    const again = await composer.compose(msg('m1'));
    expect(again).toBe(composed);
    expect(again.values).toEqual({ list: [1, 2], nested: { deep: 'x' } });
  });
});

describe('registration and the cache', () => {
  it('unregistering a provider drops cached compositions that used it, and keeps the others', async () => {
    const a = counting('a', { text: 'a' });
    const b = counting('b', { text: 'b' }, { dynamic: true });
    const composer = createComposer({ cache: { max: 10 }, timeoutMs: 1000, providers: [a, b] });
    await composer.compose(msg('m1'), { include: ['b'] });
    await composer.compose(msg('m1'));
    expect(composer.stats.size).toBe(2);
    composer.unregisterProvider('b');
    expect(composer.stats.size).toBe(1);
    await composer.compose(msg('m1'));
    expect(a.calls).toHaveLength(2);
    expect(composer.stats.hits).toBe(1);
  });

  it("a provider registered again under the same name is never served the old one's results", async () => {
    const composer = createComposer({
      cache: { max: 10 },
      timeoutMs: 1000,
      providers: [
        counting('p', { text: 'old' }),
        counting('cached', { text: 'old cached' }, { cache: { ttlMs: 60_000 } }),
      ],
    });
    expect((await composer.compose(msg('m1'))).text).toBe('old cached\nold');
    composer.unregisterProvider('p');
    composer.unregisterProvider('cached');
    composer.registerProvider(counting('p', { text: 'new' }));
    composer.registerProvider(
      counting('cached', { text: 'new cached' }, { cache: { ttlMs: 60_000 } }),
    );
    expect((await composer.compose(msg('m1'))).text).toBe('new cached\nnew');
  });

  it('does not cache a composition whose provider was replaced while it ran', async () => {
    const gate = deferred();
    const composer = createComposer({
      cache: { max: 10 },
      timeoutMs: 1000,
      providers: [
        counting('p', async () => {
          await gate.promise;
          return { text: 'old' };
        }),
      ],
    });
    const running = composer.compose(msg('m1'));
    await sleep(1);
    composer.unregisterProvider('p');
    composer.registerProvider(counting('p', { text: 'new' }));
    gate.resolve();
    expect((await running).text).toBe('old');
    expect(composer.stats.size).toBe(0);
    expect((await composer.compose(msg('m1'))).text).toBe('new');
  });
});

describe('per-provider cache', () => {
  it("reuses an expensive provider's result across compositions within its TTL", async () => {
    const expensive = counting('expensive', ({ message }) => ({ values: { e: message.id } }), {
      cache: { ttlMs: 60_000 },
    });
    const cheap = counting('cheap', { values: { c: 1 } }, { dynamic: true });
    const composer = createComposer({
      cache: { max: 10 },
      timeoutMs: 1000,
      providers: [expensive, cheap],
    });
    await composer.compose(msg('m1'));
    // Another provider set is another composition, but the expensive result is reused.
    const composed = await composer.compose(msg('m1'), { include: ['cheap'] });
    expect(composed.values).toEqual({ e: 'm1', c: 1 });
    expect(expensive.calls).toHaveLength(1);
    expect(cheap.calls).toHaveLength(1);
    // Default key: message id + version.
    await composer.compose(msg('m1'), { version: 2 });
    await composer.compose(msg('m2'));
    expect(expensive.calls).toHaveLength(3);
    // skipCache bypasses the provider cache too.
    await composer.compose(msg('m1'), { skipCache: true });
    expect(expensive.calls).toHaveLength(4);
  });

  it('expires a provider result after its own ttlMs', async () => {
    const p = counting('p', {}, { cache: { ttlMs: 20 } });
    const other = counting('other', {}, { dynamic: true });
    const composer = createComposer({ cache: { max: 10 }, timeoutMs: 1000, providers: [p, other] });
    await composer.compose(msg('m1'));
    await sleep(50);
    await composer.compose(msg('m1'), { include: ['other'] });
    expect(p.calls).toHaveLength(2);
  });

  it("keys entries with the provider's own key function", async () => {
    const byThread = counting(
      'byThread',
      (ctx: ProviderContext) => ({ values: { state: ctx.state } }),
      {
        cache: {
          ttlMs: 60_000,
          key: ({ state }) => String((state as { threadId: string }).threadId),
        },
      },
    );
    const composer = createComposer({ cache: { max: 10 }, timeoutMs: 1000, providers: [byThread] });
    await composer.compose(msg('m1'), { state: { threadId: 't1' } });
    const second = await composer.compose(msg('m2'), { state: { threadId: 't1' } });
    expect(byThread.calls).toHaveLength(1);
    expect(second.values).toEqual({ state: { threadId: 't1' } });
    await composer.compose(msg('m3'), { state: { threadId: 't2' } });
    expect(byThread.calls).toHaveLength(2);
  });

  it('does not cache a failed provider result', async () => {
    let fail = true;
    const p = counting(
      'p',
      () => {
        if (fail) throw new Error('once');
        return { text: 'ok' };
      },
      { cache: { ttlMs: 60_000 } },
    );
    const composer = createComposer({ cache: { max: 10 }, timeoutMs: 1000, providers: [p] });
    expect((await composer.compose(msg('m1'))).diagnostics).toHaveLength(1);
    fail = false;
    expect((await composer.compose(msg('m1'))).text).toBe('ok');
    expect(p.calls).toHaveLength(2);
  });
});

describe('forgets: the store option and clear()', () => {
  /** A store's forget notices, as `Store.subscribeForgets` gives them. */
  function forgetSource() {
    const listeners = new Set<() => void>();
    return {
      subscribeForgets(listener: () => void) {
        listeners.add(listener);
        return () => {
          listeners.delete(listener);
        };
      },
      forget: () => {
        for (const l of [...listeners]) l();
      },
      listeners,
    };
  }

  it('empties both caches on every forget of the store, so the next compose reads again', async () => {
    const store = forgetSource();
    let text = 'user-1 likes tea';
    const p = counting('p', () => ({ text }));
    const own = counting('own', () => ({ text: `own: ${text}` }), { cache: { ttlMs: 60_000 } });
    const composer = createComposer({ providers: [p, own], store });
    expect((await composer.compose(msg('m1'), { version: 1 })).text).toContain('tea');
    expect((await composer.compose(msg('m1'), { version: 1 })).text).toContain('tea');
    expect(composer.stats).toMatchObject({ hits: 1, size: 1 });
    text = 'nothing';
    store.forget();
    expect(composer.stats.size).toBe(0);
    const after = await composer.compose(msg('m1'), { version: 1 });
    expect(after.text).toBe('own: nothing\nnothing');
    expect(p.calls).toHaveLength(2);
    expect(own.calls).toHaveLength(2);
  });

  it('caches nothing a composition read before a forget, and later calls do not join it', async () => {
    const store = forgetSource();
    const gate = deferred();
    let text = 'user-1 likes tea';
    const p = counting(
      'slow',
      async () => {
        const read = text;
        await gate.promise;
        return { text: read };
      },
      { cache: { ttlMs: 60_000 } },
    );
    const composer = createComposer({ providers: [p], store });
    const running = composer.compose(msg('m1'));
    await sleep(0);
    text = 'nothing';
    store.forget();
    const later = composer.compose(msg('m1'));
    gate.resolve();
    // The call that began before the forget gets what it read; nothing keeps it.
    expect((await running).text).toBe('user-1 likes tea');
    expect((await later).text).toBe('nothing');
    expect((await composer.compose(msg('m1'))).text).toBe('nothing');
    expect(composer.stats.joined).toBe(0);
    expect(p.calls).toHaveLength(2);
  });

  it('clear() does the same by hand; close() stops listening, and compose is CLOSED after', async () => {
    const store = forgetSource();
    const p = counting('p', { text: 'p' });
    const composer = createComposer({ providers: [p], store });
    await composer.compose(msg('m1'));
    composer.clear();
    await composer.compose(msg('m1'));
    expect(p.calls).toHaveLength(2);
    expect(store.listeners.size).toBe(1);
    composer.close();
    composer.close();
    expect(store.listeners.size).toBe(0);
    await expect(composer.compose(msg('m1'))).rejects.toMatchObject({ code: 'CLOSED' });
    expect(() => createComposer({ store: {} as never })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
  });
});
