import { describe, expect, it } from 'vitest';
import { createComposer, renderTemplate } from '../src/index.js';
import { counting, msg } from './helpers.js';

/** An INVALID_ARGUMENT error with this message (a string, or `expect.stringMatching`). */
const invalid = (message: unknown) =>
  expect.objectContaining({ code: 'INVALID_ARGUMENT', message });

describe('options: an unknown key is INVALID_ARGUMENT naming it', () => {
  it('createComposer names a misspelled option instead of using its default', async () => {
    const provider = counting('a', { text: 'a' });
    await expect(async () => createComposer({ timeout: 10 } as never)).rejects.toEqual(
      invalid('createComposer options: unknown key "timeout" (did you mean "timeoutMs"?)'),
    );
    await expect(async () => createComposer({ provider: [provider] } as never)).rejects.toEqual(
      invalid('createComposer options: unknown key "provider" (did you mean "providers"?)'),
    );
    await expect(async () =>
      createComposer({ cache: { max: 10, ttl: 1000 } } as never),
    ).rejects.toEqual(invalid('createComposer cache: unknown key "ttl" (did you mean "ttlMs"?)'));
    await expect(async () =>
      createComposer({
        providers: [{ ...provider, cache: { ttlMs: 10, keyFn: () => 'k' } }],
      } as never),
    ).rejects.toEqual(
      invalid('provider "a": cache: unknown key "keyFn"; expected one of ttlMs, key'),
    );
  });

  it('compose and renderTemplate name a misspelled option before anything runs', async () => {
    const provider = counting('a', { text: 'a', values: { a: 1 } });
    const composer = createComposer({ providers: [provider] });
    await expect(async () =>
      composer.compose(msg('m1'), { skipcache: true } as never),
    ).rejects.toEqual(
      invalid('compose options: unknown key "skipcache" (did you mean "skipCache"?)'),
    );
    expect(provider.calls).toEqual([]);
    await expect(async () =>
      renderTemplate('{{a}}', { values: {} }, { default: { a: 1 } } as never),
    ).rejects.toEqual(
      invalid('renderTemplate options: unknown key "default" (did you mean "defaults"?)'),
    );
  });
});
