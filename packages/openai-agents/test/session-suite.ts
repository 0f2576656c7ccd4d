import { isCairnError } from '@cairn/core';
import type { Store } from '@cairn/store';
import type { TestStoreKind } from '@cairn/store-postgres/testing';
import {
  Agent,
  type AgentInputItem,
  MemorySession,
  Runner,
  type Session,
  setTracingDisabled,
  tool,
} from '@openai/agents-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CairnSession, POPPED_CHECKPOINT } from '../src/index.js';
import { call, ScriptedModel, ScriptedProvider, say } from './scripted-model.js';

setTracingDisabled(true);

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    return isCairnError(e) ? `${e.code}: ${e.message}` : `not a CairnError: ${String(e)}`;
  }
  return 'no error';
}

const weather = tool({
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `Sunny in ${city}`,
});

/** Four turns of a support chat: plain answers and a tool call, the same on every session. */
const SCRIPT = [
  [say('m1', 'Hello! How can I help?')],
  [call('f1', 'get_weather', { city: 'Paris' })],
  [say('m2', 'It is sunny in Paris.')],
  [say('m3', 'You asked about Paris.')],
  [say('m4', 'Bye!')],
];
const TURNS = ['Hi', 'Weather in Paris?', 'What did I ask?', 'Thanks'];

/** Runs the script through the Agents SDK's runner with `session`; returns what the model saw. */
async function converse(session: Session) {
  const model = new ScriptedModel(SCRIPT);
  const runner = new Runner({ modelProvider: new ScriptedProvider(model) });
  const agent = new Agent({ name: 'support', instructions: 'Be brief.', tools: [weather] });
  const outputs: unknown[] = [];
  const snapshots: AgentInputItem[][] = [];
  for (const input of TURNS) {
    const result = await runner.run(agent, input, { session });
    outputs.push(result.finalOutput);
    snapshots.push(await session.getItems());
  }
  return { inputs: model.inputs, outputs, snapshots };
}

