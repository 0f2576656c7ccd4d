import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../src/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'cairn-processes-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function start(
  script: string,
  args: string[],
): {
  child: ChildProcess;
  done: Promise<{ code: number | null; signal: string | null; out: string; err: string }>;
} {
  const child = spawn(process.execPath, [join(here, 'fixtures', script), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => {
    out += d;
  });
  child.stderr!.on('data', (d) => {
    err += d;
  });
  const done = new Promise<{
    code: number | null;
    signal: string | null;
    out: string;
    err: string;
  }>((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal, out, err }));
  });
  return { child, done };
}

describe('several processes on one file', () => {
  it('4 processes x 250 state commits and head moves on one branch lose nothing', async () => {
    const path = join(dir, 'shared.db');
    const store = createSqliteStore({ path });
    const thread = await store.createThread({});
    const [root] = await store.addMessages([
      { threadId: thread.id, parentId: null, role: 'user', data: 'root' },
    ]);
    const branch = await store.createBranch({
      threadId: thread.id,
      name: 'main',
      headMessageId: root!.id,
    });
    const WORKERS = 4;
    const EACH = 250;
    const runs = Array.from(
      { length: WORKERS },
      (_, w) => start('commit-worker.mjs', [path, branch.id, String(w), String(EACH)]).done,
    );
    const results = await Promise.all(runs);
    for (const r of results) expect(r.code, r.err).toBe(0);
    const conflicts = results.map((r) => (JSON.parse(r.out) as { conflicts: number }).conflicts);
    console.info(`CONFLICTs retried by the 4 processes: ${conflicts.join(', ')}`);

    const commits = await store.getStateCommits(branch.id);
    expect(commits.map((c) => c.version)).toEqual(
      Array.from({ length: WORKERS * EACH }, (_, i) => i + 1),
    );
    const seen = new Set(commits.map((c) => `${c.update.worker}:${c.update.i}`));
    expect(seen.size).toBe(WORKERS * EACH);
    for (let w = 0; w < WORKERS; w++) {
      // Each worker's commits are in its own order.
      const mine = commits.filter((c) => c.update.worker === w).map((c) => c.update.i);
      expect(mine).toEqual(Array.from({ length: EACH }, (_, i) => i));
    }

    const head = (await store.getBranchById(branch.id))!.headMessageId!;
    const chain = await store.getChain(head);
    expect(chain).toHaveLength(1 + WORKERS * EACH);
    const moved = new Set(chain.slice(1).map((m) => JSON.stringify(m.data)));
    expect(moved.size).toBe(WORKERS * EACH);
    await store.close();
  }, 120_000);
});

describe('crash safety', () => {
  it('a process killed in the middle of a large addMessages leaves all of it or none, and a sound file', async () => {
    const path = join(dir, 'crash.db');
    const setup = createSqliteStore({ path });
    const thread = await setup.createThread({});
    const [keep] = await setup.addMessages([
      { threadId: thread.id, parentId: null, role: 'user', data: 'before' },
    ]);
    await setup.close();

    const SIZE = 200_000;
    const { child, done } = start('crash-worker.mjs', [path, thread.id, String(SIZE)]);
    const wal = `${path}-wal`;
    // Kill once the batch is being written: the uncommitted transaction has spilled
    // pages into the WAL, well past its size when writing began.
    let startSize = -1;
    let output = '';
    child.stdout!.on('data', (d) => {
      output += d;
    });
    const killed = new Promise<void>((resolve, reject) => {
      const poll = setInterval(() => {
        if (output.includes('done')) {
          clearInterval(poll);
          reject(new Error('the batch finished before the test could kill it; make it larger'));
          return;
        }
        if (!output.includes('writing')) return;
        const size = existsSync(wal) ? statSync(wal).size : 0;
        if (startSize < 0) startSize = size;
        else if (size > startSize + 4 * 1024 * 1024) {
          clearInterval(poll);
          child.kill('SIGKILL');
          resolve();
        }
      }, 2);
    });
    await killed;
    const exit = await done;
    expect(exit.signal).toBe('SIGKILL');
    expect(exit.out).not.toContain('done');

    const db = new Database(path);
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    db.close();
    const after = createSqliteStore({ path });
    expect((await after.listThreads()).items.map((t) => t.id)).toEqual([thread.id]);
    const stored = await after.getMessage('crash-0');
    const last = await after.getMessage(`crash-${SIZE - 1}`);
    // All or none: the first and last of the batch agree, and the chain is whole or absent.
    expect(stored === null).toBe(last === null);
    if (last) expect(await after.getChain(last.id)).toHaveLength(SIZE);
    expect(stored).toBeNull(); // killed before its commit, so none of it
    expect((await after.getChain(keep!.id)).map((m) => m.data)).toEqual(['before']);
    // The file still takes writes.
    await after.addMessages([
      { threadId: thread.id, parentId: keep!.id, role: 'user', data: 'after' },
    ]);
    await after.close();
  }, 120_000);
});
