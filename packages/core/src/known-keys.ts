import { invalidArgument } from './errors.js';

/**
 * The one rule for every public options, filter and input object of Cairn: a key the
 * object does not take is `INVALID_ARGUMENT` naming it, never ignored — a misspelled
 * `veiwer` or a misplaced `viewer` must not widen what a call reads, and a misspelled
 * `threadID` must not open a new thread. The message says where a key that belongs
 * elsewhere goes (`elsewhere`: the key, and the sentence that says where), or which
 * known key a near-miss spelling meant; `details` holds `key` and, for a near miss,
 * `suggestion`. Keys whose value is `undefined` count too: the object names them. A value
 * that is not an object (null, an array, a string) is `INVALID_ARGUMENT` too.
 *
 * @example
 * ```ts
 * checkKeys(search, 'searchMemories', ['vector', 'text', 'filter', 'limit', 'threshold'], {
 *   viewer: 'the viewer goes in filter.viewer',
 * });
 * // searchMemories: unknown key "viewer"; the viewer goes in filter.viewer
 * // searchMemories: unknown key "limt" (did you mean "limit"?)
 * ```
 */
export function checkKeys(
  value: unknown,
  label: string,
  known: readonly string[],
  elsewhere: Readonly<Record<string, string>> = {},
): asserts value is object {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    const got = value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
    throw invalidArgument(`${label} must be an object, got ${got}`);
  }
  for (const key in value) {
    if (!known.includes(key) && Object.hasOwn(value, key))
      throw unknownKey(key, label, known, elsewhere);
  }
}

/**
 * The keys of `T`, listed once: a compile error when the list leaves a key of `T` out,
 * so that an option added to an interface cannot be refused by its own check.
 *
 * @example
 * ```ts
 * const LOCK_KEYS = keysOf<LockOptions>()(['timeoutMs']);
 * ```
 */
export function keysOf<T extends object>() {
  return <const L extends readonly (keyof T & string)[]>(
    keys: L &
      ([Exclude<keyof T & string, L[number]>] extends [never]
        ? unknown
        : { missing: Exclude<keyof T & string, L[number]> }),
  ): L => keys;
}

function unknownKey(
  key: string,
  label: string,
  known: readonly string[],
  elsewhere: Readonly<Record<string, string>>,
) {
  const at = `${label}: unknown key ${JSON.stringify(key)}`;
  const where = Object.hasOwn(elsewhere, key) ? elsewhere[key] : undefined;
  if (where !== undefined) return invalidArgument(`${at}; ${where}`, { key });
  const suggestion = nearest(key, [...known, ...Object.keys(elsewhere)]);
  if (suggestion !== undefined) {
    const also = Object.hasOwn(elsewhere, suggestion) ? `; ${elsewhere[suggestion]}` : '';
    return invalidArgument(`${at} (did you mean ${JSON.stringify(suggestion)}?)${also}`, {
      key,
      suggestion,
    });
  }
  const expected = known.length > 0 ? `; expected one of ${known.join(', ')}` : '';
  return invalidArgument(`${at}${expected}`, { key });
}

/**
 * The candidate that `key` most likely misspells: equal but for case, the start of it
 * (3 characters or more: `err` for `error`), or within an edit distance of a third of
 * the longer name (at least 1). Undefined when none is that near.
 */
function nearest(key: string, candidates: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const c of candidates) {
    const d = editDistance(lower, c.toLowerCase());
    const limit = Math.max(1, Math.floor(Math.max(key.length, c.length) / 3));
    const start = key.length >= 3 && c.toLowerCase().startsWith(lower);
    if ((d <= limit || start) && d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

/** Optimal string alignment distance: insertions, deletions, substitutions, swaps of neighbours. */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length)]);
  for (let j = 1; j <= b.length; j++) rows[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    const row = rows[i]!;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      row[j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}
