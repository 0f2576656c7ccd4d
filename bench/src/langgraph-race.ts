/**
 * The race of the langgraph suites: one chat graph, the same turns on every saver, interleaved
 * turn by turn so a noisy machine slows every saver alike. Turns: `CAIRN_BENCH_LANGGRAPH_TURNS`
 * (default 1000).
 */
import os from 'node:os';
import { gzipSync } from 'node:zlib';
import type { BaseMessage } from '@langchain/core/messages';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import {
  type BaseCheckpointSaver,
  END,
  MessagesAnnotation,
  MessagesDeltaValue,
  START,
  StateGraph,
  StateSchema,
} from '@langchain/langgraph';
import type Database from 'better-sqlite3';
import type pg from 'pg';
import { median } from './harness.js';
import { prose } from './random.js';

export const TURNS = Number(process.env.CAIRN_BENCH_LANGGRAPH_TURNS ?? 1000);
export const MARKS = [TURNS / 10, TURNS / 2, TURNS].map(Math.round);
/**
 * The thread lengths at which ms per invoke is reported (those the run reaches): the mean of
 * the `WINDOW` turns ending there, so "at 10 turns" is what a thread's first ten turns cost.
 */
export const PER_INVOKE_AT = [10, 100, 1000].filter((n) => n <= TURNS);
const WINDOW = 10;
/** Mean ms per invoke of the `WINDOW` turns ending at turn `n`. */
const perInvokeAt = (perInvoke: number[], n: number) =>
  mean(perInvoke.slice(Math.max(0, n - WINDOW), n));
const count = (n: number) => n.toLocaleString('en-US');
/**
 * getStateHistory reads the whole thread as it is after this turn (default the last):
 * `CAIRN_BENCH_LANGGRAPH_HISTORY_AT`. SqliteSaver needs minutes for 1,000 turns (research: 251 s).
 */
const HISTORY_AT = Math.min(TURNS, Number(process.env.CAIRN_BENCH_LANGGRAPH_HISTORY_AT ?? TURNS));

/**
 * ~300 bytes of text: a turn (question and reply) is ~600 bytes. Different prose for every
 * message (see `prose`): a repeated phrase would let Postgres's TOAST compression shrink the
 * stock saver's whole-list blobs ~40x, which real chat text does not allow.
 */
const text = (i: number, who: 'user' | 'assistant') => {
  const head = `${who} ${i}: `;
  return (
    head + prose(Math.imul(i, 0x9e3779b1) ^ (who === 'user' ? 0x5eed : 0xa11ce), 300 - head.length)
  );
};

/** Turn `i`'s question. */
const question = (i: number, say = text) =>
  new HumanMessage({ id: `h-${i}`, content: say(i, 'user') });
/** The chat model's reply to a thread of `n` messages. */
const answer = (n: number, say = text) =>
  new AIMessage({ id: `ai-${n}`, content: say(n, 'assistant') });

/** The thread's message list after `turns` turns, as the chat graph builds it. */
export function threadMessages(turns: number, say = text): BaseMessage[] {
  const messages: BaseMessage[] = [];
  for (let i = 1; i <= turns; i++) {
    messages.push(question(i, say));
    messages.push(answer(messages.length, say));
  }
  return messages;
}

const mb = (bytes: number) => (bytes / 1e6).toFixed(2);
const ms = (x: number) => (x >= 100 ? x.toFixed(0) : x.toFixed(1));
/** A ratio as `0.47x`, or as `1/245` where two decimals would round it to nothing. */
const times = (x: number) => (x >= 0.1 ? `${x.toFixed(2)}x` : `1/${Math.round(1 / x)}`);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const cpuMs = (since: NodeJS.CpuUsage) => {
  const u = process.cpuUsage(since);
  return (u.user + u.system) / 1000;
};

function chatGraph(checkpointer: BaseCheckpointSaver, delta = false) {
  const reply = (messages: BaseMessage[]) => ({ messages: [answer(messages.length)] });
  if (delta) {
    return new StateGraph(new StateSchema({ messages: MessagesDeltaValue }))
      .addNode('agent', async (s: { messages: BaseMessage[] }) => reply(s.messages))
      .addEdge(START, 'agent')
      .addEdge('agent', END)
      .compile({ checkpointer });
  }
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (s) => reply(s.messages))
    .addEdge(START, 'agent')
    .addEdge('agent', END)
    .compile({ checkpointer });
}

