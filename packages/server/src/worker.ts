import { isCairnError, newId } from '@cairn/core';
import type { NewEntry } from '@cairn/store';
import { COLLECTIONS, nowIso } from './collection.js';
import type { ServerContext } from './context.js';
import type { Run, RunStatus, Thread, ThreadStatus } from './model.js';
import type { ClaimedItem } from './run-queue.js';
import { streamRun } from './stream.js';
import { deleteThread, latestValues } from './threads.js';

/** A run claimed this many times (its workers died each time) fails instead. */
export const MAX_ATTEMPTS = 3;

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
      await store.transaction(async (tx) => {
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
      });
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
  readonly #controls = new Set<AbortController>();
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
    for (const c of this.#controls) c.abort('shutdown');
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
    const writer = await ctx.log.writer(runId, attempt > 1);
    const control = new AbortController();
    this.#controls.add(control);
    let item: ClaimedItem | null = claimed;
    let lost = false;

    // Renew the claim while running; a cancel marked on the item stops the run.
    const renewEvery = Math.max(50, Math.floor(ctx.queue.leaseMs / 3));
    const onChange = async () => {
      const current = await ctx.queue.items.get(runId);
      const action = current?.value.cancel;
      if (!current) control.abort('interrupt');
      else if (action && !control.signal.aborted) control.abort(action);
    };
    const stopListening = ctx.store.subscribeEntries(ctx.queue.items.name, (c) => {
      if (c.id === runId) void onChange().catch(() => undefined);
    });
    const heartbeat = setInterval(async () => {
      if (!item) return;
      item = await ctx.queue.renew(item).catch(() => item);
      if (item === null && !control.signal.aborted) {
        lost = true;
        control.abort('lost');
      }
      if (item?.value.cancel && !control.signal.aborted) control.abort(item.value.cancel);
    }, renewEvery);
    await onChange();

    let status: RunStatus = 'success';
    try {
      await ctx.runs.put(
        runId,
        { ...run, status: 'running', updated_at: nowIso() },
        { group: run.thread_id },
      );
      if (attempt > MAX_ATTEMPTS) throw new Error(`Run ${runId} exceeded max attempts`);
      if (!control.signal.aborted) {
        const startCheckpoint = run.kwargs.temporary
          ? undefined
          : (
              await ctx.saver.getTuple({
                configurable: { thread_id: run.thread_id, checkpoint_ns: '' },
              })
            )?.config;
        const graphId = run.kwargs.config.configurable?.graph_id as string;
        const graph = await ctx.graph(graphId, run.kwargs.config, run.kwargs.temporary);
        try {
          for await (const e of streamRun(run, graph, { attempt, signal: control.signal }))
            writer.append(e.event, e.data);
        } catch (e) {
          if (!control.signal.aborted) throw e;
        }
        if (control.signal.aborted) {
          status = 'interrupted';
          if (control.signal.reason === 'rollback') await this.#rollBack(run, startCheckpoint);
        }
      } else {
        status = 'interrupted';
        if (control.signal.reason === 'rollback') await this.#rollBack(run, undefined);
      }
    } catch (e) {
      status = 'error';
      const error =
        e instanceof Error
          ? { error: e.name, message: e.message }
          : { error: 'Error', message: String(e) };
      writer.append('error', error);
    } finally {
      clearInterval(heartbeat);
      stopListening();
      this.#controls.delete(control);
    }
    if (lost) return; // another worker took the run over; it finishes it.
    if (control.signal.reason === 'shutdown') {
      await writer.flush().catch(() => undefined);
      if (item) await ctx.queue.release(item).catch(() => undefined);
      return;
    }

    const rolledBack = status === 'interrupted' && control.signal.reason === 'rollback';
    const end = rolledBack ? null : await writer.endEntry();
    await finishRun(ctx, run, { status, rolledBack }, end);
  }

  /**
   * Undoes a cancelled run's work: the thread's latest checkpoint becomes a copy of the
   * one it started from (a new checkpoint; the run's own stay in the history as a
   * fork), or the thread's checkpoints go when the run was its first.
   */
  async #rollBack(
    run: Run,
    start: { configurable?: Record<string, unknown> } | undefined,
  ): Promise<void> {
    const saver = this.ctx.saver;
    if (!start) {
      await saver.deleteThread(run.thread_id);
      return;
    }
    const tuple = await saver.getTuple(start);
    if (!tuple) return;
    const { uuid6 } = await import('@langchain/langgraph-checkpoint');
    const checkpoint = { ...tuple.checkpoint, id: uuid6(-3), ts: new Date().toISOString() };
    const latest = await saver.getTuple({
      configurable: { thread_id: run.thread_id, checkpoint_ns: '' },
    });
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
