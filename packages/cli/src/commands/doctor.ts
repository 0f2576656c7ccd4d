import { CliError, check, openStore, probe, type Target } from '../database.js';
import { bytes, type Io, table } from '../output.js';
import { openRaw, type RawReader, STATE_LOG_TABLES, TABLES, type Table } from '../raw.js';

/** One finding of `cairn doctor`. */
export interface DoctorReport {
  schema: { version: number; latest: number; pending: number[] };
  integrity: string[];
  embeddingSpace: { embedderId: string | null; dimensions: number } | null;
  /** Rows that point at something missing, by kind; only kinds with any. */
  orphans: Record<string, number>;
  tables: Array<{ table: Table; rows: number; bytes: number | null }>;
  /** Empty when all is well. */
  problems: string[];
}

/** `label`: a count query of rows pointing at nothing. Skipped when a table is missing. */
function orphanQueries(raw: RawReader): Array<[string, string]> {
  const t = (n: Table) => raw.table(n);
  const [threads, messages, branches, checkpoints, turns] = [
    t('threads'),
    t('messages'),
    t('branches'),
    t('checkpoints'),
    t('turns'),
  ];
  if (!threads || !messages || !branches || !checkpoints || !turns) return [];
  const missing = (table: string, alias: string, col: string, target: string) =>
    `SELECT count(*) AS n FROM ${table} ${alias} WHERE ${alias}.${col} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ${target} x WHERE x.id = ${alias}.${col})`;
  const logs = STATE_LOG_TABLES.map(t).filter((log) => log !== null);
  return [
    ['messages without their thread', missing(messages, 'm', 'thread_id', threads)],
    ['messages without their parent', missing(messages, 'm', 'parent_id', messages)],
    ['branches without their thread', missing(branches, 'b', 'thread_id', threads)],
    ['branches whose head message is missing', missing(branches, 'b', 'head_message_id', messages)],
    ['checkpoints whose message is missing', missing(checkpoints, 'c', 'message_id', messages)],
    ...logs.map((log): [string, string] => [
      'state commits without their branch',
      missing(log, 's', 'branch_id', branches),
    ]),
    ['turns without their thread', missing(turns, 'u', 'thread_id', threads)],
    [
      'threads with more than one active branch',
      `SELECT count(*) AS n FROM (SELECT thread_id FROM ${branches} WHERE is_active GROUP BY thread_id HAVING count(*) > 1) d`,
    ],
  ];
}

async function integrity(raw: RawReader): Promise<string[]> {
  if (raw.kind === 'sqlite') {
    const rows = await raw.all<{ integrity_check: string }>('PRAGMA integrity_check');
    const found = rows.map((r) => r.integrity_check).filter((r) => r !== 'ok');
    const fk = await raw.all<{ table: string; parent: string }>('PRAGMA foreign_key_check');
    return [
      ...found,
      ...fk.map((r) => `foreign key of ${r.table} points at nothing in ${r.parent}`),
    ];
  }
  const invalid = await raw.all<{ index: string }>(
    `SELECT i.indexrelid::regclass::text AS index FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
     JOIN pg_namespace n ON n.oid = c.relnamespace WHERE NOT i.indisvalid AND n.nspname = '${raw.schema.replaceAll("'", "''")}'`,
  );
  return invalid.map((r) => `index ${r.index} is invalid`);
}

async function sizes(raw: RawReader): Promise<DoctorReport['tables']> {
  const out: DoctorReport['tables'] = [];
  let perTable = new Map<string, number>();
  if (raw.kind === 'sqlite') {
    // dbstat counts every page, indexes and the keyword index included with their table.
    const rows = await raw.all<{ name: string; size: number }>(
      `SELECT m.tbl_name AS name, sum(d.pgsize) AS size FROM dbstat d JOIN sqlite_master m ON m.name = d.name GROUP BY m.tbl_name`,
    );
    perTable = new Map(rows.map((r) => [r.name, r.size]));
    const fts = [...perTable].filter(([n]) => n.startsWith('cairn_memories_fts'));
    for (const [, size] of fts)
      perTable.set('cairn_memories', (perTable.get('cairn_memories') ?? 0) + size);
  }
  for (const name of TABLES) {
    const sql = raw.table(name);
    if (!sql) continue;
    const [count] = await raw.all<{ n: number | string }>(`SELECT count(*) AS n FROM ${sql}`);
    let size: number | null = null;
    if (raw.kind === 'sqlite') size = perTable.get(`cairn_${name}`) ?? 0;
    else {
      const [r] = await raw.all<{ size: string }>(
        `SELECT pg_total_relation_size('${sql.replaceAll("'", "''")}') AS size`,
      );
      size = Number(r?.size ?? 0);
    }
    out.push({ table: name, rows: Number(count?.n ?? 0), bytes: size });
  }
  return out;
}

