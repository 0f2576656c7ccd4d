import { createMemoryStore, type Store } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import { openThread, recentMessagesProvider, threadStateProvider } from '../src/index.js';

/** An INVALID_ARGUMENT error with this message (a string, or `expect.stringMatching`). */
const invalid = (message: unknown) =>
  expect.objectContaining({ code: 'INVALID_ARGUMENT', message });

const threadCount = async (store: Store) => (await store.listThreads()).items.length;

describe('openThread: every option is checked before the store is touched', () => {
  it('a store passed inside the options is named, not a TypeError', async () => {
    const store = createMemoryStore();
    await expect(async () => openThread({ store } as never, {})).rejects.toEqual(
      invalid(
        'openThread: the first argument must be a Cairn Store, got an object holding one ({ store }); pass the store itself',
      ),
    );
    await expect(async () => openThread(undefined as never)).rejects.toEqual(
      invalid('openThread: the first argument must be a Cairn Store, got undefined'),
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
      await expect(async () => openThread(store, options as never)).rejects.toEqual(
        invalid(
          typeof message === 'string'
            ? `openThread options: ${message}`
            : expect.stringMatching(message),
        ),
      );
    }
    expect(await threadCount(store)).toBe(0);
  });

  it('a value of the wrong type or range is refused: snapshotPolicy, lockTimeoutMs', async () => {
    const store = createMemoryStore();
    await expect(async () =>
      openThread(store, { snapshotPolicy: 'bogus' as never }),
    ).rejects.toEqual(invalid('snapshotPolicy must be an object, got string'));
    await expect(async () =>
      openThread(store, { snapshotPolicy: { maxCommit: 5 } as never }),
    ).rejects.toEqual(
      invalid('snapshotPolicy: unknown key "maxCommit" (did you mean "maxCommits"?)'),
    );
    await expect(async () =>
      openThread(store, { snapshotPolicy: { maxCommits: 0 } }),
    ).rejects.toEqual(invalid('snapshotPolicy.maxCommits must be an integer >= 1, got 0'));
    await expect(async () =>
      openThread(store, { snapshotPolicy: { bytesRatio: Number.NaN } }),
    ).rejects.toEqual(invalid('snapshotPolicy.bytesRatio must be a number >= 0, got NaN'));
    await expect(async () => openThread(store, { lockTimeoutMs: -5 })).rejects.toEqual(
      invalid('lockTimeoutMs must be an integer from 0 to 3600000, got -5'),
    );
    await expect(async () => openThread(store, { lockTimeoutMs: '100' as never })).rejects.toEqual(
      invalid('lockTimeoutMs must be an integer from 0 to 3600000, got 100'),
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
    await expect(async () =>
      thread.add({ role: 'user', data: 'hi', parentId: 'm-1' } as never),
    ).rejects.toEqual(
      invalid(
        'add: unknown key "parentId"; a pending message chains after the head; rewind() first to save elsewhere',
      ),
    );
    await expect(async () =>
      thread.add([{ role: 'user', data: 'hi' }, { role: 'user', dat: 'x' } as never]),
    ).rejects.toEqual(invalid('add: messages[1]: unknown key "dat" (did you mean "data"?)'));
    expect(thread.pending).toEqual([]);
    thread.add({ role: 'user', data: 'hi' });
    await expect(async () => thread.save({ onconflict: 'fail' } as never)).rejects.toEqual(
      invalid('save options: unknown key "onconflict" (did you mean "onConflict"?)'),
    );
    await expect(async () => thread.save({ onConflict: 'retry' as never })).rejects.toEqual(
      invalid(`onConflict must be 'rebase' or 'fail', got "retry"`),
    );
    expect(thread.head).toBeNull();
    await thread.save();
    await expect(async () => thread.history({ limt: 1 } as never)).rejects.toEqual(
      invalid('history options: unknown key "limt" (did you mean "limit"?)'),
    );
    await expect(async () => thread.beginTurn({ messageID: thread.head } as never)).rejects.toEqual(
      invalid('beginTurn options: unknown key "messageID" (did you mean "messageId"?)'),
    );
    expect(await store.listTurns(thread.id)).toEqual([]);
    await expect(async () =>
      thread.acquireRun({ owner: 'w', ttlMs: 1000, ttl: 5 } as never),
    ).rejects.toEqual(invalid(expect.stringMatching(/^acquireRun options: unknown key "ttl"/)));
    expect(await thread.runStatus()).toBeNull();

    const turn = await thread.beginTurn();
    await expect(async () => turn.finish({ err: 'boom' } as never)).rejects.toEqual(
      invalid('finish options: unknown key "err" (did you mean "error"?)'),
    );
    await expect(async () => turn.finish({ status: 'done' } as never)).rejects.toEqual(
      invalid(`status must be 'finished' or 'failed', got "done"`),
    );
    expect((await store.getTurn(turn.id))!.status).toBe('running');
    const run = await thread.acquireRun({ owner: 'w', ttlMs: 60_000 });
    await expect(async () =>
      run.release({ result: 'failed', err: 'boom' } as never),
    ).rejects.toEqual(invalid('release options: unknown key "err" (did you mean "error"?)'));
    expect((await thread.runStatus())!.isRunning).toBe(true);
  });

  it('the providers name an unknown option', async () => {
    const thread = await openThread(createMemoryStore());
    await expect(async () => recentMessagesProvider(thread, { limt: 5 } as never)).rejects.toEqual(
      invalid('recentMessagesProvider options: unknown key "limt" (did you mean "limit"?)'),
    );
    await expect(async () =>
      threadStateProvider(thread, { field: ['a'] } as never),
    ).rejects.toEqual(
      invalid('threadStateProvider options: unknown key "field" (did you mean "fields"?)'),
    );
  });
});
