/// <reference lib="dom" />
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { defineState, field, reducers } from '@cairn/core';
import type { Store } from '@cairn/store';
import { chromiumTestsRun, launchChromium } from '@cairn/test-support';
import { openThread } from '@cairn/thread';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Inspector, startInspector } from '../src/index.js';
import { addLongThread, openTestStore } from './helpers.js';

const browserTests = chromiumTestsRun('inspector');

const Trip = defineState({
  city: field<string>(),
  ideas: field<string[]>({ reducer: reducers.appendUnique, default: () => [] }),
});
const QUOTED = 'She said "it\'s fine" & left <early>';
const FILLERS = 360;
const LONG = 10_000;

let store: Store;
let readOnly: Inspector;
let writable: Inspector;
let browser: Browser;
let tripId: string;
let longId: string;

/** A trip thread: a root, then on `main` three more messages and two state updates. */
async function addTrip(): Promise<string> {
  const thread = await openThread(store, {
    schema: Trip,
    resourceId: 'ada',
    title: 'Weekend trip',
  });
  thread.add({ role: 'user', data: 'Plan a weekend in Lisbon' });
  await thread.save();
  await thread.update({ city: 'Lisbon', ideas: ['tram 28'] });
  thread.add({ role: 'assistant', data: 'Start with the tram' });
  await thread.save();
  await thread.update({ ideas: ['Belém'], city: QUOTED });
  thread.add([
    { role: 'user', data: 'And for dinner?' },
    { role: 'assistant', data: 'Alfama' },
  ]);
  await thread.save();
  await thread.update({ ideas: ['Alfama'] });
  await thread.close();
  // A branch literally named "__proto__" must be a branch like any other on the page.
  const root = (
    await store.getChain((await store.getBranch(thread.id, 'main'))!.headMessageId!)
  )[0]!;
  await store.createBranch({ threadId: thread.id, name: '__proto__', headMessageId: root.id });
  return thread.id;
}

beforeAll(async () => {
  store = openTestStore();
  await store.transaction(async (tx) => {
    for (let i = 0; i < FILLERS; i++)
      await tx.createThread({ title: `Filler ${i}`, resourceId: `bulk-${i % 3}` });
  });
  tripId = await addTrip();
  longId = await addLongThread(store, LONG);
  readOnly = await startInspector({ store, port: 0, schema: Trip });
  writable = await startInspector({ store, port: 0, schema: Trip, allowWrites: true });
  if (browserTests) {
    // A name of another site that resolves to this machine: DNS rebinding, simulated.
    browser = await launchChromium(['--host-resolver-rules=MAP rebind.test 127.0.0.1']);
  }
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await readOnly?.close();
  await writable?.close();
  await store?.close();
});

async function openPage(inspector: Inspector): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1500, height: 950 } });
  const errors = collectErrors(page);
  await page.goto(inspector.url);
  return { page, errors };
}

/** The page's errors, and every Content-Security-Policy violation it reports. */
function collectErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) errors.push(m.text());
  });
  return errors;
}

async function showThread(page: Page, id: string): Promise<void> {
  await page.waitForSelector(`#threads li[data-thread-id="${id}"]`);
  await page.click(`#threads li[data-thread-id="${id}"]`);
  await page.waitForFunction(
    (tid) => document.querySelector('#graph')?.getAttribute('data-thread-id') === tid,
    id,
  );
}

/** The trip's messages on main, root first. */
async function tripMain() {
  const main = (await store.getBranch(tripId, 'main'))!;
  return store.getChain(main.headMessageId!);
}

/** Opens the page at `url` and waits until it has drawn thread `id`: ms from navigation. */
async function firstPaint(url: string, id: string) {
  const page = await browser.newPage({ viewport: { width: 1500, height: 950 } });
  const errors = collectErrors(page);
  await page.goto(url);
  await page.waitForFunction(
    (tid) => document.querySelector('#graph')?.getAttribute('data-thread-id') === tid,
    id,
    { timeout: 30_000 },
  );
  const ms = await page.evaluate(() => performance.getEntriesByName('cairn:graph')[0]!.startTime);
  return { page, errors, ms };
}

/** Clicks a message of the graph and waits for its state in the detail panel. */
async function showMessage(page: Page, id: string): Promise<void> {
  await page.click(`#graph .node[data-id="${id}"]`);
  await page.waitForFunction(
    (mid) => document.querySelector('#detail')?.getAttribute('data-message-id') === mid,
    id,
  );
}

const activeName = async (id: string) => (await store.getActiveBranch(id))?.name;

