// A chat page built on useStream (@langchain/langgraph-sdk/react) against the server, in
// headless Chromium: send and watch the tokens stream in, reload mid-stream and rejoin the
// same run, edit the first message to branch the thread and switch between the branches.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '@cairn/store-sqlite';
import { chromiumTestsRun, launchChromium } from '@cairn/test-support';
import { build } from 'esbuild';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve } from './support.js';

const browserTests = chromiumTestsRun('server chat page');
const ANSWER = '1 messages so far; you said: hello';

describe.runIf(browserTests)('a useStream chat page against the server', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-chat-page-'));
  const store = createSqliteStore({ path: join(dir, 'chat.db') });
  let browser: Browser;
  let page: Server;
  let pageUrl: string;
  let api: Awaited<ReturnType<typeof serve>>;

  beforeAll(async () => {
    await build({
      entryPoints: [join(import.meta.dirname, 'chat-page/chat.tsx')],
      bundle: true,
      format: 'esm',
      jsx: 'automatic',
      platform: 'browser',
      define: { 'process.env.NODE_ENV': '"production"' },
      outfile: join(dir, 'chat.js'),
      logLevel: 'error',
    });
    writeFileSync(
      join(dir, 'index.html'),
      '<!doctype html><div id="root"></div><script type="module" src="/chat.js"></script>',
    );
    page = createServer(async (req, res) => {
      const file = req.url?.startsWith('/chat.js') ? 'chat.js' : 'index.html';
      res.writeHead(200, {
        'content-type': file.endsWith('.js') ? 'text/javascript' : 'text/html',
      });
      res.end(await readFile(join(dir, file)));
    });
    await new Promise<void>((r) => page.listen(0, '127.0.0.1', r));
    const origin = `http://127.0.0.1:${(page.address() as { port: number }).port}`;
    api = await serve(store, { corsOrigins: [origin] });
    pageUrl = `${origin}/?api=${encodeURIComponent(api.url)}`;
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await api?.server.close();
    page?.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const aiText = (p: Page) => p.locator('li.message.ai .text').last().textContent();
  /** The AI answer's text as it grows, until `done`: each distinct length seen. */
  async function watchAnswer(p: Page, done: string): Promise<string[]> {
    const seen: string[] = [];
    for (let i = 0; i < 2000; i++) {
      const text = (await p.locator('li.message.ai .text').count()) ? await aiText(p) : null;
      if (text && text !== seen.at(-1)) seen.push(text);
      if (text === done) return seen;
      await p.waitForTimeout(5);
    }
    throw new Error(`the answer never became ${JSON.stringify(done)}; saw ${JSON.stringify(seen)}`);
  }

  it('streams tokens, rejoins the run after a reload, and branches on an edit', async () => {
    const p = await browser.newPage();
    const errors: string[] = [];
    p.on('pageerror', (e) => errors.push(e.message));
    await p.goto(pageUrl);
    await p.fill('#draft', 'hello');
    await p.click('#send');

    // Tokens arrive one by one: the answer grows before it is whole.
    await p.locator('li.message.ai .text').first().waitFor();
    await p.waitForFunction(
      () => (document.querySelector('li.message.ai .text')?.textContent ?? '').length >= 5,
    );
    const before = (await aiText(p))!;
    expect(before.length).toBeLessThan(ANSWER.length);
    expect(ANSWER.startsWith(before)).toBe(true);

    // Reload mid-stream: the page rejoins the same run and sees it through.
    await p.reload();
    const afterReload = await watchAnswer(p, ANSWER);
    expect(afterReload.length).toBeGreaterThan(1);
    expect(afterReload.every((t) => ANSWER.startsWith(t))).toBe(true);
    await p.locator('#status', { hasText: 'idle' }).waitFor();
    const threadId = new URL(p.url()).searchParams.get('thread')!;
    expect((await api.client.runs.list(threadId)).map((r) => r.status)).toEqual(['success']);

    // Edit the first message: a new branch from before it.
    await p.click('li.message.human .edit');
    await p.fill('.edit-input', 'bye');
    await p.click('.edit-form button[type=submit]');
    await watchAnswer(p, '1 messages so far; you said: bye');
    await p.locator('#status', { hasText: 'idle' }).waitFor();
    await p.locator('li.message.human[data-branches="2"]').waitFor();
    expect(await p.locator('li.message .text').allTextContents()).toEqual([
      'bye',
      '1 messages so far; you said: bye',
    ]);

    // Back to the first branch.
    await p.click('li.message.human .branch[data-current=false]');
    await p.locator('li.message.ai .text', { hasText: ANSWER }).waitFor();
    expect(await p.locator('li.message .text').allTextContents()).toEqual(['hello', ANSWER]);
    expect(errors).toEqual([]);
  }, 120_000);
});
