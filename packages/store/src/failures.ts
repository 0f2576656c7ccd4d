/** The errors adapters raise for their own failures, worded once for every store. */
import { CairnError, invalidArgument, isCairnError, unavailable } from '@cairn/core';
import type { Tombstone } from './driver.js';

/**
 * A failure as a `CairnError`: one as it is, anything else (a failure of the database
 * or its client) `UNAVAILABLE`, saying what failed, with the failure as `cause`.
 */
export function asCairnError(e: unknown, what: string): CairnError {
  if (isCairnError(e)) return e;
  return unavailable(`${what}: ${e instanceof Error ? e.message : String(e)}`, e);
}

/** `TIMEOUT` for a wait on another connection's lock that gave up; `cause` is the driver's error. */
export function lockTimeout(cause: unknown): CairnError {
  const why = cause instanceof Error ? `: ${cause.message}` : '';
  return new CairnError('TIMEOUT', `a lock stayed held by another connection${why}`, { cause });
}

/**
 * `CONFLICT` for a unique key another writer took between the front door's check and
 * the insert (a concurrent session); the driver's error is the `cause`.
 */
export function takenMeanwhile(cause: unknown, details?: Record<string, unknown>): CairnError {
  const message = 'another writer took an id of this call meanwhile; nothing was stored';
  return new CairnError('CONFLICT', message, { cause, ...(details ? { details } : {}) });
}

/**
 * `CONFLICT` for a transaction the database rolled back to break a deadlock with another
 * (two writers taking the same rows in different orders): nothing of it was written, and
 * trying again is safe. The driver's error is the `cause`.
 */
export function deadlocked(cause: unknown): CairnError {
  const message = 'a deadlock with another transaction rolled this one back; nothing was stored';
  return new CairnError('CONFLICT', message, { cause, details: { reason: 'deadlock' } });
}

/**
 * `NOT_FOUND` for a row a write refers to that another writer deleted between the front
 * door's check and the write (a foreign key the database refused): `column` and `value`
 * name it, as `threadId` or `branchId` in the details when it is one of those, so that the
 * front door can tell a forgotten one (`FORGOTTEN`). The driver's error is the `cause`.
 */
export function goneMeanwhile(cause: unknown, column?: string, value?: string): CairnError {
  const field = { thread_id: 'threadId', branch_id: 'branchId' }[column ?? ''];
  const what = column && value !== undefined ? ` (${column} ${JSON.stringify(value)})` : '';
  return new CairnError(
    'NOT_FOUND',
    `a row this write refers to${what} was deleted meanwhile; nothing was stored`,
    { cause, ...(field && value !== undefined ? { details: { [field]: value } } : {}) },
  );
}

/**
 * `SCHEMA_TOO_NEW`: `where` (a file, a schema) was migrated by a newer version of `pkg`
 * than this one, which supports versions up to `supported`. Nothing is changed.
 */
export function schemaTooNew(
  where: string,
  found: number,
  supported: number,
  pkg: string,
): CairnError {
  return new CairnError(
    'SCHEMA_TOO_NEW',
    `${where} is at schema version ${found}, newer than this ${pkg} knows (${supported}); upgrade the package`,
    { details: { found, supported } },
  );
}

/** An adapter's option that must be one of `allowed`: `INVALID_ARGUMENT` naming it otherwise. */
export function checkOneOf<T>(label: string, value: unknown, allowed: readonly T[]): T {
  if (allowed.includes(value as T)) return value as T;
  const choices = allowed.map((a) => JSON.stringify(a)).join(' or ');
  throw invalidArgument(`${label} must be ${choices}, got ${JSON.stringify(value)}`, {
    field: label,
  });
}

/** `FORGOTTEN`: a write that would bring back data of a forgotten subject. */
export function forgotten(t: Tombstone, cause?: unknown): CairnError {
  return new CairnError(
    'FORGOTTEN',
    `${t.kind} ${JSON.stringify(t.key)} was forgotten at ${new Date(t.at).toISOString()}; its data cannot be written again`,
    { details: { kind: t.kind, key: t.key, at: t.at }, ...(cause === undefined ? {} : { cause }) },
  );
}
