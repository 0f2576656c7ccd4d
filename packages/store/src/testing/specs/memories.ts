import {
  type JsonObject,
  MEMORY_SCOPES,
  MEMORY_TYPES,
  type Memory,
  type MemoryContent,
  newId,
} from '@cairn/core';
import { beforeAll, describe, expect, it } from 'vitest';
import type { MemoryFilter, NewMemory } from '../../store.js';
import { type StoreConformanceOptions, useStore } from '../context.js';
import {
  expectClose,
  expectCode,
  expectTimestamp,
  LONG_NAME,
  NON_JSON,
  Rng,
  sha256,
} from '../helpers.js';

const sortIds = (memories: Memory[]) => memories.map((m) => m.id).sort();

export function describeMemories(options: StoreConformanceOptions): void {
  describe('memories', () => {
    const store = useStore(options);

    describe('add, get, update, delete', () => {
      it('stores a memory with defaults and a SHA-256 content hash', async () => {
        const agentId = `agent-${newId()}`;
        const [m] = await store().addMemories([{ agentId, content: { text: 'the sky is blue' } }]);
        expect(m).toMatchObject({
          agentId,
          type: 'custom',
          scope: 'private',
          entityId: null,
          roomId: null,
          worldId: null,
          content: { text: 'the sky is blue' },
          metadata: {},
          embedding: null,
          contentHash: sha256('the sky is blue'),
        });
        expect(typeof m!.id).toBe('string');
        expectTimestamp(m!.createdAt);
        expect(await store().getMemory(m!.id)).toEqual(m);
      });

      it('keeps every given field', async () => {
        const input: NewMemory = {
          id: newId(),
          type: 'fragment',
          agentId: `agent-${newId()}`,
          entityId: 'entity-1',
          roomId: 'room-1',
          worldId: 'world-1',
          scope: 'room',
          content: { text: 'a fact', source: 'doc-9', tags: ['x', 'y'], position: { page: 3 } },
          metadata: { weight: 0.5, reviewed: false },
          contentHash: 'custom-hash',
          createdAt: 1_650_000_000_000,
          validFrom: 1_600_000_000_000,
          validTo: 1_700_000_000_000.5,
          supersededAt: 1_650_000_000_001,
          supersedes: 'an-older-version',
          lineageId: 'the-first-version',
          source: { threadId: 't-1', branchId: 'b-1', messageIds: ['m-1', 'm-2'] },
        };
        const [m] = await store().addMemories([input]);
        expect(m).toEqual({ ...input, embedding: null } as Memory);
        expect(await store().getMemory(input.id!)).toEqual(m);
      });

      it.skipIf(options.encrypted)(
        'stores an embedding exactly enough to compute with',
        async () => {
          const embedding = [0.1, -0.25, 0.5, 1e-7, -1, 0.3333333, 0.75, 0];
          const [m] = await store().addMemories([
            { agentId: `agent-${newId()}`, content: { text: 'v' }, embedding },
          ]);
          const read = await store().getMemory(m!.id);
          expect(read!.embedding).toHaveLength(embedding.length);
          expectClose(read!.embedding, embedding);
        },
      );

      it('returns a batch in input order', async () => {
        const agentId = `agent-${newId()}`;
        const texts = ['one', 'two', 'three', 'four'];
        const stored = await store().addMemories(
          texts.map((text) => ({ agentId, content: { text } })),
        );
        expect(stored.map((m) => m.content.text)).toEqual(texts);
        expect(new Set(stored.map((m) => m.id)).size).toBe(4);
      });

      it('stores an empty batch as nothing', async () => {
        expect(await store().addMemories([])).toEqual([]);
      });

      it('returns null for an unknown memory', async () => {
        expect(await store().getMemory(newId())).toBeNull();
      });

      it('updates content, recomputing the hash, and keeps the rest', async () => {
        const [m] = await store().addMemories([
          {
            agentId: `agent-${newId()}`,
            content: { text: 'old' },
            metadata: { keep: 1 },
            scope: 'private',
          },
        ]);
        const u = await store().updateMemory(m!.id, { content: { text: 'new', extra: true } });
        expect(u).toEqual({
          ...m!,
          content: { text: 'new', extra: true },
          contentHash: sha256('new'),
        });
        expect(await store().getMemory(m!.id)).toEqual(u);
      });

      it('updates metadata, a given hash and the embedding', async () => {
        const [m] = await store().addMemories([
          { agentId: `agent-${newId()}`, content: { text: 'x' }, metadata: { a: 1 } },
        ]);
        const u = await store().updateMemory(m!.id, { metadata: { b: 2 }, contentHash: 'given' });
        expect(u.metadata).toEqual({ b: 2 });
        expect(u.contentHash).toBe('given');
        expect(u.content).toEqual({ text: 'x' });
        const cleared = await store().updateMemory(m!.id, { embedding: null });
        expect(cleared.embedding).toBeNull();
      });

      it('fails to update an unknown memory (NOT_FOUND)', async () => {
        const id = newId();
        await expectCode(() => store().updateMemory(id, { metadata: {} }), 'NOT_FOUND');
        expect(await store().getMemory(id)).toBeNull();
      });

      it.each([
        ['content without text', { content: { title: 'x' } as unknown as MemoryContent }],
        ['content that is a string', { content: 'text' as unknown as MemoryContent }],
        ['metadata with NaN', { metadata: { n: Number.NaN } }],
        ['content with a BigInt', { content: { text: 'a', n: 1n } as unknown as MemoryContent }],
        ['an embedding with NaN', { embedding: [Number.NaN, 1] }],
        ['an empty embedding', { embedding: [] }],
      ])('rejects an update with %s (INVALID_ARGUMENT) and changes nothing', async (_l, patch) => {
        const [m] = await store().addMemories([
          { agentId: `agent-${newId()}`, content: { text: 'keep' }, metadata: { k: 1 } },
        ]);
        await expectCode(() => store().updateMemory(m!.id, patch), 'INVALID_ARGUMENT');
        expect(await store().getMemory(m!.id)).toEqual(m);
      });

      it('deletes memories by id and counts only those that existed', async () => {
        const agentId = `agent-${newId()}`;
        const stored = await store().addMemories(
          ['a', 'b', 'c'].map((text) => ({ agentId, content: { text } })),
        );
        expect(await store().deleteMemories([stored[0]!.id, stored[2]!.id, newId()])).toBe(2);
        expect(await store().getMemory(stored[0]!.id)).toBeNull();
        expect(await store().getMemory(stored[1]!.id)).toEqual(stored[1]);
        expect(await store().deleteMemories([stored[0]!.id])).toBe(0);
        expect(await store().deleteMemories([])).toBe(0);
        expect(await store().countMemories({ agentId })).toBe(1);
      });
    });

    describe('bad input writes nothing', () => {
      const good = (agentId: string): NewMemory => ({ agentId, content: { text: 'fine' } });

      it.each([
        ['an empty agentId', { agentId: '' }],
        ['an unknown type', { type: 'note' as NewMemory['type'] }],
        ['an unknown scope', { scope: 'public' as NewMemory['scope'] }],
        ['missing content', { content: undefined as unknown as MemoryContent }],
        ['content without text', { content: { body: 'x' } as unknown as MemoryContent }],
        ['content text that is not a string', { content: { text: 5 } as unknown as MemoryContent }],
        ['metadata that is an array', { metadata: [] as unknown as JsonObject }],
        ['a room scope without a room', { scope: 'room' as const, roomId: null }],
        ['a shared scope without a world', { scope: 'shared' as const, worldId: null }],
        ['an embedding with Infinity', { embedding: [1, Number.POSITIVE_INFINITY] }],
        ['an embedding of strings', { embedding: ['1', '2'] as unknown as number[] }],
        ['an empty embedding', { embedding: [] }],
        ['a NaN createdAt', { createdAt: Number.NaN }],
        ['an id over 200 characters', { id: LONG_NAME }],
      ])(
        'rejects %s in a batch (INVALID_ARGUMENT), keeping the good ones out too',
        async (_l, patch) => {
          const agentId = `agent-${newId()}`;
          const ids = [newId(), newId()];
          await expectCode(
            () =>
              store().addMemories([
                { ...good(agentId), id: ids[0]! },
                { ...good(agentId), agentId, id: ids[1]!, ...patch },
              ]),
            'INVALID_ARGUMENT',
          );
          expect(await store().countMemories({ agentId })).toBe(0);
          for (const id of ids) expect(await store().getMemory(id)).toBeNull();
        },
      );

      it.each(NON_JSON)('rejects content with %s (INVALID_ARGUMENT)', async (_l, make) => {
        const agentId = `agent-${newId()}`;
        const content = { text: 'x', ...(make() as object) } as MemoryContent;
        await expectCode(
          () => store().addMemories([good(agentId), { agentId, content }]),
          'INVALID_ARGUMENT',
        );
        expect(await store().countMemories({ agentId })).toBe(0);
      });

      it.each(NON_JSON)('rejects metadata with %s (INVALID_ARGUMENT)', async (_l, make) => {
        const agentId = `agent-${newId()}`;
        await expectCode(
          () =>
            store().addMemories([
              good(agentId),
              { ...good(agentId), metadata: make() as JsonObject },
            ]),
          'INVALID_ARGUMENT',
        );
        expect(await store().countMemories({ agentId })).toBe(0);
      });

      it('rejects an id already stored (CONFLICT) and never overwrites', async () => {
        const agentId = `agent-${newId()}`;
        const [m] = await store().addMemories([{ agentId, content: { text: 'original' } }]);
        const fresh = newId();
        await expectCode(
          () =>
            store().addMemories([
              { id: fresh, agentId, content: { text: 'fresh' } },
              { id: m!.id, agentId, content: { text: 'overwrite' } },
            ]),
          'CONFLICT',
        );
        expect(await store().getMemory(m!.id)).toEqual(m);
        expect(await store().getMemory(fresh)).toBeNull();
      });

      it('names the first stored id in batch order when several are (CONFLICT details)', async () => {
        const agentId = `agent-${newId()}`;
        const p = newId();
        await store().addMemories([
          { id: `${p}-a`, agentId, content: { text: 'a' } },
          { id: `${p}-b`, agentId, content: { text: 'b' } },
        ]);
        await expect(
          store().addMemories([
            { id: `${p}-new`, agentId, content: { text: 'new' } },
            { id: `${p}-b`, agentId, content: { text: 'b again' } },
            { id: `${p}-a`, agentId, content: { text: 'a again' } },
          ]),
        ).rejects.toMatchObject({ code: 'CONFLICT', details: { id: `${p}-b` } });
        expect(await store().countMemories({ agentId })).toBe(2);
      });

      it('rejects an id used twice in one batch (CONFLICT)', async () => {
        const agentId = `agent-${newId()}`;
        const id = newId();
        await expectCode(
          () =>
            store().addMemories([
              { id, agentId, content: { text: 'a' } },
              { id, agentId, content: { text: 'b' } },
            ]),
          'CONFLICT',
        );
        expect(await store().getMemory(id)).toBeNull();
      });

      it('rejects a batch that is not an array (INVALID_ARGUMENT)', async () => {
        await expectCode(
          () => store().addMemories({} as unknown as NewMemory[]),
          'INVALID_ARGUMENT',
        );
      });
    });

    describe('filters', () => {
      // One data set with every field varied; values are unique to this run so other
      // memories in the store never match.
      const run = newId();
      const agents = [`fa-${run}`, `fb-${run}`];
      const rooms = [`fr1-${run}`, `fr2-${run}`];
      const worlds = [`fw1-${run}`, `fw2-${run}`];
      const entities = [`fe1-${run}`, `fe2-${run}`];
      const base = 1_700_000_000_000;
      let data: Memory[] = [];

      beforeAll(async () => {
        const rng = new Rng(20_240_601);
        const batch: NewMemory[] = [];
        for (let i = 0; i < 60; i++) {
          const scope = rng.pick(MEMORY_SCOPES);
          batch.push({
            type: rng.pick(MEMORY_TYPES),
            agentId: rng.pick(agents),
            entityId: rng.next() < 0.3 ? null : rng.pick(entities),
            roomId: scope === 'room' || rng.next() < 0.7 ? rng.pick(rooms) : null,
            worldId: scope === 'shared' || rng.next() < 0.7 ? rng.pick(worlds) : null,
            scope,
            content: { text: `memory ${i % 7}` },
            createdAt: base + rng.int(50) * 1000,
          });
        }
        data = await store().addMemories(batch);
      });

      /** Every given filter, restricted to this data set by agent. */
      const cases: Array<[string, MemoryFilter]> = [
        ['agentId', { agentId: agents[0]! }],
        ['types', { agentId: agents[0]!, types: ['fragment', 'document'] }],
        ['one type', { agentId: agents[1]!, types: ['message'] }],
        ['scopes', { agentId: agents[1]!, scopes: ['room', 'shared'] }],
        ['entityId', { entityId: entities[0]! }],
        ['roomId', { roomId: rooms[1]! }],
        ['worldId', { worldId: worlds[0]! }],
        ['createdAfter (exclusive)', { agentId: agents[0]!, createdAfter: base + 20_000 }],
        ['createdBefore (exclusive)', { agentId: agents[1]!, createdBefore: base + 20_000 }],
        [
          'a created window',
          { roomId: rooms[0]!, createdAfter: base + 10_000, createdBefore: base + 30_000 },
        ],
        [
          'several fields at once',
          {
            agentId: agents[0]!,
            roomId: rooms[0]!,
            worldId: worlds[1]!,
            scopes: ['room', 'private'],
          },
        ],
        ['a viewer', { viewer: { agentId: agents[0]!, roomId: rooms[0]!, worldId: worlds[1]! } }],
        ['a viewer with no room or world', { viewer: { agentId: agents[1]! } }],
        [
          'a viewer and a type',
          { viewer: { agentId: agents[1]!, roomId: rooms[1]! }, types: ['custom', 'fragment'] },
        ],
      ];

      const reference = (filter: MemoryFilter) =>
        data.filter((m) => {
          const f = filter;
          if (f.viewer) {
            const v = f.viewer;
            const seen =
              m.scope === 'private'
                ? m.agentId === v.agentId
                : m.scope === 'room'
                  ? m.roomId !== null && m.roomId === (v.roomId ?? null)
                  : m.worldId !== null && m.worldId === (v.worldId ?? null);
            if (!seen) return false;
          }
          if (f.agentId !== undefined && m.agentId !== f.agentId) return false;
          if (f.types && !f.types.includes(m.type)) return false;
          if (f.scopes && !f.scopes.includes(m.scope)) return false;
          if (f.entityId !== undefined && m.entityId !== f.entityId) return false;
          if (f.roomId !== undefined && m.roomId !== f.roomId) return false;
          if (f.worldId !== undefined && m.worldId !== f.worldId) return false;
          if (f.createdAfter !== undefined && !(m.createdAt > f.createdAfter)) return false;
          if (f.createdBefore !== undefined && !(m.createdAt < f.createdBefore)) return false;
          return true;
        });

      it('has a data set where every filter case selects some but not all', () => {
        for (const [label, filter] of cases) {
          const n = reference(filter).length;
          expect(n, label).toBeGreaterThan(0);
          expect(n, label).toBeLessThan(data.length);
        }
      });

      it.each(cases)(
        'lists and counts exactly the memories matching %s',
        async (_label, filter) => {
          const expected = reference(filter);
          const listed = await store().listMemories(filter, { limit: 1000 });
          expect(sortIds(listed)).toEqual(sortIds(expected));
          expect(await store().countMemories(filter)).toBe(expected.length);
        },
      );

      it('filters by ids, ignoring unknown ones', async () => {
        const pick = [data[3]!, data[17]!, data[42]!];
        const listed = await store().listMemories({ ids: [...pick.map((m) => m.id), newId()] });
        expect(sortIds(listed)).toEqual(sortIds(pick));
        expect(await store().countMemories({ ids: pick.map((m) => m.id) })).toBe(3);
      });

      it('filters by content hashes', async () => {
        const hash = sha256('memory 3');
        const expected = data.filter((m) => m.contentHash === hash);
        expect(expected.length).toBeGreaterThan(1);
        const listed = await store().listMemories({ contentHashes: [hash], agentId: agents[0]! });
        expect(sortIds(listed)).toEqual(sortIds(expected.filter((m) => m.agentId === agents[0])));
        const both = await store().listMemories({
          contentHashes: [hash, sha256('memory 4')],
          roomId: rooms[0]!,
        });
        expect(sortIds(both)).toEqual(
          sortIds(
            data.filter(
              (m) =>
                (m.content.text === 'memory 3' || m.content.text === 'memory 4') &&
                m.roomId === rooms[0],
            ),
          ),
        );
      });

      it('lists newest first by default and oldest first when asked, with a limit', async () => {
        const filter = { agentId: agents[0]! };
        const expected = reference(filter);
        const newest = await store().listMemories(filter, { limit: 1000 });
        const times = newest.map((m) => m.createdAt);
        expect(times).toEqual([...times].sort((a, b) => b - a));
        const oldest = await store().listMemories(filter, { order: 'oldest', limit: 1000 });
        expect(oldest.map((m) => m.createdAt)).toEqual([...times].reverse());
        const top5 = await store().listMemories(filter, { limit: 5 });
        expect(top5).toHaveLength(5);
        const cut = [...expected].sort((a, b) => b.createdAt - a.createdAt)[4]!.createdAt;
        for (const m of top5) expect(m.createdAt).toBeGreaterThanOrEqual(cut);
        const first3 = await store().listMemories(filter, { limit: 3, order: 'oldest' });
        const floor = [...expected].sort((a, b) => a.createdAt - b.createdAt)[2]!.createdAt;
        for (const m of first3) expect(m.createdAt).toBeLessThanOrEqual(floor);
      });

      it('lists 100 memories by default', async () => {
        const agentId = `many-${newId()}`;
        await store().addMemories(
          Array.from({ length: 105 }, (_, i) => ({ agentId, content: { text: `m${i}` } })),
        );
        expect(await store().listMemories({ agentId })).toHaveLength(100);
        expect(await store().countMemories({ agentId })).toBe(105);
      });

      it.skipIf(options.encrypted)(
        'returns nothing for filters no memory meets, including empty lists',
        async () => {
          expect(await store().listMemories({ agentId: `nobody-${run}` })).toEqual([]);
          expect(await store().countMemories({ roomId: `no-room-${run}` })).toBe(0);
          expect(await store().listMemories({ ids: [] })).toEqual([]);
          expect(await store().listMemories({ agentId: agents[0]!, types: [] })).toEqual([]);
          expect(await store().listMemories({ agentId: agents[0]!, scopes: [] })).toEqual([]);
          expect(await store().countMemories({ agentId: agents[0]!, contentHashes: [] })).toBe(0);
          expect(await store().searchMemories({ text: 'memory', filter: { ids: [] } })).toEqual([]);
        },
      );

      it('sees a deleted memory no more, in lists and counts', async () => {
        const agentId = `agent-${newId()}`;
        const stored = await store().addMemories(
          [1, 2, 3].map((i) => ({ agentId, content: { text: `d${i}` } })),
        );
        await store().deleteMemories([stored[1]!.id]);
        expect(sortIds(await store().listMemories({ agentId }))).toEqual(
          sortIds([stored[0]!, stored[2]!]),
        );
        expect(await store().countMemories({ agentId })).toBe(2);
      });

      it('finds an updated memory by its new content hash', async () => {
        const agentId = `agent-${newId()}`;
        const [m] = await store().addMemories([{ agentId, content: { text: 'before' } }]);
        await store().updateMemory(m!.id, { content: { text: 'after' } });
        expect(await store().listMemories({ agentId, contentHashes: [sha256('before')] })).toEqual(
          [],
        );
        expect(
          (await store().listMemories({ agentId, contentHashes: [sha256('after')] })).map(
            (x) => x.id,
          ),
        ).toEqual([m!.id]);
      });

      it.each([
        ['zero', 0],
        ['negative', -1],
        ['fractional', 3.5],
        ['over 10000', 10_001],
      ])('rejects a %s list limit (INVALID_ARGUMENT)', async (_l, limit) => {
        await expectCode(
          () => store().listMemories({ agentId: agents[0]! }, { limit }),
          'INVALID_ARGUMENT',
        );
      });

      it.each([
        ['an unknown type', { types: ['note'] } as unknown as MemoryFilter],
        ['an unknown scope', { scopes: ['public'] } as unknown as MemoryFilter],
        ['a viewer without an agent', { viewer: { roomId: 'r' } } as unknown as MemoryFilter],
        ['a NaN createdAfter', { createdAfter: Number.NaN }],
        ['ids that are not strings', { ids: [1, 2] } as unknown as MemoryFilter],
      ])('rejects a filter with %s (INVALID_ARGUMENT)', async (_l, filter) => {
        await expectCode(() => store().listMemories(filter), 'INVALID_ARGUMENT');
        await expectCode(() => store().countMemories(filter), 'INVALID_ARGUMENT');
      });

      it('rejects an unknown order (INVALID_ARGUMENT)', async () => {
        await expectCode(
          () => store().listMemories({ agentId: agents[0]! }, { order: 'random' as 'newest' }),
          'INVALID_ARGUMENT',
        );
      });
    });
  });
}
