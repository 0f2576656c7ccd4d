// The server through the real SDK client, on SQLite and on Postgres: runs and their
// streams, rejoining a stream, double-texting, a restart, bad input, auth scoping.

import type { Store } from '@cairn/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { COLLECTIONS } from '../src/index.js';
import { databases, readSse, serve, userInput } from './support.js';

for (const db of await databases()) {
  describe.skipIf(db.skip)(`cairn server on ${db.name}`, () => {
    let database: Awaited<ReturnType<typeof db.create>>;
    let store: Store;
    const opened: Array<{ close(): Promise<void> }> = [];

    beforeEach(async () => {
      database = await db.create();
      store = await database.open();
    });
    afterEach(async () => {
      for (const o of opened.splice(0).reverse()) await o.close();
      await store.close();
      await database.dispose();
    });
    const start = async (
      ...args: Parameters<typeof serve> extends [unknown, ...infer R] ? R : never
    ) => {
      const s = await serve(store, ...args);
      opened.push(s.server);
      return s;
    };

    it('runs a graph on a thread, streams its tokens and leaves the thread idle; a new server on the same database sees it all', async () => {
      const { client, server } = await start();
      const thread = await client.threads.create({ metadata: { user: 'ada' } });
      const chunks = [];
      for await (const c of client.runs.stream(thread.thread_id, 'agent', {
        input: userInput('hello'),
        streamMode: ['messages-tuple', 'values'],
      }))
        chunks.push(c);
      expect(chunks[0]!.event).toBe('metadata');
      // The model's chunks, token by token (the node's final message follows under its own id).
      const messages = chunks
        .filter((c) => c.event === 'messages')
        .map((c) => (c.data as unknown as [{ id: string; content: string }])[0]);
      const tokens = messages.filter((m) => m.id === messages[0]!.id).map((m) => m.content);
      expect(tokens.length).toBeGreaterThan(10);
      expect(tokens.join('')).toBe('1 messages so far; you said: hello');
      const last = chunks.filter((c) => c.event === 'values').at(-1)!.data as {
        messages: unknown[];
      };
      expect(last.messages).toHaveLength(2);
      expect((await client.threads.get(thread.thread_id)).status).toBe('idle');

      await server.close();
      opened.pop();
      const again = await start();
      const state = await again.client.threads.getState<{ messages: Array<{ content: string }> }>(
        thread.thread_id,
      );
      expect(state.values.messages.map((m) => m.content)).toEqual([
        'hello',
        '1 messages so far; you said: hello',
      ]);
      expect((await again.client.runs.list(thread.thread_id)).map((r) => r.status)).toEqual([
        'success',
      ]);
      const found = await again.client.threads.search({ metadata: { user: 'ada' } });
      expect(found.map((t) => t.thread_id)).toEqual([thread.thread_id]);
    });

    it('replays a stream from Last-Event-ID: every event after it, each exactly once', async () => {
      const { client, url } = await start();
      const thread = await client.threads.create();
      const run = await client.runs.create(thread.thread_id, 'agent', {
        input: userInput('rejoin me', { sleepMs: 5 }),
        streamMode: ['messages-tuple', 'updates'],
      });
      const streamUrl = `${url}/threads/${thread.thread_id}/runs/${run.run_id}/stream`;
      const all = await readSse(await fetch(streamUrl));
      expect(all.map((e) => e.id)).toEqual(all.map((_, i) => String(i)));
      expect(all.filter((e) => e.event === 'messages').length).toBeGreaterThan(10);
      for (const from of [0, 5, all.length - 2]) {
        const rest = await readSse(
          await fetch(streamUrl, { headers: { 'last-event-id': all[from]!.id! } }),
        );
        expect(rest).toEqual(all.slice(from + 1));
      }
      const joined = [];
      for await (const c of client.runs.joinStream(thread.thread_id, run.run_id)) joined.push(c);
      expect(joined.map((c) => c.event)).toEqual(all.map((e) => e.event));
    });

    it('joins a stream while the run is going and sees the same events as a reader from the start', async () => {
      const { client, url } = await start();
      const thread = await client.threads.create();
      const run = await client.runs.create(thread.thread_id, 'agent', {
        input: userInput('live', { sleepMs: 20 }),
        streamMode: ['messages-tuple'],
      });
      const streamUrl = `${url}/threads/${thread.thread_id}/runs/${run.run_id}/stream`;
      const [live, late] = await Promise.all([
        fetch(streamUrl).then(readSse),
        new Promise((r) => setTimeout(r, 150)).then(() => fetch(streamUrl).then(readSse)),
      ]);
      expect(late).toEqual(live);
      expect((await client.runs.get(thread.thread_id, run.run_id)).status).toBe('success');
    });

    it('double-texting: reject answers 409 and writes nothing; enqueue runs after; interrupt stops the first; rollback removes it', async () => {
      const { client } = await start();
      const thread = await client.threads.create();
      const slow = userInput('first', { sleepMs: 40 });
      const first = await client.runs.create(thread.thread_id, 'agent', { input: slow });
      await expect(
        client.runs.create(thread.thread_id, 'agent', {
          input: userInput('second'),
          multitaskStrategy: 'reject',
        }),
      ).rejects.toThrow(/HTTP 409: Thread is already running a task/);
      expect((await client.runs.list(thread.thread_id)).map((r) => r.run_id)).toEqual([
        first.run_id,
      ]);

      const queued = await client.runs.create(thread.thread_id, 'agent', {
        input: userInput('second'),
        multitaskStrategy: 'enqueue',
      });
      await client.runs.join(thread.thread_id, queued.run_id);
      expect((await client.runs.get(thread.thread_id, first.run_id)).status).toBe('success');
      const state = await client.threads.getState<{ messages: Array<{ content: string }> }>(
        thread.thread_id,
      );
      expect(state.values.messages.map((m) => m.content)).toEqual([
        'first',
        '1 messages so far; you said: first',
        'second',
        '3 messages so far; you said: second',
      ]);

      const third = await client.runs.create(thread.thread_id, 'agent', {
        input: userInput('third', { sleepMs: 40 }),
      });
      await waitForStatus(client, thread.thread_id, third.run_id, 'running');
      const fourth = await client.runs.create(thread.thread_id, 'agent', {
        input: userInput('fourth'),
        multitaskStrategy: 'interrupt',
      });
      await client.runs.join(thread.thread_id, fourth.run_id);
      expect((await client.runs.get(thread.thread_id, third.run_id)).status).toBe('interrupted');

      const fifth = await client.runs.create(thread.thread_id, 'agent', {
        input: userInput('fifth', { sleepMs: 40 }),
      });
      await waitForStatus(client, thread.thread_id, fifth.run_id, 'running');
      const sixth = await client.runs.create(thread.thread_id, 'agent', {
        input: userInput('sixth'),
        multitaskStrategy: 'rollback',
      });
      await client.runs.join(thread.thread_id, sixth.run_id);
      await expect(client.runs.get(thread.thread_id, fifth.run_id)).rejects.toThrow(/HTTP 404/);
      const after = await client.threads.getState<{ messages: Array<{ content: string }> }>(
        thread.thread_id,
      );
      expect(after.values.messages.map((m) => m.content)).not.toContain('fifth');
      expect(after.values.messages.at(-2)!.content).toBe('sixth');
      expect((await client.threads.get(thread.thread_id)).status).toBe('idle');
    });

    it('waits after_seconds before starting a run', async () => {
      const { client } = await start();
      const thread = await client.threads.create();
      const run = await client.runs.create(thread.thread_id, 'agent', {
        input: userInput('later'),
        afterSeconds: 1,
      });
      expect((await client.runs.get(thread.thread_id, run.run_id)).status).toBe('pending');
      await client.runs.join(thread.thread_id, run.run_id);
      const done = await client.runs.get(thread.thread_id, run.run_id);
      expect(done.status).toBe('success');
      expect(Date.parse(done.updated_at) - Date.parse(run.created_at)).toBeGreaterThanOrEqual(1000);
    });

    it('answers bad bodies and ids with 400 and writes nothing', async () => {
      const { client, url } = await start();
      const thread = await client.threads.create();
      const entries = async () =>
        (await store.listEntries(COLLECTIONS.threads)).length +
        (await store.listEntries(COLLECTIONS.runs)).length;
      const before = await entries();
      const post = (path: string, body: string) =>
        fetch(`${url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        });
      const bad = [
        await post('/threads', '{"thread_id": "not-a-uuid"}'),
        await post('/threads', '{not json'),
        await post('/threads', '[1, 2]'),
        await post(
          `/threads/${thread.thread_id}/runs`,
          '{"assistant_id": "agent", "stream_mode": "bogus"}',
        ),
        await post(
          `/threads/${thread.thread_id}/runs`,
          '{"assistant_id": "agent", "multitask_strategy": "sometimes"}',
        ),
        await post(`/threads/${thread.thread_id}/runs`, '{"input": {}}'),
        await post('/threads/search', '{"limit": -1}'),
        await fetch(`${url}/threads/not-a-uuid`),
      ];
      for (const res of bad) {
        expect(res.status).toBe(400);
        expect((await res.text()).length).toBeGreaterThan(0);
      }
      const missing = await post(
        `/threads/${thread.thread_id}/runs`,
        '{"assistant_id": "no-such-graph"}',
      );
      expect(missing.status).toBe(404);
      expect(await missing.text()).toMatch(/No assistant found for "no-such-graph"/);
      expect(await entries()).toBe(before);
    });

    it('scopes threads, runs and store namespaces to the caller of a bearer token', async () => {
      const auth = { tokens: { 'token-of-ada': 'ada', 'token-of-bob': 'bob' } };
      const ada = await start({ auth }, { authorization: 'Bearer token-of-ada' });
      const { url } = ada;
      const bob = (await import('@langchain/langgraph-sdk')).Client;
      const asBob = new bob({
        apiUrl: url,
        defaultHeaders: { authorization: 'Bearer token-of-bob' },
      });
      const thread = await ada.client.threads.create();
      const run = await ada.client.runs.wait(thread.thread_id, 'agent', {
        input: userInput('mine'),
      });
      expect(run).toBeTruthy();
      await expect(asBob.threads.get(thread.thread_id)).rejects.toThrow(/HTTP 404/);
      await expect(asBob.threads.getState(thread.thread_id)).rejects.toThrow(/HTTP 404/);
      await expect(asBob.runs.list(thread.thread_id)).rejects.toThrow(/HTTP 404/);
      await expect(
        asBob.runs.create(thread.thread_id, 'agent', { input: userInput('theirs') }),
      ).rejects.toThrow(/HTTP 404/);
      await expect(asBob.threads.delete(thread.thread_id)).rejects.toThrow(/HTTP 404/);
      expect(await asBob.threads.search()).toEqual([]);
      expect((await ada.client.threads.search()).map((t) => t.thread_id)).toEqual([
        thread.thread_id,
      ]);
      await expect(asBob.store.putItem(['ada', 'notes'], 'k', { v: 1 })).rejects.toThrow(
        /HTTP 403/,
      );
      await asBob.store.putItem(['bob', 'notes'], 'k', { v: 1 });
      expect((await ada.client.store.searchItems(['ada'])).items).toEqual([]);
      const anonymous = await fetch(`${url}/threads/${thread.thread_id}`);
      expect(anonymous.status).toBe(401);
      const wrong = await fetch(`${url}/threads/${thread.thread_id}`, {
        headers: { authorization: 'Bearer nope' },
      });
      expect(wrong.status).toBe(401);
    });

    it('runs a LangGraph Auth object as the LangGraph API server does: handlers stamp, filter and refuse', async () => {
      const { Auth, HTTPException } = await import('@langchain/langgraph-sdk/auth');
      const auth = new Auth()
        .authenticate((request: Request) => {
          const user = /^Bearer (\w+)$/.exec(request.headers.get('authorization') ?? '')?.[1];
          if (!user)
            throw new HTTPException(401, {
              message: 'Could not validate credentials',
              headers: { 'WWW-Authenticate': 'Bearer' },
            });
          return { identity: user, permissions: user === 'eve' ? [] : ['write'] };
        })
        .on('*', ({ permissions }) => {
          if (!permissions.includes('write'))
            throw new HTTPException(403, { message: 'Not authorized' });
        })
        .on(['threads', 'assistants'], ({ action, value, user }) => {
          if (action === 'create' || action === 'update' || action === 'create_run') {
            const v = value as { metadata?: Record<string, unknown> | null };
            v.metadata = { ...v.metadata, owner: user.identity };
          }
          return { owner: user.identity };
        })
        .on('store', ({ value, user }) => {
          if (value.namespace?.length && !value.namespace.includes(user.identity))
            throw new HTTPException(403, { message: 'Not your namespace' });
          return { namespace: { $contains: user.identity } };
        });
      const ada = await start({ auth: { langgraph: auth } }, { authorization: 'Bearer ada' });
      const { Client } = await import('@langchain/langgraph-sdk');
      const as = (name: string) =>
        new Client({ apiUrl: ada.url, defaultHeaders: { authorization: `Bearer ${name}` } });
      const bob = as('bob');

      const thread = await ada.client.threads.create({ metadata: { topic: 'x' } });
      expect(thread.metadata).toEqual({ topic: 'x', owner: 'ada' });
      await ada.client.runs.wait(thread.thread_id, 'agent', { input: userInput('mine') });
      const state = await ada.client.threads.getState(thread.thread_id);
      expect(JSON.stringify(state.values)).toContain('mine');
      await expect(bob.threads.get(thread.thread_id)).rejects.toThrow(/HTTP 404/);
      await expect(bob.threads.getHistory(thread.thread_id)).rejects.toThrow(/HTTP 404/);
      await expect(
        bob.runs.create(thread.thread_id, 'agent', { input: userInput('theirs') }),
      ).rejects.toThrow(/HTTP 404/);
      await expect(bob.threads.update(thread.thread_id, { metadata: { a: 1 } })).rejects.toThrow(
        /HTTP 404/,
      );
      expect(await bob.threads.search()).toEqual([]);
      expect((await ada.client.threads.search()).map((t) => t.thread_id)).toEqual([
        thread.thread_id,
      ]);
      // The graph's own assistant has no owner: the handler's filter leaves it out.
      expect(await bob.assistants.search()).toEqual([]);

      await expect(bob.store.putItem(['ada'], 'k', { v: 1 })).rejects.toThrow(
        /HTTP 403: Not your namespace/,
      );
      await bob.store.putItem(['bob', 'notes'], 'k', { v: 2 });
      await ada.client.store.putItem(['ada', 'notes'], 'k', { v: 1 });
      expect((await bob.store.searchItems([])).items.map((i) => i.namespace)).toEqual([
        ['bob', 'notes'],
      ]);
      expect((await bob.store.listNamespaces()).namespaces).toEqual([['bob', 'notes']]);

      // One handler decides, the most specific: crons have none but '*'.
      await expect(as('eve').crons.search()).rejects.toThrow(/HTTP 403: Not authorized/);
      expect(await as('eve').threads.search()).toEqual([]);
      const anonymous = await fetch(`${ada.url}/threads/${thread.thread_id}`);
      expect(anonymous.status).toBe(401);
      expect(anonymous.headers.get('www-authenticate')).toBe('Bearer');
      expect(await anonymous.text()).toBe('Could not validate credentials');
      expect((await fetch(`${ada.url}/info`)).status).toBe(200);
      // An Auth object decides alone: not together with tokens or an authenticate hook.
      await expect(
        start({ auth: { langgraph: auth, tokens: { t: 'ada' } } }),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    });

    it('answers only loopback host names when bound to loopback', async () => {
      const { url } = await start();
      const port = new URL(url).port;
      const { request } = await import('node:http');
      const status = await new Promise<number>((resolve, reject) =>
        request(
          { host: '127.0.0.1', port, path: '/ok', headers: { host: `attacker.example:${port}` } },
          (res) => {
            res.resume();
            resolve(res.statusCode!);
          },
        )
          .on('error', reject)
          .end(),
      );
      expect(status).toBe(421);
      expect((await fetch(`${url}/ok`)).status).toBe(200);
    });
  });
}

async function waitForStatus(
  client: Awaited<ReturnType<typeof serve>>['client'],
  threadId: string,
  runId: string,
  status: string,
) {
  for (let i = 0; i < 500; i++) {
    if ((await client.runs.get(threadId, runId)).status === status) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`run ${runId} never became ${status}`);
}
