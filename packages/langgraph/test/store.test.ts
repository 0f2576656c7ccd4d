// CairnStore against LangGraph's InMemoryStore: the same operations on both, results equal;
// then what InMemoryStore's own tests pin, and the tenant-prefix leak (langgraphjs#2721).
import { Embeddings } from '@langchain/core/embeddings';
import {
  type BaseStore,
  InMemoryStore,
  InvalidNamespaceError,
  type PutOperation,
} from '@langchain/langgraph-checkpoint';
import { afterAll, describe, expect, it } from 'vitest';
import { CairnStore } from '../src/index.js';
import { closePglite, removeTempDirs, storeKinds } from './stores.js';

/** A deterministic bag-of-words embedder. */
class WordEmbeddings extends Embeddings {
  constructor() {
    super({});
  }
  #embed(text: string): number[] {
    const v = new Array(16).fill(0);
    for (const word of text.toLowerCase().match(/[a-z]+/g) ?? []) {
      let h = 0;
      for (const ch of word) h = (h * 31 + ch.charCodeAt(0)) % 16;
      v[h] += 1;
    }
    const norm = Math.hypot(...v) || 1;
    return v.map((x) => x / norm);
  }
  async embedDocuments(texts: string[]) {
    return texts.map((t) => this.#embed(t));
  }
  async embedQuery(text: string) {
    return this.#embed(text);
  }
}

const NAMESPACES = [
  ['a', 'b', 'c'],
  ['a', 'b', 'd', 'e'],
  ['a', 'b', 'd', 'i'],
  ['a', 'b', 'f'],
  ['a', 'c', 'f'],
  ['b', 'a', 'f'],
  ['users', '123'],
  ['users', '456', 'settings'],
  ['admin', 'users', '789'],
  ['tenant', 'acme'],
  ['tenant', 'acme', 'sub'],
  ['tenant', 'acme-corp'],
  ['user_1'],
  ['100%'],
];

const strip = (items: unknown) =>
  JSON.parse(
    JSON.stringify(items, (k, v) => (k === 'createdAt' || k === 'updatedAt' ? undefined : v)),
  );

/** The same operations on any BaseStore; returns every result, items without their times. */
async function script(store: BaseStore): Promise<unknown[]> {
  const out: unknown[] = [];
  const note = (v: unknown) => out.push(strip(v));
  let n = 0;
  for (const ns of NAMESPACES) {
    await store.put(ns, 'k1', { n: ++n, label: ns.join('/'), tags: ['x', String(n % 3)] });
    await store.put(ns, 'k2', { n: ++n, label: `${ns[0]} second`, flag: n % 2 === 0 });
  }
  note(await store.get(['a', 'b', 'c'], 'k1'));
  note(await store.get(['a', 'b', 'c'], 'missing'));
  note(await store.get(['nope'], 'k1'));
  // Namespace listing: prefix, suffix, wildcards, depth, paging.
  note(await store.listNamespaces());
  note(await store.listNamespaces({ prefix: ['a', 'b'] }));
  note(await store.listNamespaces({ suffix: ['f'] }));
  note(await store.listNamespaces({ maxDepth: 2 }));
  note(await store.listNamespaces({ limit: 3, offset: 2 }));
  note(await store.listNamespaces({ prefix: ['a'], suffix: ['f'], maxDepth: 2 }));
  note(await store.listNamespaces({ prefix: ['a', '*', 'f'] }));
  note(await store.listNamespaces({ suffix: ['*', 'f'] }));
  note(await store.listNamespaces({ prefix: ['z'] }));
  note(await store.listNamespaces({ suffix: ['corp'] }));
  note(await store.listNamespaces({ prefix: ['tenant', '*'] }));
  // Search by namespace prefix and filters.
  const keys = async (prefix: string[], options: Parameters<BaseStore['search']>[1] = {}) =>
    (await store.search(prefix, { limit: 100, ...options }))
      .map((i) => `${i.namespace.join('/')}#${i.key}`)
      .sort();
  note(await keys(['tenant', 'acme']));
  note(await keys([]));
  note(await keys(['a', 'b']));
  note(await keys(['user_1']));
  note(await keys(['100%']));
  note(await keys(['a'], { filter: { n: { $gt: 4, $lte: 9 } } }));
  note(await keys([], { filter: { flag: true } }));
  note(await keys([], { filter: { n: { $in: [1, 2, 27] } } }));
  note(await keys(['a'], { filter: { n: { $nin: [1, 2] }, flag: { $ne: true } } }));
  note(await keys([], { filter: { n: 7 } }));
  note(await keys([], { filter: { label: { $eq: 'users second' } } }));
  note(await store.search(['a', 'b', 'c'], { limit: 1, offset: 1 }));
  note(await store.search(['a', 'b', 'c']));
  // Updates and deletes.
  await store.put(['a', 'b', 'c'], 'k1', { n: 100, label: 'updated' });
  note(await store.get(['a', 'b', 'c'], 'k1'));
  await store.delete(['a', 'b', 'c'], 'k2');
  note(await store.get(['a', 'b', 'c'], 'k2'));
  note(await store.search(['a', 'b', 'c']));
  // A batch: reads see the store as it was before the batch's puts.
  note(
    await store.batch([
      { namespace: ['batch'], key: 'x', value: { v: 1 } },
      { namespace: ['batch'], key: 'x' },
      { namespacePrefix: ['batch'], limit: 10, offset: 0 },
    ]),
  );
  note(await store.get(['batch'], 'x'));
  return out;
}