export interface Subject {
  name: string;
  saver: BaseCheckpointSaver;
  delta?: boolean;
  /** Read the whole history at the last turn (false: not measured, to save the run's time). */
  history?: boolean;
  /** Bytes on disk now. */
  bytes(): Promise<number>;
  /** A fresh saver on the same data (another process), for the cold getState. */
  reopen(): Promise<BaseCheckpointSaver>;
  close(): Promise<void>;
}

interface Measured {
  bytes: Map<number, number>;
  perInvoke: number[];
  getState: number;
  getStateCold: number;
  /** The 1-minute load average when the race started and ended (the same for every subject). */
  load: [number, number];
  history: number | null;
  historyCpu: number | null;
  snapshots: number;
}

export function sqliteBytes(db: Database.Database): number {
  db.pragma('wal_checkpoint(TRUNCATE)');
  return (
    Number(db.pragma('page_count', { simple: true })) *
    Number(db.pragma('page_size', { simple: true }))
  );
}

export async function schemaBytes(client: pg.Client, schema: string): Promise<number> {
  const { rows } = await client.query(
    `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS b FROM pg_class c
     JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`,
    [schema],
  );
  return Number(rows[0].b);
}

/**
 * Where a Postgres schema's bytes are, per table: rows, the table's own pages (heap with its
 * TOAST), its indexes, and the total `schemaBytes` adds up; empty tables in one line.
 */
export async function schemaBreakdown(client: pg.Client, schema: string): Promise<string> {
  const { rows } = await client.query<{
    name: string;
    heap: string;
    indexes: string;
    total: string;
    rows: string;
  }>(
    `SELECT c.relname AS name, pg_table_size(c.oid)::bigint AS heap,
       pg_indexes_size(c.oid)::bigint AS indexes, pg_total_relation_size(c.oid)::bigint AS total,
       (xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM %I.%I', n.nspname, c.relname), false, true, '')))[1]::text AS rows
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY pg_total_relation_size(c.oid) DESC, c.relname`,
    [schema],
  );
  const kb = (b: string | number) => (Number(b) / 1024).toFixed(0);
  const lines = [
    '| table | rows | table KB (heap + TOAST) | indexes KB | total KB | bytes per row |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
  ];
  const empty = rows.filter((r) => Number(r.rows) === 0);
  for (const r of rows.filter((r) => Number(r.rows) > 0)) {
    lines.push(
      `| ${r.name} | ${r.rows} | ${kb(r.heap)} | ${kb(r.indexes)} | ${kb(r.total)} | ${(Number(r.total) / Number(r.rows)).toFixed(0)} |`,
    );
  }
  if (empty.length > 0) {
    const sum = (k: 'heap' | 'indexes' | 'total') => empty.reduce((a, r) => a + Number(r[k]), 0);
    lines.push(
      `| ${empty.length} empty tables (${empty.map((r) => r.name).join(', ')}) | 0 | ${kb(sum('heap'))} | ${kb(sum('indexes'))} | ${kb(sum('total'))} | |`,
    );
  }
  return lines.join('\n');
}

async function elapsed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** getState rounds on the saver that wrote the thread, and through a new instance each. */
const GET_STATE_ROUNDS = 9;
const FRESH_ROUNDS = 3;

const loadAverage = () => Number(os.loadavg()[0]!.toFixed(1));

