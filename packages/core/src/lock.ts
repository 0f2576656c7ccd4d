/**
 * Runs async functions one at a time, in call order. A failure does not block the
 * functions queued after it.
 *
 * @example
 * ```ts
 * const lock = new AsyncLock();
 * await Promise.all([lock.run(a), lock.run(b)]); // b starts after a settles
 * ```
 */
export class AsyncLock {
  #tail: Promise<unknown> = Promise.resolve();

  run<T>(fn: () => T | Promise<T>): Promise<T> {
    const result = this.#tail.then(fn);
    this.#tail = result.catch(() => undefined);
    return result;
  }
}
