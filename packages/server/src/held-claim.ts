import type { ServerContext } from './context.js';
import type { ClaimedItem } from './run-queue.js';

/** Why a run stops before its end: a cancel's action, the server shutting down, or the claim lost. */
export type StopReason = 'interrupt' | 'rollback' | 'shutdown' | 'lost';

/** Thrown by a fenced write once the claim may have lapsed: another worker may hold the run. */
export class ClaimLost extends Error {
  constructor(runId: string) {
    super(`the claim on run ${runId} lapsed: another worker may be running it`);
  }
}

/**
 * A worker's hold on a claimed run while it runs it: renews the claim four times a lease,
 * stops the run (its `signal`) on a cancel marked on the item, and knows until when the
 * claim surely holds, so that the run's writes can be fenced: a worker that was too slow
 * to renew stops writing before another may take the run over.
 */
export class HeldClaim {
  readonly #ctx: ServerContext;
  readonly #control = new AbortController();
  #item: ClaimedItem;
  #timer: ReturnType<typeof setInterval> | null = null;
  /** The claim was found taken over or gone (also after the run was stopped for another reason). */
  #lost = false;
  #stopListening: (() => void) | null = null;

  constructor(ctx: ServerContext, item: ClaimedItem) {
    this.#ctx = ctx;
    this.#item = item;
  }

  get signal(): AbortSignal {
    return this.#control.signal;
  }

  get item(): ClaimedItem {
    return this.#item;
  }

  /** The owner and attempt a finishing write must still find on the run's queue item. */
  get claim(): { owner: string; attempt: number } {
    return { owner: this.#item.value.claim!.owner, attempt: this.#item.value.attempt };
  }

  /** Holds the item as the worker itself rewrote it (same claim, new version). */
  adopt(item: ClaimedItem): void {
    this.#item = item;
  }

  stop(reason: StopReason): void {
    if (!this.#control.signal.aborted) this.#control.abort(reason);
  }

  /** Until when the claim surely holds: its expiry less a fifth of a lease for clock slack. */
  get #deadline(): number {
    return this.#item.value.claim!.expires_at - this.#ctx.queue.leaseMs / 5;
  }

  /** The claim may have lapsed: another worker may hold the run now. */
  get lapsed(): boolean {
    return this.#lost || this.signal.reason === 'lost' || Date.now() >= this.#deadline;
  }

  /** Throws `ClaimLost` (and stops the run) once the claim may have lapsed. */
  assertHeld(): void {
    if (this.lapsed) {
      this.stop('lost');
      throw new ClaimLost(this.#item.value.run_id);
    }
  }

  async start(): Promise<void> {
    const { queue, store } = this.#ctx;
    const runId = this.#item.value.run_id;
    const check = async () => {
      const current = await queue.items.get(runId);
      if (!current) this.stop('interrupt');
      else if (current.value.cancel) this.stop(current.value.cancel);
    };
    this.#stopListening = store.subscribeEntries(queue.items.name, (c) => {
      if (c.id === runId) void check().catch(() => undefined);
    });
    this.#timer = setInterval(
      () => void this.#renew(),
      Math.max(25, Math.floor(queue.leaseMs / 4)),
    );
    await check();
  }

  async #renew(): Promise<void> {
    if (this.signal.reason === 'lost') return;
    const renewed = await this.#ctx.queue.renew(this.#item).catch(() => this.#item);
    if (renewed === null) {
      this.#lost = true;
      this.stop('lost');
      return;
    }
    this.#item = renewed;
    if (renewed.value.cancel) this.stop(renewed.value.cancel);
  }

  release(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#stopListening?.();
    this.#timer = null;
    this.#stopListening = null;
  }
}
