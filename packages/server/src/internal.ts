import type { ServerContext } from './context.js';
import type { Route } from './http.js';
import { graphAssistantId } from './ids.js';
import { deleteThread } from './threads.js';
import * as v from './validate.js';

/**
 * `POST /internal/truncate`, which LangGraph's API test suite calls between tests to start
 * from an empty server: deletes every run, thread, assistant (but the graphs' own) or
 * store item, as its flags say. Served only with `testEndpoints`, never by default.
 */
export function internalRoutes(ctx: ServerContext): Route[] {
  return [
    {
      method: 'POST',
      path: '/internal/truncate',
      handler: async ({ body }) => {
        const b = v.body(body);
        if (v.optBool(b, 'runs')) {
          for await (const r of ctx.runs.scan()) await ctx.log.delete(r.id);
          for await (const r of ctx.runs.scan()) await ctx.runs.delete([r.id]);
          for await (const q of ctx.queue.items.scan()) await ctx.queue.items.delete([q.id]);
        }
        if (v.optBool(b, 'threads'))
          for await (const t of ctx.threads.scan()) await deleteThread(ctx, t.id);
        if (v.optBool(b, 'assistants'))
          for await (const a of ctx.assistants.scan())
            if (
              a.value.metadata.created_by !== 'system' ||
              graphAssistantId(a.value.graph_id) !== a.id
            ) {
              await ctx.assistantVersions.deleteGroup(a.id);
              await ctx.assistants.delete([a.id]);
            }
        if (v.optBool(b, 'store'))
          for (;;) {
            const items = await ctx.memory.search([], { limit: 1000 });
            if (items.length === 0) break;
            for (const item of items) await ctx.memory.delete(item.namespace, item.key);
          }
        return { ok: true };
      },
    },
  ];
}
