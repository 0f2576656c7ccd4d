/**
 * Retention: the checks of `Store.sweep`'s policy and options, and the pure decisions a
 * sweep makes for a thread (which policy applies, which state commits of a branch may go).
 * The front door reads and deletes; what may be deleted is decided here, once.
 */
import { checkKeys, invalidArgument, type JsonValue, keysOf, newId } from '@cairn/core';
import type { RetentionPolicy, SweepOptions } from './store.js';
import { checkIdList, checkLimit, checkName, checkTtl } from './validate.js';

/** A policy with every rule present: a number, or null when the rule is off. */
export type ResolvedPolicy = { [K in keyof RetentionPolicy]-?: number | null };

const RULES = keysOf<RetentionPolicy>()([
  'threadTtlMs',
  'keepStateCommits',
  'branchTtlMs',
  'turnTtlMs',
]);

const show = (v: unknown) => (v === undefined ? 'undefined' : JSON.stringify(v));

/**
 * A policy with its rules checked (a positive integer, or null/absent for off);
 * `INVALID_ARGUMENT` naming the rule and value it cannot take.
 */
export function checkRetentionPolicy(policy: unknown, label = 'retention policy'): ResolvedPolicy {
  checkKeys(policy, label, RULES);
  const p = policy as Record<string, unknown>;
  const out = {} as ResolvedPolicy;
  for (const rule of RULES) {
    const v = p[rule];
    if (v === undefined || v === null) out[rule] = null;
    else if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 1) out[rule] = v;
    else throw invalidArgument(`${label}.${rule} must be an integer >= 1 or null, got ${show(v)}`);
  }
  return out;
}

/** `sweep` options, defaults filled in. */
export function checkSweepOptions(options: unknown): {
  batch: number;
  threadIds: string[] | null;
  owner: string;
  leaseTtlMs: number;
  dutyCycle: number;
  dryRun: boolean;
} {
  checkKeys(
    options,
    'sweep options',
    keysOf<SweepOptions>()(['batch', 'threadIds', 'owner', 'leaseTtlMs', 'dutyCycle', 'dryRun']),
  );
  const o = options as SweepOptions;
  const duty = o.dutyCycle;
  if (duty !== undefined && !(typeof duty === 'number' && duty > 0 && duty <= 1))
    throw invalidArgument(`dutyCycle must be a number above 0 and at most 1, got ${show(duty)}`);
  if (o.dryRun !== undefined && typeof o.dryRun !== 'boolean')
    throw invalidArgument(`dryRun must be a boolean, got ${show(o.dryRun)}`);
  return {
    dryRun: o.dryRun === true,
    dutyCycle: duty ?? DEFAULT_SWEEP_DUTY_CYCLE,
    batch: checkLimit(o.batch, 'batch', 100, 10_000),
    threadIds:
      o.threadIds === undefined ? null : [...new Set(checkIdList(o.threadIds, 'threadIds'))],
    owner: o.owner === undefined ? `sweep-${newId()}` : checkName(o.owner, 'owner'),
    leaseTtlMs: o.leaseTtlMs === undefined ? 60_000 : checkTtl(o.leaseTtlMs),
  };
}

/** The share of wall time a sweep works by default: it rests nine times as long as it worked. */
export const DEFAULT_SWEEP_DUTY_CYCLE = 0.1;

/**
 * How long a sweep rests after a thread that took `workedMs`, so that its work is at most
 * `dutyCycle` of the wall time. The rest follows the work: on a loaded database, where a
 * thread takes longer, the sweep backs off by as much.
 */
export function sweepRestMs(workedMs: number, dutyCycle: number): number {
  if (dutyCycle >= 1 || !(workedMs > 0)) return 0;
  return (workedMs * (1 - dutyCycle)) / dutyCycle;
}

/**
 * The policy that applies to a thread: the sweep's, overridden rule by rule by the
 * thread's metadata `retention` (`null` turns a rule off). Null when the thread opts out
 * (`retention: false`); `'invalid'` when its `retention` is not a policy.
 */
export function threadPolicy(
  sweep: ResolvedPolicy,
  metadata: Record<string, JsonValue | undefined>,
): ResolvedPolicy | null | 'invalid' {
  if (!Object.hasOwn(metadata, 'retention')) return sweep;
  const own = metadata.retention;
  if (own === false) return null;
  try {
    checkRetentionPolicy(own, 'metadata.retention');
  } catch {
    return 'invalid';
  }
  const out = { ...sweep };
  const o = own as Record<string, number | null | undefined>;
  for (const rule of RULES) if (o[rule] !== undefined) out[rule] = o[rule] ?? null;
  return out;
}

/**
 * The oldest state version a branch must keep under `keepStateCommits`: the newest
 * `keep` commits are kept, and so is every point `kept` names (the version a read of a
 * named checkpoint or of a child branch's fork resolves to). Null when none may go. The
 * sweep then keeps back to the snapshot at or before it, which its state is rebuilt from.
 */
export function stateCutFloor(latest: number, keep: number, kept: number[]): number | null {
  if (latest <= keep) return null;
  return Math.min(latest - keep + 1, ...kept);
}
