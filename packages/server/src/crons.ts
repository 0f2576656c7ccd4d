import { isCairnError, newId } from '@cairn/core';
import { ANYONE, authMatches, ownedBy } from './auth.js';
import { nowIso } from './collection.js';
import type { ServerContext } from './context.js';
import { notFound, type Route, reply } from './http.js';
import { type Cron, type Json, shown } from './model.js';
import { createRun, type RunRequest } from './runs.js';
import { getThread } from './threads.js';
import * as v from './validate.js';

const FIELDS = [
  [0, 59],
  [0, 23],
  [1, 31],
  [1, 12],
  [0, 6],
] as const;

/** The values a cron field (`*`, `5`, `1-5`, `*\/15`, `1,2,3`) allows; throws on anything else. */
function fieldValues(field: string, [min, max]: readonly [number, number]): Set<number> {
  const out = new Set<number>();
  for (const part of field.split(',')) {
    const m = /^(\*|\d+)(?:-(\d+))?(?:\/(\d+))?$/.exec(part);
    if (!m) throw new Error(`not a cron field: ${JSON.stringify(field)}`);
    const from = m[1] === '*' ? min : Number(m[1]);
    const to = m[2] !== undefined ? Number(m[2]) : m[1] === '*' || m[3] ? max : from;
    const step = m[3] ? Number(m[3]) : 1;
    if (from < min || to > max || from > to || step < 1)
      throw new Error(`cron field out of range: ${JSON.stringify(field)}`);
    for (let x = from; x <= to; x += step) out.add(x);
  }
  return out;
}

/** The first minute after `after` (UTC) that a five-field cron schedule names. */
export function nextRun(schedule: string, after: Date): Date {
  const parts = schedule.trim().split(/\s+/);
  if (parts.length !== 5)
    throw new Error(`a cron schedule has five fields, got ${JSON.stringify(schedule)}`);
  const [mins, hours, days, months, weekdays] = parts.map((p, i) => fieldValues(p, FIELDS[i]!));
  const t = new Date(after.getTime());
  t.setUTCSeconds(0, 0);
  t.setUTCMinutes(t.getUTCMinutes() + 1);
  for (let i = 0; i < 60 * 24 * 366 * 5; i++) {
    if (
      months!.has(t.getUTCMonth() + 1) &&
      days!.has(t.getUTCDate()) &&
      weekdays!.has(t.getUTCDay()) &&
      hours!.has(t.getUTCHours()) &&
      mins!.has(t.getUTCMinutes())
    )
      return t;
    t.setUTCMinutes(t.getUTCMinutes() + 1);
  }
  throw new Error(`cron schedule ${JSON.stringify(schedule)} never runs`);
}

