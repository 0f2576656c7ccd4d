import { isCairnError, newId } from '@cairn/core';
import { authMatches, type Caller, ownedBy } from './auth.js';
import { contains, nowIso } from './collection.js';
import type { AssistantVersion, ServerContext } from './context.js';
import { graphSchemas } from './graph-schemas.js';
import { conflict, HttpError, type Identity, notFound, type Route, reply } from './http.js';
import { graphAssistantId } from './ids.js';
import { type Assistant, type Json, selectFields, shown } from './model.js';
import { deleteThread } from './threads.js';
import * as v from './validate.js';

const missing = () => notFound('Assistant not found');
const versionId = (assistantId: string, version: number) =>
  `${assistantId}/${String(version).padStart(10, '0')}`;

/**
 * The assistant of an id, or of a graph id (the graph's own assistant), when the caller
 * may see it; 404 otherwise.
 */
export async function resolveAssistant(
  ctx: ServerContext,
  idOrGraph: string,
  identity: Identity,
): Promise<Assistant> {
  const id = ctx.graphs.has(idOrGraph) ? graphAssistantId(idOrGraph) : idOrGraph;
  const a = await ctx.assistants.get(id);
  if (!a || !ownedBy(a.value.owner, identity)) throw missing();
  return a.value;
}

/** Writes a new assistant and its version 1 together; `CONFLICT` when the id is taken. */
async function insertAssistant(ctx: ServerContext, a: Assistant): Promise<void> {
  const { updated_at: _, ...version } = a;
  await ctx.store.putEntries([
    {
      collection: ctx.assistants.name,
      id: a.assistant_id,
      data: a as never,
      expectedVersion: null,
    },
    {
      collection: ctx.assistantVersions.name,
      id: versionId(a.assistant_id, 1),
      group: a.assistant_id,
      data: version as never,
      expectedVersion: null,
    },
  ]);
}

/**
 * The assistant the server makes for each graph of `langgraph.json` (the id LangGraph
 * derives from the graph id), once: a restart keeps it as it is.
 */
export async function registerGraphAssistants(
  ctx: ServerContext,
  envConfig: Record<string, Json>,
): Promise<void> {
  for (const graphId of ctx.graphs.ids()) {
    const { context, ...config } = envConfig[graphId] ?? {};
    const now = nowIso();
    const assistant: Assistant = {
      assistant_id: graphAssistantId(graphId),
      graph_id: graphId,
      name: graphId,
      description: null,
      config,
      context: context ?? {},
      metadata: { created_by: 'system' },
      version: 1,
      created_at: now,
      updated_at: now,
      owner: null,
    };
    try {
      await insertAssistant(ctx, assistant);
    } catch (e) {
      if (!isCairnError(e, 'CONFLICT')) throw e;
    }
  }
}

function matches(a: Assistant, b: Json): boolean {
  const graphId = v.optString(b, 'graph_id');
  const name = v.optString(b, 'name');
  return (
    (graphId === undefined || a.graph_id === graphId) &&
    (name === undefined || a.name.toLowerCase().includes(name.toLowerCase())) &&
    contains(a.metadata, v.optObject(b, 'metadata'))
  );
}

async function search(ctx: ServerContext, b: Json, caller: Caller): Promise<Assistant[]> {
  const filters = await caller.authorize('assistants:search', {
    graph_id: b.graph_id,
    metadata: b.metadata,
    limit: b.limit,
    offset: b.offset,
  });
  const out: Assistant[] = [];
  for await (const { value } of ctx.assistants.scan())
    if (
      ownedBy(value.owner, caller.identity) &&
      authMatches(value.metadata, filters) &&
      matches(value, b)
    )
      out.push(value);
  return out;
}

function checkConfig(b: Json): Json | undefined {
  return v.optObject(b, 'config');
}

