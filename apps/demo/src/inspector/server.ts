import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { type Branch, CairnError, isCairnError, type JsonObject, type Message } from '@cairn/core';
import type { AgentMemory, RecallMode } from '@cairn/memory';
import type { Store } from '@cairn/store';
import { messageText, openThread, runKey, stateAsOf } from '@cairn/thread';
import { Research } from '../research-state.js';
import { viewerFor } from '../scenario.js';
import { clip } from '../text.js';
import { branchOf, diffStates } from './state-view.js';

export interface InspectorOptions {
  store: Store;
  memory: AgentMemory;
  /** Default 4319; 0 picks a free port. */
  port?: number;
  host?: string;
}

export interface Inspector {
  /** `http://127.0.0.1:<port>` */
  url: string;
  port: number;
  close(): Promise<void>;
}

const require = createRequire(import.meta.url);
const DAGRE = readFileSync(require.resolve('@dagrejs/dagre/dist/dagre.min.js'));
/** The page ships next to src/ and dist/, as a static file. */
const PAGE_HTML = readFileSync(new URL('../../static/inspector.html', import.meta.url));

/**
 * Starts the inspector: a page (threads, the message graph laid out with dagre, the
 * state as of any message and its diff, branch switching, memory search) and the JSON
 * API behind it. Resolves once the port is bound; a port in use is an
 * `INVALID_ARGUMENT` naming it.
 *
 * @example
 * ```ts
 * const inspector = await startInspector({ store, memory, port: 4319 });
 * console.log(inspector.url); // http://127.0.0.1:4319
 * await inspector.close();
 * ```
 */
export async function startInspector(options: InspectorOptions): Promise<Inspector> {
  const api = new InspectorApi(options.store, options.memory);
  return listen(
    createServer((req, res) => {
      api.handle(req, res).catch((error: unknown) => sendError(res, error));
    }),
    options.port ?? 4319,
    options.host ?? '127.0.0.1',
  );
}

/** Binds the port and lets it go again: tells whether the inspector could start there. */
export async function startInspectorProbe(port: number, host = '127.0.0.1'): Promise<Inspector> {
  return listen(
    createServer((_req, res) => res.end()),
    port,
    host,
  );
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
      } else reject(error);
    });
    server.listen(wanted, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function send(res: ServerResponse, status: number, body: string | Buffer, type: string): void {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
  res.end(body);
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  send(res, status, JSON.stringify(value), 'application/json; charset=utf-8');
}

function sendError(res: ServerResponse, error: unknown): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  if (isCairnError(error)) {
    const status = error.code === 'NOT_FOUND' ? 404 : error.code === 'CONFLICT' ? 409 : 400;
    sendJson(res, status, { error: error.message, code: error.code });
  } else {
    sendJson(res, 500, { error: error instanceof Error ? error.message : String(error) });
  }
}

/** A thread's whole message graph: the union of its branches' chains. */
interface Graph {
  branches: Branch[];
  messages: Map<string, Message>;
  chains: Map<string, Set<string>>;
}

class InspectorApi {
  readonly #store: Store;
  readonly #memory: AgentMemory;

  constructor(store: Store, memory: AgentMemory) {
    this.#store = store;
    this.#memory = memory;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://inspector');
    const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    const method = req.method ?? 'GET';
    if (method === 'GET' && url.pathname === '/')
      return send(res, 200, PAGE_HTML, 'text/html; charset=utf-8');
    if (method === 'GET' && url.pathname === '/assets/dagre.min.js')
      return send(res, 200, DAGRE, 'text/javascript; charset=utf-8');
    if (method === 'GET' && url.pathname === '/favicon.ico')
      return send(res, 204, '', 'image/x-icon');
    if (parts[0] !== 'api') return sendJson(res, 404, { error: `no page at ${url.pathname}` });

    if (method === 'GET' && parts.length === 2 && parts[1] === 'threads')
      return sendJson(res, 200, await this.threads());
    if (method === 'GET' && parts.length === 3 && parts[1] === 'threads')
      return sendJson(res, 200, await this.thread(parts[2]!));
    if (
      method === 'GET' &&
      parts.length === 6 &&
      parts[1] === 'threads' &&
      parts[3] === 'messages' &&
      parts[5] === 'state'
    ) {
      return sendJson(res, 200, await this.messageState(parts[2]!, parts[4]!));
    }
    if (
      method === 'POST' &&
      parts.length === 5 &&
      parts[1] === 'threads' &&
      parts[3] === 'active-branch'
    ) {
      return sendJson(res, 200, await this.switchBranch(parts[2]!, parts[4]!));
    }
    if (method === 'GET' && parts.length === 3 && parts[1] === 'memory' && parts[2] === 'search') {
      return sendJson(res, 200, await this.search(url.searchParams));
    }
    sendJson(res, 404, { error: `no endpoint ${method} ${url.pathname}` });
  }

