import { isCairnError, setOwn } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { localKeyring } from '../../encryption.js';
import { createMemoryStore } from '../../memory-driver.js';
import type { Store } from '../../store.js';
import { type StoreConformanceOptions, withFreshStore } from '../context.js';
import { Rng } from '../helpers.js';

/** Fields that hold the store's clock: compared by shape. */
const CLOCK_KEYS = new Set([
  'createdAt',
  'updatedAt',
  'acquiredAt',
  'renewedAt',
  'expiresAt',
  'releasedAt',
]);

/** A result with clock values and generated ids masked, errors as code/message/details. */
function normalize(value: unknown, generated: Map<string, string>): unknown {
  if (Array.isArray(value)) return value.map((v) => normalize(v, generated));
  if (value instanceof Map)
    return [...value.entries()]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, v]) => [k, normalize(v, generated)]);
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (CLOCK_KEYS.has(k)) out[k] = typeof v === 'number' ? 'time' : v;
    // A store's own creation counter: only the order it gives is contract, not its values.
    else if (k === 'seq' && typeof v === 'number') out[k] = 'seq';
    else if (k === 'id' && typeof v === 'string' && v.startsWith('0')) {
      // A store-generated UUIDv7 (checkpoints): numbered in order of appearance.
      if (!generated.has(v)) generated.set(v, `generated-${generated.size}`);
      out[k] = generated.get(v);
    } else setOwn(out, k, normalize(v, generated));
  }
  return out;
}

async function outcome(
  call: () => Promise<unknown>,
  generated: Map<string, string>,
): Promise<unknown> {
  try {
    return { ok: normalize(await call(), generated) };
  } catch (e) {
    if (!isCairnError(e)) return { raw: String(e) };
    return {
      error: { code: e.code, message: e.message, details: normalize(e.details, generated) },
    };
  }
}

type Op = { name: string; run: (s: Store) => Promise<unknown> };

