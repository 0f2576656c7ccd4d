import { isCairnError } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { createComposer, renderTemplate } from '../src/index.js';
import { counting, msg } from './helpers.js';

/** The INVALID_ARGUMENT of `call` (sync or async), its message `message`. */
async function refused(call: () => unknown, message: string): Promise<void> {
  let error: unknown;
  try {
    await call();
  } catch (e) {
    error = e;
  }
  expect(isCairnError(error, 'INVALID_ARGUMENT'), String(error)).toBe(true);
  expect((error as Error).message).toBe(message);
}

describe('options: an unknown key is INVALID_ARGUMENT naming it', () => {
  it('createComposer names a misspelled option instead of using its default', async () => {
    const provider = counting('a', { text: 'a' });
    await refused(
      () => createComposer({ timeout: 10 } as never),
      'createComposer options: unknown key "timeout" (did you mean "timeoutMs"?)',
    );
    await refused(
      () => createComposer({ provider: [provider] } as never),
      'createComposer options: unknown key "provider" (did you mean "providers"?)',
    );
    await refused(
      () => createComposer({ cache: { max: 10, ttl: 1000 } } as never),
      'createComposer cache: unknown key "ttl" (did you mean "ttlMs"?)',
    );
    await refused(
      () =>
        createComposer({
          providers: [{ ...provider, cache: { ttlMs: 10, keyFn: () => 'k' } }],
        } as never),
      'provider "a": cache: unknown key "keyFn"; expected one of ttlMs, key',
    );
  });

  it('compose and renderTemplate name a misspelled option before anything runs', async () => {
    const provider = counting('a', { text: 'a', values: { a: 1 } });
    const composer = createComposer({ providers: [provider] });
    await refused(
      () => composer.compose(msg('m1'), { skipcache: true } as never),
      'compose options: unknown key "skipcache" (did you mean "skipCache"?)',
    );
    expect(provider.calls).toEqual([]);
    await refused(
      () => renderTemplate('{{a}}', { values: {} }, { default: { a: 1 } } as never),
      'renderTemplate options: unknown key "default" (did you mean "defaults"?)',
    );
  });
});
