import { defineState, field, isCairnError, reducers } from '@cairn/core';
import type { Store } from '@cairn/store';
import type { TestStoreKind } from '@cairn/store-postgres/testing';
import { type UIMessage, validateUIMessages } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChatStore, createChatStore } from '../src/index.js';
import { chatTurn, user } from './chat-route.js';

const AppState = defineState({
  title: field<string>(),
  toolsUsed: field<string[]>({ reducer: reducers.union, default: () => [] }),
});

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    return isCairnError(e) ? e.code : `not a CairnError: ${String(e)}`;
  }
  return 'no error';
}

async function error(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (e) {
    if (isCairnError(e)) return { code: e.code, message: e.message };
    throw e;
  }
  throw new Error('expected a CairnError');
}

/** JSON as the client would receive it (drops undefined-valued keys). */
const wire = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

/** The AI SDK chat store on one Cairn store. Each store runs it with one line. */
export function describeChatStore(s: TestStoreKind): void {
  describe.skipIf(Boolean(s.skip))(`@cairn/ai-sdk on ${s.name}`, () => {
    let store: Store;
    let chats: ChatStore<typeof AppState>;

    beforeAll(async () => {
      store = await s.create();
      chats = createChatStore({ store, schema: AppState });
    });
    afterAll(async () => {
      if (store) await s.destroy(store);
    });

    /** Every message the chat holds on any branch, by Cairn id. */
    async function storedCount(chatId: string): Promise<number> {
      const ids = new Set<string>();
      for (const b of await store.listBranches(chatId)) {
        if (b.headMessageId === null) continue;
        for (const m of await store.getChain(b.headMessageId)) ids.add(m.id);
      }
      return ids.size;
    }

    it('saves from onFinish, loads what the AI SDK validates, and appends only what is new', async () => {
      const chatId = await chats.createChat({ resourceId: 'user-1' });
      expect(await chats.loadChat(chatId)).toEqual([]);

      const t1 = await chatTurn(chats, chatId, [user('What is a cairn?')], 'A pile of stones.');
      expect(t1.body).toContain('"type":"text-delta"');
      expect(t1.saved).toEqual({ branch: 'main', forked: false, saved: 2 });
      expect(t1.reply.parts).toContainEqual(
        expect.objectContaining({ type: 'text', text: 'A pile of stones.' }),
      );
      const loaded = await chats.loadChat(chatId);
      expect(loaded).toEqual(wire(t1.messages));
      expect(await validateUIMessages({ messages: loaded })).toEqual(loaded);

      // The client sends the whole list back with a new question.
      const t2 = await chatTurn(
        chats,
        chatId,
        [...loaded, user('Who builds them?')],
        'Hikers, to mark trails.',
      );
      expect(t2.saved).toEqual({ branch: 'main', forked: false, saved: 2 });
      expect(await chats.loadChat(chatId)).toEqual(wire(t2.messages));
      expect(await storedCount(chatId)).toBe(4);

      // The same list again (a retried request): nothing new, nothing written.
      expect(await chats.saveChat({ chatId, messages: t2.messages })).toEqual({
        branch: 'main',
        forked: false,
        saved: 0,
      });
      expect(await storedCount(chatId)).toBe(4);
      expect(await chats.loadChat(chatId, { limit: 2 })).toEqual(wire(t2.messages.slice(2)));
    });

    it('a regenerate forks at the question; the old answer stays on its branch', async () => {
      const chatId = await chats.createChat();
      const t1 = await chatTurn(chats, chatId, [user('Name a stone')], 'Granite.');
      const t2 = await chatTurn(chats, chatId, [...t1.messages, user('Another')], 'Basalt.');
      // useChat's regenerate(): the list without the last answer, streamed again.
      const regen = await chatTurn(chats, chatId, t2.messages.slice(0, -1), 'Marble.');
      expect(regen.saved).toEqual({ branch: 'main-v2', forked: true, saved: 1 });
      expect(await chats.loadChat(chatId)).toEqual(wire(regen.messages));
      expect(await storedCount(chatId)).toBe(5); // the shared prefix is stored once

      const versions = await chats.versions(chatId, regen.reply.id);
      expect(versions.index).toBe(1);
      expect(versions.versions.map((v) => v.branch)).toEqual(['main', 'main-v2']);
      expect(versions.versions.map((v) => v.message)).toEqual(wire([t2.reply, regen.reply]));
      // "version 1 of 2": switch back; the old answer is intact.
      expect(await chats.switchBranch(chatId, 'main')).toEqual(wire(t2.messages));
      expect((await chats.versions(chatId, t2.reply.id)).index).toBe(0);
      expect(await chats.listBranches(chatId)).toEqual([
        expect.objectContaining({ name: 'main', isActive: true, parent: null }),
        expect.objectContaining({ name: 'main-v2', isActive: false, parent: 'main' }),
      ]);
      // A reload (a new chat store on the same database) sees the same.
      const again = createChatStore({ store, schema: AppState });
      expect(await again.loadChat(chatId)).toEqual(wire(t2.messages));
      expect(await again.switchBranch(chatId, 'main-v2')).toEqual(wire(regen.messages));
    });

    it('120 regenerations of one answer all save; branch names stay short and unique', async () => {
      const chatId = await chats.createChat();
      const q = user('Name a stone');
      const answer = (i: number): UIMessage => ({
        id: `a${i}`,
        role: 'assistant',
        parts: [{ type: 'text', text: `stone ${i}` }],
      });
      await chats.saveChat({ chatId, messages: [q, answer(0)] });
      const branches: string[] = [];
      for (let i = 1; i <= 120; i++) {
        const saved = await chats.saveChat({ chatId, messages: [q, answer(i)] });
        expect(saved).toMatchObject({ forked: true, saved: 1 });
        branches.push(saved.branch);
      }
      expect(branches).toEqual(Array.from({ length: 120 }, (_, i) => `main-v${i + 2}`));
      expect(await chats.loadChat(chatId)).toEqual(wire([q, answer(120)]));
      const { index, versions } = await chats.versions(chatId, 'a120');
      expect([index, versions.length]).toEqual([120, 121]);
      // An edit after all that still forks.
      const edited = { ...q, parts: [{ type: 'text' as const, text: 'Name a rock' }] };
      expect(await chats.saveChat({ chatId, messages: [edited] })).toMatchObject({
        branch: 'main-v122',
        forked: true,
      });
    }, 180_000);

    it('an edit of the first question (same id, new text) forks at the root', async () => {
      const chatId = await chats.createChat();
      const q = user('How tall is a cairn?');
      const t1 = await chatTurn(chats, chatId, [q], 'Knee high, often.');
      const t2 = await chatTurn(chats, chatId, [...t1.messages, user('And wide?')], 'Wider.');
      const edited: UIMessage = { ...q, parts: [{ type: 'text', text: 'How old are cairns?' }] };
      const t3 = await chatTurn(chats, chatId, [edited], 'Thousands of years.');
      expect(t3.saved).toEqual({ branch: 'main-v2', forked: true, saved: 2 });
      const loaded = await chats.loadChat(chatId);
      expect(loaded).toEqual(wire(t3.messages));
      expect(loaded[0]!.id).toBe(q.id); // the client's id is kept
      expect(await validateUIMessages({ messages: loaded })).toEqual(loaded);
      expect(await chats.switchBranch(chatId, 'main')).toEqual(wire(t2.messages));
      // The edited question has two versions, both roots.
      const v = await chats.versions(chatId, q.id);
      expect(v.versions.map((x) => x.message)).toEqual(wire([q, edited]));
      expect(v.index).toBe(0);
      expect(await storedCount(chatId)).toBe(6);
    });

    it('an edit in the middle forks at the message before it; removed messages fork without writing', async () => {
      const chatId = await chats.createChat();
      const t1 = await chatTurn(chats, chatId, [user('one')], 'uno');
      const q2 = user('two');
      const t2 = await chatTurn(chats, chatId, [...t1.messages, q2], 'dos');
      const t3 = await chatTurn(chats, chatId, [...t2.messages, user('three')], 'tres');
      const edited = { ...q2, parts: [{ type: 'text' as const, text: 'zwei' }] };
      const e = await chatTurn(chats, chatId, [...t1.messages, edited], 'deux');
      expect(e.saved).toMatchObject({ forked: true, saved: 2 });
      expect(await chats.loadChat(chatId)).toEqual(wire(e.messages));
      // The client dropped the last two messages: a branch at the one before, nothing written.
      const before = await storedCount(chatId);
      const cut = await chats.saveChat({ chatId, messages: t3.messages.slice(0, 4) });
      expect(cut.forked).toBe(true);
      expect(await storedCount(chatId)).toBe(before);
      expect(await chats.loadChat(chatId)).toEqual(wire(t3.messages.slice(0, 4)));
      // An empty list: an empty branch; every earlier branch keeps its messages.
      expect(await chats.saveChat({ chatId, messages: [] })).toMatchObject({
        forked: true,
        saved: 0,
      });
      expect(await chats.loadChat(chatId)).toEqual([]);
      expect(await chats.switchBranch(chatId, 'main')).toEqual(wire(t3.messages));
    });

    it('a changed last message (a tool result added, same id) is a new version of it', async () => {
      const chatId = await chats.createChat();
      const t1 = await chatTurn(chats, chatId, [user('weather?')], 'Checking.');
      const changed = [
        t1.messages[0]!,
        { ...t1.reply, metadata: { approved: true } },
      ] as UIMessage[];
      expect(await chats.saveChat({ chatId, messages: changed })).toMatchObject({
        forked: true,
        saved: 1,
      });
      expect(await chats.loadChat(chatId)).toEqual(wire(changed));
      expect((await chats.versions(chatId, t1.reply.id)).versions).toHaveLength(2);
    });

    it('thread.state holds app state next to the messages, and forks with them', async () => {
      const chatId = await chats.createChat({ title: 'stones' });
      const t1 = await chatTurn(chats, chatId, [user('hi')], 'hello');
      const thread = await chats.open(chatId);
      await thread.update({ title: 'Greeting', toolsUsed: ['search'] });
      await thread.close();
      await chatTurn(chats, chatId, [...t1.messages, user('more')], 'sure');
      const after = await chats.open(chatId);
      expect(after.state).toEqual({ title: 'Greeting', toolsUsed: ['search'] });
      await after.update({ toolsUsed: ['weather'] });
      await after.close();
      // A regenerate of the first answer forks at the question: the state as of then.
      await chatTurn(chats, chatId, [t1.messages[0]!], 'hey');
      const forked = await chats.open(chatId);
      expect(forked.branchName).toBe('main-v2');
      expect(forked.state).toEqual({ title: undefined, toolsUsed: [] });
      await forked.close();
      expect((await chats.getChat(chatId))?.title).toBe('stones');
    });

    it('concurrent saves of one chat from two requests lose nothing', async () => {
      const chatId = await chats.createChat();
      const t1 = await chatTurn(chats, chatId, [user('start')], 'ok');
      // Six requests continue the same conversation at once, each differently.
      const lists = Array.from({ length: 6 }, (_, i) => [
        ...t1.messages,
        user(`question ${i}`),
        { id: `answer-${i}`, role: 'assistant', parts: [{ type: 'text', text: `answer ${i}` }] },
      ]) as UIMessage[][];
      const results = await Promise.all(
        lists.map((messages) => chats.saveChat({ chatId, messages })),
      );
      expect(results.map((r) => r.saved)).toEqual([2, 2, 2, 2, 2, 2]);
      // A repeated request finds its list on its branch and writes nothing.
      for (const messages of [lists[0]!, lists[3]!]) {
        expect(await chats.saveChat({ chatId, messages })).toMatchObject({
          saved: 0,
          forked: false,
        });
        expect(await chats.loadChat(chatId)).toEqual(messages);
      }
      // Every list is, exactly, one branch of the chat.
      const branches = await chats.listBranches(chatId);
      const seen: unknown[] = [];
      for (const b of branches) {
        const head = (await store.getBranch(chatId, b.name))!.headMessageId!;
        seen.push((await store.getChain(head)).map((m) => m.data));
      }
      for (const list of lists) expect(seen).toContainEqual(list);
      expect(await storedCount(chatId)).toBe(2 + 12);
    });

    it('rejects what the AI SDK would reject, naming the position, before writing', async () => {
      const chatId = await chats.createChat();
      const t1 = await chatTurn(chats, chatId, [user('hi')], 'hello');
      const base = t1.messages;
      const bad = async (m: unknown) =>
        error(chats.saveChat({ chatId, messages: [...base, m] as UIMessage[] }));
      expect(await bad({ role: 'user', parts: [] })).toEqual({
        code: 'INVALID_ARGUMENT',
        message: 'messages[2].id must be a non-empty string, got undefined',
      });
      expect((await bad({ id: 'x', role: 'tool', parts: [] })).message).toMatch(
        /^messages\[2\]\.role must be 'system', 'user' or 'assistant', got "tool"/,
      );
      expect((await bad({ id: 'x', role: 'user', parts: 'hi' })).message).toBe(
        'messages[2].parts must be an array',
      );
      expect(
        (await bad({ id: 'x', role: 'user', parts: [], metadata: { at: new Date() } })).message,
      ).toBe('messages[2].metadata.at: an instance of Date is not plain JSON');
      expect(
        (await bad({ id: 'x', role: 'user', parts: [{ type: 'text', text: 1n }] })).message,
      ).toBe('messages[2].parts[0].text: BigInt is not JSON');
      expect((await bad(base[0])).message).toMatch(/^messages\[2\]\.id .* appears twice/);
      // A bad message before the head, while the rest extends the branch: still rejected.
      const reply = { id: 'r', role: 'assistant', parts: [] } as UIMessage;
      expect(
        (
          await error(
            chats.saveChat({
              chatId,
              messages: [{ ...base[0]!, role: 'tool' as never }, base[1]!, reply],
            }),
          )
        ).message,
      ).toMatch(/^messages\[0\]\.role must be/);
      // A save that would create the chat creates nothing when a message is bad.
      const unborn = `chat-${Math.random().toString(36).slice(2)}`;
      expect(
        await code(chats.saveChat({ chatId: unborn, messages: [{ id: 'q' } as UIMessage] })),
      ).toBe('INVALID_ARGUMENT');
      expect(await chats.getChat(unborn)).toBeNull();
      expect(
        await code(Promise.resolve().then(() => createChatStore({ store, maxRetries: -1 }))),
      ).toBe('INVALID_ARGUMENT');
      // A bad message after an edit: the edit is not half-saved either.
      const edit = { ...base[0]!, parts: [{ type: 'text', text: 'changed' }] };
      expect(
        await code(
          chats.saveChat({
            chatId,
            messages: [
              edit,
              { id: 'y', role: 'assistant', parts: [], metadata: { n: Number.NaN } },
            ] as UIMessage[],
          }),
        ),
      ).toBe('INVALID_ARGUMENT');
      expect(await code(chats.saveChat({ chatId, messages: 'nope' as never }))).toBe(
        'INVALID_ARGUMENT',
      );
      expect(await chats.loadChat(chatId)).toEqual(wire(base));
      expect((await chats.listBranches(chatId)).map((b) => b.name)).toEqual(['main']);
    });

    it('a "__proto__" key in a tool part is data: saved, read back exactly, and later saves work', async () => {
      const chatId = await chats.createChat();
      const q = user('Look up cairns');
      // An app that parses a tool's input from model text, and a tool that returns parsed
      // JSON it fetched: either can hold a "__proto__" key (prompt injection can put one there).
      const input = JSON.parse('{"__proto__": {"isAdmin": true}, "query": "cairns"}');
      const output = JSON.parse('{"title": "Cairn", "__proto__": ["x"]}');
      const call = {
        id: 'a-tool',
        role: 'assistant',
        parts: [
          { type: 'tool-lookup', toolCallId: 'c1', state: 'output-available', input, output },
        ],
      } as UIMessage;
      expect(await chats.saveChat({ chatId, messages: [q, call] })).toEqual({
        branch: 'main',
        forked: false,
        saved: 2,
      });
      const loaded = await chats.loadChat(chatId);
      expect(loaded).toEqual([q, call]);
      const part = loaded[1]!.parts[0] as { input: object; output: object };
      expect(Object.keys(part.input).sort()).toEqual(['__proto__', 'query']);
      expect(Object.getPrototypeOf(part.input)).toBe(Object.prototype);
      expect(Object.keys(part.output).sort()).toEqual(['__proto__', 'title']);
      // Every later turn resends the list (as JSON): it extends the chat, and a regenerate forks.
      const t2 = await chatTurn(chats, chatId, [...wire(loaded), user('Thanks')], 'Welcome.');
      expect(t2.saved).toEqual({ branch: 'main', forked: false, saved: 2 });
      const regen = await chatTurn(chats, chatId, wire(t2.messages).slice(0, -1), 'Any time.');
      expect(regen.saved).toEqual({ branch: 'main-v2', forked: true, saved: 1 });
      expect(await chats.loadChat(chatId)).toEqual(wire(regen.messages));
      expect(({} as { isAdmin?: unknown }).isAdmin).toBeUndefined();
      expect(Object.getPrototypeOf(input)).toBe(Object.prototype);
    });

    it('a message the store would refuse is named by its position in the list', async () => {
      const chatId = await chats.createChat();
      const q = user('Stored first');
      await chats.saveChat({ chatId, messages: [q] });
      // The first message is stored, so only the second is written: the error still names
      // its place in the client's list, not in the batch written.
      const key = {
        id: 'a',
        role: 'assistant',
        parts: [{ type: 'data-x', data: { 'cut \ud83d': 1 } }],
      };
      expect(await error(chats.saveChat({ chatId, messages: [q, key] as UIMessage[] }))).toEqual({
        code: 'INVALID_ARGUMENT',
        message:
          'messages[1].parts[0].data.cut \ud83d: the key holds a lone surrogate (U+D83D) at position 4; stored text cannot',
      });
      let deep: unknown = 'leaf';
      for (let i = 0; i < 10_000; i++) deep = { deep };
      const nested = { id: 'a', role: 'assistant', parts: [{ type: 'data-x', data: deep }] };
      expect(
        (await error(chats.saveChat({ chatId, messages: [q, nested] as UIMessage[] }))).message,
      ).toMatch(/^messages\[1\]\.parts\[0\]\.data(\.deep)+: it nests deeper than \d+ levels/);
      expect(await chats.loadChat(chatId)).toEqual(wire([q]));
    });

    it("another owner's chat is NOT_FOUND on every call, as a missing one, and nothing is written", async () => {
      const chatId = await chats.createChat({ resourceId: 'alice' });
      const q1 = user('Alice asks');
      await chats.saveChat({ chatId, messages: [q1], resourceId: 'alice' });
      const missing = `chat-${Math.random().toString(36).slice(2)}`;
      const asMissing = await error(chats.loadChat(missing, { resourceId: 'bob' }));
      expect(asMissing).toEqual({ code: 'NOT_FOUND', message: `chat "${missing}" not found` });
      const bob = { resourceId: 'bob' };
      const refused = [
        // Appends to Alice's chat, then re-points it (a list that diverges): the probe's two writes.
        () => chats.saveChat({ chatId, messages: [q1, user('written by bob')], ...bob }),
        () => chats.saveChat({ chatId, messages: [user('FORGED by bob')], ...bob }),
        () => chats.saveChat({ chatId, messages: [], ...bob }),
        // null acts for no owner: it matches only a chat without one.
        () => chats.saveChat({ chatId, messages: [q1, user('anonymous')], resourceId: null }),
        () => chats.loadChat(chatId, bob),
        () => chats.listBranches(chatId, bob),
        () => chats.switchBranch(chatId, 'main', bob),
        () => chats.versions(chatId, q1.id, bob),
        () => chats.open(chatId, bob),
      ];
      for (const call of refused) {
        expect(await error(call())).toEqual({
          ...asMissing,
          message: `chat "${chatId}" not found`,
        });
      }
      expect(await chats.deleteChat(chatId, bob)).toBe(false);
      expect(await chats.deleteChat(missing, bob)).toBe(false);
      expect(await chats.loadChat(chatId, { resourceId: 'alice' })).toEqual(wire([q1]));
      expect(await chats.listBranches(chatId, { resourceId: 'alice' })).toEqual([
        expect.objectContaining({ name: 'main', isActive: true }),
      ]);
      expect(await storedCount(chatId)).toBe(1);
      // The owner, and code that names no owner, still can.
      expect(
        await chats.saveChat({ chatId, messages: [q1, user('Alice again')], resourceId: 'alice' }),
      ).toMatchObject({ saved: 1 });
      expect(await chats.loadChat(chatId)).toHaveLength(2);
      // A save that creates a chat makes its resourceId the owner.
      const created = `chat-${Math.random().toString(36).slice(2)}`;
      await chatTurn(chats, created, [user('mine')], 'yours');
      expect((await chats.getChat(created))?.resourceId).toBeNull();
      expect(await code(chats.loadChat(created, { resourceId: null }))).toBe('no error');
      expect(await code(chats.loadChat(created, bob))).toBe('NOT_FOUND');
      const carols = `chat-${Math.random().toString(36).slice(2)}`;
      await chats.saveChat({ chatId: carols, messages: [user('hi')], resourceId: 'carol' });
      expect((await chats.getChat(carols))?.resourceId).toBe('carol');
      expect(await code(chats.saveChat({ chatId: carols, messages: [], ...bob }))).toBe(
        'NOT_FOUND',
      );
      expect(await chats.deleteChat(chatId, { resourceId: 'alice' })).toBe(true);
    });

    it('an unknown chat is NOT_FOUND on load unless created; a save creates it', async () => {
      expect(await code(chats.loadChat('no-such-chat'))).toBe('NOT_FOUND');
      expect(await code(chats.open('no-such-chat'))).toBe('NOT_FOUND');
      expect(await code(chats.listBranches('no-such-chat'))).toBe('NOT_FOUND');
      const id = `chat-${Math.random().toString(36).slice(2)}`;
      const t = await chatTurn(chats, id, [user('first')], 'reply');
      expect(t.saved.saved).toBe(2);
      expect(await chats.loadChat(id)).toEqual(wire(t.messages));
      expect(await code(chats.createChat({ id }))).toBe('CONFLICT');
      expect(await code(chats.versions(id, 'not-there'))).toBe('NOT_FOUND');
      const owned = await chats.createChat({ resourceId: 'user-9' });
      expect((await chats.listChats({ resourceId: 'user-9' })).items.map((c) => c.id)).toEqual([
        owned,
      ]);
      expect(await chats.deleteChat(owned)).toBe(true);
      expect(await code(chats.loadChat(owned))).toBe('NOT_FOUND');
    });
  });
}
