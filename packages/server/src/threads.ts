import { isCairnError, newId } from '@cairn/core';
import { authMatches, type Caller, ownedBy } from './auth.js';
import { contains, nowIso } from './collection.js';
import type { ServerContext } from './context.js';
import type { StateSnapshotLike } from './graphs.js';
import {
  conflict,
  HttpError,
  type Identity,
  notFound,
  type Route,
  reply,
  toPlainJson,
} from './http.js';
import { type Json, selectFields, shown, type Thread, type ThreadStatus } from './model.js';
import { toCommand } from './stream.js';
import * as v from './validate.js';

const THREAD_STATUSES: readonly ThreadStatus[] = ['idle', 'busy', 'interrupted', 'error'];
const missing = (id: string) => notFound(`Thread with ID ${id} not found`);

/** The thread, if the caller may `action` it (its auth handler, its owner); 404 otherwise. */
export async function getThread(
  ctx: ServerContext,
  id: string,
  caller: Caller,
  action: 'read' | 'update' | 'delete' = 'read',
  value: Json = {},
) {
  const filters = await caller.authorize(`threads:${action}`, { thread_id: id, ...value });
  const t = await ctx.threads.get(id);
  if (
    !t ||
    !ownedBy(t.value.owner, caller.identity, true) ||
    !authMatches(t.value.metadata, filters)
  )
    throw missing(id);
  return t;
}

/**
 * Rewrites the thread with `change` applied, by compare-and-set: retried when another
 * writer (a run starting or ending) got there first.
 */
export async function updateThread(
  ctx: ServerContext,
  id: string,
  change: (t: Thread) => Thread | Promise<Thread>,
): Promise<Thread | null> {
  for (;;) {
    const t = await ctx.threads.get(id);
    if (!t) return null;
    const next = await change(t.value);
    try {
      await ctx.threads.put(id, next, { expectedVersion: t.version });
      return next;
    } catch (e) {
      if (!isCairnError(e, 'CONFLICT')) throw e;
    }
  }
}

/** A LangGraph state snapshot as the protocol shows it. */
export function threadState(state: StateSnapshotLike): Json {
  const checkpoint = (config: StateSnapshotLike['config'] | undefined) => {
    const c = config?.configurable;
    if (!c?.checkpoint_id) return null;
    return {
      thread_id: c.thread_id,
      checkpoint_ns: c.checkpoint_ns ?? '',
      checkpoint_id: c.checkpoint_id,
      checkpoint_map: c.checkpoint_map ?? null,
    };
  };
  const metadata = state.metadata ? { ...state.metadata } : undefined;
  if (metadata && metadata.checkpoint_ns === '') delete metadata.checkpoint_ns;
  return toPlainJson({
    values: state.values,
    next: state.next,
    tasks: state.tasks.map((task) => {
      const s = task.state as StateSnapshotLike | { configurable?: Json } | undefined;
      return {
        id: task.id,
        name: task.name,
        error: task.error != null ? ((task.error as Error).message ?? String(task.error)) : null,
        interrupts: task.interrupts ?? [],
        path: task.path,
        checkpoint: s && 'configurable' in s ? (s.configurable ?? null) : null,
        state: s && 'values' in s && 'next' in s ? threadState(s as StateSnapshotLike) : null,
        result: task.result ?? null,
      };
    }),
    metadata,
    created_at: state.createdAt ?? null,
    checkpoint: checkpoint(state.config),
    parent_checkpoint: checkpoint(state.parentConfig),
  });
}

const EMPTY_STATE = {
  values: {},
  next: [],
  tasks: [],
  metadata: undefined,
  created_at: null,
  checkpoint: null,
  parent_checkpoint: null,
};

/** The thread's graph on the server's checkpointer, or null when no run has named one yet. */
async function threadGraph(ctx: ServerContext, thread: Thread) {
  const graphId = thread.metadata.graph_id;
  if (typeof graphId !== 'string') return null;
  return ctx.graph(graphId, thread.config);
}

/** Values and interrupts of the thread's latest state, as a thread shows them. */
export async function latestValues(ctx: ServerContext, thread: Thread) {
  const graph = await threadGraph(ctx, thread);
  if (!graph) return null;
  const state = await graph.getState({ configurable: { thread_id: thread.thread_id } });
  const interrupts: Record<string, unknown> = {};
  for (const task of state.tasks)
    if ((task.interrupts as unknown[] | undefined)?.length)
      interrupts[task.id as string] = task.interrupts;
  return {
    state,
    values: toPlainJson(state.values),
    interrupts: toPlainJson(interrupts) as Record<string, unknown>,
  };
}

