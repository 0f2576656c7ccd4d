/**
 * @cairn/langgraph against LangGraph.js's Postgres saver on the local server, side by side in
 * one run: PostgresSaver 1.0.5 and CairnSaver on a Cairn Postgres store (the race:
 * ../langgraph-race.ts).
 */
import { CairnSaver } from '@cairn/langgraph';
import { createPostgresStore } from '@cairn/store-postgres';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import pg from 'pg';
import type { Suite } from '../harness.js';
import {
  description,
  MARKS,
  mb,
  race,
  type Subject,
  schemaBreakdown,
  schemaBytes,
  TURNS,
  table,
  targets,
  threadMessages,
} from '../langgraph-race.js';
import { POSTGRES_URL as PG_URL } from '../postgres.js';

/** The text of the earlier runs: one phrase repeated, which TOAST compresses ~40x. */
const lorem = (i: number, who: string) =>
  `${who} ${i}: ${'lorem ipsum dolor sit amet, consectetur adipiscing elit '.repeat(6)}`.slice(
    0,
    300,
  );

/**
 * How much Postgres's TOAST compression (pglz, the server's default) shrinks one message and the
 * whole list of this run's text, serialized as LangChain serializes them: what PostgresSaver's
 * whole-list blobs gain and a row of one message does not (Cairn packs those with Brotli).
 */
async function compressibility(admin: pg.Client): Promise<string> {
  const lines: string[] = [];
  await admin.query(
    'CREATE TEMP TABLE bench_pglz (label text, b bytea) WITH (toast_tuple_target = 128)',
  );
  try {
    for (const [label, say] of [
      ['this text', undefined],
      ['the earlier repeated phrase', lorem],
    ] as const) {
      const list = threadMessages(TURNS, say);
      await admin.query('INSERT INTO bench_pglz VALUES ($1, $2), ($3, $4)', [
        'one',
        Buffer.from(JSON.stringify(list[list.length - 1])),
        'list',
        Buffer.from(JSON.stringify(list)),
      ]);
      const { rows } = await admin.query<{ label: string; raw: number; stored: number }>(
        'SELECT label, octet_length(b) AS raw, pg_column_size(b) AS stored FROM bench_pglz',
      );
      await admin.query('TRUNCATE bench_pglz');
      const [one, all] = ['one', 'list'].map((l) => rows.find((r) => r.label === l)!);
      const ratio = (r: { raw: number; stored: number }) => (r.raw / r.stored).toFixed(2);
      lines.push(
        `- ${label}: one message ${one!.raw} → ${one!.stored} bytes (${ratio(one!)}x), the list of ${list.length} messages ${mb(all!.raw)} → ${mb(all!.stored)} MB (${ratio(all!)}x).`,
      );
    }
  } finally {
    await admin.query('DROP TABLE IF EXISTS bench_pglz');
  }
  return lines.join('\n');
}

const suite: Suite = {
  id: 'langgraph-postgres',
  title: '@cairn/langgraph: CairnSaver against PostgresSaver (PostgreSQL 15, local server)',
  async run(log) {
    const admin = new pg.Client({ connectionString: PG_URL });
    const stamp = Date.now().toString(36);
    const schemas = [`bench_lg_saver_${stamp}`, `bench_lg_cairn_${stamp}`];
    try {
      await admin.connect();
      const pgSaver = PostgresSaver.fromConnString(PG_URL, { schema: schemas[0]! });
      await pgSaver.setup();
      const pgStore = await createPostgresStore(
        { connectionString: PG_URL },
        { schema: schemas[1]! },
      );
      const subjects: Subject[] = [
        {
          name: 'PostgresSaver 1.0.5',
          saver: pgSaver,
          bytes: () => schemaBytes(admin, schemas[0]!),
          // Stateless: a new instance would read the same way.
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
      log(`Postgres: ${TURNS} turns on ${subjects.map((s) => s.name).join(', ')}`);
      const results = await race(subjects, log);
      for (const s of subjects) await s.close();
      const mid = MARKS[1]!;
      const perTurn = (r: (typeof results)[number]) =>
        `${(r.bytes.get(TURNS)! / TURNS).toFixed(0)} bytes per turn (${((r.bytes.get(TURNS)! - r.bytes.get(mid)!) / (TURNS - mid)).toFixed(0)} added per turn from turn ${mid} to ${TURNS})`;
      const breakdown: string[] = [];
      for (const [k, s] of subjects.entries()) {
        breakdown.push(
          `${s.name}, after ${TURNS} turns:`,
          '',
          await schemaBreakdown(admin, schemas[k]!),
          '',
        );
      }
      return {
        markdown: [
          description(),
          '',
          table(subjects, results),
          '',
          targets(subjects, results, 0),
          '',
          `Bytes per turn at ${TURNS} turns: PostgresSaver ${perTurn(results[0]!)}; Cairn ${perTurn(results[1]!)}.`,
          `1/200 of PostgresSaver is ${(results[0]!.bytes.get(TURNS)! / 200 / TURNS).toFixed(0)} bytes per turn, for ~600 bytes of text a turn adds.`,
          '',
          'TOAST compression (pglz, `pg_column_size` against `octet_length` of the serialized messages):',
          '',
          await compressibility(admin),
          '',
          'Until 2026-11-27 every message was the same repeated lorem-ipsum phrase: PostgresSaver',
          'then measured 30.68 MB at 1,000 turns (against 804 MB in the issue, measured on ordinary',
          'text), because TOAST compressed its whole-list blobs ~40x; Cairn measured 6.08 MB (1/5).',
          '',
          'Where the bytes are (`pg_table_size`, `pg_indexes_size`, `pg_total_relation_size` per table):',
          '',
          ...breakdown,
        ].join('\n'),
      };
    } finally {
      for (const s of schemas)
        await admin.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`).catch(() => {});
      await admin.end().catch(() => {});
    }
  },
};

export default suite;
