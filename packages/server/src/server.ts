import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { CairnError, type CairnErrorCode, isCairnError } from '@cairn/core';
import { CairnStore } from '@cairn/langgraph';
import type { Store } from '@cairn/store';
import { assistantRoutes, registerGraphAssistants } from './assistants.js';
import { ANYONE, identify, type ServerAuth } from './auth.js';
import { ServerContext } from './context.js';
import { CronScheduler, cronRoutes } from './crons.js';
import { GraphRegistry } from './graphs.js';
import { HttpError, Router, readJsonBody, sendError, sendResult } from './http.js';
import { internalRoutes } from './internal.js';
import type { Json } from './model.js';
import { RunSaver } from './run-saver.js';
import { checkRunBody, runRoutes } from './runs.js';
import { storeRoutes } from './store-api.js';
import { threadRoutes } from './threads.js';
import { Worker } from './worker.js';

export interface CairnServerOptions {
  /** The store everything lives in: assistants, threads, runs and their queue, streamed events, crons, checkpoints, the long-term store. */
  store: Store;
  /** Graph id to `./file.js:export`, relative to `cwd` (as `langgraph.json`'s `graphs`). */
  graphs: Record<string, string>;
  /** Where graph paths are relative to; the current directory by default. */
  cwd?: string;
  /** Who may call (see `ServerAuth`); anyone who can reach the address without it. */
  auth?: ServerAuth;
  /** Runs this process executes at once; 0 serves the API only (another process runs them). Default 10. */
  concurrency?: number;
  /** How long a worker's claim on a run holds without renewal: a killed worker's run is taken over after it. Default 20 000 ms. */
  leaseMs?: number;
  /** Origins a browser page may call from (CORS); none by default. `['*']` allows any. */
  corsOrigins?: string[];
  /** Per graph: the default config (and `context`) of its assistant, as `LANGGRAPH_CONFIG` holds it. */
  graphConfig?: Record<string, Json>;
  /** Serves `POST /internal/truncate` (deletes everything), for LangGraph's API test suite. Off by default. */
  testEndpoints?: boolean;
}

const UNAUTHENTICATED = new Set(['/ok', '/info']);
const LOOPBACK_HOSTS = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\])(:\d+)?$/i;

/**
 * The status of a store's error that a handler lets through, by its code (any other is a
 * 500). `DECRYPTION_FAILED`: stored data that does not open (its tenant's data key was
 * destroyed, the row was altered, or the server's keyring is not the one that sealed it):
 * 410 Gone, as asking again will not bring it back; the body says which and why.
 */
const CAIRN_STATUS: Partial<Record<CairnErrorCode, number>> = { DECRYPTION_FAILED: 410 };

/**
 * The LangGraph Agent Protocol server on a Cairn store. Every fact that decides what runs
 * next is an entry of the store, so any number of these (on one Postgres) serve the same
 * API and share the work; one can be killed at any moment and another finishes its runs.
 *
 * @example
 * ```ts
 * const server = await createCairnServer({
 *   store: createSqliteStore({ path: 'agent.db' }),
 *   graphs: { agent: './dist/graph.js:graph' },
 * });
 * const { url } = await server.listen(2024, '127.0.0.1');
 * // new Client({ apiUrl: url }) from @langchain/langgraph-sdk
 * await server.close();
 * ```
 */
export class CairnServer {
  readonly #router = new Router();
  readonly #worker: Worker | null;
  readonly #crons: CronScheduler;
  #http: Server | null = null;
  #loopbackOnly = true;

