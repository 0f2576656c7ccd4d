/**
 * The name `rewind` and `btw` give a new branch made from `current`: `${current}-v${n + 1}`
 * where n counts the branches named `current` or starting with `current-v`
 * (main -> main-v2 -> main-v3; rewinding on main-v2 gives main-v2-v2).
 *
 * @example
 * ```ts
 * forkBranchName('main', ['main', 'main-v2']); // 'main-v3'
 * ```
 */
export function forkBranchName(current: string, existing: readonly string[]): string {
  return `${current}-v${forkBranchNumber(current, existing)}`;
}

/** The number n + 1 of {@link forkBranchName}. */
export function forkBranchNumber(current: string, existing: readonly string[]): number {
  const prefix = `${current}-v`;
  let n = 0;
  for (const name of existing) if (name === current || name.startsWith(prefix)) n++;
  return n + 1;
}
