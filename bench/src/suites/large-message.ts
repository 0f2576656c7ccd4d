import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@cairn/core';
import type { Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import { createSqliteStore } from '@cairn/store-sqlite';
import Database from 'better-sqlite3';
import pg from 'pg';
import { type Case, type Comparison, compare, comparisonTable, type Suite } from '../harness.js';
import { chainRows } from '../messages.js';
import { POSTGRES_URL, postgresUnreachable } from '../postgres.js';

/** The message of the finding (F9): 20 MB of data in one message. */
const BIG_BYTES = 20 * 1024 * 1024;
/** Messages stored before it, in a thread of their own. */
const BASE = 2_000;
const BATCH = 1_000;
const SINGLES = 100;

/** `BIG_BYTES` of base64 of random bytes, as an image or file in a message would be: it does not compress. */
function bigText(): string {
  return randomBytes((BIG_BYTES / 4) * 3).toString('base64');
}

/** A store kind: how to open a fresh one, and how to throw it away. */
interface Kind {
  label: string;
  open(): Promise<Store>;
  /** Writes what is pending out to the main file (WAL checkpoint, CHECKPOINT). */
  settle(store: Store): Promise<void>;
  drop(store: Store): Promise<void>;
}

/**
 * A fresh store holding `BASE` messages in one thread, and (when `big`) then one message of
 * `BIG_BYTES` in another: the state after one user posted a huge message.
 */
async function prepared(kind: Kind, big: boolean): Promise<{ store: Store; ids: string[] }> {
  const store = await kind.open();
  const base = (await store.createThread({})).id;
  const rows = chainRows(base, BASE);
  await store.addMessages(rows);
  // Both sides make the large text, so that collecting it is garbage on both.
  const data = { text: bigText() };
  if (big) {
    const other = (await store.createThread({})).id;
    await store.addMessages([{ threadId: other, parentId: null, role: 'user', data }]);
  } else if (JSON.stringify(data).length < BIG_BYTES) throw new Error('unreachable');
  // The one-off cost of writing the big message out (a WAL checkpoint) is not what is measured.
  await kind.settle(store);
  return { store, ids: rows.map((m) => m.id!) };
}

/** One side of a comparison: a fresh store per run (so no run sees another's writes). */
function side(kind: Kind, big: boolean, work: (s: Store, ids: string[]) => Promise<unknown>): Case {
  let current: { store: Store; ids: string[] } | null = null;
  return {
    name: big ? `after one ${BIG_BYTES / 1024 / 1024} MB message` : 'no large message',
    before: async () => {
      current = await prepared(kind, big);
    },
    run: () => work(current!.store, current!.ids),
    after: async () => {
      await kind.drop(current!.store);
      current = null;
    },
  };
}

const range = (xs: number[]) => `${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)}`;

const WORK: Array<{ name: string; run: (s: Store, ids: string[]) => Promise<unknown> }> = [
  {
    name: `a ${BATCH.toLocaleString('en')}-message batch (one addMessages) in a new thread`,
    run: async (s) => s.addMessages(chainRows((await s.createThread({})).id, BATCH)),
  },
  {
    name: `${SINGLES} single-message saves (addMessages of one) in a new thread`,
    run: async (s) => {
      const threadId = (await s.createThread({})).id;
      let parentId: string | null = null;
      for (let i = 0; i < SINGLES; i++) {
        const [m] = await s.addMessages(chainRows(threadId, 1, parentId));
        parentId = m!.id;
      }
    },
  },
  {
    name: `${SINGLES} getMessage of stored messages`,
    run: async (s, ids) => {
      for (let i = 0; i < SINGLES; i++) await s.getMessage(ids[(i * 19) % ids.length]!);
    },
  },
];

async function rowsFor(kind: Kind, log: (line: string) => void): Promise<Comparison[]> {
  const rows: Comparison[] = [];
  for (const w of WORK) {
    log(`${kind.label}: ${w.name}`);
    const row = await compare({
      name: `${kind.label}: ${w.name}`,
      baseline: side(kind, false, w.run),
      subject: side(kind, true, w.run),
      warmup: 1,
      runs: 7,
      target: { maxRatio: 2, label: '<= 2x (not slowed)' },
    });
    log(
      `  ${row.baseline.medianMs.toFixed(2)} ms -> ${row.subject.medianMs.toFixed(2)} ms (${row.ratio.toFixed(2)}x)`,
    );
    rows.push(row);
  }
  return rows;
}

/** The two layouts of the messages table: before schema 5 and since. */
const LAYOUTS = {
  'WITHOUT ROWID': `CREATE TABLE m (id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, parent_id TEXT, role TEXT NOT NULL,
      type TEXT, data TEXT NOT NULL, created_at INTEGER NOT NULL, depth INTEGER NOT NULL, jump_id TEXT,
      jump_depth INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
    CREATE INDEX m_thread ON m (thread_id);`,
  rowid: `CREATE TABLE m (id TEXT NOT NULL, thread_id TEXT NOT NULL, parent_id TEXT, role TEXT NOT NULL, type TEXT,
      created_at INTEGER NOT NULL, depth INTEGER NOT NULL, jump_id TEXT, jump_depth INTEGER NOT NULL DEFAULT 0,
      data TEXT NOT NULL);
    CREATE UNIQUE INDEX m_id ON m (id);
    CREATE INDEX m_thread ON m (thread_id);`,
};

/**
 * What the rowid layout costs rows of ordinary size, in SQL alone: both layouts in one
 * process, interleaved run by run (the old layout is the baseline).
 */
async function layoutCost(dir: string, log: (line: string) => void): Promise<Comparison[]> {
  const open = (name: string, ddl: string) => {
    const db = new Database(join(dir, `layout-${name}.db`));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.exec(ddl);
    return db;
  };
  const dbs = { old: open('old', LAYOUTS['WITHOUT ROWID']), now: open('now', LAYOUTS.rowid) };
  const data = JSON.stringify({
    text: 'message: the quick brown fox jumps over the lazy dog',
    i: 1,
  });
  let n = 0;
  const rowsOf = () => {
    const threadId = newId();
    let parent: string | null = null;
    return Array.from({ length: 2_000 }, (_, depth) => {
      const id = newId();
      const row = { id, threadId, parent, depth };
      parent = id;
      n++;
      return row;
    });
  };
  type Rows = ReturnType<typeof rowsOf>;
  const insert = (db: Database.Database, rows: Rows) => {
    const s = db.prepare(
      `INSERT INTO m (id, thread_id, parent_id, role, type, data, created_at, depth) VALUES (?, ?, ?, 'user', NULL, ?, 1, ?)`,
    );
    for (let i = 0; i < rows.length; i += 100)
      db.transaction(() => {
        for (const r of rows.slice(i, i + 100)) s.run(r.id, r.threadId, r.parent, data, r.depth);
      })();
  };
  const chainSql = `WITH RECURSIVE c (id, parent_id, data) AS (
      SELECT id, parent_id, data FROM m WHERE id = ?
      UNION ALL SELECT m.id, m.parent_id, m.data FROM c JOIN m ON m.id = c.parent_id)
    SELECT * FROM c`;
  const sides = (work: (db: Database.Database, rows: Rows) => unknown, fresh: boolean) => {
    const last = { old: rowsOf(), now: [] as Rows };
    insert(dbs.old, last.old);
    last.now = last.old;
    insert(dbs.now, last.now);
    const side = (k: 'old' | 'now'): Case => {
      let rows: Rows = last[k];
      return {
        name: k === 'old' ? 'WITHOUT ROWID (schema 4)' : 'rowid table + unique index (schema 5)',
        before: () => {
          if (fresh) rows = rowsOf();
        },
        run: () => work(dbs[k], rows),
      };
    };
    return { baseline: side('old'), subject: side('now') };
  };
  const rows: Comparison[] = [];
  log('layout cost: appends, chain reads, lookups by id');
  rows.push(
    await compare({
      name: 'layout alone: append 2,000 messages in transactions of 100 (SQL)',
      ...sides(insert, true),
      warmup: 1,
      runs: 11,
    }),
    await compare({
      name: 'layout alone: read a 2,000-message chain by recursive CTE, 5 x (SQL)',
      ...sides((db, r) => {
        const q = db.prepare(chainSql);
        for (let i = 0; i < 5; i++) q.all(r[r.length - 1]!.id);
      }, false),
      warmup: 1,
      runs: 11,
    }),
    await compare({
      name: 'layout alone: 2,000 lookups of a message by id (SQL)',
      ...sides((db, r) => {
        const q = db.prepare('SELECT id, data FROM m WHERE id = ?');
        for (let i = 0; i < r.length; i++) q.get(r[(i * 7) % r.length]!.id);
      }, false),
      warmup: 1,
      runs: 11,
    }),
  );
  dbs.old.close();
  dbs.now.close();
  log(`  (${n.toLocaleString('en')} rows written)`);
  return rows;
}

const suite: Suite = {
  id: 'large-message',
  title: 'One large message: does it slow later writes? (SQLite file, Postgres)',
  async run(log) {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-large-'));
    const rows: Comparison[] = [];
    const layout: Comparison[] = [];
    const notes: string[] = [];
    try {
      layout.push(...(await layoutCost(dir, log)));
      const files = new Map<Store, { path: string; db: Database.Database }>();
      rows.push(
        ...(await rowsFor(
          {
            label: 'SQLite file',
            open: async () => {
              const path = join(dir, `${newId()}.db`);
              const store = createSqliteStore({ path });
              // A second connection, to checkpoint: the store's own is configured as users get it.
              files.set(store, { path, db: new Database(path) });
              return store;
            },
            settle: async (store) => {
              files.get(store)!.db.pragma('wal_checkpoint(TRUNCATE)');
            },
            drop: async (store) => {
              const { path, db } = files.get(store)!;
              db.close();
              await store.close();
              files.delete(store);
              for (const f of [path, `${path}-wal`, `${path}-shm`]) rmSync(f, { force: true });
            },
          },
          log,
        )),
      );
      const down = await postgresUnreachable();
      if (down) {
        notes.push(`Postgres rows skipped: ${POSTGRES_URL} was unreachable (${down}).`);
      } else {
        const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 });
        const schemas = new Map<Store, string>();
        try {
          rows.push(
            ...(await rowsFor(
              {
                label: 'Postgres',
                open: async () => {
                  const schema = `cairn_bench_${newId().replaceAll('-', '').slice(-12)}`;
                  const store = await createPostgresStore(
                    { connectionString: POSTGRES_URL },
                    { schema },
                  );
                  schemas.set(store, schema);
                  return store;
                },
                settle: async () => {
                  await pool.query('CHECKPOINT');
                },
                drop: async (store) => {
                  await store.close();
                  await pool.query(`DROP SCHEMA "${schemas.get(store)}" CASCADE`);
                  schemas.delete(store);
                },
              },
              log,
            )),
          );
        } finally {
          await pool.end();
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    return {
      markdown: [
        comparisonTable(rows),
        '',
        `Each run opens a fresh store, stores ${BASE.toLocaleString('en')} messages (~100 bytes of data each) in one thread and, on the`,
        `subject side only, then one message of ${BIG_BYTES / 1024 / 1024} MB of data in another thread; the timed work`,
        'runs in a third thread (or reads the first), so it never touches the large message. Before timing, both',
        'sides write what is pending to the main file (SQLite: `wal_checkpoint(TRUNCATE)`; Postgres: `CHECKPOINT`), so',
        'the one-off cost of writing 20 MB out is not counted: what is measured is what stays. A ratio near 1 means the',
        'large message costs later writes nothing. The message is base64 of random bytes, so Postgres cannot compress it',
        'away. Both sides build the 20 MB text (and its JSON), so the garbage it leaves is alike. Both stores take messages',
        'of any size (as LangGraph’s savers do).',
        '',
        'Spread of the runs (fastest to slowest, ms), to judge the noise of this machine:',
        '',
        ...rows.map(
          (r) =>
            `- ${r.name}: no large message ${range(r.baseline.samples)}; after it ${range(r.subject.samples)}`,
        ),
        ...notes.map((n) => `\n${n}`),
        '',
        'What the rowid layout (schema 5) costs messages of ordinary size, in SQL alone: both layouts in one process,',
        'interleaved, the old one as the baseline (the price of one more b-tree search: the id in its index, then the',
        'row by rowid):',
        '',
        comparisonTable(layout),
      ].join('\n'),
    };
  },
};
export default suite;
