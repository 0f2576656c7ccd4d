import { request } from 'node:http';
import type { Store } from '@cairn/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Inspector, startInspector } from '../src/index.js';
import { openTestStore, seedThread } from './helpers.js';

/** A raw HTTP request, so that Host, Origin and the other headers are exactly as given. */
function call(
  inspector: Inspector,
  method: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: inspector.port,
        method,
        path,
        headers: { host: `127.0.0.1:${inspector.port}`, ...headers },
      },
      (res) => {
        let text = '';
        res.on('data', (d) => {
          text += d;
        });
        res.on('end', () => {
          const type = String(res.headers['content-type']);
          resolve({
            status: res.statusCode ?? 0,
            body: type.startsWith('application/json') ? JSON.parse(text) : text,
          });
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** The token the served page holds (empty when writes are off). */
async function pageToken(inspector: Inspector): Promise<string> {
  const { body } = await call(inspector, 'GET', '/');
  return /<meta name="cairn-token" content="([0-9a-f]*)">/.exec(body)![1]!;
}

async function threadCount(store: Store): Promise<number> {
  return (await store.listThreads({ limit: 1000 })).items.length;
}

let store: Store;
let readOnly: Inspector;
let writable: Inspector;
let threadId: string;

beforeAll(async () => {
  store = openTestStore();
  threadId = (await seedThread(store)).threadId;
  readOnly = await startInspector({ store, port: 0 });
  writable = await startInspector({ store, port: 0, allowWrites: true });
});

afterAll(async () => {
  await readOnly?.close();
  await writable?.close();
  await store?.close();
});

describe('read-only by default', () => {
  it('refuses every write and puts no token in the page', async () => {
    expect(await pageToken(readOnly)).toBe('');
    const res = await call(readOnly, 'POST', `/api/threads/${threadId}/active-branch/alt`, {
      origin: readOnly.url,
    });
    expect(res.status).toBe(403);
    expect(res.body.error).toMatch(/read-only/);
    expect((await store.getActiveBranch(threadId))?.name).toBe('main');
  });
});

describe('only this machine, only the page', () => {
  it('answers only Host values naming loopback or the host it listens on (DNS rebinding)', async () => {
    for (const host of [
      `evil.example:${readOnly.port}`,
      'evil.example',
      '10.0.0.7:80',
      '127.0.0.1.evil.example',
    ]) {
      const res = await call(readOnly, 'GET', '/api/threads', { host });
      expect(res.status, host).toBe(421);
    }
    for (const host of [`localhost:${readOnly.port}`, `127.0.0.1:${readOnly.port}`, 'LOCALHOST']) {
      expect((await call(readOnly, 'GET', '/api/threads', { host })).status, host).toBe(200);
    }
  });

  it('answers for the host it was started on', async () => {
    const named = await startInspector({ store, port: 0, host: '127.0.0.1' });
    try {
      expect((await call(named, 'GET', '/', { host: `[::1]:${named.port}` })).status).toBe(200);
    } finally {
      await named.close();
    }
  });

  it('refuses writes without the token, with a wrong one, or from another origin', async () => {
    const token = await pageToken(writable);
    expect(token).toMatch(/^[0-9a-f]{48}$/);
    const path = `/api/threads/${threadId}/active-branch/alt`;
    const refused: Array<Record<string, string>> = [
      {},
      { 'x-cairn-token': 'f'.repeat(48) },
      { 'x-cairn-token': token, origin: 'http://evil.example' },
      { 'x-cairn-token': token, origin: `http://localhost:${writable.port + 1}` },
      { 'x-cairn-token': token, 'sec-fetch-site': 'cross-site' },
    ];
    for (const headers of refused) {
      const res = await call(writable, 'POST', path, headers);
      expect(res.status, JSON.stringify(headers)).toBe(403);
    }
    expect((await store.getActiveBranch(threadId))?.name).toBe('main');
    const ok = await call(writable, 'POST', path, {
      'x-cairn-token': token,
      origin: writable.url,
      'sec-fetch-site': 'same-origin',
    });
    expect(ok.status).toBe(200);
    expect((await store.getActiveBranch(threadId))?.name).toBe('alt');
    await store.setActiveBranch((await store.getBranch(threadId, 'main'))!.id);
  });

  it('gives each start its own token', async () => {
    const again = await startInspector({ store, port: 0, allowWrites: true });
    try {
      expect(await pageToken(again)).not.toBe(await pageToken(writable));
    } finally {
      await again.close();
    }
  });
});

describe('unknown ids and malformed paths', () => {
  it('answers an unknown thread or branch with 404 and writes nothing', async () => {
    const token = await pageToken(writable);
    const headers = { 'x-cairn-token': token, origin: writable.url };
    const before = await threadCount(store);
    const unknown = ['no-such-thread', '<script>alert(1)</script>', '__proto__'];
    for (const id of unknown) {
      for (const branch of ['main', 'whatever']) {
        const path = `/api/threads/${encodeURIComponent(id)}/active-branch/${branch}`;
        const res = await call(writable, 'POST', path, headers);
        expect(res.status, path).toBe(404);
        expect(res.body.code, path).toBe('NOT_FOUND');
      }
      expect(await store.getThread(id)).toBeNull();
      expect((await call(writable, 'GET', `/api/threads/${encodeURIComponent(id)}`)).status).toBe(
        404,
      );
    }
    const res = await call(
      writable,
      'POST',
      `/api/threads/${threadId}/active-branch/nope`,
      headers,
    );
    expect(res.status).toBe(404);
    expect(await store.getBranch(threadId, 'nope')).toBeNull();
    expect(await threadCount(store)).toBe(before);
    expect((await store.getActiveBranch(threadId))?.name).toBe('main');
  });

  it('answers malformed percent-encoding with 400, not 500', async () => {
    for (const path of ['/api/threads/%', '/api/%ZZ', '/api/threads/%E0%A4%A/messages/x/state']) {
      const res = await call(readOnly, 'GET', path);
      expect(res.status, path).toBe(400);
      expect(res.body.error).toMatch(/percent-encoding/);
    }
  });
});
