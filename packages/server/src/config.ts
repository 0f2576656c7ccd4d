import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/** What `cairn serve` reads of a `langgraph.json`: the graphs, the environment, the auth hook. */
export interface ServeConfig {
  /** Graph id to `./path/to/file.js:exportName` (a compiled graph, a StateGraph, or a factory). */
  graphs: Record<string, string>;
  /** Variables set before the graphs load: an object, or the path of a `.env` file. */
  env: Record<string, string>;
  /** A module exporting the auth hook (`path.js:auth`), as `langgraph.json`'s `auth.path`. */
  authPath: string | null;
  /** The directory paths are relative to: the config file's. */
  cwd: string;
}

/** Parses `KEY=value` lines (quotes stripped, `#` comments skipped). */
function parseDotenv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const m = /^\s*(?:export\s+)?([\w.-]+)\s*=\s*(.*?)\s*$/.exec(line);
    if (!m || line.trimStart().startsWith('#')) continue;
    out[m[1]!] = m[2]!.replace(/^(['"])(.*)\1$/, '$2');
  }
  return out;
}

/**
 * Reads a `langgraph.json` as `langgraph dev` does: `graphs` (a path or `{ path }` per
 * graph), `env` (an object or a `.env` path) and `auth.path`. Other keys (`dependencies`,
 * `node_version`, `ui`, `http`) are left to the LangGraph CLI.
 */
export function loadConfig(path: string): ServeConfig {
  const file = resolve(path);
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`cannot read ${path}: ${(e as Error).message}`);
  }
  const cwd = dirname(file);
  const graphs: Record<string, string> = {};
  const rawGraphs = raw.graphs;
  if (typeof rawGraphs !== 'object' || rawGraphs === null || Object.keys(rawGraphs).length === 0)
    throw new Error(`${path} names no graphs: add "graphs": { "agent": "./src/graph.js:graph" }`);
  for (const [id, spec] of Object.entries(rawGraphs)) {
    const p = typeof spec === 'string' ? spec : (spec as { path?: unknown })?.path;
    if (typeof p !== 'string')
      throw new Error(`${path}: graph ${JSON.stringify(id)} must be a path or { "path": … }`);
    graphs[id] = p;
  }
  let env: Record<string, string> = {};
  if (typeof raw.env === 'string') env = parseDotenv(readFileSync(resolve(cwd, raw.env), 'utf8'));
  else if (typeof raw.env === 'object' && raw.env !== null)
    env = Object.fromEntries(Object.entries(raw.env).map(([k, v]) => [k, String(v)]));
  const auth = raw.auth as { path?: unknown } | undefined;
  return { graphs, env, authPath: typeof auth?.path === 'string' ? auth.path : null, cwd };
}
