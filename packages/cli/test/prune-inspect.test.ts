import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTarget } from '../src/database.js';
import { cairn, cairnHere, kinds, seed, startInspect, type TestDb, testDb } from './support.js';

const DAY = 86_400_000;

describe.each(kinds)('prune and inspect on %s', (kind) => {
  let db: TestDb;
  let recent: Awaited<ReturnType<typeof seed>>;
  beforeAll(async () => {
    db = testDb(kind);
    const store = await db.open();
    recent = await seed(store, 'recent');
    const old = Date.now() - 100 * DAY;
    // Threads last touched 100 days ago, as a restore of an old backup writes them.
    const restoreOld = (id: string) =>
      store.restoreThread({
        thread: {
          id,
          resourceId: null,
          title: 'old',
          metadata: {},
          createdAt: old,
          updatedAt: old,
        },
        messages: [
          {
            id: `${id}-message`,
            threadId: id,
            parentId: null,
            role: 'user',
            type: null,
            data: 'hi',
            createdAt: old,
            depth: 0,
          },
        ],
        branches: [
          {
            id: `${id}-main`,
            threadId: id,
            name: 'main',
            headMessageId: `${id}-message`,
            isActive: true,
            createdAt: old,
            forkMessageId: `${id}-message`,
            parentBranchId: null,
          },
        ],
        checkpoints: [],
        stateCommits: [],
        turns: [],
      });
    await restoreOld('old-thread');
    // Old threads in use now: a state commit, a live run.
    await restoreOld('committed-thread');
    await store.appendStateCommit(
      {
        branchId: 'committed-thread-main',
        messageId: 'committed-thread-message',
        update: { a: 1 },
      },
      0,
    );
    await restoreOld('running-thread');
    await store.acquireLease({ key: 'run:running-thread', owner: 'worker', ttlMs: 3_600_000 });
    const turn = (id: string, status: 'finished' | 'running', startedAt: number) =>
      store.putTurn({
        id,
        threadId: recent.thread.id,
        messageId: null,
        source: null,
        userId: null,
        status,
        state: {},
        steps: [],
        startedAt,
        finishedAt: status === 'running' ? null : startedAt + 1,
      });
    await turn('old-finished', 'finished', Date.now() - 10 * DAY);
    await turn('old-running', 'running', Date.now() - 10 * DAY);
    await turn('new-finished', 'finished', Date.now() - 1000);
    await store.close();
  });
  afterAll(() => db.drop());

  it('prune: a dry run counts, a real run deletes old turns and inactive threads', async () => {
    const args = ['prune', db.arg, '--turns-older-than', '7d', '--threads-older-than', '90d'];
    const dry = await cairn([...args, '--dry-run']);
    expect([dry.code, dry.stdout]).toEqual([
      0,
      'would delete 1 turns and 1 threads (threads left alone: 2 in use; dry run: nothing deleted)\n',
    ]);
    const real = await cairn(args);
    // The thread with a running turn and the one with a live run are in use.
    expect([real.code, real.stdout]).toEqual([
      0,
      'deleted 1 turns and 1 threads (threads left alone: 2 in use)\n',
    ]);
    const threads = JSON.parse((await cairn(['threads', db.arg, '--json'])).stdout);
    expect(threads.map((t: { id: string }) => t.id).sort()).toEqual(
      [recent.thread.id, 'committed-thread', 'running-thread'].sort(),
    );
    const dump = (await cairn(['export', db.arg])).stdout;
    expect(dump).not.toContain('old-finished');
    expect(dump).toContain('old-running');
    expect(dump).toContain('new-finished');
    const nothing = await cairn(['prune', db.arg]);
    expect(nothing.code).toBe(2);
    const bad = await cairn(['prune', db.arg, '--turns-older-than', 'a week']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('takes an age such as 30m, 12h, 7d or 2w');
  });

  it('prune: keeps the newest state commits and drops unvisited branches, by the store sweep', async () => {
    const store = await db.open();
    const old = Date.now() - 100 * DAY;
    const id = 'branchy';
    const message = `${id}-message`;
    await store.restoreThread({
      thread: {
        id,
        resourceId: null,
        title: 'branchy',
        metadata: {},
        createdAt: old,
        updatedAt: old,
      },
      messages: [
        {
          id: message,
          threadId: id,
          parentId: null,
          role: 'user',
          type: null,
          data: 'hi',
          createdAt: old,
          depth: 0,
        },
      ],
      branches: ['main', 'side'].map((name) => ({
        id: `${id}-${name}`,
        threadId: id,
        name,
        headMessageId: message,
        isActive: name === 'main',
        createdAt: old,
        forkMessageId: message,
        parentBranchId: null,
      })),
      checkpoints: [],
      stateCommits: Array.from({ length: 12 }, (_, i) => ({
        branchId: `${id}-main`,
        threadId: id,
        version: i + 1,
        messageId: message,
        messageDepth: 0,
        update: { n: i + 1 },
        snapshot: i + 1 === 10 ? { n: 10 } : null,
        createdAt: old,
      })),
      turns: [],
    });
    // Held by another sweeper: nothing is done, and the command says why.
    await store.acquireLease({ key: 'cairn:sweep', owner: 'other', ttlMs: 60_000 });
    const args = ['prune', db.arg, '--keep-state-commits', '2', '--branches-older-than', '30d'];
    const held = await cairn([...args, '--duty-cycle', '1']);
    expect(held.code).toBe(1);
    expect(held.stderr).toContain('another sweep holds the lease cairn:sweep');
    // A dry run says what a prune would free by the sweep's own rules, and needs no lease.
    const dry = await cairn([...args, '--duty-cycle', '1', '--dry-run']);
    expect([dry.code, dry.stdout]).toEqual([
      0,
      'would delete 9 state commits and 1 branches (threads left alone: 2 in use; dry run: nothing deleted)\n',
    ]);
    await store.releaseLease('cairn:sweep', 'other');
    await store.close();
    const real = await cairn([...args, '--duty-cycle', '1']);
    // The newest 2 (11, 12) replay from the snapshot at 10: 9 go, and the side branch.
    expect([real.code, real.stdout]).toEqual([
      0,
      'deleted 9 state commits and 1 branches (threads left alone: 2 in use)\n',
    ]);
    const shown = (await cairn(['show', db.arg, id])).stdout;
    expect(shown).toContain('main');
    expect(shown).not.toContain('side');
    // Nothing is left to free: the dry run says so too.
    const again = await cairn([...args, '--duty-cycle', '1', '--dry-run']);
    expect(again.stdout).toBe(
      'would delete 0 state commits and 0 branches (threads left alone: 2 in use; dry run: nothing deleted)\n',
    );
    const bad = await cairn([...args, '--duty-cycle', '2']);
    expect([bad.code, bad.stderr.includes('--duty-cycle takes a number above 0')]).toEqual([
      2,
      true,
    ]);
  });

  it('inspect: serves the inspector on the database, read-only by default, until SIGTERM', async () => {
    const { url, stop } = await startInspect([db.arg, '--port', '0']);
    const threads = (await (await fetch(`${url}/api/threads`)).json()) as {
      items: Array<{ id: string }>;
    };
    expect(threads.items.map((t) => t.id)).toContain(recent.thread.id);
    const write = await fetch(`${url}/api/threads/${recent.thread.id}/active-branch/alt`, {
      method: 'POST',
    });
    expect(write.status).toBe(403);
    expect(await stop()).toBe(0);
  });
});

describe('inspect on another host, and passwords', () => {
  it('inspect --host 0.0.0.0 prints an address with a token; without it, nothing is served', async () => {
    const db = testDb('sqlite');
    const store = await db.open();
    const { thread } = await seed(store);
    await store.close();
    const inspector = await startInspect([db.arg, '--host', '0.0.0.0', '--port', '0']);
    try {
      const url = new URL(inspector.url);
      const token = url.searchParams.get('token')!;
      expect(token).toMatch(/^[0-9a-f]{48}$/);
      const local = `http://127.0.0.1:${url.port}`;
      const bare = await fetch(`${local}/api/threads`, { headers: { host: 'localhost' } });
      expect(bare.status).toBe(401);
      const ok = await fetch(`${local}/api/threads`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(ok.status).toBe(200);
      expect(JSON.stringify(await ok.json())).toContain(thread.id);
      expect(inspector.stderr()).toMatch(/other machines can reach this inspector on 0\.0\.0\.0/);
    } finally {
      await inspector.stop();
    }
  });

  it('never prints a password of a Postgres URL, nor puts it in the page title', async () => {
    const url = 'postgres://postgres:topsecret@127.0.0.1:1/db?schema=x&password=hunter2';
    expect(parseTarget(url).label).toBe('postgres://postgres:***@127.0.0.1:1/db?password=***');
    expect(parseTarget(`${url}&sslpassword=s3cret`).label).not.toContain('s3cret');
    for (const args of [
      ['threads', url],
      ['inspect', url, '--port', '0'],
      ['threads', 'postgres://postgres:topsecret@[bad/db?password=hunter2'],
    ]) {
      const r = await cairnHere(args);
      expect(r.code, r.stderr).not.toBe(0);
      expect(r.stderr).toMatch(/^cairn: /);
      expect(r.stderr + r.stdout).not.toMatch(/topsecret|hunter2/);
    }
  });
});
