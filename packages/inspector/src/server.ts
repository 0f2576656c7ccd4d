import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import {
  CairnError,
  isCairnError,
  type JsonObject,
  type StateSchema,
  type Viewer,
} from '@cairn/core';
import type { Embedder } from '@cairn/memory';
import type { Store } from '@cairn/store';
import { InspectorApi } from './api.js';
import { checkInspectorOptions } from './inspector-options.js';

export interface InspectorOptions {
  /** Any Cairn store. The inspector never closes it: close the inspector, then the store. */
  store: Store;
  /** Default 4319; 0 picks a free port. */
  port?: number;
  /**
   * The interface to listen on, default `127.0.0.1`. On a loopback address requests must
   * name it (or a loopback name: `localhost`, `127.0.0.1`, `[::1]`) in their Host header,
   * so that a page on another site whose name resolves here (DNS rebinding) is refused.
   * On any other address (`0.0.0.0`, a LAN address) other machines can connect, and a Host
   * header proves nothing: every request, reads too, needs the access token (generated
   * when `accessToken` is not given).
   */
  host?: string;
  /**
   * Required on every request when set (and always when `host` is not loopback, then
   * generated unless given): `?token=<it>` on the page's address (the page then keeps it
   * in an HttpOnly cookie), or `Authorization: Bearer <it>`. 16 to 200 characters of
   * `A-Z a-z 0-9 . _ ~ -`.
   */
  accessToken?: string;
  /**
   * Default false: read-only, every write answers 403. When true the page can switch the
   * active branch, fork a branch at a message and set checkpoints; each write must come
   * from the page itself (same origin, carrying the token that only the page holds).
   */
  allowWrites?: boolean;
  /** The embedder the store's vectors were made with: memory search by meaning too. Without it, by keyword only. */
  embedder?: Embedder;
  /**
   * The application's state schema: the state view merges updates with its reducers.
   * Without it each update replaces the fields it names (exact where the fields replace or
   * a commit holds a snapshot); the page says which.
   */
  schema?: StateSchema;
  /** Whose eyes memory search uses when a thread is selected. Default: every memory. */
  viewerFor?: (threadId: string) => Viewer;
  /** Shown in the page header, e.g. the database it reads. */
  title?: string;
}

export interface Inspector {
  /** `http://<host>:<port>` */
  url: string;
  port: number;
  /**
   * The token every request needs (`${url}/?token=${accessToken}` opens the page), or null
   * when the inspector listens on loopback without one.
   */
  accessToken: string | null;
  close(): Promise<void>;
}

const require = createRequire(import.meta.url);
const DAGRE = readFileSync(require.resolve('@dagrejs/dagre/dist/dagre.min.js'));
/** The page ships next to src/ and dist/, as a static file. */
const PAGE = readFileSync(new URL('../static/inspector.html', import.meta.url), 'utf8');
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Whether `host` is a loopback name or address: only this machine can connect there. */
export function isLoopback(host: string): boolean {
  return /^(localhost|127(\.\d{1,3}){3}|::1|\[::1\])$/i.test(host);
}

