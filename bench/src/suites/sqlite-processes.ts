import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createSqliteStore } from '@cairn/store-sqlite';
import Database from 'better-sqlite3';
import { median, type Suite } from '../harness.js';
import { runProcesses } from '../processes.js';

const worker = join(dirname(fileURLToPath(import.meta.url)), '..', 'workers', 'sqlite-writer.js');
const WRITES = 400;
const RUNS = 5;

interface WorkerResult {
  maxMs: number;
  p99Ms: number;
  ms: number;
}

interface Figures {
  /** Longest stall of any process, median over the runs. */
  maxMs: number;
  p99Ms: number;
  writesPerSecond: number;
}

async function scenario(
  mode: 'cairn' | 'raw',
  processes: number,
  log: (line: string) => void,
): Promise<Figures> {
  const maxes: number[] = [];
  const p99s: number[] = [];
  const rates: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-processes-'));
    try {
      const path = join(dir, 'shared.db');
      const store = createSqliteStore({ path });
      const threadIds: string[] = [];
      for (let i = 0; i < processes; i++) threadIds.push((await store.createThread({})).id);
      await store.close();
      const db = new Database(path);
      db.exec('CREATE TABLE bare (id TEXT PRIMARY KEY, thread_id TEXT, data TEXT)');
      db.close();
      const t0 = performance.now();
      const results = await runProcesses<WorkerResult>(
        worker,
        threadIds.map((id) => [mode, path, id, String(WRITES)]),
      );
      const wall = performance.now() - t0;
      maxes.push(Math.max(...results.map((r) => r.maxMs)));
      p99s.push(Math.max(...results.map((r) => r.p99Ms)));
      rates.push((processes * WRITES) / (Math.max(...results.map((r) => r.ms)) / 1000));
      log(
        `${mode} x${processes} run ${run + 1}: longest stall ${maxes.at(-1)!.toFixed(1)} ms, wall ${wall.toFixed(0)} ms`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return { maxMs: median(maxes), p99Ms: median(p99s), writesPerSecond: median(rates) };
}

const fmt = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms.toFixed(1));

const suite: Suite = {
  id: 'sqlite-processes',
  title: '@cairn/store-sqlite: event-loop stalls while 4 processes write one file',
  async run(log) {
    const alone = await scenario('cairn', 1, log);
    const four = await scenario('cairn', 4, log);
    const raw = await scenario('raw', 4, log);
    const row = (label: string, f: Figures) =>
      `| ${label} | ${fmt(f.maxMs)} | ${fmt(f.p99Ms)} | ${f.writesPerSecond.toFixed(0)} |`;
    return {
      markdown: `| writers | longest event-loop stall, ms | p99 event-loop delay, ms | writes/s (all processes) |
| --- | ---: | ---: | ---: |
${row('Cairn, 1 process alone', alone)}
${row('Cairn, 4 processes on one file', four)}
${row("raw better-sqlite3 with SQLite's busy timeout, 4 processes on one file", raw)}

| measure | ratio | target | |
| --- | ---: | --- | --- |
| longest stall, 4 processes / 1 process alone (Cairn) | ${(four.maxMs / alone.maxMs).toFixed(2)}x | | |
| longest stall, Cairn / SQLite's busy timeout (4 processes) | ${(four.maxMs / raw.maxMs).toFixed(3)}x | | |

Each process makes ${WRITES} single-message write transactions (\`addMessages\` of one message;
raw: \`BEGIN IMMEDIATE\`, one INSERT, \`COMMIT\`), yielding to the event loop between them
as a server handling requests would, and measures its own event loop with
\`monitorEventLoopDelay\` (1 ms resolution). Figures are the worst process of a run, median
of ${RUNS} runs. Cairn waits for another process's write lock on timers
(\`busy_timeout = 0\`, \`BEGIN IMMEDIATE\` retried with jittered backoff from 1 to 20 ms up to
\`busyTimeoutMs\`), so its event loop keeps running while it waits; SQLite's own busy
timeout sleeps inside the call, and the process's event loop with it.`,
    };
  },
};

export default suite;
