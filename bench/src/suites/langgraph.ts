/**
 * @cairn/langgraph against LangGraph.js's own savers, side by side in one run: one chat graph,
 * the same turns, interleaved turn by turn so a noisy machine slows every saver alike.
 *
 * SQLite: SqliteSaver 1.0.4, SqliteSaver with LangGraph's beta `MessagesDeltaValue`, CairnSaver
 * on a Cairn SQLite file. Postgres (the local server): PostgresSaver 1.0.5, CairnSaver on a Cairn
 * Postgres store. Turns: `CAIRN_BENCH_LANGGRAPH_TURNS` (default 1000).
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CairnSaver } from '@cairn/langgraph';
import { createPostgresStore } from '@cairn/store-postgres';
import { createSqliteStore } from '@cairn/store-sqlite';
import { AIMessage, type BaseMessage, HumanMessage } from '@langchain/core/messages';
import {
  type BaseCheckpointSaver,
  END,
  MessagesAnnotation,
  MessagesDeltaValue,
  START,
  StateGraph,
  StateSchema,
} from '@langchain/langgraph';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import Database from 'better-sqlite3';
import pg from 'pg';
import { median, type Suite } from '../harness.js';

const TURNS = Number(process.env.CAIRN_BENCH_LANGGRAPH_TURNS ?? 1000);
const MARKS = [TURNS / 10, TURNS / 2, TURNS].map(Math.round);
/** The whole history is read at this turn (SqliteSaver needs minutes at 1000 turns). */
const HISTORY_AT = Math.min(TURNS, 200);
const PG_URL = process.env.CAIRN_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** ~300 bytes of text: a turn (question and reply) is ~600 bytes. */
const text = (i: number, who: string) =>
  `${who} ${i}: ${'lorem ipsum dolor sit amet, consectetur adipiscing elit '.repeat(6)}`.slice(
    0,
    300,
  );

const mb = (bytes: number) => (bytes / 1e6).toFixed(2);
const ms = (x: number) => (x >= 100 ? x.toFixed(0) : x.toFixed(1));
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

function chatGraph(checkpointer: BaseCheckpointSaver, delta = false) {
  const reply = (messages: BaseMessage[]) => ({
    messages: [
      new AIMessage({ id: `ai-${messages.length}`, content: text(messages.length, 'assistant') }),
    ],
  });
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

interface Subject {
  name: string;
  saver: BaseCheckpointSaver;
  delta?: boolean;
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
  history: number;
  snapshots: number;
}

function sqliteBytes(db: Database.Database): number {
  db.pragma('wal_checkpoint(TRUNCATE)');
  return (
    Number(db.pragma('page_count', { simple: true })) *
    Number(db.pragma('page_size', { simple: true }))
  );
}

async function schemaBytes(client: pg.Client, schema: string): Promise<number> {
  const { rows } = await client.query(
    `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS b FROM pg_class c
     JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`,
    [schema],
  );
  return Number(rows[0].b);
}

async function timeIt(fn: () => Promise<unknown>, runs = 3): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await fn();
    xs.push(performance.now() - t0);
  }
  return median(xs);
}

async function race(subjects: Subject[], log: (line: string) => void): Promise<Measured[]> {
  const graphs = subjects.map((s) => chatGraph(s.saver, s.delta));
  const config = { configurable: { thread_id: 'bench' } };
  const out: Measured[] = subjects.map(() => ({
    bytes: new Map(),
    perInvoke: [],
    getState: 0,
    getStateCold: 0,
    history: 0,
    snapshots: 0,
  }));
  for (let i = 1; i <= TURNS; i++) {
    for (let k = 0; k < subjects.length; k++) {
      const input = { messages: [new HumanMessage({ id: `h-${i}`, content: text(i, 'user') })] };
      const t0 = performance.now();
      await graphs[k]!.invoke(input, config);
      out[k]!.perInvoke.push(performance.now() - t0);
      if (MARKS.includes(i)) out[k]!.bytes.set(i, await subjects[k]!.bytes());
      if (i === HISTORY_AT) {
        const t1 = performance.now();
        let n = 0;
        for await (const _ of graphs[k]!.getStateHistory(config)) n++;
        out[k]!.history = performance.now() - t1;
        out[k]!.snapshots = n;
      }
    }
    if (i % 100 === 0) {
      log(
        `turn ${i}: ${subjects.map((s, k) => `${s.name} ${ms(mean(out[k]!.perInvoke.slice(-50)))} ms`).join(', ')}`,
      );
    }
  }
  for (let k = 0; k < subjects.length; k++) {
    out[k]!.getState = await timeIt(() => graphs[k]!.getState(config));
    const fresh = chatGraph(await subjects[k]!.reopen(), subjects[k]!.delta);
    out[k]!.getStateCold = await timeIt(() => fresh.getState(config), 1);
  }
  return out;
}

