import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { localKeyring, type Store } from '@cairn/store';
import { createSqliteStore } from '@cairn/store-sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Inspector, startInspector } from '../src/index.js';
import { openTestStore, seedThread } from './helpers.js';

/** A raw HTTP request, so that Host, Origin and the other headers are exactly as given. */
function call(
  inspector: Inspector,
  method: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any; headers: Record<string, string | string[] | undefined> }> {
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
            headers: res.headers,
            status: res.statusCode ?? 0,
            body: type.startsWith('application/json') && text !== '' ? JSON.parse(text) : text,
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

describe('reachable from the network: every request needs the access token', () => {
  it('on 0.0.0.0 refuses reads without the token, whatever the Host says', async () => {
    const lan = await startInspector({ store, port: 0, host: '0.0.0.0', allowWrites: true });
    try {
      const token = lan.accessToken!;
      expect(token).toMatch(/^[0-9a-f]{48}$/);
      // A forged loopback Host was enough before: the database and the write token.
      for (const path of ['/', '/api/threads', `/api/threads/${threadId}`]) {
        for (const host of [`localhost:${lan.port}`, `192.168.1.20:${lan.port}`]) {
          const res = await call(lan, 'GET', path, { host });
          expect(res.status, `${path} ${host}`).toBe(401);
          expect(JSON.stringify(res.body)).not.toContain('cairn-token');
        }
      }
      for (const headers of <Array<Record<string, string>>>[
        { authorization: 'Bearer wrong' },
        { cookie: `cairn-inspector-${lan.port}=${'0'.repeat(48)}` },
      ]) {
        expect((await call(lan, 'GET', '/api/threads', headers)).status).toBe(401);
      }
      // The address printed: the token moves into an HttpOnly cookie of this port.
      const open = await call(lan, 'GET', `/?token=${token}`, {
        host: `192.168.1.20:${lan.port}`,
      });
      expect(open.status).toBe(302);
      expect(open.headers.location).toBe('/');
      const cookie = String(open.headers['set-cookie']);
      expect(cookie).toBe(
        `cairn-inspector-${lan.port}=${token}; Path=/; HttpOnly; SameSite=Strict`,
      );
      const withCookie = { cookie: cookie.split(';')[0]!, host: `192.168.1.20:${lan.port}` };
      expect((await call(lan, 'GET', '/', withCookie)).status).toBe(200);
      expect((await call(lan, 'GET', '/api/threads', withCookie)).status).toBe(200);
      const bearer = { authorization: `Bearer ${token}` };
      expect((await call(lan, 'GET', '/api/threads', bearer)).status).toBe(200);
      // Writes: the access token is not the write token.
      const path = `/api/threads/${threadId}/active-branch/main`;
      expect((await call(lan, 'POST', path, bearer)).status).toBe(403);
      expect((await call(lan, 'POST', path, { 'x-cairn-token': token })).status).toBe(401);
    } finally {
      await lan.close();
    }
  });

  it('takes a token of its own, on loopback too; refuses a short one before it listens', async () => {
    const accessToken = 'a-token-of-my-own-choosing';
    const local = await startInspector({ store, port: 0, accessToken });
    try {
      expect(local.accessToken).toBe(accessToken);
      expect((await call(local, 'GET', '/api/threads')).status).toBe(401);
      expect((await call(local, 'GET', `/api/threads?token=${accessToken}`)).status).toBe(200);
      // Still only loopback names in Host.
      expect(
        (await call(local, 'GET', `/api/threads?token=${accessToken}`, { host: 'evil.example' }))
          .status,
      ).toBe(421);
    } finally {
      await local.close();
    }
    expect(readOnly.accessToken).toBeNull();
    await expect(startInspector({ store, port: 0, accessToken: 'short' })).rejects.toThrow(
      'startInspector: accessToken must be 16 to 200 characters of A-Z a-z 0-9 . _ ~ - (got 5 characters)',
    );
  });
});

describe('details of the HTTP surface', () => {
  it('checks the authority of an absolute-form target as it checks Host', async () => {
    const port = readOnly.port;
    const refused = await call(readOnly, 'GET', 'http://evil.example/api/threads');
    expect(refused.status).toBe(421);
    expect(refused.body.error).toContain('evil.example');
    const ok = await call(readOnly, 'GET', `http://127.0.0.1:${port}/api/threads`, {
      host: 'evil.example',
    });
    expect(ok.status).toBe(200);
    expect((await call(readOnly, 'GET', 'ftp://127.0.0.1/api/threads')).status).toBe(400);
  });

  it('answers HEAD like GET, without a body', async () => {
    for (const path of ['/', '/api/threads', '/assets/dagre.min.js']) {
      const res = await call(readOnly, 'HEAD', path);
      expect([res.status, res.body], path).toEqual([200, '']);
    }
    expect((await call(readOnly, 'HEAD', '/nothing-here')).status).toBe(404);
  });

  it('sends a Content-Security-Policy allowing only its own scripts, and no referrer', async () => {
    const page = await call(readOnly, 'GET', '/');
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toMatch(/^default-src 'none'; script-src 'self' 'sha256-[^']+' 'sha256-[^']+';/);
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-eval');
    expect(csp).not.toMatch(/script-src[^;]*unsafe-inline/);
    expect(page.headers['referrer-policy']).toBe('no-referrer');
    const api = await call(readOnly, 'GET', '/api/threads');
    expect(api.headers['content-security-policy']).toBe(
      "default-src 'none'; frame-ancestors 'none'",
    );
    expect(api.headers['referrer-policy']).toBe('no-referrer');
  });

  it('clips thread titles as it clips message texts', async () => {
    const long = await store.createThread({ title: `${'t'.repeat(5000)}end` });
    try {
      const list = await call(readOnly, 'GET', '/api/threads');
      const item = list.body.items.find((t: { id: string }) => t.id === long.id);
      expect(item.title).toBe(`${'t'.repeat(399)}…`);
      const one = await call(readOnly, 'GET', `/api/threads/${long.id}`);
      expect(one.body.thread.title).toBe(`${'t'.repeat(399)}…`);
    } finally {
      await store.deleteThread(long.id);
    }
  });

  it('puts the title into the page as text: $& and $` are not replacement patterns', async () => {
    const title = 'db $& $` $\' $$ <b>"x"';
    const titled = await startInspector({ store, port: 0, title });
    try {
      const { body } = await call(titled, 'GET', '/');
      expect(body.match(/<meta /g)).toHaveLength(4);
      expect(body).toContain(
        '<meta name="cairn-title" content="db $&amp; $` $&#39; $$ &lt;b&gt;&quot;x&quot;">',
      );
    } finally {
      await titled.close();
    }
  });
});

describe('an encrypted store', () => {
  it('answers a thread whose data does not open (a store without the keyring) with 410 and the reason', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-inspector-sealed-'));
    const path = join(dir, 'db');
    const encryption = { keyring: localKeyring('the inspector test secret, 32 bytes or more') };
    const sealed = createSqliteStore({ path }, { encryption });
    const { threadId } = await seedThread(sealed);
    await sealed.close();
    const plain = createSqliteStore({ path });
    const inspector = await startInspector({ store: plain, port: 0 });
    try {
      const res = await call(inspector, 'GET', `/api/threads/${threadId}`);
      expect(res.status).toBe(410);
      expect(res.body).toMatchObject({ code: 'DECRYPTION_FAILED' });
      expect(res.body.error).toMatch(/is sealed: open the store with encryption/);
    } finally {
      await inspector.close();
      await plain.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
