import { isAbsolute, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { CairnError } from '@cairn/core';

/** The longest research question the demo accepts, in characters. */
export const MAX_QUESTION_LENGTH = 2000;
export const DEFAULT_PORT = 4319;
export const DEFAULT_QUESTION =
  'How do cover crops change soil nitrogen through microbes and nitrogen fixation?';

export interface DemoOptions {
  command: 'run' | 'serve' | 'help';
  question: string;
  /** A SQLite file path, or a postgres:// URL. */
  db: string;
  dbKind: 'sqlite' | 'postgres';
  fresh: boolean;
  port: number;
  /** Let the inspector page switch branches, fork and set checkpoints. */
  allowWrites: boolean;
}

export const USAGE = `Usage: pnpm demo [serve] [options]

  (no command)        run the research scenario and print its transcript
  serve, --serve      start the inspector on http://127.0.0.1:${DEFAULT_PORT} (runs the scenario first if the database is empty)

Options:
  -q, --question <text>   the research question (default: "${DEFAULT_QUESTION}")
  --db <path | url>       a SQLite file (default .cairn/cairn.db) or a postgres://... URL
  --fresh                 start over: delete the SQLite file first (on PostgreSQL: drop the demo schema)
  --port <n>              the inspector's port (default ${DEFAULT_PORT})
  --allow-writes          let the inspector page switch branches, fork and set checkpoints (read-only without it)
  -h, --help              this text`;

/**
 * Parses the command line. Every mistake is an `INVALID_ARGUMENT` with a one-line message.
 *
 * @example
 * ```ts
 * parseDemoArgs(['serve', '--port', '5000'], '/home/me'); // { command: 'serve', port: 5000, ... }
 * ```
 */
export function parseDemoArgs(argv: readonly string[], cwd: string): DemoOptions {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv.filter((a) => a !== '--'));
  } catch (error) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `${(error as Error).message.split(/\.\s|\n/)[0]} (see --help)`,
    );
  }
  const { values, positionals } = parsed;
  const extra = positionals.filter((p) => p !== 'serve' && p !== 'run');
  if (extra.length > 0) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `unknown command "${extra[0]}" (commands: run, serve; see --help)`,
    );
  }
  const command = values.help
    ? 'help'
    : values.serve || positionals.includes('serve')
      ? 'serve'
      : 'run';
  const question = checkQuestion(values.question ?? DEFAULT_QUESTION);
  const db = values.db ?? '.cairn/cairn.db';
  if (db.trim() === '')
    throw new CairnError(
      'INVALID_ARGUMENT',
      '--db is empty: give a file path or a postgres:// URL',
    );
  const dbKind = /^postgres(ql)?:\/\//i.test(db) ? 'postgres' : 'sqlite';
  if (dbKind === 'sqlite' && /^[a-z][a-z0-9+.-]*:\/\//i.test(db)) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `--db ${db}: only SQLite file paths and postgres:// URLs are supported`,
    );
  }
  return {
    command,
    question,
    db: dbKind === 'sqlite' && !isAbsolute(db) ? resolve(cwd, db) : db,
    dbKind,
    fresh: values.fresh ?? false,
    port: checkPort(values.port),
    allowWrites: values['allow-writes'] ?? false,
  };
}

function parse(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    strict: true,
    options: {
      question: { type: 'string', short: 'q' },
      db: { type: 'string' },
      fresh: { type: 'boolean' },
      serve: { type: 'boolean' },
      port: { type: 'string' },
      'allow-writes': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

/** A question must have words the agent can search for, and fit in a prompt. */
export function checkQuestion(question: string): string {
  const q = question.trim();
  if (q === '')
    throw new CairnError(
      'INVALID_ARGUMENT',
      'the question is empty: ask something, e.g. -q "Do legumes fix more nitrogen in acid soils?"',
    );
  if (q.length > MAX_QUESTION_LENGTH) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `the question is ${q.length} characters long; at most ${MAX_QUESTION_LENGTH} are allowed`,
    );
  }
  if (!/[a-z]{3,}/i.test(q)) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `the question "${q.slice(0, 40)}" has no words to search for`,
    );
  }
  return q;
}

function checkPort(value: string | undefined): number {
  if (value === undefined) return DEFAULT_PORT;
  const port = Number(value);
  if (!/^\d+$/.test(value) || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `--port must be a number from 0 to 65535, got "${value}"`,
    );
  }
  return port;
}
