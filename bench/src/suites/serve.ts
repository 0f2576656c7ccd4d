/**
 * `cairn serve` against the LangGraph API server (`@langchain/langgraph-api`, in memory) on
 * the same graph (the demo agent of @cairn/server: a fake model streaming ~35 tokens):
 * runs per second and the time to a run's first streamed event, at 1, 2 and 4 workers.
 * Cairn: an API process and that many worker processes on one Postgres (a run is a row,
 * claimed by any worker, woken by LISTEN). LangGraph: one process with that many in-process
 * workers, its runs in memory (an idle worker sleeps up to a second between looks).
 * Each thread gets its runs one after another, the threads side by side.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newId } from '@cairn/core';
import pg from 'pg';
import type { Suite } from '../harness.js';
import { POSTGRES_URL, postgresUnreachable } from '../postgres.js';

const script = join(dirname(fileURLToPath(import.meta.url)), '..', 'workers', 'serve-worker.js');
const THREADS = Number(process.env.CAIRN_BENCH_SERVE_THREADS ?? 16);
const RUNS_PER_THREAD = Number(process.env.CAIRN_BENCH_SERVE_RUNS ?? 5);
const COUNTS = [1, 2, 4];

function start(args: string[]): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (d) => {
    err += d;
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d;
      const m = /ready (\S+)/.exec(out);
      if (m) resolve({ child, url: m[1]! });
    });
    child.once('exit', (code) => reject(new Error(`serve-worker exited with ${code}: ${err}`)));
  });
}

const stop = (c: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (c.exitCode !== null) return resolve();
    c.once('exit', () => resolve());
    c.kill('SIGKILL');
  });

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** One run streamed to its end: ms to its first event, and whether it ended in values. */
async function streamRun(url: string, threadId: string, i: number): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(`${url}/threads/${threadId}/runs/stream`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      assistant_id: 'agent',
      input: { messages: [{ role: 'user', content: `message ${i}` }] },
      stream_mode: ['values'],
      multitask_strategy: 'enqueue',
    }),
  });
  if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let first = -1;
  let text = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    if (first < 0) first = performance.now() - t0;
    text += decoder.decode(chunk, { stream: true });
  }
  if (!text.includes('event: values'))
    throw new Error(`run ended without values: ${text.slice(0, 300)}`);
  return first;
}

/** Threads side by side, each with its runs one after another: runs/s and ms to first event. */
async function load(url: string): Promise<{ runsPerSecond: number; p50: number; p99: number }> {
  const threads = await Promise.all(
    Array.from({ length: THREADS }, async () => {
      const res = await fetch(`${url}/threads`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      return ((await res.json()) as { thread_id: string }).thread_id;
    }),
  );
  const firsts: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    threads.map(async (id) => {
      for (let i = 0; i < RUNS_PER_THREAD; i++) firsts.push(await streamRun(url, id, i));
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  const sorted = firsts.sort((a, b) => a - b);
  const pct = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
  return { runsPerSecond: firsts.length / secs, p50: pct(0.5), p99: pct(0.99) };
}

async function cairn(workers: number) {
  const schema = `bench_serve_${newId().replaceAll('-', '').slice(-10)}`;
  const api = await start(['cairn', POSTGRES_URL, schema, '0']);
  const procs = [api.child];
  try {
    for (let i = 0; i < workers; i++)
      procs.push((await start(['cairn', POSTGRES_URL, schema, '10'])).child);
    await load(api.url); // warm-up: graphs loaded, connections open
    return await load(api.url);
  } finally {
    await Promise.all(procs.map(stop));
    const c = new pg.Client({ connectionString: POSTGRES_URL });
    await c.connect();
    await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await c.end();
  }
}

async function langgraph(workers: number) {
  const dir = mkdtempSync(join(tmpdir(), 'bench-langgraph-api-'));
  const server = await start(['langgraph-api', dir, String(workers), String(await freePort())]);
  try {
    await load(server.url);
    return await load(server.url);
  } finally {
    await stop(server.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

const suite: Suite = {
  id: 'serve',
  title: 'cairn serve against the LangGraph API server',
  async run(log) {
    const down = await postgresUnreachable();
    if (down) return { markdown: `Postgres server unreachable (${down}): not measured.` };
    const rows: string[] = [];
    for (const workers of COUNTS) {
      const lg = await langgraph(workers);
      log(
        `langgraph-api, ${workers} workers: ${lg.runsPerSecond.toFixed(1)} runs/s, first event p50 ${lg.p50.toFixed(0)} ms, p99 ${lg.p99.toFixed(0)} ms`,
      );
      const c = await cairn(workers);
      log(
        `cairn serve, ${workers} workers: ${c.runsPerSecond.toFixed(1)} runs/s, first event p50 ${c.p50.toFixed(0)} ms, p99 ${c.p99.toFixed(0)} ms`,
      );
      rows.push(
        `| ${workers} | ${lg.runsPerSecond.toFixed(1)} | ${c.runsPerSecond.toFixed(1)} | ${(c.runsPerSecond / lg.runsPerSecond).toFixed(2)}x | ${lg.p99.toFixed(0)} ms | ${c.p99.toFixed(0)} ms | ${(c.p99 / lg.p99).toFixed(2)}x |`,
      );
    }
    return {
      markdown: [
        `${THREADS} threads side by side, ${RUNS_PER_THREAD} runs each (one after another on a thread), every run streamed (\`values\`); after a warm-up round. Cairn: one API process and N worker processes (10 runs at once each) on one Postgres; LangGraph API (\`@langchain/langgraph-api\` 1.5.1, in memory): one process with N workers.`,
        '',
        '| workers | runs/s LangGraph API | runs/s cairn serve | ratio | p99 first event LangGraph API | p99 first event cairn serve | ratio |',
        '| --- | --- | --- | --- | --- | --- | --- |',
        ...rows,
      ].join('\n'),
    };
  },
};

export default suite;
