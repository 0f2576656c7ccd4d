/**
 * Encryption at rest: the store bench's append and chain-read rows on a store with
 * `encryption` against the same store without it, side by side in one run (SQLite file,
 * and the Postgres server when reachable).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@cairn/core';
import { localKeyring, type Store } from '@cairn/store';
import { createPostgresStore } from '@cairn/store-postgres';
import { createSqliteStore } from '@cairn/store-sqlite';
import pg from 'pg';
import { type Comparison, compare, comparisonTable, type Suite } from '../harness.js';
import { appendChain, chainRows, type Row } from '../messages.js';
import { POSTGRES_URL, postgresUnreachable } from '../postgres.js';

const encryption = { keyring: localKeyring('the bench secret, thirty-two bytes or more') };
const TARGET = { maxRatio: 1.3, label: '<= 1.3x (issue 29)' };

/** The four rows on a pair of stores: `plain` the baseline, `sealed` the subject. */
async function rowsOf(
  where: string,
  plain: Store,
  sealed: Store,
  sizes: { batch: number; single: number; chain: number; deep: number },
  log: (line: string) => void,
  /** Another store on `plain`'s or `sealed`'s database, as a process that just started. */
  reopen: (which: 'plain' | 'sealed') => Promise<Store>,
): Promise<Comparison[]> {
  const out: Comparison[] = [];
  // Every thread is of a tenant of its own, as a multi-tenant app's would be.
  const thread = (store: Store) => store.createThread({ resourceId: `tenant-${newId()}` });

  log(`${where}: appending ${sizes.batch.toLocaleString('en')} messages in batches of 100`);
  {
    const side = (store: Store, name: string) => {
      let rows: Row[] = [];
      return {
        name,
        before: async () => {
          rows = chainRows((await thread(store)).id, sizes.batch);
        },
        run: async () => {
          for (let i = 0; i < rows.length; i += 100)
            await store.addMessages(rows.slice(i, i + 100));
        },
      };
    };
    out.push(
      await compare({
        name: `${where}: append ${sizes.batch.toLocaleString('en')} messages, addMessages in batches of 100`,
        baseline: side(plain, 'without encryption'),
        subject: side(sealed, 'with encryption'),
        runs: 9,
        ops: sizes.batch,
        target: TARGET,
      }),
    );
  }

  log(`${where}: appending ${sizes.single.toLocaleString('en')} messages one per call`);
  {
    const side = (store: Store, name: string) => {
      let rows: Row[] = [];
      return {
        name,
        before: async () => {
          rows = chainRows((await thread(store)).id, sizes.single);
        },
        run: async () => {
          for (const m of rows) await store.addMessages([m]);
        },
      };
    };
    out.push(
      await compare({
        name: `${where}: append ${sizes.single.toLocaleString('en')} messages one per call`,
        baseline: side(plain, 'without encryption'),
        subject: side(sealed, 'with encryption'),
        runs: 9,
        ops: sizes.single,
        target: TARGET,
      }),
    );
  }

  log(`${where}: reading a whole ${sizes.chain.toLocaleString('en')}-message chain`);
  {
    const heads: string[] = [];
    for (const store of [plain, sealed])
      heads.push(await appendChain(store, (await thread(store)).id, sizes.chain));
    out.push(
      await compare({
        name: `${where}: read a whole ${sizes.chain.toLocaleString('en')}-message chain`,
        baseline: { name: 'without encryption', run: () => plain.getChain(heads[0]!) },
        subject: { name: 'with encryption', run: () => sealed.getChain(heads[1]!) },
        runs: 9,
        target: TARGET,
      }),
    );
  }

  log(`${where}: reading a whole ${sizes.chain.toLocaleString('en')}-message chain, first read`);
  {
    const heads: string[] = [];
    for (const store of [plain, sealed])
      heads.push(await appendChain(store, (await thread(store)).id, sizes.chain));
    // Each run reads with a store opened just before (untimed): nothing opened yet.
    const side = (which: 'plain' | 'sealed', head: string, name: string) => {
      let fresh: Store | null = null;
      return {
        name,
        before: async () => {
          await fresh?.close();
          fresh = await reopen(which);
        },
        run: () => fresh!.getChain(head),
        after: async () => {
          await fresh?.close();
          fresh = null;
        },
      };
    };
    out.push(
      await compare({
        name: `${where}: read a whole ${sizes.chain.toLocaleString('en')}-message chain, first read by a store just opened`,
        baseline: side('plain', heads[0]!, 'without encryption'),
        subject: side('sealed', heads[1]!, 'with encryption'),
        runs: 9,
        target: TARGET,
      }),
    );
  }

  const REPEAT = 200;
  log(`${where}: reading the last 50 of a ${sizes.deep.toLocaleString('en')}-message chain`);
  {
    const heads: string[] = [];
    for (const store of [plain, sealed])
      heads.push(await appendChain(store, (await thread(store)).id, sizes.deep));
    const last50 = (store: Store, head: string) => async () => {
      let last: unknown;
      for (let i = 0; i < REPEAT; i++) last = await store.getChain(head, { limit: 50 });
      return last;
    };
    out.push(
      await compare({
        name: `${where}: read the last 50 of a ${sizes.deep.toLocaleString('en')}-message chain (${REPEAT} x)`,
        baseline: { name: 'without encryption', run: last50(plain, heads[0]!) },
        subject: { name: 'with encryption', run: last50(sealed, heads[1]!) },
        runs: 9,
        target: TARGET,
      }),
    );
  }
  return out;
}

