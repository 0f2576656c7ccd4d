import type { Item } from '@langchain/langgraph-checkpoint';
import { type AuthFilters, authMatches } from './auth.js';
import type { ServerContext } from './context.js';
import { HttpError, type Identity, notFound, type Route, reply } from './http.js';
import type { Json } from './model.js';
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

/**
 * Whether an item passes a LangGraph auth handler's store filters, matched (as the
 * LangGraph API server matches them) against its value with its `namespace` and `key`.
 */
const itemMatches = (
  namespace: string[],
  key: string | undefined,
  value: Json | undefined,
  filters: AuthFilters | undefined,
) => authMatches({ ...value, namespace, ...(key === undefined ? {} : { key }) }, filters);

/** How far a filtered search or listing reads before it gives up (the LangGraph API server's limit). */
const AUTH_SCAN_LIMIT = 10_000;
const AUTH_SCAN_PAGE = 1000;

/**
 * `offset`/`limit` of the results that pass `keep`, reading pages of `read(offset, limit)`
 * (all results when there are no filters: one read); 400 past `AUTH_SCAN_LIMIT` read.
 */
async function authorizedPage<T>(
  filters: AuthFilters | undefined,
  offset: number,
  limit: number,
  read: (offset: number, limit: number) => Promise<T[]>,
  keep: (x: T) => boolean,
): Promise<T[]> {
  if (!filters) return read(offset, limit);
  const kept: T[] = [];
  let scanned = 0;
  while (kept.length < offset + limit) {
    if (scanned >= AUTH_SCAN_LIMIT)
      throw v.badRequest(
        'Authenticated store query exceeded maximum scan limit. Narrow the namespace or filters.',
      );
    const page = await read(scanned, Math.min(AUTH_SCAN_PAGE, AUTH_SCAN_LIMIT - scanned));
    scanned += page.length;
    kept.push(...page.filter(keep));
    if (page.length < AUTH_SCAN_PAGE) break;
  }
  return kept.slice(offset, offset + limit);
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
      handler: async ({ body, caller }) => {
        const { identity } = caller;
        const b = v.body(body, false);
        checkNamespace(v.optStringArray(b, 'namespace'), identity);
        const asked: Json = { namespace: b.namespace, key: b.key, value: b.value };
        const filters = await caller.authorize('store:put', asked);
        const namespace = checkNamespace(v.optStringArray(asked, 'namespace'), identity);
        const key = v.optString(asked, 'key');
        if (key === undefined) throw v.badRequest('key is required');
        const value = v.optObject(asked, 'value');
        if (!value) throw v.badRequest('value must be an object');
        const index = b.index;
        if (index !== undefined && index !== null && index !== false && !Array.isArray(index))
          throw v.badRequest('index must be false or a list of field paths');
        if (filters) {
          const existing = await memory.get(namespace, key);
          if (existing && !itemMatches(existing.namespace, key, existing.value, filters))
            throw notFound('Item not found');
          if (!itemMatches(namespace, key, value, filters))
            throw new HttpError(403, 'Not authorized');
        }
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
      handler: async ({ query, caller }) => {
        const { identity } = caller;
        const raw = query.get('namespace');
        const asked: Json = { namespace: raw ? raw.split('.') : [], key: query.get('key') };
        const filters = await caller.authorize('store:get', asked);
        const key = v.optString(asked, 'key');
        if (key === undefined) throw v.badRequest('key is required');
        const namespace = checkNamespace(v.optStringArray(asked, 'namespace'), identity, false);
        const item = await memory.get(namespace, key);
        if (item && !itemMatches(item.namespace, key, item.value, filters))
          throw notFound('Item not found');
        return asApi(item);
      },
    },
    {
      method: 'DELETE',
      path: '/store/items',
      handler: async ({ body, caller }) => {
        const { identity } = caller;
        const b = v.body(body, false);
        checkNamespace(v.optStringArray(b, 'namespace'), identity, false);
        const asked: Json = { namespace: b.namespace, key: b.key };
        const filters = await caller.authorize('store:delete', asked);
        const namespace = checkNamespace(v.optStringArray(asked, 'namespace'), identity, false);
        const key = v.optString(asked, 'key');
        if (key === undefined) throw v.badRequest('key is required');
        if (filters) {
          const existing = await memory.get(namespace, key);
          if (existing && !itemMatches(existing.namespace, key, existing.value, filters))
            throw notFound('Item not found');
          if (!existing && !itemMatches(namespace, key, undefined, filters))
            throw new HttpError(403, 'Not authorized');
        }
        await memory.delete(namespace, key);
        return reply(204);
      },
    },
    {
      method: 'POST',
      path: '/store/items/search',
      handler: async ({ body, caller }) => {
        const { identity } = caller;
        const b = v.body(body);
        let prefix = v.optStringArray(b, 'namespace_prefix') ?? [];
        if (prefix.length > 0) checkNamespace(prefix, identity);
        else if (identity !== null) prefix = [identity];
        const { limit, offset } = v.paging(b);
        const filter = v.optObject(b, 'filter');
        const text = v.optString(b, 'query');
        const filters = await caller.authorize('store:search', {
          namespace: prefix,
          filter,
          limit,
          offset,
          query: text,
        });
        const items = await authorizedPage(
          filters,
          offset,
          limit,
          (offset, limit) =>
            memory.search(prefix, {
              limit,
              offset,
              ...(filter ? { filter } : {}),
              ...(text ? { query: text } : {}),
            }),
          (item) => itemMatches(item.namespace, item.key, item.value, filters),
        );
        return { items: items.map(asApi) };
      },
    },
    {
      method: 'POST',
      path: '/store/namespaces',
      handler: async ({ body, caller }) => {
        const { identity } = caller;
        const b = v.body(body);
        let prefix = v.optStringArray(b, 'prefix');
        if (prefix?.length) checkNamespace(prefix, identity);
        else if (identity !== null) prefix = [identity];
        const suffix = v.optStringArray(b, 'suffix');
        const maxDepth = v.optInt(b, 'max_depth', 1);
        const limit = v.optInt(b, 'limit', 1, 10_000) ?? 100;
        const offset = v.optInt(b, 'offset', 0) ?? 0;
        const filters = await caller.authorize('store:list_namespaces', {
          namespace: prefix,
          suffix,
          max_depth: maxDepth,
          limit,
          offset,
        });
        const namespaces = await authorizedPage(
          filters,
          offset,
          limit,
          (offset, limit) =>
            memory.listNamespaces({
              ...(prefix ? { prefix } : {}),
              ...(suffix ? { suffix } : {}),
              ...(maxDepth !== undefined ? { maxDepth } : {}),
              limit,
              offset,
            }),
          (namespace) => itemMatches(namespace, undefined, undefined, filters),
        );
        return { namespaces };
      },
    },
  ];
}
