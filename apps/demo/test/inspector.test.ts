/// <reference lib="dom" />
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type Inspector, startInspector } from '@cairn/inspector';
import type { Store } from '@cairn/store';
import { createSqliteStore } from '@cairn/store-sqlite';
import { chromiumTestsRun, launchChromium } from '@cairn/test-support';
import { openThread } from '@cairn/thread';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoHashingEmbedder } from '../src/demo-embedder.js';
import { Research } from '../src/research-state.js';
import { runScenario, type ScenarioResult, viewerFor } from '../src/scenario.js';
import { Terminal } from '../src/terminal.js';
import { ARTIFACTS, tempDir } from './helpers.js';

const browserTests = chromiumTestsRun('apps/demo');

let store: Store;
let inspector: Inspector;
let scenario: ScenarioResult;

beforeAll(async () => {
  store = createSqliteStore({ path: join(tempDir(), 'inspector.db') });
  scenario = await runScenario({
    store,
    question: 'How do cover crops change soil nitrogen through microbes and nitrogen fixation?',
    term: new Terminal({ write: () => true }, {}),
  });
  inspector = await startInspector({
    store,
    port: 0,
    allowWrites: true,
    embedder: demoHashingEmbedder(),
    schema: Research,
    viewerFor,
  });
}, 60_000);

afterAll(async () => {
  await inspector?.close();
  await store?.close();
});

async function get(path: string): Promise<{ status: number; body: any }> {
  const res = await fetch(inspector.url + path);
  return { status: res.status, body: await res.json() };
}

interface GraphMessage {
  id: string;
  parentId: string | null;
  type: string | null;
  branch: string;
  onBranches: string[];
  checkpoints: string[];
}

describe('the inspector API', () => {
  it('lists the threads, newest first', async () => {
    const { status, body } = await get('/api/threads');
    expect(status).toBe(200);
    expect(body.items.map((t: { resourceId: string }) => t.resourceId)).toEqual(['bob', 'alice']);
  });

  it("returns a thread's whole message graph: every branch's messages, the checkpoint, the active branch", async () => {
    const { body } = await get(`/api/threads/${scenario.aliceThreadId}`);
    const messages = body.messages as GraphMessage[];
    expect(messages).toHaveLength(scenario.messages);
    expect(
      body.branches.map((b: { name: string; isActive: boolean }) => [b.name, b.isActive]),
    ).toEqual([
      ['main', true],
      ['main-v2', false],
    ]);
    expect(messages.filter((m) => m.branch === 'main')).toHaveLength(19);
    expect(messages.filter((m) => m.branch === 'main-v2')).toHaveLength(9);
    const flagged = messages.filter((m) => m.checkpoints.length > 0);
    expect(flagged).toHaveLength(1);
    expect(flagged[0]!.onBranches).toEqual(['main', 'main-v2']);
    const ids = new Set(messages.map((m) => m.id));
    for (const m of messages) if (m.parentId !== null) expect(ids.has(m.parentId)).toBe(true);
  });

  it('gives the state as of a message and the fields that changed from its parent', async () => {
    const { body: graph } = await get(`/api/threads/${scenario.aliceThreadId}`);
    const plan = (graph.messages as GraphMessage[]).find(
      (m) => m.branch === 'main-v2' && m.type === 'plan',
    )!;
    const { status, body } = await get(
      `/api/threads/${scenario.aliceThreadId}/messages/${plan.id}/state`,
    );
    expect(status).toBe(200);
    expect(body.branch).toBe('main-v2');
    expect(body.state.iteration).toBe(2);
    const changed = body.changes.map((c: { field: string }) => c.field);
    expect(changed).toEqual(expect.arrayContaining(['iteration', 'plan', 'currentObjective']));
    const root = (graph.messages as GraphMessage[]).find((m) => m.parentId === null)!;
    const first = await get(`/api/threads/${scenario.aliceThreadId}/messages/${root.id}/state`);
    expect(first.body.changes.map((c: { field: string }) => c.field)).toEqual(
      expect.arrayContaining(['objective', 'uploadedDatasets']),
    );
  });

  it("agrees with the engine's stateAt for every message of both branches", async () => {
    const { body: graph } = await get(`/api/threads/${scenario.aliceThreadId}`);
    const messages = graph.messages as GraphMessage[];
    for (const branch of ['main-v2', 'main']) {
      // Opening on a branch makes it active: end on main, as the scenario left it.
      const thread = await openThread(store, {
        schema: Research,
        threadId: scenario.aliceThreadId,
        branch,
      });
      for (const m of messages.filter((x) => x.onBranches.includes(branch))) {
        const { body } = await get(`/api/threads/${scenario.aliceThreadId}/messages/${m.id}/state`);
        expect(body.state).toEqual(await thread.stateAt(m.id));
      }
      await thread.close();
    }
    expect((await store.getActiveBranch(scenario.aliceThreadId))?.name).toBe('main');
  }, 30_000);

  it('answers missing things with 404 and bad searches with 400', async () => {
    expect((await get('/api/threads/nope')).status).toBe(404);
    expect((await get(`/api/threads/${scenario.aliceThreadId}/messages/nope/state`)).status).toBe(
      404,
    );
    const empty = await get('/api/memory/search?q=%20');
    expect(empty.status).toBe(400);
    expect(empty.body.error).toMatch(/type some words/);
    expect((await get('/api/memory/search?q=soil&mode=psychic')).status).toBe(400);
  });

  it('searches memory as a conversation: scores, and which ranking found each hit', async () => {
    const { body } = await get(
      `/api/memory/search?q=${encodeURIComponent('hairy vetch plot 7 nodules')}&thread=${scenario.aliceThreadId}`,
    );
    expect(body.hits.length).toBeGreaterThan(0);
    expect(body.hits[0].source).toBe('field-notes-plot7.md');
    for (const h of body.hits) {
      expect(h.score).toBeGreaterThan(0);
      expect(h.sources.length).toBeGreaterThan(0);
    }
    const asBob = await get(
      `/api/memory/search?q=${encodeURIComponent('hairy vetch plot 7 nodules')}&thread=${scenario.bobThreadId}`,
    );
    expect(
      asBob.body.hits.some((h: { source: string }) => h.source === 'field-notes-plot7.md'),
    ).toBe(false);
  });
});

