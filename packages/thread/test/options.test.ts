import { isCairnError } from '@cairn/core';
import { createMemoryStore, type Store } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import { openThread, recentMessagesProvider, threadStateProvider } from '../src/index.js';

/** The INVALID_ARGUMENT of `call` (sync or async), its message checked against `message`. */
async function refused(call: () => unknown, message: string | RegExp): Promise<void> {
  let error: unknown;
  try {
    await call();
  } catch (e) {
    error = e;
  }
  expect(isCairnError(error, 'INVALID_ARGUMENT'), String(error)).toBe(true);
  if (typeof message === 'string') expect((error as Error).message).toBe(message);
  else expect((error as Error).message).toMatch(message);
}

const threadCount = async (store: Store) => (await store.listThreads()).items.length;

describe('openThread: every option is checked before the store is touched', () => {
  it('a store passed inside the options is named, not a TypeError', async () => {
    const store = createMemoryStore();
    await refused(
      () => openThread({ store } as never, {}),
      'openThread: the first argument must be a Cairn Store, got an object holding one ({ store }); pass the store itself',
    );
    await refused(
      () => openThread(undefined as never),
      'openThread: the first argument must be a Cairn Store, got undefined',
    );
  });

  it('a misspelled option is named with the one meant, and no thread is created', async () => {
    const store = createMemoryStore();
    for (const [options, message] of [
      [{ threadID: 'conversation-1' }, 'unknown key "threadID" (did you mean "threadId"?)'],
      [{ resourceID: 'user-1' }, 'unknown key "resourceID" (did you mean "resourceId"?)'],
      [{ brnach: 'draft' }, 'unknown key "brnach" (did you mean "branch"?)'],
      [{ maxRetry: 3 }, 'unknown key "maxRetry" (did you mean "maxRetries"?)'],
      [{ cachedThread: true }, /unknown key "cachedThread"; expected one of schema, threadId/],
    ] as const) {
      await refused(
        () => openThread(store, options as never),
        typeof message === 'string' ? `openThread options: ${message}` : message,
      );
    }
    expect(await threadCount(store)).toBe(0);
  });

  it('a value of the wrong type or range is refused: snapshotPolicy, lockTimeoutMs', async () => {
    const store = createMemoryStore();
    await refused(
      () => openThread(store, { snapshotPolicy: 'bogus' as never }),
      'snapshotPolicy must be an object { maxCommits?, bytesRatio?, minBytes? }, got "bogus"',
    );
    await refused(
      () => openThread(store, { snapshotPolicy: { maxCommit: 5 } as never }),
      'snapshotPolicy: unknown key "maxCommit" (did you mean "maxCommits"?)',
    );
    await refused(
      () => openThread(store, { snapshotPolicy: { maxCommits: 0 } }),
      'snapshotPolicy.maxCommits must be an integer >= 1, got 0',
    );
    await refused(
      () => openThread(store, { snapshotPolicy: { bytesRatio: Number.NaN } }),
      'snapshotPolicy.bytesRatio must be a number >= 0, got NaN',
    );
    await refused(
      () => openThread(store, { lockTimeoutMs: -5 }),
      'lockTimeoutMs must be an integer from 0 to 3600000, got -5',
    );
    await refused(
      () => openThread(store, { lockTimeoutMs: '100' as never }),
      'lockTimeoutMs must be an integer from 0 to 3600000, got 100',
    );
    expect(await threadCount(store)).toBe(0);
    const t = await openThread(store, {
      snapshotPolicy: { maxCommits: Number.POSITIVE_INFINITY, minBytes: 0 },
      lockTimeoutMs: 0,
    });
    expect(t.branchName).toBe('main');
  });
});

describe("a thread's methods refuse an unknown option", () => {
  it('add, save, history, beginTurn, acquireRun, finish and release', async () => {
    const store = createMemoryStore();
    const thread = await openThread(store);
    await refused(
      () => thread.add({ role: 'user', data: 'hi', parentId: 'm-1' } as never),
      'add: unknown key "parentId"; a pending message chains after the head; rewind() first to save elsewhere',
    );
    await refused(
      () => thread.add([{ role: 'user', data: 'hi' }, { role: 'user', dat: 'x' } as never]),
      'add: messages[1]: unknown key "dat" (did you mean "data"?)',
    );
    expect(thread.pending).toEqual([]);
    thread.add({ role: 'user', data: 'hi' });
    await refused(
      () => thread.save({ onconflict: 'fail' } as never),
      'save options: unknown key "onconflict" (did you mean "onConflict"?)',
    );
    await refused(
      () => thread.save({ onConflict: 'retry' as never }),
      `onConflict must be 'rebase' or 'fail', got "retry"`,
    );
    expect(thread.head).toBeNull();
    await thread.save();
    await refused(
      () => thread.history({ limt: 1 } as never),
      'history options: unknown key "limt" (did you mean "limit"?)',
    );
    await refused(
      () => thread.beginTurn({ messageID: thread.head } as never),
      'beginTurn options: unknown key "messageID" (did you mean "messageId"?)',
    );
    expect(await store.listTurns(thread.id)).toEqual([]);
    await refused(
      () => thread.acquireRun({ owner: 'w', ttlMs: 1000, ttl: 5 } as never),
      /^acquireRun options: unknown key "ttl"/,
    );
    expect(await thread.runStatus()).toBeNull();

    const turn = await thread.beginTurn();
    await refused(
      () => turn.finish({ err: 'boom' } as never),
      'finish options: unknown key "err" (did you mean "error"?)',
    );
    await refused(
      () => turn.finish({ status: 'done' } as never),
      `status must be 'finished' or 'failed', got "done"`,
    );
    expect((await store.getTurn(turn.id))!.status).toBe('running');
    const run = await thread.acquireRun({ owner: 'w', ttlMs: 60_000 });
    await refused(
      () => run.release({ result: 'failed', err: 'boom' } as never),
      'release options: unknown key "err" (did you mean "error"?)',
    );
    expect((await thread.runStatus())!.isRunning).toBe(true);
  });

  it('the providers name an unknown option', async () => {
    const thread = await openThread(createMemoryStore());
    await refused(
      () => recentMessagesProvider(thread, { limt: 5 } as never),
      'recentMessagesProvider options: unknown key "limt" (did you mean "limit"?)',
    );
    await refused(
      () => threadStateProvider(thread, { field: ['a'] } as never),
      'threadStateProvider options: unknown key "field" (did you mean "fields"?)',
    );
  });
});