function table(subjects: Subject[], results: Measured[], base: number): string {
  const rows = [
    `| saver | MB at ${MARKS.join(' / ')} turns | ${MARKS.at(-1)}/${MARKS[1]} bytes | ms per invoke, turns 1-50 → ${TURNS - 49}-${TURNS} | getState at ${TURNS} (warm / fresh instance) | getStateHistory at ${HISTORY_AT} turns (snapshots) |`,
    '| --- | --- | ---: | --- | --- | --- |',
  ];
  subjects.forEach((s, k) => {
    const r = results[k]!;
    rows.push(
      `| ${s.name} | ${MARKS.map((m) => mb(r.bytes.get(m)!)).join(' / ')} | ${(r.bytes.get(MARKS[2]!)! / r.bytes.get(MARKS[1]!)!).toFixed(2)}x | ${ms(mean(r.perInvoke.slice(0, 50)))} → ${ms(mean(r.perInvoke.slice(-50)))} | ${ms(r.getState)} / ${ms(r.getStateCold)} ms | ${ms(r.history)} ms (${r.snapshots}) |`,
    );
  });
  const cairn = results[results.length - 1]!;
  const b = results[base]!;
  const last = MARKS[2]!;
  rows.push('');
  rows.push(
    `Cairn / ${subjects[base]!.name}: bytes ${(cairn.bytes.get(last)! / b.bytes.get(last)!).toFixed(4)}x (1/${(b.bytes.get(last)! / cairn.bytes.get(last)!).toFixed(0)}), ` +
      `ms per invoke at turns ${TURNS - 49}-${TURNS} ${(mean(cairn.perInvoke.slice(-50)) / mean(b.perInvoke.slice(-50))).toFixed(2)}x, ` +
      `getState ${(cairn.getState / b.getState).toFixed(2)}x, getStateHistory ${(cairn.history / b.history).toFixed(2)}x.`,
  );
  return rows.join('\n');
}

const suite: Suite = {
  id: 'langgraph',
  title: '@cairn/langgraph: CairnSaver against SqliteSaver and PostgresSaver',
  async run(log) {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-langgraph-'));
    const admin = new pg.Client({ connectionString: PG_URL });
    const stamp = Date.now().toString(36);
    const schemas = [`bench_lg_saver_${stamp}`, `bench_lg_cairn_${stamp}`];
    try {
      // ------------------------------------------------------------------ SQLite
      const sqlite = (name: string, delta: boolean): Subject => {
        const path = join(dir, `${name}.db`);
        const saver = SqliteSaver.fromConnString(path);
        return {
          name: delta ? 'SqliteSaver + MessagesDeltaValue (beta)' : 'SqliteSaver 1.0.4',
          saver,
          delta,
          bytes: async () => sqliteBytes((saver as unknown as { db: Database.Database }).db),
          reopen: async () => SqliteSaver.fromConnString(path),
          close: async () => {
            (saver as unknown as { db: Database.Database }).db.close();
          },
        };
      };
      const cairnPath = join(dir, 'cairn.db');
      const cairnDb = new Database(cairnPath);
      const cairnStore = createSqliteStore({ database: cairnDb });
      const sqliteSubjects: Subject[] = [
        sqlite('stock', false),
        sqlite('delta', true),
        {
          name: 'CairnSaver (Cairn SQLite)',
          saver: new CairnSaver(cairnStore),
          bytes: async () => sqliteBytes(cairnDb),
          reopen: async () => new CairnSaver(createSqliteStore({ path: cairnPath })),
          close: () => cairnStore.close(),
        },
      ];
      log(`SQLite: ${TURNS} turns on ${sqliteSubjects.map((s) => s.name).join(', ')}`);
      const sqliteResults = await race(sqliteSubjects, log);
      for (const s of sqliteSubjects) await s.close();

      // ------------------------------------------------------------------ Postgres
      await admin.connect();
      const pgSaver = PostgresSaver.fromConnString(PG_URL, { schema: schemas[0]! });
      await pgSaver.setup();
      const pgStore = await createPostgresStore(
        { connectionString: PG_URL },
        { schema: schemas[1]! },
      );
      const pgSubjects: Subject[] = [
        {
          name: 'PostgresSaver 1.0.5',
          saver: pgSaver,
          bytes: () => schemaBytes(admin, schemas[0]!),
          reopen: async () => pgSaver,
          close: () => pgSaver.end(),
        },
        {
          name: 'CairnSaver (Cairn Postgres)',
          saver: new CairnSaver(pgStore),
          bytes: () => schemaBytes(admin, schemas[1]!),
          reopen: async () => new CairnSaver(pgStore),
          close: () => pgStore.close(),
        },
      ];
      log(`Postgres: ${TURNS} turns on ${pgSubjects.map((s) => s.name).join(', ')}`);
      const pgResults = await race(pgSubjects, log);
      for (const s of pgSubjects) await s.close();

      const markdown = [
        `One \`StateGraph(MessagesAnnotation)\` chat agent with one node (a deterministic fake model), ${TURNS} turns`,
        'of a ~300-byte question and a ~300-byte reply, the savers interleaved turn by turn in one process.',
        "Bytes: the SQLite file after a WAL checkpoint, or every table of the saver's Postgres schema",
        '(`pg_total_relation_size`). getState: median of 3 at the last turn on the saver that wrote the thread,',
        `then once through a new saver instance. getStateHistory reads the whole thread at turn ${HISTORY_AT}, not`,
        `${TURNS}: SqliteSaver needs minutes for the full ${TURNS}-turn history (research: 251 s).`,
        '',
        '### SQLite',
        '',
        table(sqliteSubjects, sqliteResults, 0),
        '',
        `Cairn / LangGraph delta mode: bytes ${(sqliteResults[2]!.bytes.get(MARKS[2]!)! / sqliteResults[1]!.bytes.get(MARKS[2]!)!).toFixed(2)}x.`,
        '',
        '### PostgreSQL 15 (local server)',
        '',
        table(pgSubjects, pgResults, 0),
        '',
        'Targets (issue 12): bytes ≤ 1/200 of SqliteSaver and ≤ 1/2 of delta mode, linear (2x turns → ≤ 2.1x bytes);',
        `ms per invoke at turns ${TURNS - 49}-${TURNS} ≤ the stock saver's; getState ≤ the stock saver's; getStateHistory ≤ 1/2`,
        "of the stock saver's time; the same on Postgres against PostgresSaver.",
      ].join('\n');
      return { markdown };
    } finally {
      for (const s of schemas)
        await admin.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`).catch(() => {});
      await admin.end().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default suite;