export async function race(subjects: Subject[], log: (line: string) => void): Promise<Measured[]> {
  const graphs = subjects.map((s) => chatGraph(s.saver, s.delta));
  const config = { configurable: { thread_id: 'bench' } };
  const out: Measured[] = subjects.map(() => ({
    bytes: new Map(),
    perInvoke: [],
    getState: 0,
    getStateCold: 0,
    load: [loadAverage(), 0],
    history: null,
    historyCpu: null,
    snapshots: 0,
  }));
  log(`load average at the start: ${out[0]!.load[0]}`);
  for (let i = 1; i <= TURNS; i++) {
    for (let k = 0; k < subjects.length; k++) {
      const input = { messages: [question(i)] };
      const t0 = performance.now();
      await graphs[k]!.invoke(input, config);
      out[k]!.perInvoke.push(performance.now() - t0);
      if (MARKS.includes(i)) out[k]!.bytes.set(i, await subjects[k]!.bytes());
      if (i === HISTORY_AT && subjects[k]!.history !== false) {
        const t1 = performance.now();
        const c1 = process.cpuUsage();
        let n = 0;
        for await (const _ of graphs[k]!.getStateHistory(config)) n++;
        out[k]!.history = performance.now() - t1;
        out[k]!.historyCpu = cpuMs(c1);
        out[k]!.snapshots = n;
        log(
          `${subjects[k]!.name}: getStateHistory ${ms(out[k]!.history!)} ms (CPU ${ms(out[k]!.historyCpu!)} ms), ${n} snapshots`,
        );
      }
    }
    if (MARKS.includes(i)) {
      log(
        `turn ${i} bytes: ${subjects.map((s, k) => `${s.name} ${out[k]!.bytes.get(i)}`).join(', ')}`,
      );
    }
    if (PER_INVOKE_AT.includes(i)) {
      log(
        `turn ${i}, ms per invoke of turns ${Math.max(1, i - WINDOW + 1)}-${i}: ${subjects.map((s, k) => `${s.name} ${ms(perInvokeAt(out[k]!.perInvoke, i))}`).join(', ')}`,
      );
    }
    if (i % 100 === 0 || i === 50) {
      log(
        `turn ${i}: ${subjects.map((s, k) => `${s.name} ${ms(mean(out[k]!.perInvoke.slice(-50)))} ms`).join(', ')}`,
      );
    }
  }
  // Interleaved round by round, as the turns are; the median of each saver's rounds.
  const warm = subjects.map((): number[] => []);
  const cold = subjects.map((): number[] => []);
  for (let round = 0; round < GET_STATE_ROUNDS; round++) {
    for (let k = 0; k < subjects.length; k++) {
      warm[k]!.push(await elapsed(() => graphs[k]!.getState(config)));
    }
  }
  for (let round = 0; round < FRESH_ROUNDS; round++) {
    for (let k = 0; k < subjects.length; k++) {
      const fresh = chatGraph(await subjects[k]!.reopen(), subjects[k]!.delta);
      cold[k]!.push(await elapsed(() => fresh.getState(config)));
    }
  }
  const end = loadAverage();
  for (let k = 0; k < subjects.length; k++) {
    out[k]!.getState = median(warm[k]!);
    out[k]!.getStateCold = median(cold[k]!);
    out[k]!.load[1] = end;
    log(
      `${subjects[k]!.name}: getState ${ms(out[k]!.getState)} / fresh ${ms(out[k]!.getStateCold)} ms`,
    );
  }
  return out;
}

export function table(subjects: Subject[], results: Measured[]): string {
  const rows = [
    `| saver | MB at ${MARKS.join(' / ')} turns | ${MARKS[2]}/${MARKS[1]} bytes | ms per invoke at ${PER_INVOKE_AT.map(count).join(' / ')} turns (mean of the ${WINDOW} turns ending there) | ms per invoke, turns 1-50 → ${TURNS - 49}-${TURNS} | getState at ${TURNS} (warm / fresh instance) | getStateHistory, whole thread at ${HISTORY_AT} turns: wall (CPU of this process), snapshots |`,
    '| --- | --- | ---: | --- | --- | --- | --- |',
  ];
  subjects.forEach((s, k) => {
    const r = results[k]!;
    const history =
      r.history === null
        ? 'not measured'
        : `${ms(r.history)} ms (${ms(r.historyCpu!)} ms), ${r.snapshots}`;
    rows.push(
      `| ${s.name} | ${MARKS.map((m) => mb(r.bytes.get(m)!)).join(' / ')} | ${(r.bytes.get(MARKS[2]!)! / r.bytes.get(MARKS[1]!)!).toFixed(2)}x | ${PER_INVOKE_AT.map((n) => ms(perInvokeAt(r.perInvoke, n))).join(' / ')} | ${ms(mean(r.perInvoke.slice(0, 50)))} → ${ms(mean(r.perInvoke.slice(-50)))} | ${ms(r.getState)} / ${ms(r.getStateCold)} ms | ${history} |`,
    );
  });
  rows.push('');
  rows.push(
    `Load average (1 minute) at the start / end of this run: ${results[0]!.load[0]} / ${results[0]!.load[1]} on ${os.cpus().length} cores.`,
  );
  return rows.join('\n');
}

/** How much gzip shrinks the text of all the run's messages, one after the other. */
function gzipRatio(): number {
  const all = threadMessages(TURNS)
    .map((m) => String(m.content))
    .join('\n');
  return Buffer.byteLength(all) / gzipSync(all).length;
}

