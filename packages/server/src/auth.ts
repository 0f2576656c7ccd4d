import type { IncomingMessage } from 'node:http';
import { resolve } from 'node:path';
import { importFile } from './graphs.js';
import { HttpError, type Identity } from './http.js';
import type { Json } from './model.js';

/**
 * Who may call the server. Without it the server answers anyone who can reach its
 * address (which is why it binds to loopback unless told otherwise). With it, every
 * request must be identified, and every thread, run, cron, assistant and store namespace
 * a caller creates belongs to that caller alone: another caller gets 404 for it (and
 * 403 for a store namespace that does not start with its identity).
 *
 * @example
 * ```ts
 * const auth: ServerAuth = { tokens: { 'secret-token-of-ada': 'ada' } };
 * const hook: ServerAuth = { authenticate: async (req) => (await verify(req.headers.authorization))?.sub ?? null };
 * ```
 */
export interface ServerAuth {
  /** Bearer tokens (`Authorization: Bearer <token>`) and the identity each stands for. */
  tokens?: Record<string, string>;
  /** The caller of a request, or null to refuse it with 401. */
  authenticate?: (request: IncomingMessage) => Promise<string | null> | string | null;
  /**
   * A LangGraph `Auth` (`new Auth().authenticate(…).on(…)` from
   * `@langchain/langgraph-sdk/auth`, what `langgraph.json`'s `auth.path` exports for the
   * LangGraph API server), run as that server runs it: its `authenticate` identifies every
   * request, and its `on` handlers decide each action, may change what is created
   * (`value.metadata`) and return filters on metadata that reads must match (404, or left
   * out of a search, otherwise). Nothing else restricts access then: resources are not
   * kept to their creator unless the handlers say so. Not together with `tokens` or
   * `authenticate`.
   */
  langgraph?: LangGraphAuth;
}

/** What the server reads of a LangGraph `Auth` object. */
export interface LangGraphAuth {
  '~handlerCache': {
    authenticate?: (request: Request) => unknown;
    /** `on()` handlers by event (`never`: any parameter type an `Auth` declares fits). */
    callbacks?: Record<string, (params: never) => unknown>;
  };
}

/** Whether `value` is a LangGraph `Auth` object. */
export const isLangGraphAuth = (value: unknown): value is LangGraphAuth =>
  typeof value === 'object' && value !== null && '~handlerCache' in value;

/** Filters a LangGraph auth handler returned: metadata keys to a value, `{ $eq }` or `{ $contains }`. */
export type AuthFilters = Record<string, unknown>;

/** An action on a resource, as LangGraph's auth handlers name them (`threads:read`, `store:put`, …). */
export type AuthEvent =
  | `${'threads' | 'assistants' | 'crons'}:${'create' | 'read' | 'update' | 'delete' | 'search'}`
  | 'threads:create_run'
  | `store:${'put' | 'get' | 'search' | 'list_namespaces' | 'delete'}`;

/** Who called, and what they may do. */
export interface Caller {
  /** The identity resources are kept to (tokens or an `authenticate` hook); null otherwise. */
  identity: Identity;
  /** The user a LangGraph `Auth` identified (null otherwise), as graphs see it. */
  user: (Json & { identity: string; permissions: string[] }) | null;
  /**
   * Runs the LangGraph auth handler of `event` on `value` (which it may change): its
   * filters, or undefined when it returned none (or there is no LangGraph `Auth`).
   * Throws the handler's HTTP error (403 when it returned false).
   */
  authorize(event: AuthEvent, value: Json): Promise<AuthFilters | undefined>;
}

/** A caller of a server without auth: anyone. */
export const ANYONE: Caller = { identity: null, user: null, authorize: async () => undefined };

/** The caller of `req` (anyone when the server has no auth); 401 when it cannot say who. */
export async function identify(
  req: IncomingMessage,
  auth: ServerAuth | undefined,
): Promise<Caller> {
  if (auth?.langgraph) return identifyLangGraph(req, auth.langgraph);
  if (!auth || (!auth.tokens && !auth.authenticate)) return ANYONE;
  let identity: string | null = null;
  if (auth.tokens) {
    const m = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
    identity = (m && Object.hasOwn(auth.tokens, m[1]!.trim()) && auth.tokens[m[1]!.trim()]) || null;
  }
  if (identity === null && auth.authenticate) identity = await auth.authenticate(req);
  if (typeof identity !== 'string' || identity === '') throw new HttpError(401, 'Unauthorized');
  return { ...ANYONE, identity };
}

/** An HTTPException of `@langchain/langgraph-sdk/auth` as the response it stands for; anything else as it is. */
function asHttpError(e: unknown): unknown {
  if (typeof e !== 'object' || e === null || !('status' in e) || !('headers' in e)) return e;
  const { status, message, headers } = e as { status: number; message?: string; headers?: unknown };
  const h: Record<string, string> = {};
  new Headers(headers as ConstructorParameters<typeof Headers>[0]).forEach((v, k) => {
    h[k] = v;
  });
  return new HttpError(status, message || 'Unauthorized', h);
}

