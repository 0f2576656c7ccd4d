// Plans that cannot degrade: the store's statements are prepared once per connection, and
// a generic plan made while the tables were tiny (no statistics: autovacuum off, never
// analyzed, as on a fresh database) is kept as they grow. Every statement whose work
// must follow its result (chain walks, ancestor checks, lineage jumps, latest commits,
// lookups) must still read rows in proportion to what it returns. Here every statement
// runs first on empty tables with generic plans forced, on one connection, then again
// after one thread has grown to thousands of messages and commits; each of those
// executions is then re-run under EXPLAIN ANALYZE (its cached generic plan) and the rows
// its scans read are counted.
import type { Message } from '@cairn/core';
import { newId } from '@cairn/core';
import type { Store } from '@cairn/store';
import { makeChain } from '@cairn/store/testing';

const turnOf = (threadId: string) => ({
  id: newId(),
  threadId,
  messageId: null,
  source: null,
  userId: null,
  status: 'finished' as const,
  state: {},
  steps: [],
  startedAt: Date.now(),
  finishedAt: null,
});

import { createPostgresStore } from '@cairn/store-postgres';
import {
  dropSchema,
  freshSchema,
  POSTGRES_TEST_URL,
  postgresTestSkip,
} from '@cairn/store-postgres/testing';
import pg from 'pg';
// @ts-expect-error: pg's own conversion of parameters, without types of its own
import { prepareValue } from 'pg/lib/utils.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const skip = await postgresTestSkip('plans');
const GROWN = 2_000;

interface Execution {
  name: string;
  text: string;
  values: unknown[];
}

/** A pool of one connection with generic plans forced, recording each named statement run. */
function recordingPool(): { pool: pg.Pool; executions: Execution[]; recording: { on: boolean } } {
  const pool = new pg.Pool({
    connectionString: POSTGRES_TEST_URL,
    max: 1,
    options: '-c plan_cache_mode=force_generic_plan',
  });
  const executions: Execution[] = [];
  const recording = { on: false };
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args) => {
      const c = args[0] as Partial<Execution>;
      if (recording.on && typeof c === 'object' && c.name)
        executions.push({ name: c.name, text: c.text!, values: c.values ?? [] });
      return query(...args);
    };
  });
  return { pool, executions, recording };
}

