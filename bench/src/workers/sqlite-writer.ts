/**
 * One of several processes writing one SQLite file, measuring how long its own event loop
 * stalls meanwhile. Spawned by the `sqlite-processes` suite.
 *
 *   node sqlite-writer.js <cairn|raw> <path> <threadId> <writes>
 *
 * Prints "ready", waits for "go" on stdin, then makes `writes` single-row write
 * transactions, yielding to the event loop between them as a server handling requests
 * would, and prints one JSON line: the longest and p99 event-loop delay and the time taken.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { newId } from '@cairn/core';
import { createSqliteStore } from '@cairn/store-sqlite';
import Database from 'better-sqlite3';

const [mode, path, threadId, count] = process.argv.slice(2) as [string, string, string, string];
const writes = Number(count);

let write: (i: number) => Promise<unknown> | unknown;
let close: () => Promise<unknown> | unknown;
if (mode === 'cairn') {
  const store = createSqliteStore({ path }, { busyTimeoutMs: 30_000 });
  let parentId: string | null = null;
  write = async (i) => {
    const [m] = await store.addMessages([
      { threadId, parentId, role: 'user', data: { text: `message ${i} from ${process.pid}` } },
    ]);
    parentId = m!.id;
  };
  close = () => store.close();
} else {
  // better-sqlite3 as it is usually set up: SQLite's own busy handler, which sleeps in
  // the calling thread, so the whole process waits with it.
  const db = new Database(path, { timeout: 30_000 });
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  const insert = db.prepare('INSERT INTO bare (id, thread_id, data) VALUES (?, ?, ?)');
  const begin = db.prepare('BEGIN IMMEDIATE');
  const commit = db.prepare('COMMIT');
  write = (i) => {
    begin.run();
    insert.run(newId(), threadId, JSON.stringify({ text: `message ${i} from ${process.pid}` }));
    commit.run();
  };
  close = () => db.close();
}

process.stdout.write('ready\n');
await new Promise<void>((resolve) => {
  process.stdin.on('data', (d) => {
    if (String(d).includes('go')) resolve();
  });
});
const delay = monitorEventLoopDelay({ resolution: 1 });
delay.enable();
const t0 = performance.now();
for (let i = 0; i < writes; i++) {
  await write(i);
  await yieldToLoop();
}
const ms = performance.now() - t0;
delay.disable();
await close();
process.stdout.write(
  `${JSON.stringify({ maxMs: delay.max / 1e6, p99Ms: delay.percentile(99) / 1e6, ms })}\n`,
);
process.exit(0);
