import { canSee, isCairnError, type Memory, type Viewer } from '@cairn/core';
import type { Store } from '@cairn/store';
import { Rng } from '@cairn/store/testing';
import { afterEach } from 'vitest';
import type { Embedder } from '../src/index.js';
import { hashingEmbedder } from '../src/index.js';

/** Wraps an embedder, counting the texts it was asked to embed. */
export function countingEmbedder(inner: Embedder = hashingEmbedder({ dimensions: 64 })) {
  const calls: string[][] = [];
  const embedder: Embedder & { calls: string[][]; texts: () => number } = {
    id: inner.id,
    dimensions: inner.dimensions,
    calls,
    texts: () => calls.reduce((n, c) => n + c.length, 0),
    embed: (texts, o) => {
      calls.push([...texts]);
      return inner.embed(texts, o);
    },
  };
  return embedder;
}

/**
 * A toy "semantic" embedder: words map to concepts through a synonym table, so texts
 * about the same concept are close even when they share no word.
 */
export function conceptEmbedder(): Embedder {
  const concepts: Record<string, string> = {
    car: 'vehicle',
    automobile: 'vehicle',
    vehicle: 'vehicle',
    drive: 'vehicle',
    sedan: 'vehicle',
    dog: 'pet',
    puppy: 'pet',
    canine: 'pet',
    cat: 'pet',
    kitten: 'pet',
    museum: 'culture',
    gallery: 'culture',
    painting: 'culture',
    closed: 'closing',
    shut: 'closing',
    mondays: 'week',
    monday: 'week',
  };
  const names = [...new Set(Object.values(concepts)), 'other'];
  return {
    id: 'test-concepts',
    dimensions: names.length,
    async embed(texts) {
      return texts.map((t) => {
        const v = new Array<number>(names.length).fill(0);
        for (const w of t.toLowerCase().match(/[a-z]+/g) ?? [])
          v[names.indexOf(concepts[w] ?? 'other')]! += concepts[w] ? 1 : 0.05;
        const n = Math.hypot(...v) || 1;
        return v.map((x) => x / n);
      });
    },
  };
}

/** An embedder that fails on the call number `failOn` (1-based) with `error`. */
export function failingEmbedder(
  failOn: number,
  error: unknown = new Error('model server down'),
  inner: Embedder = hashingEmbedder({ dimensions: 64 }),
) {
  let calls = 0;
  return {
    id: inner.id,
    dimensions: inner.dimensions,
    async embed(texts: string[]) {
      calls++;
      if (calls === failOn) throw error;
      return inner.embed(texts);
    },
  } satisfies Embedder;
}

/** A seeded PRNG, so a failing property run can be replayed. */
export const rng = (seed: number) => new Rng(seed);

export async function rejects(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected a rejection');
}

export function leaks(viewer: Viewer, memories: Memory[]): Memory[] {
  return memories.filter((m) => !canSee(viewer, m));
}

export { isCairnError };

const SYLLABLES = ['ka', 'bo', 'ri', 'ton', 'mel', 'zu', 'fa', 'dor', 'li', 'quen', 'sa', 'vik'];
const CITIES = ['Paris', 'Berlin', 'Oslo', 'Lisbon', 'Kyoto', 'Lima', 'Quito', 'Accra', 'Perth'];

/** A fact with its dated revisions: where someone lived, from `validFrom` on. */
export interface FactScript {
  name: string;
  revisions: Array<{ text: string; validFrom: number }>;
}

/**
 * `n` people (distinct made-up names, up to 1,728) each moving `revisions - 1` times: a
 * revision every 30 to 89 days from 2020 on, seeded, so every run writes the same script.
 */
export function factScript(n: number, revisions: number, seed = 28): FactScript[] {
  const r = rng(seed);
  const day = 86_400_000;
  return Array.from({ length: n }, (_, i) => {
    const name = [i % 12, Math.floor(i / 12) % 12, Math.floor(i / 144) % 12]
      .map((k) => SYLLABLES[k]!)
      .join('');
    const proper = name[0]!.toUpperCase() + name.slice(1);
    let at = Date.UTC(2020, 0, 1) + r.int(365) * day;
    return {
      name: proper,
      revisions: Array.from({ length: revisions }, (_, k) => {
        if (k > 0) at += (30 + r.int(60)) * day;
        return { text: `${proper} lives in ${CITIES[(i + k) % CITIES.length]}`, validFrom: at };
      }),
    };
  });
}

/**
 * Inside a `describe`: a new store from `create` per call, each closed after its test, and
 * `keep(...stores)` for stores made otherwise that must be closed the same way.
 */
export function freshStores(create: () => Promise<Store>) {
  const open: Store[] = [];
  afterEach(async () => {
    while (open.length) await open.pop()!.close();
  });
  const newStore = async () => {
    const s = await create();
    open.push(s);
    return s;
  };
  return Object.assign(newStore, { keep: (...stores: Store[]) => open.push(...stores) });
}
