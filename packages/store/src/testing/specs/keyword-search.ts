import { newId } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import type { MemoryHit } from '../../store.js';
import { SLOW_TEST_TIMEOUT, type StoreConformanceOptions, useStore } from '../context.js';
import { expectCode, Rng } from '../helpers.js';

/**
 * Distinctive words that are no stop words and that stem to themselves (Postgres uses an
 * english text-search configuration), so any tokenizer and stemmer agrees on them.
 */
const VOCAB = [
  'zebra',
  'quartz',
  'violin',
  'falcon',
  'cobalt',
  'saffron',
  'tundra',
  'mango',
  'kayak',
  'lemon',
  'walnut',
  'copper',
];

export function describeKeywordSearch(options: StoreConformanceOptions): void {
  describe('keyword search', () => {
    const store = useStore(options);

    async function corpus(texts: string[]) {
      const agentId = `kw-${newId()}`;
      const stored = await store().addMemories(
        texts.map((text) => ({ agentId, content: { text } })),
      );
      const byText = (t: string) => stored.find((m) => m.content.text === t)!.id;
      const find = (text: string, limit = 100) =>
        store().searchMemories({ text, filter: { agentId }, limit });
      return { agentId, stored, byText, find };
    }
    const idsOf = (hits: MemoryHit[]) => hits.map((h) => h.memory.id);

    it('returns memories containing any of the words, and no others', async () => {
      const c = await corpus([
        'zebra quartz river',
        'violin stone',
        'mango copper',
        'lemon walnut',
      ]);
      const hits = await c.find('zebra violin');
      expect(idsOf(hits).sort()).toEqual(
        [c.byText('zebra quartz river'), c.byText('violin stone')].sort(),
      );
    });

    it(
      'matches exactly the memories sharing a word with the query, over random texts',
      async () => {
        const rng = new Rng(99);
        const texts = Array.from(
          { length: 80 },
          (_, i) => `${rng.sample(VOCAB, 3).join(' ')} entry${i}`,
        );
        const c = await corpus(texts);
        for (let q = 0; q < 12; q++) {
          const words = rng.sample(VOCAB, 1 + rng.int(2));
          const expected = c.stored.filter((m) =>
            words.some((w) => m.content.text.split(' ').includes(w)),
          );
          const hits = await c.find(words.join(' '), 1000);
          expect(idsOf(hits).sort(), words.join(' ')).toEqual(expected.map((m) => m.id).sort());
        }
      },
      SLOW_TEST_TIMEOUT,
    );

    it('ranks a memory with both query words above one with only one', async () => {
      const c = await corpus(['falcon river stone', 'falcon cobalt', 'cobalt harbor bridge']);
      const hits = await c.find('falcon cobalt');
      expect(hits).toHaveLength(3);
      expect(hits[0]!.memory.id).toBe(c.byText('falcon cobalt'));
    });

    it('ranks a memory with the word three times above one with it once, at equal length', async () => {
      const c = await corpus(['saffron tundra kayak lemon', 'saffron saffron saffron tundra']);
      const hits = await c.find('saffron');
      expect(idsOf(hits)).toEqual([
        c.byText('saffron saffron saffron tundra'),
        c.byText('saffron tundra kayak lemon'),
      ]);
    });

    it('gives positive scores, best first', async () => {
      const rng = new Rng(5);
      const c = await corpus(Array.from({ length: 30 }, () => rng.sample(VOCAB, 4).join(' ')));
      const hits = await c.find('mango walnut copper');
      expect(hits.length).toBeGreaterThan(5);
      for (const h of hits) expect(h.score).toBeGreaterThan(0);
      const scores = hits.map((h) => h.score);
      expect(scores).toEqual([...scores].sort((a, b) => b - a));
    });

    it('returns at most the limit, and the best ones', async () => {
      const texts = [
        ...Array.from({ length: 12 }, (_, i) => `kayak filler${i} other${i} more${i}`),
        'kayak kayak kayak kayak',
      ];
      const c = await corpus(texts);
      const hits = await c.find('kayak', 5);
      expect(hits).toHaveLength(5);
      expect(hits[0]!.memory.id).toBe(c.byText('kayak kayak kayak kayak'));
      expect(await c.find('kayak')).toHaveLength(13);
    });

    it('ignores case', async () => {
      const c = await corpus(['Zebra Quartz', 'violin']);
      expect(idsOf(await c.find('ZEBRA'))).toEqual([c.byText('Zebra Quartz')]);
      expect(idsOf(await c.find('zebra'))).toEqual([c.byText('Zebra Quartz')]);
    });

    it('matches whole words, not parts of words', async () => {
      const c = await corpus(['zebra crossing', 'walnut']);
      expect(await c.find('zeb')).toEqual([]);
    });

    it('treats operators and punctuation in the query as plain text', async () => {
      const c = await corpus(['zebra quartz', 'violin lemon', 'copper']);
      for (const q of [
        "zebra & !( 'violin",
        'zebra | violin',
        'zebra:* <-> violin',
        '"zebra" OR -violin',
        'zebra\\ violin;--',
      ]) {
        const hits = await c.find(q);
        expect(idsOf(hits).sort(), q).toEqual(
          [c.byText('zebra quartz'), c.byText('violin lemon')].sort(),
        );
      }
    });

    it('returns nothing for a query with no words', async () => {
      const c = await corpus(['zebra']);
      expect(await c.find('!!! ??? ...')).toEqual([]);
    });

    it('searches only inside the filter', async () => {
      const a = await corpus(['tundra one']);
      const b = await corpus(['tundra two']);
      expect(idsOf(await a.find('tundra'))).toEqual([a.byText('tundra one')]);
      expect(idsOf(await b.find('tundra'))).toEqual([b.byText('tundra two')]);
      const both = await store().searchMemories({
        text: 'tundra',
        filter: { ids: [a.stored[0]!.id, b.stored[0]!.id] },
      });
      expect(both).toHaveLength(2);
    });

    it('follows updates and deletes', async () => {
      const c = await corpus(['lemon quartz', 'copper']);
      const lemon = c.byText('lemon quartz');
      await store().updateMemory(lemon, { content: { text: 'mango violin' } });
      expect(await c.find('lemon')).toEqual([]);
      expect(idsOf(await c.find('mango'))).toEqual([lemon]);
      await store().deleteMemories([lemon]);
      expect(await c.find('mango')).toEqual([]);
      expect(idsOf(await c.find('copper'))).toEqual([c.byText('copper')]);
    });

    it('returns whole memories', async () => {
      const agentId = `kw-${newId()}`;
      const [m] = await store().addMemories([
        {
          agentId,
          type: 'document',
          content: { text: 'falcon report', title: 'T' },
          metadata: { k: 1 },
        },
      ]);
      const [hit] = await store().searchMemories({ text: 'falcon', filter: { agentId } });
      expect(hit!.memory).toEqual(m);
    });

    it.each([
      ['an empty text', ''],
      ['a blank text', '   '],
      ['a text that is not a string', 42 as unknown as string],
    ])('rejects %s (INVALID_ARGUMENT)', async (_l, text) => {
      await expectCode(() => store().searchMemories({ text }), 'INVALID_ARGUMENT');
    });
  });
}