export function cronRoutes(ctx: ServerContext): Route[] {
  const create =
    (onThread: boolean) =>
    async ({ params, body, caller }: Parameters<Route['handler']>[0]) => {
      const { identity } = caller;
      const b = v.body(body, false);
      const schedule = v.optString(b, 'schedule');
      if (!schedule) throw v.badRequest('schedule is required');
      let next: Date;
      try {
        next = nextRun(schedule, new Date());
      } catch (e) {
        throw v.badRequest((e as Error).message);
      }
      const assistantId = v.optString(b, 'assistant_id');
      if (!assistantId) throw v.badRequest('assistant_id is required');
      const threadId = onThread ? v.uuidParam(params.thread_id, 'thread_id') : null;
      if (threadId) await getThread(ctx, threadId, caller);
      const { schedule: _, end_time, ...payload } = b;
      await caller.authorize('crons:create', {
        payload,
        schedule,
        thread_id: threadId,
        user_id: identity,
        end_time,
      });
      const now = nowIso();
      const cron: Cron = {
        cron_id: newId(),
        assistant_id: assistantId,
        thread_id: threadId,
        schedule,
        payload,
        user_id: identity,
        end_time: typeof end_time === 'string' ? end_time : null,
        next_run_date: next.toISOString(),
        metadata: v.optObject(b, 'metadata') ?? {},
        created_at: now,
        updated_at: now,
        owner: identity,
      };
      await ctx.crons.put(cron.cron_id, cron, { group: threadId, expectedVersion: null });
      return shown(cron);
    };
  return [
    { method: 'POST', path: '/runs/crons', handler: create(false) },
    { method: 'POST', path: '/threads/:thread_id/runs/crons', handler: create(true) },
    {
      method: 'POST',
      path: '/runs/crons/search',
      handler: async ({ body, caller }) => {
        const { identity } = caller;
        const b = v.body(body);
        const { limit, offset } = v.paging(b);
        const assistantId = v.optString(b, 'assistant_id');
        const threadId = v.optString(b, 'thread_id');
        const filters = await caller.authorize('crons:search', {
          assistant_id: assistantId,
          thread_id: threadId,
          limit,
          offset,
        });
        const all = (await ctx.crons.all()).filter(
          (c) =>
            ownedBy(c.owner, identity, true) &&
            authMatches(c.metadata, filters) &&
            (!assistantId || c.assistant_id === assistantId) &&
            (!threadId || c.thread_id === threadId),
        );
        return all.slice(offset, offset + limit).map(shown);
      },
    },
    {
      method: 'DELETE',
      path: '/runs/crons/:cron_id',
      handler: async ({ params, caller }) => {
        const { identity } = caller;
        const id = v.uuidParam(params.cron_id, 'cron_id');
        const filters = await caller.authorize('crons:delete', { cron_id: id });
        const c = await ctx.crons.get(id);
        if (
          !c ||
          !ownedBy(c.value.owner, identity, true) ||
          !authMatches(c.value.metadata, filters)
        )
          throw notFound('Cron not found');
        await ctx.crons.delete([id]);
        return reply(204);
      },
    },
  ];
}

/**
 * Starts the runs of due crons: each due cron is moved to its next date by compare-and-set
 * first, so of several processes exactly one starts each run. Wakes at the next due date,
 * or when a cron is created.
 */
export class CronScheduler {
  readonly #stop = new AbortController();
  #loop: Promise<void> | null = null;

  constructor(
    readonly ctx: ServerContext,
    readonly toRequest: (payload: Json) => RunRequest,
  ) {}

  start(): void {
    this.#loop ??= this.#run().catch((e) =>
      console.error('cairn serve: the cron scheduler stopped:', e),
    );
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
  }

  async #run(): Promise<void> {
    const signal = this.#stop.signal;
    let dirty = false;
    let wake: (() => void) | null = null;
    const unsubscribe = this.ctx.store.subscribeEntries(this.ctx.crons.name, () => {
      dirty = true;
      wake?.();
    });
    try {
      while (!signal.aborted) {
        dirty = false;
        let earliest = Number.POSITIVE_INFINITY;
        for await (const { id, value, version } of this.ctx.crons.scan()) {
          const due = Date.parse(value.next_run_date);
          if (value.end_time && Date.parse(value.end_time) < Date.now()) continue;
          if (due > Date.now()) {
            earliest = Math.min(earliest, due);
            continue;
          }
          const moved = {
            ...value,
            next_run_date: nextRun(value.schedule, new Date()).toISOString(),
            updated_at: nowIso(),
          };
          try {
            await this.ctx.crons.put(id, moved, {
              group: value.thread_id,
              expectedVersion: version,
            });
          } catch (e) {
            if (isCairnError(e, 'CONFLICT')) continue;
            throw e;
          }
          await createRun(
            this.ctx,
            value.thread_id,
            this.toRequest({ ...value.payload, assistant_id: value.assistant_id }),
            { ...ANYONE, identity: value.owner ?? null },
          ).catch((e) => console.error(`cairn serve: cron ${id} could not start a run:`, e));
          earliest = Math.min(earliest, Date.parse(moved.next_run_date));
        }
        if (dirty || signal.aborted) continue;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, Math.min(2 ** 31 - 1, Math.max(0, earliest - Date.now())));
          function done() {
            clearTimeout(timer);
            wake = null;
            signal.removeEventListener('abort', done);
            resolve();
          }
          wake = done;
          signal.addEventListener('abort', done);
        });
      }
    } finally {
      unsubscribe();
    }
  }
}
