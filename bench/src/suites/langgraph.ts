/**
 * @cairn/langgraph against LangGraph.js's SQLite saver, side by side in one run: SqliteSaver
 * 1.0.4, SqliteSaver with LangGraph's beta `MessagesDeltaValue`, and CairnSaver on a Cairn
 * SQLite file (the race: ../langgraph-race.ts). Postgres: suite `langgraph-postgres`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CairnSaver } from '@cairn/langgraph';
import { createSqliteStore } from '@cairn/store-sqlite';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import Database from 'better-sqlite3';
import type { Suite } from '../harness.js';
import {
  description,
  race,
  type Subject,
  sqliteBytes,
  TURNS,
  table,
  targets,
} from '../langgraph-race.js';

const suite: Suite = {
  id: 'langgraph',
  title: '@cairn/langgraph: CairnSaver against SqliteSaver',
  async run(log) {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-langgraph-'));
    try {
      const sqlite = (name: string, delta: boolean): Subject => {
        const path = join(dir, `${name}.db`);
        const saver = SqliteSaver.fromConnString(path);
        return {
          name: delta ? 'SqliteSaver + MessagesDeltaValue (beta)' : 'SqliteSaver 1.0.4',
          saver,
          delta,
          // Not a target; its whole history costs as much as SqliteSaver's.
          history: !delta,
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
      const subjects: Subject[] = [
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
      log(`SQLite: ${TURNS} turns on ${subjects.map((s) => s.name).join(', ')}`);
      const results = await race(subjects, log);
      for (const s of subjects) await s.close();
      const markdown = [
        description(),
        '',
        table(subjects, results),
        '',
        targets(subjects, results, 0, 1),
      ].join('\n');
      return { markdown };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default suite;
