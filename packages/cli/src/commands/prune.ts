import { type Store, SWEEP_LEASE_KEY } from '@cairn/store';
import { CliError, openStore, type Target, usage } from '../database.js';
import type { Io } from '../output.js';
import { openRaw } from '../raw.js';

const UNITS: Record<string, number> = {
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 7 * 86_400_000,
};

/** `7d`, `12h`, `30m`, `2w` in milliseconds. */
export function parseAge(text: string, option: string): number {
  const m = /^(\d+)([mhdw])$/.exec(text);
  if (!m)
    throw usage(`--${option} takes an age such as 30m, 12h, 7d or 2w, got ${JSON.stringify(text)}`);
  return Number(m[1]) * UNITS[m[2]!]!;
}

/** `--duty-cycle`: a number above 0 and at most 1. */
export function parseDutyCycle(text: string): number {
  const n = Number(text);
  if (!(text.trim() !== '' && n > 0 && n <= 1))
    throw usage(`--duty-cycle takes a number above 0 and at most 1, got ${JSON.stringify(text)}`);
  return n;
}

export interface PruneOptions {
  /** Delete finished and failed turns started longer ago than this (ms). */
  turnsOlderThan?: number | undefined;
  /** Delete threads idle for longer than this (ms): see `Store.isThreadIdle`. */
  threadsOlderThan?: number | undefined;
  /** Keep the newest this many state commits per branch (`RetentionPolicy.keepStateCommits`). */
  keepStateCommits?: number | undefined;
  /** Drop branches nobody visited for this long (ms) (`RetentionPolicy.branchTtlMs`). */
  branchesOlderThan?: number | undefined;
  /** The sweep's `dutyCycle` (default: the store's). */
  dutyCycle?: number | undefined;
  dryRun: boolean;
}

/**
 * Retention, by `Store.sweep`: a thread at a time, in transactions of its own, under the
 * store's sweep lease (one sweeper per database), resting between threads by its duty
 * cycle. Turns: those not running that started before the cutoff. Threads: those idle since
 * the cutoff by the store's one rule (`Store.isThreadIdle`), with everything under them.
 * State commits and branches: `RetentionPolicy`'s `keepStateCommits` and `branchTtlMs`,
 * which keep every point a thread can resume from. With `dryRun`, only counts turns and
 * threads (by the same rules), deleting nothing.
 */
export async function prune(t: Target, o: PruneOptions, io: Io, now = Date.now()): Promise<number> {
  const asked = [o.turnsOlderThan, o.threadsOlderThan, o.keepStateCommits, o.branchesOlderThan];
  if (asked.every((x) => x === undefined))
    throw usage(
      'say what to prune: --turns-older-than, --threads-older-than, --keep-state-commits and/or --branches-older-than',
    );
  if (o.dryRun && (o.keepStateCommits !== undefined || o.branchesOlderThan !== undefined))
    throw usage(
      '--dry-run counts turns and threads only: leave out --keep-state-commits and --branches-older-than',
    );
  const store = await openStore(t, 'current');
  try {
    if (o.dryRun) return await dryRun(t, store, o, io, now);
    const report = await store.sweep(
      {
        turnTtlMs: o.turnsOlderThan ?? null,
        threadTtlMs: o.threadsOlderThan ?? null,
        keepStateCommits: o.keepStateCommits ?? null,
        branchTtlMs: o.branchesOlderThan ?? null,
      },
      o.dutyCycle === undefined ? {} : { dutyCycle: o.dutyCycle },
    );
    if (!report.ran)
      throw new CliError(`another sweep holds the lease ${SWEEP_LEASE_KEY}: nothing was deleted`);
    const { freed } = report;
    const parts = [];
    if (o.turnsOlderThan !== undefined) parts.push(`${freed.turns} turns`);
    if (o.threadsOlderThan !== undefined) parts.push(`${freed.threads} threads`);
    if (o.keepStateCommits !== undefined || o.branchesOlderThan !== undefined)
      parts.push(`${freed.stateCommits} state commits`);
    if (o.branchesOlderThan !== undefined) parts.push(`${freed.branches} branches`);
    const skipped = [];
    if (report.busy > 0) skipped.push(`${report.busy} in use`);
    if (report.invalid > 0) skipped.push(`${report.invalid} with an invalid metadata.retention`);
    io.stdout.write(
      `deleted ${parts.join(' and ')}${skipped.length ? ` (threads left alone: ${skipped.join(', ')})` : ''}\n`,
    );
    return 0;
  } finally {
    await store.close();
  }
}

/** Counts what a prune of turns and threads would delete, by the rules the sweep applies. */
async function dryRun(t: Target, store: Store, o: PruneOptions, io: Io, now: number) {
  const raw = await openRaw(t);
  let turns = 0;
  let threadIds: string[] = [];
  try {
    const table = (n: 'turns' | 'threads' | 'messages') => {
      const name = raw.table(n);
      if (!name) throw new CliError(`the database has no ${n} table`);
      return name;
    };
    if (o.turnsOlderThan !== undefined) {
      const cutoff = now - o.turnsOlderThan;
      const [r] = await raw.all<{ n: number | string }>(
        `SELECT count(*) AS n FROM ${table('turns')} WHERE status <> 'running' AND started_at < ${cutoff}`,
      );
      turns = Number(r?.n ?? 0);
    }
    if (o.threadsOlderThan !== undefined) {
      const cutoff = now - o.threadsOlderThan;
      // Candidates only: a thread updated or given a message since is busy by any rule,
      // so this cheap query keeps every idle thread; the store decides on the rest.
      const rows = await raw.all<{ id: string }>(
        `SELECT t.id FROM ${table('threads')} t WHERE t.updated_at < ${cutoff} AND NOT EXISTS
           (SELECT 1 FROM ${table('messages')} m WHERE m.thread_id = t.id AND m.created_at >= ${cutoff})`,
      );
      threadIds = rows.map((r) => r.id);
    }
  } finally {
    await raw.close();
  }
  let idle = 0;
  if (o.threadsOlderThan !== undefined)
    for (const id of threadIds) if (await store.isThreadIdle(id, now - o.threadsOlderThan)) idle++;
  const parts = [];
  if (o.turnsOlderThan !== undefined) parts.push(`${turns} turns`);
  if (o.threadsOlderThan !== undefined) parts.push(`${idle} threads`);
  io.stdout.write(`would delete ${parts.join(' and ')} (dry run: nothing deleted)\n`);
  return 0;
}
