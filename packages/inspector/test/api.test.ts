import type { Store } from '@cairn/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Inspector, startInspector } from '../src/index.js';
import { openTestStore, seedThread } from './helpers.js';

let store: Store;
let inspector: Inspector;
let token: string;
let seeded: Awaited<ReturnType<typeof seedThread>>;

beforeAll(async () => {
  store = openTestStore();
  seeded = await seedThread(store);
  // A bare store written without the engine: state commits with and without a snapshot.
  const main = seeded.mainBranch;
  await store.appendStateCommit(
    { branchId: main.id, messageId: seeded.main[0]!.id, update: { topic: 'lisbon', n: 1 } },
    0,
  );
  await store.appendStateCommit(
    {
      branchId: main.id,
      messageId: seeded.main[2]!.id,
      update: { n: 2, note: 'a "quoted" it\'s' },
    },
    1,
  );
  inspector = await startInspector({ store, port: 0, allowWrites: true });
  const page = await (await fetch(inspector.url)).text();
  token = /<meta name="cairn-token" content="([0-9a-f]+)">/.exec(page)![1]!;
});

afterAll(async () => {
  await inspector?.close();
  await store?.close();
});

async function get(path: string) {
  const res = await fetch(inspector.url + path);
  return { status: res.status, body: (await res.json()) as any };
}

