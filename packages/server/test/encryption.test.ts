// The server on an encrypted store: runs seal what they store, and a thread whose data does
// not open (a server without the keyring, a destroyed data key) is answered 410 with the
// store's reason, not 500.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { localKeyring, type Store } from '@cairn/store';
import { createSqliteStore } from '@cairn/store-sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { serve, userInput } from './support.js';

const encryption = { keyring: localKeyring('the server test secret, thirty-two bytes or more') };

describe('cairn server on an encrypted store', () => {
  const opened: Array<{ close(): Promise<void> }> = [];
  const dirs: string[] = [];
  afterEach(async () => {
    for (const o of opened.splice(0).reverse()) await o.close();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const open = (path: string, sealed: boolean): Store => {
    const store = createSqliteStore({ path }, sealed ? { encryption } : {});
    opened.push(store);
    return store;
  };

  it('answers 410 with the reason for a thread whose data does not open', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-server-sealed-'));
    dirs.push(dir);
    const path = join(dir, 'serve.db');
    const sealed = await serve(open(path, true));
    opened.push(sealed.server);
    const thread = await sealed.client.threads.create();
    await sealed.client.runs.wait(thread.thread_id, 'agent', { input: userInput('hello') });
    const state = await sealed.client.threads.getState<{ messages: Array<{ content: string }> }>(
      thread.thread_id,
    );
    expect(state.values.messages.map((m) => m.content)).toEqual([
      'hello',
      '1 messages so far; you said: hello',
    ]);

    // Another server on the same file, without the keyring.
    const plain = await serve(open(path, false));
    opened.push(plain.server);
    const res = await fetch(`${plain.url}/threads/${thread.thread_id}/state`);
    expect(res.status).toBe(410);
    expect(await res.text()).toMatch(/is sealed: open the store with encryption/);
  });
});
