import type { EntryChange, EntryListener, StoreChange, StoreListener } from './store.js';

/** A change to an entry, as the front door collects it beside a thread's changes. */
export interface EntryNotice {
  kind: 'entry';
  entry: EntryChange;
}

/** What a write session tells listeners about: a thread's change or an entry's. */
export type Change = StoreChange | EntryNotice;

/** Calls each listener of a set; one that throws does not stop the others. */
function callEach<T>(set: Set<(value: T) => void> | undefined, value: T): void {
  if (!set) return;
  for (const listener of [...set]) {
    try {
      listener(value);
    } catch (e) {
      queueMicrotask(() => {
        throw e;
      });
    }
  }
}

/** Adds `listener` under `key`; returns the function that removes it (and an emptied set). */
function addTo<L>(map: Map<string, Set<L>>, key: string, listener: L): () => void {
  let set = map.get(key);
  if (!set) {
    set = new Set();
    map.set(key, set);
  }
  set.add(listener);
  return () => {
    set.delete(listener);
    if (set.size === 0 && map.get(key) === set) map.delete(key);
  };
}

/**
 * In-process change listeners, by thread and by entry collection, for stores whose
 * notifications stay in the process. A listener that throws does not stop the others.
 */
export class ChangeEmitter {
  #threads = new Map<string, Set<StoreListener>>();
  #collections = new Map<string, Set<EntryListener>>();

  subscribe(threadId: string, listener: StoreListener): () => void {
    return addTo(this.#threads, threadId, listener);
  }

  subscribeEntries(collection: string, listener: EntryListener): () => void {
    return addTo(this.#collections, collection, listener);
  }

  emit(change: Change): void {
    if (change.kind === 'entry')
      callEach(this.#collections.get(change.entry.collection), change.entry);
    else callEach(this.#threads.get(change.threadId), change);
  }

  clear(): void {
    this.#threads.clear();
    this.#collections.clear();
  }
}