describe.skipIf(!browserTests)('the inspector in headless Chromium', () => {
  it('is read-only by default: no write controls, and a write from the page is refused', async () => {
    const { page, errors } = await openPage(readOnly);
    await showThread(page, tripId);
    expect(
      await page.$eval(
        '#branches [data-branch-chip="__proto__"]',
        (e) => (e as HTMLButtonElement).disabled,
      ),
    ).toBe(true);
    await page.click('#graph .node[data-role="assistant"]');
    await page.waitForSelector('#state-json');
    expect(await page.$('#rewind-here')).toBeNull();
    expect(await page.textContent('#detail')).toMatch(
      /Read-only: start the inspector with --allow-writes/,
    );
    const status = await page.evaluate(
      (tid) =>
        fetch(`/api/threads/${tid}/active-branch/__proto__`, { method: 'POST' }).then(
          (r) => r.status,
        ),
      tripId,
    );
    expect(status).toBe(403);
    expect(await activeName(tripId)).toBe('main');
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);

  it('shows the exact state as of a message: escaped text stays text, "__proto__" gets a colour', async () => {
    const { page, errors } = await openPage(readOnly);
    await showThread(page, tripId);
    const dot = await page.$eval(
      '#branches [data-branch-chip="__proto__"] .dot',
      (e) => (e as HTMLElement).style.background,
    );
    expect(dot).toMatch(/^rgb\(/);
    const [root, second] = await tripMain();
    await showMessage(page, second!.id);
    const text = (await page.textContent('#state-json'))!;
    expect(text).toContain(JSON.stringify(QUOTED));
    expect(text).not.toContain('&#39;');
    expect(text).not.toContain('&quot;');
    // appendUnique, as the schema says: the ideas accumulate.
    expect(JSON.parse(text)).toEqual({ city: QUOTED, ideas: ['tram 28', 'Belém'] });
    const changed = await page.$$eval('#changes .change', (els) =>
      els.map((e) => (e as HTMLElement).dataset.field),
    );
    expect(changed.sort()).toEqual(['city', 'ideas']);
    await showMessage(page, root!.id);
    expect(JSON.parse((await page.textContent('#state-json'))!)).toEqual({
      city: 'Lisbon',
      ideas: ['tram 28'],
    });
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);

  it('studio actions: rewind here, fork here, set a checkpoint, switch branches, compare', async () => {
    const { page, errors } = await openPage(writable);
    await showThread(page, tripId);
    const [root] = await tripMain();

    // Rewind to the first message: a new active branch whose head it is.
    await showMessage(page, root!.id);
    await page.fill('#fork-name', 'detour');
    await page.click('#rewind-here');
    await page.waitForSelector('#branches .chip.active[data-branch-chip="detour"]');
    const detour = (await store.getBranch(tripId, 'detour'))!;
    expect(detour).toMatchObject({ isActive: true, headMessageId: root!.id });
    expect(detour.parentBranchId).toBe((await store.getBranch(tripId, 'main'))!.id);

    // The engine agrees on the new branch's state, and can go on from there.
    const engine = await openThread(store, { schema: Trip, threadId: tripId });
    expect(engine.branchName).toBe('detour');
    expect(engine.state).toEqual({ city: 'Lisbon', ideas: ['tram 28'] });
    await engine.update({ ideas: ['Sintra'] });
    await engine.close();

    // Fork without switching: the default name follows the engine's rule.
    await showMessage(page, root!.id);
    await page.click('#fork-here');
    await page.waitForSelector(
      '#branches [data-branch-chip="detour-v2"], #branches [data-branch-chip="main-v2"]',
    );
    const forked = (await store.listBranches(tripId)).at(-1)!;
    expect(forked).toMatchObject({ headMessageId: root!.id, isActive: false });
    expect(await activeName(tripId)).toBe('detour');

    // A checkpoint on the root.
    await showMessage(page, root!.id);
    await page.fill('#checkpoint-name', 'the question');
    await page.click('#set-checkpoint');
    await page.waitForSelector(`#graph .node[data-checkpoint="the question"]`);
    expect(await store.getCheckpoint(tripId, 'the question')).toMatchObject({
      messageId: root!.id,
    });

    // Switch back to main from its chip.
    await page.click('#branches [data-branch-chip="main"]');
    await page.waitForSelector('#branches .chip.active[data-branch-chip="main"]');
    expect(await activeName(tripId)).toBe('main');

    // Compare main with detour side by side.
    await page.selectOption('#compare-a', 'main');
    await page.selectOption('#compare-b', 'detour');
    await page.click('#compare-form button');
    await page.waitForSelector('#compare-table');
    const rows = await page.$$eval('#compare-table tbody tr', (trs) =>
      trs.map((tr) => [
        (tr as HTMLElement).dataset.field,
        tr.className,
        tr.querySelectorAll('td')[2]!.textContent,
      ]),
    );
    expect(rows.map((r) => r[0]).sort()).toEqual(['city', 'ideas']);
    expect(rows.every((r) => r[1] === 'differs')).toBe(true);
    expect(JSON.parse(rows.find((r) => r[0] === 'ideas')![2]!)).toEqual(['tram 28', 'Sintra']);

    // A taken name is refused with the store's message, and nothing is written.
    const before = (await store.listBranches(tripId)).length;
    await showMessage(page, root!.id);
    await page.fill('#fork-name', 'main');
    await page.click('#fork-here');
    await page.waitForFunction(
      () => (document.querySelector('#thread-error')?.textContent ?? '') !== '',
    );
    expect((await store.listBranches(tripId)).length).toBe(before);
    expect(errors).toEqual([]);
    await page.close();
  }, 90_000);

  it('pages through threads, filters by resourceId and searches titles', async () => {
    const { page, errors } = await openPage(readOnly);
    await page.waitForSelector('#threads li[data-thread-id]');
    expect(await page.$$eval('#threads li[data-thread-id]', (els) => els.length)).toBe(100);
    await page.click('#threads-more');
    await page.waitForFunction(
      () => document.querySelectorAll('#threads li[data-thread-id]').length === 200,
    );

    await page.fill('#thread-resource', 'bulk-1');
    await page.click('#thread-filter button');
    await page.waitForFunction(
      () => document.querySelectorAll('#threads li[data-thread-id]').length === 100,
    );
    await page.click('#threads-more');
    await page.waitForFunction(
      (n) => document.querySelectorAll('#threads li[data-thread-id]').length === n,
      FILLERS / 3,
    );
    expect(await page.isHidden('#threads-more')).toBe(true);
    const metas = await page.$$eval('#threads .t-meta', (els) =>
      els.map((e) => e.textContent!.split(' · ')[0]),
    );
    expect(new Set(metas)).toEqual(new Set(['bulk-1']));

    await page.fill('#thread-resource', '');
    await page.fill('#thread-q', 'filler 7');
    await page.click('#thread-filter button');
    await page.waitForFunction(
      () => document.querySelector('#threads-info')?.textContent === '11 found so far',
    );
    const titles = await page.$$eval('#threads .t-title', (els) => els.map((e) => e.textContent));
    // Filler 7 and 70 to 79: the title contains the words, in any case.
    expect(titles.sort()).toEqual([
      'Filler 7',
      ...Array.from({ length: 10 }, (_, i) => `Filler 7${i}`),
    ]);
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);

  it('draws the head of a 10,000-message thread and folds the rest; measures the first paint', async () => {
    // The time from navigation to the graph drawn, for `#thread=` the long thread and, as the
    // baseline, the 4-message trip.
    const baseline = await firstPaint(
      readOnly.url + '#thread=' + encodeURIComponent(tripId),
      tripId,
    );
    await baseline.page.close();
    const { page, errors, ms } = await firstPaint(
      readOnly.url + '#thread=' + encodeURIComponent(longId),
      longId,
    );
    console.log(
      `[inspector] first paint in Chromium: ${LONG.toLocaleString('en')}-message thread ${ms.toFixed(0)} ms, 4-message thread ${baseline.ms.toFixed(0)} ms (after navigation)`,
    );
    mkdirSync(new URL('../test-artifacts/', import.meta.url), { recursive: true });
    writeFileSync(
      new URL('../test-artifacts/first-paint.json', import.meta.url),
      `${JSON.stringify({ messages: LONG, firstPaintMs: Math.round(ms), baselineMs: Math.round(baseline.ms), at: new Date().toISOString() })}\n`,
    );
    expect(await page.getAttribute('#threads li.selected', 'data-thread-id')).toBe(longId);
    expect(await page.$$eval('#graph .node', (els) => els.length)).toBe(50);
    expect(await page.textContent('#graph .fold')).toContain(
      `${(LONG - 50).toLocaleString('en')} earlier messages`,
    );
    expect(await page.textContent('#graph')).toContain('HEAD main ★ active');
    await page.click('#graph .fold');
    await page.waitForFunction(
      () => document.querySelectorAll('#graph .node').length === 200,
      undefined,
      { timeout: 30_000 },
    );
    expect(await page.textContent('#graph .fold')).toContain(
      `${(LONG - 200).toLocaleString('en')} earlier messages`,
    );
    expect(errors).toEqual([]);
    await page.close();
  }, 90_000);

  describe('only the page itself may write', () => {
    let attacker: Server;
    let attackerUrl: string;

    beforeAll(async () => {
      attacker = createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end('<!doctype html><title>elsewhere</title><p>another site</p>');
      });
      await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
      attackerUrl = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
    });
    afterAll(() => new Promise<void>((resolve) => attacker.close(() => resolve())));

    it('refuses a name of another site resolving to this machine (DNS rebinding)', async () => {
      const page = await browser.newPage();
      const res = await page.goto(`http://rebind.test:${writable.port}/`);
      expect(res!.status()).toBe(421);
      const api = await page.goto(`http://rebind.test:${writable.port}/api/threads`);
      expect(api!.status()).toBe(421);
      expect(await api!.text()).not.toContain(tripId);
      await page.close();
    }, 30_000);

    it('refuses writes from a page on another origin, even with a guessed token', async () => {
      const page = await browser.newPage();
      await page.goto(attackerUrl);
      const before = (await store.listThreads({ limit: 1000 })).items.length;
      const outcomes = await page.evaluate(
        async ({ target, tid }) => {
          const tries = [
            fetch(`${target}/api/threads/${tid}/active-branch/__proto__`, {
              method: 'POST',
              mode: 'no-cors',
            }),
            fetch(`${target}/api/threads/planted/active-branch/main`, {
              method: 'POST',
              mode: 'no-cors',
            }),
            fetch(`${target}/api/threads/${tid}/active-branch/__proto__`, {
              method: 'POST',
              headers: { 'x-cairn-token': '0'.repeat(48) },
            }),
          ];
          return Promise.all(
            tries.map((t) =>
              t.then(
                (r) => r.type,
                (e) => String(e),
              ),
            ),
          );
        },
        { target: writable.url, tid: tripId },
      );
      expect(outcomes[0]).toBe('opaque');
      expect(outcomes[2]).toMatch(/TypeError/); // the preflight is never granted
      expect(await activeName(tripId)).toBe('main');
      expect(await store.getThread('planted')).toBeNull();
      expect((await store.listThreads({ limit: 1000 })).items.length).toBe(before);
      await page.close();
    }, 30_000);

    it('answers unknown ids from its own page with 404 and writes nothing', async () => {
      const { page } = await openPage(writable);
      const before = (await store.listThreads({ limit: 1000 })).items.length;
      const statuses = await page.evaluate(async (tid) => {
        const token = document.querySelector<HTMLMetaElement>('meta[name="cairn-token"]')!.content;
        const post = (path: string) =>
          fetch(path, { method: 'POST', headers: { 'x-cairn-token': token } }).then(
            (r) => r.status,
          );
        const script = encodeURIComponent('<script>alert(1)</script>');
        return [
          await post(`/api/threads/${script}/active-branch/main`),
          await post('/api/threads/unknown-thread/active-branch/whatever'),
          await post(`/api/threads/${tid}/active-branch/no-such-branch`),
          await post('/api/threads/%ZZ/active-branch/main'),
        ];
      }, tripId);
      expect(statuses).toEqual([404, 404, 404, 400]);
      expect(await store.getThread('<script>alert(1)</script>')).toBeNull();
      expect(await store.getThread('unknown-thread')).toBeNull();
      expect((await store.listThreads({ limit: 1000 })).items.length).toBe(before);
      expect(await activeName(tripId)).toBe('main');
      await page.close();
    }, 30_000);
  });

  it('draws message ids named like Object.prototype members', async () => {
    const thread = await store.createThread({ title: 'Prototype ids' });
    const ids = ['constructor', '__proto__', 'toString', 'valueOf', 'hasOwnProperty'];
    await store.addMessages(
      ids.map((id, i) => ({
        id,
        threadId: thread.id,
        parentId: i === 0 ? null : ids[i - 1]!,
        role: 'user',
        data: `message ${id}`,
      })),
    );
    await store.createBranch({ threadId: thread.id, name: 'main', headMessageId: ids.at(-1)! });
    const { page, errors } = await firstPaint(
      `${readOnly.url}/#thread=${encodeURIComponent(thread.id)}`,
      thread.id,
    );
    const drawn = await page.$$eval('#graph .node', (els) =>
      els.map((e) => (e as HTMLElement).dataset.id),
    );
    expect(drawn.sort()).toEqual([...ids].sort());
    expect(await page.$$eval('#graph path.edge', (els) => els.length)).toBe(ids.length - 1);
    await showMessage(page, '__proto__');
    expect(await page.textContent('#detail .msg-text')).toBe('message __proto__');
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);

  it('on 0.0.0.0: the printed address with its token opens the page, which then works', async () => {
    const lan = await startInspector({ store, port: 0, host: '0.0.0.0', schema: Trip });
    try {
      const page = await browser.newPage({ viewport: { width: 1500, height: 950 } });
      const errors = collectErrors(page);
      const refused = await page.goto(`http://127.0.0.1:${lan.port}/`);
      expect(refused!.status()).toBe(401);
      await page.goto(`http://127.0.0.1:${lan.port}/?token=${lan.accessToken}`);
      // The token left the address for a cookie; the page reads the threads with it.
      expect(new URL(page.url()).search).toBe('');
      await showThread(page, tripId);
      expect(await page.$$eval('#graph .node', (els) => els.length)).toBeGreaterThan(0);
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      await lan.close();
    }
  }, 60_000);
});
