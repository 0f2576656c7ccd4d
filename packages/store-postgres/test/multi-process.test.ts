import type { Store, StoreChange } from '@cairn/store';
import pg from 'pg';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { createPostgresStore } from '../src/index.js';
import { runFixture } from './processes.js';
import { describeServer, dropSchema, freshSchema, POSTGRES_URL, withClient } from './support.js';

describeServer('several processes on one server', () => {
  const schema = freshSchema('cairn_mp');
  let store: Store;
  beforeAll(async () => {
    store = await createPostgresStore({ connectionString: POSTGRES_URL }, { schema });
  });
  afterAll(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  it('lockBranch in another process waits for the holder, then gives up with TIMEOUT; free again once it commits', async () => {
    const thread = await store.createThread({});
    const [m] = await store.addMessages([
      { threadId: thread.id, parentId: null, role: 'user', data: 'root' },
    ]);
    const branch = await store.createBranch({
      threadId: thread.id,
      name: 'main',
      headMessageId: m!.id,
    });
    const other = (timeoutMs: number) =>
      runFixture('lock-branch.mjs', [POSTGRES_URL, schema, branch.id, String(timeoutMs)]).then(
        (out) => JSON.parse(out) as { outcome: string },
      );
    const whileHeld = await store.transaction(async (tx) => {
      await tx.lockBranch(branch.id);
      const r = await other(300);
      // The holder still writes and commits after the other process gave up.
      await tx.appendStateCommit({ branchId: branch.id, messageId: m!.id, update: { n: 1 } }, 0);
      return r;
    });
    expect(whileHeld.outcome).toBe('TIMEOUT');
    expect((await store.getStateCommits(branch.id)).map((c) => c.update)).toEqual([{ n: 1 }]);
    expect((await other(5_000)).outcome).toBe('locked');
  }, 60_000);

  it('4 processes x 250 state commits on one branch, retrying on CONFLICT: versions 1..1000, none lost or doubled', async () => {
    const thread = await store.createThread({});
    const branch = await store.createBranch({
      threadId: thread.id,
      name: 'main',
      headMessageId: null,
    });
    const writers = ['w0', 'w1', 'w2', 'w3'];
    const outputs = await Promise.all(
      writers.map((w) =>
        runFixture('commit-writer.mjs', [POSTGRES_URL, schema, branch.id, '250', w]),
      ),
    );
    const commits = await store.getStateCommits(branch.id);
    expect(commits.map((c) => c.version)).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
    const seen = new Set(commits.map((c) => `${c.update.writer}:${c.update.i}`));
    expect(seen.size).toBe(1000);
    for (const w of writers) {
      for (let i = 0; i < 250; i++) expect(seen.has(`${w}:${i}`)).toBe(true);
    }
    // The writers really raced: at least one of them lost a compare-and-set.
    const conflicts = outputs.map((o) => (JSON.parse(o) as { conflicts: number }).conflicts);
    expect(conflicts.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  }, 300_000);

  it("hears another process's commit through LISTEN/NOTIFY", async () => {
    const thread = await store.createThread({});
    const [root] = await store.addMessages([
      { threadId: thread.id, parentId: null, role: 'user', data: 'hi' },
    ]);
    const heard: string[] = [];
    const stop = store.subscribe(thread.id, (c) => heard.push(c.kind));
    await runFixture('add-message.mjs', [POSTGRES_URL, schema, thread.id, root!.id]);
    await vi.waitFor(() => expect(heard).toContain('messages'), { timeout: 10_000, interval: 20 });
    stop();
    expect(
      (await store.getChain((await store.listBranches(thread.id))[0]?.headMessageId ?? root!.id))
        .length,
    ).toBe(1);
  }, 30_000);

  it('tells one store about changes made through another (separate connections)', async () => {
    const other = await createPostgresStore({ connectionString: POSTGRES_URL }, { schema });
    try {
      const thread = await store.createThread({});
      const heard: StoreChange[] = [];
      const stop = other.subscribe(thread.id, (c) => heard.push(c));
      const branch = await store.createBranch({
        threadId: thread.id,
        name: 'main',
        headMessageId: null,
      });
      await store.appendStateCommit({ branchId: branch.id, messageId: null, update: { a: 1 } }, 0);
      await vi.waitFor(
        () =>
          // A change says what it wrote, so that an engine holding it skips a read.
          expect(heard).toContainEqual({
            threadId: thread.id,
            kind: 'state',
            branchId: branch.id,
            version: 1,
          }),
        {
          timeout: 10_000,
          interval: 20,
        },
      );
      expect(heard).toContainEqual({
        threadId: thread.id,
        kind: 'branch',
        branchId: branch.id,
        headMessageId: null,
      });
      stop();
    } finally {
      await other.close();
    }
  }, 30_000);

  it("sends a write call's NOTIFY after its COMMIT, in a notify-only transaction, a payload with quotes and backslashes intact", async () => {
    const other = await createPostgresStore({ connectionString: POSTGRES_URL }, { schema });
    const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
    const original = proto.query;
    try {
      const heard: string[] = [];
      const id = `it's a \\ "quoted" \\' thread`;
      const stop = other.subscribe(id, (c) => heard.push(c.threadId));
      const sent: string[] = [];
      proto.query = function (this: unknown, ...args: unknown[]) {
        const q = args[0] as string | { text: string };
        sent.push(typeof q === 'string' ? q : q.text);
        return original.apply(this, args);
      };
      await store.createThread({ id });
      proto.query = original;
      // The write's transaction sends no NOTIFY (Postgres would serialize its commit with
      // every other notifying one): the round trip of its COMMIT carries a notify-only
      // transaction after it, which does not wait for a WAL flush.
      const notifying = sent.filter((t) => t.includes('NOTIFY'));
      expect(notifying).toHaveLength(1);
      expect(notifying[0]).toMatch(
        /^SELECT 1; COMMIT; BEGIN; NOTIFY .*; SET LOCAL synchronous_commit = off; COMMIT$/s,
      );
      await vi.waitFor(() => expect(heard).toEqual([id]), { timeout: 10_000, interval: 20 });
      stop();
    } finally {
      proto.query = original;
      await other.close();
    }
  }, 30_000);

  it('listens again after its listening connection is killed', async () => {
    const other = await createPostgresStore({ connectionString: POSTGRES_URL }, { schema });
    try {
      const thread = await store.createThread({});
      const heard: string[] = [];
      const stop = store.subscribe(thread.id, (c) => heard.push(c.kind));
      const killed = await withClient((c) =>
        c.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
           WHERE query = $1 AND pid <> pg_backend_pid()`,
          [`LISTEN "cairn:${schema}"`],
        ),
      );
      expect(killed.rowCount).toBeGreaterThan(0);
      let n = 0;
      await vi.waitFor(
        async () => {
          await other.updateThread(thread.id, { title: `try ${n++}` });
          expect(heard).toContain('thread');
        },
        { timeout: 15_000, interval: 300 },
      );
      stop();
    } finally {
      await other.close();
    }
  }, 30_000);
});
