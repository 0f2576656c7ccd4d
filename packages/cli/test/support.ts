import { execFile, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { EncryptionOptions, Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import {
  dropSchema,
  freshSchema,
  POSTGRES_TEST_URL,
  postgresTestSkip,
} from '@cairn/store-postgres/testing';
import { createSqliteStore } from '@cairn/store-sqlite';

const BIN = fileURLToPath(new URL('../dist/bin.js', import.meta.url));

export interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Starts the built `cairn inspect` with `args` and waits for the address it prints. `stop()`
 * sends SIGTERM and gives the exit code; `stderr()` what it wrote there so far.
 */
export async function startInspect(
  args: string[],
): Promise<{ url: string; stop(): Promise<number | null>; stderr(): string }> {
  const child = spawn(process.execPath, [BIN, 'inspect', ...args]);
  let err = '';
  child.stderr.on('data', (d) => {
    err += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /at (http:\/\/\S+) \(read-only\)/.exec(out);
      if (m) resolve(m[1]!);
    });
    void exited.then((code) => reject(new Error(`inspect exited ${code}: ${err}`)));
  });
  return {
    url,
    stderr: () => err,
    stop() {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

/** Runs the built `cairn` with `args` (and `input` on stdin). */
export function cairn(args: string[], input?: string | Buffer): Promise<Result> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [BIN, ...args],
      { maxBuffer: 256 * 1024 * 1024, encoding: 'utf8' },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
    child.stdin?.end(input ?? '');
  });
}

/**
 * Runs the command line in this process (no child to start: fast): `run` from the source
 * with `input` on stdin.
 */
export async function cairnHere(args: string[], input?: string | Buffer): Promise<Result> {
  const { run } = await import('../src/cli.js');
  let stdout = '';
  let stderr = '';
  const sink = (add: (text: string) => void) =>
    new Writable({
      write(chunk, _encoding, done) {
        add(String(chunk));
        done();
      },
    });
  const code = await run(args, {
    stdout: sink((t) => {
      stdout += t;
    }),
    stderr: sink((t) => {
      stderr += t;
    }),
    stdin: Readable.from(input === undefined ? [] : [Buffer.from(input)]),
  });
  return { code, stdout, stderr };
}

export const tempDir = () => mkdtempSync(join(tmpdir(), 'cairn-cli-'));

/** A database the tests can name on the command line and open as a store. */
export interface TestDb {
  /** What `cairn` is given. */
  arg: string;
  /** A store on the database; with `encryption`, a store that seals. */
  open(options?: { encryption?: EncryptionOptions }): Promise<Store>;
  drop(): Promise<void>;
}

export type Kind = 'sqlite' | 'postgres';

/** Why the Postgres server is skipped (false when it is reachable). */
export const skipPostgres = await postgresTestSkip('cli');
/** The stores every command is tested on: SQLite, and Postgres when reachable. */
export const kinds: Kind[] = skipPostgres ? ['sqlite'] : ['sqlite', 'postgres'];

export function testDb(kind: Kind): TestDb {
  if (kind === 'sqlite') {
    const path = join(tempDir(), 'cairn.db');
    return {
      arg: path,
      open: async (options = {}) => createSqliteStore({ path }, options),
      drop: async () => {},
    };
  }
  const schema = freshSchema('cairn_cli');
  const url = new URL(POSTGRES_TEST_URL);
  url.searchParams.set('schema', schema);
  return {
    arg: url.toString(),
    open: (options = {}) =>
      createPostgresStore(
        { connectionString: POSTGRES_TEST_URL },
        { schema, maxConnections: 2, ...options },
      ),
    drop: () => dropSchema(schema),
  };
}

/** A thread with a two-message main branch, a fork, a checkpoint and a state commit. */
export async function seed(store: Store, title = 'Soil carbon') {
  const thread = await store.createThread({ title, resourceId: 'user-1', metadata: { k: 1 } });
  const [a, b] = await store.addMessages([
    { threadId: thread.id, parentId: null, role: 'user', data: 'hello' },
    { threadId: thread.id, parentId: null, role: 'assistant', data: { text: 'hi there' } },
  ]);
  const [b2] = await store.addMessages([
    { threadId: thread.id, parentId: a!.id, role: 'assistant', data: 'reply' },
  ]);
  const main = await store.createBranch({
    threadId: thread.id,
    name: 'main',
    headMessageId: b2!.id,
  });
  const alt = await store.createBranch({
    threadId: thread.id,
    name: 'alt',
    headMessageId: b!.id,
    parentBranchId: main.id,
  });
  await store.saveCheckpoint({ threadId: thread.id, name: 'start', messageId: a!.id });
  await store.appendStateCommit(
    { branchId: main.id, messageId: b2!.id, update: { n: 1 }, snapshot: { n: 1 } },
    0,
  );
  return { thread, main, alt, messages: { a: a!, b: b!, b2: b2! } };
}
