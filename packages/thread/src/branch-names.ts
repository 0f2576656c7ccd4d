import { MAX_NAME_LENGTH } from '@cairn/core';

/** A fork number at the end of a branch name: `-v2`, `-v17`. */
const FORK_NUMBER = /-v\d+$/;

/**
 * The name of a new branch forked from the branch `current` (by `rewind`, `btw`, `restore`,
 * the integrations and the inspector), given the thread's branch names: `${root}-v${n}`,
 * where `root` is `current` without its fork numbers (`main-v2` and `main-v2-v2` have the
 * root `main`) and n is one more than the highest `${root}-v<n>` there is, at least 2. So
 * main -> main-v2 -> main-v3, forking main-v2 once main-v3 exists gives main-v4, and a name
 * stays as long as its root however many forks deep. A root too long for the number is cut
 * so the name fits in `MAX_NAME_LENGTH` characters; a name already taken is skipped.
 *
 * @example
 * ```ts
 * forkBranchName('main', ['main', 'main-v2']); // 'main-v3'
 * forkBranchName('main-v2', ['main', 'main-v2', 'main-v3']); // 'main-v4'
 * ```
 */
export function forkBranchName(current: string, existing: Iterable<string>): string {
  let root = current;
  for (let m = FORK_NUMBER.exec(root); m !== null && m.index > 0; m = FORK_NUMBER.exec(root)) {
    root = root.slice(0, m.index);
  }
  const taken = new Set(existing);
  const prefix = `${root}-v`;
  let highest = 1;
  for (const name of taken) {
    if (!name.startsWith(prefix)) continue;
    const digits = name.slice(prefix.length);
    // Past 15 digits, +1 could land on a number that is not exact.
    if (/^\d{1,15}$/.test(digits)) highest = Math.max(highest, Number(digits));
  }
  for (let n = highest + 1; ; n++) {
    const suffix = `-v${n}`;
    let cut = Math.min(root.length, MAX_NAME_LENGTH - suffix.length);
    // Never between the two halves of a surrogate pair: a lone half is not storable text.
    if (cut < root.length && /[\uD800-\uDBFF]/.test(root[cut - 1]!)) cut--;
    const name = root.slice(0, cut) + suffix;
    if (!taken.has(name)) return name;
  }
}
