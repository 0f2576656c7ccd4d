import { type Message, newId } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import type { NewMessage, Store } from '../../store.js';
import { type StoreConformanceOptions, TEST_TIMEOUT, useStore } from '../context.js';
import { expectCode, makeChain, makeThread, Rng } from '../helpers.js';

/** The messages of a tree, with the reference answers computed from parent links alone. */
class Tree {
  readonly byId = new Map<string, Message>();

  add(messages: Message[]): Message[] {
    for (const m of messages) this.byId.set(m.id, m);
    return messages;
  }

  /** The chain from the root to `id`, root first, by parent links. */
  chain(id: string): Message[] {
    const out: Message[] = [];
    for (let m = this.byId.get(id); m; m = m.parentId ? this.byId.get(m.parentId) : undefined)
      out.push(m);
    return out.reverse();
  }

  isAncestor(a: string, d: string): boolean {
    return this.chain(d).some((m) => m.id === a);
  }
}

/** Appends `n` messages after `parentId` in batches of the given sizes, cycling through them. */
async function grow(
  store: Store,
  tree: Tree,
  threadId: string,
  parentId: string | null,
  n: number,
  batchSizes: readonly number[],
): Promise<Message[]> {
  const out: Message[] = [];
  let parent = parentId;
  for (let i = 0, b = 0; i < n; b++) {
    const size = Math.min(batchSizes[b % batchSizes.length]!, n - i);
    out.push(...tree.add(await makeChain(store, threadId, size, parent)));
    parent = out[out.length - 1]!.id;
    i += size;
  }
  return out;
}

/**
 * Checks `isAncestor` and `getChain` (single messages deep in the chain and pages) on
 * pairs of the tree's messages against the reference, so that any wrong jump pointer
 * shows up as a wrong answer.
 */
async function expectLineage(store: Store, tree: Tree, rng: Rng, pairs: number): Promise<void> {
  const all = [...tree.byId.values()];
  for (let i = 0; i < pairs; i++) {
    const d = rng.pick(all);
    const chain = tree.chain(d.id);
    // Half the pairs are true ancestors (so deep ones are tested too), half random.
    const a = i % 2 === 0 ? rng.pick(chain) : rng.pick(all);
    expect(await store.isAncestor(a.id, d.id), `isAncestor(${a.depth}, ${d.depth})`).toBe(
      tree.isAncestor(a.id, d.id),
    );
    const k = rng.int(d.depth + 1);
    const [at] = await store.getChain(d.id, { limit: 1, beforeDepth: k + 1 });
    expect(at?.id, `message at depth ${k} below depth ${d.depth}`).toBe(chain[k]!.id);
    const limit = 1 + rng.int(40);
    const page = await store.getChain(d.id, { limit, beforeDepth: k + 1 });
    expect(page.map((m) => m.id)).toEqual(
      chain.slice(Math.max(0, k + 1 - limit), k + 1).map((m) => m.id),
    );
  }
}

export function describeLineage(options: StoreConformanceOptions): void {
  describe('lineage: ancestry and chains at any depth', () => {
    const store = useStore(options);

    it(
      'answers for a deep chain grown in batches of every size',
      async () => {
        const t = await makeThread(store());
        const tree = new Tree();
        const chain = await grow(store(), tree, t.id, null, 1_200, [1, 2, 3, 7, 64, 1, 250, 5]);
        const head = chain[chain.length - 1]!;
        expect(chain.map((m) => m.depth)).toEqual(chain.map((_, i) => i));
        // Depths all along the chain from the head, then the whole chain.
        for (const m of chain.filter((_, i) => i % 9 === 0 || i > 1_190)) {
          const [at] = await store().getChain(head.id, { limit: 1, beforeDepth: m.depth + 1 });
          expect(at?.id).toBe(m.id);
        }
        expect(await store().isAncestor(chain[0]!.id, head.id)).toBe(true);
        expect(await store().isAncestor(head.id, chain[0]!.id)).toBe(false);
        expect((await store().getChain(head.id)).map((m) => m.id)).toEqual(chain.map((m) => m.id));
        await expectLineage(store(), tree, new Rng(17), 40);
      },
      TEST_TIMEOUT,
    );

    it(
      'answers across many branches and forks of forks',
      async () => {
        const t = await makeThread(store());
        const tree = new Tree();
        const rng = new Rng(4242);
        const main = await grow(store(), tree, t.id, null, 300, [100, 1, 37]);
        // 30 forks from random messages of anything grown so far: forks of forks, at
        // every level, some from the same message (siblings at equal depths).
        for (let f = 0; f < 30; f++) {
          const from = f % 5 === 4 ? main[150]! : rng.pick([...tree.byId.values()]);
          await grow(store(), tree, t.id, from.id, 1 + rng.int(60), [1 + rng.int(20), 40]);
        }
        await expectLineage(store(), tree, rng, 80);
        // Siblings and cousins at equal depth are never ancestors of each other.
        const children = [...tree.byId.values()].filter((m) => m.parentId === main[150]!.id);
        expect(children.length).toBeGreaterThan(2);
        expect(await store().isAncestor(children[0]!.id, children[1]!.id)).toBe(false);
        expect(await store().isAncestor(main[150]!.id, children[1]!.id)).toBe(true);
      },
      TEST_TIMEOUT,
    );

    it(
      'answers for a tree added in one batch, parents earlier in the batch or stored',
      async () => {
        const t = await makeThread(store());
        const tree = new Tree();
        const rng = new Rng(99);
        const base = await grow(store(), tree, t.id, null, 90, [45]);
        const batch: NewMessage[] = [];
        const ids: string[] = [];
        for (let i = 0; i < 400; i++) {
          const id = newId();
          // Mostly extend the previous message, sometimes branch off anything before.
          const parentId =
            i === 0
              ? base[89]!.id
              : rng.next() < 0.8
                ? ids[i - 1]!
                : rng.pick([...ids, ...base.map((m) => m.id)]);
          batch.push({ id, threadId: t.id, parentId, role: 'user', data: i });
          ids.push(id);
        }
        tree.add(await store().addMessages(batch));
        await expectLineage(store(), tree, rng, 80);
      },
      TEST_TIMEOUT,
    );

    it('isAncestor: a message is its own ancestor; other threads and later messages are not', async () => {
      const t = await makeThread(store());
      const u = await makeThread(store());
      const [a, b] = await makeChain(store(), t.id, 2);
      const [x] = await makeChain(store(), u.id, 1);
      expect(await store().isAncestor(a!.id, a!.id)).toBe(true);
      expect(await store().isAncestor(a!.id, b!.id)).toBe(true);
      expect(await store().isAncestor(b!.id, a!.id)).toBe(false);
      expect(await store().isAncestor(x!.id, a!.id)).toBe(false);
      expect(await store().isAncestor(a!.id, x!.id)).toBe(false);
    });

    it('isAncestor: NOT_FOUND for a missing message, INVALID_ARGUMENT for a bad id', async () => {
      const t = await makeThread(store());
      const [a] = await makeChain(store(), t.id, 1);
      await expectCode(() => store().isAncestor(`missing-${newId()}`, a!.id), 'NOT_FOUND');
      await expectCode(() => store().isAncestor(a!.id, `missing-${newId()}`), 'NOT_FOUND');
      await expectCode(() => store().isAncestor('', a!.id), 'INVALID_ARGUMENT');
      await expectCode(
        () => store().isAncestor(a!.id, 42 as unknown as string),
        'INVALID_ARGUMENT',
      );
    });
  });
}
