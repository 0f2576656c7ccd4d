import { type ParseArgsConfig, parseArgs } from 'node:util';
import { isCairnError } from '@cairn/core';
import { doctor } from './commands/doctor.js';
import { inspect } from './commands/inspect.js';
import { migrate } from './commands/migrate.js';
import { parseAge, parseDutyCycle, prune } from './commands/prune.js';
import { show, threads } from './commands/read.js';
import { serve } from './commands/serve.js';
import { copyStore } from './copy.js';
import {
  CliError,
  KEYRING_ENV,
  keyringOption,
  type OpenOptions,
  openStore,
  parseTarget,
  redact,
  type Target,
  usage,
} from './database.js';
import { checkHeader, exportDump, importDump, linesOf } from './dump.js';
import { type Io, table } from './output.js';
import { Progress } from './progress.js';

interface Option {
  type: 'string' | 'boolean';
  short?: string;
  multiple?: boolean;
  description: string;
}
type Options = Record<string, Option>;
type Values = Record<string, string | boolean | string[] | undefined>;

interface Command {
  /** `cairn <name> <args>`: the positionals, in order. */
  args: string[];
  summary: string;
  options: Options;
  /** Lines after the usage line, for `--help`. */
  help: string[];
  run(positionals: string[], values: Values, io: Io): Promise<number>;
}

const DB_HELP = [
  '<db> is a SQLite file path or a Postgres URL (postgres://user@host:5432/db?schema=cairn;',
  'the schema defaults to cairn). Nothing is created or migrated unless the command says so.',
];

const json: Options = { json: { type: 'boolean', description: 'print JSON instead of a table' } };

const keyring: Options = {
  keyring: {
    type: 'string',
    description: `a file holding the keyring secret of an encrypted database (or ${KEYRING_ENV})`,
  },
};

const KEYRING_HELP = [
  `An encrypted database (a store created with encryption: { keyring: localKeyring(secret) })`,
  `needs its secret: --keyring <file> or ${KEYRING_ENV}; without it the command is refused`,
  'before anything is read or written.',
];

/** The options of a command that reads or writes messages, state or memories. */
const withValues = (v: Values): OpenOptions => ({
  encryption: keyringOption(str(v.keyring)),
  values: true,
});

/** Runs `fn` with the store on `db` at the current schema, closing it afterwards. */
async function withStore<T>(
  db: string,
  fn: (store: Awaited<ReturnType<typeof openStore>>) => Promise<T>,
  o: OpenOptions = {},
) {
  const store = await openStore(parseTarget(db), 'current', o);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

function positiveInt(value: Values[string], name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1)
    throw usage(`--${name} must be a positive integer, got ${JSON.stringify(value)}`);
  return n;
}

const str = (v: Values[string]) => (typeof v === 'string' ? v : undefined);

