import { join } from 'node:path';
import type { Store } from '@cairn/store';
import { createSqliteStore } from '@cairn/store-sqlite';
import { openThread } from '@cairn/thread';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDemoArgs } from '../src/args.js';
import { loadCorpus } from '../src/corpus.js';
import { Research } from '../src/research-state.js';
import {
  CHECKPOINT,
  createDemoMemory,
  runScenario,
  type ScenarioResult,
  viewerFor,
} from '../src/scenario.js';
import { Terminal } from '../src/terminal.js';
import { tempDir } from './helpers.js';

const QUESTION = 'How do cover crops change soil nitrogen through microbes and nitrogen fixation?';
const STEPS = ['plan', 'literature', 'hypothesis', 'reflect', 'discoveries', 'compose', 'reply'];

function quietTerminal(): { term: Terminal; text: () => string } {
  let out = '';
  return { term: new Terminal({ write: (s: string) => (out += s) }, {}), text: () => out };
}

describe('the research scenario', () => {
  let store: Store;
  let result: ScenarioResult;
  const corpus = loadCorpus();

  beforeAll(async () => {
    store = createSqliteStore({ path: join(tempDir(), 'scenario.db') });
    result = await runScenario({ store, question: QUESTION, term: quietTerminal().term });
  }, 60_000);
  afterAll(() => store.close());

  it('leaves Alice a thread with two branches, the checkpoint on main, and main active', async () => {
    expect(result.branches).toEqual(['main', 'main-v2']);
    const branches = await store.listBranches(result.aliceThreadId);
    expect(branches.find((b) => b.isActive)?.name).toBe('main');
    const [checkpoint] = await store.listCheckpoints(result.aliceThreadId);
    expect(checkpoint?.name).toBe(CHECKPOINT);
    const v2 = branches.find((b) => b.name === 'main-v2')!;
    expect(v2.forkMessageId).toBe(checkpoint!.messageId);
    const fork = await store.getMessage(checkpoint!.messageId);
    expect(fork).toMatchObject({ role: 'assistant', type: 'reply' });
    expect((await store.getThread(result.aliceThreadId))?.title).toBe(
      'Cover crops, soil nitrogen & microbes',
    );
  });

  it('keeps every parallel task result, insights without duplicates, and discoveries with real evidence', async () => {
    const thread = await openThread(store, { schema: Research, threadId: result.aliceThreadId });
    const s = thread.state;
    expect(s.iteration).toBe(2);
    expect(Object.keys(s.tasks).sort()).toEqual([
      'i1-evidence',
      'i1-management',
      'i1-mechanism',
      'i1-tradeoffs',
      'i2-evidence',
      'i2-management',
      'i2-mechanism',
      'i2-tradeoffs',
    ]);
    expect(new Set(s.keyInsights).size).toBe(s.keyInsights.length);
    expect(s.keyInsights.length).toBeGreaterThanOrEqual(3);
    expect(s.uploadedDatasets).toEqual([
      expect.objectContaining({ name: 'field-notes-plot7.md', uploadedBy: 'alice' }),
    ]);
    const docs = new Map(corpus.map((d) => [d.id, d.text.replace(/\s+/g, ' ')]));
    const discoveries = Object.values(s.discoveries);
    expect(discoveries.length).toBeGreaterThanOrEqual(3);
    for (const d of discoveries) {
      expect(d.evidence.length).toBeGreaterThan(0);
      for (const e of d.evidence) expect(docs.get(e.docId)).toContain(e.quote);
    }
    expect(s.sourcesConsulted.length).toBeGreaterThan(5);
    await thread.close();
  });

  it('forked the state at the checkpoint: main-v2 explored another objective from iteration 1', async () => {
    const main = await openThread(store, { schema: Research, threadId: result.aliceThreadId });
    const mainState = main.state;
    const checkpoint = (await main.checkpoints())[0]!;
    const atCheckpoint = await main.stateAt(checkpoint.messageId);
    expect(atCheckpoint.iteration).toBe(1);
    await main.close();
    const v2 = await openThread(store, {
      schema: Research,
      threadId: result.aliceThreadId,
      branch: 'main-v2',
    });
    expect(v2.state.iteration).toBe(2);
    expect(v2.state.currentObjective).not.toBe(mainState.currentObjective);
    expect(v2.state.objective).toBe(QUESTION);
    // What main learned after the checkpoint is not on main-v2, and the reverse.
    expect(Object.keys(v2.state.discoveries)).not.toEqual(Object.keys(mainState.discoveries));
    await v2.switchBranch('main');
    await v2.close();
  });

  it('records each turn with timed steps and its turn-scoped findings', async () => {
    const turns = await store.listTurns(result.aliceThreadId, { limit: 10 });
    expect(turns).toHaveLength(3);
    for (const t of turns) {
      expect(t.status).toBe('finished');
      expect(t.steps.map((s) => s.name)).toEqual(STEPS);
      for (const s of t.steps) expect(s.end).toBeGreaterThanOrEqual(s.start);
      expect((t.state.turnFindings as unknown[]).length).toBeGreaterThan(4);
    }
  });

  it('ran the research under a lease that ended completed', async () => {
    const thread = await openThread(store, { schema: Research, threadId: result.aliceThreadId });
    const run = await thread.runStatus();
    expect(run).toMatchObject({ isRunning: false, lastResult: 'completed' });
    await thread.close();
  });

  it("recalls Alice's uploaded notes in her conversation only", async () => {
    const memory = createDemoMemory(store);
    const query = 'hairy vetch plot 7 nodules pink';
    const forAlice = await memory.recall(query, {
      viewer: viewerFor(result.aliceThreadId),
      limit: 5,
    });
    const forBob = await memory.recall(query, { viewer: viewerFor(result.bobThreadId), limit: 50 });
    expect(forAlice[0]?.memory.metadata.upload).toBe('field-notes-plot7.md');
    expect(forBob.length).toBeGreaterThan(0);
    expect(forBob.some((h) => h.memory.roomId === result.aliceThreadId)).toBe(false);
  });
});