/** The Agents SDK session on one Cairn store, compared with `MemorySession`. */
export function describeSession(s: TestStoreKind): void {
  describe.skipIf(Boolean(s.skip))(`@cairn/openai-agents on ${s.name}`, () => {
    let store: Store;
    beforeAll(async () => {
      store = await s.create();
    });
    afterAll(async () => {
      if (store) await s.destroy(store);
    });

    it('run() over several turns stores and replays exactly what MemorySession does', async () => {
      const cairn = new CairnSession({ store, resourceId: 'user-1' });
      const mine = await converse(cairn);
      const reference = await converse(new MemorySession());
      expect(mine.outputs).toEqual([
        'Hello! How can I help?',
        'It is sunny in Paris.',
        'You asked about Paris.',
        'Bye!',
      ]);
      expect(mine.outputs).toEqual(reference.outputs);
      // What the model was sent on every call (history included), and the items after every turn.
      expect(mine.inputs).toEqual(reference.inputs);
      expect(mine.snapshots).toEqual(reference.snapshots);
      expect(mine.snapshots.at(-1)!.length).toBe(10);
      // A new session object on the same id (a reload) reads the same items.
      const again = new CairnSession({ store, sessionId: await cairn.getSessionId() });
      expect(await again.getItems()).toEqual(reference.snapshots.at(-1));
      const all = reference.snapshots.at(-1)!;
      for (const limit of [0, 1, 3, 10, 50])
        expect(await again.getItems(limit)).toEqual(limit === 0 ? [] : all.slice(-limit));
    });

    it('addItems, popItem, getItems(limit) and clearSession answer as MemorySession does', async () => {
      const cairn = new CairnSession({ store });
      const memory = new MemorySession();
      const item = (i: number): AgentInputItem =>
        i % 3 === 0
          ? { role: 'user', content: `question ${i}` }
          : i % 3 === 1
            ? {
                type: 'message',
                role: 'assistant',
                status: 'completed',
                content: [{ type: 'output_text', text: `answer ${i}` }],
              }
            : {
                type: 'function_call_result',
                name: 'lookup',
                callId: `c${i}`,
                status: 'completed',
                output: { type: 'text', text: `r${i}` },
              };
      const both = async <T>(fn: (s: Session) => Promise<T>) => {
        const [a, b] = [await fn(cairn), await fn(memory)];
        expect(a).toEqual(b);
        return a;
      };
      await both((s) => s.popItem());
      await both((s) => s.getItems());
      await both((s) => s.addItems([item(0), item(1), item(2)]));
      await both((s) => s.addItems([]));
      await both((s) => s.addItems([item(3)]));
      for (const limit of [undefined, 0, 1, 2, 4, 9]) await both((s) => s.getItems(limit));
      expect(await both((s) => s.popItem())).toEqual(item(3));
      expect(await both((s) => s.popItem())).toEqual(item(2));
      await both((s) => s.addItems([item(4), item(5)]));
      await both((s) => s.getItems());
      await both((s) => s.clearSession());
      await both((s) => s.getItems());
      await both((s) => s.popItem());
      await both((s) => s.addItems([item(6)]));
      await both((s) => s.popItem());
      await both((s) => s.getItems());
      await both((s) => s.addItems([item(7), item(8)]));
      await both((s) => s.getItems(1));
    });

    it('popItem moves the head back; the popped item stays, marked by the checkpoint "popped"', async () => {
      const session = new CairnSession({ store });
      await session.addItems([
        { role: 'user', content: 'a' },
        { role: 'user', content: 'b' },
      ]);
      const thread = await session.openThread();
      const [, b] = await thread.history();
      expect(await session.popItem()).toEqual({ role: 'user', content: 'b' });
      expect((await thread.history()).map((m) => m.data)).toEqual([{ role: 'user', content: 'a' }]);
      expect(thread.branchName).toBe('main');
      const popped = await store.getCheckpoint(thread.id, POPPED_CHECKPOINT);
      expect(popped?.messageId).toBe(b!.id);
      expect((await store.getMessage(b!.id))?.data).toEqual({ role: 'user', content: 'b' });
      // Popping the only item left starts an empty branch; that item is marked too.
      const [a] = await thread.history();
      expect(await session.popItem()).toEqual({ role: 'user', content: 'a' });
      expect(await session.getItems()).toEqual([]);
      expect((await store.getCheckpoint(thread.id, POPPED_CHECKPOINT))?.messageId).toBe(a!.id);
      await thread.close();
    });

    it('clearSession starts an empty branch; the old one keeps its items', async () => {
      const session = new CairnSession({ store });
      await session.addItems([{ role: 'user', content: 'kept' }]);
      await session.clearSession();
      expect(await session.getItems()).toEqual([]);
      const thread = await session.openThread();
      const branches = await thread.branches();
      expect(branches.map((b) => [b.name, b.isActive])).toEqual([
        ['main', false],
        ['main-v2', true],
      ]);
      expect((await store.getChain(branches[0]!.headMessageId!)).map((m) => m.data)).toEqual([
        { role: 'user', content: 'kept' },
      ]);
      await thread.close();
    });

    it('120 clearSession/addItems and popItem cycles all succeed; branch names stay short and unique', async () => {
      const session = new CairnSession({ store });
      const made: string[] = [];
      const active = async () => {
        const thread = await session.openThread();
        made.push(thread.branchName);
        await thread.close();
      };
      for (let i = 0; i < 120; i++) {
        await session.addItems([{ role: 'user', content: `clear ${i}` }]);
        await session.clearSession();
        await active();
        // Popping the only item starts an empty branch too.
        await session.addItems([{ role: 'user', content: `pop ${i}` }]);
        expect(await session.popItem()).toEqual({ role: 'user', content: `pop ${i}` });
        await active();
      }
      expect(made).toEqual(Array.from({ length: 240 }, (_, i) => `main-v${i + 2}`));
      expect(await session.getItems()).toEqual([]);
      await session.addItems([{ role: 'user', content: 'still works' }]);
      expect(await session.getItems()).toEqual([{ role: 'user', content: 'still works' }]);
    }, 180_000);

    it('a session acting for another owner is NOT_FOUND on every call; nothing is read or written', async () => {
      const sessionId = `support-${Math.random().toString(36).slice(2)}`;
      const alice = new CairnSession({ store, sessionId, resourceId: 'alice' });
      await alice.addItems([{ role: 'user', content: 'alice asks' }]);
      const notFound = `NOT_FOUND: session "${sessionId}" not found`;
      // Bob (or a caller acting for no owner) who knows the id: no read, no append, no re-point.
      for (const resourceId of ['bob', null]) {
        const other = new CairnSession({ store, sessionId, resourceId });
        expect(await code(other.getItems())).toBe(notFound);
        expect(await code(other.addItems([{ role: 'user', content: 'forged' }]))).toBe(notFound);
        expect(await code(other.popItem())).toBe(notFound);
        expect(await code(other.clearSession())).toBe(notFound);
        expect(await code(other.openThread())).toBe(notFound);
      }
      expect(await alice.getItems()).toEqual([{ role: 'user', content: 'alice asks' }]);
      const thread = await alice.openThread();
      expect((await thread.branches()).map((b) => b.name)).toEqual(['main']);
      expect(await store.getCheckpoint(sessionId, POPPED_CHECKPOINT)).toBeNull();
      await thread.close();
      // Without a resourceId nothing is checked (code that checked already).
      expect(await new CairnSession({ store, sessionId }).getItems()).toHaveLength(1);
      // The first write creates the thread with the session's resourceId as its owner.
      const carol = new CairnSession({ store, resourceId: 'carol' });
      await carol.addItems([{ role: 'user', content: 'hi' }]);
      expect((await store.getThread(await carol.getSessionId()))?.resourceId).toBe('carol');
    });

    it('concurrent addItems from two session objects lose nothing and keep each batch together', async () => {
      const a = new CairnSession({ store });
      const b = new CairnSession({ store, sessionId: await a.getSessionId() });
      const batch = (who: string, i: number): AgentInputItem[] => [
        { role: 'user', content: `${who}${i} q` },
        { role: 'user', content: `${who}${i} r` },
      ];
      await Promise.all(
        Array.from({ length: 5 }, (_, i) => [
          a.addItems(batch('a', i)),
          b.addItems(batch('b', i)),
        ]).flat(),
      );
      const items = (await a.getItems()).map((x) => (x as { content: string }).content);
      expect(items).toHaveLength(20);
      for (let k = 0; k < 20; k += 2) expect(items[k + 1]).toBe(items[k]!.replace(' q', ' r'));
      expect(new Set(items).size).toBe(20);
    });

    it('concurrent popItem calls each pop a different item (a lost race pops the next one)', async () => {
      const a = new CairnSession({ store });
      const b = new CairnSession({ store, sessionId: await a.getSessionId() });
      await a.addItems(Array.from({ length: 6 }, (_, i) => ({ role: 'user', content: `${i}` })));
      const popped = await Promise.all([a.popItem(), b.popItem(), a.popItem(), b.popItem()]);
      const contents = popped.map((x) => (x as { content: string }).content);
      expect(contents.sort()).toEqual(['2', '3', '4', '5']);
      expect(await a.getItems()).toEqual([
        { role: 'user', content: '0' },
        { role: 'user', content: '1' },
      ]);
    });

    it('rejects an item that is not JSON, naming its position, before writing', async () => {
      const session = new CairnSession({ store });
      await session.addItems([{ role: 'user', content: 'ok' }]);
      expect(
        await code(
          session.addItems([
            { role: 'user', content: 'fine' },
            { role: 'user', content: 'bad', providerData: { at: new Date() } } as AgentInputItem,
          ]),
        ),
      ).toBe('INVALID_ARGUMENT: items[1].providerData.at: an instance of Date is not plain JSON');
      expect(await code(session.addItems([null as never]))).toBe(
        'INVALID_ARGUMENT: items[0] must be an object',
      );
      expect(await code(session.addItems('x' as never))).toMatch(/^INVALID_ARGUMENT/);
      expect(await code(session.getItems(1.5))).toMatch(
        /^INVALID_ARGUMENT: limit must be an integer/,
      );
      expect(await session.getItems()).toEqual([{ role: 'user', content: 'ok' }]);
      expect(
        await code(Promise.resolve().then(() => new CairnSession({ store, maxRetries: 1.5 }))),
      ).toMatch(/^INVALID_ARGUMENT: maxRetries must be an integer >= 0/);
      // undefined-valued keys are left out, as JSON does.
      await session.addItems([{ role: 'user', content: 'x', providerData: undefined }]);
      expect((await session.getItems(1))[0]).toStrictEqual({ role: 'user', content: 'x' });
    });

    it('a "__proto__" key in an item is data: stored, read back exactly, and later writes work', async () => {
      const session = new CairnSession({ store });
      const item = JSON.parse('{"role": "user", "content": "x", "__proto__": {"isAdmin": true}}');
      const call = JSON.parse(
        '{"type": "function_call", "callId": "c1", "name": "lookup", "arguments": "{}", "providerData": {"__proto__": []}}',
      );
      await session.addItems([item, call]);
      const [read, readCall] = await session.getItems();
      expect([read, readCall]).toEqual([item, call]);
      expect(Object.keys(read!).sort()).toEqual(['__proto__', 'content', 'role']);
      expect(Object.getPrototypeOf(read)).toBe(Object.prototype);
      await session.addItems([{ role: 'user', content: 'next' }]);
      expect(await session.popItem()).toEqual({ role: 'user', content: 'next' });
      expect(await session.getItems()).toEqual([item, call]);
      expect(({} as { isAdmin?: unknown }).isAdmin).toBeUndefined();
      // Another item the store would refuse is named by its place in addItems' list.
      expect(
        await code(
          session.addItems([
            { role: 'user', content: 'fine' },
            JSON.parse('{"role": "user", "\\ud83d": 1}'),
          ]),
        ),
      ).toBe(
        'INVALID_ARGUMENT: items[1].\ud83d: the key holds a lone surrogate (U+D83D) at position 0; stored text cannot',
      );
    });
  });
}
