import { isCairnError } from '@cairn/core';
import { createMemoryStore } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import { CairnSession } from '../src/index.js';

describe('options: an unknown key is INVALID_ARGUMENT naming it', () => {
  it('CairnSession names a misspelled sessionId instead of starting a new session', async () => {
    const store = createMemoryStore();
    for (const [options, message] of [
      [
        { store, sessionID: 'user-1-session' },
        'unknown key "sessionID" (did you mean "sessionId"?)',
      ],
      [{ store, resourceID: 'user-1' }, 'unknown key "resourceID" (did you mean "resourceId"?)'],
    ] as const) {
      let error: unknown;
      try {
        new CairnSession(options as never);
      } catch (e) {
        error = e;
      }
      expect(isCairnError(error, 'INVALID_ARGUMENT'), String(error)).toBe(true);
      expect((error as Error).message).toBe(`CairnSession options: ${message}`);
    }
    expect((await store.listThreads()).items).toEqual([]);
  });
});
