import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliError } from '../src/database.js';
import { exportDump, readLines } from '../src/dump.js';
import { cairn, cairnHere, kinds, seed, type TestDb, tempDir, testDb } from './support.js';

/** A database with everything a dump holds: threads of every kind of record, leases, memories. */
async function fill(db: TestDb, threads = 3) {
  const store = await db.open();
  const seeded = [];
  for (let i = 0; i < threads; i++) seeded.push(await seed(store, `thread ${i}`));
  await store.putTurn({
    id: 'turn-1',
    threadId: seeded[0]!.thread.id,
    messageId: seeded[0]!.messages.a.id,
    source: 'cli-test',
    userId: 'u',
    status: 'finished',
    state: { step: 2 },
    steps: [{ name: 'plan', start: 1, end: 2, error: null }],
    startedAt: 1,
    finishedAt: 2,
  });
  await store.acquireLease({ key: 'research:1', owner: 'worker-a', ttlMs: 60_000, data: { n: 1 } });
  await store.ensureEmbeddingSpace({ embedderId: 'test-embedder', dimensions: 4 });
  await store.addMemories(
    Array.from({ length: 7 }, (_, i) => ({
      agentId: 'agent',
      scope: 'shared' as const,
      worldId: 'w',
      content: { text: `remember ${i}` },
      embedding: [i, 0.5, -0.25, 1 / (i + 3)],
      // A replaced version of a fact, with its times and source: a dump keeps them all.
      ...(i === 5
        ? {
            validFrom: 10,
            validTo: 20,
            supersededAt: 30,
            supersedes: 'older',
            lineageId: 'first',
            source: { threadId: 't', branchId: 'b', messageIds: ['m1'] },
          }
        : {}),
    })),
  );
  await store.close();
  return seeded;
}

describe.each(kinds)('export and import on %s', (kind) => {
  let db: TestDb;
  let copy: TestDb;
  let seeded: Awaited<ReturnType<typeof fill>>;
  beforeAll(async () => {
    db = testDb(kind);
    copy = testDb(kind);
    seeded = await fill(db);
  });
  afterAll(async () => {
    await db.drop();
    await copy.drop();
  });

  it('export → import → export is byte-identical', async () => {
    const first = await cairn(['export', db.arg]);
    expect(first.code, first.stderr).toBe(0);
    const lines = first.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines[0]).toEqual({ cairn: 'dump', version: 3 });
    expect(lines[1]).toEqual({
      kind: 'embeddingSpace',
      embedderId: 'test-embedder',
      dimensions: 4,
    });
    expect(lines.at(-1)).toEqual({
      kind: 'end',
      counts: {
        threads: 3,
        messages: 9,
        branches: 6,
        checkpoints: 3,
        stateCommits: 3,
        turns: 1,
        leases: 1,
        memories: 7,
      },
    });
    // SQLite keeps float32s: base64 of them; Postgres keeps doubles (1/3 is not a float32).
    const memory = lines.find((l) => l.kind === 'memory' && l.content.text === 'remember 0');
    if (kind === 'sqlite')
      expect(memory.embedding).toBe(
        Buffer.from(new Float32Array([0, 0.5, -0.25, 1 / 3]).buffer).toString('base64'),
      );
    else expect(memory.embedding).toEqual([0, 0.5, -0.25, 1 / 3]);
    expect(lines.find((l) => l.kind === 'memory' && l.content.text === 'remember 5')).toMatchObject(
      {
        validFrom: 10,
        validTo: 20,
        supersededAt: 30,
        supersedes: 'older',
        lineageId: 'first',
        source: { threadId: 't', branchId: 'b', messageIds: ['m1'] },
      },
    );
    expect(memory.lineageId).toBe(memory.id);
    const imported = await cairn(['import', copy.arg], first.stdout);
    expect(imported.code, imported.stderr).toBe(0);
    expect(imported.stderr).toBe('imported 3 threads, 9 messages, 1 leases, 7 memories\n');
    const second = await cairn(['export', copy.arg]);
    expect(second.stdout).toBe(first.stdout);
    // The restored database works as the original: same chain, same active branch.
    const shown = JSON.parse(
      (await cairn(['show', copy.arg, seeded[0]!.thread.id, '--json'])).stdout,
    );
    expect(shown.messages.map((m: { id: string }) => m.id)).toEqual([
      seeded[0]!.messages.a.id,
      seeded[0]!.messages.b2.id,
    ]);
  });

  it('a second import conflicts on the first thread; --skip-existing finishes it', async () => {
    const dump = (await cairn(['export', db.arg])).stdout;
    const again = await cairn(['import', copy.arg], dump);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(
      /^cairn: thread ".*" already exists; --skip-existing keeps what is there/,
    );
    const skip = await cairn(['import', copy.arg, '--skip-existing'], dump);
    expect(skip.code).toBe(0);
    expect(skip.stderr).toBe(
      'imported 0 threads, 0 messages, 1 leases, 0 memories (3 threads were there already)\n',
    );
    expect((await cairn(['export', copy.arg])).stdout).toBe(dump);
  });

  it('--thread exports only those threads, without leases and memories', async () => {
    const r = await cairn(['export', db.arg, '--thread', seeded[1]!.thread.id]);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.filter((l) => l.kind === 'thread').map((l) => l.id)).toEqual([
      seeded[1]!.thread.id,
    ]);
    expect(
      lines.some((l) => l.kind === 'memory' || l.kind === 'lease' || l.kind === 'embeddingSpace'),
    ).toBe(false);
    const missing = await cairn(['export', db.arg, '--thread', 'nope']);
    expect([missing.code, missing.stderr]).toEqual([1, 'cairn: thread "nope" not found\n']);
  });
});

