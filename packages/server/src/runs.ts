import { isCairnError, newId } from '@cairn/core';
import { resolveAssistant } from './assistants.js';
import { authMatches, authUser, type Caller, ownedBy } from './auth.js';
import { COLLECTIONS, nowIso } from './collection.js';
import type { ServerContext } from './context.js';
import {
  conflict,
  HttpError,
  notFound,
  openSse,
  type RequestContext,
  type Route,
  reply,
  STREAMED,
  toJsonText,
} from './http.js';
import {
  type Json,
  MULTITASK_STRATEGIES,
  type MultitaskStrategy,
  type Run,
  type RunKwargs,
  STREAM_MODES,
  type StreamMode,
  shown,
  type Thread,
} from './model.js';
import { getThread, newThread } from './threads.js';
import * as v from './validate.js';
import { finishRun } from './worker.js';

const REJECTED =
  'Thread is already running a task. Wait for it to finish or choose a different multitask strategy.';

/** A run request's body, checked: everything `createRun` needs. */
export function checkRunBody(body: unknown) {
  const b = v.body(body, false);
  const assistantId = v.optString(b, 'assistant_id');
  if (!assistantId) throw v.badRequest('assistant_id is required');
  const modes = v.optStringOrArray(b, 'stream_mode') ?? ['values'];
  for (const m of modes)
    if (!STREAM_MODES.includes(m as StreamMode))
      throw v.badRequest(
        `stream_mode must be among ${STREAM_MODES.join(', ')}, got ${JSON.stringify(m)}`,
      );
  const interrupt = (key: string) => {
    const x = b[key];
    if (x === undefined || x === null) return undefined;
    if (x === '*') return '*' as const;
    return v.optStringArray(b, key);
  };
  const command = v.optObject(b, 'command');
  return {
    assistantId,
    input: b.input,
    command: command ?? null,
    metadata: v.optObject(b, 'metadata') ?? {},
    config: v.optObject(b, 'config') ?? {},
    context: b.context,
    checkpointId: v.optString(b, 'checkpoint_id'),
    checkpoint: v.optObject(b, 'checkpoint'),
    interruptBefore: interrupt('interrupt_before'),
    interruptAfter: interrupt('interrupt_after'),
    streamMode: modes as StreamMode[],
    subgraphs: v.optBool(b, 'stream_subgraphs') ?? false,
    resumable: v.optBool(b, 'stream_resumable') ?? false,
    multitask:
      v.optEnum(b, 'multitask_strategy', MULTITASK_STRATEGIES) ?? ('reject' as MultitaskStrategy),
    ifNotExists: v.optEnum(b, 'if_not_exists', ['create', 'reject'] as const) ?? 'reject',
    afterSeconds: v.optNumber(b, 'after_seconds', 0) ?? 0,
    onDisconnect: v.optEnum(b, 'on_disconnect', ['cancel', 'continue'] as const) ?? 'continue',
    onCompletion: v.optEnum(b, 'on_completion', ['delete', 'keep'] as const),
    webhook: v.optString(b, 'webhook') ?? null,
  };
}

export type RunRequest = ReturnType<typeof checkRunBody>;

/**
 * Creates a run: checks the assistant and the thread, applies the multitask strategy
 * against the thread's unfinished runs, and writes the run, its queue item and the
 * thread's new status in one atomic batch guarded by the thread's version, so that two
 * requests on one thread never both pass a `reject`.
 */
