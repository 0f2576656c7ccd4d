import { createMemoryStore } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import { CairnSaver, CairnStore } from '../src/index.js';

/** An INVALID_ARGUMENT error with this message (a string, or `expect.stringMatching`). */
const invalid = (message: unknown) =>
  expect.objectContaining({ code: 'INVALID_ARGUMENT', message });

describe('constructor options: an unknown key or a bad value is INVALID_ARGUMENT at construction', () => {
  it('CairnStore: a misspelled agentId is named, never two tenants in the default one', async () => {
    const store = createMemoryStore();
    expect(() => new CairnStore(store, { agentID: 'tenant-a' } as never)).toThrow(
      invalid('CairnStore options: unknown key "agentID" (did you mean "agentId"?)'),
    );
    const a = new CairnStore(store, { agentId: 'tenant-a' });
    await a.put(['docs'], 'k', { secret: 'a' });
    expect(await new CairnStore(store, { agentId: 'tenant-b' }).get(['docs'], 'k')).toBeNull();
    expect(() => new CairnStore(store, { agentId: '' })).toThrow(
      invalid(expect.stringMatching(/^agentId must be/)),
    );
    expect(
      () =>
        new CairnStore(store, { index: { dims: 16, embeddings: {}, feilds: ['text'] } } as never),
    ).toThrow(invalid('CairnStore index: unknown key "feilds" (did you mean "fields"?)'));
    expect(() => new CairnStore(store, { index: { dims: 0, embeddings: {} } } as never)).toThrow(
      invalid('index.dims must be an integer >= 1, got 0'),
    );
    expect(() => new CairnStore(store, { embedderId: 'e' })).toThrow(
      invalid('embedderId names the embeddings of index: give index too'),
    );
    expect(() => new CairnStore({ store } as never)).toThrow(
      invalid(
        'new CairnStore: the first argument must be a Cairn Store, got an object holding one ({ store }); pass the store itself',
      ),
    );
  });

  it('CairnSaver: misspelled options, bad values and a store in the options fail at once', () => {
    const store = createMemoryStore();
    expect(
      () => new CairnSaver(store, { messageChanels: ['chat'], cachedThread: 5 } as never),
    ).toThrow(
      invalid('CairnSaver options: unknown key "messageChanels" (did you mean "messageChannels"?)'),
    );
    expect(() => new CairnSaver(store, { cachedThread: 5 } as never)).toThrow(
      invalid('CairnSaver options: unknown key "cachedThread" (did you mean "cachedThreads"?)'),
    );
    expect(() => new CairnSaver(store, { cachedThreads: 0 })).toThrow(
      invalid('cachedThreads must be an integer >= 1, got 0'),
    );
    expect(() => new CairnSaver(store, { messageChannels: 'messages' as never })).toThrow(
      invalid('messageChannels must be an array of channel names, got "messages"'),
    );
    expect(() => new CairnSaver({ store } as never)).toThrow(
      invalid(
        'new CairnSaver: the first argument must be a Cairn Store, got an object holding one ({ store }); pass the store itself',
      ),
    );
  });
});