const kinds = await storeKinds();
afterAll(async () => {
  await closePglite();
  removeTempDirs();
});

describe('CairnStore', () => {
  let reference: unknown[];
  it('InMemoryStore (the reference) runs the script', async () => {
    reference = await script(new InMemoryStore());
    expect(reference.length).toBeGreaterThan(20);
  });

  for (const kind of kinds) {
    it.skipIf(kind.skip)(
      `answers as InMemoryStore does on ${kind.name}`,
      async () => {
        const db = await kind.open();
        try {
          expect(await script(new CairnStore(db.store))).toEqual(reference);
          // Another instance on the same database sees the same items.
          const again = new CairnStore(await db.reopen());
          expect(strip(await again.get(['a', 'b', 'c'], 'k1'))).toEqual({
            key: 'k1',
            namespace: ['a', 'b', 'c'],
            value: { n: 100, label: 'updated' },
          });
        } finally {
          await db.dispose();
        }
      },
      60_000,
    );

    it.skipIf(kind.skip)(
      `searches by meaning with an IndexConfig on ${kind.name}`,
      async () => {
        const db = await kind.open();
        const index = { dims: 16, embeddings: new WordEmbeddings(), fields: ['text'] };
        const stores = [new InMemoryStore({ index }), new CairnStore(db.store, { index })];
        try {
          const results = [];
          for (const store of stores) {
            await store.put(['docs'], 'sky', { text: 'why is the sky blue' });
            await store.put(['docs'], 'sea', { text: 'the sea is deep and blue' });
            await store.put(['docs'], 'cake', { text: 'how to bake a chocolate cake' });
            await store.put(['docs'], 'raw', { text: 'blue sky thinking' }, false);
            await store.put(['other'], 'sky2', { text: 'the sky at night' });
            const hits = await store.search(['docs'], { query: 'blue sky', limit: 10 });
            results.push(
              hits.map((h) => [h.key, h.score === undefined ? null : h.score.toFixed(4)]),
            );
          }
          expect(results[1]).toEqual(results[0]);
          expect(results[0]![0]![0]).toBe('sky');
          expect(results[0]!.at(-1)).toEqual(['raw', null]);
        } finally {
          await db.dispose();
        }
      },
      60_000,
    );
  }

  for (const kind of kinds) {
    it.skipIf(kind.skip)(
      `finds a tenant's items however many other tenants' items outrank them on ${kind.name} (F10)`,
      async () => {
        const db = await kind.open();
        const index = { dims: 16, embeddings: new WordEmbeddings(), fields: ['text'] };
        const reference = new InMemoryStore({ index });
        const stores = [
          new CairnStore(db.store),
          new CairnStore(db.store, { index, agentId: 'v' }),
        ];
        try {
          // More than the 1,000 hits a search asks the store for, each a better match.
          const ops: PutOperation[] = [];
          for (let i = 0; i < 1050; i++)
            ops.push({
              namespace: ['users', `other${i}`],
              key: 'note',
              value: { text: 'apple apple apple apple', owner: `other${i}` },
            });
          for (let i = 0; i < 3; i++)
            ops.push({
              namespace: ['users', 'u1'],
              key: `note${i}`,
              value: { text: 'apple pie recipe with many other words in it', owner: 'u1' },
            });
          for (const store of [reference, ...stores]) await store.batch(ops);
          const answers = async (store: BaseStore) => {
            const keys = async (prefix: string[], options: Parameters<BaseStore['search']>[1]) =>
              (await store.search(prefix, options)).map((i) => i.key).sort();
            return [
              await keys(['users', 'u1'], { query: 'apple' }),
              await keys(['users', 'u1'], { query: 'apple', limit: 2, offset: 1 }),
              await keys(['users'], { query: 'apple', filter: { owner: 'u1' } }),
              await keys(['users'], { query: 'apple', filter: { owner: { $in: ['u1'] } } }),
            ];
          };
          const expected = await answers(reference);
          expect(expected[0]).toEqual(['note0', 'note1', 'note2']);
          // By keyword (no index) and by vector.
          for (const store of stores) {
            const got = await answers(store);
            expect(got[0]).toEqual(expected[0]);
            expect(got[1]).toHaveLength(2);
            expect(got.slice(2)).toEqual(expected.slice(2));
          }
        } finally {
          await db.dispose();
        }
      },
      60_000,
    );

    it.skipIf(kind.skip)(
      `takes what InMemoryStore takes: large values, long labels on ${kind.name} (F14)`,
      async () => {
        const db = await kind.open();
        const index = { dims: 16, embeddings: new WordEmbeddings(), fields: ['$'] };
        const long = `tenant-${'x'.repeat(250)}`;
        const big = { text: `${'w '.repeat(150_000)}needle`, n: 1 };
        const answers = async (store: BaseStore) => {
          await store.put(['big'], 'k', big);
          await store.put([long, 'a'], 'k', { v: 1 });
          await store.put([long, 'b'], 'k', { v: 2 });
          await store.put(['other'], 'k', { v: 3 });
          return strip([
            await store.get(['big'], 'k'),
            (await store.search(['big'], { query: 'w' })).map((i) => i.key),
            await store.get([long, 'a'], 'k'),
            await store.search([long]),
            (await store.search([long, 'b'], { query: 'v' })).map((i) => i.key),
            await store.listNamespaces({ prefix: [long] }),
            (await store.batch([{ namespace: [long], key: 'k', value: { v: 4 } }]))[0],
            await store.get([long], 'k'),
          ]);
        };
        try {
          for (const [agentId, options] of [
            ['plain', {}],
            ['indexed', { index }],
          ] as const) {
            const expected = await answers(new InMemoryStore(options));
            const store = new CairnStore(db.store, { ...options, agentId });
            expect(await answers(store)).toEqual(expected);
          }
        } finally {
          await db.dispose();
        }
      },
      60_000,
    );
  }

  it('writes all of a batch or none of it', async () => {
    const deep = (n: number) => {
      let v: Record<string, unknown> = {};
      for (let i = 0; i < n; i++) v = { a: v };
      return v;
    };
    class FailingEmbeddings extends WordEmbeddings {
      override async embedDocuments(texts: string[]): Promise<number[][]> {
        if (texts.some((t) => t.includes('fail'))) throw new Error('embedder down');
        return super.embedDocuments(texts);
      }
    }
    for (const kind of kinds.slice(0, 2)) {
      const db = await kind.open();
      const index = { dims: 16, embeddings: new FailingEmbeddings(), fields: ['text'] };
      for (const [store, bad] of [
        [new CairnStore(db.store, { agentId: 'deep' }), deep(600)],
        [new CairnStore(db.store, { agentId: 'embed', index }), { text: 'fail' }],
      ] as const) {
        await store.put(['t'], 'kept', { text: 'before' });
        const error = await store
          .batch([
            { namespace: ['t'], key: 'kept', value: { text: 'changed' } },
            { namespace: ['t'], key: 'new', value: { text: 'new' } },
            { namespace: ['t'], key: 'bad', value: bad },
          ])
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(Error);
        expect(strip(await store.search(['t']))).toEqual([
          { key: 'kept', namespace: ['t'], value: { text: 'before' } },
        ]);
      }
      await db.dispose();
    }
  });

  for (const kind of kinds) {
    it.skipIf(kind.skip)(
      `puts of one new key side by side all succeed, last one wins, on ${kind.name}`,
      async () => {
        // Every run of a graph that writes a shared key does this at once (LangGraph's API
        // tests run them concurrently): each put found the key missing and inserted it.
        const db = await kind.open();
        try {
          const stores = [new CairnStore(db.store), new CairnStore(await db.reopen())];
          for (let round = 0; round < 5; round++) {
            const key = `k${round}`;
            const values = Array.from({ length: 8 }, (_, i) => ({ n: i }));
            const results = await Promise.allSettled(
              values.map((v, i) =>
                i % 3 === 2
                  ? stores[i % 2]!.delete(['shared'], key)
                  : stores[i % 2]!.put(['shared'], key, v),
              ),
            );
            expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
            const items = await stores[0]!.search(['shared']);
            expect(items.filter((i) => i.key === key).length).toBeLessThanOrEqual(1);
          }
        } finally {
          await db.dispose();
        }
      },
      60_000,
    );
  }

  it('rejects a batch with an empty namespace as InMemoryStore does (F14)', async () => {
    const db = await kinds[0]!.open();
    for (const store of [new InMemoryStore(), new CairnStore(db.store)]) {
      for (const op of [
        { namespace: [], key: 'k', value: { v: 1 } },
        { namespace: [], key: 'k' },
        { namespace: ['a', ''], key: 'k', value: { v: 1 } },
      ]) {
        await expect(store.batch([op])).rejects.toThrow(InvalidNamespaceError);
      }
      expect(await store.search([])).toEqual([]);
    }
    await db.dispose();
  });

  it('matches namespaces by whole labels (langgraphjs#2721)', async () => {
    const db = await kinds[0]!.open();
    const store = new CairnStore(db.store);
    await store.put(['tenant', 'acme'], 'secret', { v: 1 });
    await store.put(['tenant', 'acme-corp'], 'secret', { v: 2 });
    await store.put(['tenant', 'acme', 'sub'], 'x', { v: 3 });
    const hits = await store.search(['tenant', 'acme']);
    expect(hits.map((h) => h.namespace)).toEqual([
      ['tenant', 'acme'],
      ['tenant', 'acme', 'sub'],
    ]);
    expect((await store.search(['tenant', 'acme'], { query: 'secret' })).length).toBeLessThan(3);
    await db.dispose();
  });

  it('filters a list or object value by JSON equality (InMemoryStore compares them by reference)', async () => {
    const store = new CairnStore((await kinds[0]!.open()).store);
    await store.put(['t'], 'a', { tags: ['x', '1'], meta: { k: 1 } });
    await store.put(['t'], 'b', { tags: ['x', '2'], meta: { k: 2 } });
    const keys = async (filter: Record<string, unknown>) =>
      (await store.search(['t'], { filter })).map((i) => i.key);
    expect(await keys({ tags: ['x', '1'] })).toEqual(['a']);
    expect(await keys({ meta: { $eq: { k: 2 } } })).toEqual(['b']);
    expect(await keys({ tags: { $in: [['x', '2']] } })).toEqual(['b']);
    expect(await keys({ missing: { $exists: false }, meta: { $exists: true } })).toEqual([
      'a',
      'b',
    ]);
  });

  it('rejects invalid namespaces as LangGraph does', async () => {
    const store = new CairnStore((await kinds[0]!.open()).store);
    await expect(store.put([], 'k', { v: 1 })).rejects.toThrow(InvalidNamespaceError);
    await expect(store.put(['a', ''], 'k', { v: 1 })).rejects.toThrow(InvalidNamespaceError);
    await expect(store.put(['langgraph'], 'k', { v: 1 })).rejects.toThrow(InvalidNamespaceError);
  });
});
