import { createMemoryStore, type Store } from '@cairn/store';
import { Rng } from '@cairn/store/testing';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresStore } from '../src/index.js';
import { sessionQueryable } from '../src/queryable.js';
import { freshSchema, schemaBefore } from './support.js';

// Stop words, words Postgres's `english` configuration would stem, accents, CJK, digits.
const WORDS = [
  'the',
  'is',
  'when',
  'launch',
  'launches',
  'launching',
  'parking',
  'lot',
  'running',
  'run',
  'café',
  'CAFÉ',
  'naïve',
  '東京',
  'über',
  'v2',
  '2026',
  'a',
  'of',
  'falcons',
];

/** The same search on both stores: the same memories in the same order, the same scores. */
async function expectSameHits(pg: Store, reference: Store, text: string, limit = 100) {
  const [got, want] = await Promise.all(
    [pg, reference].map((s) => s.searchMemories({ text, limit })),
  );
  expect(
    got!.map((h) => h.memory.id),
    text,
  ).toEqual(want!.map((h) => h.memory.id));
  for (const [i, h] of got!.entries()) expect(h.score).toBeCloseTo(want![i]!.score, 9);
}

describe('keyword search on PGlite against the reference store', () => {
  let db: PGlite;
  beforeAll(async () => {
    db = await PGlite.create();
  });
  afterAll(() => db.close());

  it('finds and ranks exactly as the reference: no stemming, no stop words of its own', async () => {
    const pg = await createPostgresStore({ client: db }, { schema: freshSchema() });
    const reference = createMemoryStore();
    const rng = new Rng(11);
    const memories = Array.from({ length: 120 }, (_, i) => ({
      id: `m${i}`,
      agentId: 'a',
      content: {
        text: Array.from({ length: 1 + rng.int(12) }, () => rng.pick(WORDS)).join(
          rng.pick([' ', ', ', '. ', '-']),
        ),
      },
    }));
    await pg.addMemories(memories);
    await reference.addMemories(memories);
    for (const q of ['when is the launch?', 'run', 'café naïve', '東京 v2', 'FALCONS 2026', 'of'])
      await expectSameHits(pg, reference, q);
    for (let i = 0; i < 10; i++)
      await expectSameHits(pg, reference, rng.sample(WORDS, 3).join(' '));
    await pg.close();
  });

  it('indexes a 100,000-character text of distinct words, and a 99,994-character word', async () => {
    const pg = await createPostgresStore({ client: db }, { schema: freshSchema() });
    const reference = createMemoryStore();
    const distinct = Array.from({ length: 16_000 }, (_, i) => `w${i.toString(36)}`)
      .join(' ')
      .slice(0, 100_000);
    // The longest word that fits with "zebra " in a text of at most 100,000 characters.
    const word = 'q'.repeat(99_994);
    const memories = [
      { id: 'many', agentId: 'a', content: { text: distinct } },
      { id: 'long', agentId: 'a', content: { text: `zebra ${word}` } },
      { id: 'short', agentId: 'a', content: { text: 'zebra w9ix' } },
    ];
    await pg.addMemories(memories);
    await reference.addMemories(memories);
    await expectSameHits(pg, reference, 'w9ix w0 zebra');
    await expectSameHits(pg, reference, word);
    expect((await pg.searchMemories({ text: word.slice(1) })).length).toBe(0);
    await pg.updateMemory('short', { content: { text: `${word} again` } });
    await reference.updateMemory('short', { content: { text: `${word} again` } });
    await expectSameHits(pg, reference, `${word} zebra`);
    await pg.close();
  }, 60_000);

  it('re-indexes the memories of a schema made before the shared tokenizer', async () => {
    const texts = ['When is the launch?', 'The parking lot is full', 'running late', 'run'];
    const memories = texts.map((text, i) => ({ id: `m${i}`, agentId: 'a', content: { text } }));
    const current = freshSchema();
    const first = await createPostgresStore({ client: db }, { schema: current });
    await first.addMemories(memories);
    await first.close();
    // The same memories in a schema from before it: the english configuration's index, no
    // token counts.
    const schema = freshSchema();
    await schemaBefore(
      sessionQueryable(db),
      schema,
      'keyword index from the shared tokenizer, with token counts for BM25',
    );
    await db.exec(`INSERT INTO "${schema}".memories (id, type, agent_id, entity_id, room_id, world_id, scope,
        content, metadata, content_hash, embedding, embedding_norm, search, created_at)
      SELECT id, type, agent_id, entity_id, room_id, world_id, scope, content, metadata, content_hash,
        embedding, embedding_norm, to_tsvector('english', content->>'text'), created_at FROM "${current}".memories`);
    const pg = await createPostgresStore({ client: db }, { schema });
    const reference = createMemoryStore();
    await reference.addMemories(memories);
    for (const q of ['when is the launch', 'run', 'running', 'lot'])
      await expectSameHits(pg, reference, q);
    await pg.close();
  });
});
