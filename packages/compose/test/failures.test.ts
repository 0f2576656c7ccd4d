import { CairnError, isCairnError } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { createComposer, type ProviderContext } from '../src/index.js';
import { counting, hangUntilAborted, msg } from './helpers.js';

describe('timeouts', () => {
  it('abandons a provider that exceeds the composer budget, aborts its signal and records it', async () => {
    let seen: ProviderContext | undefined;
    const composer = createComposer({
      cache: { max: 10 },
      timeoutMs: 30,
      providers: [
        counting('fast', { text: 'fast', values: { fast: true } }),
        {
          name: 'slow',
          get: (ctx) => {
            seen = ctx;
            return hangUntilAborted(ctx.signal);
          },
        },
      ],
    });
    const composed = await composer.compose(msg('m1'));
    expect(composed.text).toBe('fast');
    expect(composed.values).toEqual({ fast: true });
    expect(Object.keys(composed.data.providers)).toEqual(['fast']);
    expect(composed.diagnostics).toHaveLength(1);
    const d = composed.diagnostics[0]!;
    expect(d).toMatchObject({ name: 'slow', outcome: 'timeout', timeoutMs: 30 });
    expect(d.durationMs).toBeGreaterThanOrEqual(0);
    expect(seen!.signal.aborted).toBe(true);
    expect(isCairnError(seen!.signal.reason, 'TIMEOUT')).toBe(true);
  });

  it("uses the provider's own timeoutMs over the composer's", async () => {
    const signals: AbortSignal[] = [];
    const composer = createComposer({
      cache: { max: 10 },
      timeoutMs: 60_000,
      providers: [
        {
          name: 'tight',
          timeoutMs: 20,
          get: ({ signal }) => {
            signals.push(signal);
            return hangUntilAborted(signal);
          },
        },
      ],
    });
    const composed = await composer.compose(msg('m1'));
    expect(composed.diagnostics).toEqual([
      expect.objectContaining({ name: 'tight', outcome: 'timeout', timeoutMs: 20 }),
    ]);
    expect(signals[0]!.aborted).toBe(true);
  });

  it('ignores a result that arrives after the budget, even from a provider that ignores its signal', async () => {
    let release!: () => void;
    const composer = createComposer({
      cache: { max: 10 },
      timeoutMs: 20,
      providers: [
        {
          name: 'stubborn',
          get: () =>
            new Promise(
              (resolve) => (release = () => resolve({ text: 'too late', values: { late: 1 } })),
            ),
        },
      ],
    });
    const composed = await composer.compose(msg('m1'));
    release();
    await new Promise((r) => setTimeout(r, 5));
    expect(composed.text).toBe('');
    expect(composed.values).toEqual({});
    expect(composed.diagnostics.map((d) => d.outcome)).toEqual(['timeout']);
  });
  it('hands an already aborted signal to a provider that reads it only after its budget ran out', async () => {
    let late: AbortSignal | undefined;
    let readLate!: () => void;
    const composer = createComposer({
      cache: { max: 10 },
      timeoutMs: 20,
      providers: [
        {
          name: 'lazy',
          get: (ctx) =>
            new Promise((resolve) => {
              readLate = () => {
                late = ctx.signal;
                resolve({});
              };
            }),
        },
      ],
    });
    const composed = await composer.compose(msg('m1'));
    expect(composed.diagnostics.map((d) => d.outcome)).toEqual(['timeout']);
    readLate();
    expect(late!.aborted).toBe(true);
    expect(isCairnError(late!.reason, 'TIMEOUT')).toBe(true);
  });

  it('gives providers with different budgets each their own deadline', async () => {
    const composer = createComposer({
      cache: { max: 10 },
      timeoutMs: 10,
      providers: [
        { name: 'short', get: ({ signal }) => hangUntilAborted(signal) },
        {
          name: 'patient',
          timeoutMs: 5000,
          get: () =>
            new Promise((resolve) => setTimeout(() => resolve({ text: 'worth the wait' }), 40)),
        },
      ],
    });
    const composed = await composer.compose(msg('m1'));
    expect(composed.text).toBe('worth the wait');
    expect(composed.diagnostics).toEqual([
      expect.objectContaining({ name: 'short', outcome: 'timeout', timeoutMs: 10 }),
    ]);
  });
});

