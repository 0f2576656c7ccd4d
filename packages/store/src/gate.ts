/**
 * A readers-writer gate: any number of `shared` runs at once, an `exclusive` run alone.
 * Waiting exclusive runs go before later shared ones, so a transaction is not starved.
 */
export class Gate {
  #active = 0;
  #exclusive = false;
  #queue: Array<{ exclusive: boolean; start: () => void }> = [];

  shared<T>(fn: () => Promise<T>): Promise<T> {
    return this.#run(false, fn);
  }

  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.#run(true, fn);
  }

  async #run<T>(exclusive: boolean, fn: () => Promise<T>): Promise<T> {
    if (this.#canStart(exclusive) && this.#queue.length === 0) this.#enter(exclusive);
    else await new Promise<void>((start) => this.#queue.push({ exclusive, start }));
    try {
      return await fn();
    } finally {
      this.#active--;
      this.#exclusive = false;
      this.#drain();
    }
  }

  #canStart(exclusive: boolean): boolean {
    return exclusive ? this.#active === 0 : !this.#exclusive;
  }

  #enter(exclusive: boolean): void {
    this.#active++;
    this.#exclusive = exclusive;
  }

  #drain(): void {
    while (this.#queue.length > 0) {
      const next = this.#queue[0]!;
      if (!this.#canStart(next.exclusive)) return;
      this.#queue.shift();
      this.#enter(next.exclusive);
      next.start();
      if (next.exclusive) return;
    }
  }
}
