import { createMemoryStore } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import { createChatStore } from '../src/index.js';

/** An INVALID_ARGUMENT error with this message (a string, or `expect.stringMatching`). */
const invalid = (message: unknown) =>
  expect.objectContaining({ code: 'INVALID_ARGUMENT', message });

describe('options: an unknown key is INVALID_ARGUMENT naming it, before anything is written', () => {
  it('createChatStore names a misspelled option', async () => {
    const store = createMemoryStore();
    await expect(async () => createChatStore({ store, maxRetry: 3 } as never)).rejects.toEqual(
      invalid('createChatStore options: unknown key "maxRetry" (did you mean "maxRetries"?)'),
    );
    await expect(async () => createChatStore({ store, shema: {} } as never)).rejects.toEqual(
      invalid('createChatStore options: unknown key "shema" (did you mean "schema"?)'),
    );
  });

  it('saveChat, createChat and loadChat name a misspelled key: no chat without its owner', async () => {
    const store = createMemoryStore();
    const chats = createChatStore({ store });
    const messages = [
      { id: 'u1', role: 'user' as const, parts: [{ type: 'text' as const, text: 'hi' }] },
    ];
    await expect(async () =>
      chats.saveChat({ chatId: 'c1', messages, resourceID: 'user-1' } as never),
    ).rejects.toEqual(
      invalid('saveChat options: unknown key "resourceID" (did you mean "resourceId"?)'),
    );
    await expect(async () => chats.saveChat({ chatID: 'c1', messages } as never)).rejects.toEqual(
      invalid('saveChat options: unknown key "chatID" (did you mean "chatId"?)'),
    );
    await expect(async () =>
      chats.createChat({ id: 'c1', owner: 'user-1' } as never),
    ).rejects.toEqual(
      invalid(
        'createChat options: unknown key "owner"; expected one of id, resourceId, title, metadata',
      ),
    );
    expect(await store.getThread('c1')).toBeNull();
    await chats.saveChat({ chatId: 'c1', messages, resourceId: 'user-1' });
    await expect(async () => chats.loadChat('c1', { limt: 1 } as never)).rejects.toEqual(
      invalid('loadChat options: unknown key "limt" (did you mean "limit"?)'),
    );
  });
});
