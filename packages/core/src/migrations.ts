/**
 * Versioned shapes and their migration chains, checked and run once for every user of
 * them: `defineState`'s state schemas and the LangGraph saver's channel values.
 */
import { CairnError } from './errors.js';
import { checkKeys } from './known-keys.js';

/** One step of a migration chain: a value of version `from` made one of `to` (= `from + 1`). */
export interface MigrationStep {
  readonly from: number;
  readonly to: number;
  migrate(value: Record<string, any>): Record<string, any>;
}

/**
 * A version and its chain, checked: the version a positive integer, the migrations
 * consecutive steps `{ from: n, to: n + 1 }` up to it, each with a `migrate` function and no
 * keys but `keys`; `extra` checks a step's other keys. `INVALID_ARGUMENT` messages begin
 * with `label` (say `defineState`). Returns the version and the frozen chain.
 */
export function checkMigrationChain<M extends MigrationStep>(
  label: string,
  version: unknown,
  list: unknown,
  keys: readonly string[],
  extra?: (step: M, index: number) => void,
): { version: number; migrations: readonly M[] } {
  const bad = (message: string, details: Record<string, unknown> = {}) =>
    new CairnError('INVALID_ARGUMENT', `${label}: ${message}`, { details });
  const v = version ?? 1;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)
    throw bad(`version must be a positive integer, got ${String(v)}`, { version: v });
  const steps = list ?? [];
  if (!Array.isArray(steps)) throw bad(`migrations must be an array, got ${typeof steps}`);
  const first = v - steps.length;
  if (first < 1)
    throw bad(`${steps.length} migrations go below version 1 for a schema of version ${v}`);
  const checked = steps.map((m: unknown, i): M => {
    checkKeys(m, `${label}: migrations[${i}]`, keys);
    const step = m as M;
    const { from, to, migrate } = step;
    // The chain runs from `first` to `version`, one step each, in order.
    const want = first + i;
    if (from !== want || to !== want + 1) {
      throw bad(
        `migrations must be consecutive steps up to version ${v} (${steps
          .map((x: { from?: unknown; to?: unknown }) => `${String(x?.from)}→${String(x?.to)}`)
          .join(', ')}): migrations[${i}] must go from ${want} to ${want + 1}, got ${String(
          from,
        )}→${String(to)}`,
        { index: i, from, to },
      );
    }
    if (typeof migrate !== 'function')
      throw bad(`migrations[${i}].migrate must be a function`, { index: i });
    extra?.(step, i);
    return Object.freeze({ ...step });
  });
  return { version: v, migrations: Object.freeze(checked) };
}

/**
 * `SCHEMA_TOO_NEW` for a `what` (a state, a checkpoint) written under schema version
 * `found` by code that knows versions up to `supported`: it must not be read or written.
 */
export function schemaVersionTooNew(what: string, found: number, supported: number): CairnError {
  return new CairnError(
    'SCHEMA_TOO_NEW',
    `this ${what} was written by schema version ${found}; this code knows versions up to ${supported} and must not read or write it`,
    { details: { found, supported } },
  );
}

/**
 * Runs the steps of `migrations` (a chain up to `version`) that bring `value`, written
 * under version `from`, up to `version`; each step gets `copy(current)`. `SCHEMA_TOO_NEW`
 * when `from` is newer than `version` (the `what` written by newer code must not be read
 * or written by this code); `INVALID_ARGUMENT` when no step starts that old;
 * `INVALID_UPDATE` when a step returns something that is not an object.
 */
export function runMigrations(
  what: string,
  version: number,
  migrations: readonly MigrationStep[],
  value: Record<string, unknown>,
  from: number,
  copy: (value: Record<string, unknown>) => Record<string, unknown>,
): Record<string, unknown> {
  if (from > version) throw schemaVersionTooNew(what, from, version);
  if (from === version) return value;
  const steps = migrations.slice(migrations.length - (version - from));
  if (steps.length !== version - from) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `this ${what} was written by schema version ${from}, and the schema (version ${version}) has no migration from it`,
      { details: { found: from, supported: version } },
    );
  }
  let current = value;
  for (const step of steps) {
    const out: unknown = step.migrate(copy(current));
    if (typeof out !== 'object' || out === null || Array.isArray(out)) {
      throw new CairnError(
        'INVALID_UPDATE',
        `the migration from version ${step.from} to ${step.to} must return a ${what} object`,
      );
    }
    current = out as Record<string, unknown>;
  }
  return current;
}