/** A random sequence of calls, good and bad, over a few threads, branches and memories. */
function script(seed: number, length: number, exactVectors: boolean): Op[] {
  const rng = new Rng(seed);
  const threads = ['t0', 't1', 't2', 'nope', ''];
  const messages: string[] = ['m-missing'];
  const branches: string[] = ['b-missing'];
  const memories: string[] = ['mem-missing'];
  const dims = 4;
  // Vectors of eighths: exact in float32, so every store keeps them exactly.
  const vector = () => Array.from({ length: dims }, () => (rng.int(17) - 8) / 8);
  const words = ['launch', 'orchard', 'river', 'the', 'when', 'budget', 'apples'];
  const text = () => Array.from({ length: 1 + rng.int(5) }, () => rng.pick(words)).join(' ');
  let n = 0;
  const ops: Op[] = [];
  for (let i = 0; i < length; i++) {
    const k = rng.int(16);
    const thread = rng.pick(threads);
    const id = `x${seed}-${n++}`;
    const words0 = text();
    switch (k) {
      case 0:
        ops.push({
          name: 'createThread',
          run: (s) => s.createThread({ id: thread || id, title: words0 }),
        });
        break;
      case 1: {
        const parentId = rng.next() < 0.2 ? null : rng.pick(messages);
        messages.push(id);
        const role = rng.pick(['user', 'assistant', '   ']);
        ops.push({
          name: 'addMessages',
          run: (s) =>
            s.addMessages([
              { id, threadId: thread, parentId, role, data: { text: words0 }, createdAt: i },
            ]),
        });
        break;
      }
      case 2: {
        const head = rng.pick(messages);
        const chain = rng.next() < 0.5 ? {} : { limit: 1 + rng.int(3) };
        ops.push({ name: 'getChain', run: (s) => s.getChain(head, chain) });
        break;
      }
      case 3: {
        branches.push(id);
        const name = rng.pick(['main', 'alt', 'x']);
        const head = rng.next() < 0.3 ? null : rng.pick(messages);
        const activate = rng.next() < 0.5;
        ops.push({
          name: 'createBranch',
          run: (s) => s.createBranch({ id, threadId: thread, name, headMessageId: head, activate }),
        });
        break;
      }
      case 4: {
        const b = rng.pick(branches);
        const expected = rng.next() < 0.3 ? null : rng.pick(messages);
        const next = rng.pick(messages);
        ops.push({ name: 'moveHead', run: (s) => s.moveHead(b, expected, next) });
        break;
      }
      case 5: {
        const b = rng.pick(branches);
        const v = rng.int(3);
        const m = rng.next() < 0.3 ? null : rng.pick(messages);
        ops.push({
          name: 'appendStateCommit',
          run: (s) => s.appendStateCommit({ branchId: b, messageId: m, update: { v: words0 } }, v),
        });
        break;
      }
      case 6: {
        const b = rng.pick(branches);
        const maxVersion = rng.int(3);
        ops.push({
          name: 'state reads',
          run: async (s) => [
            await s.getStateCommits(b),
            await s.getLatestStateCommit(b, { maxVersion }),
          ],
        });
        break;
      }
      case 7: {
        const name = rng.pick(['cp', 'cp2']);
        const m = rng.pick(messages);
        ops.push({
          name: 'saveCheckpoint',
          run: (s) => s.saveCheckpoint({ threadId: thread, name, messageId: m }),
        });
        break;
      }
      case 8:
        ops.push({
          name: 'branch reads',
          run: async (s) => [
            await s.listBranches(thread),
            await s.getActiveBranch(thread),
            await s.listCheckpoints(thread),
          ],
        });
        break;
      case 9: {
        memories.push(id);
        const withVector = rng.next() < 0.7;
        const e = withVector ? vector() : null;
        const t = text();
        const agentId = rng.pick(['a', 'b']);
        ops.push({
          name: 'addMemories',
          run: (s) =>
            s.addMemories([{ id, agentId, content: { text: t }, embedding: e, createdAt: i }]),
        });
        break;
      }
      case 10: {
        const ids = rng.sample(memories, 2);
        if (rng.next() < 0.3) ids.push(42 as unknown as string);
        ops.push({ name: 'deleteMemories', run: (s) => s.deleteMemories(ids) });
        break;
      }
      case 11: {
        const q = vector();
        const limit = 1 + rng.int(5);
        ops.push({
          name: 'vector search',
          run: async (s) => {
            const hits = await s.searchMemories({ vector: q, limit, filter: { agentId: 'a' } });
            return exactVectors ? hits.map((h) => [h.memory.id, h.score]) : hits.length;
          },
        });
        break;
      }
      case 12: {
        const q = text();
        ops.push({
          name: 'keyword search',
          // Relevance differs between full-text engines: compare which memories match.
          run: async (s) =>
            (await s.searchMemories({ text: q, limit: 1000 })).map((h) => h.memory.id).sort(),
        });
        break;
      }
      case 13:
        ops.push({
          name: 'memory reads',
          run: async (s) => [
            await s.listMemories({}, { order: 'oldest' }),
            await s.countMemories({ agentId: 'a' }),
          ],
        });
        break;
      case 14: {
        const key = rng.pick(['l1', 'l2']);
        const owner = rng.pick(['o1', 'o2']);
        const which = rng.int(3);
        ops.push({
          name: 'lease',
          run: (s) =>
            which === 0
              ? s.acquireLease({ key, owner, ttlMs: 600_000 })
              : which === 1
                ? s.renewLease(key, owner, 600_000)
                : s.releaseLease(key, owner),
        });
        break;
      }
      default: {
        const remove = rng.next() < 0.2;
        ops.push({
          name: 'threads',
          run: async (s) => [
            (await s.listThreads({ limit: 2 })).items,
            remove ? await s.deleteThread(thread) : null,
          ],
        });
      }
    }
  }
  return ops;
}

/**
 * The differential spec: the same random sequence of calls (good and bad) on the
 * in-memory reference store and on the store under test, every result compared exactly
 * (values, error codes, messages and details; clock values and generated ids masked).
 */
const REFERENCE_SECRET = 'the reference store’s secret, 32 bytes or more';

export function describeDifferential(options: StoreConformanceOptions): void {
  describe('differential: the same calls as the reference store', () => {
    for (const seed of [1, 2, 3]) {
      it(`answers a random script (seed ${seed}) exactly as the reference does`, async () => {
        await withFreshStore(options, async (store) => {
          // Sealed like the store under test, so both refuse what needs plaintext alike.
          const reference = createMemoryStore(
            options.encrypted ? { encryption: { keyring: localKeyring(REFERENCE_SECRET) } } : {},
          );
          const ops = script(seed, 250, store.capabilities.vectorSearch === 'exact');
          const ids = [new Map<string, string>(), new Map<string, string>()] as const;
          for (const [i, op] of ops.entries()) {
            const expected = await outcome(() => op.run(reference), ids[0]);
            const actual = await outcome(() => op.run(store), ids[1]);
            expect(actual, `call ${i}: ${op.name}`).toEqual(expected);
          }
          await reference.close();
        });
      });
    }
  });
}
