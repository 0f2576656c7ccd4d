/**
 * A state schema changes under stored threads (issue 30): version 2 renames a field and changes
 * another's type. Thousands of threads written by version-1 code are read under version 2
 * (migrated on read, nothing rewritten), then version-1 and version-2 worker processes write
 * side by side on one Postgres store: version 2 upgrades each thread it writes, version 1 must
 * refuse those (SCHEMA_TOO_NEW) and keep writing the others. At the end every thread is read
 * under version 2 and holds every tag a worker wrote to it.
 *
 *   CAIRN_BENCH_SCHEMA_THREADS (default 10000), CAIRN_BENCH_SCHEMA_SECONDS (default 600)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { isCairnError, newId } from '@cairn/core';
import { createPostgresStore } from '@cairn/store-postgres';
import { openThread } from '@cairn/thread';
import pg from 'pg';
import type { Suite } from '../harness.js';
import { POSTGRES_URL, postgresUnreachable } from '../postgres.js';
import { runProcesses } from '../processes.js';
import { V1, V2, type WorkerConfig, type WorkerResult } from '../schema-states.js';

const script = join(dirname(fileURLToPath(import.meta.url)), '..', 'workers', 'schema-turns.js');
const THREADS = Number(process.env.CAIRN_BENCH_SCHEMA_THREADS ?? 10_000);
const SECONDS = Number(process.env.CAIRN_BENCH_SCHEMA_SECONDS ?? 600);
const WORKERS_PER_VERSION = 2;
const WIDTH = 25;

/** Runs `fn` over `items`, `width` at a time. */
async function inBatches<T, R>(items: T[], width: number, fn: (x: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += width)
    out.push(...(await Promise.all(items.slice(i, i + width).map(fn))));
  return out;
}