describe('isolation', () => {
  it('completes without a provider that throws (sync or async) and records name, error and duration', async () => {
    const boom = new Error('boom');
    const composer = createComposer({
      cache: { max: 10 },
      timeoutMs: 1000,
      providers: [
        counting('ok', { text: 'ok', values: { a: 1 } }, { position: 1 }),
        { name: 'async-throw', position: 2, get: async () => Promise.reject(boom) },
        {
          name: 'sync-throw',
          position: 3,
          get: () => {
            throw new TypeError('sync');
          },
        },
        { name: 'bad-shape', position: 4, get: () => ({ text: 42 }) as never },
        counting('ok2', { text: 'ok2', values: { b: 2 } }, { position: 5 }),
      ],
    });
    const composed = await composer.compose(msg('m1'));
    expect(composed.text).toBe('ok\nok2');
    expect(composed.values).toEqual({ a: 1, b: 2 });
    expect(composed.diagnostics.map((d) => [d.name, d.outcome])).toEqual([
      ['async-throw', 'error'],
      ['sync-throw', 'error'],
      ['bad-shape', 'error'],
    ]);
    const [a, s, shape] = composed.diagnostics;
    expect(a!.outcome === 'error' && a!.error).toBe(boom);
    expect(s!.outcome === 'error' && s!.error).toBeInstanceOf(TypeError);
    expect(isCairnError(shape!.outcome === 'error' && shape!.error, 'PROVIDER_FAILED')).toBe(true);
    for (const d of composed.diagnostics) expect(d.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('does not cache a composition with a failed provider, so the next call retries it', async () => {
    let fail = true;
    const flaky = counting('flaky', () => {
      if (fail) throw new Error('transient');
      return { text: 'recovered' };
    });
    const steady = counting('steady', { text: 'steady' });
    const composer = createComposer({
      cache: { max: 10 },
      timeoutMs: 1000,
      providers: [flaky, steady],
    });
    const first = await composer.compose(msg('m1'));
    expect(first.diagnostics).toHaveLength(1);
    expect(composer.stats.size).toBe(0);
    fail = false;
    const second = await composer.compose(msg('m1'));
    expect(second.text).toBe('recovered\nsteady');
    expect(second.diagnostics).toEqual([]);
    expect(flaky.calls).toHaveLength(2);
    const third = await composer.compose(msg('m1'));
    expect(third).toBe(second);
    expect(flaky.calls).toHaveLength(2);
  });
});

describe('required providers', () => {
  it('fails the composition with PROVIDER_FAILED naming the provider, with the cause attached', async () => {
    const cause = new Error('database down');
    const composer = createComposer({
      cache: { max: 10 },
      timeoutMs: 1000,
      providers: [
        counting('fine', { text: 'fine' }),
        { name: 'STATE', required: true, get: async () => Promise.reject(cause) },
      ],
    });
    const error = await composer.compose(msg('m1')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CairnError);
    expect(isCairnError(error, 'PROVIDER_FAILED')).toBe(true);
    expect((error as CairnError).message).toContain('"STATE"');
    expect((error as CairnError).message).toContain('database down');
    expect((error as CairnError).details.provider).toBe('STATE');
    expect((error as CairnError).cause).toBe(cause);
    expect(composer.stats.size).toBe(0);
  });

  it('fails the composition with TIMEOUT when a required provider exceeds its budget, and aborts the others', async () => {
    const others: AbortSignal[] = [];
    const composer = createComposer({
      cache: { max: 10 },
      timeoutMs: 5000,
      providers: [
        {
          name: 'REQUIRED_SLOW',
          required: true,
          timeoutMs: 20,
          get: ({ signal }) => hangUntilAborted(signal),
        },
        {
          name: 'other',
          get: ({ signal }) => {
            others.push(signal);
            return hangUntilAborted(signal);
          },
        },
      ],
    });
    const error = await composer.compose(msg('m1')).catch((e: unknown) => e);
    expect(isCairnError(error, 'TIMEOUT')).toBe(true);
    expect((error as CairnError).details).toMatchObject({
      provider: 'REQUIRED_SLOW',
      timeoutMs: 20,
    });
    expect(isCairnError((error as CairnError).cause, 'TIMEOUT')).toBe(true);
    // The composition did not wait for "other"'s 5 s budget: its signal is already aborted.
    expect(others[0]!.aborted).toBe(true);
    expect(isCairnError(others[0]!.reason, 'ABORTED')).toBe(true);
  });

  it('succeeds normally when the required provider succeeds, even if an optional one fails', async () => {
    const composer = createComposer({
      cache: { max: 10 },
      timeoutMs: 1000,
      providers: [
        counting('req', { text: 'req' }, { required: true }),
        { name: 'optional', get: () => Promise.reject(new Error('nope')) },
      ],
    });
    const composed = await composer.compose(msg('m1'));
    expect(composed.text).toBe('req');
    expect(composed.diagnostics.map((d) => d.name)).toEqual(['optional']);
  });

  it('shares a required failure with concurrent callers and caches nothing, so a later call retries', async () => {
    let attempt = 0;
    const composer = createComposer({
      cache: { max: 10 },
      timeoutMs: 1000,
      providers: [
        {
          name: 'req',
          required: true,
          get: async () => {
            attempt++;
            await new Promise((r) => setTimeout(r, 5));
            if (attempt === 1) throw new Error('first attempt fails');
            return { text: 'second attempt' };
          },
        },
      ],
    });
    const results = await Promise.allSettled([
      composer.compose(msg('m1')),
      composer.compose(msg('m1')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(attempt).toBe(1);
    expect((await composer.compose(msg('m1'))).text).toBe('second attempt');
    expect(attempt).toBe(2);
  });
});
