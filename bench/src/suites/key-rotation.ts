/**
 * Rotating the key-encryption key under load (issue 29): a store with encryption holds
 * ROWS sealed messages of TENANTS tenants (a data key each); workers run turns on it
 * (read a thread's last messages, add one) while another store instance on the same
 * database, given the new key, wraps every data key again (`rotateDataKeys`). Every request
 * must succeed, and afterwards a store that holds only the new key must read every tenant.
 *
 *   CAIRN_BENCH_ROTATION_ROWS=1000000     sealed messages stored before the rotation
 *   CAIRN_BENCH_ROTATION_TENANTS=10000    tenants (threads of a resource each)
 *   CAIRN_BENCH_ROTATION_WORKERS=4        concurrent turn loops
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@cairn/core';
import { localKeyring, type Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import { createSqliteStore } from '@cairn/store-sqlite';
import pg from 'pg';
import type { Suite } from '../harness.js';
import { chainRows } from '../messages.js';
import { POSTGRES_URL, postgresUnreachable } from '../postgres.js';

const OLD = 'the old key-encryption secret, thirty-two bytes or more';
const NEW = 'the new key-encryption secret, thirty-two bytes or more';
/** What every process runs during the roll-out: the new key, and the old one to unwrap with. */
const during = () => ({ keyring: localKeyring(NEW, { previous: [OLD] }) });
const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback);

interface Sides {
  name: string;
  /** A store instance on the database, with this encryption. */
  open: (encryption: { keyring: ReturnType<typeof localKeyring> }) => Promise<Store>;
  drop: () => Promise<void>;
}

interface Measured {
  store: string;
  rows: number;
  tenants: number;
  loadS: number;
  rewrapped: number;
  rotationS: number;
  turns: number;
  failed: number;
  firstFailure: string | null;
  p50: number;
  p99: number;
  quietP50: number;
  quietP99: number;
  readAfter: number;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? 0;
};

/** Turn loops on random tenants until `until()` says stop; latencies and failures. */
async function runTurns(store: Store, heads: Map<string, string>, until: () => boolean) {
  const threads = [...heads.keys()];
  const latencies: number[] = [];
  let failed = 0;
  let firstFailure: string | null = null;
  const loop = async (w: number) => {
    let n = w + 1;
    while (!until()) {
      // A seeded walk over the tenants (two turns on one thread fork it; nothing fails).
      n = (n * 1_103_515_245 + 12_345) % 2 ** 31;
      const threadId = threads[n % threads.length]!;
      const head = heads.get(threadId)!;
      const start = performance.now();
      try {
        const last = await store.getChain(head, { limit: 20 });
        const [row] = chainRows(threadId, 1, last.at(-1)!.id);
        await store.addMessages([row!]);
        heads.set(threadId, row!.id);
        latencies.push(performance.now() - start);
      } catch (e) {
        failed++;
        firstFailure ??= String(e);
      }
    }
  };
  await Promise.all(
    Array.from({ length: num('CAIRN_BENCH_ROTATION_WORKERS', 4) }, (_, w) => loop(w)),
  );
  return { latencies, failed, firstFailure };
}

async function measure(sides: Sides, log: (line: string) => void): Promise<Measured> {
  const rows = num('CAIRN_BENCH_ROTATION_ROWS', 1_000_000);
  const tenants = num('CAIRN_BENCH_ROTATION_TENANTS', 10_000);
  const per = Math.ceil(rows / tenants);
  // Stored under the old key, as a store is before the roll-out.
  const before = await sides.open({ keyring: localKeyring(OLD) });
  const heads = new Map<string, string>();
  const t0 = performance.now();
  for (let i = 0; i < tenants; i++) {
    const { id } = await before.createThread({ resourceId: `tenant-${i}` });
    const chain = chainRows(id, per);
    await before.addMessages(chain);
    heads.set(id, chain.at(-1)!.id);
    if ((i + 1) % 1000 === 0)
      log(`${sides.name}: ${((i + 1) * per).toLocaleString('en')} sealed messages stored`);
  }
  const loadS = (performance.now() - t0) / 1000;
  await before.close();

  const workers = await sides.open(during());
  // Quiet: as long as the rotation will take is not known yet; a fixed 20 s window.
  log(`${sides.name}: turns without a rotation (20 s)`);
  const quietEnd = performance.now() + 20_000;
  const quiet = await runTurns(workers, heads, () => performance.now() > quietEnd);

  log(`${sides.name}: rotating ${tenants.toLocaleString('en')} data keys while the turns run`);
  const rotator = await sides.open(during());
  let rotating = true;
  const r0 = performance.now();
  const rotation = rotator.rotateDataKeys().finally(() => {
    rotating = false;
  });
  const busy = await runTurns(workers, heads, () => !rotating);
  const { rewrapped } = await rotation;
  const rotationS = (performance.now() - r0) / 1000;
  await rotator.close();
  await workers.close();

  // Only the new key from here on: every tenant must still open.
  const after = await sides.open({ keyring: localKeyring(NEW) });
  let readAfter = 0;
  for (const head of heads.values()) {
    const [last] = await after.getChain(head, { limit: 1 });
    if (last) readAfter++;
  }
  await after.close();
  await sides.drop();
  return {
    store: sides.name,
    rows: tenants * per,
    tenants,
    loadS,
    rewrapped,
    rotationS,
    turns: busy.latencies.length,
    failed: quiet.failed + busy.failed,
    firstFailure: quiet.firstFailure ?? busy.firstFailure,
    p50: pct(busy.latencies, 0.5),
    p99: pct(busy.latencies, 0.99),
    quietP50: pct(quiet.latencies, 0.5),
    quietP99: pct(quiet.latencies, 0.99),
    readAfter,
  };
}

