import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineState, field, reducers } from '@cairn/core';
import type { Store } from '@cairn/store';
import { createSqliteStore } from '@cairn/store-sqlite';
import { openThread } from '@cairn/thread';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { Annotation, END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { compare, comparisonTable, median, type Suite } from '../harness.js';

const TURNS = 1000;
const MARKS = [100, 500, 1000];

/** ~500 bytes of text for turn i. */
const text = (i: number, who: string) =>
  `${who} ${i}: ${'lorem ipsum dolor sit amet, consectetur adipiscing elit '.repeat(10)}`.slice(
    0,
    500,
  );

const dbBytes = (path: string) =>
  statSync(path).size + (existsSync(`${path}-wal`) ? statSync(`${path}-wal`).size : 0);
const mb = (bytes: number) => (bytes / 1e6).toFixed(2);
const ms = (x: number) => (x >= 100 ? x.toFixed(0) : x.toFixed(2));

const Chat = defineState({
  turn: field<number>({ default: () => 0 }),
  lastTopic: field<string>(),
});

interface Growth {
  bytes: Map<number, number>;
  perTurnMs: number[];
}

/** One ~500-byte user message, one ~500-byte reply and a small state update per turn. */
async function cairnGrowth(dir: string): Promise<Growth> {
  const path = join(dir, 'cairn.db');
  const store = createSqliteStore({ path });
  const thread = await openThread(store, { schema: Chat });
  const bytes = new Map<number, number>();
  const perTurnMs: number[] = [];
  for (let i = 1; i <= TURNS; i++) {
    const t0 = performance.now();
    thread.add({ role: 'user', data: { text: text(i, 'user') } });
    await thread.save();
    thread.add({ role: 'assistant', data: { text: text(i, 'assistant') } });
    await thread.save();
    await thread.update({ turn: i, lastTopic: `topic ${i % 17}` });
    perTurnMs.push(performance.now() - t0);
    if (MARKS.includes(i)) bytes.set(i, dbBytes(path));
  }
  await thread.close();
  await store.close();
  return { bytes, perTurnMs };
}

/** The same conversation in a LangGraph.js StateGraph whose node appends the reply, on SqliteSaver. */
async function langGraphGrowth(dir: string): Promise<Growth> {
  const path = join(dir, 'langgraph.db');
  const saver = SqliteSaver.fromConnString(path);
  const State = Annotation.Root({ ...MessagesAnnotation.spec, turn: Annotation<number> });
  const graph = new StateGraph(State)
    .addNode('reply', (s: typeof State.State) => ({
      messages: [new AIMessage(text(s.turn, 'assistant'))],
      turn: s.turn,
    }))
    .addEdge(START, 'reply')
    .addEdge('reply', END)
    .compile({ checkpointer: saver });
  const bytes = new Map<number, number>();
  const perTurnMs: number[] = [];
  const config = { configurable: { thread_id: 'bench' } };
  for (let i = 1; i <= TURNS; i++) {
    const t0 = performance.now();
    await graph.invoke({ messages: [new HumanMessage(text(i, 'user'))], turn: i }, config);
    perTurnMs.push(performance.now() - t0);
    if (MARKS.includes(i)) bytes.set(i, dbBytes(path));
  }
  (saver as unknown as { db?: { close(): void } }).db?.close();
  return { bytes, perTurnMs };
}

/** Counts the bytes of every state commit handed to the store (update plus snapshot). */
function countingStateBytes(store: Store): {
  store: Store;
  bytes: () => number;
  snapshots: () => number;
} {
  let bytes = 0;
  let snapshots = 0;
  const wrapped = new Proxy(store, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver);
      if (prop === 'appendStateCommit') {
        return (commit: Parameters<Store['appendStateCommit']>[0], expected: number) => {
          bytes += JSON.stringify(commit.update).length;
          if (commit.snapshot) {
            bytes += JSON.stringify(commit.snapshot).length;
            snapshots++;
          }
          return target.appendStateCommit(commit, expected);
        };
      }
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  return { store: wrapped, bytes: () => bytes, snapshots: () => snapshots };
}

const Big = defineState({
  docs: field<Record<string, string>>({ reducer: reducers.mergeRecord, default: () => ({}) }),
});

const suite: Suite = {
  id: 'thread',
  title: '@cairn/thread: growth, state size and rewind',
  async run(log) {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-thread-'));
    try {
      // ---------------------------------------------------------------- growth
      log(`${TURNS}-turn conversation on Cairn SQLite`);
      const cairn = await cairnGrowth(dir);
      log(
        `${TURNS}-turn conversation on LangGraph.js + SqliteSaver (slow: it stores the whole message list per checkpoint)`,
      );
      const lg = await langGraphGrowth(dir);
      const head = (g: Growth) => median(g.perTurnMs.slice(0, 50));
      const tail = (g: Growth) => median(g.perTurnMs.slice(TURNS - 50));
      const growthRows = [
        '| | Cairn (SQLite) | LangGraph.js (SqliteSaver) | Cairn / LangGraph | target |',
        '| --- | ---: | ---: | ---: | --- |',
        ...MARKS.map((m) => {
          const c = cairn.bytes.get(m)!;
          const l = lg.bytes.get(m)!;
          const target = m === TURNS ? `<= 0.1x: ${c <= l / 10 ? 'met' : '**missed**'}` : '';
          return `| database bytes (file + WAL) at ${m} turns | ${mb(c)} MB | ${mb(l)} MB | ${(c / l).toFixed(4)}x | ${target} |`;
        }),
        `| median ms per turn, turns 1-50 | ${ms(head(cairn))} | ${ms(head(lg))} | ${(head(cairn) / head(lg)).toFixed(3)}x | |`,
        `| median ms per turn, turns 951-1000 | ${ms(tail(cairn))} | ${ms(tail(lg))} | ${(tail(cairn) / tail(lg)).toFixed(3)}x | |`,
        `| end / start (951-1000 over 1-50) | ${(tail(cairn) / head(cairn)).toFixed(2)}x | ${(tail(lg) / head(lg)).toFixed(2)}x | | Cairn <= 1.5x: ${tail(cairn) / head(cairn) <= 1.5 ? 'met' : '**missed**'} |`,
      ];

      // ---------------------------------------------------------------- 1 MB state
      log('1 MB state receiving 1,000 updates of ~200 bytes');
      const stateStore = createSqliteStore({ path: join(dir, 'state.db') });
      const counted = countingStateBytes(stateStore);
      const big = await openThread(counted.store, { schema: Big });
      const docs: Record<string, string> = {};
      for (let i = 0; i < 5000; i++)
        docs[`d${String(i).padStart(5, '0')}`] = `${'x'.repeat(180)}${i}`;
      await big.update({ docs });
      const stateSize = JSON.stringify(big.state).length;
      const before = counted.bytes();
      const beforeSnaps = counted.snapshots();
      for (let i = 0; i < 1000; i++)
        await big.update({ docs: { [`u${i}`]: `${'y'.repeat(190)}${i}` } });
      const written = counted.bytes() - before;
      const snaps = counted.snapshots() - beforeSnaps;
      const fullEvery = 1000 * stateSize; // the state grows a little; this is the lower bound of full writes
      const snapshotText = JSON.stringify(big.state);
      const read = await compare({
        name: `read the state after 1,000 updates (open the thread)`,
        baseline: {
          name: `JSON.parse of one ${mb(snapshotText.length)} MB snapshot`,
          run: () => JSON.parse(snapshotText),
        },
        subject: {
          name: 'openThread',
          run: async () => {
            const t = await openThread(stateStore, { schema: Big, threadId: big.id });
            await t.close();
            return t.state;
          },
        },
        runs: 9,
      });
      const stateRows = [
        '| | value |',
        '| --- | ---: |',
        `| state size | ${mb(stateSize)} MB |`,
        `| bytes handed to the store for 1,000 updates (updates + ${snaps} snapshots) | ${mb(written)} MB |`,
        `| writing the full state on every update | ${mb(fullEvery)} MB |`,
        `| ratio (target <= 10%) | ${((100 * written) / fullEvery).toFixed(2)}% ${written <= fullEvery / 10 ? 'met' : '**missed**'} |`,
      ];
      await big.close();
      await stateStore.close();

      // ---------------------------------------------------------------- rewind
      log('rewind on a 10,000-message thread, 110 rewinds');
      const rwStore = createSqliteStore({ path: join(dir, 'rewind.db') });
      const rw = await openThread(rwStore, { schema: Chat });
      const ids: string[] = [];
      for (let b = 0; b < 100; b++) {
        rw.add(
          Array.from({ length: 100 }, (_, i) => ({
            role: i % 2 ? 'assistant' : 'user',
            data: { text: text(b * 100 + i, 'm') },
          })),
        );
        ids.push(...(await rw.save()).map((m) => m.id));
        await rw.update({ turn: b, lastTopic: `block ${b}` });
      }
      const rewindMs: number[] = [];
      let seed = 42;
      const rand = () => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed / 2 ** 31;
      };
      for (let r = 0; r < 110; r++) {
        const target = ids[Math.floor(rand() * ids.length)]!;
        const t0 = performance.now();
        await rw.rewind(target);
        rewindMs.push(performance.now() - t0);
        await rw.switchBranch('main');
      }
      const branches = (await rw.branches()).length;
      await rw.close();
      await rwStore.close();
      const first = median(rewindMs.slice(0, 10));
      const last = median(rewindMs.slice(100));
      const rewindRows = [
        '| | median ms |',
        '| --- | ---: |',
        `| rewinds 1-10 (1-10 branches before) | ${ms(first)} |`,
        `| rewinds 101-110 (after 100 earlier rewinds) | ${ms(last)} |`,
        `| all 110 | ${ms(median(rewindMs))} |`,
        `| last / first (must not grow with branches) | ${(last / first).toFixed(2)}x |`,
      ];

      return {
        markdown: [
          `### Thread growth: ${TURNS} turns against LangGraph.js`,
          '',
          'Each turn: one ~500-byte user message, one ~500-byte reply, a small state update. Cairn:',
          '`save()` of the user message, `save()` of the reply, `update({ turn, lastTopic })` on',
          '`createSqliteStore` (WAL). LangGraph.js 1.7.3: `StateGraph` over `MessagesAnnotation` plus a',
          '`turn` channel, one node appending the reply, `SqliteSaver` on a file (better-sqlite3 12).',
          '',
          growthRows.join('\n'),
          '',
          'LangGraph.js writes the whole message list into each checkpoint, so its file grows with',
          'the square of the turns; Cairn stores each message once and each state commit as its update.',
          '',
          '### A 1 MB state receiving 1,000 updates of ~200 bytes',
          '',
          stateRows.join('\n'),
          '',
          comparisonTable([read]),
          '',
          'Bytes are the JSON of every commit handed to `appendStateCommit` (update, plus the',
          'snapshot when the size-aware policy writes one: every 50 commits here, since 50 small',
          'updates never outweigh a 1 MB snapshot). Reading is `openThread`: the latest snapshot plus',
          'the commits after it, replayed through the reducers.',
          '',
          `### rewind on a 10,000-message thread (SQLite, ${branches} branches at the end)`,
          '',
          rewindRows.join('\n'),
          '',
          "Each rewind goes to a random message of `main` (then `switchBranch('main')`, untimed): it",
          'reads the state as of that message, lists branches for the name, and creates the branch with',
          'its forked state in one transaction.',
        ].join('\n'),
      };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
export default suite;