const suite: Suite = {
  id: 'encryption',
  title: 'Encryption at rest: the store rows with a data key per tenant, against without',
  async run(log) {
    const rows: Comparison[] = [];
    const notes: string[] = [];
    const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-encryption-'));
    try {
      const plain = createSqliteStore({ path: join(dir, 'plain.db') });
      const sealed = createSqliteStore({ path: join(dir, 'sealed.db') }, { encryption });
      try {
        rows.push(
          ...(await rowsOf(
            'SQLite',
            plain,
            sealed,
            { batch: 10_000, single: 1_000, chain: 10_000, deep: 100_000 },
            log,
            async (which) =>
              createSqliteStore(
                { path: join(dir, `${which}.db`) },
                which === 'sealed' ? { encryption } : {},
              ),
          )),
        );
      } finally {
        await plain.close();
        await sealed.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }

    const unreachable = await postgresUnreachable();
    if (unreachable) notes.push(`Postgres rows left out: ${unreachable}`);
    else {
      const schemas = ['plain', 'sealed'].map(
        (s) => `cairn_bench_${s}_${newId().replaceAll('-', '').slice(-10)}`,
      );
      const plain = await createPostgresStore(
        { connectionString: POSTGRES_URL },
        { schema: schemas[0]! },
      );
      const sealed = await createPostgresStore(
        { connectionString: POSTGRES_URL },
        { schema: schemas[1]!, encryption },
      );
      try {
        rows.push(
          ...(await rowsOf(
            'Postgres',
            plain,
            sealed,
            { batch: 10_000, single: 1_000, chain: 10_000, deep: 20_000 },
            log,
            (which) =>
              createPostgresStore(
                { connectionString: POSTGRES_URL },
                which === 'sealed' ? { schema: schemas[1]!, encryption } : { schema: schemas[0]! },
              ),
          )),
        );
      } finally {
        await plain.close();
        await sealed.close();
        const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 1 });
        for (const s of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
        await pool.end();
      }
    }
    return {
      markdown: `${comparisonTable(rows)}

The baseline is the same store without \`encryption\`, in the same run; the subject seals
every message's data with its thread's resource's data key (AES-256-GCM, Node's \`crypto\`),
each thread of a tenant of its own, and opens every message it reads. A sealed write looks
up the thread's resource and the tenant's data key (one small read each per call), a
sealed read the data key of each tenant it meets (one per call); unwrapped data keys are
kept in the process, so the keyring is asked once per tenant. A value is decrypted the
first time the store reads it; read again (the chain-read rows read the same chain run after
run), it comes from the store's cache of opened values (\`plaintextCacheBytes\`, default
32 MiB), so those rows measure a warm cache. Each write runs AES-256-GCM once per value
(a cipher object per value in Node's \`crypto\`).
${notes.map((n) => `\n${n}`).join('')}`,
    };
  },
};

export default suite;
