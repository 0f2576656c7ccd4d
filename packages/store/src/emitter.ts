import type { StoreChange, StoreListener } from './store.js';

/**
 * In-process change listeners by thread, for stores whose notifications stay in the
 * process. A listener that throws does not stop the others.
 */
export class ChangeEmitter {
  #listeners = new Map<string, Set<StoreListener>>();

  subscribe(threadId: string, listener: StoreListener): () => void {
    let set = this.#listeners.get(threadId);
    if (!set) {
      set = new Set();
      this.#listeners.set(threadId, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.#listeners.get(threadId) === set) this.#listeners.delete(threadId);
    };
  }

  emit(change: StoreChange): void {
    const set = this.#listeners.get(change.threadId);
    if (!set) return;
    for (const listener of [...set]) {
      try {
        listener(change);
      } catch (e) {
        queueMicrotask(() => {
          throw e;
        });
      }
    }
  }

  clear(): void {
    this.#listeners.clear();
  }
}
