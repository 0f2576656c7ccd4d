// The two seed agents' patterns: a checkpointer per user (one SQLite file each), and bad input.
import { join } from 'node:path';
import { isCairnError } from '@cairn/core';
import { createMemoryStore } from '@cairn/store';
import { createSqliteStore } from '@cairn/store-sqlite';
import { HumanMessage } from '@langchain/core/messages';
import { MemorySaver } from '@langchain/langgraph';
import { afterAll, describe, expect, it } from 'vitest';
import { CairnSaver } from '../src/index.js';
import { chatGraph, history, normalizer } from './scripts.js';
import { removeTempDirs, tempDir } from './stores.js';

afterAll(removeTempDirs);

describe('one SQLite file per user', () => {
  it('keeps each user in their own file, equal to MemorySaver per user', async () => {
    const dir = tempDir();
    // The seed agent's hook: the checkpointer is chosen per user.
    const checkpointerFor = (user: string) =>
      new CairnSaver(createSqliteStore({ path: join(dir, `${user}.db`) }));
    const users = ['ada', 'grace'];
    for (const user of users) {
      const reference = chatGraph(new MemorySaver());
      const saver = checkpointerFor(user);
      const graph = chatGraph(saver);
      const config = { configurable: { thread_id: 'conversation' } };
      for (let i = 1; i <= 3; i++) {
        const input = {
          messages: [new HumanMessage({ id: `${user}-${i}`, content: `${user} ${i}` })],
        };
        await reference.invoke(input, config);
        await graph.invoke(input, config);
      }
      await saver.store.close();
      // Reopened, as the next request for this user would.
      const reopened = checkpointerFor(user);
      const expected = normalizer()(await history(reference, config));
      expect(normalizer()(await history(chatGraph(reopened), config))).toEqual(expected);
      await reopened.store.close();
    }
    const ada = createSqliteStore({ path: join(dir, 'ada.db') });
    const { values } = await chatGraph(new CairnSaver(ada)).getState({
      configurable: { thread_id: 'conversation' },
    });
    expect(values.messages.map((m: HumanMessage) => m.id)).toEqual([
      'ada-1',
      'ai-1',
      'ada-2',
      'ai-2',
      'ada-3',
      'ai-3',
    ]);
    await ada.close();
  });
});

describe('bad input', () => {
  it('rejects what it cannot store with a CairnError before writing anything', async () => {
    const store = createMemoryStore();
    const saver = new CairnSaver(store);
    const checkpoint = {
      v: 4,
      id: '1ef-bad',
      ts: new Date().toISOString(),
      channel_values: {},
      channel_versions: {},
      versions_seen: {},
    };
    const metadata = { source: 'input' as const, step: -1, parents: {} };
    for (const config of [
      { configurable: { thread_id: { not: 'a string' } } },
      { configurable: { thread_id: 't', checkpoint_ns: 7 } },
      { configurable: { thread_id: 'x'.repeat(201) } },
    ]) {
      const error = await saver.put(config, checkpoint, metadata, {}).catch((e) => e);
      expect(isCairnError(error, 'INVALID_ARGUMENT')).toBe(true);
    }
    const noId = await saver
      .put({ configurable: { thread_id: 't' } }, { ...checkpoint, id: '' }, metadata, {})
      .catch((e) => e);
    expect(isCairnError(noId, 'INVALID_ARGUMENT')).toBe(true);
    expect((await store.listThreads()).items).toEqual([]);
  });

  it('follows the suite for a missing thread_id or checkpoint_id', async () => {
    const saver = new CairnSaver(createMemoryStore());
    expect(await saver.getTuple({ configurable: {} })).toBeUndefined();
    await expect(saver.putWrites({ configurable: { thread_id: 't' } }, [], 'task')).rejects.toThrow(
      /checkpoint_id/,
    );
  });
});
