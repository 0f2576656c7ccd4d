import { createHash } from 'node:crypto';
import {
  type CairnError,
  type CairnErrorCode,
  isCairnError,
  type JsonValue,
  type Message,
  newId,
  type Thread,
  type Turn,
} from '@cairn/core';
import { expect } from 'vitest';
import type { NewThread, Page, Store } from '../store.js';

/**
 * A tiny seeded PRNG (mulberry32): the same seed gives the same data on every run, so a
 * failure reproduces.
 */
export class Rng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  /** A vector of `dims` floats in [-1, 1). */
  vector(dims: number): number[] {
    return Array.from({ length: dims }, () => this.next() * 2 - 1);
  }

  /** `k` distinct items of `items`, in random order. */
  sample<T>(items: readonly T[], k: number): T[] {
    const copy = [...items];
    for (let i = copy.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [copy[i], copy[j]] = [copy[j]!, copy[i]!];
    }
    return copy.slice(0, k);
  }
}

/**
 * Awaits `call` and checks that it failed with a CairnError of `code` (and a message
 * that says something). A call that throws synchronously counts as failing too.
 */
export async function expectCode(
  call: () => Promise<unknown>,
  code: CairnErrorCode,
): Promise<CairnError> {
  let error: unknown;
  let failed = false;
  try {
    await call();
  } catch (e) {
    error = e;
    failed = true;
  }
  if (!failed) expect.fail(`expected a CairnError with code ${code}, but the call succeeded`);
  if (!isCairnError(error)) {
    expect.fail(
      `expected a CairnError with code ${code}, got ${error instanceof Error ? error.stack : String(error)}`,
    );
  }
  expect(error.code, `${error.code}: ${error.message}`).toBe(code);
  expect(error.message.length).toBeGreaterThan(0);
  return error;
}

/** The reference cosine similarity, written independently of any store. */
export function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}

/** SHA-256 of a text, hex: the content hash a store computes when none is given. */
export function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * Values that are not plain JSON, each made fresh (cycles and class instances cannot be
 * shared between tests safely).
 */
export const NON_JSON: ReadonlyArray<readonly [string, () => unknown]> = [
  ['undefined inside an array', () => ({ list: [1, undefined, 3] })],
  ['undefined as a value', () => ({ a: undefined })],
  ['NaN', () => ({ n: Number.NaN })],
  ['Infinity', () => ({ n: Number.POSITIVE_INFINITY })],
  ['a BigInt', () => ({ n: 10n })],
  [
    'a class instance',
    () => ({
      p: new (class Point {
        x = 1;
        y = 2;
      })(),
    }),
  ],
  ['a Date', () => ({ when: new Date(0) })],
  ['a Map', () => ({ m: new Map([['a', 1]]) })],
  ['a function', () => ({ f: () => 1 })],
  ['a symbol', () => ({ s: Symbol('s') })],
  [
    'a cycle',
    () => {
      const o: Record<string, unknown> = { a: 1 };
      o.self = o;
      return o;
    },
  ],
  [
    'a cycle through an array',
    () => {
      const list: unknown[] = [1];
      list.push({ back: list });
      return { list };
    },
  ],
];

/** JSON values of every shape that must come back exactly as written. */
export const JSON_SAMPLES: ReadonlyArray<readonly [string, JsonValue]> = [
  ['a string', 'hello'],
  ['an empty string', ''],
  ['a number', 42.5],
  ['a negative number', -7],
  ['true', true],
  ['false', false],
  ['null', null],
  ['an array', [1, 'two', null, [3], { four: 4 }]],
  ['an empty array', []],
  ['an empty object', {}],
  [
    'a nested object',
    { text: 'hi', parts: [{ type: 'text', text: 'a' }], meta: { n: 1, ok: false, none: null } },
  ],
  ['unicode and quotes', { s: 'héllo — 你好 🎉 "quoted" \\ back\nslash\u0001' }],
  ['a large text', 'x'.repeat(100_000)],
];

export const MAX_NAME = 200;
export const LONG_NAME = 'n'.repeat(MAX_NAME + 1);
export const LONGEST_NAME = 'n'.repeat(MAX_NAME);

