import { createComposer, type Provider } from '@cairn/compose';
import { createMemoryStore } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import { openThread, recentMessagesProvider, threadStateProvider } from '../src/index.js';
import { Research } from './schema.js';

describe('compose providers', () => {
  it('recentMessagesProvider and threadStateProvider compose, and version keeps the cache fresh', async () => {
    const thread = await openThread(createMemoryStore(), { schema: Research });
    thread.add([
      { role: 'user', data: 'one' },
      { role: 'assistant', data: { text: 'two' } },
      { role: 'user', data: 'three' },
    ]);
    const [, , last] = await thread.save();
    await thread.update({ objective: 'cairns', keyInsights: ['markers'], counter: 7 });
    const providers: Provider[] = [
      recentMessagesProvider(thread, { limit: 2 }),
      threadStateProvider(thread, { fields: ['objective', 'keyInsights'], position: 1 }),
    ];
    const composer = createComposer({ providers, cache: { max: 100 }, timeoutMs: 3000 });
    const first = await composer.compose(last!, { version: thread.version });
    expect(first.text).toBe(
      'assistant: two\nuser: three\nobjective: cairns\nkeyInsights: ["markers"]',
    );
    expect(first.values).toMatchObject({
      recentMessages: 'assistant: two\nuser: three',
      objective: 'cairns',
      keyInsights: ['markers'],
    });
    expect(first.values).not.toHaveProperty('counter');

    // same version: a cache hit; a state change moves the version, so the next one is fresh
    const hit = await composer.compose(last!, { version: thread.version });
    expect(hit.text).toBe(first.text);
    await thread.update({ keyInsights: ['trails'] });
    const fresh = await composer.compose(last!, { version: thread.version });
    expect(fresh.values.keyInsights).toEqual(['markers', 'trails']);
  });

  it('threadStateProvider without fields gives every thread-scoped field that has a value', async () => {
    const thread = await openThread(createMemoryStore(), { schema: Research });
    const result = await threadStateProvider(thread).get({
      message: { id: 'm1' },
      state: undefined,
      version: undefined,
      signal: new AbortController().signal,
    });
    expect(result?.values).toEqual({ keyInsights: [], notes: {}, counter: 0 });
    expect(result?.data).toEqual({ threadState: { keyInsights: [], notes: {}, counter: 0 } });
  });
});