/** The caller as a LangGraph `Auth` identifies it (as the LangGraph API server does). */
async function identifyLangGraph(req: IncomingMessage, auth: LangGraphAuth): Promise<Caller> {
  const handlers = auth['~handlerCache'];
  if (!handlers.authenticate) return ANYONE;
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers))
    if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
  const request = new Request(
    new URL(req.url ?? '/', `http://${req.headers.host ?? 'localhost'}`),
    {
      method: req.method ?? 'GET',
      headers,
    },
  );
  let response: unknown;
  try {
    response = await handlers.authenticate(request);
  } catch (e) {
    throw asHttpError(e);
  }
  let user: NonNullable<Caller['user']>;
  if (typeof response === 'string')
    user = { identity: response, display_name: response, permissions: [], is_authenticated: true };
  else if (
    typeof response === 'object' &&
    response !== null &&
    typeof (response as Json).identity === 'string'
  ) {
    const r = response as Json & { identity: string };
    const permissions = Array.isArray(r.permissions) ? (r.permissions as string[]) : [];
    user = {
      ...r,
      permissions,
      is_authenticated: r.is_authenticated ?? true,
      display_name: r.display_name ?? r.identity,
    };
  } else
    throw new Error(
      'Invalid auth response received. Make sure to either return a `string` or an object with `identity` property.',
    );
  const authorize = async (event: AuthEvent, value: Json) => {
    const [resource, action] = event.split(':') as [string, string];
    const callbacks = handlers.callbacks ?? {};
    const key = [event, resource, `*:${action}`, '*'].find((k) => Object.hasOwn(callbacks, k));
    if (key === undefined) return undefined;
    let result: unknown;
    try {
      result = await (callbacks[key] as (params: Json) => unknown)({
        event,
        resource,
        action,
        value,
        permissions: user.permissions,
        user,
      });
    } catch (e) {
      throw asHttpError(e);
    }
    if (result == null || result === true) return undefined;
    if (result === false) throw new HttpError(403, 'Forbidden');
    if (typeof result !== 'object')
      throw new HttpError(
        500,
        `Auth handler returned invalid result. Expected filter object, null, undefined or boolean. Got "${typeof result}" instead.`,
      );
    return result as AuthFilters;
  };
  return { identity: null, user, authorize };
}

/**
 * Whether `metadata` passes a LangGraph auth handler's filters: each key equal to its
 * value (or `$eq`), or, for `$contains`, a list holding the value (every value of a list).
 */
export function authMatches(metadata: Json | undefined, filters: AuthFilters | undefined): boolean {
  if (!filters) return true;
  for (const [key, want] of Object.entries(filters)) {
    const have = metadata?.[key];
    if (typeof want === 'object' && want !== null) {
      const op = want as { $eq?: unknown; $contains?: unknown };
      if (op.$eq !== undefined) {
        if (have !== op.$eq) return false;
      } else if (op.$contains !== undefined) {
        if (!Array.isArray(have)) return false;
        const needed = Array.isArray(op.$contains) ? op.$contains : [op.$contains];
        if (!needed.every((x) => have.includes(x))) return false;
      }
    } else if (have !== want) return false;
  }
  return true;
}

/** Whether a resource owned by `owner` is the caller's: everything is without auth; a system resource (no owner) is everyone's to read. */
export const ownedBy = (owner: string | null | undefined, identity: Identity, forWrite = false) =>
  identity === null || owner === identity || (!forWrite && (owner ?? null) === null);

/** The user fields a graph reads from `config.configurable` (`langgraph_auth_user`, as LangGraph sets them). */
export function authUser({ identity, user }: Caller): Json {
  if (user)
    return {
      langgraph_auth_user: user,
      langgraph_auth_user_id: user.identity,
      langgraph_auth_permissions: user.permissions,
    };
  return identity === null
    ? {}
    : { langgraph_auth_user: { identity }, langgraph_auth_user_id: identity };
}

/**
 * The auth that `langgraph.json`'s `auth.path` names (`./auth.ts:auth`, the export
 * `default` without a name): a LangGraph `Auth` object, a `ServerAuth`, or an
 * `authenticate(request)` function. TypeScript files load as graphs do.
 */
export async function loadAuth(spec: string, cwd: string): Promise<ServerAuth> {
  const colon = spec.lastIndexOf(':');
  const file = resolve(cwd, colon > 1 ? spec.slice(0, colon) : spec);
  const name = colon > 1 ? spec.slice(colon + 1) : 'default';
  const value = (await importFile(file))[name] as unknown;
  // Before the other shapes: an Auth object has an `authenticate` method too.
  if (isLangGraphAuth(value)) return { langgraph: value };
  if (typeof value === 'function') return { authenticate: value as ServerAuth['authenticate'] };
  const hook = value as ServerAuth | undefined;
  if (hook && (typeof hook.authenticate === 'function' || typeof hook.tokens === 'object'))
    return hook;
  throw new Error(
    `${spec} must export a LangGraph Auth object, { authenticate(request) } or an authenticate function`,
  );
}