/** What an agent does on a thread: messages, a fork, checkpoints, state, a turn, reads. */
async function workload(store: Store, agentId: string): Promise<void> {
  const { thread, branch } = await store.createThreadWithBranch({});
  const ms: Message[] = await makeChain(store, thread.id, 6, null);
  await store.moveHead(branch.id, null, ms.at(-1)!.id);
  await store.getChain(ms.at(-1)!.id);
  await store.getChain(ms.at(-1)!.id, { limit: 2 });
  await store.isAncestor(ms[0]!.id, ms.at(-1)!.id);
  await store.getMessage(ms[2]!.id);
  const fork = await store.createBranch({
    threadId: thread.id,
    name: 'fork',
    headMessageId: ms[3]!.id,
  });
  await store.listBranches(thread.id);
  await store.saveCheckpoint({ threadId: thread.id, name: 'cp', messageId: ms[4]!.id });
  await store.getCheckpoint(thread.id, 'cp');
  await store.listCheckpoints(thread.id);
  for (let v = 0; v < 3; v++)
    await store.appendStateCommit({ branchId: fork.id, messageId: ms[3]!.id, update: { n: v } }, v);
  await store.getStateCommits(fork.id);
  await store.getLatestStateCommit(fork.id, { maxVersion: 2 });
  await store.getLatestStateCommit(fork.id, { withSnapshot: true });
  await store.putTurn({
    id: newId(),
    threadId: thread.id,
    messageId: ms[0]!.id,
    source: null,
    userId: null,
    status: 'running',
    state: {},
    steps: [],
    startedAt: Date.now(),
    finishedAt: null,
  });
  await store.listTurns(thread.id);
  const key = `run:${thread.id}`;
  await store.acquireLease({ key, owner: 'w', ttlMs: 60_000 });
  await store.releaseLease(key, 'w');
  const [memory] = await store.addMemories([
    { agentId, roomId: thread.id, content: { text: `remember ${thread.id}` } },
  ]);
  await store.getMemory(memory!.id);
  await store.listMemories({ agentId, roomId: thread.id });
  await store.countMemories({ agentId, roomId: thread.id });
  await store.searchMemories({ text: 'remember', filter: { agentId, roomId: thread.id } });
  await store.updateMemory(memory!.id, { metadata: { seen: true } });
  // A fact's next version, its history (by lineage, oldest first) and what holds now.
  const moved = await store.supersedeMemory(memory!.id, {
    content: { text: `moved ${thread.id}` },
  });
  await store.listMemories({ lineageIds: [moved.lineageId] }, { order: 'oldest' });
  await store.listMemories({ agentId, roomId: thread.id, validAt: Date.now() });
  await store.countMemories({ agentId, validAt: Date.now(), knownAt: Date.now() - 1 });
  // A memory scoped to the fork, checked as written, recalled from the fork, the active
  // branch and from no branch.
  await store.addMemories([
    {
      agentId,
      content: { text: `scoped ${thread.id}` },
      source: {
        threadId: thread.id,
        branchId: fork.id,
        messageIds: [ms[2]!.id, ms[3]!.id],
        branchScoped: true,
      },
    },
  ]);
  const fromFork = { agentId, visibleFrom: { threadId: thread.id, branchId: fork.id } };
  await store.searchMemories({ text: 'scoped', filter: fromFork });
  await store.listMemories({ agentId, visibleFrom: { threadId: thread.id } });
  await store.countMemories({ agentId, visibleFrom: null });
  await store.putCachedEmbeddings('e', [{ contentHash: `h-${thread.id}`, embedding: [1, 0] }]);
  await store.getCachedEmbeddings('e', [`h-${thread.id}`]);
  await store.putEntries([
    { collection: 'c', id: `a-${thread.id}`, group: thread.id, data: { n: 1 } },
    { collection: 'c', id: `b-${thread.id}`, group: thread.id, data: { n: 2 } },
  ]);
  await store.getEntry('c', `a-${thread.id}`);
  await store.listEntries('c', { group: thread.id });
  await store.deleteEntries('c', { ids: [`a-${thread.id}`] });
  await store.deleteEntries('c', { group: thread.id });
  await store.exportThread(thread.id);
  await store.getThread(thread.id);
  await store.isThreadIdle(thread.id, Date.now() - 60_000);
  await store.listMemories({ agentId, metadataPrefix: { path: [thread.id] } });
  await store.updateThread(thread.id, { title: 'read' });
  // Deletes on a thread of their own: the one above stays for the reads to be re-run on.
  const gone = await store.createThread({});
  await makeChain(store, gone.id, 3, null);
  const [forgotten] = await store.addMemories([{ agentId, content: { text: 'forget me' } }]);
  await store.deleteMemories([forgotten!.id]);
  await store.deleteThread(gone.id);
  // A sweep of a thread of its own: old state commits (with snapshots) on its main branch,
  // a side branch nobody visits any more, a finished turn.
  const swept = await store.createThreadWithBranch({});
  const sm = await makeChain(store, swept.thread.id, 4, null);
  await store.moveHead(swept.branch.id, null, sm.at(-1)!.id);
  const side = await store.createBranch({
    threadId: swept.thread.id,
    name: 'side',
    headMessageId: sm[1]!.id,
  });
  for (let v = 0; v < 12; v++)
    await store.appendStateCommit(
      {
        branchId: swept.branch.id,
        messageId: sm[v % 4]!.id,
        update: { n: v },
        snapshot: v % 5 === 4 ? { n: v } : null,
      },
      v,
    );
  await store.appendStateCommit({ branchId: side.id, messageId: sm[1]!.id, update: { n: 0 } }, 0);
  await store.putTurn(turnOf(swept.thread.id));
  await new Promise((r) => setTimeout(r, 5));
  await store.sweep(
    { keepStateCommits: 2, branchTtlMs: 1, turnTtlMs: 1 },
    { threadIds: [swept.thread.id], dutyCycle: 1 },
  );
  // A user forgotten (their thread, a memory about them), then a late write for them refused.
  const user = `user-${thread.id}`;
  const theirs = await store.createThreadWithBranch({ resourceId: user });
  await makeChain(store, theirs.thread.id, 2, null);
  await store.addMemories([{ agentId, entityId: user, content: { text: `about ${user}` } }]);
  await store.forget({ resourceId: user, entityId: user });
  await store.createThread({ resourceId: user }).catch(() => undefined);
  await store.putTurn({ ...turnOf(theirs.thread.id) }).catch(() => undefined);
}

/** A statement's parameter as a literal (EXECUTE in EXPLAIN takes no parameters). */
function literal(client: pg.PoolClient, value: unknown): string {
  const v = prepareValue(value);
  if (v === null || v === undefined) return 'NULL';
  if (Buffer.isBuffer(v)) return `'\\x${v.toString('hex')}'`;
  return client.escapeLiteral(String(v));
}

/** Rows read by the plan's scans, and rows it returned. */
function rowsRead(plan: Record<string, unknown>): number {
  const loops = Number(plan['Actual Loops'] ?? 1);
  const own =
    String(plan['Node Type']).includes('Scan') && plan['Relation Name'] !== undefined
      ? (Number(plan['Actual Rows'] ?? 0) +
          Number(plan['Rows Removed by Filter'] ?? 0) +
          Number(plan['Rows Removed by Index Recheck'] ?? 0)) *
        loops
      : 0;
  const children = (plan.Plans as Array<Record<string, unknown>> | undefined) ?? [];
  return own + children.reduce((sum, p) => sum + rowsRead(p), 0);
}

