import { mkdtempSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createChatStore } from '@cairn/ai-sdk';
import type { Store } from '@cairn/store';
import { createSqliteStore } from '@cairn/store-sqlite';
import type { UIMessage } from 'ai';
import { type Comparison, compare, comparisonTable, type Suite } from '../harness.js';

/** A turn's messages as useChat holds them: ~300 bytes of text, a step-start part on replies. */
function turn(i: number): UIMessage[] {
  const words = 'stones stacked by hikers mark the trail across the ridge '.repeat(5);
  return [
    { id: `u${i}`, role: 'user', parts: [{ type: 'text', text: `Question ${i}: ${words}` }] },
    {
      id: `a${i}`,
      role: 'assistant',
      metadata: { model: 'mock', tokens: 60 + (i % 40) },
      parts: [
        { type: 'step-start' },
        { type: 'text', text: `Answer ${i}: ${words}`, state: 'done' },
      ],
    },
  ];
}

/** The store, counting the JSON bytes of every message data handed to it (in transactions too). */
function countingWrites(store: Store, count: (bytes: number) => void): Store {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'addMessages') {
        return (messages: Parameters<Store['addMessages']>[0]) => {
          for (const m of messages) count(JSON.stringify(m.data).length);
          return target.addMessages(messages);
        };
      }
      if (prop === 'transaction') {
        return <T>(fn: (tx: Store) => Promise<T>) =>
          target.transaction((tx) => fn(countingWrites(tx, count)));
      }
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

const kb = (bytes: number) => (bytes / 1024).toFixed(1);

const suite: Suite = {
  id: 'chat',
  title: '@cairn/ai-sdk: saving and loading a chat (SQLite file)',
  async run(log) {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-chat-'));
    const rows: Comparison[] = [];
    const bytesRows: string[] = [];
    try {
      const sqlite = createSqliteStore({ path: join(dir, 'chats.db') });
      let written = 0;
      const chats = createChatStore({
        store: countingWrites(sqlite, (bytes) => {
          written += bytes;
        }),
      });

      for (const n of [1000, 10_000]) {
        log(`building a ${n}-message chat`);
        const chatId = await chats.createChat();
        let list: UIMessage[] = [];
        for (let i = 0; list.length < n; i += 500) {
          for (let k = i; k < i + 500 && list.length < n; k++) list.push(...turn(k));
          await chats.saveChat({ chatId, messages: list });
        }
        let next = n;
        const file = join(dir, `${chatId}.json`);
        // Each save: the client's list plus one new question and its answer (the baseline
        // writes the list as it stands, the same length give or take one turn).
        const grow = () => {
          list = [...list, ...turn(next++)];
        };
        const savedBytes: number[] = [];
        rows.push(
          await compare({
            name: `save after one turn (2 new messages), N = ${n.toLocaleString('en')}`,
            baseline: {
              name: "the AI SDK guide's file store: JSON.stringify(messages, null, 2) + writeFile",
              run: () => writeFile(file, JSON.stringify(list, null, 2)),
            },
            subject: {
              name: 'saveChat',
              before: () => {
                grow();
                written = 0;
              },
              run: () => chats.saveChat({ chatId, messages: list }),
              after: () => {
                savedBytes.push(written);
              },
            },
            runs: 15,
            warmup: 3,
            target: { maxRatio: 1 / 20, label: '<= 1/20' },
          }),
        );
        const fileBytes = JSON.stringify(list, null, 2).length;
        const newBytes = JSON.stringify(list.slice(-2)).length;
        bytesRows.push(
          `| ${n.toLocaleString('en')} | ${kb(fileBytes)} KB | ${kb(Math.max(...savedBytes))} KB (max of ${savedBytes.length} saves) | ${kb(newBytes)} KB |`,
        );
        if (n === 10_000) {
          const head = (await sqlite.getActiveBranch(chatId))!.headMessageId!;
          rows.push(
            await compare({
              name: `load the last 100 messages of a ${list.length.toLocaleString('en')}-message chat`,
              baseline: {
                name: 'store.getChain(head, { limit: 100 })',
                run: () => sqlite.getChain(head, { limit: 100 }),
              },
              subject: {
                name: 'loadChat(chatId, { limit: 100 })',
                run: () => chats.loadChat(chatId, { limit: 100 }),
              },
              runs: 21,
              warmup: 3,
              target: { maxRatio: 2 },
            }),
          );
        }
      }
      await sqlite.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const markdown = [
      'A chat of N messages (~400 bytes each as JSON) on a SQLite file; each save is the list the',
      "client sent plus one new question and answer, as `toUIMessageStreamResponse`'s `onFinish`",
      "hands it over. The baseline re-writes the whole list, as the AI SDK's persistence guide",
      'does, in the same run. A save reads the active branch and its head message, makes one pass',
      'over the list (the shape of every message; JSON and unique ids for the new ones), and writes',
      'the new messages and moves the head in one transaction; no part of the stored branch is read.',
      '`loadChat` reads the active branch, then the same `getChain`.',
      '',
      comparisonTable(rows),
      '',
      'Bytes written per save (message JSON handed to the store, against the file the guide re-writes):',
      '',
      '| N | file re-written | saveChat writes | the 2 new messages |',
      '| ---: | ---: | ---: | ---: |',
      ...bytesRows,
      '',
      `Load average (1 min) at the end of the run: ${os.loadavg()[0]!.toFixed(1)}, on ${os.cpus().length} cores shared with other work.`,
    ].join('\n');
    return { markdown };
  },
};

export default suite;