const suite: Suite = {
  id: 'key-rotation',
  title: 'Encryption at rest: rotating the key-encryption key while turns run',
  async run(log) {
    const results: Measured[] = [];
    const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-rotation-'));
    const path = join(dir, 'rotation.db');
    results.push(
      await measure(
        {
          name: 'SQLite file',
          open: async (encryption) => createSqliteStore({ path }, { encryption }),
          drop: async () => rmSync(dir, { recursive: true, force: true }),
        },
        log,
      ),
    );
    const why = await postgresUnreachable();
    if (why === null) {
      const schema = `cairn_bench_rotation_${newId().replaceAll('-', '').slice(-12)}`;
      results.push(
        await measure(
          {
            name: 'PostgreSQL server',
            open: (encryption) =>
              createPostgresStore({ connectionString: POSTGRES_URL }, { schema, encryption }),
            drop: async () => {
              const c = new pg.Client({ connectionString: POSTGRES_URL });
              await c.connect();
              await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
              await c.end();
            },
          },
          log,
        ),
      );
    } else log(`PostgreSQL server skipped: ${why}`);

    const bad = results.filter((r) => r.failed > 0 || r.readAfter !== r.tenants);
    const f = (x: number) => x.toFixed(1);
    const table = [
      '| store | sealed messages | tenants (data keys) | stored in | rewrapped | rotation | turns during it | failed requests | p50 / p99 turn during | p50 / p99 quiet | tenants read with the new key only |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...results.map(
        (r) =>
          `| ${r.store} | ${r.rows.toLocaleString('en')} | ${r.tenants.toLocaleString('en')} | ${f(r.loadS)} s | ${r.rewrapped.toLocaleString('en')} | ${f(r.rotationS)} s | ${r.turns.toLocaleString('en')} | ${r.failed} | ${f(r.p50)} / ${f(r.p99)} ms | ${f(r.quietP50)} / ${f(r.quietP99)} ms | ${r.readAfter.toLocaleString('en')} |`,
      ),
    ];
    if (bad.length > 0)
      throw new Error(
        `key rotation under load failed: ${bad.map((r) => `${r.store}: ${r.failed} failed requests (${r.firstFailure}), ${r.readAfter}/${r.tenants} tenants read after`).join('; ')}`,
      );
    return {
      markdown: [
        'A store with encryption (`localKeyring`) holds sealed messages of many tenants, each',
        'tenant a thread of its own resource and so a data key of its own, stored under the old',
        'key-encryption key. Then every instance runs with the new key and the old one as',
        '`previous` (the roll-out), and `rotateDataKeys()` runs on an instance of its own while',
        `${num('CAIRN_BENCH_ROTATION_WORKERS', 4)} turn loops on the other read a random tenant's last 20 messages and add one`,
        '(each turn opens sealed rows and seals a new one). A rotation wraps data keys again; it',
        'never rewrites the rows they seal. Afterwards a store that holds only the new key reads',
        'the last message of every tenant. The quiet window runs the same loops for 20 s before',
        'the rotation. The suite fails if any request fails.',
        '',
        ...table,
      ].join('\n'),
    };
  },
};

export default suite;
