import { badRequest } from './http.js';

export { badRequest };

/**
 * Request checks: each names the field and what it must be, and throws a 400 before
 * anything is read or written, as the LangGraph API server answers a body or a path it
 * cannot validate.
 */
const invalid = (message: string) => badRequest(message);

export type Json = Record<string, unknown>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A path parameter that must be a UUID (thread, run, assistant, cron ids). */
export function uuidParam(value: string | undefined, name: string): string {
  if (!value || !UUID.test(value))
    throw invalid(`${name} must be a UUID, got ${JSON.stringify(value)}`);
  return value.toLowerCase();
}

export const isUuid = (value: unknown): value is string =>
  typeof value === 'string' && UUID.test(value);

/** The body as an object (`{}` when there was none). */
export function body(value: unknown, allowMissing = true): Json {
  if (value === undefined && allowMissing) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw invalid('the request body must be a JSON object');
  return value as Json;
}

export function optString(b: Json, key: string): string | undefined {
  const v = b[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalid(`${key} must be a string`);
  return v;
}

export function optObject(b: Json, key: string): Json | undefined {
  const v = b[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid(`${key} must be an object`);
  return v as Json;
}

export function optInt(
  b: Json,
  key: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  const v = b[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
    throw invalid(`${key} must be an integer from ${min} to ${max}`);
  return v;
}

export function optNumber(b: Json, key: string, min: number): number | undefined {
  const v = b[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min)
    throw invalid(`${key} must be a number of at least ${min}`);
  return v;
}

export function optBool(b: Json, key: string): boolean | undefined {
  const v = b[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw invalid(`${key} must be true or false`);
  return v;
}

export function optEnum<T extends string>(
  b: Json,
  key: string,
  values: readonly T[],
): T | undefined {
  const v = b[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || !values.includes(v as T))
    throw invalid(
      `${key} must be one of ${values.map((x) => JSON.stringify(x)).join(', ')}, got ${JSON.stringify(v)}`,
    );
  return v as T;
}

export function optStringArray(b: Json, key: string): string[] | undefined {
  const v = b[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string'))
    throw invalid(`${key} must be an array of strings`);
  return v as string[];
}

/** A string or a list of strings, as a list. */
export function optStringOrArray(b: Json, key: string): string[] | undefined {
  const v = b[key];
  if (typeof v === 'string') return [v];
  return optStringArray(b, key);
}

/** `limit`/`offset` of a search body or query, with the server's defaults. */
export function paging(b: Json, defaultLimit = 10): { limit: number; offset: number } {
  return {
    limit: optInt(b, 'limit', 0, 10_000) ?? defaultLimit,
    offset: optInt(b, 'offset', 0) ?? 0,
  };
}

/** A query string's values as a body: numbers and booleans parsed. */
export function queryBody(query: URLSearchParams): Json {
  const out: Json = {};
  for (const [k, v] of query) {
    if (/^-?\d+$/.test(v)) out[k] = Number(v);
    else if (v === 'true' || v === 'false') out[k] = v === 'true';
    else out[k] = v;
  }
  return out;
}
