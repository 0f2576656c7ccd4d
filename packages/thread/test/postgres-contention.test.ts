import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineState, field } from '@cairn/core';
import { createPostgresStore } from '@cairn/store-postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { openThread } from '../src/index.js';
import { dropSchema, freshSchema, POSTGRES_URL, SKIP_SERVER } from './postgres-support.js';

const worker = join(dirname(fileURLToPath(import.meta.url)), 'children', 'counter-worker.mjs');
const Counter = defineState({
  counter: field<number, number>({ reducer: (a, b) => (a ?? 0) + (b ?? 0), default: () => 0 }),
  last: field<string>(),
});
const schema = freshSchema();

function runWorker(args: string[]): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [worker, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += String(d);
    });
    child.stderr.on('data', (d) => {
      err += String(d);
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0
        ? resolve((JSON.parse(out) as { latencies: number[] }).latencies)
        : reject(new Error(`worker exited with ${code}: ${err}`)),
    );
  });
}

/** Every worker's `turns` messages (`w<worker>-<turn>`) saved, each worker's in its own order. */
function expectEachWorkerInOrder(saved: string[], processes: number, turns: number): void {
  for (let w = 0; w < processes; w++) {
    expect(saved.filter((d) => d.startsWith(`w${w}-`))).toEqual(
      Array.from({ length: turns }, (_, i) => `w${w}-${i}`),
    );
  }
}

describe.skipIf(Boolean(SKIP_SERVER))(
  'many worker processes on one hot branch (Postgres server)',
  () => {
    afterAll(async () => {
      await dropSchema(schema);
    });

    it('16 processes x 4 turns: every update and message applied, none refused after one lock wait', async () => {
      const processes = 16;
      const turns = 4;
      const store = await createPostgresStore({ connectionString: POSTGRES_URL }, { schema });
      try {
        const shared = await openThread(store, { schema: Counter });
        // Each worker has maxRetries: 1 (one optimistic attempt, one under the branch lock):
        // an update or save refused with CONFLICT would fail its process.
        const latencies = await Promise.all(
          Array.from({ length: processes }, (_, w) =>
            runWorker([POSTGRES_URL, schema, shared.id, String(w), String(turns)]),
          ),
        );
        expect(latencies.flat()).toHaveLength(processes * turns);
        const reread = await openThread(store, { schema: Counter, threadId: shared.id });
        expect(reread.state.counter).toBe(processes * turns);
        const versions = (await store.getStateCommits(reread.branchId)).map((c) => c.version);
        expect(versions).toEqual(Array.from({ length: processes * turns }, (_, i) => i + 1));
        const saved = (await reread.history()).map((m) => m.data as string);
        expect(saved).toHaveLength(processes * turns);
        expectEachWorkerInOrder(saved, processes, turns);
      } finally {
        await store.close();
      }
    }, 300_000);

    it('8 processes x 4 turns under the run lease of one thread: every turn whole, in lease order', async () => {
      const processes = 8;
      const turns = 4;
      const store = await createPostgresStore({ connectionString: POSTGRES_URL }, { schema });
      try {
        const shared = await openThread(store, { schema: Counter });
        await Promise.all(
          Array.from({ length: processes }, (_, w) =>
            runWorker([POSTGRES_URL, schema, shared.id, String(w), String(turns), 'leased']),
          ),
        );
        const reread = await openThread(store, { schema: Counter, threadId: shared.id });
        expect(reread.state.counter).toBe(processes * turns);
        const versions = (await store.getStateCommits(reread.branchId)).map((c) => c.version);
        expect(versions).toEqual(Array.from({ length: 2 * processes * turns }, (_, i) => i + 1));
        // The lease keeps a turn's question and reply together: no other turn in between.
        const saved = (await reread.history()).map((m) => m.data as string);
        expect(saved).toHaveLength(2 * processes * turns);
        for (let i = 0; i < saved.length; i += 2) expect(saved[i]).toBe(`${saved[i + 1]}?`);
        const replies = saved.filter((_, i) => i % 2 === 1);
        expectEachWorkerInOrder(replies, processes, turns);
      } finally {
        await store.close();
      }
    }, 300_000);
  },
);