const suite: Suite = {
  id: 'schema-versions',
  title: 'State schema v1 → v2 under stored threads, and v1 and v2 workers side by side',
  async run(log) {
    const unreachable = await postgresUnreachable();
    if (unreachable) return { markdown: `_Skipped: ${unreachable}._` };
    const schema = `bench_schema_${newId().replaceAll('-', '').slice(-10)}`;
    const store = await createPostgresStore({ connectionString: POSTGRES_URL }, { schema });
    try {
      let t0 = performance.now();
      const ids = await inBatches(
        Array.from({ length: THREADS }, (_, i) => i),
        WIDTH,
        async (i) => {
          const t = await openThread(store, { schema: V1 });
          t.add({ role: 'user', data: { text: `hi ${i}` } });
          await t.save();
          await t.update({ name: `thread ${i}`, tags: ['t0'], score: i });
          await t.close();
          return t.id;
        },
      );
      const writeS = (performance.now() - t0) / 1000;
      log(`${THREADS} threads written by v1 code in ${writeS.toFixed(1)} s`);

      t0 = performance.now();
      const asV2 = (i: number) => ({ title: `thread ${i}`, tags: ['t0'], score: { value: i } });
      const loadedV2 = await inBatches(
        ids.map((id, i) => ({ id, i })),
        WIDTH,
        async ({ id, i }) => {
          const t = await openThread(store, { schema: V2, threadId: id });
          const ok = isDeepStrictEqual(t.state, asV2(i));
          await t.close();
          return ok;
        },
      );
      const loadS = (performance.now() - t0) / 1000;
      const loaded = loadedV2.filter(Boolean).length;
      log(`${loaded} of ${THREADS} load under v2 as migrated (${loadS.toFixed(1)} s)`);

      log(
        `${WORKERS_PER_VERSION} v1 and ${WORKERS_PER_VERSION} v2 worker processes for ${SECONDS} s`,
      );
      const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-schema-'));
      const threadsFile = join(dir, 'threads.txt');
      writeFileSync(threadsFile, ids.join('\n'));
      const configs: WorkerConfig[] = [1, 2].flatMap((version) =>
        Array.from({ length: WORKERS_PER_VERSION }, (_, w) => ({
          url: POSTGRES_URL,
          schema,
          version: version as 1 | 2,
          worker: w,
          threadsFile,
          seconds: SECONDS,
        })),
      );
      const results = await runProcesses<WorkerResult>(
        script,
        configs.map((c) => [JSON.stringify(c)]),
      ).finally(() => rmSync(dir, { recursive: true, force: true }));
      const sum = (version: 1 | 2, key: 'turns' | 'refused' | 'errors') =>
        results.filter((_, i) => configs[i]!.version === version).reduce((n, r) => n + r[key], 0);
      const samples = results.flatMap((r) => r.errorSamples);

      // Every thread read under v2: the v1 fields migrated, and every tag a worker wrote.
      const written = new Map<string, Set<string>>();
      for (const r of results)
        for (const [id, tags] of Object.entries(r.tags)) {
          const set = written.get(id) ?? new Set();
          for (const tag of tags) set.add(tag);
          written.set(id, set);
        }
      let corrupted = 0;
      let upgraded = 0;
      await inBatches(
        ids.map((id, i) => ({ id, i })),
        WIDTH,
        async ({ id, i }) => {
          try {
            const t = await openThread(store, { schema: V2, threadId: id });
            const state = t.state as { title?: string; tags?: string[]; score?: unknown };
            const want = ['t0', ...(written.get(id) ?? [])];
            const tags = new Set(state.tags ?? []);
            const ok =
              state.title === `thread ${i}` &&
              tags.size === want.length &&
              want.every((tag) => tags.has(tag)) &&
              typeof (state.score as { value?: unknown } | undefined)?.value === 'number';
            await t.close();
            if (!ok) corrupted++;
            // A thread a v2 worker wrote is version 2 now: v1 code must refuse to open it.
            const v1 = await openThread(store, { schema: V1, threadId: id }).catch((e) => e);
            if (isCairnError(v1, 'SCHEMA_TOO_NEW')) upgraded++;
            else await v1.close();
          } catch {
            corrupted++;
          }
        },
      );
      const row = (version: 1 | 2) =>
        `| v${version} | ${WORKERS_PER_VERSION} | ${sum(version, 'turns')} | ${sum(version, 'refused')} | ${sum(version, 'errors')} |`;
      return {
        markdown: [
          `PostgreSQL 15 (autovacuum off), one store, ${THREADS} threads. Version 2 of the state`,
          'renames `name` to `title` and turns the number `score` into `{ value }`; it migrates',
          'a version-1 state on read (nothing is rewritten by reading) and records version 2 with',
          'its next write. A version-1 engine refuses a state version 2 wrote (`SCHEMA_TOO_NEW`)',
          'instead of writing over it. Each worker turn takes the thread run lease, opens the',
          'thread with its schema, saves a message and adds a unique tag.',
          '',
          '| step | threads | result | seconds |',
          '| --- | ---: | --- | ---: |',
          `| written by v1 code | ${THREADS} | | ${writeS.toFixed(1)} |`,
          `| read under v2 (migrated on read) | ${THREADS} | ${loaded} load as migrated (${((100 * loaded) / THREADS).toFixed(1)}%) | ${loadS.toFixed(1)} |`,
          '',
          `Then ${SECONDS} s of v1 and v2 worker processes side by side on random threads:`,
          '',
          '| schema | processes | turns written | refused (SCHEMA_TOO_NEW) | other errors |',
          '| --- | ---: | ---: | ---: | ---: |',
          row(1),
          row(2),
          '',
          `At the end, read under v2: ${THREADS - corrupted} of ${THREADS} threads hold the migrated`,
          `fields and every tag the workers wrote to them (${corrupted} corrupted or lost);`,
          `${upgraded} had been written by a v2 worker, and version-1 code refuses to open them`,
          `(\`SCHEMA_TOO_NEW\`); it opens the other ${THREADS - upgraded}.`,
          ...(samples.length ? ['', `Errors: ${samples.slice(0, 3).join('; ')}`] : []),
        ].join('\n'),
      };
    } finally {
      await store.close();
      const admin = new pg.Client({ connectionString: POSTGRES_URL });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    }
  },
};

export default suite;
