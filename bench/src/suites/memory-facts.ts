/**
 * Issue 28's script of facts on the SQLite store with the default (hashing) embedder and
 * the default recall mode (hybrid): 1,000 facts × 5 dated revisions each, then the
 * current value at rank 1, `asOf` at sampled past instants, and branch-scoped facts on a
 * branching conversation recalled from every branch. The one time figure is the cost of
 * naming a branch: a recall with `branch` against the same recall without.
 */
import type { Message } from '@cairn/core';
import { createMemory } from '@cairn/memory';
import type { Store } from '@cairn/store';
import { createSqliteStore } from '@cairn/store-sqlite';
import { compare, comparisonTable, type Suite } from '../harness.js';
import { rng as seeded } from '../random.js';

/** An integer in [0, n), from a seeded generator. */
type Int = (n: number) => number;

const FACTS = 1_000;
const REVISIONS = 5;
const DAY = 86_400_000;
const SYLLABLES = ['ka', 'bo', 'ri', 'ton', 'mel', 'zu', 'fa', 'dor', 'li', 'quen', 'sa', 'vik'];
const CITIES = ['Paris', 'Berlin', 'Oslo', 'Lisbon', 'Kyoto', 'Lima', 'Quito', 'Accra', 'Perth'];

/** `n` people with distinct made-up names, each moving `revisions - 1` times from 2020 on. */
function factScript(n: number, int: Int) {
  return Array.from({ length: n }, (_, i) => {
    const name = [i % 12, Math.floor(i / 12) % 12, Math.floor(i / 144) % 12]
      .map((k) => SYLLABLES[k]!)
      .join('');
    const proper = name[0]!.toUpperCase() + name.slice(1);
    let at = Date.UTC(2020, 0, 1) + int(365) * DAY;
    return {
      name: proper,
      revisions: Array.from({ length: REVISIONS }, (_, k) => {
        if (k > 0) at += (30 + int(60)) * DAY;
        return { text: `${proper} lives in ${CITIES[(i + k) % CITIES.length]}`, validFrom: at };
      }),
    };
  });
}

const pct = (n: number, of: number) => `${((100 * n) / of).toFixed(1)}% (${n} of ${of})`;

/** A chain of `n` messages after `parentId`, in one batch. */
async function say(store: Store, threadId: string, parentId: string | null, n: number) {
  const ids = Array.from({ length: n }, (_, i) => `${threadId}-${parentId ?? 'root'}-${i}`);
  return store.addMessages(
    ids.map((id, i) => ({
      id,
      threadId,
      parentId: i === 0 ? parentId : ids[i - 1]!,
      role: i % 2 ? 'assistant' : 'user',
      data: `turn ${i}`,
    })),
  );
}

