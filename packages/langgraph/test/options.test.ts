import { isCairnError } from '@cairn/core';
import { createMemoryStore } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import { CairnSaver, CairnStore } from '../src/index.js';

/** The INVALID_ARGUMENT message of `make`, which must throw at once. */
function refusal(make: () => unknown): string {
  try {
    make();
  } catch (e) {
    expect(isCairnError(e, 'INVALID_ARGUMENT'), String(e)).toBe(true);
    return (e as Error).message;
  }
  throw new Error('accepted');
}

describe('constructor options: an unknown key or a bad value is INVALID_ARGUMENT at construction', () => {
  it('CairnStore: a misspelled agentId is named, never two tenants in the default one', async () => {
    const store = createMemoryStore();
    expect(refusal(() => new CairnStore(store, { agentID: 'tenant-a' } as never))).toBe(
      'CairnStore options: unknown key "agentID" (did you mean "agentId"?)',
    );
    const a = new CairnStore(store, { agentId: 'tenant-a' });
    await a.put(['docs'], 'k', { secret: 'a' });
    expect(await new CairnStore(store, { agentId: 'tenant-b' }).get(['docs'], 'k')).toBeNull();
    expect(refusal(() => new CairnStore(store, { agentId: '' }))).toMatch(/^agentId must be/);
    expect(
      refusal(
        () =>
          new CairnStore(store, { index: { dims: 16, embeddings: {}, feilds: ['text'] } } as never),
      ),
    ).toBe('CairnStore index: unknown key "feilds" (did you mean "fields"?)');
    expect(
      refusal(() => new CairnStore(store, { index: { dims: 0, embeddings: {} } } as never)),
    ).toBe('index.dims must be an integer >= 1, got 0');
    expect(refusal(() => new CairnStore(store, { embedderId: 'e' }))).toBe(
      'embedderId names the embeddings of index: give index too',
    );
    expect(refusal(() => new CairnStore({ store } as never))).toBe(
      'new CairnStore: the first argument must be a Cairn Store, got an object holding one ({ store }); pass the store itself',
    );
  });

  it('CairnSaver: misspelled options, bad values and a store in the options fail at once', () => {
    const store = createMemoryStore();
    expect(
      refusal(() => new CairnSaver(store, { messageChanels: ['chat'], cachedThread: 5 } as never)),
    ).toBe('CairnSaver options: unknown key "messageChanels" (did you mean "messageChannels"?)');
    expect(refusal(() => new CairnSaver(store, { cachedThread: 5 } as never))).toBe(
      'CairnSaver options: unknown key "cachedThread" (did you mean "cachedThreads"?)',
    );
    expect(refusal(() => new CairnSaver(store, { cachedThreads: 0 }))).toBe(
      'cachedThreads must be an integer >= 1, got 0',
    );
    expect(refusal(() => new CairnSaver(store, { messageChannels: 'messages' as never }))).toBe(
      'messageChannels must be an array of channel names, got "messages"',
    );
    expect(refusal(() => new CairnSaver({ store } as never))).toBe(
      'new CairnSaver: the first argument must be a Cairn Store, got an object holding one ({ store }); pass the store itself',
    );
  });
});
