import { type CairnError, invalidArgument, isCairnError } from '@cairn/core';

/** Retries after a conflict when a `maxRetries` option is not given. */
export const DEFAULT_MAX_RETRIES = 50;

/**
 * The attempts in all for a `maxRetries` option (retries after the first attempt; default
 * 50). `INVALID_ARGUMENT` unless it is an integer >= 0.
 */
export function retryAttempts(maxRetries: number | undefined): number {
  const retries = maxRetries ?? DEFAULT_MAX_RETRIES;
  if (!Number.isSafeInteger(retries) || retries < 0) {
    throw invalidArgument(`maxRetries must be an integer >= 0, got ${String(retries)}`);
  }
  return retries + 1;
}

export interface RetryOptions {
  /** Attempts in all, the first included. */
  attempts: number;
  /**
   * Runs after each `CONFLICT`, before the next attempt: re-read what another writer
   * changed. `final` is true when no attempt is left. Throwing ends the retries with that
   * error (say here what gave up); returning on the final one rethrows the conflict.
   */
  onConflict?: (error: CairnError, at: { attempt: number; final: boolean }) => unknown;
}

/**
 * The engine's one retry loop: runs `attempt(0)`, and again with the next number after
 * each `CONFLICT` (any other error ends it at once), up to `attempts` times in all.
 *
 * @example
 * ```ts
 * const branch = await retryOnConflict(
 *   async () => (await store.getActiveBranch(threadId)) ??
 *     store.createBranch({ threadId, name: 'main', headMessageId: null }),
 *   { attempts: 5 },
 * );
 * ```
 */
export async function retryOnConflict<T>(
  attempt: (n: number) => Promise<T>,
  options: RetryOptions,
): Promise<T> {
  for (let n = 0; ; n++) {
    try {
      return await attempt(n);
    } catch (e) {
      if (!isCairnError(e, 'CONFLICT')) throw e;
      const final = n + 1 >= options.attempts;
      await options.onConflict?.(e, { attempt: n, final });
      if (final) throw e;
    }
  }
}
