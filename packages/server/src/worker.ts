import { isCairnError, newId } from '@cairn/core';
import type { NewEntry, Store } from '@cairn/store';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { COLLECTIONS, nowIso } from './collection.js';
import type { ServerContext } from './context.js';
import { ClaimLost, HeldClaim, type StopReason } from './held-claim.js';
import type { Run, RunStatus, Thread, ThreadStatus } from './model.js';
import type { ClaimedItem, QueueItem } from './run-queue.js';
import { streamRun } from './stream.js';
import { deleteThread, latestValues } from './threads.js';

/** A run claimed this many times (its workers died each time) fails instead. */
export const MAX_ATTEMPTS = 3;

/** Whether the run's queue item still holds this claim. */
async function holdsClaim(
  tx: Store,
  runId: string,
  claim: { owner: string; attempt: number },
): Promise<boolean> {
  const item = (await tx.getEntry(COLLECTIONS.queue, runId))?.data as unknown as
    | QueueItem
    | undefined;
  return holds(item, claim);
}

function holds(item: QueueItem | undefined, claim: { owner: string; attempt: number }) {
  return item?.claim?.owner === claim.owner && item.attempt === claim.attempt;
}

/**
 * Marks the run `running` and, the first time, records on its queue item the checkpoint
 * it begins from (`began`), if the item still holds this claim: the item as written, or
 * null when the claim is lost. A cancel or renewal that rewrote the item meanwhile (from
 * any process) makes it read the item again.
 */
async function markRunning(
  ctx: ServerContext,
  run: Run,
  held: HeldClaim,
  from: string | null,
): Promise<ClaimedItem | null> {
  for (;;) {
    try {
      return await ctx.store.transaction(async (tx) => {
        const entry = await tx.getEntry(COLLECTIONS.queue, run.run_id);
        const item = entry?.data as unknown as QueueItem | undefined;
        if (!entry || !item || !holds(item, held.claim)) return null;
        const next: QueueItem = item.began ? item : { ...item, began: { checkpoint_id: from } };
        const running: Run = { ...run, status: 'running', updated_at: nowIso() };
        const [, written] = await tx.putEntries([
          {
            collection: COLLECTIONS.runs,
            id: run.run_id,
            group: run.thread_id,
            data: running as never,
          },
          {
            collection: COLLECTIONS.queue,
            id: run.run_id,
            group: run.thread_id,
            data: next as never,
            expectedVersion: entry.version,
          },
        ]);
        return { value: next, version: written!.version };
      });
    } catch (e) {
      if (!isCairnError(e, 'CONFLICT')) throw e;
    }
  }
}

/**
 * The checkpointer for a run: the server's, with every write fenced by the run's claim
 * (`ClaimLost` once it may have lapsed), so a worker that lost a run cannot write over the
 * checkpoints of the worker that took it over. `settle()` waits for the writes in flight
 * (LangGraph does not wait for them when a run is aborted) and refuses later ones.
 */
function fenced(
  saver: BaseCheckpointSaver,
  held: HeldClaim,
): BaseCheckpointSaver & { settle(): Promise<void> } {
  const inflight = new Set<Promise<unknown>>();
  let closed = false;
  return new Proxy(saver, {
    get(target, prop) {
      if (prop === 'settle')
        return async () => {
          closed = true;
          await Promise.allSettled([...inflight]);
        };
      const value = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      if (prop === 'put' || prop === 'putWrites')
        return (...args: unknown[]) => {
          if (closed) return Promise.reject(new ClaimLost(held.item.value.run_id));
          held.assertHeld();
          const write = value.apply(target, args) as Promise<unknown>;
          inflight.add(write);
          void write.finally(() => inflight.delete(write)).catch(() => undefined);
          return write;
        };
      return value.bind(target);
    },
  }) as BaseCheckpointSaver & { settle(): Promise<void> };
}

/** How a run ended. */
export interface RunOutcome {
  status: RunStatus;
  /** Cancelled with `rollback`: the run and its events go. */
  rolledBack: boolean;
}

/**
 * Ends a run in one transaction: its final status and the end of its event log (or, rolled
 * back, neither: both go), its queue item removed, and its thread's status (`busy` while
 * more runs wait, else `error`, `interrupted` when the graph waits at an interrupt, or
 * `idle`) with its latest values. A reader that sees the log end sees the thread settled.
 * A stateless run's thread is deleted instead.
 */
