// Double-texting under load, on Postgres with worker processes: many threads, a second
// message for each while its run is in flight, each multitask strategy in turn; then
// workers SIGKILLed mid-run again and again. Checked from what the store holds: no two
// runs of a thread interleaved (each answer counts the messages before it), no accepted
// input lost, every `reject` a 409, every thread idle at the end.
import { type ChildProcess, spawn } from 'node:child_process';
import type { Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import {
  dropSchema,
  freshSchema,
  POSTGRES_TEST_URL,
  postgresTestSkip,
} from '@cairn/store-postgres/testing';
import type { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve, userInput } from './support.js';

// The scale is 100 threads and 1,000 second messages (CAIRN_SERVE_LOAD_THREADS=100
// CAIRN_SERVE_LOAD_MESSAGES=1000); the default keeps `pnpm test` within CI's time on two cores.
const THREADS = Number(process.env.CAIRN_SERVE_LOAD_THREADS ?? 20);
const SECOND_MESSAGES = Number(process.env.CAIRN_SERVE_LOAD_MESSAGES ?? 100);
const WORKERS = 4;
const KILLS = 20;
const LEASE_MS = 5000;
const skip = await postgresTestSkip('server double-texting');

type Messages = { messages: Array<{ type: string; content: string }> };

function startWorker(schema: string): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    ['test/fixtures/worker-process.mjs', POSTGRES_TEST_URL, schema, String(LEASE_MS), '8'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      if (d.toString().startsWith('ready')) resolve(child);
    });
    child.once('exit', (code, signal) => reject(new Error(`worker exited with ${code ?? signal}`)));
  });
}

/** Runs `fn` over `items`, `width` at a time. */
async function inParallel<T, R>(
  items: T[],
  width: number,
  fn: (item: T, i: number) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}

/** Waits until every thread is idle (the runs are done), looking once a quarter second, for at most `ms`. */
async function settled(client: Client, threadIds: string[], ms: number): Promise<string[]> {
  const deadline = Date.now() + ms;
  let busy = threadIds;
  while (busy.length > 0 && Date.now() < deadline) {
    const statuses = await inParallel(
      busy,
      20,
      async (id) => (await client.threads.get(id)).status,
    );
    busy = busy.filter((_, i) => statuses[i] === 'busy');
    if (busy.length > 0) await new Promise((r) => setTimeout(r, 250));
  }
  return busy;
}

/**
 * Each answer was computed on the whole conversation before it: at index i it says "i
 * messages so far; you said: <message i-1>". Two runs interleaving on a thread, or one
 * half-applied, break this.
 */
function consistent(messages: Messages['messages']): boolean {
  return messages.every(
    (m, i) =>
      m.type !== 'ai' ||
      m.content === `${i} messages so far; you said: ${messages[i - 1]?.content}`,
  );
}