export const COMMANDS: Record<string, Command> = {
  threads: {
    args: ['<db>'],
    summary: 'list the threads, newest first',
    options: {
      ...json,
      resource: { type: 'string', description: 'only the threads of this resource id' },
      limit: { type: 'string', description: 'at most this many' },
    },
    help: DB_HELP,
    run: ([db], v, io) => {
      const resourceId = str(v.resource);
      const limit = positiveInt(v.limit, 'limit');
      const options = {
        ...(resourceId === undefined ? {} : { resourceId }),
        ...(limit === undefined ? {} : { limit }),
        json: !!v.json,
      };
      return withStore(db!, (store) => threads(store, options, io));
    },
  },
  show: {
    args: ['<db>', '<thread>'],
    summary: "print a thread: its branches, checkpoints and a branch's messages",
    options: {
      ...json,
      ...keyring,
      branch: { type: 'string', description: 'the branch to print (default: the active one)' },
    },
    help: [...DB_HELP, ...KEYRING_HELP],
    run: ([db, thread], v, io) => {
      const branch = str(v.branch);
      return withStore(
        db!,
        (store) =>
          show(store, thread!, { ...(branch === undefined ? {} : { branch }), json: !!v.json }, io),
        withValues(v),
      );
    },
  },
  migrate: {
    args: ['<db>'],
    summary: 'bring the schema up to date (the database must exist)',
    options: {},
    help: [
      ...DB_HELP,
      'Applies the pending migrations of an older Cairn database, or creates the schema in an',
      'empty SQLite file or an empty Postgres schema. A missing SQLite file is not created.',
    ],
    run: ([db], _v, io) => migrate(parseTarget(db!), io),
  },
  doctor: {
    args: ['<db>'],
    summary: 'check a database: schema, integrity, embedding space, orphans, sizes',
    options: json,
    help: [
      ...DB_HELP,
      'Reports the schema version and pending migrations, the integrity check, the embedding',
      'space, rows pointing at missing rows, and rows and bytes per table. Writes nothing.',
      'Exits 1 when it finds a problem.',
    ],
    run: ([db], v, io) => doctor(parseTarget(db!), !!v.json, io),
  },
  export: {
    args: ['<db>'],
    summary: 'write a dump of the database (JSONL) to stdout',
    options: {
      thread: {
        type: 'string',
        multiple: true,
        description: 'only this thread (repeatable); leaves leases and memories out',
      },
      ...keyring,
    },
    help: [
      ...DB_HELP,
      'The dump holds threads, messages, branches, checkpoints, state commits, turns, leases,',
      'memories with their embeddings and the embedding space; its format is in the README.',
      'The database may be in use: each thread is read whole; one deleted meanwhile is left out.',
      ...KEYRING_HELP,
      'The dump of an encrypted database is in plaintext: keep it as you keep the secret.',
    ],
    run: async ([db], v, io) => {
      const threadIds = Array.isArray(v.thread) ? v.thread : undefined;
      const { vanished } = await withStore(
        db!,
        (store) => exportDump(store, io.stdout, threadIds ? { threadIds } : {}),
        withValues(v),
      );
      if (vanished > 0)
        io.stderr.write(
          `cairn: ${vanished} threads were deleted while the dump was written and are not in it\n`,
        );
      return 0;
    },
  },
  import: {
    args: ['<db>'],
    summary: 'read a dump from stdin into the database (created if missing)',
    options: {
      'skip-existing': {
        type: 'boolean',
        description: 'leave threads and memories the database has already (re-running an import)',
      },
      ...keyring,
    },
    help: [
      ...DB_HELP,
      'Each thread is written whole or not at all. A dump of a newer format is refused before',
      'anything is opened. A missing SQLite file or Postgres schema is created.',
      ...KEYRING_HELP,
      'With a keyring, what is imported is sealed (a new database becomes an encrypted one).',
    ],
    run: async ([db], v, io) => {
      const open = withValues(v);
      const lines = linesOf(io.stdin);
      checkHeader((await lines.next()).value);
      const store = await openStore(parseTarget(db!), 'create', open);
      try {
        const { written, skippedThreads, keptLeases } = await importDump(store, lines, {
          skipExisting: !!v['skip-existing'],
        }).catch((e) => {
          if (!isCairnError(e, 'CONFLICT')) throw e;
          throw new CliError(
            `${e.message}; --skip-existing keeps what is there and imports the rest`,
          );
        });
        const notes = [
          ...(skippedThreads ? [`${skippedThreads} threads were there already`] : []),
          ...(keptLeases ? [`${keptLeases} leases live in the database were kept`] : []),
        ];
        io.stderr.write(
          `imported ${written.threads} threads, ${written.messages} messages, ${written.leases} leases, ${written.memories} memories${notes.length ? ` (${notes.join('; ')})` : ''}\n`,
        );
      } finally {
        await store.close();
      }
      return 0;
    },
  },
  copy: {
    args: ['<from>', '<to>'],
    summary: 'copy a database into another (e.g. SQLite to Postgres), resumably, then verify',
    options: {
      progress: {
        type: 'boolean',
        description: 'show progress on stderr even when it is not a terminal',
      },
      batch: { type: 'string', description: 'threads per transaction (default 100)' },
      json: { type: 'boolean', description: 'print the result as JSON' },
    },
    help: [
      '<from> and <to> are SQLite paths or Postgres URLs; <to> is created when missing and must',
      'be empty or hold an earlier, interrupted copy: threads and memories it has are skipped,',
      'so running the same copy again after a kill finishes it without duplicates. At the end,',
      'every table is counted and checksummed on both sides; a difference exits 1.',
    ],
    run: async ([fromArg, toArg], v, io) => {
      const batch = positiveInt(v.batch, 'batch');
      const from = parseTarget(fromArg!);
      const to = parseTarget(toArg!);
      // Sealed rows are not copied as they are (each tenant's data key is the database's
      // own): an encrypted database goes through export and import with --keyring.
      const source = await openStore(from, 'current', { values: true });
      try {
        const target = await openStore(to, 'create', { values: true });
        try {
          const bar =
            v.progress || (io.stderr as { isTTY?: boolean }).isTTY
              ? new Progress(io.stderr, 'copy')
              : null;
          const result = await copyStore(source, target, {
            ...(batch === undefined ? {} : { batchThreads: batch }),
            ...(bar ? { onProgress: (d: number, t: number) => bar.update(d, t) } : {}),
          });
          bar?.end();
          if (v.json) io.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
          else {
            io.stdout.write(
              `copied ${result.threads.written} threads (${result.threads.skipped} there already), ${result.leases} leases, ${result.memories.written} memories (${result.memories.skipped} there already)\n`,
            );
            io.stdout.write(
              table(
                ['TABLE', 'SOURCE', 'TARGET', 'CHECKSUM', ''],
                result.verified.map((c) => [
                  c.table,
                  String(c.source.count),
                  String(c.target.count),
                  c.source.checksum.slice(0, 16),
                  c.ok ? 'ok' : 'DIFFERENT',
                ]),
              ),
            );
          }
          const bad = result.verified.filter((c) => !c.ok).map((c) => c.table);
          if (bad.length > 0)
            throw new CliError(`the copy differs from the source in ${bad.join(', ')}`);
          return 0;
        } finally {
          await target.close();
        }
      } finally {
        await source.close();
      }
    },
  },
  prune: {
    args: ['<db>'],
    summary: 'delete old turns, inactive threads, old state commits and unvisited branches',
    options: {
      'turns-older-than': {
        type: 'string',
        description: 'finished and failed turns started longer ago than this (30m, 12h, 7d, 2w)',
      },
      'threads-older-than': {
        type: 'string',
        description: 'threads with no update and no message for this long, with all they hold',
      },
      'keep-state-commits': {
        type: 'string',
        description:
          'keep the newest this many state commits per branch (and what kept points need)',
      },
      'branches-older-than': {
        type: 'string',
        description: 'branches nobody created, moved or committed to for this long',
      },
      'duty-cycle': {
        type: 'string',
        description: 'the share of the time the sweep works, above 0 and at most 1 (default 0.1)',
      },
      'dry-run': {
        type: 'boolean',
        description: 'say what the sweep would delete, by the same rules, deleting nothing',
      },
    },
    help: DB_HELP,
    run: ([db], v, io) => {
      const age = (name: string) => {
        const text = str(v[name]);
        return text === undefined ? undefined : parseAge(text, name);
      };
      const duty = str(v['duty-cycle']);
      return prune(
        parseTarget(db!),
        {
          turnsOlderThan: age('turns-older-than'),
          threadsOlderThan: age('threads-older-than'),
          keepStateCommits: positiveInt(v['keep-state-commits'], 'keep-state-commits'),
          branchesOlderThan: age('branches-older-than'),
          dutyCycle: duty === undefined ? undefined : parseDutyCycle(duty),
          dryRun: !!v['dry-run'],
        },
        io,
      );
    },
  },
  forget: {
    args: ['<db>'],
    summary: "delete a user's threads and memories for good, and refuse them from then on",
    options: {
      resource: {
        type: 'string',
        description: 'the threads of this resource id (a user or tenant), with all under them',
      },
      entity: { type: 'string', description: 'the memories of this entity id' },
      world: { type: 'string', description: 'the memories of this world id' },
    },
    help: [
      ...DB_HELP,
      'Prints the receipt as JSON: the subject, what was deleted of each kind, and when.',
      'Leaves tombstones: a later write for the subject fails with FORGOTTEN. See',
      "@cairn/store's README (Forgetting a user) for what it covers and what stays.",
    ],
    run: async ([db], v, io) => {
      const resourceId = str(v.resource);
      const entityId = str(v.entity);
      const worldId = str(v.world);
      if (resourceId === undefined && entityId === undefined && worldId === undefined)
        throw usage('say whom to forget: --resource <id>, --entity <id> and/or --world <id>');
      const receipt = await withStore(db!, (store) =>
        store.forget({
          ...(resourceId === undefined ? {} : { resourceId }),
          ...(entityId === undefined ? {} : { entityId }),
          ...(worldId === undefined ? {} : { worldId }),
        }),
      );
      io.stdout.write(`${JSON.stringify(receipt, null, 2)}\n`);
      return 0;
    },
  },
  inspect: {
    args: ['<db>'],
    summary: 'serve the inspector (a web page) on the database until Ctrl-C',
    options: {
      port: { type: 'string', description: 'the port (default 4319; 0 picks a free one)' },
      host: { type: 'string', description: 'the interface to listen on (default 127.0.0.1)' },
      token: {
        type: 'string',
        description:
          'the access token every request needs (or CAIRN_INSPECT_TOKEN; generated off loopback)',
      },
      'allow-writes': {
        type: 'boolean',
        description: 'let the page switch branches, fork at a message and set checkpoints',
      },
      ...keyring,
    },
    help: [
      ...DB_HELP,
      'Read-only unless started with --allow-writes. On a --host other than loopback',
      '(0.0.0.0, a LAN address) other machines can connect: every request, reads too, needs',
      'the access token, and the address printed carries it (/?token=…), as Jupyter does.',
      ...KEYRING_HELP,
    ],
    run: ([db], v, io) => {
      const port = v.port === undefined ? undefined : Number(v.port);
      if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port <= 65535))
        throw usage(`--port must be a port number from 0 to 65535, got ${JSON.stringify(v.port)}`);
      const host = str(v.host);
      const token = str(v.token) ?? (process.env.CAIRN_INSPECT_TOKEN || undefined);
      return inspect(
        parseTarget(db!),
        {
          ...(port === undefined ? {} : { port }),
          ...(host === undefined ? {} : { host }),
          ...(token === undefined ? {} : { accessToken: token }),
          allowWrites: !!v['allow-writes'],
          open: withValues(v),
        },
        io,
      );
    },
  },
  serve: {
    args: [],
    summary: 'serve the graphs of a langgraph.json over the LangGraph API until Ctrl-C',
    options: {
      config: { type: 'string', description: 'the langgraph.json (default ./langgraph.json)' },
      db: {
        type: 'string',
        description: 'the store: a SQLite file (default ./cairn.db) or a Postgres URL',
      },
      port: { type: 'string', description: 'the port (default 2024; 0 picks a free one)' },
      host: { type: 'string', description: 'the interface to listen on (default 127.0.0.1)' },
      'n-jobs-per-worker': {
        type: 'string',
        description: 'runs this process executes at once (default 10; 0: API only)',
      },
      'lease-ms': {
        type: 'string',
        description: "how long a run's claim holds unrenewed (default 20000)",
      },
      token: {
        type: 'string',
        description: 'require `Authorization: Bearer <token>` (or CAIRN_SERVE_TOKEN)',
      },
      cors: {
        type: 'string',
        multiple: true,
        description: 'an origin a browser page may call from (repeatable; * for any)',
      },
      'allow-truncate': {
        type: 'boolean',
        description:
          "serve POST /internal/truncate (deletes everything), for LangGraph's API tests",
      },
      ...keyring,
    },
    help: [
      'From `langgraph dev` to `cairn serve`, in one step: in the directory of your',
      'langgraph.json, run `npx @cairn/cli serve` instead of `npx @langchain/langgraph-cli dev`.',
      'The same graphs (.js/.mjs, or .ts with tsx installed), `env` and `auth.path`; the same',
      'API on port 2024 for @langchain/langgraph-sdk, RemoteGraph and useStream. Threads, runs,',
      'streams and the long-term store are kept in --db, so they outlive the process; on a',
      'Postgres URL any number of `cairn serve` processes share the runs.',
      '',
      'Binds to 127.0.0.1 unless --host says otherwise: with another host, set --token (or an',
      'auth hook in langgraph.json), which scopes every thread, run and cron to its caller.',
      '--db is a SQLite file (created if missing) or a Postgres URL (?schema=name, default',
      'cairn); serve brings its schema up to date. With --keyring (or CAIRN_KEYRING_SECRET) it',
      'seals what it stores with a data key per resource; an encrypted --db needs it.',
    ],
    run: (_args, v, io) => {
      const int = (name: string, fallback: number, min: number) => {
        const raw = v[name];
        if (raw === undefined) return fallback;
        const n = Number(raw);
        if (!Number.isInteger(n) || n < min)
          throw usage(
            `--${name} must be an integer of at least ${min}, got ${JSON.stringify(raw)}`,
          );
        return n;
      };
      const port = int('port', 2024, 0);
      if (port > 65535) throw usage(`--port must be a port number from 0 to 65535, got ${port}`);
      const host = str(v.host) ?? '127.0.0.1';
      const token = str(v.token) ?? process.env.CAIRN_SERVE_TOKEN;
      return serve(
        parseTarget(str(v.db) ?? 'cairn.db'),
        {
          config: str(v.config) ?? 'langgraph.json',
          port,
          host,
          concurrency: int('n-jobs-per-worker', 10, 0),
          ...(v['lease-ms'] === undefined ? {} : { leaseMs: int('lease-ms', 20_000, 100) }),
          ...(token ? { token } : {}),
          corsOrigins: Array.isArray(v.cors) ? v.cors : [],
          testEndpoints: !!v['allow-truncate'],
          open: withValues(v),
        },
        io,
      );
    },
  },
};

