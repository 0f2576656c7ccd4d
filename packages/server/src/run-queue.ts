import { isCairnError } from '@cairn/core';
import type { Store } from '@cairn/store';
import { COLLECTIONS, Collection, type Versioned } from './collection.js';

/**
 * A run that has not finished: waiting for its turn, or claimed by a worker. One entry of
 * the store per run, grouped by thread; the entry goes when the run ends.
 */
export interface QueueItem {
  run_id: string;
  thread_id: string;
  /** Creation order (ms); the runs of one thread go strictly in this order. */
  created_at: number;
  /** Not before (ms): `after_seconds`. */
  available_at: number;
  /** The worker running it and until when its claim holds unless renewed. */
  claim: { owner: string; expires_at: number } | null;
  /** How many times a worker has claimed it (a dead worker's run is claimed again). */
  attempt: number;
  /** Set by a cancel: the worker running it stops, keeping (`interrupt`) or undoing (`rollback`) its work. */
  cancel: 'interrupt' | 'rollback' | null;
  /**
   * The thread's checkpoint when the run's graph first started (null: the thread had none),
   * recorded before it writes anything, so a rollback undoes every attempt's writes; null
   * until then.
   */
  began: { checkpoint_id: string | null } | null;
}

export type ClaimedItem = Versioned<QueueItem>;

/**
 * What a worker should try to claim, in order, and when to look again if nothing is
 * claimable: the rule of the queue, decided from the items alone.
 *
 * A thread's runs go in creation order: its candidate is always its oldest item. A thread
 * whose oldest item is claimed and live is busy (look again when that claim expires); one
 * whose claim expired lost its worker, and the item is offered again (a retry). An oldest
 * item not yet available holds the thread until it is.
 */
export function planClaim(
  items: Array<Versioned<QueueItem>>,
  now: number,
): { candidates: Array<Versioned<QueueItem>>; wakeAt: number | null } {
  const oldest = new Map<string, Versioned<QueueItem>>();
  for (const item of items) {
    const seen = oldest.get(item.value.thread_id);
    if (!seen || order(item.value, seen.value) < 0) oldest.set(item.value.thread_id, item);
  }
  const candidates: Array<Versioned<QueueItem>> = [];
  let wakeAt: number | null = null;
  const later = (t: number) => {
    wakeAt = wakeAt === null ? t : Math.min(wakeAt, t);
  };
  for (const item of oldest.values()) {
    const { claim, available_at } = item.value;
    if (claim && claim.expires_at > now) later(claim.expires_at);
    else if (!claim && available_at > now) later(available_at);
    else candidates.push(item);
  }
  candidates.sort((a, b) => order(a.value, b.value));
  return { candidates, wakeAt };
}

const order = (a: QueueItem, b: QueueItem) =>
  a.created_at - b.created_at || (a.run_id < b.run_id ? -1 : a.run_id > b.run_id ? 1 : 0);

/**
 * The run queue in the store: enqueue, claim (compare-and-set on the item, so one worker
 * wins, and one run per thread), renew, cancel, finish; and a wait for work that wakes on
 * the store's notification of a queue change, or at the next known deadline.
 */
export class RunQueue {
  readonly items: Collection<QueueItem>;

  constructor(
    readonly store: Store,
    readonly leaseMs: number,
  ) {
    this.items = new Collection<QueueItem>(store, COLLECTIONS.queue);
  }

  newItem(runId: string, threadId: string, afterSeconds: number, now = Date.now()): QueueItem {
    return {
      run_id: runId,
      thread_id: threadId,
      created_at: now,
      available_at: now + afterSeconds * 1000,
      claim: null,
      attempt: 0,
      cancel: null,
      began: null,
    };
  }

  /** The thread's unfinished runs, oldest first. */
  async ofThread(threadId: string): Promise<QueueItem[]> {
    return (await this.items.all(threadId)).sort(order);
  }

