import type {
  EntryChange,
  EntryListener,
  ForgetListener,
  ForgetNotice,
  StoreChange,
  StoreListener,
} from './store.js';

/** A change to an entry, as the front door collects it beside a thread's changes. */
export interface EntryNotice {
  kind: 'entry';
  entry: EntryChange;
}

/** A lease released: whoever waits to acquire it may try again. */
export interface LeaseNotice {
  kind: 'lease';
  key: string;
}

/** A forget has deleted a subject's data (or destroyed its data keys). */
export interface ForgetChange {
  kind: 'forget';
  notice: ForgetNotice;
}

/** What a write session tells listeners about: a thread's change, an entry's, a lease's, a forget. */
export type Change = StoreChange | EntryNotice | LeaseNotice | ForgetChange;

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
  #leases = new Map<string, Set<() => void>>();
  #forgets = new Set<ForgetListener>();

  subscribe(threadId: string, listener: StoreListener): () => void {
    return addTo(this.#threads, threadId, listener);
  }

  subscribeEntries(collection: string, listener: EntryListener): () => void {
    return addTo(this.#collections, collection, listener);
  }

  /** Hears the lease `key` released (in this process, or any where notifications reach). */
  onLeaseReleased(key: string, listener: () => void): () => void {
    return addTo(this.#leases, key, listener);
  }

  /** Hears every forget (in this process, or any where notifications reach). */
  subscribeForgets(listener: ForgetListener): () => void {
    this.#forgets.add(listener);
    return () => {
      this.#forgets.delete(listener);
    };
  }

  emit(change: Change): void {
    if (change.kind === 'forget') callEach(this.#forgets, change.notice);
    else if (change.kind === 'entry')
      callEach(this.#collections.get(change.entry.collection), change.entry);
    else if (change.kind === 'lease') callEach(this.#leases.get(change.key), undefined);
    else callEach(this.#threads.get(change.threadId), change);
  }

  clear(): void {
    this.#threads.clear();
    this.#collections.clear();
    this.#leases.clear();
    this.#forgets.clear();
  }
}