const HELP_OPTION: Options = {
  help: { type: 'boolean', short: 'h', description: 'show this help' },
};

function optionLines(options: Options): string[] {
  return Object.entries({ ...options, ...HELP_OPTION }).map(([name, o]) => {
    const flag = `--${name}${o.type === 'string' ? ' <value>' : ''}${o.short ? `, -${o.short}` : ''}${o.multiple ? ' …' : ''}`;
    return `  ${flag.padEnd(22)} ${o.description}`;
  });
}

function commandHelp(name: string, c: Command): string {
  return [
    `usage: cairn ${name} ${c.args.join(' ')} [options]`,
    '',
    `${c.summary[0]!.toUpperCase()}${c.summary.slice(1)}.`,
    ...c.help,
    '',
    'options:',
    ...optionLines(c.options),
    '',
  ].join('\n');
}

export function mainHelp(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
  return [
    'usage: cairn <command> [options]',
    '',
    'Look into, check, migrate, dump, restore, copy and prune a Cairn database, serve the\ninspector on it, or serve LangGraph graphs on it: a SQLite file or a Postgres URL.',
    '',
    'commands:',
    ...Object.entries(COMMANDS).map(([n, c]) => `  ${n.padEnd(width)}  ${c.summary}`),
    '',
    'Run `cairn <command> --help` for its options.',
    '',
  ].join('\n');
}

