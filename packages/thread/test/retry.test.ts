import { CairnError, isCairnError } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { SerialQueue } from '../src/queue.js';
import { retryAttempts, retryOnConflict } from '../src/retry.js';

const lost = () => new CairnError('CONFLICT', 'lost the race');

describe('retryOnConflict', () => {
  it('retries a CONFLICT with the next attempt number, after onConflict', async () => {
    const seen: string[] = [];
    const result = await retryOnConflict(
      async (n) => {
        seen.push(`attempt ${n}`);
        if (n < 2) throw lost();
        return 'done';
      },
      {
        attempts: 5,
        onConflict: (_e, { attempt, final }) => seen.push(`conflict ${attempt} ${final}`),
      },
    );
    expect(result).toBe('done');
    expect(seen).toEqual([
      'attempt 0',
      'conflict 0 false',
      'attempt 1',
      'conflict 1 false',
      'attempt 2',
    ]);
  });

  it('gives up after `attempts` with the last conflict, or what the final onConflict throws', async () => {
    let calls = 0;
    const e1 = await retryOnConflict(
      async () => {
        calls++;
        throw lost();
      },
      { attempts: 3 },
    ).catch((e: unknown) => e);
    expect(calls).toBe(3);
    expect(isCairnError(e1, 'CONFLICT')).toBe(true);
    const e2 = await retryOnConflict(
      async () => {
        throw lost();
      },
      {
        attempts: 2,
        onConflict: (e, { final }) => {
          if (final) throw new CairnError('CONFLICT', 'gave up', { cause: e });
        },
      },
    ).catch((e: unknown) => e);
    expect((e2 as Error).message).toBe('gave up');
  });

  it('any other error ends it at once, and onConflict may end it too', async () => {
    let calls = 0;
    const other = await retryOnConflict(
      async () => {
        calls++;
        throw new CairnError('NOT_FOUND', 'gone');
      },
      { attempts: 5 },
    ).catch((e: unknown) => e);
    expect([calls, isCairnError(other, 'NOT_FOUND')]).toEqual([1, true]);
    const stop = new Error('stop');
    const stopped = await retryOnConflict(
      async () => {
        throw lost();
      },
      {
        attempts: 5,
        onConflict: () => {
          throw stop;
        },
      },
    ).catch((e: unknown) => e);
    expect(stopped).toBe(stop);
  });

  it('retryAttempts: maxRetries after the first attempt, 50 by default, an integer >= 0', () => {
    expect([retryAttempts(undefined), retryAttempts(0), retryAttempts(3)]).toEqual([51, 1, 4]);
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => retryAttempts(bad)).toThrow(/^maxRetries must be an integer >= 0/);
    }
  });
});

describe('SerialQueue', () => {
  it('runs in call order, one at a time; a failure does not block the rest', async () => {
    const q = new SerialQueue();
    const log: string[] = [];
    let running = 0;
    const task = (name: string, fail = false) =>
      q.run(async () => {
        running++;
        expect(running).toBe(1);
        await new Promise((r) => setTimeout(r, 5));
        log.push(name);
        running--;
        if (fail) throw new Error(name);
        return name;
      });
    const results = await Promise.allSettled([task('a'), task('b', true), task('c')]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(log).toEqual(['a', 'b', 'c']);
  });

  it('runOnce keeps at most one waiting task per key; idle waits for everything queued', async () => {
    const q = new SerialQueue();
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    void q.run(() => gate);
    let refreshes = 0;
    for (let i = 0; i < 5; i++) void q.runOnce('head', async () => refreshes++);
    void q.runOnce('state', async () => {
      throw new Error('ignored');
    });
    release();
    await q.idle();
    expect(refreshes).toBe(1);
    void q.runOnce('head', async () => refreshes++);
    await q.idle();
    expect(refreshes).toBe(2);
  });
});
