// Workers in processes of their own on one Postgres: one is SIGKILLed while it runs a
// graph, and another takes the run over once the dead one's claim expires; the thread is
// not left busy. A rollback of a run whose worker died part-way still undoes its writes.
import { type ChildProcess, spawn } from 'node:child_process';
import type { Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import {
  dropSchema,
  freshSchema,
  POSTGRES_TEST_URL,
  postgresTestSkip,
} from '@cairn/store-postgres/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve, userInput } from './support.js';

const LEASE_MS = 1500;
const skip = await postgresTestSkip('server takeover');

/** Starts a worker process; resolves once it listens. */
function startWorker(schema: string): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    ['test/fixtures/worker-process.mjs', POSTGRES_TEST_URL, schema, String(LEASE_MS), '1'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      if (d.toString().startsWith('ready')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`worker exited with ${code}`)));
  });
}

describe.skipIf(skip)('a worker killed mid-run', () => {
  const schema = freshSchema('cairn_takeover');
  let store: Store;
  beforeAll(async () => {
    store = await createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema });
  });
  afterAll(async () => {
    await store.close();
    await dropSchema(schema);
  });

  it('is taken over by another worker within a lease period, and the thread ends idle', async () => {
    // This process serves the API only; the worker process runs the graph.
    const api = await serve(store, { concurrency: 0, leaseMs: LEASE_MS });
    const doomed = await startWorker(schema);
    try {
      const thread = await api.client.threads.create();
      const run = await api.client.runs.create(thread.thread_id, 'agent', {
        input: userInput('survive this', { sleepMs: 30 }),
        streamMode: ['messages-tuple'],
      });
      // Read the run's stream from the start; kill the worker once it has streamed tokens.
      const events: Array<{ event: string; data: unknown }> = [];
      let rescuer: Awaited<ReturnType<typeof serve>> | undefined;
      try {
        for await (const e of api.client.runs.joinStream(thread.thread_id, run.run_id)) {
          events.push(e);
          if (!rescuer && events.filter((x) => x.event === 'messages').length === 3) {
            doomed.kill('SIGKILL');
            rescuer = await serve(store, { concurrency: 1, leaseMs: LEASE_MS });
          }
        }
        const attempts = events
          .filter((e) => e.event === 'metadata')
          .map((e) => (e.data as { attempt: number }).attempt);
        expect(attempts).toEqual([1, 2]);
        const done = await api.client.runs.get(thread.thread_id, run.run_id);
        expect(done.status).toBe('success');
        const t = await api.client.threads.get(thread.thread_id);
        expect(t.status).toBe('idle');
        const state = await api.client.threads.getState<{ messages: Array<{ content: string }> }>(
          thread.thread_id,
        );
        expect(state.values.messages.map((m) => m.content)).toEqual([
          'survive this',
          '1 messages so far; you said: survive this',
        ]);
      } finally {
        await rescuer?.server.close();
      }
    } finally {
      doomed.kill('SIGKILL');
      await api.server.close();
    }
  });

  it('a run rolled back after its worker died part-way leaves none of its writes', async () => {
    const api = await serve(store, { concurrency: 0, leaseMs: LEASE_MS });
    const doomed = await startWorker(schema);
    let rescuer: Awaited<ReturnType<typeof serve>> | undefined;
    try {
      const { client } = api;
      const thread = await client.threads.create();
      await client.runs.wait(thread.thread_id, 'agent', { input: userInput('first') });
      const run = await client.runs.create(thread.thread_id, 'agent', {
        input: userInput('undone', { sleepMs: 30 }),
        streamMode: ['messages-tuple'],
      });
      // The worker dies once the run's input is checkpointed and tokens stream.
      let tokens = 0;
      for await (const e of client.runs.joinStream(thread.thread_id, run.run_id)) {
        if (e.event === 'messages' && ++tokens === 3) break;
      }
      doomed.kill('SIGKILL');
      await new Promise((r) => setTimeout(r, LEASE_MS + 300)); // its claim has lapsed
      const next = await client.runs.create(thread.thread_id, 'agent', {
        input: userInput('instead'),
        multitaskStrategy: 'rollback',
      });
      rescuer = await serve(store, { concurrency: 1, leaseMs: LEASE_MS });
      await client.runs.join(thread.thread_id, next.run_id);
      await expect(client.runs.get(thread.thread_id, run.run_id)).rejects.toMatchObject({
        status: 404,
      });
      const state = await client.threads.getState<{ messages: Array<{ content: string }> }>(
        thread.thread_id,
      );
      expect(state.values.messages.map((m) => m.content)).toEqual([
        'first',
        '1 messages so far; you said: first',
        'instead',
        '3 messages so far; you said: instead',
      ]);
    } finally {
      doomed.kill('SIGKILL');
      await rescuer?.server.close();
      await api.server.close();
    }
  });
});
