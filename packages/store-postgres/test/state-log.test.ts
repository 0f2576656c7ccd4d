import { randomUUID } from 'node:crypto';
import type { StateCommit } from '@cairn/core';
import { createMemoryStore, type Store } from '@cairn/store';
import { Rng } from '@cairn/store/testing';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, describe, expect, it } from 'vitest';
import { createPostgresStore } from '../src/index.js';
import { ident } from '../src/migrations.js';
import { packText, unpackText } from '../src/packed.js';
import { type Queryable, sessionQueryable } from '../src/queryable.js';
import {
  commitsOf,
  keptSegments,
  SEGMENT_COMMITS,
  segmentBytes,
  segmentsOf,
} from '../src/state-log.js';
import { describeServer, dropSchema, freshSchema, POSTGRES_URL, withClient } from './support.js';

const WORDS = ['plan', 'search', 'cite', 'river', 'budget', 'the', 'draft', 'tool', 'result'];

/** A chain of 20 messages in `threadId`, ids `${prefix}0` (the root) to `${prefix}19`. */
async function addChain(store: Store, threadId: string, prefix: string): Promise<void> {
  await store.addMessages(
    Array.from({ length: 20 }, (_, i) => ({
      id: `${prefix}${i}`,
      threadId,
      parentId: i === 0 ? null : `${prefix}${i - 1}`,
      role: 'user',
      data: i,
    })),
  );
}

/**
 * The same log on `store`: a thread of 20 messages, branch `main` with `commits` appends of
 * updates from a few bytes to ~2 KB (so segments close by size and by count), a snapshot now
 * and then, some at a message; branch `side` with 3. Returns the branch ids.
 */
async function writeLog(
  store: Store,
  commits: number,
  threadId = 'log-thread',
): Promise<{ main: string; side: string }> {
  const random = new Rng(7);
  const { thread, branch } = await store.createThreadWithBranch({ id: threadId });
  await addChain(store, thread.id, 'm');
  const side = await store.createBranch({ threadId: thread.id, name: 'side', headMessageId: 'm3' });
  for (let v = 1; v <= commits; v++) {
    const words = Math.floor(random.next() ** 4 * 300);
    const text = Array.from({ length: words }, () => random.pick(WORDS)).join(' ');
    await store.appendStateCommit(
      {
        branchId: branch.id,
        messageId: random.next() < 0.3 ? `m${random.int(20)}` : null,
        update: { v, text, tags: [v % 7, null, { deep: v % 2 === 0 }] },
        snapshot: random.next() < 0.05 ? { at: v, unicode: 'ü ✓ 🌊' } : null,
      },
      v - 1,
    );
  }
  for (let v = 1; v <= 3; v++)
    await store.appendStateCommit(
      { branchId: side.id, messageId: null, update: { side: v } },
      v - 1,
    );
  return { main: branch.id, side: side.id };
}

/** What a commit holds apart from the ids and clock each store makes its own. */
const content = (c: StateCommit | null) =>
  c && {
    version: c.version,
    messageId: c.messageId,
    messageDepth: c.messageDepth,
    update: c.update,
    snapshot: c.snapshot,
  };

/** The branch's segments: the sealed ones and the tail. */
async function segmentCount(q: Queryable, schema: string, branchId: string): Promise<number> {
  const r = await q.query<{ n: number }>(
    `SELECT count(*)::int + 1 AS n FROM ${ident(schema)}.state_segments WHERE branch_id = $1`,
    [branchId],
  );
  return r.rows[0]!.n;
}