export async function createRun(
  ctx: ServerContext,
  threadId: string | null,
  r: RunRequest,
  caller: Caller,
): Promise<Run> {
  const { identity } = caller;
  const assistant = await resolveAssistant(ctx, r.assistantId, identity).catch(() => {
    throw notFound(
      `No assistant found for "${r.assistantId}". Make sure the assistant ID is for a valid assistant or a valid graph ID.`,
    );
  });
  if (!ctx.graphs.has(assistant.graph_id))
    throw notFound(`Graph "${assistant.graph_id}" not found`);
  const temporary = threadId === null && (r.onCompletion ?? 'delete') === 'delete';
  const id = threadId ?? newId();
  const runId = newId();
  const asked: Json = {
    thread_id: threadId,
    assistant_id: assistant.assistant_id,
    run_id: runId,
    status: 'pending',
    metadata: r.metadata,
    multitask_strategy: r.multitask,
    if_not_exists: r.ifNotExists,
    after_seconds: r.afterSeconds,
    kwargs: { input: r.input ?? null, command: r.command, config: r.config, context: r.context },
  };
  const filters = await caller.authorize('threads:create_run', asked);
  const runMetadata = (asked.metadata as Json | null) ?? {};
  for (;;) {
    const existing = await ctx.threads.get(id);
    if (
      existing &&
      (!ownedBy(existing.value.owner, identity, true) ||
        !authMatches(existing.value.metadata, filters))
    )
      throw notFound(`Thread with ID ${id} not found`);
    if (!existing && threadId !== null && r.ifNotExists === 'reject')
      throw notFound(`Thread with ID ${id} not found`);
    const inflight = existing ? await ctx.queue.ofThread(id) : [];
    if (inflight.length > 0 && r.multitask === 'reject') throw conflict(REJECTED);

    const base: Thread = existing?.value ?? newThread(id, runMetadata, identity);
    const threadConfig = { ...assistant.config, ...base.config, ...r.config };
    const configurable: Json = {
      ...(assistant.config.configurable as Json | undefined),
      ...(base.config.configurable as Json | undefined),
      ...(r.config.configurable as Json | undefined),
      ...(r.checkpointId ? { checkpoint_id: r.checkpointId } : {}),
      ...r.checkpoint,
      ...authUser(caller),
      run_id: runId,
      thread_id: id,
      graph_id: assistant.graph_id,
      assistant_id: assistant.assistant_id,
    };
    const metadata = { ...assistant.metadata, ...base.metadata, ...runMetadata };
    const now = nowIso();
    const thread: Thread = {
      ...base,
      status: 'busy',
      updated_at: now,
      metadata: {
        ...base.metadata,
        graph_id: assistant.graph_id,
        assistant_id: assistant.assistant_id,
      },
      config: {
        ...threadConfig,
        configurable: { ...(threadConfig.configurable as Json | undefined) },
      },
    };
    const kwargs: RunKwargs = {
      input: r.input ?? null,
      command: r.command,
      stream_mode: r.streamMode,
      ...(r.interruptBefore !== undefined ? { interrupt_before: r.interruptBefore } : {}),
      ...(r.interruptAfter !== undefined ? { interrupt_after: r.interruptAfter } : {}),
      config: { ...assistant.config, ...r.config, configurable, metadata },
      context:
        typeof assistant.context === 'object' && assistant.context !== null
          ? { ...(assistant.context as Json), ...(r.context as Json | undefined) }
          : (r.context ?? assistant.context),
      subgraphs: r.subgraphs,
      resumable: r.resumable,
      temporary,
      webhook: r.webhook,
    };
    const run: Run = {
      run_id: runId,
      thread_id: id,
      assistant_id: assistant.assistant_id,
      created_at: now,
      updated_at: now,
      status: 'pending',
      metadata,
      kwargs,
      multitask_strategy: r.multitask,
      owner: identity,
    };
    const item = ctx.queue.newItem(runId, id, r.afterSeconds);
    try {
      await ctx.store.putEntries([
        {
          collection: COLLECTIONS.threads,
          id,
          data: thread as never,
          expectedVersion: existing?.version ?? null,
        },
        {
          collection: COLLECTIONS.runs,
          id: runId,
          group: id,
          data: run as never,
          expectedVersion: null,
        },
        {
          collection: COLLECTIONS.queue,
          id: runId,
          group: id,
          data: item as never,
          expectedVersion: null,
        },
      ]);
    } catch (e) {
      if (isCairnError(e, 'CONFLICT')) continue; // the thread changed meanwhile: decide again
      throw e;
    }
    if (r.multitask === 'interrupt' || r.multitask === 'rollback')
      for (const other of inflight) await cancelRun(ctx, other.run_id, r.multitask);
    return run;
  }
}

/** Stops a run (see `RunQueue.cancel`); a run no worker holds ends here, at once. */
export async function cancelRun(
  ctx: ServerContext,
  runId: string,
  action: 'interrupt' | 'rollback',
) {
  const outcome = await ctx.queue.cancel(runId, action);
  if (outcome !== 'removed') return;
  const run = await ctx.runs.get(runId);
  if (!run) return;
  const end = action === 'rollback' ? null : await (await ctx.log.writer(runId, true)).endEntry();
  await finishRun(
    ctx,
    run.value,
    { status: 'interrupted', rolledBack: action === 'rollback' },
    end,
  );
}

/**
 * The run of that thread, when the caller may `action` the thread (404 otherwise) and
 * see the run (null otherwise).
 */