export async function finishRun(
  ctx: ServerContext,
  run: Run,
  outcome: RunOutcome,
  end: NewEntry | null,
  claim?: { owner: string; attempt: number },
): Promise<void> {
  const thread = await ctx.threads.get(run.thread_id);
  const latest =
    thread && !run.kwargs.temporary
      ? await latestValues(ctx, thread.value).catch(() => null)
      : null;
  const waiting = (latest?.state.next.length ?? 0) > 0;
  const { store } = ctx;
  for (;;) {
    try {
      const finished = await store.transaction(async (tx) => {
        // Fenced: a worker whose claim lapsed (another took the run over) writes nothing.
        if (claim && !(await holdsClaim(tx, run.run_id, claim))) return false;
        const writes: NewEntry[] = [];
        if (outcome.rolledBack) {
          await tx.deleteEntries(COLLECTIONS.runs, { ids: [run.run_id] });
          await tx.deleteEntries(COLLECTIONS.events, { group: run.run_id });
        } else {
          const done: Run = { ...run, status: outcome.status, updated_at: nowIso() };
          writes.push({
            collection: COLLECTIONS.runs,
            id: run.run_id,
            group: run.thread_id,
            data: done as never,
          });
          if (end) writes.push(end);
        }
        await tx.deleteEntries(COLLECTIONS.queue, { ids: [run.run_id] });
        const t = await tx.getEntry(COLLECTIONS.threads, run.thread_id);
        if (t && !run.kwargs.temporary) {
          const pending = await tx.listEntries(COLLECTIONS.queue, {
            group: run.thread_id,
            limit: 1,
          });
          const failed = outcome.status === 'error';
          const status: ThreadStatus =
            pending.length > 0 ? 'busy' : failed ? 'error' : waiting ? 'interrupted' : 'idle';
          const next: Thread = {
            ...(t.data as unknown as Thread),
            status,
            updated_at: nowIso(),
            values: latest?.values ?? (t.data as unknown as Thread).values ?? null,
            interrupts: latest?.interrupts ?? {},
          };
          writes.push({
            collection: COLLECTIONS.threads,
            id: run.thread_id,
            data: next as never,
            expectedVersion: t.version,
          });
        }
        await tx.putEntries(writes);
        return true;
      });
      if (!finished) return;
      break;
    } catch (e) {
      // A run created on the thread meanwhile changed it: decide its status again.
      if (!isCairnError(e, 'CONFLICT')) throw e;
    }
  }
  if (run.kwargs.temporary) await deleteThread(ctx, run.thread_id);
}

/**
 * A worker: claims queued runs (up to `concurrency` at once) and runs them, renewing each
 * claim while it runs, until stopped. Waits for work on the store's notification of a
 * queue change or the next known deadline, never by polling.
 */
export class Worker {
  readonly owner = `worker-${newId()}`;
  readonly #stop = new AbortController();
  readonly #running = new Set<Promise<void>>();
  readonly #held = new Set<HeldClaim>();
  #loop: Promise<void> | null = null;

  constructor(
    readonly ctx: ServerContext,
    readonly concurrency: number,
  ) {}

