import { createHash } from 'node:crypto';
import { AsyncLock } from '@cairn/core';
import { withSavepoint } from '@cairn/store/adapter';

export type Row = Record<string, unknown>;

export interface QueryResult<R = Row> {
  rows: R[];
  rowCount: number;
}

/**
 * The one thing the store's SQL runs over: a query, and a way to run several queries
 * as a transaction on one connection. Nested `transaction` calls become savepoints, so
 * a failed inner step undoes only itself and leaves the outer transaction usable.
 */
export interface Queryable {
  query<R = Row>(text: string, params?: unknown[]): Promise<QueryResult<R>>;
  /**
   * A statement whose result is not needed. In a transaction on a pipelining connection
   * it is sent without waiting for its answer, and a failure is reported by the next
   * statement (or the commit) instead; elsewhere it is `query`.
   */
  send(text: string, params: unknown[]): Promise<void>;
  transaction<T>(fn: (q: Queryable) => Promise<T>): Promise<T>;
  /** Several statements without parameters (migrations). */
  exec(text: string): Promise<void>;
  /** Transactions waiting for a connection of the pool; absent on one connection. */
  queued?(): number;
}

/** A node-postgres query config: a named statement is prepared once per connection. */
export interface PgQueryConfig {
  name: string;
  text: string;
  values: unknown[];
}

type PgResult = Promise<{ rows: unknown[]; rowCount: number | null }>;
// Optional members say `| undefined` so that real pg and PGlite objects are assignable
// under `exactOptionalPropertyTypes`.
type NotificationListener = (msg: { channel: string; payload?: string | undefined }) => void;

interface PgQueryable {
  query(text: string, values?: unknown[]): PgResult;
  query(config: PgQueryConfig): PgResult;
}

/** The parts of a node-postgres `Pool` the store uses. */
export interface PgPoolLike extends PgQueryable {
  connect(): Promise<PgClientLike & { release(err?: Error | boolean): void }>;
  end(): Promise<void>;
  readonly options?: object | undefined;
  /** Callers waiting for a connection (pg's `Pool.waitingCount`). */
  readonly waitingCount?: number;
}

/** The parts of a node-postgres `Client` (or `PoolClient`) the store uses. */
export interface PgClientLike extends PgQueryable {
  on(event: 'notification', listener: NotificationListener): unknown;
  off?: ((event: 'notification', listener: NotificationListener) => unknown) | undefined;
  removeListener?: ((event: 'notification', listener: NotificationListener) => unknown) | undefined;
}

/** The parts of a PGlite instance the store uses. */
export interface PGliteLike {
  query<T>(text: string, params?: unknown[]): Promise<{ rows: T[]; affectedRows?: number }>;
  exec(text: string): Promise<unknown>;
  transaction<T>(fn: (tx: unknown) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  onNotification(callback: (channel: string, payload: string) => void): () => void;
  readonly closed?: boolean | undefined;
  readonly dataDir?: string | undefined;
}

/** True for a PGlite instance (told apart from a pg client by shape, never by import). */
export function isPGlite(client: unknown): client is PGliteLike {
  const c = client as Partial<PGliteLike> & { waitReady?: unknown };
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof c.exec === 'function' &&
    typeof c.transaction === 'function' &&
    typeof c.query === 'function' &&
    'waitReady' in c
  );
}

