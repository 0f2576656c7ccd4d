import { createComposer, type ProviderContext } from '@cairn/compose';
import { createMemoryStore } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import { createMemory, memoriesProvider } from '../src/index.js';

interface ChatMessage {
  id: string;
  roomId: string;
  userId: string;
  data: { text: string };
}

describe('memoriesProvider with @cairn/compose', () => {
  it('recalls what the viewer may see for the message, and a new memory changes the composition key', async () => {
    const store = createMemoryStore();
    const memory = createMemory({ store, agentId: 'assistant' });
    await memory.remember({
      text: 'Room one is planning a picnic on Saturday',
      roomId: 'room-1',
      scope: 'room',
    });
    await memory.remember({
      text: 'Room two is planning a secret picnic',
      roomId: 'room-2',
      scope: 'room',
    });
    // As the README shows it: no cache or timeout options, the message type named once.
    const provider = memoriesProvider<ChatMessage>(memory, {
      limit: 3,
      viewerFrom: (ctx) => ({ agentId: 'assistant', roomId: ctx.message.roomId }),
    });
    const composer = createComposer<ChatMessage>({ providers: [provider] });
    const message = {
      id: 'm1',
      roomId: 'room-1',
      userId: 'u1',
      data: { text: 'what about the picnic?' },
    };
    const first = await composer.compose(message, { version: memory.version });
    expect(first.text).toContain('# Relevant memories');
    expect(first.text).toContain('Room one is planning a picnic');
    expect(first.text).not.toContain('secret');
    const data = first.data.providers as Record<
      string,
      { data: { memories: Array<{ sources: string[] }> } }
    >;
    expect(data.MEMORIES!.data.memories.length).toBe(1);
    expect(data.MEMORIES!.data.memories[0]!.sources.length).toBeGreaterThan(0);

    const before = memory.version;
    await memory.remember({ text: 'The picnic moved to Sunday', roomId: 'room-1', scope: 'room' });
    expect(memory.version).not.toBe(before);
    const second = await composer.compose(message, { version: memory.version });
    expect(second.text).toContain('The picnic moved to Sunday');
  });

  it('recalls branch-scoped memories from the branch branchFrom names, and none without it', async () => {
    const store = createMemoryStore();
    const memory = createMemory({ store, agentId: 'assistant' });
    const { thread, branch } = await store.createThreadWithBranch({});
    const { messages } = await store.addMessagesOnBranch(branch.id, null, [
      {
        threadId: thread.id,
        parentId: null,
        role: 'user',
        data: 'my dog is Rex',
        id: `rex-${thread.id}`,
      },
    ]);
    await memory.remember({
      text: 'The dog is called Rex',
      source: { threadId: thread.id, messageIds: [messages[0]!.id], branchScoped: true },
    });
    const other = await store.createBranch({
      threadId: thread.id,
      name: 'before',
      headMessageId: null,
    });
    const message = {
      id: 'm2',
      roomId: 'r',
      userId: 'u',
      data: { text: 'what is the dog called?' },
      branchId: branch.id,
    };
    const compose = async (
      branchFrom?: (ctx: ProviderContext<typeof message>) => { threadId: string; branchId: string },
    ) => {
      const provider = memoriesProvider<typeof message>(memory, {
        viewerFrom: () => ({ agentId: 'assistant' }),
        ...(branchFrom ? { branchFrom } : {}),
      });
      return (await createComposer<typeof message>({ providers: [provider] }).compose(message))
        .text;
    };
    expect(
      await compose((ctx) => ({ threadId: thread.id, branchId: ctx.message.branchId })),
    ).toContain('Rex');
    expect(await compose(() => ({ threadId: thread.id, branchId: other.id }))).not.toContain('Rex');
    expect(await compose()).not.toContain('Rex');
  });

  it('returns nothing when the message has no text', async () => {
    const memory = createMemory({ store: createMemoryStore(), agentId: 'a' });
    await memory.remember({ text: 'anything' });
    const provider = memoriesProvider(memory, { viewerFrom: () => ({ agentId: 'a' }) });
    const ctx: ProviderContext<{ id: string; data: unknown }> = {
      message: { id: 'x', data: { image: 'png' } },
      state: undefined,
      version: undefined,
      signal: new AbortController().signal,
    };
    expect(await provider.get(ctx)).toEqual({
      text: '',
      values: { memories: '' },
      data: { memories: [] },
    });
    expect(() => memoriesProvider(memory, {} as never)).toThrow(/viewerFrom/);
  });
});