describe.skipIf(skip)(
  `double-texting on ${THREADS} threads with ${WORKERS} worker processes`,
  () => {
    const schema = freshSchema('cairn_double');
    let store: Store;
    let api: Awaited<ReturnType<typeof serve>>;
    const workers: ChildProcess[] = [];

    beforeAll(async () => {
      store = await createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema });
      api = await serve(store, { concurrency: 0, leaseMs: LEASE_MS });
      workers.push(
        ...(await Promise.all(Array.from({ length: WORKERS }, () => startWorker(schema)))),
      );
    }, 120_000);

    afterAll(async () => {
      for (const w of workers) w.kill('SIGKILL');
      await api?.server.close();
      await store?.close();
      await dropSchema(schema);
    });

    for (const strategy of ['reject', 'enqueue', 'interrupt', 'rollback'] as const) {
      it(`${strategy}: no interleaving, no accepted input lost, every thread idle`, async () => {
        const { client } = api;
        const threads = await inParallel(Array.from({ length: THREADS }), 20, () =>
          client.threads.create(),
        );
        const ids = threads.map((t) => t.thread_id);
        // A first message on each thread, slow enough that the second ones find it running.
        await inParallel(ids, 20, (id) =>
          client.runs.create(id, 'agent', { input: userInput(`first ${id}`, { sleepMs: 10 }) }),
        );
        const outcomes = await inParallel(
          Array.from({ length: SECOND_MESSAGES }),
          20,
          async (_, i) => {
            const threadId = ids[i % THREADS]!;
            const text = `second ${i}`;
            try {
              const run = await client.runs.create(threadId, 'agent', {
                input: userInput(text),
                multitaskStrategy: strategy,
              });
              return { threadId, text, runId: run.run_id, status: 0 };
            } catch (e) {
              return {
                threadId,
                text,
                runId: null,
                status: (e as { status?: number }).status ?? -1,
                message: String(e),
              };
            }
          },
        );
        const refused = outcomes.filter((o) => o.runId === null);
        if (strategy === 'reject') {
          expect(refused.length).toBeGreaterThan(0);
          expect(refused.filter((o) => o.status !== 409)).toEqual([]);
        } else expect(refused).toEqual([]);

        expect(await settled(client, ids, 240_000)).toEqual([]);
        const lost: string[] = [];
        const broken: string[] = [];
        await inParallel(ids, 10, async (id) => {
          const state = await client.threads.getState<Messages>(id);
          const messages = state.values.messages ?? [];
          if (!consistent(messages)) broken.push(id);
          const texts = messages.map((m) => m.content);
          for (const o of outcomes.filter((x) => x.threadId === id && x.runId)) {
            const run = await client.runs.get(id, o.runId!).catch(() => null);
            const present = texts.filter((t) => t === o.text).length;
            // A finished run's input is there exactly once; a rolled-back one's is gone.
            if (run?.status === 'success' && present !== 1)
              lost.push(`${o.text} (${present} times)`);
            if (run === null && present !== 0) lost.push(`${o.text} rolled back but present`);
            if (run && run.status !== 'success' && run.status !== 'interrupted')
              lost.push(
                `${o.text}: ${run.status} ${JSON.stringify(await client.runs.join(id, run.run_id))}`,
              );
          }
        });
        expect(broken).toEqual([]);
        expect(lost).toEqual([]);
      }, 600_000);
    }

    it(`a worker SIGKILLed mid-run ${KILLS} times leaves no thread busy and no state half-applied`, async () => {
      const { client } = api;
      const threads = await inParallel(Array.from({ length: 40 }), 20, () =>
        client.threads.create(),
      );
      const ids = threads.map((t) => t.thread_id);
      const runs = await inParallel(ids, 20, async (id) =>
        client.runs.create(id, 'agent', { input: userInput(`killed ${id}`, { sleepMs: 40 }) }),
      );
      for (let k = 0; k < KILLS; k++) {
        const i = k % workers.length;
        workers[i]!.kill('SIGKILL');
        workers[i] = await startWorker(schema);
        // More work while runs are in flight, so the next kill finds some.
        await client.runs.create(ids[k % ids.length]!, 'agent', {
          input: userInput(`after kill ${k}`, { sleepMs: 20 }),
          multitaskStrategy: 'enqueue',
        });
        await new Promise((r) => setTimeout(r, 150));
      }
      expect(await settled(client, ids, 300_000)).toEqual([]);
      const broken: string[] = [];
      await inParallel(ids, 10, async (id) => {
        const state = await client.threads.getState<Messages>(id);
        if (!consistent(state.values.messages ?? [])) broken.push(id);
      });
      expect(broken).toEqual([]);
      const statuses = await inParallel(
        runs,
        20,
        async (r) => (await client.runs.get(r.thread_id, r.run_id)).status,
      );
      // Each run ended: done, or failed after its attempts ran out; none is left running.
      expect(statuses.filter((s) => s === 'pending' || s === 'running')).toEqual([]);
    }, 600_000);
  },
);