describe.skipIf(skip)('plans on tables grown from empty, generic plans forced', () => {
  const schema = freshSchema('cairn_plans');
  const { pool, executions, recording } = recordingPool();
  let store: Store;
  let head: Message;
  let root: Message;

  beforeAll(async () => {
    store = await createPostgresStore({ pool }, { schema });
    // Every statement prepared, and planned generically, on empty tables.
    await workload(store, 'warm');
    // One thread grows: thousands of messages in batches, and state commits.
    const { thread, branch } = await store.createThreadWithBranch({});
    let parent: string | null = null;
    const grown: Message[] = [];
    while (grown.length < GROWN) {
      const batch = await makeChain(store, thread.id, 50, parent);
      grown.push(...batch);
      parent = batch.at(-1)!.id;
    }
    [root, head] = [grown[0]!, grown.at(-1)!];
    await store.moveHead(branch.id, null, head.id);
    for (let v = 0; v < 300; v++)
      await store.appendStateCommit(
        { branchId: branch.id, messageId: grown[v]!.id, update: { n: v } },
        v,
      );
    for (let i = 0; i < 20; i++)
      await store.addMemories(
        Array.from({ length: 50 }, (_, j) => ({
          agentId: 'crowd',
          content: { text: `remember crowd ${i} ${j}` },
        })),
      );
    // Memories scoped to the grown thread's branch, learned along its chain.
    const scoped: string[] = [];
    for (let i = 0; i < 10; i++)
      for (const m of await store.addMemories(
        Array.from({ length: 50 }, (_, j) => ({
          agentId: 'crowd',
          content: { text: `scoped crowd ${i} ${j}` },
          source: {
            threadId: thread.id,
            messageIds: [grown[(i * 50 + j) * 3]!.id],
            branchScoped: true,
          },
        })),
      ))
        scoped.push(m.id);
    for (let i = 0; i < 1_000; i += 100)
      await store.putEntries(
        Array.from({ length: 100 }, (_, j) => ({
          collection: 'c',
          id: `crowd-${i + j}`,
          group: `g${j % 7}`,
          data: { n: j },
        })),
      );
    await store.putCachedEmbeddings(
      'e',
      Array.from({ length: 1_000 }, (_, j) => ({ contentHash: `c${j}`, embedding: [j, 1] })),
    );
    for (let i = 0; i < 300; i++) await store.createThread({});
    // Finished turns of other threads: a sweep's purge of one thread's turns must not read them.
    const busy = await store.createThread({});
    for (let i = 0; i < 1_000; i++) await store.putTurn(turnOf(busy.id));
    recording.on = true;
    await workload(store, 'late');
    await store.getChain(head.id);
    await store.getChain(head.id, { limit: 50 });
    await store.getChain(head.id, { limit: 1, beforeDepth: 2 });
    await store.isAncestor(root.id, head.id);
    const fromHead = { agentId: 'crowd', visibleFrom: { threadId: thread.id } };
    await store.listMemories({ ...fromHead, lineageIds: [scoped[250]!] });
    await store.searchMemories({ text: 'scoped crowd', filter: fromHead });
    await store.getLatestStateCommit(branch.id, { maxMessageDepth: 100 });
    recording.on = false;
  }, 300_000);

  afterAll(async () => {
    await store?.close();
    await pool.end();
    await dropSchema(schema);
  });

  it('every statement reads rows in proportion to what it returns', async () => {
    const client = await pool.connect();
    const found: string[] = [];
    try {
      await client.query('BEGIN');
      for (const [i, e] of executions.entries()) {
        const args = e.values.map((v) => literal(client, v)).join(', ');
        await client.query(`SAVEPOINT s${i}`);
        try {
          const { rows } = await client.query(
            `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ${e.name}${args ? `(${args})` : ''}`,
          );
          const plan = (rows[0]['QUERY PLAN'] as Array<{ Plan: Record<string, unknown> }>)[0]!.Plan;
          const read = rowsRead(plan);
          const returned = Number(plan['Actual Rows'] ?? 0);
          // BM25's corpus statistics (how many memories, their average length) are an
          // aggregate of the whole table by definition: the one read allowed to scan it.
          const bm25 = e.text.includes('count(*)::float8 AS n, COALESCE(avg(search_len)');
          if (read > 4 * returned + 200 && !bm25)
            found.push(`${read} rows read for ${returned} returned: ${e.text.slice(0, 160)}`);
        } catch (error) {
          // A write that cannot run twice (a unique id) is not a read to check.
          if (!/duplicate key|violates/.test(String(error))) throw error;
        } finally {
          await client.query(`ROLLBACK TO SAVEPOINT s${i}`);
        }
      }
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
    expect(executions.length).toBeGreaterThan(30);
    expect(found, found.join('\n')).toEqual([]);
  }, 300_000);
});
