/**
 * Every error Cairn throws on purpose carries one of these codes.
 * The union is closed: code that branches on it can be exhaustive.
 */
export type CairnErrorCode =
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'INVALID_ARGUMENT'
  | 'INVALID_UPDATE'
  | 'EMBEDDING_MISMATCH'
  | 'EMBEDDER_FAILED'
  | 'PROVIDER_FAILED'
  | 'SCHEMA_TOO_NEW'
  | 'CLOSED'
  | 'TIMEOUT'
  | 'ABORTED'
  | 'UNAVAILABLE'
  | 'FORGOTTEN'
  | 'DECRYPTION_FAILED';

const CODES: ReadonlySet<string> = new Set<CairnErrorCode>([
  'NOT_FOUND',
  'CONFLICT',
  'INVALID_ARGUMENT',
  'INVALID_UPDATE',
  'EMBEDDING_MISMATCH',
  'EMBEDDER_FAILED',
  'PROVIDER_FAILED',
  'SCHEMA_TOO_NEW',
  'CLOSED',
  'TIMEOUT',
  'ABORTED',
  'UNAVAILABLE',
  'FORGOTTEN',
  'DECRYPTION_FAILED',
]);

/**
 * The one error class of Cairn. `code` says what kind of failure it is, `details`
 * carries the values involved (ids, versions, widths) for programs to read.
 *
 * @example
 * ```ts
 * try {
 *   await store.moveHead(branch.id, expected, next);
 * } catch (e) {
 *   if (isCairnError(e, 'CONFLICT')) retry();
 *   else throw e;
 * }
 * ```
 */
export class CairnError extends Error {
  override readonly name = 'CairnError';
  readonly code: CairnErrorCode;
  readonly details: Readonly<Record<string, unknown>>;

  constructor(
    code: CairnErrorCode,
    message: string,
    options: { cause?: unknown; details?: Record<string, unknown> } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = Object.freeze({ ...options.details });
  }
}

/**
 * True when `e` is a Cairn error (optionally with the given code). It checks the
 * `name` and `code` rather than `instanceof`, so errors thrown by another copy of
 * `@cairn/core` in the same app are recognised too.
 *
 * @example
 * ```ts
 * if (isCairnError(err, 'NOT_FOUND')) return null;
 * ```
 */
export function isCairnError(e: unknown, code?: CairnErrorCode): e is CairnError {
  if (typeof e !== 'object' || e === null) return false;
  const { name, code: actual } = e as { name?: unknown; code?: unknown };
  if (name !== 'CairnError' || typeof actual !== 'string' || !CODES.has(actual)) return false;
  return code === undefined || actual === code;
}

/**
 * `INVALID_ARGUMENT`: the input is malformed. The message names the field and the value.
 *
 * @example
 * ```ts
 * throw invalidArgument(`limit must be an integer from 1 to 1000, got ${limit}`, { limit });
 * ```
 */
export function invalidArgument(message: string, details?: Record<string, unknown>): CairnError {
  return new CairnError('INVALID_ARGUMENT', message, details ? { details } : {});
}

/**
 * `NOT_FOUND`: a thread, message, branch, ... that the call needs does not exist.
 *
 * @example
 * ```ts
 * throw notFound('thread', id); // thread "t-1" not found, details { id: 't-1' }
 * ```
 */
export function notFound(what: string, id: string, details?: Record<string, unknown>): CairnError {
  return new CairnError('NOT_FOUND', `${what} ${JSON.stringify(id)} not found`, {
    details: { id, ...details },
  });
}

/**
 * `CONFLICT`: an id or name is taken, or a compare-and-set lost.
 *
 * @example
 * ```ts
 * throw conflict(`branch "main" already exists in this thread`, { name: 'main' });
 * ```
 */
export function conflict(message: string, details?: Record<string, unknown>): CairnError {
  return new CairnError('CONFLICT', message, details ? { details } : {});
}

/**
 * `UNAVAILABLE`: the database or its client failed (connection refused, a file that is
 * not a database, a lost connection). The driver's error is the `cause`.
 *
 * @example
 * ```ts
 * throw unavailable('could not reach the database', err);
 * ```
 */
export function unavailable(message: string, cause: unknown): CairnError {
  return new CairnError('UNAVAILABLE', message, { cause });
}
