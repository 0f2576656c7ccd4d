/**
 * Versioned channel values for `CairnSaver`: the user's schema (a version and the migrations
 * up to it, checked by core's `checkMigrationChain`) and the migration of a checkpoint written
 * under an older version, run on read.
 */
import {
  checkKeys,
  checkMigrationChain,
  invalidArgument,
  keysOf,
  type MigrationStep,
  runMigrations,
} from '@cairn/core';
import {
  type ChannelVersions,
  type Checkpoint,
  type CheckpointPendingWrite,
  maxChannelVersion,
} from '@langchain/langgraph-checkpoint';

/**
 * One step of a saver's migration chain: `migrate` gets a new object of a checkpoint's
 * channel values written under version `from` (the graph's own channels; LangGraph's
 * internal ones, named `__…` or with a `:`, pass through untouched) and returns those of
 * version `to`. Return a new object or the one given; do not change the values inside it in
 * place (a value may be shared with other reads). A channel it drops is gone, one it adds is
 * new (seen by every node, so it triggers none).
 */
export interface ChannelMigration extends MigrationStep {
  /**
   * Channels this step renames, old name to new, applied before `migrate` runs: their
   * values, their versions and the versions each node has seen move with them (so a renamed
   * channel triggers no node that had already seen it), and so do pending writes.
   */
  readonly rename?: Readonly<Record<string, string>>;
}

/** `CairnSaverOptions.schema`: the version of the graph's channel values and the chain up to it. */
export interface SaverSchema {
  /** A positive integer. Default 1. */
  version?: number;
  /** Consecutive steps `{ from: n, to: n + 1 }` from the oldest version still readable. */
  migrations?: readonly ChannelMigration[];
}

/** A checked `SaverSchema`. */
export interface CheckedSaverSchema {
  version: number;
  migrations: readonly ChannelMigration[];
}

/** LangGraph's own channels (`__start__`, `__pregel_tasks`, `branch:to:node`): never migrated. */
export function isInternalChannel(name: string): boolean {
  return name.startsWith('__') || name.includes(':');
}

/** `options.schema`, checked: `INVALID_ARGUMENT` naming what is wrong. */
export function checkSaverSchema(schema: unknown): CheckedSaverSchema {
  if (schema === undefined) return { version: 1, migrations: [] };
  const label = 'new CairnSaver: schema';
  checkKeys(schema, label, keysOf<SaverSchema>()(['version', 'migrations']));
  const s = schema as SaverSchema;
  return checkMigrationChain<ChannelMigration>(
    label,
    s.version,
    s.migrations,
    keysOf<ChannelMigration>()(['from', 'to', 'migrate', 'rename']),
    ({ rename }, i) => {
      if (rename === undefined) return;
      const names = (x: unknown) => typeof x === 'string' && x !== '' && !isInternalChannel(x);
      if (
        typeof rename !== 'object' ||
        rename === null ||
        Array.isArray(rename) ||
        !Object.entries(rename).every(([from, to]) => names(from) && names(to))
      )
        throw invalidArgument(
          `${label}: migrations[${i}].rename must map channel names to channel names, got ${JSON.stringify(rename)}`,
          { index: i },
        );
    },
  );
}

/**
 * Brings `checkpoint` (and its pending writes), written under schema version `from`, up to
 * `schema.version`, in place: its user channels through the migrations, the versions of
 * renamed channels and the versions each node has seen of them following the renames, a
 * dropped channel's version gone, an added one at the checkpoint's newest version (seen by
 * every node). `SCHEMA_TOO_NEW` when `from` is newer than the schema.
 */
export function migrateCheckpoint(
  schema: CheckedSaverSchema,
  checkpoint: Checkpoint,
  pending: CheckpointPendingWrite[],
  from: number,
  firstVersion: () => number,
): void {
  const own: Record<string, unknown> = {};
  const internal: Record<string, unknown> = {};
  for (const [channel, value] of Object.entries(checkpoint.channel_values ?? {}))
    (isInternalChannel(channel) ? internal : own)[channel] = value;
  const renames: Array<Readonly<Record<string, string>>> = [];
  const steps = schema.migrations.map(
    (m): MigrationStep => ({
      from: m.from,
      to: m.to,
      migrate(values) {
        const r = m.rename ?? {};
        renames.push(r);
        for (const [old, name] of Object.entries(r)) {
          if (!Object.hasOwn(values, old)) continue;
          values[name] = values[old];
          delete values[old];
        }
        return m.migrate(values);
      },
    }),
  );
  const migrated = runMigrations('checkpoint', schema.version, steps, own, from, (v) => ({ ...v }));
  if (migrated === own) return;
  const follow = (channel: string) => {
    if (isInternalChannel(channel)) return channel;
    let name = channel;
    for (const r of renames) if (Object.hasOwn(r, name)) name = r[name]!;
    return name;
  };
  const versions: ChannelVersions = {};
  for (const [channel, version] of Object.entries(checkpoint.channel_versions ?? {})) {
    const to = follow(channel);
    // A value the migrations dropped takes its version with it.
    if (Object.hasOwn(own, channel) && !Object.hasOwn(migrated, to)) continue;
    versions[to] = version;
  }
  const all = Object.values(checkpoint.channel_versions ?? {});
  const added = all.length > 0 ? maxChannelVersion(...all) : firstVersion();
  const created = Object.keys(migrated).filter((c) => !Object.hasOwn(versions, c));
  for (const channel of created) versions[channel] = added;
  const seen: Record<string, ChannelVersions> = {};
  for (const [node, channels] of Object.entries(checkpoint.versions_seen ?? {})) {
    const moved: ChannelVersions = {};
    for (const [channel, version] of Object.entries(channels)) moved[follow(channel)] = version;
    for (const channel of created) moved[channel] = added;
    seen[node] = moved;
  }
  checkpoint.channel_values = { ...internal, ...migrated };
  checkpoint.channel_versions = versions;
  checkpoint.versions_seen = seen;
  for (const w of pending) w[1] = follow(w[1]);
}
