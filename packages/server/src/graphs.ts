import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BaseCheckpointSaver, BaseStore } from '@langchain/langgraph-checkpoint';
import { notFound } from './http.js';

/** A compiled graph, as far as the server uses it. */
export interface CompiledGraphLike {
  checkpointer?: BaseCheckpointSaver | boolean | undefined;
  store?: BaseStore | undefined;
  withConfig(config: Record<string, unknown>): CompiledGraphLike;
  streamEvents(input: unknown, options: Record<string, unknown>): AsyncIterable<StreamEvent>;
  getState(config: unknown, options?: unknown): Promise<StateSnapshotLike>;
  getStateHistory(config: unknown, options?: unknown): AsyncIterable<StateSnapshotLike>;
  updateState(
    config: unknown,
    values: unknown,
    asNode?: string,
  ): Promise<{ configurable?: Record<string, unknown> }>;
  bulkUpdateState?(
    config: unknown,
    supersteps: unknown,
  ): Promise<{ configurable?: Record<string, unknown> }>;
  getGraphAsync?(config?: unknown): Promise<{ toJSON(): unknown }>;
  getGraph?(config?: unknown): { toJSON(): unknown };
  getSubgraphsAsync?(
    namespace?: string,
    recurse?: boolean,
  ): AsyncIterable<[string, CompiledGraphLike]>;
  builder?: unknown;
}

export interface StreamEvent {
  event: string;
  name?: string;
  run_id?: string;
  tags?: string[];
  metadata?: Record<string, unknown>;
  data: { chunk?: unknown; [k: string]: unknown };
}

export interface StateSnapshotLike {
  values: unknown;
  next: string[];
  tasks: Array<Record<string, unknown>>;
  config: { configurable?: Record<string, unknown> };
  parentConfig?: { configurable?: Record<string, unknown> } | undefined;
  metadata?: Record<string, unknown> | undefined;
  createdAt?: string | undefined;
}

type GraphFactory = (config: Record<string, unknown>) => unknown;

/** What one `graphs` entry of `langgraph.json` loaded to: a compiled graph or a factory of one. */
type Loaded =
  | { kind: 'compiled'; graph: CompiledGraphLike }
  | { kind: 'factory'; make: GraphFactory };

const isCompiled = (g: unknown): g is CompiledGraphLike =>
  typeof g === 'object' &&
  g !== null &&
  typeof (g as CompiledGraphLike).streamEvents === 'function';
const isBuilder = (g: unknown): g is { compile(): unknown } =>
  typeof g === 'object' &&
  g !== null &&
  typeof (g as { compile?: unknown }).compile === 'function' &&
  !isCompiled(g);

function asCompiled(value: unknown, where: string): CompiledGraphLike {
  const g = isBuilder(value) ? value.compile() : value;
  if (!isCompiled(g))
    throw new Error(
      `${where} is not a LangGraph graph (compiled, a StateGraph, or a function returning one)`,
    );
  return g;
}

/**
 * Graphs may call `getLogger()` of `@langchain/langgraph-sdk/logging`, which reads the
 * logger a LangGraph server puts at this global symbol (the platform's contract with
 * graph code); an existing one is left in place.
 */
function provideSdkLogger(): void {
  const key = Symbol.for('langgraph.api.sdk-logger');
  const g = globalThis as Record<symbol, unknown>;
  if (g[key]) return;
  const line =
    (level: 'debug' | 'info' | 'warn' | 'error') =>
    (message: unknown, ...rest: unknown[]) =>
      console[level](`[graph] ${String(message)}`, ...rest);
  g[key] = { debug: line('debug'), info: line('info'), warn: line('warn'), error: line('error') };
}

const TYPESCRIPT = new Set(['.ts', '.mts', '.cts', '.tsx']);

/** The tsx loaders registered in this process, by the tsx package they came from. */
const tsxLoaders = new Set<string>();

/**
 * Imports a graph file: JavaScript as it is, TypeScript through `tsx` when the project
 * has it installed (`npm install -D tsx`), as `langgraph dev` does. tsx's loader is
 * registered for the process (as running under `tsx` would), so the graph and the server
 * share one instance of every package, LangGraph's included.
 */
export async function importFile(file: string): Promise<Record<string, unknown>> {
  if (TYPESCRIPT.has(extname(file))) {
    let manifest: string;
    try {
      manifest = createRequire(file).resolve('tsx/package.json');
    } catch {
      throw new Error(
        `${file} is TypeScript: install tsx in the project (npm install -D tsx) to serve it, or point langgraph.json at the compiled .js file`,
      );
    }
    if (!tsxLoaders.has(manifest)) {
      const entry = JSON.parse(readFileSync(manifest, 'utf8')).exports['./esm/api'].import;
      const path = typeof entry === 'string' ? entry : entry.default;
      const api = (await import(pathToFileURL(resolve(dirname(manifest), path)).href)) as {
        register(): unknown;
      };
      api.register();
      tsxLoaders.add(manifest);
    }
  }
  return import(pathToFileURL(file).href);
}

/**
 * The graphs of `langgraph.json` (`"agent": "./src/graph.js:graph"`), loaded once. A run
 * gets its own copy of the graph with the server's checkpointer and store, so runs never
 * share those settings by mutating one graph.
 */
export class GraphRegistry {
  readonly #graphs = new Map<string, Loaded>();

  private constructor() {}

  /** Loads every graph; an error names the graph and the file. */
  static async load(specs: Record<string, string>, cwd: string): Promise<GraphRegistry> {
    provideSdkLogger();
    const registry = new GraphRegistry();
    for (const [graphId, spec] of Object.entries(specs)) {
      const colon = spec.lastIndexOf(':');
      const hasExport = colon > 1 && !/^[a-zA-Z]:[\\/]/.test(spec.slice(colon - 1));
      const file = resolve(cwd, hasExport ? spec.slice(0, colon) : spec);
      const name = hasExport ? spec.slice(colon + 1) : 'default';
      if (!existsSync(file))
        throw new Error(`graph ${JSON.stringify(graphId)}: no such file ${file}`);
      const module = await importFile(file);
      let value = module[name];
      if (value === undefined)
        throw new Error(
          `graph ${JSON.stringify(graphId)}: ${file} exports no ${JSON.stringify(name)}`,
        );
      value = await value;
      const where = `graph ${JSON.stringify(graphId)} (${spec})`;
      registry.#graphs.set(
        graphId,
        typeof value === 'function'
          ? { kind: 'factory', make: value as GraphFactory }
          : { kind: 'compiled', graph: asCompiled(value, where) },
      );
    }
    return registry;
  }

  ids(): string[] {
    return [...this.#graphs.keys()];
  }

  has(graphId: string): boolean {
    return this.#graphs.has(graphId);
  }

  /** The graph with this checkpointer (null: none) and store, for one run or one read. */
  async get(
    graphId: string,
    config: Record<string, unknown>,
    persistence: { checkpointer: BaseCheckpointSaver | null; store: BaseStore },
  ): Promise<CompiledGraphLike> {
    const loaded = this.#graphs.get(graphId);
    if (!loaded) throw notFound(`Graph "${graphId}" not found`);
    const base =
      loaded.kind === 'compiled'
        ? loaded.graph
        : asCompiled(
            await loaded.make(config),
            `graph ${JSON.stringify(graphId)}'s factory result`,
          );
    const graph = base.withConfig({});
    graph.checkpointer = persistence.checkpointer ?? undefined;
    graph.store = persistence.store;
    return graph;
  }
}
