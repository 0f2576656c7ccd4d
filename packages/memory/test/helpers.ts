import { canSee, isCairnError, type Memory, type Viewer } from '@cairn/core';
import { Rng } from '@cairn/store/testing';
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
