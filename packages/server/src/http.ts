import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Caller } from './auth.js';

/**
 * An error the client sees: its status and a plain-text body, as the LangGraph API server
 * answers (the SDK reports it as `HTTP <status>: <text>`).
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Headers of the response (e.g. `WWW-Authenticate` of a 401). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export const badRequest = (message: string) => new HttpError(400, message);
export const notFound = (message: string) => new HttpError(404, message);
export const conflict = (message: string) => new HttpError(409, message);

/** The caller, as the auth hook identified it; null when the server runs without auth. */
export type Identity = string | null;

/** What a route handler gets. */
export interface RequestContext {
  params: Record<string, string>;
  query: URLSearchParams;
  /** The parsed JSON body (undefined when there was none). */
  body: unknown;
  headers: IncomingMessage['headers'];
  /** Who called (see `Caller`). */
  caller: Caller;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
  res: ServerResponse;
}

/** A reply other than a JSON body with status 200. */
export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/** What a handler returns: a JSON value (200), a `Reply`, or `STREAMED` when it wrote the response itself. */
export type HandlerResult = unknown;
export const STREAMED = Symbol('streamed');

export type Handler = (ctx: RequestContext) => Promise<HandlerResult>;

export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** `/threads/:thread_id/runs`: segments starting with `:` are parameters. */
  path: string;
  handler: Handler;
}

export const reply = (status: number, body?: unknown, headers?: Record<string, string>): Reply =>
  Object.assign(Object.create(REPLY), { status, body, headers });
const REPLY = {};
const isReply = (v: unknown): v is Reply =>
  typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === REPLY;

/**
 * JSON text of a value that may hold LangChain messages: a message is written as its
 * fields and its `type` (`{ content, id, type: 'ai', … }`), as the LangGraph API writes it.
 */
export function toJsonText(value: unknown): string {
  return JSON.stringify(value, function (this: Record<string, unknown>, key, v) {
    const raw = this[key];
    if (
      raw !== null &&
      typeof raw === 'object' &&
      'toDict' in raw &&
      typeof (raw as { toDict?: unknown }).toDict === 'function'
    ) {
      const { type, data } = (raw as { toDict(): { type: string; data: object } }).toDict();
      return { ...data, type };
    }
    return v;
  });
}

/** A JSON round trip through `toJsonText`: messages as plain objects, ready to store. */
export const toPlainJson = <T = unknown>(value: unknown): T =>
  value === undefined ? (undefined as T) : (JSON.parse(toJsonText(value)) as T);

/** A route's parameters when its segments match the path's, else null. */
function matchPath(pattern: string[], parts: string[]): Record<string, string> | null {
  if (pattern.length !== parts.length) return null;
  const params: Record<string, string> = {};
  for (const [i, p] of pattern.entries()) {
    if (p.startsWith(':')) params[p.slice(1)] = decodeURIComponent(parts[i]!);
    else if (p !== parts[i]) return null;
  }
  return params;
}

/** The routes as a matcher: method and path to the handler and its parameters. */
export class Router {
  readonly #routes: Array<Route & { parts: string[] }> = [];

  add(routes: Route[]): void {
    for (const r of routes) this.#routes.push({ ...r, parts: r.path.split('/').filter(Boolean) });
  }

  match(
    method: string,
    path: string,
  ): { handler: Handler; params: Record<string, string> } | 'method' | null {
    const parts = path.split('/').filter(Boolean);
    let pathMatched = false;
    for (const r of this.#routes) {
      const params = matchPath(r.parts, parts);
      if (!params) continue;
      pathMatched = true;
      if (r.method === method) return { handler: r.handler, params };
    }
    return pathMatched ? 'method' : null;
  }
}

const MAX_BODY_BYTES = 16 * 1024 * 1024;

/** The request's JSON body, or undefined when it has none; 400 for anything that is not JSON. */
export async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES)
      throw new HttpError(413, `request body is over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw badRequest(`request body is not valid JSON: ${(e as Error).message}`);
  }
}

/** Writes a handler's result: a `Reply`, JSON with status 200, or nothing when it streamed. */
export function sendResult(res: ServerResponse, result: HandlerResult): void {
  if (result === STREAMED) return;
  if (isReply(result)) {
    for (const [k, v] of Object.entries(result.headers ?? {})) res.setHeader(k, v);
    if (result.body === undefined) {
      res.writeHead(result.status).end();
      return;
    }
    res.writeHead(result.status, { 'content-type': 'application/json' });
    res.end(toJsonText(result.body));
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(toJsonText(result ?? null));
}

export function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(status, { ...headers, 'content-type': 'text/plain; charset=utf-8' });
  res.end(message);
}

/** One server-sent event. */
export interface SseEvent {
  id?: string;
  event: string;
  data: unknown;
}

/** Opens an SSE response; returns the function that writes one event (resolving when flushed). */
export function openSse(
  res: ServerResponse,
  headers: Record<string, string> = {},
): (e: SseEvent) => Promise<void> {
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    ...headers,
  });
  res.flushHeaders();
  return (e) =>
    new Promise((resolve) => {
      const lines = [`event: ${e.event}`, `data: ${toJsonText(e.data)}`];
      if (e.id !== undefined) lines.unshift(`id: ${e.id}`);
      if (res.destroyed || res.writableEnded) return resolve();
      if (res.write(`${lines.join('\n')}\n\n`)) resolve();
      else res.once('drain', () => resolve());
    });
}