async function getRun(
  ctx: ServerContext,
  runId: string,
  threadId: string,
  caller: Caller,
  action: 'read' | 'update' | 'delete' = 'read',
) {
  await getThread(ctx, threadId, caller, action, action === 'delete' ? { run_id: runId } : {});
  const run = await ctx.runs.get(runId);
  if (!run || run.value.thread_id !== threadId || !ownedBy(run.value.owner, caller.identity, true))
    return null;
  return run.value;
}

/** Waits for the run's end, returning its last `values` (or `{ __error__ }`), or the thread's values. */
async function waitForRun(ctx: ServerContext, run: Run, signal: AbortSignal): Promise<unknown> {
  let last: unknown = null;
  for await (const e of ctx.log.follow(run.run_id, -1, signal)) {
    if (e.event === 'values') last = e.data;
    else if (e.event === 'error') last = { __error__: e.data };
  }
  if (last !== null) return last;
  const thread = await ctx.threads.get(run.thread_id);
  return thread?.value.values ?? null;
}

/** Streams the run's events as SSE, from after `lastEventId` (or the first). */
async function streamEvents(
  ctx: ServerContext,
  req: RequestContext,
  runId: string,
  lastEventId: string | undefined,
  options: { headers?: Record<string, string>; cancelOnDisconnect: boolean },
) {
  const send = openSse(req.res, options.headers);
  const after = lastEventId !== undefined && /^\d+$/.test(lastEventId) ? Number(lastEventId) : -1;
  for await (const e of ctx.log.follow(runId, after, req.signal))
    await send({ id: String(e.seq), event: e.event, data: e.data });
  if (req.signal.aborted && options.cancelOnDisconnect) await cancelRun(ctx, runId, 'interrupt');
  req.res.end();
  return STREAMED;
}

/** Sends the run's result when it is ready, writing a newline every second until then (as the LangGraph API does). */
async function waitKeepAlive(
  req: RequestContext,
  result: Promise<unknown>,
  headers: Record<string, string>,
) {
  req.res.writeHead(200, { 'content-type': 'application/json', ...headers });
  const timer = setInterval(() => req.res.write('\n'), 1000);
  try {
    const value = await result;
    req.res.end(toJsonText(value));
  } finally {
    clearInterval(timer);
  }
  return STREAMED;
}