  /**
   * Claims the first item it can for `owner`: the item as claimed, or null with the time
   * to look again (null: only when something changes).
   */
  async claim(owner: string): Promise<{ item: ClaimedItem | null; wakeAt: number | null }> {
    const all: Array<Versioned<QueueItem>> = [];
    for await (const e of this.items.scan()) all.push(e);
    const now = Date.now();
    const { candidates, wakeAt } = planClaim(all, now);
    for (const c of candidates) {
      const claimed: QueueItem = {
        ...c.value,
        claim: { owner, expires_at: now + this.leaseMs },
        attempt: c.value.attempt + 1,
      };
      try {
        const written = await this.items.put(c.value.run_id, claimed, {
          group: c.value.thread_id,
          expectedVersion: c.version,
        });
        return { item: written, wakeAt };
      } catch (e) {
        if (!isCairnError(e, 'CONFLICT')) throw e;
        // Another worker took it, or it was cancelled or finished meanwhile: next one.
      }
    }
    return { item: null, wakeAt };
  }

  /**
   * Extends the claim; returns the item as stored now, or null when the claim is lost
   * (another worker took over after it expired, or the item is gone).
   */
  async renew(item: ClaimedItem): Promise<ClaimedItem | null> {
    let current: ClaimedItem | null = item;
    for (;;) {
      if (
        !current ||
        current.value.claim?.owner !== item.value.claim?.owner ||
        current.value.attempt !== item.value.attempt
      )
        return null;
      try {
        return await this.items.put(
          current.value.run_id,
          {
            ...current.value,
            claim: { owner: current.value.claim!.owner, expires_at: Date.now() + this.leaseMs },
          },
          { group: current.value.thread_id, expectedVersion: current.version },
        );
      } catch (e) {
        if (!isCairnError(e, 'CONFLICT')) throw e;
        current = await this.items.get(item.value.run_id);
      }
    }
  }

  /**
   * Asks for a run to stop. An item whose run never began is removed at once (returned as
   * `removed`); one a worker holds, or whose worker lapsed after its graph began writing,
   * is marked, and a worker stops it (undoing its writes on `rollback`). Null when the run
   * is not in the queue (finished).
   */
  async cancel(
    runId: string,
    action: 'interrupt' | 'rollback',
  ): Promise<'removed' | 'marked' | null> {
    for (;;) {
      const current = await this.items.get(runId);
      if (!current) return null;
      const claimed = current.value.claim !== null && current.value.claim.expires_at > Date.now();
      try {
        if (!claimed && !current.value.began) {
          const removed = await this.store.transaction(async (tx) => {
            const again = await tx.getEntry(COLLECTIONS.queue, runId);
            if (again?.version !== current.version) return false;
            await tx.deleteEntries(COLLECTIONS.queue, { ids: [runId] });
            return true;
          });
          if (removed) return 'removed';
          continue;
        }
        await this.items.put(
          runId,
          { ...current.value, cancel: action },
          {
            group: current.value.thread_id,
            expectedVersion: current.version,
          },
        );
        return 'marked';
      } catch (e) {
        if (!isCairnError(e, 'CONFLICT')) throw e;
      }
    }
  }

  /** Gives a claimed run back to the queue unfinished (its worker is shutting down). */
  async release(item: ClaimedItem): Promise<void> {
    await this.items.put(
      item.value.run_id,
      { ...item.value, claim: null },
      {
        group: item.value.thread_id,
        expectedVersion: item.version,
      },
    );
  }

  /** Removes a finished run's item. */
  async finish(runId: string): Promise<void> {
    await this.items.delete([runId]);
  }

  /**
   * Resolves when the queue may have work: on a change to it (any process), at `wakeAt`,
   * or when `signal` aborts. `changed()` must be read before the claim it follows, so a
   * change during the claim is not missed.
   */
  watch(): {
    changed: () => boolean;
    wait: (wakeAt: number | null, signal: AbortSignal) => Promise<void>;
    stop: () => void;
  } {
    let dirty = false;
    let wake: (() => void) | null = null;
    const stop = this.store.subscribeEntries(COLLECTIONS.queue, () => {
      dirty = true;
      wake?.();
    });
    return {
      changed: () => {
        const d = dirty;
        dirty = false;
        return d;
      },
      wait: (wakeAt, signal) =>
        new Promise<void>((resolve) => {
          if (dirty || signal.aborted) return resolve();
          const timer = wakeAt === null ? null : setTimeout(done, Math.max(0, wakeAt - Date.now()));
          function done() {
            wake = null;
            if (timer) clearTimeout(timer);
            signal.removeEventListener('abort', done);
            resolve();
          }
          wake = done;
          signal.addEventListener('abort', done);
        }),
      stop,
    };
  }
}