describe('import refuses what it cannot read', () => {
  it('a newer format, or no dump at all, before anything is created', async () => {
    const dir = tempDir();
    const file = join(dir, 'new.db');
    const newer = await cairn(['import', file], '{"cairn":"dump","version":4}\n');
    expect([newer.code, newer.stderr]).toEqual([
      1,
      'cairn: the dump is format version 4, newer than this cairn reads (3); upgrade @cairn/cli\n',
    ]);
    const junk = await cairn(['import', file], 'hello\n');
    expect(junk.stderr).toContain('is not a Cairn dump');
    expect(() => readFileSync(file)).toThrow();
  });

  it('a version 1 dump (embeddings as numbers) still imports', async () => {
    const db = testDb('sqlite');
    await fill(db, 1);
    const dump = (await cairn(['export', db.arg])).stdout;
    const v1 = dump
      .split('\n')
      .map((l) => {
        if (l === '') return l;
        const r = JSON.parse(l);
        if (r.cairn) r.version = 1;
        if (typeof r.embedding === 'string') {
          const b = Buffer.from(r.embedding, 'base64');
          r.embedding = Array.from(new Float32Array(b.buffer, b.byteOffset, b.length / 4));
        }
        // Before version 3 a memory had no times, versions or source: it reads as a first
        // version, open and current.
        if (r.kind === 'memory' && r.lineageId === r.id)
          for (const f of [
            'validFrom',
            'validTo',
            'supersededAt',
            'supersedes',
            'lineageId',
            'source',
          ])
            delete r[f];
        return JSON.stringify(r);
      })
      .join('\n');
    expect(v1).not.toBe(dump);
    const target = join(tempDir(), 'v1.db');
    const imported = await cairn(['import', target], v1);
    expect(imported.code, imported.stderr).toBe(0);
    expect((await cairn(['export', target])).stdout).toBe(dump);
  });

  it('a memory whose embedding is not base64 of float32s is refused', async () => {
    const db = testDb('sqlite');
    await fill(db, 1);
    const dump = (await cairn(['export', db.arg])).stdout;
    const target = join(tempDir(), 'bad-vector.db');
    const bad = await cairn(
      ['import', target],
      dump.replace(/"embedding":"[^"]*"/, '"embedding":"not a vector"'),
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(
      /^cairn: line \d+: a memory's embedding is not base64 of float32s\n$/,
    );
  });

  it('a thread cut short is not imported; a broken record stops the import', async () => {
    const db = testDb('sqlite');
    await fill(db, 2);
    const dump = (await cairn(['export', db.arg])).stdout;
    const lines = dump.split('\n');
    const secondEnd = lines.findIndex(
      (l, i) =>
        l.includes('"threadEnd"') && lines.slice(0, i).some((x) => x.includes('"threadEnd"')),
    );
    const target = join(tempDir(), 'cut.db');
    const cut = await cairn(['import', target], `${lines.slice(0, secondEnd).join('\n')}\n`);
    expect(cut.code).toBe(1);
    expect(cut.stderr).toContain('no end record');
    const threads = JSON.parse((await cairn(['threads', target, '--json'])).stdout);
    expect(threads).toHaveLength(1);
    const bad = await cairn(
      ['import', join(tempDir(), 'bad.db')],
      dump.replace('"kind":"branch"', '"kind":"twig"'),
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^cairn: line \d+: unknown record kind "twig"\n$/);
  });
});

const BIN = fileURLToPath(new URL('../dist/bin.js', import.meta.url));

describe.each(kinds.map((to) => ['sqlite', to] as const))('copy %s → %s', (fromKind, toKind) => {
  let from: TestDb;
  let to: TestDb;
  beforeAll(async () => {
    from = testDb(fromKind);
    to = testDb(toKind);
    await fill(from, 150);
  });
  afterAll(async () => {
    await from.drop();
    await to.drop();
  });

  it('killed in the middle, then run again: finishes without duplicates and verifies', async () => {
    // One thread per transaction, killed as soon as the first thread is written.
    const child = spawn(process.execPath, [
      BIN,
      'copy',
      from.arg,
      to.arg,
      '--progress',
      '--batch',
      '1',
    ]);
    let err = '';
    const killed = await new Promise<NodeJS.Signals | null>((resolve) => {
      child.stderr.on('data', (d) => {
        err += d;
        if (/ [1-9]\d*\/\d+ /.test(err)) child.kill('SIGKILL');
      });
      child.on('exit', (_code, signal) => resolve(signal));
    });
    expect(killed, err).toBe('SIGKILL');
    const partial = JSON.parse((await cairn(['threads', to.arg, '--json'])).stdout);
    expect(partial.length).toBeGreaterThan(0);
    expect(partial.length).toBeLessThan(150);

    const rerun = await cairn(['copy', from.arg, to.arg, '--json']);
    expect(rerun.code, rerun.stderr).toBe(0);
    const result = JSON.parse(rerun.stdout);
    expect(result.threads.written + result.threads.skipped).toBe(150);
    expect(result.threads.skipped).toBeGreaterThanOrEqual(partial.length);
    expect(result.verified.every((c: { ok: boolean }) => c.ok)).toBe(true);
    expect(
      result.verified.find((c: { table: string }) => c.table === 'messages').target.count,
    ).toBe(450);
    const source = await cairn(['export', from.arg]);
    const target = await cairn(['export', to.arg]);
    const parse = (s: string) =>
      s
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
    // Postgres orders the keys of stored JSON objects its own way: compare values.
    expect(parse(target.stdout)).toEqual(parse(source.stdout));
  });
});

describe.each(kinds)('leases someone holds, and a target that is not a copy, on %s', (kind) => {
  const dbs: TestDb[] = [];
  const db = () => {
    const d = testDb(kind);
    dbs.push(d);
    return d;
  };
  afterAll(async () => {
    for (const d of dbs) await d.drop();
  });

  /** A database with one thread and `lease-1` held by `owner` for an hour. */
  async function holding(d: TestDb, owner: string, title: string) {
    const store = await d.open();
    const { thread } = await seed(store, title);
    await store.acquireLease({ key: 'lease-1', owner, ttlMs: 3_600_000 });
    await store.acquireLease({ key: `run:${thread.id}`, owner, ttlMs: 3_600_000 });
    const leases = (await store.listLeases()).items;
    await store.close();
    return { thread, leases };
  }

  it('import never takes or extends a live lease, run: leases included', async () => {
    const source = db();
    const target = db();
    await holding(source, 'attacker', 'theirs');
    const mine = await holding(target, 'target-owner', 'mine');
    const dump = (await cairnHere(['export', source.arg])).stdout;
    // The dump's run: lease is for a thread the target does not have; lease-1 collides.
    const r = await cairnHere(['import', target.arg], dump);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe(
      'imported 1 threads, 3 messages, 1 leases, 0 memories (1 leases live in the database were kept)\n',
    );
    const store = await target.open();
    try {
      const leases = (await store.listLeases()).items;
      for (const l of mine.leases) expect(leases).toContainEqual(l);
      expect(leases.filter((l) => l.owner === 'attacker')).toHaveLength(1);
    } finally {
      await store.close();
    }
  });

  it('copy refuses a target that is not an earlier copy before writing anything', async () => {
    const source = db();
    await holding(source, 'source-owner', 'source');
    // A target with a thread of its own; one with only a live lease of another holder.
    const withThread = db();
    const withLease = db();
    {
      const store = await withThread.open();
      await seed(store, 'not from the source');
      await store.close();
    }
    {
      const store = await withLease.open();
      await store.acquireLease({ key: 'lease-1', owner: 'target-owner', ttlMs: 3_600_000 });
      await store.close();
    }
    for (const [target, why] of [
      [
        withThread,
        /^cairn: the target holds thread ".*", the source does not: copy needs an empty target/,
      ],
      [
        withLease,
        /^cairn: the target's lease "lease-1" is held by "target-owner" until .*, unlike the source's: copy needs/,
      ],
    ] as const) {
      const before = (await cairnHere(['export', target.arg])).stdout;
      const r = await cairnHere(['copy', source.arg, target.arg]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(why);
      expect((await cairnHere(['export', target.arg])).stdout).toBe(before);
    }
  });

  it('import --skip-existing of a --thread dump (no memories) exits 0', async () => {
    const source = db();
    const { thread } = await holding(source, 'o', 'one thread');
    const dump = (await cairnHere(['export', source.arg, '--thread', thread.id])).stdout;
    const target = db();
    for (let i = 0; i < 2; i++) {
      const r = await cairnHere(['import', target.arg, '--skip-existing'], dump);
      expect([r.code, r.stderr]).toEqual([
        0,
        i === 0
          ? 'imported 1 threads, 3 messages, 0 leases, 0 memories\n'
          : 'imported 0 threads, 0 messages, 0 leases, 0 memories (1 threads were there already)\n',
      ]);
    }
  });
});

describe('a live database, and dumps that are not quite right', () => {
  it('export leaves out a thread deleted while it runs, and its end counts agree', async () => {
    const db = testDb('sqlite');
    const seeded = await fill(db, 3);
    const store = await db.open();
    try {
      // Another writer deletes the second thread between the listing and its reading.
      const doomed = seeded[1]!.thread.id;
      const live = new Proxy(store, {
        get(target, key) {
          if (key === 'exportThread')
            return async (id: string) => {
              if (id === doomed) await target.deleteThread(id);
              return target.exportThread(id);
            };
          const v = Reflect.get(target, key);
          return typeof v === 'function' ? v.bind(target) : v;
        },
      });
      let text = '';
      const out = new Writable({
        write(chunk, _e, done) {
          text += chunk;
          done();
        },
      });
      const counts = await exportDump(live, out);
      expect(counts.vanished).toBe(1);
      const lines = text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(lines.filter((l) => l.kind === 'thread').map((l) => l.id)).toEqual([
        seeded[0]!.thread.id,
        seeded[2]!.thread.id,
      ]);
      expect(lines.at(-1).counts.threads).toBe(2);
      const target = join(tempDir(), 'live.db');
      const r = await cairnHere(['import', target], text);
      expect([r.code, r.stderr]).toEqual([
        0,
        'imported 2 threads, 6 messages, 1 leases, 7 memories\n',
      ]);
    } finally {
      await store.close();
    }
  });

  it('refuses bytes that are not UTF-8, naming the line, and writes nothing of that thread', async () => {
    const db = testDb('sqlite');
    await fill(db, 1);
    const dump = (await cairnHere(['export', db.arg])).stdout;
    const at = dump.indexOf('hello');
    const bad = Buffer.concat([
      Buffer.from(dump.slice(0, at)),
      Buffer.from([0xc3, 0x28]),
      Buffer.from(dump.slice(at)),
    ]);
    const line = dump.slice(0, at).split('\n').length;
    const target = join(tempDir(), 'utf8.db');
    const r = await cairnHere(['import', target], bad);
    expect([r.code, r.stderr]).toEqual([1, `cairn: line ${line}: not valid UTF-8\n`]);
    expect(JSON.parse((await cairnHere(['threads', target, '--json'])).stdout)).toEqual([]);
  });

  it('a dump cut inside a line imports the complete threads before the cut', async () => {
    const db = testDb('sqlite');
    const seeded = await fill(db, 2);
    const dump = (await cairnHere(['export', db.arg])).stdout;
    const lines = dump.split('\n');
    const second = lines.findIndex((l) => l.includes(`"thread","id":"${seeded[1]!.thread.id}"`));
    const cut = `${lines.slice(0, second + 2).join('\n')}\n${lines[second + 2]!.slice(0, 20)}`;
    const target = join(tempDir(), 'cut-mid-line.db');
    const r = await cairnHere(['import', target], cut);
    expect([r.code, r.stderr]).toEqual([
      1,
      `cairn: line ${second + 3}: the dump is cut short inside this line (what came before it was imported)\n`,
    ]);
    const threads = JSON.parse((await cairnHere(['threads', target, '--json'])).stdout);
    expect(threads.map((t: { id: string }) => t.id)).toEqual([seeded[0]!.thread.id]);
  });

  it('refuses a header version that is not a positive integer', async () => {
    for (const version of ['0', '-1', '1.5', '"2"', 'null']) {
      const r = await cairnHere(
        ['import', join(tempDir(), 'v.db')],
        `{"cairn":"dump","version":${version}}\n{"kind":"end","counts":{}}\n`,
      );
      expect(r.code, version).toBe(1);
      expect(r.stderr, version).toMatch(/^cairn: the input is not a Cairn dump/);
    }
  });

  it('reads lines of UTF-8 across chunks, and refuses a line over the limit before holding it', async () => {
    const e = Buffer.from('é');
    const chunks = [Buffer.from('a\r\nb'), e.subarray(0, 1), e.subarray(1), Buffer.from('\nlast')];
    const got: string[] = [];
    for await (const l of readLines(Readable.from(chunks))) got.push(l);
    expect(got).toEqual(['a', 'bé', 'last']);
    const long = Readable.from([
      Buffer.from('short\n'),
      Buffer.alloc(60, 'x'),
      Buffer.alloc(60, 'x'),
    ]);
    const lines = readLines(long, 100);
    expect((await lines.next()).value).toBe('short');
    await expect(lines.next()).rejects.toThrow(
      new CliError('line 2 is over 100 bytes: no dump record is that long'),
    );
  });
});
