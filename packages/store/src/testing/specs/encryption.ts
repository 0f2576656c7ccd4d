import { type JsonObject, newId } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { type EncryptionOptions, localKeyring } from '../../encryption.js';
import type { Store } from '../../store.js';
import { TEST_TIMEOUT } from '../context.js';
import { expectClose, expectCode, makeChain, Rng, turnOf } from '../helpers.js';

/** Raw edits of the database under a store, around it: what an attacker with the disk does. */
export interface RawTamper {
  /** Sets message `toId`'s stored data to message `fromId`'s, byte for byte. */
  copyMessageData(store: Store, fromId: string, toId: string): Promise<void>;
  /** Changes one character of the sealed text stored as message `id`'s data. */
  editMessageData(store: Store, id: string): Promise<void>;
  /** Stores `data` as message `id`'s data, in plaintext. */
  setMessageData(store: Store, id: string, data: JsonObject): Promise<void>;
  /** Moves memory `id`, its stored row as it is, to entity `entityId`. */
  setMemoryEntity(store: Store, id: string, entityId: string): Promise<void>;
}

/** How the encryption suite makes its stores. See `describeEncryptionConformance`. */
export interface EncryptionConformanceOptions {
  name: string;
  /** A new store with no data, with this encryption option (none when undefined). */
  create: (encryption: EncryptionOptions | undefined) => Promise<Store>;
  /** A second store on `store`'s data, with this encryption option (none when undefined). */
  reopen: (store: Store, encryption: EncryptionOptions | undefined) => Promise<Store>;
  /** Disposes of a store made by `create`. Default: `close()`. */
  destroy?: (store: Store) => Promise<void>;
  /**
   * Everything the database holds, as text (a file and its WAL; every row of every table):
   * where no canary may be found. Left out by a store that keeps nothing at rest.
   */
  rawText?: (store: Store) => Promise<string>;
  /** Raw edits, for the tamper tests. Left out by a store that keeps nothing at rest. */
  tamper?: RawTamper;
}

const SECRET = 'a test secret of at least thirty-two bytes, not a real one';
const OTHER_SECRET = 'another test secret, thirty-two bytes long or longer';

/** A canary: a string that must appear nowhere at rest. */
const canary = (i: number) => `canary${i}x${newId().replace(/-/g, '')}`;

/**
 * Registers the tests of encryption at rest (`encryption: { keyring }`): sealed round
 * trips, no canary at rest, tampered, swapped and plaintext rows refused, a store without
 * its keyring refused, crypto-shredding, key rotation, and what a sealed store refuses.
 */
