import { isCairnError } from '@cairn/core';
import { createMemoryStore } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import { createChatStore } from '../src/index.js';

/** The INVALID_ARGUMENT message of `call` (sync or async). */
async function refusal(call: () => unknown): Promise<string> {
  try {
    await call();
  } catch (e) {
    expect(isCairnError(e, 'INVALID_ARGUMENT'), String(e)).toBe(true);
    return (e as Error).message;
  }
  throw new Error('accepted');
}

describe('options: an unknown key is INVALID_ARGUMENT naming it, before anything is written', () => {
  it('createChatStore names a misspelled option', async () => {
    const store = createMemoryStore();
    expect(await refusal(() => createChatStore({ store, maxRetry: 3 } as never))).toBe(
      'createChatStore options: unknown key "maxRetry" (did you mean "maxRetries"?)',
    );
    expect(await refusal(() => createChatStore({ store, shema: {} } as never))).toBe(
      'createChatStore options: unknown key "shema" (did you mean "schema"?)',
    );
  });

  it('saveChat, createChat and loadChat name a misspelled key: no chat without its owner', async () => {
    const store = createMemoryStore();
    const chats = createChatStore({ store });
    const messages = [
      { id: 'u1', role: 'user' as const, parts: [{ type: 'text' as const, text: 'hi' }] },
    ];
    expect(
      await refusal(() =>
        chats.saveChat({ chatId: 'c1', messages, resourceID: 'user-1' } as never),
      ),
    ).toBe('saveChat options: unknown key "resourceID" (did you mean "resourceId"?)');
    expect(await refusal(() => chats.saveChat({ chatID: 'c1', messages } as never))).toBe(
      'saveChat options: unknown key "chatID" (did you mean "chatId"?)',
    );
    expect(await refusal(() => chats.createChat({ id: 'c1', owner: 'user-1' } as never))).toMatch(
      /^createChat options: unknown key "owner"; expected one of id, resourceId, title, metadata$/,
    );
    expect(await store.getThread('c1')).toBeNull();
    await chats.saveChat({ chatId: 'c1', messages, resourceId: 'user-1' });
    expect(await refusal(() => chats.loadChat('c1', { limt: 1 } as never))).toBe(
      'loadChat options: unknown key "limt" (did you mean "limit"?)',
    );
  });
});
