import { newId } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import type { Store } from '../../store.js';
import { type StoreConformanceOptions, useStore, withFreshStore } from '../context.js';
import { expectClose, expectCode, Rng, sha256 } from '../helpers.js';

/** These tests need a store with no recorded space, so each makes its own. */
export function describeEmbeddingSpace(options: StoreConformanceOptions): void {
  describe('embedding space', () => {
    const fresh = (fn: (store: Store) => Promise<void>) => () => withFreshStore(options, fn);
    const vector = (dims: number) => new Rng(dims).vector(dims);

    it(
      'has no space on a new store',
      fresh(async (s) => {
        expect(await s.getEmbeddingSpace()).toBeNull();
      }),
    );

    it(
      'records the first space it is given and returns it',
      fresh(async (s) => {
        expect(
          await s.ensureEmbeddingSpace({ embedderId: 'openai/te3-small', dimensions: 6 }),
        ).toEqual({
          embedderId: 'openai/te3-small',
          dimensions: 6,
        });
        expect(await s.getEmbeddingSpace()).toEqual({
          embedderId: 'openai/te3-small',
          dimensions: 6,
        });
      }),
    );

    it(
      'accepts the same space again',
      fresh(async (s) => {
        await s.ensureEmbeddingSpace({ embedderId: 'e1', dimensions: 6 });
        expect(await s.ensureEmbeddingSpace({ embedderId: 'e1', dimensions: 6 })).toEqual({
          embedderId: 'e1',
          dimensions: 6,
        });
      }),
    );

    it(
      'refuses another width (EMBEDDING_MISMATCH) and keeps the recorded space',
      fresh(async (s) => {
        await s.ensureEmbeddingSpace({ embedderId: 'e1', dimensions: 6 });
        const e = await expectCode(
          () => s.ensureEmbeddingSpace({ embedderId: 'e1', dimensions: 7 }),
          'EMBEDDING_MISMATCH',
        );
        expect(e.message).toMatch(/6/);
        expect(e.message).toMatch(/7/);
        expect(await s.getEmbeddingSpace()).toEqual({ embedderId: 'e1', dimensions: 6 });
      }),
    );

    it(
      'refuses another embedder of the same width (EMBEDDING_MISMATCH), naming both',
      fresh(async (s) => {
        await s.ensureEmbeddingSpace({ embedderId: 'embedder-one', dimensions: 6 });
        const e = await expectCode(
          () => s.ensureEmbeddingSpace({ embedderId: 'embedder-two', dimensions: 6 }),
          'EMBEDDING_MISMATCH',
        );
        expect(e.message).toContain('embedder-one');
        expect(e.message).toContain('embedder-two');
        expect(await s.getEmbeddingSpace()).toEqual({ embedderId: 'embedder-one', dimensions: 6 });
      }),
    );

    it(
      'records a bare width when the first vector is written without an embedder',
      fresh(async (s) => {
        await s.addMemories([{ agentId: 'a', content: { text: 'x' }, embedding: vector(5) }]);
        expect(await s.getEmbeddingSpace()).toEqual({ embedderId: null, dimensions: 5 });
      }),
    );

    it(
      'lets a bare width adopt the first embedder offered, then holds to it',
      fresh(async (s) => {
        await s.addMemories([{ agentId: 'a', content: { text: 'x' }, embedding: vector(5) }]);
        expect(await s.ensureEmbeddingSpace({ embedderId: 'e5', dimensions: 5 })).toEqual({
          embedderId: 'e5',
          dimensions: 5,
        });
        expect(await s.getEmbeddingSpace()).toEqual({ embedderId: 'e5', dimensions: 5 });
        await expectCode(
          () => s.ensureEmbeddingSpace({ embedderId: 'other', dimensions: 5 }),
          'EMBEDDING_MISMATCH',
        );
      }),
    );

    it(
      'refuses to give a bare width another width (EMBEDDING_MISMATCH)',
      fresh(async (s) => {
        await s.addMemories([{ agentId: 'a', content: { text: 'x' }, embedding: vector(5) }]);
        await expectCode(
          () => s.ensureEmbeddingSpace({ embedderId: 'e', dimensions: 4 }),
          'EMBEDDING_MISMATCH',
        );
        expect(await s.getEmbeddingSpace()).toEqual({ embedderId: null, dimensions: 5 });
      }),
    );

    it(
      'holds vectors written later to the recorded width (EMBEDDING_MISMATCH)',
      fresh(async (s) => {
        await s.ensureEmbeddingSpace({ embedderId: 'e', dimensions: 4 });
        const id = newId();
        await expectCode(
          () => s.addMemories([{ id, agentId: 'a', content: { text: 'x' }, embedding: vector(3) }]),
          'EMBEDDING_MISMATCH',
        );
        expect(await s.getMemory(id)).toBeNull();
        const [ok] = await s.addMemories([
          { agentId: 'a', content: { text: 'y' }, embedding: vector(4) },
        ]);
        expect(ok!.embedding).toHaveLength(4);
        await expectCode(() => s.searchMemories({ vector: vector(3) }), 'EMBEDDING_MISMATCH');
      }),
    );

    it(
      'does not record a space from a batch that failed',
      fresh(async (s) => {
        await expectCode(
          () =>
            s.addMemories([
              { agentId: 'a', content: { text: 'x' }, embedding: vector(5) },
              { agentId: '', content: { text: 'bad' } },
            ]),
          'INVALID_ARGUMENT',
        );
        expect(await s.getEmbeddingSpace()).toBeNull();
      }),
    );

    it(
      'does not record a space from memories without vectors',
      fresh(async (s) => {
        await s.addMemories([{ agentId: 'a', content: { text: 'x' } }]);
        expect(await s.getEmbeddingSpace()).toBeNull();
      }),
    );

    it.each([
      ['zero dimensions', { embedderId: 'e', dimensions: 0 }],
      ['negative dimensions', { embedderId: 'e', dimensions: -3 }],
      ['fractional dimensions', { embedderId: 'e', dimensions: 1.5 }],
      ['an empty embedder id', { embedderId: '', dimensions: 4 }],
    ])('rejects %s (INVALID_ARGUMENT) and records nothing', async (_l, space) => {
      await withFreshStore(options, async (s) => {
        await expectCode(() => s.ensureEmbeddingSpace(space), 'INVALID_ARGUMENT');
        expect(await s.getEmbeddingSpace()).toBeNull();
      });
    });
  });

  describe('embedding cache', () => {
    const store = useStore(options);
    const embedder = () => `embedder-${newId()}`;
    // A store with encryption caches no embeddings (keyed by content hash, of no tenant,
    // an embedding tells its text): it checks what is put, stores nothing, and misses.
    const caches = it.skipIf(options.encrypted === true);

    it.runIf(options.encrypted === true)(
      'caches nothing on a store with encryption: puts are checked, every get misses',
      async () => {
        const e = embedder();
        await store().putCachedEmbeddings(e, [{ contentHash: sha256('a'), embedding: [1, 2] }]);
        expect((await store().getCachedEmbeddings(e, [sha256('a')])).size).toBe(0);
        await expectCode(
          () => store().putCachedEmbeddings(e, [{ contentHash: 'h', embedding: [Number.NaN] }]),
          'INVALID_ARGUMENT',
        );
      },
    );

    it('misses everything at first', async () => {
      const got = await store().getCachedEmbeddings(embedder(), [sha256('a'), sha256('b')]);
      expect(got.size).toBe(0);
    });

    caches('returns what was put, by content hash', async () => {
      const e = embedder();
      const a = [0.1, 0.2, 0.3];
      const b = [-1, 0.5, 0.25];
      await store().putCachedEmbeddings(e, [
        { contentHash: sha256('a'), embedding: a },
        { contentHash: sha256('b'), embedding: b },
      ]);
      const got = await store().getCachedEmbeddings(e, [sha256('a'), sha256('b'), sha256('c')]);
      expect([...got.keys()].sort()).toEqual([sha256('a'), sha256('b')].sort());
      expectClose(got.get(sha256('a')), a);
      expectClose(got.get(sha256('b')), b);
    });

    caches('keeps the embeddings of different embedders apart', async () => {
      const e1 = embedder();
      const e2 = embedder();
      await store().putCachedEmbeddings(e1, [{ contentHash: 'h', embedding: [1, 0] }]);
      await store().putCachedEmbeddings(e2, [{ contentHash: 'h', embedding: [0, 1, 0] }]);
      expect((await store().getCachedEmbeddings(e1, ['h'])).get('h')).toEqual([1, 0]);
      expect((await store().getCachedEmbeddings(e2, ['h'])).get('h')).toEqual([0, 1, 0]);
      expect((await store().getCachedEmbeddings(embedder(), ['h'])).size).toBe(0);
    });

    caches('replaces an entry put again', async () => {
      const e = embedder();
      await store().putCachedEmbeddings(e, [{ contentHash: 'h', embedding: [1, 2] }]);
      await store().putCachedEmbeddings(e, [{ contentHash: 'h', embedding: [3, 4] }]);
      expect((await store().getCachedEmbeddings(e, ['h'])).get('h')).toEqual([3, 4]);
    });

    it('handles empty requests', async () => {
      const e = embedder();
      await store().putCachedEmbeddings(e, []);
      expect((await store().getCachedEmbeddings(e, [])).size).toBe(0);
    });

    caches('serves a batch of 500', async () => {
      const e = embedder();
      const rng = new Rng(500);
      const entries = Array.from({ length: 500 }, (_, i) => ({
        contentHash: sha256(`t${i}`),
        embedding: rng.vector(4),
      }));
      await store().putCachedEmbeddings(e, entries);
      const got = await store().getCachedEmbeddings(
        e,
        entries.map((x) => x.contentHash),
      );
      expect(got.size).toBe(500);
      expect(got.get(entries[321]!.contentHash)![2]).toBeCloseTo(entries[321]!.embedding[2]!, 6);
    });

    it('does not touch the store embedding space', async () => {
      await withFreshStore(options, async (s) => {
        await s.putCachedEmbeddings('e', [{ contentHash: 'h', embedding: [1, 2, 3] }]);
        expect(await s.getEmbeddingSpace()).toBeNull();
      });
    });

    it.each([
      ['a NaN value', [{ contentHash: 'h', embedding: [Number.NaN] }]],
      ['an empty embedding', [{ contentHash: 'h', embedding: [] }]],
      ['an empty content hash', [{ contentHash: '', embedding: [1] }]],
    ])(
      'rejects an entry with %s (INVALID_ARGUMENT), storing none of the batch',
      async (_l, bad) => {
        const e = embedder();
        await expectCode(
          () =>
            store().putCachedEmbeddings(e, [{ contentHash: 'good', embedding: [1, 2] }, ...bad]),
          'INVALID_ARGUMENT',
        );
        expect((await store().getCachedEmbeddings(e, ['good', 'h'])).size).toBe(0);
      },
    );

    it('rejects an empty embedder id (INVALID_ARGUMENT)', async () => {
      await expectCode(
        () => store().putCachedEmbeddings('', [{ contentHash: 'h', embedding: [1] }]),
        'INVALID_ARGUMENT',
      );
      await expectCode(() => store().getCachedEmbeddings('', ['h']), 'INVALID_ARGUMENT');
    });
  });
}
