import { isCairnError } from '@cairn/core';
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

export interface PruneOptions {
  /** Delete finished and failed turns started longer ago than this (ms). */
  turnsOlderThan?: number;
  /** Delete threads idle for longer than this (ms): see `Store.isThreadIdle`. */
  threadsOlderThan?: number;
  dryRun: boolean;
}

/**
 * Retention. Turns: those not running that started before the cutoff (`purgeTurns`).
 * Threads: those idle since the cutoff by the store's one rule (`Store.isThreadIdle`: no
 * write of any kind, no running turn, no live run lease), deleted with everything under
 * them (`deleteThread` checks again as it deletes: one touched since it was chosen stays).
 * With `dryRun`, only counts.
 */
export async function prune(t: Target, o: PruneOptions, io: Io, now = Date.now()): Promise<number> {
  if (o.turnsOlderThan === undefined && o.threadsOlderThan === undefined)
    throw usage('say what to prune: --turns-older-than <age> and/or --threads-older-than <age>');
  const store = await openStore(t, 'current');
  try {
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
    if (o.threadsOlderThan !== undefined) {
      const since = now - o.threadsOlderThan;
      const idle: string[] = [];
      for (const id of threadIds) if (await store.isThreadIdle(id, since)) idle.push(id);
      threadIds = idle;
    }
    if (o.dryRun) {
      const parts = [];
      if (o.turnsOlderThan !== undefined) parts.push(`${turns} turns`);
      if (o.threadsOlderThan !== undefined) parts.push(`${threadIds.length} threads`);
      io.stdout.write(`would delete ${parts.join(' and ')} (dry run: nothing deleted)\n`);
      return 0;
    }
    const parts = [];
    if (o.turnsOlderThan !== undefined)
      parts.push(`${await store.purgeTurns({ before: now - o.turnsOlderThan })} turns`);
    if (o.threadsOlderThan !== undefined) {
      const idleSince = now - o.threadsOlderThan;
      let n = 0;
      for (const id of threadIds) {
        try {
          if (await store.deleteThread(id, { idleSince })) n++;
        } catch (e) {
          // A branch locked longer than the store waits: in use, so it stays.
          if (!isCairnError(e, 'TIMEOUT')) throw e;
        }
      }
      const kept = threadIds.length - n;
      parts.push(
        `${n} threads${kept ? ` (${kept} touched or deleted meanwhile, left alone)` : ''}`,
      );
    }
    io.stdout.write(`deleted ${parts.join(' and ')}\n`);
    return 0;
  } finally {
    await store.close();
  }
}