/** The page's inline scripts, allowed by their hashes: no other script runs in it. */
function contentSecurityPolicy(page: string): string {
  const hashes = [...page.matchAll(/<script>([\s\S]*?)<\/script>/g)].map(
    (m) => `'sha256-${createHash('sha256').update(m[1]!).digest('base64')}'`,
  );
  return [
    "default-src 'none'",
    `script-src 'self' ${hashes.join(' ')}`,
    "style-src 'unsafe-inline'",
    "img-src 'self'",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}
/** For everything but the page: nothing may run or load. */
const CSP_NONE = "default-src 'none'; frame-ancestors 'none'";

/**
 * Starts the inspector: a page (threads, the message graph laid out with dagre, the
 * state as of any message and its diff, memory search, and with `allowWrites` branch
 * switching) and the JSON API behind it. Resolves once the port is bound; a port in use
 * is an `INVALID_ARGUMENT` naming it.
 *
 * @example
 * ```ts
 * const inspector = await startInspector({ store, port: 0 });
 * console.log(inspector.url); // http://127.0.0.1:<a free port>
 * await inspector.close();
 * ```
 */
export async function startInspector(options: InspectorOptions): Promise<Inspector> {
  checkInspectorOptions(options);
  const host = options.host ?? '127.0.0.1';
  const accessToken =
    options.accessToken ?? (isLoopback(host) ? null : randomBytes(24).toString('hex'));
  const api = new InspectorApi(options);
  const guard = new RequestGuard(host, options.allowWrites === true, accessToken);
  // A replacer function: `$&` or `$'` in the title are characters, not patterns.
  const config =
    `<meta name="cairn-token" content="${guard.pageToken}">` +
    `<meta name="cairn-title" content="${escapeHtml(options.title ?? '')}">`;
  const page = PAGE.replace('<!--config-->', () => config);
  const pageCsp = contentSecurityPolicy(page);
  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => sendError(res, error));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { url, tokenInQuery } = guard.check(req);
    // HEAD is GET without the body (node leaves the body out).
    const method = req.method === 'HEAD' ? 'GET' : (req.method ?? 'GET');
    if (method === 'GET' && url.pathname === '/') {
      if (tokenInQuery) {
        // Jupyter's way: the token moves from the address into a cookie of this port.
        res.writeHead(302, {
          location: '/',
          'set-cookie': `${guard.cookieName}=${accessToken}; Path=/; HttpOnly; SameSite=Strict`,
          ...SECURITY_HEADERS,
          'content-security-policy': CSP_NONE,
        });
        res.end();
        return;
      }
      return send(res, 200, page, 'text/html; charset=utf-8', pageCsp);
    }
    if (method === 'GET' && url.pathname === '/assets/dagre.min.js')
      return send(res, 200, DAGRE, 'text/javascript; charset=utf-8');
    if (method === 'GET' && url.pathname === '/favicon.ico')
      return send(res, 204, '', 'image/x-icon');
    const parts = pathParts(url.pathname);
    if (parts[0] !== 'api') throw new CairnError('NOT_FOUND', `no page at ${url.pathname}`);
    const [, a, id, b, c, d] = parts;
    const n = parts.length;
    const q = url.searchParams;
    if (method === 'GET') {
      if (n === 2 && a === 'threads') return sendJson(res, await api.threads(q));
      if (n === 3 && a === 'threads') return sendJson(res, await api.thread(id!, q));
      if (n === 4 && a === 'threads' && b === 'compare')
        return sendJson(res, await api.compare(id!, q));
      if (n === 6 && a === 'threads' && b === 'messages' && d === 'state')
        return sendJson(res, await api.messageState(id!, c!));
      if (n === 3 && a === 'memory' && id === 'search') return sendJson(res, await api.search(q));
    }
    if (method === 'POST' && a === 'threads') {
      if (n === 5 && b === 'active-branch') return sendJson(res, await api.switchBranch(id!, c!));
      if (n === 4 && b === 'branches')
        return sendJson(res, await api.fork(id!, await readJson(req)));
      if (n === 4 && b === 'checkpoints')
        return sendJson(res, await api.checkpoint(id!, await readJson(req)));
    }
    throw new CairnError('NOT_FOUND', `no endpoint ${method} ${url.pathname}`);
  }

  const inspector = await listen(server, options.port ?? 4319, host, accessToken);
  guard.cookieName = `cairn-inspector-${inspector.port}`;
  return inspector;
}

/** The path's segments, percent-decoded; malformed percent-encoding is `INVALID_ARGUMENT`. */
function pathParts(pathname: string): string[] {
  try {
    return pathname.split('/').filter(Boolean).map(decodeURIComponent);
  } catch {
    throw new CairnError('INVALID_ARGUMENT', `malformed percent-encoding in ${pathname}`);
  }
}

class Refused extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Who may talk to the inspector. On loopback: requests naming this host (or loopback) in
 * Host, or in an absolute-form target (which replaces Host); with an access token (always
 * when reachable from the network), only requests carrying it. Writes only when allowed,
 * from the same origin, with the write token of this start that only the page holds.
 */
class RequestGuard {
  readonly #hosts: Set<string>;
  readonly #anyHost: boolean;
  readonly #writes: boolean;
  readonly #token: Buffer;
  readonly #access: Buffer | null;
  /** Embedded in the page; empty when writes are off (then nothing can write). */
  readonly pageToken: string;
  /** Where the page keeps the access token: one cookie per port (cookies ignore ports). */
  cookieName = 'cairn-inspector';

  constructor(host: string, writes: boolean, accessToken: string | null) {
    const named = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
    this.#hosts = new Set([...LOOPBACK, named.toLowerCase()]);
    // Reachable from other machines under names this process cannot know: the access
    // token, not the Host header, keeps other sites out (their pages never hold it).
    this.#anyHost = !isLoopback(host);
    this.#writes = writes;
    this.#token = randomBytes(24);
    this.#access = accessToken === null ? null : Buffer.from(accessToken, 'utf8');
    this.pageToken = writes ? this.#token.toString('hex') : '';
  }