async function post(path: string, body: unknown) {
  const res = await fetch(inspector.url + path, {
    method: 'POST',
    headers: { 'x-cairn-token': token, 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

interface Node {
  id: string;
  branch: string;
  onBranches: string[];
  folded: number;
}

describe('a thread, drawn from each branch head', () => {
  it('draws every message when the branches are short, with the branches each lies on', async () => {
    const { body } = await get(`/api/threads/${seeded.threadId}`);
    const nodes = body.messages as Node[];
    expect(nodes).toHaveLength(7);
    const fork = nodes.find((n) => n.id === seeded.main[1]!.id)!;
    expect(fork).toMatchObject({ branch: 'main', onBranches: ['main', 'alt'], folded: 0 });
    expect(nodes.find((n) => n.id === seeded.main[4]!.id)!.onBranches).toEqual(['main']);
    expect(nodes.find((n) => n.id === seeded.alt[0]!.id)!.onBranches).toEqual(['alt']);
    expect(body.branches.map((b: { name: string; length: number }) => [b.name, b.length])).toEqual([
      ['main', 5],
      ['alt', 4],
    ]);
  });

  it('draws only the last `window` messages of each branch and folds the rest', async () => {
    const { body } = await get(`/api/threads/${seeded.threadId}?window=3`);
    const nodes = body.messages as Node[];
    // main: m2..m4; alt: m1, alt0, alt1. m1 is below main's window yet on main's chain.
    expect(nodes.map((n) => n.id).sort()).toEqual(
      [...seeded.main.slice(1).map((m) => m.id), ...seeded.alt.map((m) => m.id)].sort(),
    );
    const m1 = nodes.find((n) => n.id === seeded.main[1]!.id)!;
    expect(m1).toMatchObject({ branch: 'main', onBranches: ['main', 'alt'], folded: 1 });
    expect(nodes.filter((n) => n.folded > 0)).toHaveLength(1);
    const { body: two } = await get(`/api/threads/${seeded.threadId}?window=2`);
    const folds = (two.messages as Node[]).filter((n) => n.folded > 0);
    expect(folds.map((n) => [n.id, n.folded]).sort()).toEqual(
      [
        [seeded.main[3]!.id, 3],
        [seeded.alt[0]!.id, 2],
      ].sort(),
    );
    expect((await get(`/api/threads/${seeded.threadId}?window=0`)).status).toBe(400);
    expect((await get(`/api/threads/${seeded.threadId}?window=lots`)).status).toBe(400);
  });
});

describe('state without the application schema', () => {
  it('replays updates by replacing fields, and says so', async () => {
    const { body } = await get(
      `/api/threads/${seeded.threadId}/messages/${seeded.main[3]!.id}/state`,
    );
    expect(body.exact).toBe(false);
    expect(body.state).toEqual({ topic: 'lisbon', n: 2, note: 'a "quoted" it\'s' });
    expect(body.changes).toEqual([]);
    const at2 = await get(`/api/threads/${seeded.threadId}/messages/${seeded.main[2]!.id}/state`);
    expect(at2.body.changes.map((c: { field: string }) => c.field).sort()).toEqual(['n', 'note']);
  });

  it('shows a state stored under a later schema version as stored, without the version key', async () => {
    // Written by an application whose schema is version 2 (its snapshots record the version).
    const t = await store.createThread({ title: 'versioned', resourceId: 'schema-v2' });
    const [m0, m1] = await store.addMessages([
      { id: `${t.id}-a`, threadId: t.id, parentId: null, role: 'user', data: 'a' },
      { id: `${t.id}-b`, threadId: t.id, parentId: `${t.id}-a`, role: 'user', data: 'b' },
    ]);
    const b = await store.createBranch({ threadId: t.id, name: 'main', headMessageId: m1!.id });
    await store.appendStateCommit(
      {
        branchId: b.id,
        messageId: m0!.id,
        update: { title: 'x' },
        snapshot: { title: 'x', $schemaVersion: 2 },
      },
      0,
    );
    await store.appendStateCommit({ branchId: b.id, messageId: m1!.id, update: { n: 1 } }, 1);
    const { status, body } = await get(`/api/threads/${t.id}/messages/${m1!.id}/state`);
    expect(status).toBe(200);
    expect(body.state).toEqual({ title: 'x', n: 1 });
  });

  it('compares two branches side by side', async () => {
    const { status, body } = await get(`/api/threads/${seeded.threadId}/compare?a=main&b=alt`);
    expect(status).toBe(200);
    expect(body.a.state).toEqual({ topic: 'lisbon', n: 2, note: 'a "quoted" it\'s' });
    // alt forked at m1: it reads main's state as of m1.
    expect(body.b.state).toEqual({ topic: 'lisbon', n: 1 });
    expect(body.changes.map((c: { field: string }) => c.field).sort()).toEqual(['n', 'note']);
    expect((await get(`/api/threads/${seeded.threadId}/compare?a=main&b=nope`)).status).toBe(404);
    expect((await get(`/api/threads/${seeded.threadId}/compare?a=main`)).status).toBe(400);
  });
});

describe('forks and checkpoints', () => {
  it('forks at a message and sets a checkpoint; a fork reads its parent state as of the message', async () => {
    const fork = await post(`/api/threads/${seeded.threadId}/branches`, {
      messageId: seeded.main[2]!.id,
    });
    expect(fork.status).toBe(200);
    expect(fork.body.branch).toMatchObject({ name: 'main-v2', isActive: false });
    const cmp = await get(`/api/threads/${seeded.threadId}/compare?a=main&b=main-v2`);
    expect(cmp.body.b.state).toEqual(cmp.body.a.state);
    const cp = await post(`/api/threads/${seeded.threadId}/checkpoints`, {
      name: 'here',
      messageId: seeded.alt[1]!.id,
    });
    expect(cp.status).toBe(200);
    expect(await store.getCheckpoint(seeded.threadId, 'here')).toMatchObject({
      messageId: seeded.alt[1]!.id,
    });
  });

  it('a fork of a fork is named from the root name, as the engine names it (main-v3, not main-v2-v2)', async () => {
    const v2 = (await store.getBranch(seeded.threadId, 'main-v2'))!;
    const [own] = await store.addMessages([
      { threadId: seeded.threadId, parentId: v2.headMessageId, role: 'user', data: 'on main-v2' },
    ]);
    await store.moveHead(v2.id, v2.headMessageId, own!.id);
    const fork = await post(`/api/threads/${seeded.threadId}/branches`, { messageId: own!.id });
    expect(fork.body.branch).toMatchObject({ name: 'main-v3' });
    expect((await store.getBranch(seeded.threadId, 'main-v3'))?.parentBranchId).toBe(v2.id);
  });

  it('refuses unknown threads and messages, a message of another thread, bad bodies: nothing written', async () => {
    const other = await seedThread(store, 2);
    const branches = (await store.listBranches(seeded.threadId)).length;
    const checkpoints = (await store.listCheckpoints(seeded.threadId)).length;
    const threads = (await store.listThreads({ limit: 100 })).items.length;
    const cases: Array<[string, unknown, number]> = [
      ['/api/threads/nope/branches', { messageId: seeded.main[0]!.id }, 404],
      [`/api/threads/${seeded.threadId}/branches`, { messageId: 'nope' }, 404],
      [`/api/threads/${seeded.threadId}/branches`, { messageId: other.main[0]!.id }, 404],
      [`/api/threads/${seeded.threadId}/branches`, {}, 400],
      [`/api/threads/${seeded.threadId}/branches`, { messageId: 7 }, 400],
      [
        `/api/threads/${seeded.threadId}/branches`,
        { messageId: seeded.main[0]!.id, name: 'alt' },
        409,
      ],
      [`/api/threads/${seeded.threadId}/branches`, '{not json', 400],
      [`/api/threads/${seeded.threadId}/branches`, '[1]', 400],
      ['/api/threads/nope/checkpoints', { name: 'x', messageId: seeded.main[0]!.id }, 404],
      [
        `/api/threads/${seeded.threadId}/checkpoints`,
        { name: 'x', messageId: other.main[1]!.id },
        404,
      ],
      [`/api/threads/${seeded.threadId}/checkpoints`, { messageId: seeded.main[0]!.id }, 400],
    ];
    for (const [path, body, status] of cases) {
      const res = await post(path, body);
      expect(res.status, `${path} ${JSON.stringify(body)}`).toBe(status);
    }
    expect((await store.listBranches(seeded.threadId)).length).toBe(branches);
    expect((await store.listCheckpoints(seeded.threadId)).length).toBe(checkpoints);
    expect((await store.listThreads({ limit: 100 })).items.length).toBe(threads);
    expect(await store.getThread('nope')).toBeNull();
  });
});

describe('thread pages', () => {
  it('filters by resourceId and searches titles and ids, continuing with the cursor', async () => {
    for (let i = 0; i < 5; i++)
      await store.createThread({ title: `Paged ${i}`, resourceId: 'pager' });
    const { body } = await get('/api/threads?resourceId=pager');
    expect(body.items.map((t: { title: string }) => t.title)).toEqual([
      'Paged 4',
      'Paged 3',
      'Paged 2',
      'Paged 1',
      'Paged 0',
    ]);
    expect(body.nextCursor).toBeNull();
    const found = await get('/api/threads?q=PAGED%203');
    expect(found.body.items.map((t: { title: string }) => t.title)).toEqual(['Paged 3']);
    const byId = await get(`/api/threads?q=${seeded.threadId}`);
    expect(byId.body.items.map((t: { id: string }) => t.id)).toEqual([seeded.threadId]);
    expect((await get('/api/threads?cursor=garbage')).status).toBe(400);
  });
});

describe('memory search', () => {
  it('says where a hit was learned and whether a newer version replaced it', async () => {
    const [old] = await store.addMemories([
      {
        agentId: 'a',
        content: { text: 'provenance lives in Paris' },
        source: { threadId: seeded.threadId, messageIds: [seeded.main[0]!.id] },
      },
    ]);
    await store.supersedeMemory(old!.id, {
      content: { text: 'provenance lives in Berlin' },
      validFrom: 5,
    });
    const { status, body } = await get('/api/memory/search?q=provenance&mode=keyword');
    expect(status).toBe(200);
    const byText = new Map(body.hits.map((h: { text: string }) => [h.text, h]));
    expect(byText.get('provenance lives in Paris')).toMatchObject({
      provenance: { threadId: seeded.threadId, messageIds: [seeded.main[0]!.id] },
      validTo: 5,
      supersededAt: expect.any(Number),
    });
    expect(byText.get('provenance lives in Berlin')).toMatchObject({
      validFrom: 5,
      validTo: null,
      supersededAt: null,
    });
  });

  it('lists branch-scoped memories, saying they are', async () => {
    await store.addMemories([
      {
        agentId: 'a',
        content: { text: 'scoped lives in Rome' },
        source: { threadId: seeded.threadId, messageIds: [seeded.main[0]!.id], branchScoped: true },
      },
    ]);
    const { body } = await get('/api/memory/search?q=scoped&mode=keyword');
    expect(body.hits).toMatchObject([
      {
        text: 'scoped lives in Rome',
        provenance: {
          threadId: seeded.threadId,
          messageIds: [seeded.main[0]!.id],
          branchScoped: true,
        },
      },
    ]);
  });
});
