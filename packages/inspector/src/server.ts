import { randomBytes, timingSafeEqual } from 'node:crypto';
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
   * The interface to listen on, default `127.0.0.1`. Requests must name it (or a loopback
   * name: `localhost`, `127.0.0.1`, `[::1]`) in their Host header, so that a page on
   * another site whose name resolves here (DNS rebinding) is refused.
   */
  host?: string;
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
  close(): Promise<void>;
}

const require = createRequire(import.meta.url);
const DAGRE = readFileSync(require.resolve('@dagrejs/dagre/dist/dagre.min.js'));
/** The page ships next to src/ and dist/, as a static file. */
const PAGE = readFileSync(new URL('../static/inspector.html', import.meta.url), 'utf8');
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

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
  const api = new InspectorApi(options);
  const guard = new RequestGuard(host, options.allowWrites === true);
  const page = PAGE.replace(
    '<!--config-->',
    `<meta name="cairn-token" content="${guard.pageToken}">` +
      `<meta name="cairn-title" content="${escapeHtml(options.title ?? '')}">`,
  );
  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => sendError(res, error));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    guard.check(req);
    const url = new URL(req.url ?? '/', 'http://inspector');
    const method = req.method ?? 'GET';
    if (method === 'GET' && url.pathname === '/')
      return send(res, 200, page, 'text/html; charset=utf-8');
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

  return listen(server, options.port ?? 4319, host);
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
 * Who may talk to the inspector: requests naming this host (or loopback) in Host; writes
 * only when allowed, from the same origin, with the token of this start.
 */
class RequestGuard {
  readonly #hosts: Set<string>;
  readonly #writes: boolean;
  readonly #token: Buffer;
  /** Embedded in the page; empty when writes are off (then nothing can write). */
  readonly pageToken: string;

  constructor(host: string, writes: boolean) {
    const named = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
    this.#hosts = new Set([...LOOPBACK, named.toLowerCase()]);
    this.#writes = writes;
    this.#token = randomBytes(24);
    this.pageToken = writes ? this.#token.toString('hex') : '';
  }

  check(req: IncomingMessage): void {
    const host = hostnameOf(req.headers.host);
    if (host === null || !this.#hosts.has(host))
      throw new Refused(
        421,
        `this inspector does not answer for host ${req.headers.host ?? '(none)'}`,
      );
    const method = req.method ?? 'GET';
    if (method === 'GET' || method === 'HEAD') return;
    if (!this.#writes)
      throw new Refused(
        403,
        'the inspector is read-only: start it with --allow-writes to change anything',
      );
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== `http://${req.headers.host}`)
      throw new Refused(
        403,
        `writes are only accepted from the inspector's own page, not ${origin}`,
      );
    const site = req.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin')
      throw new Refused(403, `writes are only accepted from the inspector's own page (${site})`);
    const given = Buffer.from(String(req.headers['x-cairn-token'] ?? ''), 'utf8');
    const wanted = Buffer.from(this.pageToken, 'utf8');
    if (given.length !== wanted.length || !timingSafeEqual(given, wanted))
      throw new Refused(403, 'missing or wrong write token: reload the inspector page');
  }
}

/** The host name of a Host header, lower case, without the port; null when malformed. */
function hostnameOf(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::\d{1,5})?$/i.exec(header);
  return m ? m[1]!.toLowerCase() : null;
}

async function listen(server: Server, wanted: number, host: string): Promise<Inspector> {
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

function send(res: ServerResponse, status: number, body: string | Buffer, type: string): void {
  res.writeHead(status, {
    'content-type': type,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
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
