import { CairnError, checkKeys, type JsonObject, type Lease } from '@cairn/core';
import { runLeaseKey, type Store } from '@cairn/store';

/** How a run ended, or `stale_recovered` when another owner took over an expired run. */
export type RunResult = 'completed' | 'failed' | 'stale_recovered';

/** The record of a thread's current or last run, read from its lease. */
export interface RunRecord {
  key: string;
  owner: string;
  /** Held, not released, not expired. */
  isRunning: boolean;
  startedAt: number;
  lastHeartbeatAt: number;
  expiresAt: number;
  /** How the previous run ended (while running), or how this one ended (after release). */
  lastResult: RunResult | null;
  lastError: string | null;
  /** When this run was released; null while running or when it expired unreleased. */
  endedAt: number | null;
  /** The expired run this one took over, if any. */
  recoveredFrom: { owner: string; startedAt: number; lastHeartbeatAt: number } | null;
}

/** The thread's run lease key; the store counts it as the thread's activity. */
export const runKey = runLeaseKey;

export function runRecord(lease: Lease, now = Date.now()): RunRecord {
  const d = lease.data;
  const rec = d.recoveredFrom as RunRecord['recoveredFrom'] | undefined;
  return {
    key: lease.key,
    owner: lease.owner,
    isRunning: lease.releasedAt === null && lease.expiresAt > now,
    startedAt: lease.acquiredAt,
    lastHeartbeatAt: lease.renewedAt,
    expiresAt: lease.expiresAt,
    lastResult: (d.lastResult as RunResult | null | undefined) ?? null,
    lastError: (d.lastError as string | null | undefined) ?? null,
    endedAt: lease.releasedAt,
    recoveredFrom: rec ?? null,
  };
}

function staleData(old: Lease): JsonObject {
  return {
    lastResult: 'stale_recovered',
    lastError: `run of ${old.owner} expired at ${new Date(old.expiresAt).toISOString()} without a heartbeat`,
    recoveredFrom: { owner: old.owner, startedAt: old.acquiredAt, lastHeartbeatAt: old.renewedAt },
  };
}

/** The run data a new run of `owner` starts with, after the lease `prev` (at `now`). */
function carriedFrom(prev: Lease | null, owner: string, now: number): JsonObject {
  const stale =
    prev !== null && prev.owner !== owner && prev.releasedAt === null && prev.expiresAt <= now;
  return stale
    ? staleData(prev)
    : {
        lastResult: prev?.data.lastResult ?? null,
        lastError: prev?.data.lastError ?? null,
        recoveredFrom: null,
      };
}

/**
 * Takes the thread's run lease: `CONFLICT` while another owner's run is live (with
 * `waitMs`, it waits for that run to end first: `TIMEOUT` after `waitMs`); an expired
 * run of another owner is taken over and recorded as `stale_recovered`.
 */
export async function acquireRunLease(
  store: Store,
  threadId: string,
  owner: string,
  ttlMs: number,
  waitMs?: number,
): Promise<ThreadRun> {
  const key = runKey(threadId);
  // The run's data is written with the lease, as the lease read now predicts it; should
  // the lease change before the take (another run ended or expired meanwhile, or this
  // one waited), it is corrected from the lease the take found.
  const carry = carriedFrom(await store.getLease(key), owner, Date.now());
  const { lease, previous } = await store.acquireLease({
    key,
    owner,
    ttlMs,
    data: carry,
    ...(waitMs === undefined ? {} : { waitMs }),
  });
  const found = carriedFrom(previous, owner, lease.renewedAt);
  const held =
    JSON.stringify(found) === JSON.stringify(carry)
      ? lease
      : await store.renewLease(key, owner, ttlMs, found);
  return new ThreadRun(store, key, owner, ttlMs, held);
}

/**
 * A held run of a thread. Heartbeat before `ttlMs` passes, release when done.
 *
 * @example
 * ```ts
 * const run = await thread.acquireRun({ owner: 'worker-1', ttlMs: 30_000 });
 * try { await research(run); await run.release({ result: 'completed' }); }
 * catch (e) { await run.release({ result: 'failed', error: String(e) }); }
 * ```
 */
export class ThreadRun {
  #store: Store;
  #lease: Lease;
  readonly key: string;
  readonly owner: string;
  readonly ttlMs: number;

  /** @internal — use `thread.acquireRun`. */
  constructor(store: Store, key: string, owner: string, ttlMs: number, lease: Lease) {
    this.#store = store;
    this.key = key;
    this.owner = owner;
    this.ttlMs = ttlMs;
    this.#lease = lease;
  }

  /** The run record as this owner last saw it. */
  get record(): RunRecord {
    return runRecord(this.#lease);
  }

  /** Extends the run by `ttlMs` (default the acquire ttl); `CONFLICT` once it was lost. */
  async heartbeat(ttlMs = this.ttlMs): Promise<RunRecord> {
    this.#lease = await this.#store.renewLease(this.key, this.owner, ttlMs);
    return this.record;
  }

  /** Ends the run with its result; `CONFLICT` if another owner has taken it over. */
  async release(options: { result: 'completed' | 'failed'; error?: string }): Promise<RunRecord> {
    if (options?.result !== 'completed' && options?.result !== 'failed') {
      throw new CairnError(
        'INVALID_ARGUMENT',
        `run result must be 'completed' or 'failed', got ${String(options?.result)}`,
      );
    }
    checkKeys(options, 'release options', ['result', 'error']);
    this.#lease = await this.#store.releaseLease(this.key, this.owner, {
      lastResult: options.result,
      lastError: options.error ?? null,
    });
    return this.record;
  }
}
