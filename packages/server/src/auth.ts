import type { IncomingMessage } from 'node:http';
import { HttpError, type Identity } from './http.js';

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
}

/** The caller of `req` (null when the server has no auth); 401 when it cannot say who. */
export async function identify(
  req: IncomingMessage,
  auth: ServerAuth | undefined,
): Promise<Identity> {
  if (!auth || (!auth.tokens && !auth.authenticate)) return null;
  let identity: string | null = null;
  if (auth.tokens) {
    const m = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
    identity = (m && Object.hasOwn(auth.tokens, m[1]!.trim()) && auth.tokens[m[1]!.trim()]) || null;
  }
  if (identity === null && auth.authenticate) identity = await auth.authenticate(req);
  if (typeof identity !== 'string' || identity === '') throw new HttpError(401, 'Unauthorized');
  return identity;
}

/** Whether a resource owned by `owner` is the caller's: everything is without auth; a system resource (no owner) is everyone's to read. */
export const ownedBy = (owner: string | null | undefined, identity: Identity, forWrite = false) =>
  identity === null || owner === identity || (!forWrite && (owner ?? null) === null);

/** `LANGGRAPH_AUTH`-style user fields a graph reads from `config.configurable.langgraph_auth_user`. */
export const authUser = (identity: Identity) =>
  identity === null ? {} : { langgraph_auth_user: { identity }, langgraph_auth_user_id: identity };