/** A thread of its own, with a resource id nobody else uses. */
export async function makeThread(store: Store, input: NewThread = {}): Promise<Thread> {
  return store.createThread({ resourceId: `res-${newId()}`, ...input });
}

/** A chain of `n` messages appended in one batch after `parentId` (a new root when null). */
export async function makeChain(
  store: Store,
  threadId: string,
  n: number,
  parentId: string | null = null,
  label = 'm',
): Promise<Message[]> {
  const ids = Array.from({ length: n }, () => newId());
  return store.addMessages(
    ids.map((id, i) => ({
      id,
      threadId,
      parentId: i === 0 ? parentId : ids[i - 1]!,
      role: i % 2 === 0 ? 'user' : 'assistant',
      data: { text: `${label}${i}` },
    })),
  );
}

/** Every item of a paged listing, from the first page to the last: `list` reads one page. */
export async function allPages<T>(list: (cursor: string | null) => Promise<Page<T>>): Promise<T[]> {
  const items: T[] = [];
  let cursor: string | null = null;
  do {
    const page: Page<T> = await list(cursor);
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor !== null);
  return items;
}

/** Resolves when `predicate` holds, polling; fails after `timeoutMs`. */
export async function waitFor(
  predicate: () => boolean,
  what: string,
  timeoutMs = 5_000,
): Promise<void> {
  const start = Date.now();
  while (!predicate()) {
    if (Date.now() - start > timeoutMs) expect.fail(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A timestamp is a whole number of milliseconds close to now (catches seconds or 0). */
export function expectTimestamp(value: unknown): void {
  expect(typeof value).toBe('number');
  expect(Number.isInteger(value)).toBe(true);
  expect(Math.abs((value as number) - Date.now())).toBeLessThan(10 * 60_000);
}

/** A turn of `threadId` with every field set; override what the test is about. */
export function turnOf(threadId: string, overrides: Partial<Turn> = {}): Turn {
  return {
    id: newId(),
    threadId,
    messageId: null,
    source: 'test',
    userId: null,
    status: 'finished',
    state: {},
    steps: [],
    startedAt: Date.now(),
    finishedAt: null,
    ...overrides,
  };
}

/** Two lists of numbers of equal length, equal to `digits` decimals (float32 storage is fine). */
export function expectClose(
  actual: readonly number[] | null | undefined,
  expected: readonly number[],
  digits = 6,
): void {
  expect(actual).toHaveLength(expected.length);
  for (let i = 0; i < expected.length; i++) expect(actual![i]).toBeCloseTo(expected[i]!, digits);
}

/** The policy `writeSweepable`'s threads are swept with, and what it frees of each. */
export const SWEEPABLE_POLICY = { keepStateCommits: 2, branchTtlMs: 1, turnTtlMs: 1 };
export const SWEEPABLE_FREED = { branches: 1, stateCommits: 10, turns: 1 };

/**
 * `count` threads a sweep under `SWEEPABLE_POLICY` frees `SWEEPABLE_FREED` of, each: 12
 * state commits on its main branch (a snapshot at versions 5 and 10, so versions 1 to 9
 * go), a side branch nobody visits with a commit of its own, a finished turn. Their ids.
 */
export async function writeSweepable(store: Store, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const { thread, branch } = await store.createThreadWithBranch({});
    const ms = await makeChain(store, thread.id, 4, null);
    await store.moveHead(branch.id, null, ms.at(-1)!.id);
    const side = await store.createBranch({
      threadId: thread.id,
      name: 'side',
      headMessageId: ms[1]!.id,
    });
    for (let v = 0; v < 12; v++)
      await store.appendStateCommit(
        {
          branchId: branch.id,
          messageId: ms[v % 4]!.id,
          update: { n: v },
          snapshot: v % 5 === 4 ? { n: v } : null,
        },
        v,
      );
    await store.appendStateCommit({ branchId: side.id, messageId: ms[1]!.id, update: {} }, 0);
    await store.putTurn(turnOf(thread.id, { status: 'finished', startedAt: Date.now() - 1000 }));
    ids.push(thread.id);
  }
  // Everything older than the policy's TTLs.
  await sleep(5);
  return ids;
}
