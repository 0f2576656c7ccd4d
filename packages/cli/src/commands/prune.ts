import { SWEEP_LEASE_KEY } from '@cairn/store';
import { CliError, openStore, type Target, usage } from '../database.js';
import type { Io } from '../output.js';

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
 * which keep every point a thread can resume from. With `dryRun`, the same sweep with
 * `dryRun: true`: each thread decided by the same rules and rolled back, deleting nothing.
 */
export async function prune(t: Target, o: PruneOptions, io: Io): Promise<number> {
  const asked = [o.turnsOlderThan, o.threadsOlderThan, o.keepStateCommits, o.branchesOlderThan];
  if (asked.every((x) => x === undefined))
    throw usage(
      'say what to prune: --turns-older-than, --threads-older-than, --keep-state-commits and/or --branches-older-than',
    );
  const store = await openStore(t, 'current');
  try {
    const report = await store.sweep(
      {
        turnTtlMs: o.turnsOlderThan ?? null,
        threadTtlMs: o.threadsOlderThan ?? null,
        keepStateCommits: o.keepStateCommits ?? null,
        branchTtlMs: o.branchesOlderThan ?? null,
      },
      { ...(o.dutyCycle === undefined ? {} : { dutyCycle: o.dutyCycle }), dryRun: o.dryRun },
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
    const notes = [];
    const skipped = [];
    if (report.busy > 0) skipped.push(`${report.busy} in use`);
    if (report.invalid > 0) skipped.push(`${report.invalid} with an invalid metadata.retention`);
    if (skipped.length > 0) notes.push(`threads left alone: ${skipped.join(', ')}`);
    if (o.dryRun) notes.push('dry run: nothing deleted');
    io.stdout.write(
      `${o.dryRun ? 'would delete' : 'deleted'} ${parts.join(' and ')}${notes.length ? ` (${notes.join('; ')})` : ''}\n`,
    );
    return 0;
  } finally {
    await store.close();
  }
}