/** Every option's description is for help only: parseArgs must not see it. */
function parseConfig(options: Options): NonNullable<ParseArgsConfig['options']> {
  const out: NonNullable<ParseArgsConfig['options']> = {};
  for (const [k, { type, short, multiple }] of Object.entries({ ...options, ...HELP_OPTION }))
    out[k] = { type, ...(short ? { short } : {}), ...(multiple ? { multiple } : {}) };
  return out;
}

/**
 * Runs the command line (`argv` without `node` and the script) and returns the exit
 * code: 0 on success, 1 on a failure, 2 on bad usage. A failure is reported as one line
 * on stderr.
 *
 * @example
 * ```ts
 * import { run } from '@cairn/cli';
 * const code = await run(['--help']);
 * ```
 */
export async function run(
  argv: string[],
  io: Io = { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin },
): Promise<number> {
  const [name, ...rest] = argv;
  try {
    if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
      io.stdout.write(mainHelp());
      return name === undefined ? 2 : 0;
    }
    const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
    if (!command) throw usage(`unknown command ${JSON.stringify(name)}; run \`cairn --help\``);
    let parsed: { values: Values; positionals: string[] };
    try {
      parsed = parseArgs({
        args: rest,
        options: parseConfig(command.options),
        allowPositionals: true,
        strict: true,
      }) as { values: Values; positionals: string[] };
    } catch (e) {
      throw usage(`${(e as Error).message.split('\n')[0]}; run \`cairn ${name} --help\``);
    }
    if (parsed.values.help) {
      io.stdout.write(commandHelp(name, command));
      return 0;
    }
    if (
      parsed.positionals.length !== command.args.length ||
      parsed.positionals.some((p) => p === '')
    )
      throw usage(`usage: cairn ${name} ${command.args.join(' ')} (run \`cairn ${name} --help\`)`);
    return await command.run(parsed.positionals, parsed.values, io);
  } catch (e) {
    const message =
      e instanceof CliError || isCairnError(e)
        ? e.message
        : `unexpected failure: ${(e as Error)?.stack ?? e}`;
    // A driver's message may quote the connection string: no password gets out.
    io.stderr.write(`cairn: ${redact(message)}\n`);
    return e instanceof CliError ? e.exitCode : 1;
  }
}

export type { Target };