  async threads() {
    const { items } = await this.#store.listThreads({ limit: 100 });
    return items.map((t) => ({
      id: t.id,
      title: t.title,
      resourceId: t.resourceId,
      createdAt: t.createdAt,
      updatedAt: t.updatedAt,
    }));
  }

  async #graph(threadId: string): Promise<Graph> {
    if (!(await this.#store.getThread(threadId)))
      throw new CairnError('NOT_FOUND', `no thread ${threadId}`);
    const branches = await this.#store.listBranches(threadId);
    const messages = new Map<string, Message>();
    const chains = new Map<string, Set<string>>();
    for (const b of branches) {
      const chain = b.headMessageId ? await this.#store.getChain(b.headMessageId) : [];
      chains.set(b.id, new Set(chain.map((m) => m.id)));
      for (const m of chain) messages.set(m.id, m);
    }
    return { branches, messages, chains };
  }

  async thread(threadId: string) {
    const record = await this.#store.getThread(threadId);
    const { branches, messages, chains } = await this.#graph(threadId);
    const checkpoints = await this.#store.listCheckpoints(threadId);
    const lease = await this.#store.getLease(runKey(threadId));
    const nodes = [...messages.values()]
      .sort((a, b) => a.depth - b.depth || a.createdAt - b.createdAt || a.id.localeCompare(b.id))
      .map((m) => ({
        id: m.id,
        parentId: m.parentId,
        role: m.role,
        type: m.type,
        depth: m.depth,
        createdAt: m.createdAt,
        text: clip(messageText(m.data), 400),
        branch: branchOf(m, branches, chains).name,
        onBranches: branches.filter((b) => chains.get(b.id)?.has(m.id)).map((b) => b.name),
        checkpoints: checkpoints.filter((c) => c.messageId === m.id).map((c) => c.name),
      }));
    return {
      thread: record,
      branches: branches.map((b) => ({
        id: b.id,
        name: b.name,
        isActive: b.isActive,
        headMessageId: b.headMessageId,
        forkMessageId: b.forkMessageId,
        parent: branches.find((p) => p.id === b.parentBranchId)?.name ?? null,
        length: chains.get(b.id)?.size ?? 0,
      })),
      checkpoints,
      messages: nodes,
      run: lease
        ? {
            owner: lease.owner,
            releasedAt: lease.releasedAt,
            expiresAt: lease.expiresAt,
            data: lease.data,
          }
        : null,
    };
  }

  async messageState(threadId: string, messageId: string) {
    const { branches, messages, chains } = await this.#graph(threadId);
    const message = messages.get(messageId);
    if (!message)
      throw new CairnError('NOT_FOUND', `thread ${threadId} has no message ${messageId}`);
    const branch = branchOf(message, branches, chains);
    const stateOf = async (id: string): Promise<JsonObject> => {
      const state = await stateAsOf(this.#store, Research, { branchId: branch.id, messageId: id });
      return state as unknown as JsonObject;
    };
    const state = await stateOf(message.id);
    const parentState =
      message.parentId === null
        ? (Research.initial('thread') as unknown as JsonObject)
        : await stateOf(message.parentId);
    return {
      message: {
        id: message.id,
        role: message.role,
        type: message.type,
        depth: message.depth,
        data: message.data,
        createdAt: message.createdAt,
      },
      branch: branch.name,
      state,
      changes: diffStates(parentState, state),
    };
  }

  async switchBranch(threadId: string, name: string) {
    const thread = await openThread(this.#store, { schema: Research, threadId });
    try {
      const branch = await thread.switchBranch(name);
      return { active: branch.name };
    } finally {
      await thread.close();
    }
  }

  async search(params: URLSearchParams) {
    const query = (params.get('q') ?? '').trim();
    if (query === '') throw new CairnError('INVALID_ARGUMENT', 'type some words to search for');
    if (query.length > 500)
      throw new CairnError(
        'INVALID_ARGUMENT',
        `the search is ${query.length} characters; at most 500`,
      );
    const mode = (params.get('mode') ?? 'hybrid') as RecallMode;
    if (!['hybrid', 'vector', 'keyword'].includes(mode))
      throw new CairnError('INVALID_ARGUMENT', `mode must be hybrid, vector or keyword`);
    const threadId = params.get('thread');
    const viewer = viewerFor(threadId ?? 'no-conversation');
    const hits = await this.#memory.recall(query, { viewer, mode, limit: 12 });
    return {
      query,
      mode,
      viewer,
      hits: hits.map((h) => ({
        id: h.memory.id,
        type: h.memory.type,
        scope: h.memory.scope,
        roomId: h.memory.roomId,
        title:
          typeof h.memory.metadata.title === 'string'
            ? h.memory.metadata.title
            : (h.memory.metadata.upload ?? null),
        source:
          h.memory.metadata.corpusId ??
          h.memory.metadata.upload ??
          h.memory.metadata.discoveryId ??
          null,
        text: clip(h.memory.content.text, 320),
        score: h.score,
        sources: h.sources,
        ranks: h.ranks,
        similarity: h.similarity,
        keywordScore: h.keywordScore,
      })),
    };
  }
}