/** What the race does, with the compressibility of its text as measured in this run. */
export const description = (): string =>
  [
    `One \`StateGraph(MessagesAnnotation)\` chat agent with one node (a deterministic fake model), ${TURNS} turns`,
    'of a ~300-byte question and a ~300-byte reply, the savers interleaved turn by turn in one process.',
    'The text is seeded prose, different in every message: sentences of the 3,000 most common English',
    `words drawn by Zipf's law (gzip shrinks all ${(2 * TURNS).toLocaleString('en-US')} messages ${gzipRatio().toFixed(1)}x, as ordinary English text).`,
    "Bytes: the SQLite file after a WAL checkpoint, or every table of the saver's Postgres schema",
    `(\`pg_total_relation_size\`). getState: the median of ${GET_STATE_ROUNDS} at the last turn on the saver that wrote`,
    `the thread, and of ${FRESH_ROUNDS} through a new saver instance each, the savers taking turns round by round.`,
    `getStateHistory reads the whole thread as it is after turn ${HISTORY_AT},`,
    "one saver after the other; its CPU time is this process's (the SQLite savers run in it; a Postgres",
    "server's own work is not in it).",
  ].join('\n');

/**
 * The issue's targets, each checked against this run's figures: Cairn (the last subject) against
 * the stock saver (`base`) and, when given, LangGraph's delta mode (`delta`).
 */
export function targets(
  subjects: Subject[],
  results: Measured[],
  base: number,
  delta?: number,
): string {
  const cairn = results[results.length - 1]!;
  const b = results[base]!;
  const [, mid, last] = MARKS as [number, number, number];
  const stock = subjects[base]!.name;
  const lines: string[] = [];
  const check = (met: boolean, target: string, figures: string) =>
    lines.push(`- ${target}: **${met ? 'met' : 'not met'}** (${figures}).`);
  const bytes = cairn.bytes.get(last)! / b.bytes.get(last)!;
  check(
    bytes <= 1 / 200,
    `bytes ≤ 1/200 of ${stock}`,
    `1/${(1 / bytes).toFixed(0)} at ${last} turns`,
  );
  if (delta !== undefined) {
    const d = cairn.bytes.get(last)! / results[delta]!.bytes.get(last)!;
    check(d <= 1 / 2, `bytes ≤ 1/2 of ${subjects[delta]!.name}`, `${d.toFixed(2)}x`);
  }
  const growth = cairn.bytes.get(last)! / cairn.bytes.get(mid)!;
  check(
    growth <= 2.1,
    'linear (2x turns → ≤ 2.1x bytes)',
    `${growth.toFixed(2)}x from ${mid} to ${last} turns`,
  );
  const perInvoke = mean(cairn.perInvoke.slice(-50)) / mean(b.perInvoke.slice(-50));
  check(
    perInvoke <= 1,
    `ms per invoke at turns ${TURNS - 49}-${TURNS} ≤ ${stock}'s`,
    `${perInvoke.toFixed(2)}x`,
  );
  for (const n of PER_INVOKE_AT) {
    const at = perInvokeAt(cairn.perInvoke, n) / perInvokeAt(b.perInvoke, n);
    check(
      at <= 1,
      `ms per invoke at ${count(n)} turns (turns ${Math.max(1, n - WINDOW + 1)}-${n}) ≤ ${stock}'s`,
      `${at.toFixed(2)}x`,
    );
  }
  const getState = cairn.getState / b.getState;
  check(
    getState <= 1,
    `getState at ${TURNS} turns ≤ ${stock}'s`,
    `${getState.toFixed(2)}x warm, ${(cairn.getStateCold / b.getStateCold).toFixed(2)}x through a fresh instance`,
  );
  if (cairn.history !== null && b.history !== null) {
    const history = cairn.history / b.history;
    const at =
      HISTORY_AT === TURNS
        ? 'the whole thread'
        : `the whole thread at ${HISTORY_AT} turns, not ${TURNS}`;
    check(
      history <= 1 / 2,
      `getStateHistory over ${at} ≤ 1/2 of ${stock}'s time`,
      `${times(history)} wall, ${times(cairn.historyCpu! / b.historyCpu!)} CPU of this process`,
    );
  } else {
    lines.push(`- getStateHistory ≤ 1/2 of ${stock}'s time: not measured in this run.`);
  }
  return ['Targets (issues 12 and 26), against this run:', '', ...lines].join('\n');
}

export { mb };