function logOnSegments(
  label: string,
  open: () => Promise<{ store: Store; segments: (branchId: string) => Promise<number> }>,
) {
  it(`${label}: every read across segments answers as the in-memory store does`, async () => {
    const COMMITS = 700;
    const reference = createMemoryStore();
    const { store, segments } = await open();
    const ref = await writeLog(reference, COMMITS);
    const got = await writeLog(store, COMMITS);
    try {
      // Closed by size and by count: more segments than the count alone makes.
      expect(await segments(got.main)).toBeGreaterThan(Math.ceil(COMMITS / SEGMENT_COMMITS));
      const all = await store.getStateCommits(got.main);
      expect(all.map(content)).toEqual((await reference.getStateCommits(ref.main)).map(content));
      expect(all.every((c) => c.branchId === got.main && c.threadId === 'log-thread')).toBe(true);
      expect((await store.getStateCommits(got.side)).map(content)).toEqual(
        (await reference.getStateCommits(ref.side)).map(content),
      );
      const random = new Rng(11);
      for (let i = 0; i < 60; i++) {
        const fromVersion = random.int(COMMITS + 5);
        const toVersion = fromVersion + random.int(80);
        const range = { fromVersion, toVersion };
        expect((await store.getStateCommits(got.main, range)).map(content)).toEqual(
          (await reference.getStateCommits(ref.main, range)).map(content),
        );
        const query = {
          ...(random.next() < 0.5 ? { maxVersion: random.int(COMMITS + 5) } : {}),
          ...(random.next() < 0.5 ? { withSnapshot: true } : {}),
          ...(random.next() < 0.5 ? { maxMessageDepth: random.int(22) - 1 } : {}),
        };
        expect(
          content(await store.getLatestStateCommit(got.main, query)),
          JSON.stringify(query),
        ).toEqual(content(await reference.getLatestStateCommit(ref.main, query)));
      }
    } finally {
      await store.close();
    }
  }, 120_000);

  it(`${label}: appends on the tail as stored after an append rolled back (its tail packed, never stored)`, async () => {
    const { store } = await open();
    const other = createMemoryStore();
    try {
      const { branch } = await store.createThreadWithBranch({});
      const ref = (await other.createThreadWithBranch({})).branch;
      const append = (s: Store, branchId: string, v: number, text: string) =>
        s.appendStateCommit({ branchId, messageId: null, update: { v, text } }, v - 1);
      for (let v = 1; v <= 40; v++) {
        const text = `${v} `.repeat(v % 7);
        // This process packs a tail that is never stored: the append after it reads the stored one.
        if (v % 5 === 0)
          await expect(
            store.transaction(async (tx) => {
              await append(tx, branch.id, v, 'rolled back');
              throw new Error('rolled back');
            }),
          ).rejects.toThrow('rolled back');
        await append(store, branch.id, v, text);
        await append(other, ref.id, v, text);
      }
      expect((await store.getStateCommits(branch.id)).map((c) => c.update)).toEqual(
        (await other.getStateCommits(ref.id)).map((c) => c.update),
      );
    } finally {
      await store.close();
    }
  });

  it(`${label}: finds the newest commit meeting every condition when many segments' summaries allow one but hold none`, async () => {
    // Odd versions have a snapshot at depth 19, even ones neither; only version 1 has a
    // snapshot at no message. Every segment's summary (a snapshot, a commit at depth -1)
    // passes both conditions, so the search reads page after page of segments.
    const { store, segments } = await open();
    try {
      const { thread, branch } = await store.createThreadWithBranch({});
      await addChain(store, thread.id, 'p');
      const random = new Rng(3);
      for (let v = 1; v <= 400; v++) {
        const odd = v % 2 === 1;
        const words = Array.from({ length: 60 }, () => random.pick(WORDS));
        await store.appendStateCommit(
          {
            branchId: branch.id,
            messageId: odd && v > 1 ? 'p19' : null,
            update: { v, words: words.join(' ') },
            snapshot: odd ? { v } : null,
          },
          v - 1,
        );
      }
      expect(await segments(branch.id)).toBeGreaterThan(8);
      const found = await store.getLatestStateCommit(branch.id, {
        withSnapshot: true,
        maxMessageDepth: 0,
      });
      expect(found && { version: found.version, snapshot: found.snapshot }).toEqual({
        version: 1,
        snapshot: { v: 1 },
      });
      expect(
        (await store.getLatestStateCommit(branch.id, { withSnapshot: true, maxVersion: 300 }))
          ?.version,
      ).toBe(299);
    } finally {
      await store.close();
    }
  }, 60_000);
}

describe('the state log in segments, on PGlite', () => {
  const db = new PGlite();
  afterAll(() => db.close());
  const q = sessionQueryable(db);
  logOnSegments('PGlite', async () => {
    const schema = freshSchema();
    const store = await createPostgresStore({ client: db }, { schema });
    return { store, segments: (branchId: string) => segmentCount(q, schema, branchId) };
  });
});

