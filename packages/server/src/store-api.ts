import type { Item } from '@langchain/langgraph-checkpoint';
import type { ServerContext } from './context.js';
import { HttpError, type Identity, type Route, reply } from './http.js';
import * as v from './validate.js';

/** A namespace the caller may use: labels without periods; with auth, starting with the caller's identity. */
function checkNamespace(ns: string[] | undefined, identity: Identity, required = true): string[] {
  const namespace = ns ?? [];
  if (required && namespace.length === 0) throw v.badRequest('Namespace is required');
  for (const label of namespace)
    if (!label || label.includes('.'))
      throw new HttpError(
        422,
        `Namespace labels cannot be empty or contain periods. Received: ${namespace.join('.')}`,
      );
  if (identity !== null && namespace.length > 0 && namespace[0] !== identity)
    throw new HttpError(
      403,
      `Not authorized: a store namespace must start with your identity ("${identity}")`,
    );
  return namespace;
}

const asApi = (item: Item | null) => {
  if (!item) return null;
  const { createdAt, updatedAt, ...rest } = item;
  return { ...rest, created_at: createdAt, updated_at: updatedAt };
};

/** The long-term store (`/store/…`) on `CairnStore`: the store graphs see as `config.store`. */
export function storeRoutes(ctx: ServerContext): Route[] {
  const memory = ctx.memory;
  return [
    {
      method: 'PUT',
      path: '/store/items',
      handler: async ({ body, identity }) => {
        const b = v.body(body, false);
        const namespace = checkNamespace(v.optStringArray(b, 'namespace'), identity);
        const key = v.optString(b, 'key');
        if (key === undefined) throw v.badRequest('key is required');
        const value = v.optObject(b, 'value');
        if (!value) throw v.badRequest('value must be an object');
        const index = b.index;
        if (index !== undefined && index !== null && index !== false && !Array.isArray(index))
          throw v.badRequest('index must be false or a list of field paths');
        await memory.put(
          namespace,
          key,
          value,
          (index ?? undefined) as false | string[] | undefined,
        );
        return reply(204);
      },
    },
    {
      method: 'GET',
      path: '/store/items',
      handler: async ({ query, identity }) => {
        const key = query.get('key');
        if (key === null) throw v.badRequest('key is required');
        const raw = query.get('namespace');
        const namespace = checkNamespace(raw ? raw.split('.') : [], identity, false);
        return asApi(await memory.get(namespace, key));
      },
    },
    {
      method: 'DELETE',
      path: '/store/items',
      handler: async ({ body, identity }) => {
        const b = v.body(body, false);
        const namespace = checkNamespace(v.optStringArray(b, 'namespace'), identity, false);
        const key = v.optString(b, 'key');
        if (key === undefined) throw v.badRequest('key is required');
        await memory.delete(namespace, key);
        return reply(204);
      },
    },
    {
      method: 'POST',
      path: '/store/items/search',
      handler: async ({ body, identity }) => {
        const b = v.body(body);
        let prefix = v.optStringArray(b, 'namespace_prefix') ?? [];
        if (prefix.length > 0) checkNamespace(prefix, identity);
        else if (identity !== null) prefix = [identity];
        const { limit, offset } = v.paging(b);
        const items = await memory.search(prefix, {
          limit,
          offset,
          ...(v.optObject(b, 'filter') ? { filter: v.optObject(b, 'filter') } : {}),
          ...(v.optString(b, 'query') ? { query: v.optString(b, 'query') } : {}),
        });
        return { items: items.map(asApi) };
      },
    },
    {
      method: 'POST',
      path: '/store/namespaces',
      handler: async ({ body, identity }) => {
        const b = v.body(body);
        let prefix = v.optStringArray(b, 'prefix');
        if (prefix?.length) checkNamespace(prefix, identity);
        else if (identity !== null) prefix = [identity];
        const suffix = v.optStringArray(b, 'suffix');
        const namespaces = await memory.listNamespaces({
          ...(prefix ? { prefix } : {}),
          ...(suffix ? { suffix } : {}),
          ...(v.optInt(b, 'max_depth', 1) !== undefined
            ? { maxDepth: v.optInt(b, 'max_depth', 1) }
            : {}),
          limit: v.optInt(b, 'limit', 1, 10_000) ?? 100,
          offset: v.optInt(b, 'offset', 0) ?? 0,
        });
        return { namespaces };
      },
    },
  ];
}