  start(): void {
    this.#loop ??= this.#run().catch((e) => {
      console.error('cairn serve: the worker stopped:', e);
    });
  }

  /**
   * Stops claiming, stops the runs in progress and hands them back to the queue (another
   * worker, or this server started again, runs them from their last checkpoint).
   */
  async stop(): Promise<void> {
    this.#stop.abort();
    for (const h of this.#held) h.stop('shutdown');
    await this.#loop;
    await Promise.allSettled([...this.#running]);
  }

  async #run(): Promise<void> {
    const watcher = this.ctx.queue.watch();
    const signal = this.#stop.signal;
    try {
      while (!signal.aborted) {
        if (this.#running.size >= this.concurrency) {
          await Promise.race(this.#running);
          continue;
        }
        watcher.changed();
        const { item, wakeAt } = await this.ctx.queue.claim(this.owner);
        if (item) {
          const p = this.#execute(item).finally(() => this.#running.delete(p));
          this.#running.add(p);
          continue;
        }
        await watcher.wait(wakeAt, signal);
      }
    } finally {
      watcher.stop();
    }
  }

  /** Runs one claimed run to its end: streamed events, status, the thread's new state. */
  async #execute(claimed: ClaimedItem): Promise<void> {
    const ctx = this.ctx;
    const runId = claimed.value.run_id;
    const stored = await ctx.runs.get(runId);
    if (!stored) {
      await ctx.queue.finish(runId);
      return;
    }
    const run = stored.value;
    const attempt = claimed.value.attempt;
    const held = new HeldClaim(ctx, claimed);
    this.#held.add(held);
    await held.start();
    const writer = await ctx.log.writer(runId, attempt > 1);
    let status: RunStatus = 'success';
    let lost = false;
    try {
      const latest = run.kwargs.temporary
        ? undefined
        : (
            await ctx.saver.getTuple({
              configurable: { thread_id: run.thread_id, checkpoint_ns: '' },
            })
          )?.config;
      const from = (latest?.configurable?.checkpoint_id as string | undefined) ?? null;
      const marked = await markRunning(ctx, run, held, from);
      if (marked) held.adopt(marked);
      else held.stop('lost');
      // Where a rollback goes back to: where the run's first attempt began.
      const began = marked?.value.began ?? null;
      if (attempt > MAX_ATTEMPTS && !held.signal.aborted)
        throw new Error(`Run ${runId} exceeded max attempts`);
      let checkpointer: ReturnType<typeof fenced> | null = null;
      if (!held.signal.aborted) {
        const graphId = run.kwargs.config.configurable?.graph_id as string;
        // Checkpoints are written only while the claim surely holds.
        checkpointer = run.kwargs.temporary ? null : fenced(ctx.saver, held);
        const graph = await ctx.graphs.get(graphId, run.kwargs.config, {
          checkpointer,
          store: ctx.memory,
        });
        try {
          for await (const e of streamRun(run, graph, { attempt, signal: held.signal }))
            writer.append(e.event, e.data);
        } catch (e) {
          if (!held.signal.aborted) throw e;
        }
      }
      if (held.signal.aborted) {
        status = 'interrupted';
        // Undo what the graph wrote, in this attempt or an earlier one: its own writes land
        // first; then the thread goes back to where the run found it.
        if (held.signal.reason === 'rollback' && began && !run.kwargs.temporary) {
          await checkpointer?.settle();
          // Only while the claim surely holds: once it lapsed, the worker that takes the
          // run over rolls it back, and a late undo here could wipe the runs after it.
          try {
            await this.#rollBack(run, began.checkpoint_id, () => held.assertHeld());
          } catch (e) {
            if (!(e instanceof ClaimLost)) throw e;
            lost = true;
          }
        }
      }
    } catch (e) {
      status = 'error';
      const error =
        e instanceof Error
          ? { error: e.name, message: e.message }
          : { error: 'Error', message: String(e) };
      writer.append('error', error);
    } finally {
      held.release();
      this.#held.delete(held);
    }
    const reason = held.signal.reason as StopReason | undefined;
    if (reason === 'lost' || lost) return; // another worker has the run now; it finishes it.
    if (reason === 'shutdown') {
      await writer.flush().catch(() => undefined);
      await ctx.queue.release(held.item).catch(() => undefined);
      return;
    }
    const rolledBack = status === 'interrupted' && reason === 'rollback';
    const end = rolledBack ? null : await writer.endEntry();
    await finishRun(ctx, run, { status, rolledBack }, end, held.claim);
  }

  /**
   * Undoes a cancelled run's work: the thread's latest checkpoint becomes a copy of the
   * one it began from (a new checkpoint; the run's own stay in the history as a fork), or
   * the thread's checkpoints go when the run was its first.
   */
  async #rollBack(run: Run, from: string | null, assertHeld: () => void): Promise<void> {
    const saver = this.ctx.saver;
    assertHeld();
    if (from === null) {
      await saver.deleteThread(run.thread_id);
      return;
    }
    const thread = { thread_id: run.thread_id, checkpoint_ns: '' };
    const start = { configurable: { ...thread, checkpoint_id: from } };
    const tuple = await saver.getTuple(start);
    const latest = await saver.getTuple({ configurable: thread });
    if (!tuple || latest?.checkpoint.id === from) return; // nothing written since
    const { uuid6 } = await import('@langchain/langgraph-checkpoint');
    const checkpoint = { ...tuple.checkpoint, id: uuid6(-3), ts: new Date().toISOString() };
    assertHeld();
    await saver.put(
      latest?.config ?? start,
      checkpoint,
      {
        ...(tuple.metadata ?? {}),
        source: 'update',
        step: (tuple.metadata?.step ?? -1) + 1,
        parents: {},
      } as never,
      tuple.checkpoint.channel_versions,
    );
  }
}