export function runRoutes(ctx: ServerContext): Route[] {
  const location = (run: Run, stateless: boolean) => ({
    'content-location': stateless
      ? `/runs/${run.run_id}`
      : `/threads/${run.thread_id}/runs/${run.run_id}`,
  });
  const threadParam = (p: Record<string, string>) => v.uuidParam(p.thread_id, 'thread_id');
  const runParam = (p: Record<string, string>) => v.uuidParam(p.run_id, 'run_id');

  const create = (stateless: boolean) => async (req: RequestContext) => {
    const r = checkRunBody(req.body);
    const run = await createRun(ctx, stateless ? null : threadParam(req.params), r, req.caller);
    return reply(200, shown(run), location(run, stateless));
  };
  const stream = (stateless: boolean) => async (req: RequestContext) => {
    const r = checkRunBody(req.body);
    const run = await createRun(ctx, stateless ? null : threadParam(req.params), r, req.caller);
    return streamEvents(ctx, req, run.run_id, undefined, {
      headers: location(run, stateless),
      cancelOnDisconnect: r.onDisconnect === 'cancel',
    });
  };
  const wait = (stateless: boolean) => async (req: RequestContext) => {
    const r = checkRunBody(req.body);
    const run = await createRun(ctx, stateless ? null : threadParam(req.params), r, req.caller);
    return waitKeepAlive(req, waitForRun(ctx, run, req.signal), location(run, stateless));
  };

  return [
    { method: 'POST', path: '/threads/:thread_id/runs', handler: create(false) },
    { method: 'POST', path: '/threads/:thread_id/runs/stream', handler: stream(false) },
    { method: 'POST', path: '/threads/:thread_id/runs/wait', handler: wait(false) },
    { method: 'POST', path: '/runs', handler: create(true) },
    { method: 'POST', path: '/runs/stream', handler: stream(true) },
    { method: 'POST', path: '/runs/wait', handler: wait(true) },
    {
      method: 'POST',
      path: '/runs/batch',
      handler: async ({ body, caller }) => {
        if (!Array.isArray(body)) throw v.badRequest('the body must be an array of runs');
        const checked = body.map(checkRunBody);
        const runs = [];
        for (const r of checked) runs.push(shown(await createRun(ctx, null, r, caller)));
        return runs;
      },
    },
    {
      method: 'GET',
      path: '/threads/:thread_id/runs',
      handler: async ({ params, query, caller }) => {
        const { identity } = caller;
        const threadId = threadParam(params);
        await getThread(ctx, threadId, caller);
        const q = v.queryBody(query);
        const { limit, offset } = v.paging(q);
        const status = v.optString(q, 'status');
        const runs = (await ctx.runs.all(threadId))
          .filter((r) => ownedBy(r.owner, identity, true) && (!status || r.status === status))
          .sort((a, b) => (a.run_id < b.run_id ? 1 : -1));
        return runs.slice(offset, offset + limit).map(shown);
      },
    },
    {
      method: 'GET',
      path: '/threads/:thread_id/runs/:run_id',
      handler: async ({ params, caller }) => {
        const run = await getRun(ctx, runParam(params), threadParam(params), caller);
        if (!run) throw notFound('Run not found');
        return shown(run);
      },
    },
    {
      method: 'DELETE',
      path: '/threads/:thread_id/runs/:run_id',
      handler: async ({ params, caller }) => {
        const run = await getRun(ctx, runParam(params), threadParam(params), caller, 'delete');
        if (!run) throw notFound('Run not found');
        if (await ctx.queue.items.get(run.run_id))
          throw conflict('Run is still pending or running: cancel it first');
        await ctx.log.delete(run.run_id);
        await ctx.runs.delete([run.run_id]);
        return reply(204);
      },
    },
    {
      method: 'GET',
      path: '/threads/:thread_id/runs/:run_id/join',
      handler: async (req) => {
        const run = await getRun(ctx, runParam(req.params), threadParam(req.params), req.caller);
        if (!run) throw notFound('Run not found');
        return waitForRun(ctx, run, req.signal);
      },
    },
    {
      method: 'GET',
      path: '/threads/:thread_id/runs/:run_id/stream',
      handler: async (req) => {
        let run: Run | null;
        try {
          run = await getRun(ctx, runParam(req.params), threadParam(req.params), req.caller);
        } catch (e) {
          // As the LangGraph API server: a thread the caller may not read is an error event.
          if (!(e instanceof HttpError) || e.status !== 404) throw e;
          await openSse(req.res)({
            event: 'error',
            data: { error: 'Error', message: '404: Thread not found' },
          });
          req.res.end();
          return STREAMED;
        }
        if (!run) throw notFound('Run not found');
        const lastEventId = req.headers['last-event-id'];
        return streamEvents(
          ctx,
          req,
          run.run_id,
          typeof lastEventId === 'string' ? lastEventId : undefined,
          {
            cancelOnDisconnect: req.query.get('cancel_on_disconnect') === 'true',
          },
        );
      },
    },
    {
      method: 'POST',
      path: '/threads/:thread_id/runs/:run_id/cancel',
      handler: async (req) => {
        const run = await getRun(
          ctx,
          runParam(req.params),
          threadParam(req.params),
          req.caller,
          'update',
        );
        if (!run) throw notFound('Run not found');
        const action = req.query.get('action') ?? 'interrupt';
        if (action !== 'interrupt' && action !== 'rollback')
          throw v.badRequest(
            `action must be "interrupt" or "rollback", got ${JSON.stringify(action)}`,
          );
        await cancelRun(ctx, run.run_id, action);
        const wait = req.query.get('wait') === 'true' || req.query.get('wait') === '1';
        if (wait) for await (const _ of ctx.log.follow(run.run_id, -1, req.signal));
        return reply(wait ? 204 : 202);
      },
    },
    {
      method: 'POST',
      path: '/runs/cancel',
      handler: async ({ body, caller }) => {
        const b = v.body(body, false);
        const action = v.optEnum(b, 'action', ['interrupt', 'rollback'] as const) ?? 'interrupt';
        const threadId = v.optString(b, 'thread_id');
        const ids = v.optStringArray(b, 'run_ids') ?? [];
        const status = v.optEnum(b, 'status', ['pending', 'running', 'all'] as const);
        let targets = ids;
        if (threadId) targets = (await ctx.queue.ofThread(threadId)).map((i) => i.run_id);
        else if (status) targets = (await ctx.queue.items.all()).map((i) => i.run_id);
        for (const id of targets) {
          const run = await ctx.runs.get(id);
          if (!run) continue;
          // Only runs of threads the caller may update are stopped; the others are left alone.
          const mine = await getRun(ctx, id, run.value.thread_id, caller, 'update').catch((e) => {
            if (e instanceof HttpError && e.status === 404) return null;
            throw e;
          });
          if (mine) await cancelRun(ctx, id, action);
        }
        return reply(204);
      },
    },
  ];
}
