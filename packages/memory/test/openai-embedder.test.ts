import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isCairnError } from '@cairn/core';
import { createMemoryStore } from '@cairn/store';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createMemory, openAIEmbedder } from '../src/index.js';
import { rejects } from './helpers.js';

type Handler = (
  req: IncomingMessage,
  body: { model: string; input: string[]; dimensions?: number },
  res: ServerResponse,
) => void;

let server: Server;
let baseURL: string;
let handler: Handler;
const requests: Array<{
  headers: IncomingMessage['headers'];
  body: { model: string; input: string[]; dimensions?: number };
}> = [];

const vector = (text: string, width: number) =>
  Array.from({ length: width }, (_, i) => ((text.length + i) % 7) / 7);
const ok =
  (width = 4, shuffle = false): Handler =>
  (_req, body, res) => {
    const data = body.input.map((t, index) => ({
      object: 'embedding',
      index,
      embedding: vector(t, width),
    }));
    if (shuffle) data.reverse();
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ object: 'list', data }));
  };

beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = JSON.parse(raw);
      requests.push({ headers: req.headers, body });
      handler(req, body, res);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  server.closeAllConnections();
  server.close();
});
beforeEach(() => {
  requests.length = 0;
  handler = ok();
});

describe('openAIEmbedder', () => {
  it('posts batches to /embeddings with the model, key and dimensions, and keeps the order', async () => {
    handler = ok(4, true);
    const e = openAIEmbedder({
      baseURL,
      apiKey: 'sk-test',
      model: 'm',
      dimensions: 4,
      batchSize: 2,
    });
    expect(e.id).toBe('openai:m:4');
    const texts = ['a', 'bb', 'ccc', 'dddd', 'eeeee'];
    const out = await e.embed(texts);
    expect(out).toEqual(texts.map((t) => vector(t, 4)));
    expect(requests.map((r) => r.body.input)).toEqual([['a', 'bb'], ['ccc', 'dddd'], ['eeeee']]);
    expect(requests[0]!.body).toMatchObject({ model: 'm', dimensions: 4 });
    expect(requests[0]!.headers.authorization).toBe('Bearer sk-test');
  });

  it('retries a 429 and honours Retry-After rather than its own back-off', async () => {
    let n = 0;
    handler = (req, body, res) => {
      if (n++ === 0) res.writeHead(429, { 'retry-after': '0' }).end('slow down');
      else ok()(req, body, res);
    };
    // A back-off of a minute would time the test out: only Retry-After: 0 lets it pass.
    const e = openAIEmbedder({
      baseURL,
      model: 'm',
      dimensions: 4,
      retryBaseMs: 60_000,
      maxRetryDelayMs: 60_000,
    });
    expect(await e.embed(['x'])).toEqual([vector('x', 4)]);
    expect(requests).toHaveLength(2);
  });

  it('retries 5xx with back-off, then fails with EMBEDDER_FAILED after maxRetries', async () => {
    handler = (_req, _body, res) => res.writeHead(503).end('unavailable');
    const e = openAIEmbedder({ baseURL, model: 'm', dimensions: 4, maxRetries: 2, retryBaseMs: 5 });
    const err = await rejects(e.embed(['x']));
    expect(isCairnError(err, 'EMBEDDER_FAILED')).toBe(true);
    expect((err as Error).message).toMatch(/HTTP 503.*3 attempt/);
    expect(requests).toHaveLength(3);

    requests.length = 0;
    let n = 0;
    handler = (req, body, res) => (n++ < 2 ? res.writeHead(500).end() : ok()(req, body, res));
    expect(
      await openAIEmbedder({ baseURL, model: 'm', dimensions: 4, retryBaseMs: 5 }).embed(['y']),
    ).toHaveLength(1);
    expect(requests).toHaveLength(3);
  });

  it('does not retry a refused request (400, 401)', async () => {
    handler = (_req, _body, res) => res.writeHead(401).end('{"error":"bad key"}');
    const err = await rejects(
      openAIEmbedder({ baseURL, model: 'm', dimensions: 4, retryBaseMs: 5 }).embed(['x']),
    );
    expect(isCairnError(err, 'EMBEDDER_FAILED')).toBe(true);
    expect((err as { details: { status: number } }).details.status).toBe(401);
    expect(requests).toHaveLength(1);
  });

  it('times out slow responses (retrying them), then fails with TIMEOUT', async () => {
    const pending: ServerResponse[] = [];
    handler = (_req, _body, res) => pending.push(res); // never answers
    const e = openAIEmbedder({
      baseURL,
      model: 'm',
      dimensions: 4,
      timeoutMs: 50,
      maxRetries: 1,
      retryBaseMs: 1,
    });
    const err = await rejects(e.embed(['x']));
    expect(isCairnError(err, 'TIMEOUT')).toBe(true);
    expect(requests).toHaveLength(2);
    for (const res of pending) res.destroy();
  });

  it('rejects vectors of the wrong width and a wrong number of vectors', async () => {
    handler = ok(3);
    const err = await rejects(openAIEmbedder({ baseURL, model: 'm', dimensions: 4 }).embed(['x']));
    expect(isCairnError(err, 'EMBEDDER_FAILED')).toBe(true);
    expect((err as Error).message).toMatch(/3 dimensions.*expected 4/);
    handler = (_req, _body, res) => res.writeHead(200).end(JSON.stringify({ data: [] }));
    expect(
      isCairnError(
        await rejects(openAIEmbedder({ baseURL, model: 'm', dimensions: 4 }).embed(['x'])),
        'EMBEDDER_FAILED',
      ),
    ).toBe(true);
  });

  it("stops when the caller's signal aborts", async () => {
    const pending: ServerResponse[] = [];
    handler = (_req, _body, res) => pending.push(res);
    const controller = new AbortController();
    const p = openAIEmbedder({ baseURL, model: 'm', dimensions: 4 }).embed(['x'], {
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(), 20);
    expect(isCairnError(await rejects(p), 'ABORTED')).toBe(true);
    for (const res of pending) res.destroy();
  });

  it('reads OPENAI_API_KEY and OPENAI_BASE_URL like the OpenAI SDK, and defaults the model', async () => {
    const saved = { key: process.env.OPENAI_API_KEY, url: process.env.OPENAI_BASE_URL };
    try {
      process.env.OPENAI_API_KEY = 'sk-from-env';
      process.env.OPENAI_BASE_URL = baseURL;
      handler = ok(1536);
      const e = openAIEmbedder();
      expect(e.id).toBe('openai:text-embedding-3-small:1536');
      expect(await e.embed(['x'])).toHaveLength(1);
      expect(requests[0]!.headers.authorization).toBe('Bearer sk-from-env');
      expect(requests[0]!.body).toMatchObject({ model: 'text-embedding-3-small' });
      delete process.env.OPENAI_API_KEY;
      delete process.env.OPENAI_BASE_URL;
      expect(() => openAIEmbedder()).toThrow(/OPENAI_API_KEY/);
      expect(openAIEmbedder({ baseURL, model: 'm', dimensions: 4 }).id).toBe('openai:m:4');
    } finally {
      for (const [name, value] of [
        ['OPENAI_API_KEY', saved.key],
        ['OPENAI_BASE_URL', saved.url],
      ] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it('needs dimensions for an unknown model, and knows OpenAI models', () => {
    expect(() => openAIEmbedder({ baseURL, model: 'mystery' })).toThrow(/dimensions is required/);
    expect(openAIEmbedder({ baseURL, model: 'text-embedding-3-small' }).dimensions).toBe(1536);
  });

  it('through createMemory: a failing endpoint fails the call with EMBEDDER_FAILED and stores nothing', async () => {
    handler = (_req, _body, res) => res.writeHead(500).end();
    const store = createMemoryStore();
    const memory = createMemory({
      store,
      agentId: 'a',
      embedder: openAIEmbedder({
        baseURL,
        model: 'm',
        dimensions: 4,
        maxRetries: 1,
        retryBaseMs: 1,
      }),
    });
    const err = await rejects(memory.remember({ text: 'hello' }));
    expect(isCairnError(err, 'EMBEDDER_FAILED')).toBe(true);
    expect((err as Error).message).toContain('HTTP 500');
    expect(await store.countMemories()).toBe(0);
    handler = ok();
    const m = await memory.remember({ text: 'hello' });
    expect(m.embedding).toEqual(vector('hello', 4));
  });
});