export function describeEncryptionConformance(options: EncryptionConformanceOptions): void {
  const keyring = localKeyring(SECRET);
  const encryption = { keyring };
  /** The same keyring, but it wraps no data key of the entity `refused`. */
  const refusingKeyring: EncryptionOptions = {
    keyring: {
      keyId: keyring.keyId,
      wrap: (dataKey, context) => {
        if (context.endsWith('entity:refused')) throw new Error('no key for a refused tenant');
        return keyring.wrap(dataKey, context);
      },
      unwrap: (wrapped, context, keyId) => keyring.unwrap(wrapped, context, keyId),
    },
  };

  async function withStores<T>(
    fn: (store: Store, opened: Store[]) => Promise<T>,
    /** Null: a store without encryption. */
    enc: EncryptionOptions | null = encryption,
  ): Promise<T> {
    const store = await options.create(enc ?? undefined);
    const opened: Store[] = [];
    try {
      return await fn(store, opened);
    } finally {
      for (const o of opened) await o.close();
      if (options.destroy) await options.destroy(store);
      else await store.close();
    }
  }

  /** A thread of `resourceId` with a chain, state (update and snapshot) and a checkpoint. */
  async function seedThread(store: Store, resourceId: string | null, texts: string[]) {
    const thread = await store.createThread({ resourceId });
    const ids = texts.map(() => newId());
    const messages = await store.addMessages(
      texts.map((text, i) => ({
        id: ids[i]!,
        threadId: thread.id,
        parentId: i === 0 ? null : ids[i - 1]!,
        role: 'user',
        data: { text, n: i },
      })),
    );
    const branch = await store.createBranch({
      threadId: thread.id,
      name: 'main',
      headMessageId: messages.at(-1)!.id,
    });
    const update = { note: texts[0]! };
    const snapshot = { note: texts[0]!, all: texts.slice(0, 3) };
    await store.appendStateCommit({ branchId: branch.id, messageId: null, update }, 0);
    await store.appendStateCommit({ branchId: branch.id, messageId: null, update, snapshot }, 1);
    return { thread, branch, messages, update, snapshot };
  }

  describe(`${options.name} store encryption`, { timeout: TEST_TIMEOUT }, () => {
    it('gives back sealed messages, state and memories as they were written', async () => {
      await withStores(async (store) => {
        for (const resourceId of ['tenant-a', 'tenant-b', null]) {
          const texts = [canary(1), canary(2), canary(3)];
          const { thread, branch, messages, update, snapshot } = await seedThread(
            store,
            resourceId,
            texts,
          );
          expect((await store.getChain(messages.at(-1)!.id)).map((m) => m.data)).toEqual(
            texts.map((text, n) => ({ text, n })),
          );
          expect(await store.getMessage(messages[0]!.id)).toEqual(messages[0]);
          const commits = await store.getStateCommits(branch.id);
          expect(commits.map((c) => [c.update, c.snapshot])).toEqual([
            [update, null],
            [update, snapshot],
          ]);
          expect(await store.getLatestStateCommit(branch.id, { withSnapshot: true })).toEqual(
            commits[1],
          );
          // A message batch that moves the head, and a whole thread's records.
          const { messages: more } = await store.addMessagesOnBranch(
            branch.id,
            messages.at(-1)!.id,
            [{ threadId: thread.id, parentId: messages.at(-1)!.id, role: 'assistant', data: 'ok' }],
          );
          expect((await store.getMessage(more[0]!.id))!.data).toBe('ok');
          const records = (await store.exportThread(thread.id))!;
          expect(records.messages.map((m) => m.data)).toEqual([
            ...texts.map((text, n) => ({ text, n })),
            'ok',
          ]);
          expect(records.stateCommits).toEqual(commits);
        }
        const written = await store.addMemories([
          {
            agentId: 'a',
            entityId: 'e1',
            content: { text: canary(4) },
            metadata: { k: canary(5) },
          },
          { agentId: 'a', worldId: 'w1', content: { text: canary(6), extra: [1, 2] } },
          { agentId: 'a', content: { text: canary(7) } },
        ]);
        for (const m of written) expect(await store.getMemory(m.id)).toEqual(m);
        expect(await store.listMemories({ agentId: 'a' }, { order: 'oldest' })).toEqual(written);
        const updated = await store.updateMemory(written[0]!.id, {
          content: { text: 'changed' },
          metadata: { k: 'v' },
        });
        expect(await store.getMemory(written[0]!.id)).toEqual(updated);
        expect(updated.content).toEqual({ text: 'changed' });
        const next = await store.supersedeMemory(written[1]!.id, { content: { text: 'newer' } });
        expect(await store.getMemory(next.id)).toEqual(next);
        expect((await store.scanMemories()).items).toHaveLength(4);
      });
    });

    it('keeps a sealed data key of a tenant that a rolled-back call made in a transaction', async () => {
      await withStores(async (store) => {
        const entityId = `e-${newId()}`;
        const kept = await store.transaction(async (tx) => {
          // The first memory makes the entity's data key, the keyring refuses the second's:
          // the call rolls back, key included, and the next call makes another.
          await expect(
            tx.addMemories([
              { agentId: 'a', entityId, content: { text: 'first' } },
              { agentId: 'a', entityId: 'refused', content: { text: 'second' } },
            ]),
          ).rejects.toThrow('no key for a refused tenant');
          return tx.addMemories([{ agentId: 'a', entityId, content: { text: 'third' } }]);
        });
        expect(await store.getMemory(kept[0]!.id)).toEqual(kept[0]);
        expect(await store.countMemories({ entityId })).toBe(1);
      }, refusingKeyring);
    });

    it('makes one data key per tenant when writers race for its first one', async () => {
      await withStores(async (store) => {
        const resourceId = `tenant-${newId()}`;
        const threads = [];
        for (let i = 0; i < 8; i++) threads.push(await store.createThread({ resourceId }));
        const written = await Promise.all(
          threads.map((t, i) =>
            store.addMessages([{ threadId: t.id, parentId: null, role: 'user', data: `m${i}` }]),
          ),
        );
        for (const [m] of written) expect((await store.getMessage(m!.id))!.data).toBe(m!.data);
        const heard: unknown[] = [];
        const stop = store.subscribeForgets((n) => heard.push(n));
        expect(await store.destroyDataKeys({ resourceId })).toBe(1);
        stop();
        // What a cache holds of the tenant's data goes too (see subscribeForgets).
        expect(heard).toEqual([{ subject: { resourceId }, at: expect.any(Number) }]);
      });
    });

    if (options.rawText) {
      const rawText = options.rawText;
      it('leaves no canary at rest: 0 of 200 in the raw database', async () => {
        const plant = async (store: Store) => {
          const planted: string[] = [];
          for (let t = 0; t < 4; t++) {
            const texts = Array.from({ length: 25 }, (_, i) => canary(t * 100 + i));
            await seedThread(store, `tenant-${t}`, texts);
            planted.push(...texts);
          }
          const memories = Array.from({ length: 50 }, (_, i) => ({
            text: canary(1000 + i),
            meta: canary(2000 + i),
          }));
          await store.addMemories(
            memories.map((m, i) => ({
              agentId: 'a',
              entityId: `person-${i % 5}`,
              content: { text: m.text },
              metadata: { note: m.meta },
            })),
          );
          planted.push(...memories.flatMap((m) => [m.text, m.meta]));
          return planted;
        };
        // The same data in plaintext shows through: the audit can see canaries.
        await withStores(async (store) => {
          const planted = await plant(store);
          const raw = await rawText(store);
          expect(planted.filter((c) => raw.includes(c)).length).toBeGreaterThan(0);
        }, null);
        await withStores(async (store) => {
          const planted = await plant(store);
          expect(planted).toHaveLength(200);
          const raw = await rawText(store);
          expect(planted.filter((c) => raw.includes(c))).toEqual([]);
          // Still all there for the store with the keyring.
          expect(await store.countMemories({ agentId: 'a' })).toBe(50);
        });
      });
    }

    if (options.rawText) {
      const rawText = options.rawText;
      it("keeps no embedding in the clear: neither a memory's nor a cached one", async () => {
        // Exact in float32, so each form a database may keep a vector in is known: JSON
        // text, float32 and float64 bytes.
        const vectors = Array.from({ length: 5 }, (_, i) =>
          Array.from({ length: 8 }, (_, j) => ((i * 8 + j + 1) * 37) / 1024 - 0.5),
        );
        const forms = (v: number[]) => [
          v.join(','),
          Buffer.from(Float32Array.from(v).buffer).toString('latin1'),
          Buffer.from(Float64Array.from(v).buffer).toString('latin1'),
        ];
        const plant = async (store: Store) => {
          const stored = await store.addMemories(
            vectors.map((embedding, i) => ({
              agentId: 'a',
              entityId: `person-${i}`,
              content: { text: `memory ${i}` },
              embedding,
            })),
          );
          await store.putCachedEmbeddings(
            'embedder',
            stored.map((m) => ({ contentHash: m.contentHash, embedding: m.embedding! })),
          );
          return vectors.flatMap(forms);
        };
        await withStores(async (store) => {
          const planted = await plant(store);
          const raw = await rawText(store);
          expect(planted.filter((f) => raw.includes(f)).length).toBeGreaterThan(0);
        }, null);
        await withStores(async (store) => {
          const planted = await plant(store);
          const raw = await rawText(store);
          expect(planted.filter((f) => raw.includes(f))).toEqual([]);
          const [hit] = await store.searchMemories({ vector: vectors[3]!, limit: 1 });
          expect(hit!.memory.entityId).toBe('person-3');
          expect(hit!.memory.embedding).toEqual(vectors[3]);
        });
      });
    }

    if (options.tamper) {
      const tamper = options.tamper;
      it('refuses a sealed value copied from another tenant, an edited one and plaintext', async () => {
        await withStores(async (store) => {
          const a = await seedThread(store, 'tenant-a', ['a0', 'a1', 'a2']);
          const b = await seedThread(store, 'tenant-b', ['b0', 'b1', 'b2']);
          await tamper.copyMessageData(store, a.messages[1]!.id, b.messages[1]!.id);
          const swapped = await expectCode(
            () => store.getMessage(b.messages[1]!.id),
            'DECRYPTION_FAILED',
          );
          expect(swapped.details).toMatchObject({ kind: 'message', id: b.messages[1]!.id });
          await expectCode(() => store.getChain(b.messages[2]!.id), 'DECRYPTION_FAILED');
          // Another row of the same tenant and thread: bound to its own id too.
          await tamper.copyMessageData(store, a.messages[0]!.id, a.messages[2]!.id);
          await expectCode(() => store.getMessage(a.messages[2]!.id), 'DECRYPTION_FAILED');

          await tamper.editMessageData(store, a.messages[1]!.id);
          await expectCode(() => store.getMessage(a.messages[1]!.id), 'DECRYPTION_FAILED');

          await tamper.setMessageData(store, a.messages[0]!.id, { text: 'injected' });
          const plain = await expectCode(
            () => store.getMessage(a.messages[0]!.id),
            'DECRYPTION_FAILED',
          );
          expect(plain.message).toContain('not sealed');

          const [m] = await store.addMemories([
            { agentId: 'a', entityId: 'person-1', content: { text: 'of person 1' } },
          ]);
          await store.addMemories([
            { agentId: 'a', entityId: 'person-2', content: { text: 'of person 2' } },
          ]);
          await tamper.setMemoryEntity(store, m!.id, 'person-2');
          await expectCode(() => store.getMemory(m!.id), 'DECRYPTION_FAILED');
          await expectCode(() => store.listMemories({ entityId: 'person-2' }), 'DECRYPTION_FAILED');
        });
      });
    }

    if (options.tamper) {
      const tamper = options.tamper;
      it('opens no row from what it opened before: read, then moved, edited or shredded, it is refused', async () => {
        await withStores(async (store, opened) => {
          const a = await seedThread(store, 'tenant-a', ['a0', 'a1', 'a2']);
          const b = await seedThread(store, 'tenant-b', ['b0', 'b1', 'b2']);
          const other = await options.reopen(store, encryption);
          opened.push(other);
          // Both stores have opened every row once (and keep what they opened).
          for (const s of [store, other])
            for (const x of [a, b])
              expect(await s.getChain(x.messages.at(-1)!.id)).toEqual(x.messages);
          await tamper.copyMessageData(store, a.messages[1]!.id, b.messages[1]!.id);
          await tamper.copyMessageData(store, a.messages[0]!.id, a.messages[2]!.id);
          for (const s of [store, other]) {
            await expectCode(() => s.getMessage(b.messages[1]!.id), 'DECRYPTION_FAILED');
            await expectCode(() => s.getMessage(a.messages[2]!.id), 'DECRYPTION_FAILED');
            // The rows they were copied from still open.
            expect(await s.getMessage(a.messages[1]!.id)).toEqual(a.messages[1]);
          }
          await tamper.editMessageData(store, b.messages[0]!.id);
          for (const s of [store, other])
            await expectCode(() => s.getMessage(b.messages[0]!.id), 'DECRYPTION_FAILED');
          // Shredded by one store: neither opens what it opened before.
          await store.destroyDataKeys({ resourceId: 'tenant-a' });
          for (const s of [store, other]) {
            const e = await expectCode(() => s.getMessage(a.messages[1]!.id), 'DECRYPTION_FAILED');
            expect(e.message).toContain('gone');
          }
        });
      });
    }

    it('keeps no opened values with plaintextCacheBytes: 0, and checks the option', async () => {
      const store = await options.create({ keyring, plaintextCacheBytes: 0 });
      try {
        const a = await seedThread(store, 'tenant-a', ['a0', 'a1']);
        for (let i = 0; i < 2; i++)
          expect(await store.getChain(a.messages[1]!.id)).toEqual(a.messages);
      } finally {
        if (options.destroy) await options.destroy(store);
        else await store.close();
      }
      for (const bad of [-1, 1.5, '1', Number.NaN])
        await expectCode(
          () => options.create({ keyring, plaintextCacheBytes: bad as number }),
          'INVALID_ARGUMENT',
        );
    });

    it('refuses a row written in plaintext around the store, by a store without the keyring', async () => {
      await withStores(async (store, opened) => {
        const a = await seedThread(store, 'tenant-a', ['a0']);
        const plain = await options.reopen(store, undefined);
        opened.push(plain);
        const [injected] = await plain.addMessages([
          { threadId: a.thread.id, parentId: a.messages[0]!.id, role: 'user', data: 'plain' },
        ]);
        const [memory] = await plain.addMemories([
          { agentId: 'a', entityId: 'e', content: { text: 'plain' } },
        ]);
        const e = await expectCode(() => store.getMessage(injected!.id), 'DECRYPTION_FAILED');
        expect(e.message).toContain('not sealed');
        await expectCode(() => store.getChain(injected!.id), 'DECRYPTION_FAILED');
        await expectCode(() => store.getMemory(memory!.id), 'DECRYPTION_FAILED');
        // The sealed rows are still fine.
        expect((await store.getMessage(a.messages[0]!.id))!.data).toEqual({ text: 'a0', n: 0 });
      });
    });

    it('refuses sealed rows to a store opened without the keyring, or with another', async () => {
      await withStores(async (store, opened) => {
        const a = await seedThread(store, 'tenant-a', ['a0', 'a1']);
        const [memory] = await store.addMemories([
          { agentId: 'a', entityId: 'e', content: { text: 'secret' } },
        ]);
        const plain = await options.reopen(store, undefined);
        const other = await options.reopen(store, { keyring: localKeyring(OTHER_SECRET) });
        const same = await options.reopen(store, { keyring: localKeyring(SECRET) });
        opened.push(plain, other, same);
        for (const s of [plain, other]) {
          const e = await expectCode(() => s.getChain(a.messages[1]!.id), 'DECRYPTION_FAILED');
          expect(e.message).toMatch(s === plain ? /open the store with encryption/ : /keyring/);
          await expectCode(() => s.getStateCommits(a.branch.id), 'DECRYPTION_FAILED');
          await expectCode(() => s.getMemory(memory!.id), 'DECRYPTION_FAILED');
          await expectCode(() => s.exportThread(a.thread.id), 'DECRYPTION_FAILED');
        }
        expect(await same.getChain(a.messages[1]!.id)).toEqual(a.messages);
        expect(await same.getMemory(memory!.id)).toEqual(memory);
      });
    });

    it('shreds a tenant: its rows no longer open, nor get a new key; others are untouched', async () => {
      await withStores(async (store, opened) => {
        const a = await seedThread(store, 'tenant-a', ['a0', 'a1']);
        const b = await seedThread(store, 'tenant-b', ['b0', 'b1']);
        const [ma, mb] = await store.addMemories([
          { agentId: 'a', entityId: 'person-a', content: { text: 'of a' } },
          { agentId: 'a', entityId: 'person-b', content: { text: 'of b' } },
        ]);
        expect(await store.destroyDataKeys({ resourceId: 'tenant-a', entityId: 'person-a' })).toBe(
          2,
        );
        const again = await options.reopen(store, encryption);
        opened.push(again);
        for (const s of [store, again]) {
          const e = await expectCode(() => s.getChain(a.messages[1]!.id), 'DECRYPTION_FAILED');
          expect(e.message).toContain('gone');
          await expectCode(() => s.getStateCommits(a.branch.id), 'DECRYPTION_FAILED');
          await expectCode(() => s.getMemory(ma!.id), 'DECRYPTION_FAILED');
          expect(await s.getChain(b.messages[1]!.id)).toEqual(b.messages);
          expect(await s.getMemory(mb!.id)).toEqual(mb);
        }
        // No new key for the shredded tenant: its late writes are refused.
        await expectCode(
          () =>
            store.addMessages([
              { threadId: a.thread.id, parentId: null, role: 'user', data: 'late' },
            ]),
          'FORGOTTEN',
        );
        await expectCode(
          () => store.addMemories([{ agentId: 'a', entityId: 'person-a', content: { text: 'x' } }]),
          'FORGOTTEN',
        );
        // forget still deletes what it can no longer open.
        const receipt = await store.forget({ resourceId: 'tenant-a', entityId: 'person-a' });
        expect(receipt.counts).toMatchObject({ threads: 1, messages: 2, memories: 1, dataKeys: 0 });
        expect(await store.getThread(a.thread.id)).toBeNull();
      });
    });

    it('destroys the data key of what forget deletes', async () => {
      await withStores(async (store) => {
        await seedThread(store, 'tenant-a', ['a0']);
        const b = await seedThread(store, 'tenant-b', ['b0']);
        const receipt = await store.forget({ resourceId: 'tenant-a' });
        expect(receipt.counts).toMatchObject({ threads: 1, messages: 1, dataKeys: 1 });
        expect(await store.getChain(b.messages[0]!.id)).toEqual(b.messages);
      });
    });

    it('wraps every data key again with a new key-encryption key, while the store is in use', async () => {
      await withStores(async (store, opened) => {
        const seeded = [];
        for (let i = 0; i < 5; i++) seeded.push(await seedThread(store, `tenant-${i}`, [`t${i}`]));
        const rotated = await options.reopen(store, {
          keyring: localKeyring(OTHER_SECRET, { previous: [SECRET] }),
        });
        opened.push(rotated);
        expect(await rotated.rotateDataKeys()).toEqual({ rewrapped: 5 });
        expect(await rotated.rotateDataKeys()).toEqual({ rewrapped: 0 });
        // Only the new key-encryption key opens them now.
        const onlyNew = await options.reopen(store, { keyring: localKeyring(OTHER_SECRET) });
        const onlyOld = await options.reopen(store, { keyring: localKeyring(SECRET) });
        opened.push(onlyNew, onlyOld);
        for (const s of seeded) {
          expect(await onlyNew.getChain(s.messages[0]!.id)).toEqual(s.messages);
          await expectCode(() => onlyOld.getChain(s.messages[0]!.id), 'DECRYPTION_FAILED');
        }
        await expectCode(() => onlyOld.rotateDataKeys(), 'DECRYPTION_FAILED');
      });
    });

    it('seals embeddings and searches sealed memories in the process, as a plain store does', async () => {
      // The same script on a plain store and on a sealed one: the same hits, in order.
      const script = async (store: Store) => {
        const rng = new Rng(29);
        const words = ['apple', 'pear', 'plum', 'fig', 'kiwi', 'lime'];
        const added = await store.addMemories(
          Array.from({ length: 60 }, (_, i) => ({
            id: `mem-${i}`,
            agentId: i % 2 ? 'a' : 'b',
            entityId: `person-${i % 4}`,
            ...(i % 3 === 0 ? {} : { worldId: `world-${i % 3}` }),
            content: { text: `${words[i % 6]} ${words[(i * 7) % 6]} number ${i}` },
            embedding: rng.vector(6),
          })),
        );
        const withEmbedding = await store.getMemory('mem-7');
        expect(withEmbedding!.embedding).toEqual(added[7]!.embedding);
        const query = rng.vector(6);
        const searches = [
          { vector: query, filter: { entityId: 'person-1' }, limit: 5 },
          { vector: query, filter: { agentId: 'a' }, limit: 7, threshold: 0.1 },
          { vector: query, limit: 10 },
          { text: 'apple plum', filter: { entityId: 'person-2' }, limit: 5 },
          { text: 'fig number', limit: 8 },
        ];
        const out = [];
        for (const q of searches) {
          const hits = await store.searchMemories(q);
          expect(hits.length).toBeGreaterThan(0);
          out.push(hits.map((h) => ({ id: h.memory.id, score: q.vector ? h.score : 0 })));
        }
        // A new embedding replaces the sealed one.
        await store.updateMemory('mem-7', { embedding: query });
        const [top] = await store.searchMemories({ vector: query, limit: 1 });
        expect(top!.memory.id).toBe('mem-7');
        expectClose(top!.memory.embedding, query);
        return out;
      };
      const plain = await withStores(script, null);
      const sealed = await withStores(script);
      expect(sealed.map((hits) => hits.map((h) => h.id))).toEqual(
        plain.map((hits) => hits.map((h) => h.id)),
      );
      for (const [i, hits] of sealed.entries())
        for (const [j, h] of hits.entries()) expect(h.score).toBeCloseTo(plain[i]![j]!.score, 5);
    });

    it('refuses a search whose filter selects more than searchScanLimit memories', async () => {
      await withStores(
        async (store) => {
          await store.addMemories(
            Array.from({ length: 4 }, (_, i) => ({
              agentId: 'a',
              entityId: `person-${i % 2}`,
              content: { text: `apple ${i}` },
              embedding: [1, i],
            })),
          );
          const refused = await expectCode(
            () => store.searchMemories({ text: 'apple' }),
            'INVALID_ARGUMENT',
          );
          expect(refused.details).toMatchObject({ selected: 4, searchScanLimit: 3 });
          await expectCode(
            () => store.searchMemories({ vector: [1, 0], filter: { agentId: 'a' } }),
            'INVALID_ARGUMENT',
          );
          // Narrowed to a tenant, it fits.
          const hits = await store.searchMemories({
            text: 'apple',
            filter: { entityId: 'person-1' },
          });
          expect(hits.map((h) => h.memory.content.text).sort()).toEqual(['apple 1', 'apple 3']);
          await expectCode(
            () => options.create({ keyring, searchScanLimit: 0 }),
            'INVALID_ARGUMENT',
          );
        },
        { keyring, searchScanLimit: 3 },
      );
    });

    it('refuses metadata paths, which it keeps no index of', async () => {
      await withStores(async (store) => {
        await store.addMemories([{ agentId: 'a', content: { text: 'apple pie' } }]);
        await expectCode(
          () => store.listMemories({ metadataPrefix: { namespace: ['a'] } }),
          'INVALID_ARGUMENT',
        );
        expect(await store.countMemories()).toBe(1);
      });
    });

    it('is off unless asked: a store without encryption has no data keys to destroy or rotate', async () => {
      await withStores(async (store) => {
        const thread = await store.createThread({ resourceId: 'r' });
        const [m] = await makeChain(store, thread.id, 1);
        await store.putTurn(turnOf(thread.id));
        await expectCode(() => store.destroyDataKeys({ resourceId: 'r' }), 'INVALID_ARGUMENT');
        await expectCode(() => store.rotateDataKeys(), 'INVALID_ARGUMENT');
        expect(await store.getMessage(m!.id)).toEqual(m);
        expect((await store.forget({ resourceId: 'r' })).counts.dataKeys).toBe(0);
      }, null);
    });
  });
}