describe.skipIf(!browserTests)('the inspector page in headless Chromium', () => {
  let browser: Browser;

  beforeAll(async () => {
    browser = await launchChromium();
  }, 30_000);
  afterAll(() => browser?.close());

  it('draws the branches, shows the state of a clicked message, switches branches and searches memory', async () => {
    const page = await browser.newPage({ viewport: { width: 1500, height: 950 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    // No outside host: everything the page loads comes from the inspector.
    const outside: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(inspector.url)) outside.push(r.url());
    });
    await page.goto(inspector.url);
    await page.click(`#threads li[data-thread-id="${scenario.aliceThreadId}"]`);
    await page.waitForFunction(
      (n) => document.querySelectorAll('#graph .node').length === n,
      scenario.messages,
    );

    expect(
      await page.$$eval('#branches [data-branch-chip]', (els) =>
        els.map((e) => (e as HTMLElement).dataset.branchChip),
      ),
    ).toEqual(['main', 'main-v2']);
    expect(await page.textContent('#branches .chip.active')).toMatch(/^main\b/);
    expect(await page.$$eval('#graph .node[data-branch="main"]', (els) => els.length)).toBe(19);
    expect(await page.$$eval('#graph .node[data-branch="main-v2"]', (els) => els.length)).toBe(9);
    expect(await page.$$eval('#graph .edge', (els) => els.length)).toBe(scenario.messages - 1);
    expect(
      await page.$$eval('#graph .node[data-checkpoint="after-iteration-1"]', (els) => els.length),
    ).toBe(1);
    expect(await page.textContent('#graph')).toContain('HEAD main ★ active');

    // Click the hypothesis of the alternative branch: its state and what changed.
    await page.click('#graph .node[data-branch="main-v2"][data-type="hypothesis"]');
    await page.waitForSelector('#changes .change');
    expect(await page.textContent('#detail .pill.branch')).toBe('main-v2');
    expect(
      await page.$$eval('#changes .change', (els) =>
        els.map((e) => (e as HTMLElement).dataset.field),
      ),
    ).toContain('hypothesis');
    const state = JSON.parse((await page.textContent('#state-json')) ?? '{}');
    expect(state.iteration).toBe(2);
    expect(state.hypothesis.length).toBeGreaterThan(20);

    await page.fill('#search-input', 'nitrate leaching');
    await page.click('#search-form button');
    await page.waitForSelector('#search-results .hit');
    const found = await page.$$eval('#search-results .hit', (els) =>
      els.map((e) => (e as HTMLElement).dataset.sources),
    );
    expect(found.length).toBeGreaterThan(2);
    for (const f of found) expect(['vector', 'keyword', 'both']).toContain(f);
    expect(await page.textContent('#search-results .hit .score')).toMatch(/^\d\.\d{4}$/);

    mkdirSync(ARTIFACTS, { recursive: true });
    const shot = join(ARTIFACTS, 'inspector.png');
    await page.screenshot({ path: shot });
    expect(statSync(shot).size).toBeGreaterThan(10_000);

    // Switch the active branch from the page; the store agrees.
    await page.click('#branches [data-branch-chip="main-v2"]');
    await page.waitForSelector('#branches .chip.active[data-branch-chip="main-v2"]');
    expect((await store.getActiveBranch(scenario.aliceThreadId))?.name).toBe('main-v2');
    expect(await page.textContent('#graph')).toContain('HEAD main-v2 ★ active');

    // The page is live: a thread written elsewhere shows up without a reload.
    const carol = await openThread(store, {
      schema: Research,
      resourceId: 'carol',
      title: 'A thread written while the page is open',
    });
    await page.waitForSelector(`#threads li[data-thread-id="${carol.id}"]`, { timeout: 10_000 });
    await carol.close();

    expect(errors).toEqual([]);
    expect(outside).toEqual([]);
    await page.close();
  }, 60_000);
});
