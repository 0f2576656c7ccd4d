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
  race,
  type Subject,
  schemaBreakdown,
  schemaBytes,
  TURNS,
  table,
  targets,
} from '../langgraph-race.js';
import { POSTGRES_URL as PG_URL } from '../postgres.js';

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
          description,
          '',
          table(subjects, results),
          '',
          targets(subjects, results, 0),
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