describe('a scenario that fails half-way', () => {
  it('deletes the threads it wrote, and says why', async () => {
    const real = createSqliteStore({ path: join(tempDir(), 'failing.db') });
    const failing = new Proxy(real, {
      get(target, prop, receiver) {
        if (prop === 'saveCheckpoint')
          return async () => Promise.reject(new Error('disk full (simulated)'));
        const value = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    await expect(
      runScenario({ store: failing, question: QUESTION, term: quietTerminal().term }),
    ).rejects.toThrow('disk full (simulated)');
    expect((await real.listThreads()).items).toEqual([]);
    expect(await real.countMemories({ scopes: ['room'] })).toBe(0);
    expect(await real.countMemories({ types: ['document'] })).toBe(36);
    await real.close();
  }, 60_000);
});

describe('command-line options', () => {
  it('defaults to the SQLite file .cairn/cairn.db under the directory it was started in', () => {
    expect(parseDemoArgs([], '/home/me')).toMatchObject({
      command: 'run',
      db: '/home/me/.cairn/cairn.db',
      dbKind: 'sqlite',
      port: 4319,
      fresh: false,
    });
  });
  it('knows serve, --serve, --port, --fresh and postgres URLs', () => {
    expect(parseDemoArgs(['serve'], '/x').command).toBe('serve');
    expect(parseDemoArgs(['--', '--serve', '--port', '5000'], '/x')).toMatchObject({
      command: 'serve',
      port: 5000,
    });
    expect(parseDemoArgs(['--db', 'postgresql://u@h/db', '--fresh'], '/x')).toMatchObject({
      dbKind: 'postgres',
      db: 'postgresql://u@h/db',
      fresh: true,
    });
  });
  it('rejects other URLs, empty --db and questions without words', () => {
    expect(() => parseDemoArgs(['--db', 'mysql://h/db'], '/x')).toThrow(
      /only SQLite file paths and postgres:\/\/ URLs/,
    );
    expect(() => parseDemoArgs(['--db', ''], '/x')).toThrow(/--db is empty/);
    expect(() => parseDemoArgs(['-q', '?? !!'], '/x')).toThrow(/has no words to search for/);
  });
});