/** Looks the database over, writing nothing. */
export async function diagnose(t: Target): Promise<DoctorReport> {
  const p = await probe(t);
  // Not a Cairn database, or a newer one: `check` says so in its one line.
  if (p.version === 0 || p.version > p.latest) await check(t, 'current');
  const pending = Array.from({ length: p.latest - p.version }, (_, i) => p.version + i + 1);
  const raw = await openRaw(t);
  const problems: string[] = [];
  try {
    const found = await integrity(raw);
    const orphans: Record<string, number> = {};
    for (const [label, sql] of orphanQueries(raw)) {
      const [r] = await raw.all<{ n: number | string }>(sql);
      const n = Number(r?.n ?? 0);
      if (n > 0) orphans[label] = (orphans[label] ?? 0) + n;
    }
    const tables = await sizes(raw);
    let embeddingSpace: DoctorReport['embeddingSpace'] = null;
    if (pending.length === 0) {
      const store = await openStore(t, 'current');
      try {
        embeddingSpace = await store.getEmbeddingSpace();
      } finally {
        await store.close();
      }
    }
    const memories = raw.table('memories');
    if (memories && pending.length === 0 && embeddingSpace === null) {
      const [r] = await raw.all<{ n: number | string }>(
        `SELECT count(*) AS n FROM ${memories} WHERE embedding IS NOT NULL`,
      );
      if (Number(r?.n) > 0)
        problems.push(`${r?.n} memories have embeddings but no embedding space is recorded`);
    }
    if (pending.length > 0)
      problems.push(`pending migrations: ${pending.join(', ')} (run \`cairn migrate\`)`);
    problems.push(...found.map((f) => `integrity: ${f}`));
    for (const [label, n] of Object.entries(orphans)) problems.push(`orphans: ${n} ${label}`);
    return {
      schema: { version: p.version, latest: p.latest, pending },
      integrity: found,
      embeddingSpace,
      orphans,
      tables,
      problems,
    };
  } finally {
    await raw.close();
  }
}

export async function doctor(t: Target, json: boolean, io: Io): Promise<number> {
  const r = await diagnose(t);
  if (json) io.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
  else {
    const lines = [
      `schema: version ${r.schema.version} of ${r.schema.latest}${r.schema.pending.length ? `, pending migrations ${r.schema.pending.join(', ')}` : ' (up to date)'}`,
      `integrity: ${r.integrity.length === 0 ? 'ok' : r.integrity.join('; ')}`,
      `embedding space: ${r.embeddingSpace ? `${r.embeddingSpace.embedderId ?? '(no embedder id)'}, ${r.embeddingSpace.dimensions} dimensions` : 'none'}`,
      `orphans: ${
        Object.keys(r.orphans).length === 0
          ? 'none'
          : Object.entries(r.orphans)
              .map(([k, n]) => `${n} ${k}`)
              .join('; ')
      }`,
      '',
    ];
    io.stdout.write(lines.join('\n'));
    io.stdout.write(
      table(
        ['TABLE', 'ROWS', 'SIZE'],
        r.tables.map((x) => [x.table, String(x.rows), x.bytes === null ? '' : bytes(x.bytes)]),
      ),
    );
    io.stdout.write(
      r.problems.length === 0
        ? 'no problems found\n'
        : `${r.problems.length} problem(s):\n${r.problems.map((p) => `  ${p}\n`).join('')}`,
    );
  }
  if (r.problems.length > 0) throw new CliError(`${r.problems.length} problem(s) found`, 1);
  return 0;
}