export function assistantRoutes(ctx: ServerContext): Route[] {
  const idParam = (p: Record<string, string>) =>
    ctx.graphs.has(p.assistant_id!) ? graphAssistantId(p.assistant_id!) : p.assistant_id!;
  /** The assistant, if the caller may `action` it (its auth handler, its owner); 404 otherwise. */
  const get = async (
    id: string,
    caller: Caller,
    action: 'read' | 'update' | 'delete' = 'read',
    value: Json = {},
  ) => {
    const filters = await caller.authorize(`assistants:${action}`, { assistant_id: id, ...value });
    const a = await ctx.assistants.get(id);
    if (
      !a ||
      !ownedBy(a.value.owner, caller.identity, action !== 'read') ||
      !authMatches(a.value.metadata, filters)
    )
      throw missing();
    return a;
  };

  return [
    {
      method: 'POST',
      path: '/assistants',
      handler: async ({ body, caller }) => {
        const { identity } = caller;
        const b = v.body(body, false);
        const graphId = v.optString(b, 'graph_id');
        if (!graphId) throw v.badRequest('graph_id is required');
        if (!ctx.graphs.has(graphId)) throw notFound(`Graph "${graphId}" not found`);
        const given = v.optString(b, 'assistant_id');
        if (given !== undefined && !v.isUuid(given))
          throw v.badRequest('assistant_id must be a UUID');
        const ifExists = v.optEnum(b, 'if_exists', ['raise', 'do_nothing'] as const) ?? 'raise';
        const asked: Json = {
          assistant_id: given?.toLowerCase() ?? newId(),
          graph_id: graphId,
          config: checkConfig(b) ?? {},
          context: b.context ?? {},
          metadata: v.optObject(b, 'metadata') ?? {},
          if_exists: ifExists,
          name: v.optString(b, 'name') || 'Untitled',
          description: v.optString(b, 'description') ?? null,
        };
        const filters = await caller.authorize('assistants:create', asked);
        const now = nowIso();
        const assistant: Assistant = {
          assistant_id: asked.assistant_id as string,
          graph_id: graphId,
          name: asked.name as string,
          description: asked.description as string | null,
          config: asked.config as Json,
          context: asked.context,
          metadata: (asked.metadata as Json | null) ?? {},
          version: 1,
          created_at: now,
          updated_at: now,
          owner: identity,
        };
        try {
          await insertAssistant(ctx, assistant);
        } catch (e) {
          if (!isCairnError(e, 'CONFLICT')) throw e;
          const existing = await ctx.assistants.get(assistant.assistant_id);
          if (
            ifExists === 'raise' ||
            !existing ||
            !ownedBy(existing.value.owner, identity, true) ||
            !authMatches(existing.value.metadata, filters)
          )
            throw conflict('Assistant already exists');
          return shown(existing.value);
        }
        return shown(assistant);
      },
    },
    {
      method: 'POST',
      path: '/assistants/search',
      handler: async ({ body, caller }) => {
        const b = v.body(body);
        const { limit, offset } = v.paging(b);
        const sortBy =
          v.optEnum(b, 'sort_by', [
            'assistant_id',
            'graph_id',
            'name',
            'created_at',
            'updated_at',
          ] as const) ?? 'created_at';
        const sign =
          (v.optEnum(b, 'sort_order', ['asc', 'desc'] as const) ?? 'desc') === 'desc' ? -1 : 1;
        const select = v.optStringArray(b, 'select');
        const all = (await search(ctx, b, caller)).sort((x, y) => {
          const a = String(x[sortBy]);
          const c = String(y[sortBy]);
          return sign * (a < c ? -1 : a > c ? 1 : 0);
        });
        const headers: Record<string, string> = { 'x-pagination-total': String(all.length) };
        if (offset + limit < all.length) headers['x-pagination-next'] = String(offset + limit);
        return reply(
          200,
          all.slice(offset, offset + limit).map((a) => selectFields(shown(a), select)),
          headers,
        );
      },
    },
    {
      method: 'POST',
      path: '/assistants/count',
      handler: async ({ body, caller }) => (await search(ctx, v.body(body), caller)).length,
    },
    {
      method: 'GET',
      path: '/assistants/:assistant_id',
      handler: async ({ params, caller }) => shown((await get(idParam(params), caller)).value),
    },
    {
      method: 'PATCH',
      path: '/assistants/:assistant_id',
      handler: async ({ params, body, caller }) => {
        const id = idParam(params);
        const b = v.body(body);
        const graphId = v.optString(b, 'graph_id');
        if (graphId !== undefined && !ctx.graphs.has(graphId))
          throw notFound(`Graph "${graphId}" not found`);
        const asked: Json = {
          graph_id: graphId,
          config: b.config,
          context: b.context,
          metadata: v.optObject(b, 'metadata'),
          name: b.name,
          description: b.description,
        };
        for (let first = true; ; first = false) {
          const current = await get(id, caller, 'update', first ? asked : {});
          const versions = await ctx.assistantVersions.all(id);
          const next = Math.max(0, ...versions.map((x) => x.version)) + 1;
          const a = current.value;
          const metadata = asked.metadata as Json | undefined;
          const updated: Assistant = {
            ...a,
            graph_id: graphId ?? a.graph_id,
            config: checkConfig(b) ?? a.config,
            context: b.context ?? a.context,
            name: v.optString(b, 'name') ?? a.name,
            description: v.optString(b, 'description') ?? a.description,
            metadata: metadata ? { ...a.metadata, ...metadata } : a.metadata,
            version: next,
            updated_at: nowIso(),
          };
          const { updated_at, ...version } = updated;
          try {
            await ctx.store.putEntries([
              {
                collection: ctx.assistants.name,
                id,
                data: updated as never,
                expectedVersion: current.version,
              },
              {
                collection: ctx.assistantVersions.name,
                id: versionId(id, next),
                group: id,
                data: { ...version, created_at: updated_at } as never,
                expectedVersion: null,
              },
            ]);
            return shown(updated);
          } catch (e) {
            if (!isCairnError(e, 'CONFLICT')) throw e;
          }
        }
      },
    },
    {
      method: 'DELETE',
      path: '/assistants/:assistant_id',
      handler: async ({ params, query, caller }) => {
        const { identity } = caller;
        const id = idParam(params);
        await get(id, caller, 'delete');
        if (query.get('delete_threads') === 'true') {
          for await (const t of ctx.threads.scan())
            if (t.value.metadata.assistant_id === id && ownedBy(t.value.owner, identity, true))
              await deleteThread(ctx, t.id);
        }
        await ctx.assistantVersions.deleteGroup(id);
        await ctx.assistants.delete([id]);
        return [id];
      },
    },
    {
      method: 'POST',
      path: '/assistants/:assistant_id/versions',
      handler: async ({ params, body, caller }) => {
        const id = idParam(params);
        const b = v.body(body);
        const { limit, offset } = v.paging(b);
        const metadata = v.optObject(b, 'metadata');
        await get(id, caller).catch((e) => {
          throw e instanceof HttpError && e.status === 404
            ? notFound(`Assistant "${id}" not found.`)
            : e;
        });
        const versions = (await ctx.assistantVersions.all(id))
          .filter((x) => contains(x.metadata, metadata))
          .sort((x, y) => y.version - x.version)
          .slice(offset, offset + limit);
        if (versions.length === 0) throw notFound(`Assistant "${id}" not found.`);
        return versions.map(shown);
      },
    },
    {
      method: 'POST',
      path: '/assistants/:assistant_id/latest',
      handler: async ({ params, body, caller }) => {
        const id = idParam(params);
        const version = v.optInt(v.body(body, false), 'version', 1);
        if (version === undefined) throw v.badRequest('version is required');
        for (;;) {
          const current = await get(id, caller, 'update', { version });
          const chosen = (await ctx.assistantVersions.get(versionId(id, version)))?.value as
            | AssistantVersion
            | undefined;
          if (!chosen) throw notFound('Assistant version not found');
          const updated: Assistant = {
            ...current.value,
            config: chosen.config,
            context: chosen.context,
            metadata: chosen.metadata,
            name: chosen.name,
            graph_id: chosen.graph_id,
            version: chosen.version,
            updated_at: nowIso(),
          };
          try {
            await ctx.assistants.put(id, updated, { expectedVersion: current.version });
            return shown(updated);
          } catch (e) {
            if (!isCairnError(e, 'CONFLICT')) throw e;
          }
        }
      },
    },
    {
      method: 'GET',
      path: '/assistants/:assistant_id/graph',
      handler: async ({ params, query, caller }) => {
        const a = (await get(idParam(params), caller)).value;
        const graph = await ctx.graph(a.graph_id, a.config);
        const xray = query.get('xray');
        const options = {
          ...a.config,
          ...(xray ? { xray: xray === 'true' ? true : Number(xray) } : {}),
        };
        const drawable = graph.getGraphAsync
          ? await graph.getGraphAsync(options)
          : graph.getGraph!(options);
        return drawable.toJSON();
      },
    },
    {
      method: 'GET',
      path: '/assistants/:assistant_id/schemas',
      handler: async ({ params, caller }) => {
        const a = (await get(idParam(params), caller)).value;
        const graph = await ctx.graph(a.graph_id, a.config);
        const schemas = await graphSchemas(graph);
        return { graph_id: a.graph_id, ...schemas };
      },
    },
    ...[
      '/assistants/:assistant_id/subgraphs',
      '/assistants/:assistant_id/subgraphs/:namespace',
    ].map(
      (path): Route => ({
        method: 'GET',
        path,
        handler: async ({ params, query, caller }) => {
          const a = (await get(idParam(params), caller)).value;
          const graph = await ctx.graph(a.graph_id, a.config);
          const out: Json = {};
          if (!graph.getSubgraphsAsync) return out;
          for await (const [ns, sub] of graph.getSubgraphsAsync(
            params.namespace,
            query.get('recurse') === 'true',
          )) {
            // Subgraphs show LangGraph's own schema shape: state, input, output, config.
            const g = await graphSchemas(sub);
            out[ns] = {
              state: g.state_schema,
              input: g.input_schema,
              output: g.output_schema,
              config: g.config_schema,
            };
          }
          return out;
        },
      }),
    ),
  ];
}