  /** The request's URL, or a `Refused`; `tokenInQuery`: the access token came in `?token=`. */
  check(req: IncomingMessage): { url: URL; tokenInQuery: boolean } {
    const target = req.url ?? '/';
    let url: URL;
    let authority = req.headers.host;
    if (target.startsWith('/')) url = new URL(target, 'http://inspector');
    else {
      // The absolute form (`GET http://name/path`): its authority replaces Host (RFC 9112).
      try {
        url = new URL(target);
      } catch {
        throw new Refused(400, 'malformed request target');
      }
      if (url.protocol !== 'http:') throw new Refused(400, 'malformed request target');
      authority = url.host;
    }
    const host = hostnameOf(authority);
    if (host === null || (!this.#anyHost && !this.#hosts.has(host)))
      throw new Refused(421, `this inspector does not answer for host ${authority ?? '(none)'}`);
    const tokenInQuery = this.#checkAccess(req, url);
    const method = req.method ?? 'GET';
    if (method === 'GET' || method === 'HEAD') return { url, tokenInQuery };
    if (!this.#writes)
      throw new Refused(
        403,
        'the inspector is read-only: start it with --allow-writes to change anything',
      );
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== `http://${authority}`)
      throw new Refused(
        403,
        `writes are only accepted from the inspector's own page, not ${origin}`,
      );
    const site = req.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin')
      throw new Refused(403, `writes are only accepted from the inspector's own page (${site})`);
    if (!same(String(req.headers['x-cairn-token'] ?? ''), this.#token.toString('hex')))
      throw new Refused(403, 'missing or wrong write token: reload the inspector page');
    return { url, tokenInQuery };
  }

  /** Checks the access token, when there is one: from `?token=`, the cookie or a bearer header. */
  #checkAccess(req: IncomingMessage, url: URL): boolean {
    if (this.#access === null) return false;
    const wanted = this.#access.toString('utf8');
    const query = url.searchParams.get('token');
    if (query !== null && same(query, wanted)) return true;
    const bearer = /^Bearer +(\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
    if (bearer !== undefined && same(bearer, wanted)) return false;
    const cookie = cookieValue(req.headers.cookie, this.cookieName);
    if (cookie !== undefined && same(cookie, wanted)) return false;
    throw new Refused(
      401,
      'this inspector needs its access token: open the address it printed (…/?token=…), or send Authorization: Bearer <token>',
    );
  }
}

/** Whether two strings are equal, in time that does not depend on where they differ. */
function same(given: string, wanted: string): boolean {
  const a = Buffer.from(given, 'utf8');
  const b = Buffer.from(wanted, 'utf8');
  return a.length === b.length && b.length > 0 && timingSafeEqual(a, b);
}

/** A cookie's value from a Cookie header. */
function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The host name of a Host header, lower case, without the port; null when malformed. */
function hostnameOf(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::\d{1,5})?$/i.exec(header);
  return m ? m[1]!.toLowerCase() : null;
}

async function listen(
  server: Server,
  wanted: number,
  host: string,
  accessToken: string | null,
): Promise<Inspector> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE') {
        reject(
          new CairnError(
            'INVALID_ARGUMENT',
            `port ${wanted} on ${host} is in use: stop what runs there or pass --port <another>`,
          ),
        );
      } else if (error.code === 'EACCES') {
        reject(
          new CairnError(
            'INVALID_ARGUMENT',
            `no permission to listen on port ${wanted}: pick one above 1024 with --port`,
          ),
        );
      } else if (error.code === 'ENOTFOUND' || error.code === 'EADDRNOTAVAIL') {
        reject(
          new CairnError(
            'INVALID_ARGUMENT',
            `cannot listen on ${host}: it is not an address of this machine (${error.code})`,
          ),
        );
      } else reject(error);
    });
    server.listen(wanted, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const shown = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return {
    url: `http://${shown}:${port}`,
    port,
    accessToken,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A request's JSON object body, at most 64 KiB. */
async function readJson(req: IncomingMessage): Promise<JsonObject> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 65_536) throw new CairnError('INVALID_ARGUMENT', 'the request body is over 64 KiB');
    chunks.push(chunk);
  }
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
  } catch {
    throw new CairnError('INVALID_ARGUMENT', 'the request body is not JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new CairnError('INVALID_ARGUMENT', 'the request body must be a JSON object');
  return body as JsonObject;
}

function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );
}

const SECURITY_HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

function send(
  res: ServerResponse,
  status: number,
  body: string | Buffer,
  type: string,
  csp = CSP_NONE,
): void {
  res.writeHead(status, {
    'content-type': type,
    ...SECURITY_HEADERS,
    'content-security-policy': csp,
  });
  res.end(body);
}

function sendJson(res: ServerResponse, value: unknown, status = 200): void {
  send(res, status, JSON.stringify(value), 'application/json; charset=utf-8');
}

const STATUS: Record<string, number> = {
  NOT_FOUND: 404,
  CONFLICT: 409,
  UNAVAILABLE: 503,
  TIMEOUT: 503,
  CLOSED: 503,
  // Stored data that does not open (a destroyed data key, an altered row, another keyring).
  DECRYPTION_FAILED: 410,
};

function sendError(res: ServerResponse, error: unknown): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  if (error instanceof Refused) sendJson(res, { error: error.message }, error.status);
  else if (isCairnError(error))
    sendJson(res, { error: error.message, code: error.code }, STATUS[error.code] ?? 400);
  else sendJson(res, { error: error instanceof Error ? error.message : String(error) }, 500);
}