describeServer('the state log in segments, on the server', () => {
  const schemas: string[] = [];
  afterAll(async () => {
    for (const s of schemas) await dropSchema(s);
  });
  const open = async () => {
    const schema = freshSchema();
    schemas.push(schema);
    const store = await createPostgresStore({ connectionString: POSTGRES_URL }, { schema });
    return { store, schema };
  };
  const segments = (schema: string, branchId: string) =>
    withClient((c) => segmentCount(sessionQueryable(c), schema, branchId));
  logOnSegments('server', async () => {
    const { store, schema } = await open();
    return { store, segments: (branchId: string) => segments(schema, branchId) };
  });

  it.each([
    ['ids of 36 and 10 characters', 'log-thread'],
    // Random, so that Postgres cannot make room by compressing the id itself.
    ['a thread id of 147', Array.from({ length: 4 }, () => randomUUID()).join('-')],
  ])('keeps every segment in its row, %s (nothing moved out to TOAST)', async (_, threadId) => {
    const { store, schema } = await open();
    try {
      const { main } = await writeLog(store, 300, threadId);
      const r = await withClient((c) =>
        c.query(
          `SELECT (SELECT max(octet_length(commits))::int FROM "${schema}".state_segments) AS packed,
             (SELECT sum(pg_relation_size(reltoastrelid))::int FROM pg_class
              WHERE oid IN ('"${schema}".state_segments'::regclass, '"${schema}".state_tail'::regclass)) AS toast`,
        ),
      );
      const { packed, toast } = r.rows[0] as { packed: number; toast: number };
      const limit = segmentBytes({ branchId: main, threadId });
      // A segment closes where its commits no longer fit packed fast; sealed at full
      // quality, it holds ~15-25% less than the limit.
      expect(packed).toBeGreaterThan(limit * 0.7);
      expect(packed).toBeLessThanOrEqual(limit);
      expect(toast).toBe(0);
    } finally {
      await store.close();
    }
  });

  it('reads no segment for what is new when nothing is: the tail is not sent to be unpacked and dropped', async () => {
    const { store, schema } = await open();
    try {
      const { main } = await writeLog(store, 40);
      const latest = (await store.getLatestStateCommit(main))!.version;
      // Bytes no reader can unpack: a read that fetched the tail would fail on them.
      await withClient((c) =>
        c.query(
          `UPDATE "${schema}".state_tail SET commits = '\\x00ff'::bytea WHERE branch_id = $1`,
          [main],
        ),
      );
      expect(await store.getStateCommits(main, { fromVersion: latest + 1 })).toEqual([]);
      await expect(
        store.getStateCommits(main, { fromVersion: latest + 1, toVersion: latest + 5 }),
      ).resolves.toEqual([]);
      // A read that reaches into the tail does read it.
      await expect(store.getStateCommits(main, { fromVersion: latest })).rejects.toThrow();
    } finally {
      await store.close();
    }
  });

  it('seals a segment packed at full quality, its tail packed fast while that fits', async () => {
    const { store, schema } = await open();
    try {
      const { main } = await writeLog(store, 300);
      const rows = await withClient((c) =>
        c.query(
          `SELECT commits FROM "${schema}".state_segments WHERE branch_id = $1 ORDER BY first_version`,
          [main],
        ),
      );
      const sealed = rows.rows.map((r) => r.commits as Buffer);
      expect(sealed.length).toBeGreaterThan(5);
      // The bytes every append used to store: the whole segment at full quality.
      for (const bytes of sealed) expect(packText(unpackText(bytes)).equals(bytes)).toBe(true);
      // One commit more: a tail of a few small commits packs fast (larger than at full quality).
      await store.appendStateCommit({ branchId: main, messageId: null, update: { v: 301 } }, 300);
      const { tail } = (
        await withClient((c) =>
          c.query(`SELECT commits AS tail FROM "${schema}".state_tail WHERE branch_id = $1`, [
            main,
          ]),
        )
      ).rows[0] as { tail: Buffer };
      expect(JSON.parse(unpackText(tail)).at(-1)[2]).toEqual({ v: 301 });
      expect(tail.length).toBeGreaterThan(packText(unpackText(tail)).length);
    } finally {
      await store.close();
    }
  });

  it('packs its tail fast at every append: a segment closes where its commits no longer fit so', async () => {
    const { store, schema } = await open();
    try {
      const { branch } = await store.createThreadWithBranch({});
      const random = new Rng(3);
      for (let v = 1; v <= 100; v++) {
        const text = Array.from({ length: 40 }, () => random.pick(WORDS)).join(' ');
        await store.appendStateCommit(
          { branchId: branch.id, messageId: null, update: { v, text } },
          v - 1,
        );
        const { rows } = await withClient((c) =>
          c.query(
            `SELECT commits, last_version - first_version + 1 AS n FROM "${schema}".state_tail WHERE branch_id = $1`,
            [branch.id],
          ),
        );
        const { commits, n } = rows[0] as { commits: Buffer; n: number };
        // Never packed at full quality while it is the tail (a lone commit may be, if it is large).
        if (n > 1) expect(packText(unpackText(commits)).equals(commits)).toBe(false);
      }
      expect(await segments(schema, branch.id)).toBeGreaterThan(2);
    } finally {
      await store.close();
    }
  });

  // Small updates stay in one tail; ~1 KB of random text seals one every few appends, so
  // the loser of a round may have read the tail it would seal before the winner sealed it.
  it.each([
    ['in one tail', 0],
    ['across sealed segments', 150],
  ])(
    'lets one of two stores appending the same version win (%s); the other gets CONFLICT and writes nothing',
    async (_, tokens) => {
      const { store: a, schema } = await open();
      const b = await createPostgresStore({ connectionString: POSTGRES_URL }, { schema });
      const random = new Rng(5);
      const noise = () =>
        Array.from({ length: tokens }, () => random.next().toString(36).slice(2, 8));
      try {
        const { branch } = await a.createThreadWithBranch({});
        const winners: string[] = [];
        for (let round = 0; round < 40; round++) {
          const append = (store: Store, by: string) =>
            store.appendStateCommit(
              { branchId: branch.id, messageId: null, update: { by, round, noise: noise() } },
              round,
            );
          const results = await Promise.allSettled([append(a, 'a'), append(b, 'b')]);
          const won = results.filter((r) => r.status === 'fulfilled');
          expect(won).toHaveLength(1);
          winners.push(won[0]!.value.update.by as string);
          const lost = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
          expect(lost.reason.code).toBe('CONFLICT');
        }
        const log = await b.getStateCommits(branch.id);
        expect(log.map((c) => c.version)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
        expect(log.map((c) => c.update.round)).toEqual(Array.from({ length: 40 }, (_, i) => i));
        expect(log.map((c) => c.update.by)).toEqual(winners);
        // Sealed ones: all but the tail.
        const sealed = (await segments(schema, branch.id)) - 1;
        if (tokens === 0) expect(sealed).toBe(0);
        else expect(sealed).toBeGreaterThan(5);
      } finally {
        await a.close();
        await b.close();
      }
    },
  );
});

describe('keptSegments', () => {
  const commit = (version: number, bytes: number): StateCommit => ({
    branchId: 'b',
    threadId: 't',
    version,
    messageId: null,
    messageDepth: version % 3,
    update: { v: version, text: Array.from({ length: bytes / 36 }, () => randomUUID()).join('') },
    snapshot: version % 4 === 0 ? { v: version } : null,
    createdAt: 1_000 + version,
  });
  const unpacked = (segments: ReturnType<typeof keptSegments>) =>
    segments.flatMap((g) => commitsOf('b', 't', g.firstVersion, g.commits));

  it('holds exactly the commits kept, in one segment when they fit, else split as appends split them', () => {
    for (const tail of [true, false]) {
      const small = Array.from({ length: 12 }, (_, i) => commit(i + 5, 36));
      const one = keptSegments(small, tail);
      expect(one).toHaveLength(1);
      expect(one[0]).toMatchObject({
        firstVersion: 5,
        lastVersion: 16,
        hasSnapshot: true,
        minDepth: 0,
      });
      expect(unpacked(one)).toEqual(small);
      // Too many bytes for one segment: as `segmentsOf` packs them.
      const large = Array.from({ length: 40 }, (_, i) => commit(i + 5, 360));
      const split = keptSegments(large, tail);
      expect(split.length).toBeGreaterThan(1);
      expect(split.map((g) => [g.firstVersion, g.lastVersion])).toEqual(
        segmentsOf(large).map((g) => [g.firstVersion, g.lastVersion]),
      );
      expect(unpacked(split)).toEqual(large);
      for (const g of split)
        expect(g.commits.byteLength).toBeLessThanOrEqual(segmentBytes(large[0]!));
    }
    expect(keptSegments([], true)).toEqual([]);
  });
});