/** Deletes a thread and everything the server and the checkpointer hold of it. */
export async function deleteThread(ctx: ServerContext, id: string): Promise<void> {
  for await (const run of ctx.runs.scan(id)) await ctx.log.delete(run.id);
  await ctx.runs.deleteGroup(id);
  await ctx.queue.items.deleteGroup(id);
  await ctx.saver.deleteThread(id);
  await ctx.threads.delete([id]);
}

/** A new thread's record. */
export function newThread(
  id: string,
  metadata: Json,
  identity: Identity,
  status: ThreadStatus = 'idle',
): Thread {
  const now = nowIso();
  return {
    thread_id: id,
    created_at: now,
    updated_at: now,
    metadata,
    status,
    config: {},
    values: null,
    interrupts: {},
    owner: identity,
  };
}

function sortThreads(list: Thread[], by: string, order: 'asc' | 'desc') {
  const sign = order === 'desc' ? -1 : 1;
  const key = (t: Thread) => String((t as unknown as Json)[by] ?? '');
  return list.sort((a, b) => sign * (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

async function search(ctx: ServerContext, b: Json, caller: Caller) {
  const metadata = v.optObject(b, 'metadata');
  const values = v.optObject(b, 'values');
  const status = v.optEnum(b, 'status', THREAD_STATUSES);
  const ids = v.optStringArray(b, 'ids');
  const filters = await caller.authorize('threads:search', {
    ids,
    metadata,
    values,
    status,
    limit: b.limit,
    offset: b.offset,
  });
  const matches: Thread[] = [];
  for await (const { value: t } of ctx.threads.scan()) {
    if (!ownedBy(t.owner, caller.identity, true) || !authMatches(t.metadata, filters)) continue;
    if (ids && !ids.includes(t.thread_id)) continue;
    if (status && t.status !== status) continue;
    if (!contains(t.metadata, metadata)) continue;
    if (values && !contains(t.values ?? {}, values)) continue;
    matches.push(t);
  }
  return matches;
}

export function threadRoutes(ctx: ServerContext): Route[] {
  return [
    {
      method: 'POST',
      path: '/threads',
      handler: async ({ body, caller }) => {
        const b = v.body(body);
        const given = v.optString(b, 'thread_id');
        if (given !== undefined && !v.isUuid(given)) throw v.badRequest('thread_id must be a UUID');
        const id = given?.toLowerCase() ?? newId();
        const ifExists = v.optEnum(b, 'if_exists', ['raise', 'do_nothing'] as const) ?? 'raise';
        const supersteps = b.supersteps;
        if (supersteps !== undefined && !Array.isArray(supersteps))
          throw v.badRequest('supersteps must be an array');
        const asked = {
          thread_id: id,
          metadata: v.optObject(b, 'metadata') ?? {},
          if_exists: ifExists,
        };
        const filters = await caller.authorize('threads:create', asked);
        const metadata = (asked.metadata as Json | null) ?? {};
        try {
          await ctx.threads.put(id, newThread(id, metadata, caller.identity), {
            expectedVersion: null,
          });
        } catch (e) {
          if (!isCairnError(e, 'CONFLICT')) throw e;
          const existing = await ctx.threads.get(id);
          if (
            ifExists === 'raise' ||
            !existing ||
            !ownedBy(existing.value.owner, caller.identity, true) ||
            !authMatches(existing.value.metadata, filters)
          )
            throw conflict('Thread already exists');
          return shown(existing.value);
        }
        if (Array.isArray(supersteps) && supersteps.length > 0) {
          const t = (await ctx.threads.get(id))!.value;
          const graph = await threadGraph(ctx, t);
          if (!graph?.bulkUpdateState) throw v.badRequest(`Thread ${id} has no graph ID`);
          await graph.bulkUpdateState(
            { configurable: { thread_id: id, checkpoint_ns: '' } },
            (supersteps as Json[]).map((step) => ({
              updates: ((step.updates as Json[] | undefined) ?? []).map((u) => ({
                values: u.command ? toCommand(u.command as Json) : u.values,
                asNode: u.as_node,
              })),
            })),
          );
          const latest = await latestValues(ctx, t);
          await updateThread(ctx, id, (x) => ({ ...x, values: latest?.values ?? null }));
        }
        return shown((await ctx.threads.get(id))!.value);
      },
    },
    {
      method: 'POST',
      path: '/threads/search',
      handler: async ({ body, caller }) => {
        const b = v.body(body);
        const { limit, offset } = v.paging(b);
        const sortBy =
          v.optEnum(b, 'sort_by', ['thread_id', 'status', 'created_at', 'updated_at'] as const) ??
          'created_at';
        const sortOrder = v.optEnum(b, 'sort_order', ['asc', 'desc'] as const) ?? 'desc';
        const select = v.optStringArray(b, 'select');
        const all = sortThreads(await search(ctx, b, caller), sortBy, sortOrder);
        const page = all.slice(offset, offset + limit).map((t) => selectFields(shown(t), select));
        const headers: Record<string, string> = { 'x-pagination-total': String(all.length) };
        if (offset + limit < all.length) headers['x-pagination-next'] = String(offset + limit);
        return reply(200, page, headers);
      },
    },
    {
      method: 'POST',
      path: '/threads/count',
      handler: async ({ body, caller }) => (await search(ctx, v.body(body), caller)).length,
    },
    {
      method: 'GET',
      path: '/threads/:thread_id',
      handler: async ({ params, caller }) =>
        shown((await getThread(ctx, v.uuidParam(params.thread_id, 'thread_id'), caller)).value),
    },
    {
      method: 'PATCH',
      path: '/threads/:thread_id',
      handler: async ({ params, body, caller }) => {
        const id = v.uuidParam(params.thread_id, 'thread_id');
        const asked: Json = { metadata: v.optObject(v.body(body, false), 'metadata') };
        if (!asked.metadata) throw v.badRequest('metadata is required');
        await getThread(ctx, id, caller, 'update', asked).catch((e) => {
          throw e instanceof HttpError && e.status === 404 ? notFound('Thread not found') : e;
        });
        const metadata = (asked.metadata as Json | null) ?? {};
        const t = await updateThread(ctx, id, (t) => ({
          ...t,
          metadata: { ...t.metadata, ...metadata },
          updated_at: nowIso(),
        }));
        if (!t) throw notFound('Thread not found');
        return shown(t);
      },
    },
    {
      method: 'DELETE',
      path: '/threads/:thread_id',
      handler: async ({ params, caller }) => {
        const id = v.uuidParam(params.thread_id, 'thread_id');
        await getThread(ctx, id, caller, 'delete');
        for (const item of await ctx.queue.ofThread(id))
          await ctx.queue.cancel(item.run_id, 'interrupt');
        await deleteThread(ctx, id);
        return reply(204);
      },
    },
    {
      method: 'POST',
      path: '/threads/:thread_id/copy',
      handler: async ({ params, caller }) => {
        const id = v.uuidParam(params.thread_id, 'thread_id');
        // As the LangGraph API server: a thread the caller may not read is a 409 here.
        const from = await getThread(ctx, id, caller).catch((e) => {
          throw e instanceof HttpError && e.status === 404 ? conflict('Thread not found') : e;
        });
        const copyId = newId();
        const asked: Json = {
          thread_id: copyId,
          metadata: { ...from.value.metadata, thread_id: copyId },
        };
        await caller.authorize('threads:create', asked);
        await copyCheckpoints(ctx, id, copyId);
        const copy: Thread = {
          ...newThread(copyId, (asked.metadata as Json | null) ?? {}, caller.identity),
          config: from.value.config,
          values: from.value.values ?? null,
          interrupts: from.value.interrupts ?? {},
        };
        await ctx.threads.put(copyId, copy, { expectedVersion: null });
        return shown(copy);
      },
    },
    {
      method: 'GET',
      path: '/threads/:thread_id/state',
      handler: async ({ params, query, caller }) => {
        const id = v.uuidParam(params.thread_id, 'thread_id');
        return stateAt(ctx, id, {}, query.get('subgraphs') === 'true', caller);
      },
    },
    {
      method: 'GET',
      path: '/threads/:thread_id/state/:checkpoint_id',
      handler: async ({ params, query, caller }) => {
        const id = v.uuidParam(params.thread_id, 'thread_id');
        return stateAt(
          ctx,
          id,
          { checkpoint_id: params.checkpoint_id },
          query.get('subgraphs') === 'true',
          caller,
        );
      },
    },
    {
      method: 'POST',
      path: '/threads/:thread_id/state/checkpoint',
      handler: async ({ params, body, caller }) => {
        const id = v.uuidParam(params.thread_id, 'thread_id');
        const b = v.body(body);
        return stateAt(
          ctx,
          id,
          v.optObject(b, 'checkpoint') ?? {},
          v.optBool(b, 'subgraphs') ?? false,
          caller,
        );
      },
    },
    {
      method: 'POST',
      path: '/threads/:thread_id/state',
      handler: async ({ params, body, caller }) => {
        const id = v.uuidParam(params.thread_id, 'thread_id');
        const b = v.body(body);
        const asNode = v.optString(b, 'as_node');
        const checkpoint = v.optObject(b, 'checkpoint');
        const checkpointId = v.optString(b, 'checkpoint_id');
        const thread = await getThread(ctx, id, caller, 'update').catch((e) => {
          throw e instanceof HttpError && e.status === 404 ? notFound(`Thread ${id} not found`) : e;
        });
        if ((await ctx.queue.ofThread(id)).length > 0) throw conflict('Thread is busy');
        const graph = await threadGraph(ctx, thread.value);
        if (!graph) throw v.badRequest(`Thread ${id} has no graph ID`);
        const configurable: Json = {
          thread_id: id,
          checkpoint_ns: '',
          ...checkpoint,
          ...(checkpointId ? { checkpoint_id: checkpointId } : {}),
        };
        const next = await graph.updateState({ configurable }, b.values ?? null, asNode);
        const latest = await latestValues(ctx, thread.value);
        await updateThread(ctx, id, (t) => ({
          ...t,
          values: latest?.values ?? t.values,
          updated_at: nowIso(),
        }));
        return { checkpoint: next.configurable };
      },
    },
    {
      method: 'GET',
      path: '/threads/:thread_id/history',
      handler: async ({ params, query, caller }) => {
        const id = v.uuidParam(params.thread_id, 'thread_id');
        const q = v.queryBody(query);
        return history(
          ctx,
          id,
          { limit: v.optInt(q, 'limit', 1) ?? 10, before: v.optString(q, 'before') },
          caller,
        );
      },
    },
    {
      method: 'POST',
      path: '/threads/:thread_id/history',
      handler: async ({ params, body, caller }) => {
        const id = v.uuidParam(params.thread_id, 'thread_id');
        const b = v.body(body);
        return history(
          ctx,
          id,
          {
            limit: v.optInt(b, 'limit', 1) ?? 10,
            before:
              v.optString(b, 'before') ??
              ((v.optObject(b, 'before')?.configurable as Json | undefined)?.checkpoint_id as
                | string
                | undefined),
            metadata: v.optObject(b, 'metadata'),
            checkpoint: v.optObject(b, 'checkpoint'),
          },
          caller,
        );
      },
    },
  ];
}

async function stateAt(
  ctx: ServerContext,
  id: string,
  checkpoint: Json,
  subgraphs: boolean,
  caller: Caller,
) {
  const thread = await getThread(ctx, id, caller);
  const graph = await threadGraph(ctx, thread.value);
  if (!graph) return EMPTY_STATE;
  const state = await graph.getState(
    { configurable: { thread_id: id, ...checkpoint } },
    { subgraphs },
  );
  return threadState(state);
}

async function history(
  ctx: ServerContext,
  id: string,
  options: {
    limit: number;
    before?: string | undefined;
    metadata?: Json | undefined;
    checkpoint?: Json | undefined;
  },
  caller: Caller,
) {
  const thread = await getThread(ctx, id, caller);
  const graph = await threadGraph(ctx, thread.value);
  if (!graph) return [];
  const out: Json[] = [];
  for await (const state of graph.getStateHistory(
    { configurable: { thread_id: id, checkpoint_ns: '', ...options.checkpoint } },
    {
      limit: options.limit,
      ...(options.before ? { before: { configurable: { checkpoint_id: options.before } } } : {}),
      ...(options.metadata ? { filter: options.metadata } : {}),
    },
  ))
    out.push(threadState(state));
  return out;
}

/** Copies every checkpoint of a thread (all namespaces, oldest first) to a new thread. */
async function copyCheckpoints(ctx: ServerContext, from: string, to: string): Promise<void> {
  const tuples = [];
  for await (const t of ctx.saver.list({ configurable: { thread_id: from } })) tuples.push(t);
  for (const t of tuples.reverse()) {
    const ns = (t.config.configurable?.checkpoint_ns as string | undefined) ?? '';
    const parentId = t.parentConfig?.configurable?.checkpoint_id as string | undefined;
    const versions = t.checkpoint.channel_versions;
    const config = {
      configurable: {
        thread_id: to,
        checkpoint_ns: ns,
        ...(parentId ? { checkpoint_id: parentId } : {}),
      },
    };
    const written = await ctx.saver.put(
      config,
      t.checkpoint,
      t.metadata ?? ({} as never),
      versions,
    );
    const writes = t.pendingWrites ?? [];
    const byTask = new Map<string, Array<[string, unknown]>>();
    for (const [taskId, channel, value] of writes)
      byTask.set(taskId, [...(byTask.get(taskId) ?? []), [channel, value]]);
    for (const [taskId, list] of byTask) await ctx.saver.putWrites(written, list, taskId);
  }
}
