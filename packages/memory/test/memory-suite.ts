/**
 * The behaviour of @cairn/memory, run against one store per call: every store must give
 * the same answers through the Store contract.
 */
import {
  type CairnError,
  canSee,
  isCairnError,
  MEMORY_SCOPES,
  type Memory,
  type MemoryScope,
  type Viewer,
} from '@cairn/core';
import { contentHash, MAX_MEMORY_TEXT_LENGTH, type Store } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import {
  chunkText,
  createMemory,
  hashingEmbedder,
  MAX_DOCUMENT_LENGTH,
  type RecallMode,
  type RememberInput,
} from '../src/index.js';
import {
  conceptEmbedder,
  countingEmbedder,
  factScript,
  failingEmbedder,
  freshStores,
  rejects,
  rng,
} from './helpers.js';

export interface StoreFactory {
  /** A fresh, empty store. */
  create(): Promise<Store>;
  /** Per-test budget (default vitest's); in-process Postgres needs more. */
  timeoutMs?: number;
  /**
   * The store keeps an embedding cache (default true); a store with encryption keeps
   * none, so every text written is embedded again.
   */
  cachesEmbeddings?: boolean;
}

const MODES: RecallMode[] = ['hybrid', 'vector', 'keyword'];

export function describeMemorySuite(name: string, factory: StoreFactory) {
  describe(`@cairn/memory on ${name}`, { timeout: factory.timeoutMs ?? 5000 }, () => {
    const newStore = freshStores(factory.create);
    const caches = factory.cachesEmbeddings !== false;

    it('remembers privately by default, even with a room: another agent in the room sees nothing', async () => {
      const store = await newStore();
      const a = createMemory({ store, agentId: 'agent-a' });
      const m = await a.remember({
        text: 'The user likes green tea',
        roomId: 'room-1',
        worldId: 'w',
      });
      expect(m.scope).toBe('private');
      expect(m.agentId).toBe('agent-a');
      const b = createMemory({ store, agentId: 'agent-b' });
      for (const mode of MODES) {
        expect(
          await b.recall('green tea', {
            mode,
            viewer: { agentId: 'agent-b', roomId: 'room-1', worldId: 'w' },
          }),
        ).toEqual([]);
        const own = await a.recall('green tea', { mode, viewer: { agentId: 'agent-a' } });
        expect(own.map((h) => h.memory.id)).toEqual([m.id]);
      }
    });

    it('rejects a room scope without a room (and a shared one without a world) before embedding', async () => {
      const store = await newStore();
      const embedder = countingEmbedder();
      const memory = createMemory({ store, embedder, agentId: 'a' });
      const e1 = await rejects(memory.remember({ text: 'x', scope: 'room' }));
      expect(isCairnError(e1, 'INVALID_ARGUMENT')).toBe(true);
      const e2 = await rejects(memory.remember({ text: 'x', scope: 'shared', roomId: 'r' }));
      expect(isCairnError(e2, 'INVALID_ARGUMENT')).toBe(true);
      const e3 = await rejects(memory.remember({ text: '   ' }));
      expect(isCairnError(e3, 'INVALID_ARGUMENT')).toBe(true);
      // A single call names the field, not a batch position; a batch names the position.
      const single = await rejects(memory.remember({ text: 'x', scope: 'shared' }));
      expect((single as Error).message).toBe(
        'worldId is required: a shared memory needs a worldId',
      );
      expect(single).toMatchObject({ details: { field: 'worldId', scope: 'shared' } });
      const batch = await rejects(
        memory.rememberMany([{ text: 'x' }, { text: 'y', scope: 'room' }]),
      );
      expect(batch).toMatchObject({ details: { field: 'memories[1].roomId', scope: 'room' } });
      expect(((await rejects(memory.remember({ text: '' }))) as Error).message).toBe(
        'text must be a non-blank string',
      );
      expect(embedder.calls).toEqual([]);
      expect(await store.countMemories()).toBe(0);
    });

    it('never shows a viewer what canSee forbids, in any mode (property, seeded)', async () => {
      const store = await newStore();
      const r = rng(20261121);
      const agents = ['a1', 'a2', 'a3'];
      const rooms = ['r1', 'r2', 'r3', null];
      const worlds = ['w1', 'w2', null];
      const words = ['river', 'stone', 'cairn', 'mountain', 'trail', 'summit', 'valley', 'lake'];
      const memories = new Map(
        agents.map((id) => [
          id,
          createMemory({ store, agentId: id, embedder: hashingEmbedder({ dimensions: 64 }) }),
        ]),
      );
      const stored: Memory[] = [];
      const byAgent = new Map(agents.map((id) => [id, [] as RememberInput[]]));
      for (let i = 0; i < 120; i++) {
        const agentId = r.pick(agents);
        const roomId = r.pick(rooms);
        const worldId = r.pick(worlds);
        const allowed = MEMORY_SCOPES.filter(
          (s) => s === 'private' || (s === 'room' && roomId) || (s === 'shared' && worldId),
        );
        const scope: MemoryScope = r.pick(allowed);
        const text = `${r.pick(words)} ${r.pick(words)} note ${i}`;
        byAgent.get(agentId)!.push({ text, roomId, worldId, scope });
      }
      for (const [agentId, items] of byAgent)
        stored.push(...(await memories.get(agentId)!.rememberMany(items)));
      let checked = 0;
      for (let v = 0; v < 25; v++) {
        const viewer: Viewer = {
          agentId: r.pick(agents),
          roomId: r.pick(rooms),
          worldId: r.pick(worlds),
        };
        const query = `${r.pick(words)} ${r.pick(words)}`;
        const visible = stored.filter((m) => canSee(viewer, m));
        for (const mode of MODES) {
          const hits = await memories
            .get(r.pick(agents))!
            .recall(query, { viewer, mode, limit: 200 });
          for (const h of hits)
            expect(
              canSee(viewer, h.memory),
              `${mode} leaked ${h.memory.id} to ${JSON.stringify(viewer)}`,
            ).toBe(true);
          checked += hits.length;
          if (mode === 'vector') {
            // The filter runs inside the store: every visible memory is reachable.
            expect(hits.map((h) => h.memory.id).sort()).toEqual(visible.map((m) => m.id).sort());
          }
          if (mode === 'keyword') {
            const q = query.split(' ');
            const expected = visible.filter((m) =>
              q.some((w) => m.content.text.split(' ').includes(w)),
            );
            expect(hits.map((h) => h.memory.id).sort()).toEqual(expected.map((m) => m.id).sort());
          }
        }
        const recent = await memories.get('a1')!.recent({ viewer, limit: 200 });
        expect(recent.map((m) => m.id).sort()).toEqual(visible.map((m) => m.id).sort());
      }
      expect(checked).toBeGreaterThan(100);
    });

    it('applies threshold: cosine in vector and hybrid (vector side), store score in keyword mode', async () => {
      const store = await newStore();
      const memory = createMemory({
        store,
        agentId: 'a',
        embedder: hashingEmbedder({ dimensions: 256 }),
      });
      await memory.rememberMany([
        { text: 'gardening tips for tomatoes in spring' },
        { text: 'tomatoes need full sun and steady watering' },
        { text: 'the stock market fell on tuesday' },
        { text: 'a recipe for tomato soup with basil' },
        { text: 'quarterly tax filing deadline' },
      ]);
      const all = await memory.recall('tomatoes in the garden', { mode: 'vector', limit: 10 });
      expect(all.length).toBe(5);
      const cut = (all[1]!.score + all[2]!.score) / 2;
      const above = await memory.recall('tomatoes in the garden', {
        mode: 'vector',
        limit: 10,
        threshold: cut,
      });
      expect(above.map((h) => h.memory.id)).toEqual(all.slice(0, 2).map((h) => h.memory.id));
      expect(above.every((h) => h.score >= cut && h.similarity === h.score)).toBe(true);

      const hybrid = await memory.recall('tomatoes in the garden', {
        mode: 'hybrid',
        limit: 10,
        threshold: cut,
      });
      for (const h of hybrid) {
        if (h.sources.includes('vector')) expect(h.similarity!).toBeGreaterThanOrEqual(cut);
        else expect(h.sources).toEqual(['keyword']);
      }
      const belowCut = hybrid.filter((h) => h.similarity !== null && h.similarity < cut);
      expect(belowCut.every((h) => h.sources.length === 1 && h.sources[0] === 'keyword')).toBe(
        true,
      );

      const kw = await memory.recall('tomatoes basil', { mode: 'keyword', limit: 10 });
      expect(kw.length).toBeGreaterThanOrEqual(2);
      const kcut = (kw[0]!.score + kw[kw.length - 1]!.score) / 2;
      const kabove = await memory.recall('tomatoes basil', {
        mode: 'keyword',
        limit: 10,
        threshold: kcut,
      });
      expect(kabove.length).toBeGreaterThan(0);
      expect(kabove.length).toBeLessThan(kw.length);
      expect(kabove.every((h) => h.score >= kcut)).toBe(true);

      const bad = await rejects(memory.recall('x', { mode: 'vector', threshold: 2 }));
      expect(isCairnError(bad, 'INVALID_ARGUMENT')).toBe(true);
    });

    it('keeps a vector-only hit (no shared word) in hybrid results, with its sources and ranks', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a', embedder: conceptEmbedder() });
      const car = await memory.remember({ text: 'I drive my sedan to work' });
      await memory.rememberMany([
        { text: 'The automobile museum is shut on Mondays' },
        { text: 'An automobile gallery opened downtown' },
        { text: 'The kitten sleeps all day' },
        { text: 'A painting of a puppy' },
      ]);
      const keyword = await memory.recall('automobile', { mode: 'keyword' });
      expect(keyword.map((h) => h.memory.id)).not.toContain(car.id);
      const hybrid = await memory.recall('automobile', { mode: 'hybrid', limit: 3 });
      const hit = hybrid.find((h) => h.memory.id === car.id);
      expect(hit).toBeDefined();
      expect(hit!.sources).toEqual(['vector']);
      expect(hit!.ranks.vector).toBe(1);
      expect(hit!.ranks.keyword).toBeUndefined();
      const both = hybrid.filter((h) => h.sources.length === 2);
      expect(both.length).toBeGreaterThan(0);
      for (const h of both) expect(h.sources).toEqual(['vector', 'keyword']);
      // The score is 1 / (1 + e^-z), z the hit's larger standard score among the two
      // searches hybrid made (each 20 deep for a limit of 3), in descending order.
      const deep = { limit: 20 };
      const vector = await memory.recall('automobile', { ...deep, mode: 'vector' });
      const words = await memory.recall('automobile', { ...deep, mode: 'keyword' });
      const z = (xs: number[], x: number) => {
        const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
        const sd = Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / xs.length);
        return sd > 0 ? (x - mean) / sd : 0;
      };
      for (const h of hybrid) {
        const best = Math.max(
          z(
            vector.map((v) => v.score),
            h.similarity!,
          ),
          h.keywordScore === null
            ? Number.NEGATIVE_INFINITY
            : z(
                words.map((w) => w.score),
                h.keywordScore,
              ),
        );
        expect(h.score).toBeCloseTo(1 / (1 + Math.exp(-best)), 12);
      }
      expect(hybrid.map((h) => h.score)).toEqual(hybrid.map((h) => h.score).sort((a, b) => b - a));
    });

    it('ranks first in hybrid a memory that keyword search singles out, though its embedding ranks it last', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a', embedder: conceptEmbedder() });
      await memory.rememberMany(
        ['sedan', 'car', 'vehicle', 'sedan car', 'car vehicle', 'drive car'].map((w) => ({
          text: `A trip in the ${w}`,
        })),
      );
      const ferry = await memory.remember({ text: 'A trip to Zanzibar by ferry' });
      const query = 'automobile trip Zanzibar';
      const vector = await memory.recall(query, { mode: 'vector', limit: 7 });
      expect(vector.at(-1)!.memory.id).toBe(ferry.id);
      const [top] = await memory.recall(query, { mode: 'hybrid', limit: 1 });
      expect(top!.memory.id).toBe(ferry.id);
    });

    it('does not let an incidental word match push a semantic match out of a hybrid top 1', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a', embedder: conceptEmbedder() });
      const car = await memory.remember({ text: 'I drive my sedan to work' });
      // Shares "buying" with the query, and nothing of its meaning.
      await memory.remember({ text: 'Buying a kitten toy' });
      const [top] = await memory.recall('buying an automobile', { mode: 'hybrid', limit: 1 });
      expect(top!.memory.id).toBe(car.id);
    });

    it.runIf(!caches)(
      'embeds a text again where it has no cache (a store with encryption keeps none)',
      async () => {
        const store = await newStore();
        const embedder = countingEmbedder();
        const memory = createMemory({ store, agentId: 'a', embedder });
        const text = 'Cairns are piles of stones that mark a trail. '.repeat(30);
        const first = await memory.ingestDocument({ text }, { chunkSize: 200, overlap: 20 });
        const embedded = embedder.texts();
        const elsewhere = await memory.ingestDocument(
          { text, roomId: 'r2', scope: 'room' },
          { chunkSize: 200, overlap: 20 },
        );
        expect(embedder.texts()).toBe(embedded * 2);
        expect(elsewhere.fragments.map((f) => f.embedding)).toEqual(
          first.fragments.map((f) => f.embedding),
        );
        const hashes = first.fragments.map((f) => f.contentHash);
        expect((await store.getCachedEmbeddings(embedder.id, hashes)).size).toBe(0);
      },
    );

    it.runIf(caches)(
      'does not call the embedder again for text it has embedded (cache by embedder id and content hash)',
      async () => {
        const store = await newStore();
        const embedder = countingEmbedder();
        const memory = createMemory({ store, agentId: 'a', embedder });
        const text = 'Cairns are piles of stones that mark a trail. '.repeat(30);
        const first = await memory.ingestDocument(
          { text, title: 'Cairns' },
          { chunkSize: 200, overlap: 20 },
        );
        const embedded = embedder.texts();
        expect(embedded).toBeGreaterThan(0);
        expect(first.fragments.length).toBeGreaterThan(3);
        const again = await memory.ingestDocument(
          { text, title: 'Cairns' },
          { chunkSize: 200, overlap: 20 },
        );
        expect(again.existing).toBe(true);
        expect(again.document.id).toBe(first.document.id);
        expect(again.fragments.map((f) => f.id)).toEqual(first.fragments.map((f) => f.id));
        // Elsewhere (another room): new memories, but the vectors come from the cache.
        const elsewhere = await memory.ingestDocument(
          { text, roomId: 'r2', scope: 'room' },
          { chunkSize: 200, overlap: 20 },
        );
        expect(elsewhere.existing).toBe(false);
        expect(elsewhere.document.id).not.toBe(first.document.id);
        expect(embedder.texts()).toBe(embedded);
        expect(elsewhere.fragments.map((f) => f.embedding)).toEqual(
          first.fragments.map((f) => f.embedding),
        );
        // A second instance over the same store uses the same cache.
        const other = createMemory({ store, agentId: 'b', embedder });
        await other.remember({ text: first.fragments[0]!.content.text });
        expect(embedder.texts()).toBe(embedded);
        await other.remember({ text: 'something new' });
        expect(embedder.texts()).toBe(embedded + 1);
      },
    );

    it('ingests a document and its fragments; fragments carry the document id; progress reaches the total', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a', embedBatchSize: 2 });
      const text = Array.from(
        { length: 12 },
        (_, i) => `Sentence number ${i} talks about topic ${i % 3}.`,
      ).join(' ');
      const progress: Array<[string, number, number]> = [];
      const { document, fragments } = await memory.ingestDocument(
        { text, title: 'Numbers', metadata: { source: 'test' } },
        {
          chunkSize: 80,
          overlap: 10,
          onProgress: (p) => progress.push([p.phase, p.done, p.total]),
        },
      );
      expect(document.type).toBe('document');
      expect(document.embedding).toBeNull();
      expect(document.content).toEqual({ text, title: 'Numbers' });
      expect(document.metadata.fragmentIds).toEqual(fragments.map((f) => f.id));
      fragments.forEach((f, i) => {
        expect(f.type).toBe('fragment');
        expect(f.metadata).toMatchObject({
          documentId: document.id,
          position: i,
          source: 'test',
          title: 'Numbers',
        });
        expect(f.embedding).toHaveLength(384);
        expect(f.content.text.length).toBeLessThanOrEqual(80);
      });
      const embedding = progress.filter((p) => p[0] === 'embedding');
      expect(embedding.length).toBeGreaterThan(2); // batches of 2
      expect(embedding.at(-1)).toEqual(['embedding', embedding.at(-1)![2], embedding.at(-1)![2]]);
      expect(progress.at(-1)).toEqual(['storing', fragments.length + 1, fragments.length + 1]);
      expect(await store.countMemories()).toBe(fragments.length + 1);
      // Forgetting the document forgets its fragments.
      expect(await memory.forget(document.id)).toBe(true);
      expect(await store.countMemories()).toBe(0);
    });

    it('ingests a document longer than a memory’s text as fragments, each within the limit', async () => {
      const store = await newStore();
      const embedder = countingEmbedder();
      const memory = createMemory({ store, agentId: 'a', embedder });
      const words = Array.from({ length: 1000 }, (_, i) => `word${i}`);
      let text = '';
      for (let i = 0; text.length < 1_000_000; i++)
        text += `${words[(i * 7) % 1000]}${i % 12 === 11 ? '.' : ''} `;
      text = text.slice(0, 1_000_000).trimEnd();
      const { document, fragments } = await memory.ingestDocument(
        { text, title: 'Big' },
        { chunkSize: 50_000, overlap: 0 },
      );
      expect(fragments.length).toBeGreaterThanOrEqual(20);
      for (const f of fragments) expect(f.content.text.length).toBeLessThanOrEqual(50_000);
      // The whole text is in the fragments; the record keeps what fits of it, and its length.
      expect(fragments.map((f) => f.content.text).join(' ')).toBe(text);
      expect(document.content).toEqual({
        text: text.slice(0, MAX_MEMORY_TEXT_LENGTH),
        title: 'Big',
      });
      expect(document.metadata.textLength).toBe(text.length);
      expect(document.contentHash).toBe(contentHash(text));
      expect(await store.countMemories()).toBe(fragments.length + 1);
      // Found again by the whole text, not re-embedded.
      const calls = embedder.calls.length;
      const again = await memory.ingestDocument(
        { text, title: 'Big' },
        { chunkSize: 50_000, overlap: 0 },
      );
      expect(again.existing).toBe(true);
      expect(again.document.id).toBe(document.id);
      expect(embedder.calls.length).toBe(calls);
      // Limits: a document of more than MAX_DOCUMENT_LENGTH, and fragments longer than a
      // memory's text, are refused before anything is embedded or written.
      await expect(
        memory.ingestDocument({ text: 'x '.repeat(MAX_DOCUMENT_LENGTH / 2 + 1) }),
      ).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: `document.text must be at most ${MAX_DOCUMENT_LENGTH} characters, got ${MAX_DOCUMENT_LENGTH + 2}`,
      });
      await expect(
        memory.ingestDocument({ text: 'other' }, { chunkSize: MAX_MEMORY_TEXT_LENGTH + 1 }),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', details: { field: 'chunkSize' } });
      expect(embedder.calls.length).toBe(calls);
      expect(await store.countMemories()).toBe(fragments.length + 1);
      // A cut never leaves half a surrogate pair.
      const emoji = `${'y'.repeat(MAX_MEMORY_TEXT_LENGTH - 1)}😀 and more`;
      const { document: withEmoji } = await memory.ingestDocument(
        { text: emoji },
        { chunkSize: 1000, overlap: 0 },
      );
      expect(withEmoji.content.text).toBe('y'.repeat(MAX_MEMORY_TEXT_LENGTH - 1));
    });

    it('fails with EMBEDDER_FAILED (cause attached) and writes nothing when the embedder fails', async () => {
      const store = await newStore();
      const cause = new Error('model server down');
      const memory = createMemory({
        store,
        agentId: 'a',
        embedder: failingEmbedder(2, cause),
        embedBatchSize: 3,
      });
      const v0 = memory.version;
      const items = Array.from({ length: 7 }, (_, i) => ({ text: `fact number ${i}` }));
      const e = await rejects(memory.rememberMany(items));
      expect(isCairnError(e, 'EMBEDDER_FAILED')).toBe(true);
      expect((e as Error).cause).toBe(cause);
      expect(await store.countMemories()).toBe(0);
      expect(await store.getEmbeddingSpace()).toBeNull();
      expect(memory.version).toBe(v0);

      const store2 = await newStore();
      const doc = createMemory({
        store: store2,
        agentId: 'a',
        embedder: failingEmbedder(2),
        embedBatchSize: 2,
      });
      const e2 = await rejects(
        doc.ingestDocument(
          { text: Array.from({ length: 200 }, (_, i) => `word${i}`).join(' ') },
          { chunkSize: 100, overlap: 0 },
        ),
      );
      expect(isCairnError(e2, 'EMBEDDER_FAILED')).toBe(true);
      expect(await store2.countMemories()).toBe(0);
      // Not even the batch that succeeded reached the cache.
      const firstChunk = chunkText(Array.from({ length: 200 }, (_, i) => `word${i}`).join(' '), {
        chunkSize: 100,
        overlap: 0,
      })[0]!;
      expect(
        (await store2.getCachedEmbeddings('cairn-hashing-v1', [contentHash(firstChunk)])).size,
      ).toBe(0);

      // Wrong widths and wrong counts are failures too, never stored.
      const store3 = await newStore();
      const narrow = createMemory({
        store: store3,
        agentId: 'a',
        embedder: { id: 'liar', dimensions: 8, embed: async (t) => t.map(() => [1, 0, 0]) },
      });
      const e3 = await rejects(narrow.remember({ text: 'hello' }));
      expect(isCairnError(e3, 'EMBEDDER_FAILED')).toBe(true);
      expect((e3 as Error).message).toMatch(/3 dimensions.*8/);
      const short = createMemory({
        store: store3,
        agentId: 'a',
        embedder: { id: 'short', dimensions: 2, embed: async () => [] },
      });
      expect(
        isCairnError(await rejects(short.remember({ text: 'hello' })), 'EMBEDDER_FAILED'),
      ).toBe(true);
      expect(await store3.countMemories()).toBe(0);
    });

    it('returns the existing memory for the same text in the same place, unless allowDuplicate', async () => {
      const store = await newStore();
      const embedder = countingEmbedder();
      const memory = createMemory({ store, agentId: 'a', embedder });
      const first = await memory.remember({
        text: 'The office opens at nine',
        roomId: 'r1',
        scope: 'room',
      });
      const v = memory.version;
      const again = await memory.remember({
        text: 'The office opens at nine',
        roomId: 'r1',
        scope: 'room',
        metadata: { x: 1 },
      });
      expect(again.id).toBe(first.id);
      expect(memory.version).toBe(v);
      expect(embedder.texts()).toBe(1);
      const otherRoom = await memory.remember({
        text: 'The office opens at nine',
        roomId: 'r2',
        scope: 'room',
      });
      const privately = await memory.remember({ text: 'The office opens at nine', roomId: 'r1' });
      const otherAgent = await createMemory({ store, agentId: 'b', embedder }).remember({
        text: 'The office opens at nine',
        roomId: 'r1',
        scope: 'room',
      });
      expect(new Set([first.id, otherRoom.id, privately.id, otherAgent.id]).size).toBe(4);
      const dup = await memory.remember(
        { text: 'The office opens at nine', roomId: 'r1', scope: 'room' },
        { allowDuplicate: true },
      );
      expect(dup.id).not.toBe(first.id);
      // All from the cache; without one, each new memory's text is embedded.
      expect(embedder.texts()).toBe(caches ? 1 : 5);
      const batch = await memory.rememberMany([
        { text: 'alpha' },
        { text: 'beta' },
        { text: 'alpha' },
        { text: 'The office opens at nine', roomId: 'r2', scope: 'room' },
      ]);
      expect(batch[0]!.id).toBe(batch[2]!.id);
      expect(batch[3]!.id).toBe(otherRoom.id);
      expect(await store.countMemories()).toBe(7);
    });

    it('stores one memory for two concurrent remembers of the same text, and nothing when aborted', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a' });
      const [x, y] = await Promise.all([
        memory.remember({ text: 'same thing at once' }),
        memory.remember({ text: 'same thing at once' }),
      ]);
      expect(x!.id).toBe(y!.id);
      expect(await store.countMemories()).toBe(1);
      const controller = new AbortController();
      controller.abort();
      const e = await rejects(
        memory.rememberMany([{ text: 'never stored' }], { signal: controller.signal }),
      );
      expect(isCairnError(e, 'ABORTED')).toBe(true);
      // Also when the text's vector is cached and the embedder is not called.
      const cachedText = (await store.listMemories())[0]!.content.text;
      const e2 = await rejects(
        memory.remember({ text: cachedText, roomId: 'elsewhere' }, { signal: controller.signal }),
      );
      expect(isCairnError(e2, 'ABORTED')).toBe(true);
      expect(await store.countMemories()).toBe(1);
    });

    it('update re-embeds the new text; version changes on every add, update and removal', async () => {
      const store = await newStore();
      const embedder = countingEmbedder(hashingEmbedder({ dimensions: 128 }));
      const memory = createMemory({ store, agentId: 'a', embedder });
      const versions = [memory.version];
      const m = await memory.remember({ text: 'Ada prefers short answers', metadata: { k: 1 } });
      versions.push(memory.version);
      const updated = await memory.update(m.id, { text: 'Ada prefers long detailed answers' });
      versions.push(memory.version);
      const [expected] = await hashingEmbedder({ dimensions: 128 }).embed([
        'Ada prefers long detailed answers',
      ]);
      // Stores may keep vectors as float32.
      expect(updated.embedding).toHaveLength(128);
      for (const [i, x] of updated.embedding!.entries()) expect(x).toBeCloseTo(expected![i]!, 6);
      expect(updated.contentHash).not.toBe(m.contentHash);
      expect(updated.metadata).toEqual({ k: 1 });
      expect(embedder.calls.at(-1)).toEqual(['Ada prefers long detailed answers']);
      const [hit] = await memory.recall('long detailed', { mode: 'vector', limit: 1 });
      expect(hit!.memory.content.text).toBe('Ada prefers long detailed answers');
      await memory.update(m.id, { metadata: { k: 2 } });
      versions.push(memory.version);
      expect(await memory.forget(m.id)).toBe(true);
      versions.push(memory.version);
      expect(new Set(versions).size).toBe(versions.length);
      expect(await memory.forget(m.id)).toBe(false);
      expect(memory.version).toBe(versions.at(-1));
      expect(isCairnError(await rejects(memory.update(m.id, { text: 'x' })), 'NOT_FOUND')).toBe(
        true,
      );
    });

    it('update refuses a superseded version, naming the current one, before embedding anything', async () => {
      const store = await newStore();
      const embedder = countingEmbedder(hashingEmbedder({ dimensions: 64 }));
      const memory = createMemory({ store, agentId: 'a', embedder });
      const old = await memory.remember({ text: 'Ada lives in Paris' });
      const next = await memory.supersede(old.id, { text: 'Ada lives in Berlin' });
      const calls = embedder.calls.length;
      const version = memory.version;
      const e = await rejects(memory.update(old.id, { text: 'Ada lives in Rome' }));
      expect(isCairnError(e, 'CONFLICT')).toBe(true);
      expect((e as CairnError).details).toMatchObject({ id: old.id, currentId: next.id });
      expect(embedder.calls.length).toBe(calls);
      expect(memory.version).toBe(version);
      expect((await memory.get(old.id))!.content.text).toBe('Ada lives in Paris');
      expect((await memory.update(next.id, { text: 'Ada lives in Rome' })).content.text).toBe(
        'Ada lives in Rome',
      );
    });

    it('refuses an embedder of another id or width with EMBEDDING_MISMATCH naming both', async () => {
      const store = await newStore();
      await createMemory({
        store,
        agentId: 'a',
        embedder: hashingEmbedder({ dimensions: 64 }),
      }).remember({ text: 'first' });
      const wider = createMemory({
        store,
        agentId: 'a',
        embedder: hashingEmbedder({ dimensions: 128 }),
      });
      // Each call starts only when awaited: a rejection must never sit unhandled.
      for (const call of [
        () => wider.remember({ text: 'second' }),
        () => wider.recall('first', { mode: 'vector' }),
        () => wider.recall('first'),
      ]) {
        const e = await rejects(call());
        expect(isCairnError(e, 'EMBEDDING_MISMATCH')).toBe(true);
        expect((e as Error).message).toContain('64');
        expect((e as Error).message).toContain('128');
      }
      const renamed = createMemory({
        store,
        agentId: 'a',
        embedder: { ...hashingEmbedder({ dimensions: 64 }), id: 'other-model' },
      });
      const e = await rejects(renamed.remember({ text: 'third' }));
      expect(isCairnError(e, 'EMBEDDING_MISMATCH')).toBe(true);
      expect((e as Error).message).toContain('cairn-hashing-v1');
      expect((e as Error).message).toContain('other-model');
      expect(await store.countMemories()).toBe(1);
      // Keyword recall needs no vectors and still works.
      expect((await renamed.recall('first', { mode: 'keyword' })).length).toBe(1);
    });

    it('recent lists the newest memories the viewer may see; recency decay favours newer memories', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a' });
      const day = 86_400_000;
      const now = Date.UTC(2026, 0, 10);
      const old = await memory.remember({
        text: 'meeting notes about the budget',
        roomId: 'r1',
        scope: 'room',
        createdAt: now - 30 * day,
      });
      const fresh = await memory.remember({
        text: 'meeting notes about the budget review',
        roomId: 'r1',
        scope: 'room',
        createdAt: now - day,
      });
      await memory.remember({ text: 'private aside', roomId: 'r1', createdAt: now });
      await memory.remember({ text: 'another room', roomId: 'r2', scope: 'room', createdAt: now });
      const recent = await memory.recent({ roomId: 'r1', limit: 10 });
      expect(recent.map((m) => m.content.text)).toEqual([
        'private aside',
        'meeting notes about the budget review',
        'meeting notes about the budget',
      ]);
      const someoneElse = await createMemory({ store, agentId: 'b' }).recent({ roomId: 'r1' });
      expect(someoneElse.map((m) => m.id)).toEqual([fresh.id, old.id]);
      const plain = await memory.recall('budget meeting notes', { roomId: 'r1', mode: 'vector' });
      expect(plain[0]!.memory.id).toBe(old.id); // closer text
      const decayed = await memory.recall('budget meeting notes', {
        roomId: 'r1',
        mode: 'vector',
        recencyHalfLifeMs: 7 * day,
        now,
      });
      expect(decayed[0]!.memory.id).toBe(fresh.id);
      expect(decayed[0]!.score).toBeCloseTo(
        plain.find((h) => h.memory.id === fresh.id)!.score * 0.5 ** (1 / 7),
        10,
      );
    });

    it('supersede keeps the history; recall finds what holds now, asOf what held then, with its source', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a' });
      const date = (y: number, m: number, d: number) => Date.UTC(y, m - 1, d);
      const paris = await memory.remember({
        text: 'Ada lives in Paris',
        entityId: 'ada',
        createdAt: date(2025, 1, 1),
        validFrom: date(2024, 1, 1),
        source: { threadId: 't1', messageIds: ['m1'] },
      });
      const berlin = await memory.supersede(paris.id, {
        text: 'Ada lives in Berlin',
        validFrom: date(2026, 5, 3),
        source: { threadId: 't1', branchId: 'main', messageIds: ['m9'] },
      });
      expect(berlin).toMatchObject({ supersedes: paris.id, lineageId: paris.id, entityId: 'ada' });
      const texts = (hits: Array<{ memory: Memory }>) => hits.map((h) => h.memory.content.text);
      for (const mode of MODES) {
        const now = await memory.recall('where does Ada live', { mode });
        expect(texts(now), mode).toEqual(['Ada lives in Berlin']);
        expect(now[0]!.memory.source).toEqual({
          threadId: 't1',
          branchId: 'main',
          messageIds: ['m9'],
        });
        // In 2025, as known now, and as the agent knew it in mid-2025.
        const then = await memory.recall('where does Ada live', {
          mode,
          asOf: { validAt: date(2025, 6, 1) },
        });
        expect(texts(then), mode).toEqual(['Ada lives in Paris']);
        expect(then[0]!.memory.source).toEqual({ threadId: 't1', messageIds: ['m1'] });
        expect(
          texts(await memory.recall('where does Ada live', { mode, asOf: date(2025, 6, 1) })),
        ).toEqual(['Ada lives in Paris']);
        // Mid-2026 as believed in mid-2025: the move was not known yet.
        expect(
          texts(
            await memory.recall('where does Ada live', {
              mode,
              asOf: { validAt: date(2026, 6, 1), knownAt: date(2025, 6, 1) },
            }),
          ),
        ).toEqual(['Ada lives in Paris']);
        // Before the agent had recorded anything: nothing.
        expect(
          await memory.recall('where does Ada live', { mode, asOf: date(2024, 6, 1) }),
        ).toEqual([]);
      }
      expect((await memory.recent()).map((m) => m.id)).toEqual([berlin.id]);
      const history = await memory.history(berlin.id);
      expect(history.map((m) => [m.content.text, m.validFrom, m.validTo])).toEqual([
        ['Ada lives in Paris', date(2024, 1, 1), date(2026, 5, 3)],
        ['Ada lives in Berlin', date(2026, 5, 3), null],
      ]);
      expect((await memory.history(paris.id)).map((m) => m.id)).toEqual([paris.id, berlin.id]);
      expect(await memory.history('missing')).toEqual([]);
      // forget deletes every version of the fact.
      expect(await memory.forget(paris.id)).toBe(true);
      expect(await memory.history(berlin.id)).toEqual([]);
      expect(await store.countMemories()).toBe(0);
    });

    it('supersede refuses a replaced version, a missing one or an earlier start before embedding, writing nothing', async () => {
      const store = await newStore();
      const embedder = countingEmbedder();
      const memory = createMemory({ store, agentId: 'a', embedder });
      const v1 = await memory.remember({ text: 'the office is on floor 2', validFrom: 1000 });
      const v2 = await memory.supersede(v1.id, {
        text: 'the office is on floor 3',
        validFrom: 2000,
      });
      const calls = embedder.texts();
      const version = memory.version;
      const code = async (p: Promise<unknown>) => {
        const e = await rejects(p);
        return isCairnError(e) ? e.code : String(e);
      };
      expect(await code(memory.supersede(v1.id, { text: 'floor 4' }))).toBe('CONFLICT');
      expect(await code(memory.supersede('missing', { text: 'floor 4' }))).toBe('NOT_FOUND');
      expect(await code(memory.supersede(v2.id, { text: 'floor 4', validFrom: 1500 }))).toBe(
        'INVALID_ARGUMENT',
      );
      expect(
        await code(memory.supersede(v2.id, { text: 'floor 4', validFrom: 3000, validTo: 2500 })),
      ).toBe('INVALID_ARGUMENT');
      expect(await code(memory.supersede(v2.id, { text: '' }))).toBe('INVALID_ARGUMENT');
      expect(await code(memory.supersede(v2.id, { text: 'x', when: 1 } as never))).toBe(
        'INVALID_ARGUMENT',
      );
      expect(await code(memory.remember({ text: 'x', validFrom: 5, validTo: 4 }))).toBe(
        'INVALID_ARGUMENT',
      );
      expect(await code(memory.recall('office', { asOf: 'yesterday' as never }))).toBe(
        'INVALID_ARGUMENT',
      );
      expect(await code(memory.recall('office', { asOf: { knownAt: 5 } as never }))).toBe(
        'INVALID_ARGUMENT',
      );
      expect(embedder.texts()).toBe(calls);
      expect(memory.version).toBe(version);
      expect((await memory.history(v1.id)).map((m) => m.id)).toEqual([v1.id, v2.id]);
      expect(await store.countMemories()).toBe(2);
    });

    it('a script of facts on branches: each is recalled exactly where its message is on the chain', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a' });
      // main: 12 turns. early: forked at turn 3, 6 turns. late: forked at turn 9, 3 turns.
      // rewound: main rewound to turn 6. Facts are said on every branch, one every other turn.
      const { thread, branch: main } = await store.createThreadWithBranch({});
      const { thread: elsewhere } = await store.createThreadWithBranch({});
      const say = async (parentId: string | null, n: number, label: string) =>
        store.addMessages(
          Array.from({ length: n }, (_, i) => ({
            id: `${label}-${i}-${thread.id}`,
            threadId: thread.id,
            parentId: i === 0 ? parentId : `${label}-${i - 1}-${thread.id}`,
            role: i % 2 ? 'assistant' : 'user',
            data: `${label} ${i}`,
          })),
        );
      const m = await say(null, 12, 'm');
      await store.moveHead(main.id, null, m[11]!.id);
      const e = await say(m[3]!.id, 6, 'e');
      const early = await store.createBranch({
        threadId: thread.id,
        name: 'early',
        headMessageId: e[5]!.id,
      });
      const l = await say(m[9]!.id, 3, 'l');
      const late = await store.createBranch({
        threadId: thread.id,
        name: 'late',
        headMessageId: l[2]!.id,
      });
      const rewound = await store.createBranch({
        threadId: thread.id,
        name: 'main-v2',
        headMessageId: m[6]!.id,
      });
      // The chain of each branch, as the script built it (not as the store answers).
      const chains = new Map([
        [main.id, m],
        [early.id, [...m.slice(0, 4), ...e]],
        [late.id, [...m.slice(0, 10), ...l]],
        [rewound.id, m.slice(0, 7)],
      ]);
      const facts: Array<{ id: string; messageId: string }> = [];
      for (const [branchId, said] of [
        [main.id, m],
        [early.id, e],
        [late.id, l],
      ] as const) {
        for (let i = 0; i < said.length; i += 2) {
          const at = said.slice(Math.max(0, i - 1), i + 1);
          const fact = await memory.remember({
            text: `code word ${facts.length} is ${['red', 'blue', 'green'][facts.length % 3]}`,
            source: {
              threadId: thread.id,
              branchId,
              messageIds: at.map((x) => x.id),
              branchScoped: true,
            },
          });
          facts.push({ id: fact.id, messageId: at.at(-1)!.id });
        }
      }
      const plain = await memory.remember({ text: 'code word everywhere is plain' });
      const sortedIds = (ids: string[]) => [...ids].sort();
      let leaked = 0;
      let missed = 0;
      for (const mode of MODES) {
        for (const [branchId, chain] of chains) {
          const onChain = new Set(chain.map((x) => x.id));
          const expected = facts.filter((f) => onChain.has(f.messageId)).map((f) => f.id);
          const hits = await memory.recall('code word', {
            mode,
            limit: 100,
            branch: { threadId: thread.id, branchId },
          });
          const got = new Set(hits.map((h) => h.memory.id));
          leaked += facts.filter((f) => got.has(f.id) && !onChain.has(f.messageId)).length;
          missed += expected.filter((id) => !got.has(id)).length;
          expect(sortedIds([...got]), `${mode} from ${branchId}`).toEqual(
            sortedIds([...expected, plain.id]),
          );
        }
        // The active branch by default; another thread and no branch see no scoped fact.
        const active = await memory.recall('code word', {
          mode,
          limit: 100,
          branch: { threadId: thread.id },
        });
        expect(active.length, mode).toBe(
          facts.filter((f) => m.some((x) => x.id === f.messageId)).length + 1,
        );
        for (const options of [{ branch: { threadId: elsewhere.id } }, {}]) {
          const hits = await memory.recall('code word', { mode, limit: 100, ...options });
          expect(
            hits.map((h) => h.memory.id),
            mode,
          ).toEqual([plain.id]);
        }
      }
      expect({ leaked, missed }).toEqual({ leaked: 0, missed: 0 });
      // Rewinding main past a fact's message hides it; a fork after it sees it.
      const [lastFact] = facts.filter((f) => f.messageId === m[10]!.id);
      await store.moveHead(main.id, m[11]!.id, m[9]!.id);
      const fromMain = await memory.recall('code word', {
        limit: 100,
        branch: { threadId: thread.id, branchId: main.id },
      });
      expect(fromMain.map((h) => h.memory.id)).not.toContain(lastFact!.id);
      expect(fromMain.length).toBe(
        facts.filter((f) => m.slice(0, 10).some((x) => x.id === f.messageId)).length + 1,
      );
      // recent() follows the same rule; an admin listing still sees every fact.
      expect((await memory.recent({ limit: 100 })).map((x) => x.id)).toEqual([plain.id]);
      expect(await store.countMemories()).toBe(facts.length + 1);
      // The same text said at another message is a memory of its own, not a duplicate.
      const again = await memory.remember({
        text: 'code word 0 is red',
        source: { threadId: thread.id, messageIds: [e[0]!.id], branchScoped: true },
      });
      expect(again.id).not.toBe(facts[0]!.id);
    });

    it('a script of facts with five dated revisions each: the current value ranks first, asOf finds the value of a sampled day', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a' });
      // The script is 1,000 facts; bench/ (memory-facts) runs it at that size.
      const script = factScript(Number(process.env.CAIRN_FACTS ?? 40), 5);
      for (const fact of script) {
        const [first, ...later] = fact.revisions;
        let m = await memory.remember({ text: first!.text, validFrom: first!.validFrom });
        for (const rev of later)
          m = await memory.supersede(m.id, { text: rev.text, validFrom: rev.validFrom });
      }
      const r = rng(5);
      const top = async (name: string, asOf?: number) =>
        (
          await memory.recall(`Where does ${name} live?`, {
            limit: 1,
            ...(asOf === undefined ? {} : { asOf: { validAt: asOf } }),
          })
        )[0]?.memory.content.text;
      const wrong: string[] = [];
      for (const { name, revisions } of script) {
        const now = await top(name);
        if (now !== revisions.at(-1)!.text) wrong.push(`now: ${name} -> ${now}`);
        // A day inside one of the past revisions, and the first instant of the next one.
        const k = r.int(revisions.length - 1);
        const { validFrom } = revisions[k]!;
        const day = validFrom + r.int(revisions[k + 1]!.validFrom - validFrom);
        const then = await top(name, day);
        if (then !== revisions[k]!.text) wrong.push(`${day}: ${name} -> ${then}`);
        const next = await top(name, revisions[k + 1]!.validFrom);
        if (next !== revisions[k + 1]!.text) wrong.push(`${day}+: ${name} -> ${next}`);
      }
      expect(wrong).toEqual([]);
      expect(await store.countMemories()).toBe(script.length * 5);
    });

    it('remembers an old value again as a new memory once it was superseded', async () => {
      const store = await newStore();
      const memory = createMemory({ store, agentId: 'a' });
      const first = await memory.remember({ text: 'the light is red' });
      await memory.supersede(first.id, { text: 'the light is green' });
      const again = await memory.remember({ text: 'the light is red' });
      expect(again.id).not.toBe(first.id);
      expect(again.supersededAt).toBeNull();
      expect(
        (await memory.recall('light', { mode: 'keyword' }))
          .map((h) => h.memory.content.text)
          .sort(),
      ).toEqual(['the light is green', 'the light is red']);
    });
  });
}
