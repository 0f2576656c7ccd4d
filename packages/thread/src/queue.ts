import { AsyncLock } from '@cairn/core';

/**
 * The engine's one write queue: an `AsyncLock` (tasks run one at a time, in call order,
 * and a failed task does not block the ones after it) that can also coalesce refreshes.
 *
 * @example
 * ```ts
 * const queue = new SerialQueue();
 * const saved = queue.run(() => store.addMessages(batch));
 * queue.runOnce('refresh-head', () => refreshHead()); // at most one waiting
 * ```
 */
export class SerialQueue extends AsyncLock {
  #waiting = new Set<string>();

  /**
   * Queues `task` unless one under the same key is still waiting to start: a refresh
   * asked for ten times while a write runs happens once, after it. Never rejects.
   */
  runOnce(key: string, task: () => Promise<unknown>): Promise<void> {
    if (this.#waiting.has(key)) return Promise.resolve();
    this.#waiting.add(key);
    return this.run(() => {
      this.#waiting.delete(key);
      return task();
    }).then(
      () => undefined,
      () => undefined,
    );
  }

  /** Resolves once everything queued so far has run. */
  async idle(): Promise<void> {
    await this.run(() => undefined);
  }
}