  private constructor(
    readonly context: ServerContext,
    readonly options: CairnServerOptions,
  ) {
    this.#router.add([
      { method: 'GET', path: '/ok', handler: async () => ({ ok: true }) },
      {
        method: 'GET',
        path: '/info',
        handler: async () => ({
          version: 'cairn',
          flags: { assistants: true, crons: true, langsmith: false },
        }),
      },
      ...assistantRoutes(context),
      ...threadRoutes(context),
      ...runRoutes(context),
      ...cronRoutes(context),
      ...storeRoutes(context),
      ...(options.testEndpoints ? internalRoutes(context) : []),
    ]);
    const concurrency = options.concurrency ?? 10;
    this.#worker = concurrency > 0 ? new Worker(context, concurrency) : null;
    this.#crons = new CronScheduler(context, checkRunBody);
  }

  /** Loads the graphs, registers their assistants and starts the worker. */
  static async create(options: CairnServerOptions): Promise<CairnServer> {
    const auth = options.auth;
    if (auth?.langgraph && (auth.tokens || auth.authenticate))
      throw new CairnError(
        'INVALID_ARGUMENT',
        'auth: a LangGraph Auth object (auth.langgraph) decides alone; give it without tokens or authenticate',
      );
    const graphs = await GraphRegistry.load(options.graphs, options.cwd ?? process.cwd());
    const ctx = new ServerContext(
      options.store,
      new RunSaver(options.store),
      new CairnStore(options.store),
      graphs,
      options.leaseMs ?? 20_000,
    );
    await registerGraphAssistants(ctx, options.graphConfig ?? {});
    const server = new CairnServer(ctx, options);
    server.#worker?.start();
    if (server.#worker) server.#crons.start();
    return server;
  }

  /** Serves HTTP on `host:port` (port 0: any free one); 127.0.0.1 unless told otherwise. */
  listen(port: number, host = '127.0.0.1'): Promise<{ url: string }> {
    this.#loopbackOnly = LOOPBACK_HOSTS.test(host);
    const http = createHttpServer((req, res) => void this.handle(req, res));
    this.#http = http;
    return new Promise((resolve, reject) => {
      http.once('error', reject);
      http.listen(port, host, () => {
        const a = http.address() as AddressInfo;
        const h = a.family === 'IPv6' ? `[${a.address}]` : a.address;
        resolve({ url: `http://${h}:${a.port}` });
      });
    });
  }

  /** Answers one request (for mounting in another Node HTTP server). */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const abort = new AbortController();
    res.once('close', () => abort.abort());
    try {
      // A page on another site must not reach a server bound to loopback through a name
      // that resolves to it (DNS rebinding).
      if (this.#loopbackOnly && !LOOPBACK_HOSTS.test(req.headers.host ?? ''))
        throw new HttpError(421, 'this server answers only on a loopback host name');
      if (this.#cors(req, res)) return;
      const url = new URL(req.url ?? '/', 'http://x');
      const match = this.#router.match(req.method ?? 'GET', url.pathname);
      if (match === null) throw new HttpError(404, 'Not Found');
      if (match === 'method') throw new HttpError(405, 'Method Not Allowed');
      // As the LangGraph API server: /info (and the health check) answer without auth.
      const caller = UNAUTHENTICATED.has(url.pathname)
        ? ANYONE
        : await identify(req, this.options.auth);
      const body =
        req.method === 'GET' || req.method === 'HEAD' ? undefined : await readJsonBody(req);
      const result = await match.handler({
        params: match.params,
        query: url.searchParams,
        body,
        headers: req.headers,
        caller,
        signal: abort.signal,
        res,
      });
      sendResult(res, result);
    } catch (e) {
      if (e instanceof HttpError) sendError(res, e.status, e.message, e.headers);
      else if (isCairnError(e) && Object.hasOwn(CAIRN_STATUS, e.code))
        sendError(res, CAIRN_STATUS[e.code]!, e.message);
      else {
        console.error('cairn serve:', e);
        sendError(res, 500, e instanceof Error ? e.message : String(e));
      }
    }
  }

  /** Adds CORS headers for an allowed origin; true when it answered a preflight. */
  #cors(req: IncomingMessage, res: ServerResponse): boolean {
    const allowed = this.options.corsOrigins ?? [];
    const origin = req.headers.origin;
    if (!origin || !(allowed.includes('*') || allowed.includes(origin))) return false;
    res.setHeader('access-control-allow-origin', allowed.includes('*') ? '*' : origin);
    res.setHeader(
      'access-control-expose-headers',
      'content-location, x-pagination-total, x-pagination-next',
    );
    if (req.method !== 'OPTIONS') return false;
    res.setHeader('access-control-allow-methods', 'GET, POST, PUT, PATCH, DELETE, OPTIONS');
    res.setHeader(
      'access-control-allow-headers',
      req.headers['access-control-request-headers'] ?? '*',
    );
    res.writeHead(204).end();
    return true;
  }

  /** Stops serving and claiming, waits for the runs in progress; does not close the store. */
  async close(): Promise<void> {
    const http = this.#http;
    this.#http = null;
    if (http) {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    }
    await this.#crons.stop();
    await this.#worker?.stop();
  }
}

/** `CairnServer.create`: loads the graphs and starts the worker. See `CairnServer`. */
export const createCairnServer = (options: CairnServerOptions) => CairnServer.create(options);
