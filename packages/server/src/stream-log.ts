import type { NewEntry, Store } from '@cairn/store';
import { COLLECTIONS } from './collection.js';
import { toPlainJson } from './http.js';

/** One event of a run's stream, numbered from 0 in the order the run produced it. */
export interface LoggedEvent {
  seq: number;
  event: string;
  data: unknown;
}

/** The event that ends a run's log: readers stop at it and never show it. */
const END = '__end__';
const PAGE = 500;

const entryId = (runId: string, seq: number) => `${runId}/${String(seq).padStart(10, '0')}`;
const seqOf = (id: string) => Number(id.slice(id.lastIndexOf('/') + 1));

/**
 * A run's streamed events as entries of the store (one per event, grouped by run), so that
 * any process can replay a stream from any event (`Last-Event-ID`) and follow it live,
 * woken by the store's notifications.
 */
export class StreamLog {
  constructor(readonly store: Store) {}

  /** A writer that appends after what the log holds (a retried run continues its log). */
  async writer(runId: string, continuing: boolean): Promise<EventWriter> {
    let next = 0;
    if (continuing) for await (const e of this.#events(runId, -1)) next = e.seq + 1;
    return new EventWriter(this.store, runId, next);
  }

  /** The events after `afterSeq` (-1: all), page by page, until the end or what is logged now. */
  async *#events(runId: string, afterSeq: number): AsyncGenerator<LoggedEvent & { end: boolean }> {
    let after = afterSeq;
    for (;;) {
      const page = await this.store.listEntries(COLLECTIONS.events, {
        group: runId,
        limit: PAGE,
        ...(after < 0 ? {} : { afterId: entryId(runId, after) }),
      });
      for (const e of page) {
        after = seqOf(e.id);
        yield { seq: after, event: e.data.e as string, data: e.data.d, end: e.data.e === END };
      }
      if (page.length < PAGE) return;
    }
  }

  /**
   * Every event after `afterSeq` (-1: from the first), each once, live: waits for new ones
   * (woken by the store's notifications) until the run's log ends, the log is deleted, or
   * `signal` aborts.
   */
  async *follow(
    runId: string,
    afterSeq: number,
    signal?: AbortSignal,
  ): AsyncGenerator<LoggedEvent> {
    let changed = false;
    let wake: (() => void) | null = null;
    let deleted = false;
    const stop = this.store.subscribeEntries(COLLECTIONS.events, (c) => {
      if (c.group !== runId) return;
      if (c.version === null) deleted = true;
      changed = true;
      wake?.();
    });
    const onAbort = () => wake?.();
    signal?.addEventListener('abort', onAbort);
    try {
      let after = afterSeq;
      for (;;) {
        changed = false;
        for await (const e of this.#events(runId, after)) {
          if (e.end) return;
          after = e.seq;
          yield { seq: e.seq, event: e.event, data: e.data };
          if (signal?.aborted) return;
        }
        if (deleted || signal?.aborted) return;
        if (!changed) await new Promise<void>((resolve) => (wake = resolve));
        wake = null;
        if (signal?.aborted) return;
      }
    } finally {
      stop();
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Whether the run's log has ended (its run finished for good). */
  async ended(runId: string): Promise<boolean> {
    let end = false;
    for await (const e of this.#events(runId, -1)) end = e.end;
    return end;
  }

  delete(runId: string): Promise<number> {
    return this.store.deleteEntries(COLLECTIONS.events, { group: runId });
  }
}

/**
 * Appends a run's events in order. Events that arrive while a write is in flight go
 * together in the next one: a token stream costs a write per batch, not per token.
 */
export class EventWriter {
  #next: number;
  #buffer: Array<{ event: string; data: unknown }> = [];
  #flushing: Promise<void> | null = null;
  #failure: unknown = null;

  constructor(
    readonly store: Store,
    readonly runId: string,
    next: number,
  ) {
    this.#next = next;
  }

  append(event: string, data: unknown): void {
    if (this.#failure) throw this.#failure;
    this.#buffer.push({ event, data: toPlainJson(data) ?? null });
    this.#flushing ??= this.#drain();
  }

  /**
   * Writes what is buffered, then returns the entry that ends the log, for the caller to
   * write together with the run's final status.
   */
  async endEntry(): Promise<NewEntry> {
    await this.flush();
    return this.#entry(END, null);
  }

  #entry(event: string, data: unknown): NewEntry {
    return {
      collection: COLLECTIONS.events,
      id: entryId(this.runId, this.#next++),
      group: this.runId,
      data: { e: event, d: data as never },
    };
  }

  async flush(): Promise<void> {
    while (this.#flushing) await this.#flushing;
    if (this.#failure) throw this.#failure;
  }

  async #drain(): Promise<void> {
    try {
      while (this.#buffer.length > 0) {
        const batch = this.#buffer.splice(0, 1000);
        await this.store.putEntries(batch.map(({ event, data }) => this.#entry(event, data)));
      }
    } catch (e) {
      this.#failure = e;
    } finally {
      this.#flushing = null;
    }
  }
}