const suite: Suite = {
  id: 'memory-facts',
  title: '@cairn/memory: 1,000 facts × 5 dated revisions, and branch-scoped facts',
  async run(log) {
    const store = createSqliteStore({ path: ':memory:' });
    const memory = createMemory({ store, agentId: 'assistant' });
    const next = seeded(28);
    const int: Int = (n) => Math.floor(next() * n);
    const script = factScript(FACTS, int);
    const t0 = performance.now();
    for (const { revisions } of script) {
      const [first, ...later] = revisions;
      let m = await memory.remember({ text: first!.text, validFrom: first!.validFrom });
      for (const rev of later)
        m = await memory.supersede(m.id, { text: rev.text, validFrom: rev.validFrom });
    }
    const writeMs = performance.now() - t0;
    log(`${FACTS * REVISIONS} versions written in ${(writeMs / 1000).toFixed(1)} s`);
    const top = async (name: string, validAt?: number) =>
      (
        await memory.recall(`Where does ${name} live?`, {
          limit: 1,
          ...(validAt === undefined ? {} : { asOf: { validAt } }),
        })
      )[0]?.memory.content.text;
    let current = 0;
    let inside = 0;
    let boundary = 0;
    for (const { name, revisions } of script) {
      if ((await top(name)) === revisions.at(-1)!.text) current++;
      const k = int(REVISIONS - 1);
      const from = revisions[k]!.validFrom;
      const to = revisions[k + 1]!.validFrom;
      if ((await top(name, from + int(to - from))) === revisions[k]!.text) inside++;
      if ((await top(name, to)) === revisions[k + 1]!.text) boundary++;
    }
    log(`current ${current}, inside ${inside}, boundary ${boundary}`);

    // A conversation: main of 200 turns; 'early' forked at turn 50 (100 turns), 'late' at
    // turn 150 (50 turns), 'rewound': main rewound to turn 100. A branch-scoped fact on
    // every 4th turn of each branch's own messages.
    const { thread, branch: main } = await store.createThreadWithBranch({});
    const m = await say(store, thread.id, null, 200);
    await store.moveHead(main.id, null, m.at(-1)!.id);
    const e = await say(store, thread.id, m[50]!.id, 100);
    const l = await say(store, thread.id, m[150]!.id, 50);
    const branches = new Map<string, readonly Message[]>();
    branches.set(main.id, m);
    for (const [name, head, chain] of [
      ['early', e.at(-1)!, [...m.slice(0, 51), ...e]],
      ['late', l.at(-1)!, [...m.slice(0, 151), ...l]],
      ['rewound', m[100]!, m.slice(0, 101)],
    ] as const) {
      const b = await store.createBranch({ threadId: thread.id, name, headMessageId: head.id });
      branches.set(b.id, chain);
    }
    const facts: Array<{ id: string; messageId: string }> = [];
    for (const [own, branchId] of [
      [m, main.id],
      [e, [...branches.keys()][1]!],
      [l, [...branches.keys()][2]!],
    ] as const) {
      for (let i = 3; i < own.length; i += 4) {
        const f = await memory.remember({
          text: `secret ${facts.length}: the code word is ${CITIES[facts.length % CITIES.length]}`,
          source: { threadId: thread.id, branchId, messageIds: [own[i]!.id], branchScoped: true },
        });
        facts.push({ id: f.id, messageId: own[i]!.id });
      }
    }
    let hidden = 0;
    let leaked = 0;
    let shown = 0;
    let found = 0;
    for (const [branchId, chain] of branches) {
      const onChain = new Set(chain.map((x) => x.id));
      const hits = await memory.recall('the code word', {
        limit: 1000,
        mode: 'keyword',
        branch: { threadId: thread.id, branchId },
      });
      const got = new Set(hits.map((h) => h.memory.id));
      for (const f of facts) {
        if (onChain.has(f.messageId)) {
          shown++;
          if (got.has(f.id)) found++;
        } else {
          hidden++;
          if (got.has(f.id)) leaked++;
        }
      }
    }
    const other = await store.createThreadWithBranch({});
    const fromOther = await memory.recall('the code word', {
      limit: 1000,
      mode: 'keyword',
      branch: { threadId: other.thread.id },
    });
    const fromNone = await memory.recall('the code word', { limit: 1000, mode: 'keyword' });
    log(`branch-scoped: leaked ${leaked} of ${hidden}, found ${found} of ${shown}`);

    // The price of naming the branch: the same 50 recalls (hybrid, limit 10) with and without.
    const queries = Array.from({ length: 50 }, (_, i) => `Where does ${script[i * 7]!.name} live?`);
    const recallAll = (branchId?: string) => async () => {
      for (const q of queries)
        await memory.recall(q, {
          limit: 10,
          ...(branchId ? { branch: { threadId: thread.id, branchId } } : {}),
        });
    };
    const cost = await compare({
      name: `50 recalls (hybrid, limit 10) over ${FACTS * REVISIONS + facts.length} memories, naming the branch (main: 200 turns, ${facts.length} branch-scoped facts on the thread)`,
      baseline: { name: 'the same recalls naming no branch', run: recallAll() },
      subject: { name: 'recall with branch', run: recallAll(main.id) },
      runs: 9,
    });
    await store.close();

    const rows = [
      ['current value at rank 1 (recall, default mode)', pct(current, FACTS), '100%'],
      [
        '`asOf: { validAt }` on a sampled day inside a past revision: that revision at rank 1',
        pct(inside, FACTS),
        '100%',
      ],
      [
        '`asOf: { validAt }` at the first instant of the next revision: the next one at rank 1',
        pct(boundary, FACTS),
        '100%',
      ],
      [
        'branch-scoped facts recalled from a branch whose chain lacks their message',
        pct(leaked, hidden),
        '0%',
      ],
      [
        'branch-scoped facts recalled from a branch whose chain holds their message',
        pct(found, shown),
        '100%',
      ],
      [
        'branch-scoped facts recalled from another thread / naming no branch',
        `${fromOther.length} / ${fromNone.length} of ${facts.length}`,
        '0',
      ],
    ];
    const met = (row: string[]) => {
      const [, got, target] = row;
      return got!.startsWith(target === '0' ? '0 / 0' : `${target!.replace('%', '.0%')}`);
    };
    return {
      markdown: [
        `SQLite (in memory), hashing embedder (default, 384-d), \`createMemory\` defaults. ${FACTS} people each moving ${REVISIONS - 1} times (${FACTS * REVISIONS} versions written by \`remember\` + \`supersede\` in ${(writeMs / 1000).toFixed(1)} s); the query is \`Where does <name> live?\`. Branch-scoped facts: one every 4th turn of each branch's own messages on a thread with main (200 turns), a branch forked at turn 50, one at turn 150 and main rewound to turn 100; recalled (keyword, limit 1000) from each of the 4 branches.`,
        '',
        '| measure | measured | target | |',
        '| --- | ---: | ---: | --- |',
        ...rows.map((r) => `| ${r[0]} | ${r[1]} | ${r[2]} | ${met(r) ? 'met' : '**missed**'} |`),
        '',
        comparisonTable([cost]),
      ].join('\n'),
    };
  },
};

export default suite;