/** The SQLSTATE of a driver failure (`23505`, `3D000`, ...), if it has one. */
export function sqlState(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

type Session = Pick<Queryable, 'query' | 'exec'> & {
  /** Statements may be sent before the previous ones are answered (pg's `pipeline` mode). */
  pipelined?: boolean;
  /** Runs `fn`, whose queries are then written to the socket together (one write). */
  together?: <T>(fn: () => T) => T;
};

/** node-postgres's socket, `client.connection.stream`, where it has one. */
type Socket = { cork(): void; uncork(): void };

const statementNames = new Map<string, string>();

/**
 * The store's statements are a fixed set of texts: naming them lets each pg connection
 * parse and plan a statement once instead of on every call.
 */
function named(text: string, values: unknown[]): PgQueryConfig {
  let name = statementNames.get(text);
  if (!name) {
    name = `cairn_${createHash('sha1').update(text).digest('hex').slice(0, 32)}`;
    if (statementNames.size < 10_000) statementNames.set(text, name);
  }
  return { name, text, values };
}

function pgSession(client: PgQueryable): Session {
  const socket = (client as { connection?: { stream?: Partial<Socket> } }).connection?.stream;
  return {
    pipelined: (client as { pipeline?: unknown }).pipeline === true,
    together:
      typeof socket?.cork === 'function' && typeof socket.uncork === 'function'
        ? (fn) => {
            (socket as Socket).cork();
            try {
              return fn();
            } finally {
              (socket as Socket).uncork();
            }
          }
        : undefined,
    async query<R>(text: string, params?: unknown[]) {
      const r = await (params ? client.query(named(text, params)) : client.query(text));
      return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
    },
    async exec(text) {
      await client.query(text);
    },
  };
}

function pgliteSession(db: PGliteLike): Session {
  return {
    async query<R>(text: string, params?: unknown[]) {
      const r = await db.query<R>(text, params);
      return { rows: r.rows, rowCount: Math.max(r.rows.length, r.affectedRows ?? 0) };
    },
    async exec(text) {
      await db.exec(text);
    },
  };
}

/** A held statement that the next query must follow: the transaction's `BEGIN` or a `SAVEPOINT`. */
const opens = (held: string) => held === 'BEGIN' || held.startsWith('SAVEPOINT');

/**
 * What only a NOTIFY raises: its payload too long (22023), the notification queue full (54000).
 */
const NOTICE_FAILURES = new Set(['22023', '54000']);

/**
 * A transaction's statements with fewer round trips: `BEGIN`, `RELEASE SAVEPOINT` and
 * `NOTIFY` are held back and sent with the next statement without parameters (`SAVEPOINT`,
 * `COMMIT`; NOTIFYs after the `COMMIT`, see `commitThenNotify`), as one multi-statement
 * query. A held `BEGIN` goes first when a query comes (on a pipelining connection in the
 * same round trip, without waiting for its answer); on a pipelining connection a `SAVEPOINT`
 * is held too and goes, with the releases before it, in the round trip of the query that
 * follows it. A held release may wait past queries, which then run in the savepoint's
 * subtransaction, whose fate is the enclosing one's either way (and a notification is
 * delivered at commit wherever it stands).
 * `COMMIT` and `ROLLBACK [TO SAVEPOINT]` end every held savepoint themselves, so held
 * releases are dropped; a rollback also drops held notifications (they came after the
 * savepoint rolled back to: a `SAVEPOINT` is sent with what is held, or held only when no
 * notice is), and a rollback to a savepoint still held sends it first. `flush`
 * sends what is held, for a transaction whose `COMMIT` is not this session's (PGlite's).
 * On a pipelining connection, `send` does not wait: the statements sent are awaited with
 * the next one (at the latest a savepoint's release or the commit), so the first failure
 * is the one reported (answers come in order); a rollback awaits them and drops their
 * failure, since it undoes them.
 */
function holding(session: Session): Session & { flush(): Promise<void>; send: Queryable['send'] } {
  let held: string[] = [];
  let sent: Promise<unknown>[] = [];
  /**
   * `next`, after the statements sent before it: its result, or the first failure in the
   * order sent (answers arriving together may settle their promises in any order).
   */
  const after = async <T>(next: Promise<T>): Promise<T> => {
    if (sent.length === 0) return next;
    const before = sent;
    sent = [];
    next.catch(() => undefined);
    for (const p of before) await p;
    return next;
  };
  /**
   * COMMIT, then the transaction's NOTIFYs in a notify-only transaction of their own, in one
   * round trip. Postgres serializes the commits of transactions that sent NOTIFY (a
   * database-wide lock, taken in PreCommit_Notify and held until the commit record is
   * flushed): with its NOTIFYs inside, every write would commit one at a time, a WAL flush
   * each, whatever the pool's size. Sent after it, writes commit side by side (group commit)
   * and the notify-only transaction, which does not wait for its flush (`synchronous_commit`
   * off: it writes nothing but notices, which a server crash takes with it anyway), holds that
   * lock only briefly. The leading `SELECT 1` fails in a transaction that a statement sent
   * without waiting aborted, so the rest is skipped and no notice tells of a rolled-back
   * write (COMMIT alone would roll back without an error). A notice that fails once the data
   * committed (too long, or Postgres's notification queue full) is dropped: the write stands.
   */
  const commitThenNotify = async (begin: string[], notices: string[]): Promise<void> => {
    const batch = [
      ...begin,
      'SELECT 1',
      'COMMIT',
      'BEGIN',
      ...notices,
      'SET LOCAL synchronous_commit = off',
      'COMMIT',
    ].join('; ');
    let noticeFailed = false;
    await after(
      session.exec(batch).catch((e: unknown) => {
        if (!NOTICE_FAILURES.has(sqlState(e) ?? '')) throw e;
        noticeFailed = true;
      }),
    );
    if (noticeFailed) await session.exec('ROLLBACK').catch(() => undefined);
  };
  const self: Session & { flush(): Promise<void>; send: Queryable['send'] } = {
    async flush() {
      if (held.length > 0) await after(session.exec(held.splice(0).join('; ')));
    },
    async query<R>(text: string, params?: unknown[]) {
      if (held.some(opens)) {
        // What opens the transaction or a savepoint goes first, and the releases before it;
        // notices stay held for the commit.
        const batch = held.filter((h) => !h.startsWith('NOTIFY'));
        held = held.filter((h) => h.startsWith('NOTIFY'));
        if (session.pipelined) {
          // One write for both (where the socket can be corked); the batch's failure, if
          // any, is the one reported.
          const [opened, result] = (session.together ?? ((fn) => fn()))(
            () => [session.exec(batch.join('; ')), session.query<R>(text, params)] as const,
          );
          result.catch(() => undefined);
          await opened;
          return result;
        }
        await session.exec(batch.join('; '));
      }
      return after(session.query<R>(text, params));
    },
    async send(text, params) {
      // The statement goes out now (with a held BEGIN, if any); only its answer waits.
      const p = self.query(text, params);
      if (!session.pipelined) {
        await p;
        return;
      }
      p.catch(() => undefined);
      sent.push(p);
    },
    async exec(text) {
      // A savepoint's statements answer before it is released: a failure is its own.
      if (text.startsWith('RELEASE SAVEPOINT')) await after(Promise.resolve());
      if (text === 'BEGIN' || text.startsWith('RELEASE SAVEPOINT') || text.startsWith('NOTIFY')) {
        held.push(text);
        return;
      }
      // On a pipelining connection a savepoint goes out with the statement that follows it,
      // unless statements sent before it are unanswered (their failure is reported here, not
      // inside the savepoint) or notices are held (a rollback to it would drop them).
      if (
        text.startsWith('SAVEPOINT') &&
        session.pipelined &&
        sent.length === 0 &&
        !held.some((h) => h.startsWith('NOTIFY'))
      ) {
        held.push(text);
        return;
      }
      if (text === 'COMMIT') {
        const notices = held.filter((h) => h.startsWith('NOTIFY'));
        held = held.filter((h) => h === 'BEGIN');
        if (notices.length > 0) return commitThenNotify(held.splice(0), notices);
      } else if (text.startsWith('ROLLBACK')) {
        // A savepoint rolled back to that is still held is sent first, with what it follows
        // (held since it was, so no notices); what came after it is dropped.
        const at = text.startsWith('ROLLBACK TO SAVEPOINT ')
          ? held.lastIndexOf(text.slice('ROLLBACK TO '.length))
          : -1;
        held = at >= 0 ? held.slice(0, at + 1) : held.filter((h) => h === 'BEGIN');
        await Promise.allSettled(sent.splice(0));
      }
      const batch = [...held, text].join('; ');
      held = [];
      await after(session.exec(batch));
    },
  };
  return self;
}

/** `send` where statements are not pipelined: `query`, its result dropped. */
const waiting =
  (query: Queryable['query']): Queryable['send'] =>
  async (text, params) => {
    await query(text, params);
  };

/** A queryable bound to one connection that is inside a transaction (depth > 0 = savepoints). */
function inTransaction(session: Session & Pick<Queryable, 'send'>, depth = 0): Queryable {
  return {
    query: session.query,
    exec: session.exec,
    send: session.send,
    transaction: (fn) =>
      withSavepoint(session.exec, `cairn_sp_${depth}`, () => fn(inTransaction(session, depth + 1))),
  };
}

/** Thrown-through marker: the connection could not roll back and must not be reused. */
const UNUSABLE = Symbol('cairn.unusableConnection');

async function runTransaction<T>(
  connection: Session,
  fn: (q: Queryable) => Promise<T>,
): Promise<T> {
  const session = holding(connection);
  await session.exec('BEGIN');
  let result: T;
  try {
    result = await fn(inTransaction(session));
    // A statement sent without waiting may fail here, its transaction still open.
    await session.exec('COMMIT');
  } catch (e) {
    try {
      await session.exec('ROLLBACK');
    } catch {
      if (typeof e === 'object' && e !== null) (e as Record<symbol, boolean>)[UNUSABLE] = true;
    }
    throw e;
  }
  return result;
}

/** A pool: each transaction borrows a connection of its own. */
export function poolQueryable(pool: PgPoolLike): Queryable {
  const session = pgSession(pool);
  return {
    query: session.query,
    exec: session.exec,
    send: waiting(session.query),
    queued: () => pool.waitingCount ?? 0,
    async transaction(fn) {
      const client = await pool.connect();
      try {
        const result = await runTransaction(pgSession(client), fn);
        client.release();
        return result;
      } catch (e) {
        // A connection that could not roll back may still be mid-transaction: destroy it.
        const unusable =
          typeof e === 'object' && e !== null && (e as Record<symbol, boolean>)[UNUSABLE] === true;
        client.release(unusable ? true : undefined);
        throw e;
      }
    },
  };
}

/** One lock per pg connection, shared by every store opened on it. */
const connectionLocks = new WeakMap<object, AsyncLock>();

/**
 * One connection: a pg `Client`/`PoolClient` or a PGlite instance. Statements and
 * transactions take turns, so nothing interleaves with a transaction in progress — for
 * pg through a lock shared by all stores on that client, for PGlite through its own
 * transaction API (which also keeps the application's own queries out of ours).
 */
export function sessionQueryable(client: PgClientLike | PGliteLike): Queryable {
  if (isPGlite(client)) {
    const session = pgliteSession(client);
    return {
      query: session.query,
      exec: session.exec,
      send: waiting(session.query),
      transaction: (fn) =>
        client.transaction(async (tx) => {
          const session = holding(pgliteSession(tx as PGliteLike));
          const result = await fn(inTransaction(session));
          await session.flush();
          return result;
        }),
    };
  }
  const session = pgSession(client);
  const turn = connectionLocks.get(client) ?? new AsyncLock();
  connectionLocks.set(client, turn);
  const query: Queryable['query'] = <R>(text: string, params?: unknown[]) =>
    turn.run(() => session.query(text, params)) as Promise<QueryResult<R>>;
  return {
    query,
    exec(text) {
      return turn.run(() => session.exec(text));
    },
    send: waiting(query),
    transaction(fn) {
      return turn.run(() => runTransaction(session, fn));
    },
  };
}
