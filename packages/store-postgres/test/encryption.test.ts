import { type EncryptionOptions, localKeyring, type Store } from '@cairn/store';
import {
  describeEncryptionConformance,
  describeStoreConformance,
  type RawTamper,
} from '@cairn/store/testing';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll } from 'vitest';
import { createPostgresStore } from '../src/index.js';
import { unpackText } from '../src/packed.js';
import { describeServer, dropSchema, freshSchema, POSTGRES_URL } from './support.js';

/** A query on the database under a store, around it. */
type Query = (sql: string, params?: unknown[]) => Promise<Array<Record<string, unknown>>>;

/**
 * Every row of every table of the schema as text, as a raw `SELECT` shows it, and every
 * packed (Brotli) value unpacked: message data and state segments are packed, and
 * compression must not pass for encryption.
 */
async function rawText(query: Query, schema: string): Promise<string> {
  const out: string[] = [];
  const tables = await query(
    `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = $1`,
    [schema],
  );
  for (const { t } of tables) {
    const name = `"${schema}"."${t as string}"`;
    for (const r of await query(`SELECT row_to_json(x)::text AS j FROM ${name} x`))
      out.push(r.j as string);
    const bytea = await query(
      `SELECT column_name AS c FROM information_schema.columns
       WHERE table_schema = $1 AND table_name = $2 AND data_type = 'bytea'`,
      [schema, t],
    );
    for (const { c } of bytea)
      for (const r of await query(`SELECT "${c as string}" AS b FROM ${name}`)) {
        if (r.b === null) continue;
        const bytes = Buffer.from(r.b as Uint8Array);
        out.push(bytes.toString('latin1'));
        try {
          out.push(unpackText(bytes));
        } catch {
          // Not packed text (a vector, say): its bytes are above.
        }
      }
  }
  return out.join('\n');
}

/** The sealed text of a stored value with one character changed. */
function edited(value: Record<string, string>): string {
  const sealed = value.$cairnSealed!;
  const at = sealed.length - 10;
  const changed = sealed.slice(0, at) + (sealed[at] === 'A' ? 'B' : 'A') + sealed.slice(at + 1);
  return JSON.stringify({ ...value, $cairnSealed: changed });
}

function tamper(query: (store: Store) => Query, schema: (store: Store) => string): RawTamper {
  const m = (store: Store) => `"${schema(store)}".messages`;
  return {
    copyMessageData: async (store, fromId, toId) => {
      await query(store)(
        `UPDATE ${m(store)} SET (data, packed) = (SELECT data, packed FROM ${m(store)} WHERE id = $1) WHERE id = $2`,
        [fromId, toId],
      );
    },
    editMessageData: async (store, id) => {
      const [row] = await query(store)(`SELECT data, packed FROM ${m(store)} WHERE id = $1`, [id]);
      const value = (
        row!.packed ? JSON.parse(unpackText(row!.packed as Uint8Array)) : row!.data
      ) as Record<string, string>;
      await query(store)(`UPDATE ${m(store)} SET data = $1::jsonb, packed = NULL WHERE id = $2`, [
        edited(value),
        id,
      ]);
    },
    setMessageData: async (store, id, data) => {
      await query(store)(`UPDATE ${m(store)} SET data = $1::jsonb, packed = NULL WHERE id = $2`, [
        JSON.stringify(data),
        id,
      ]);
    },
    setMemoryEntity: async (store, id, entityId) => {
      await query(store)(`UPDATE "${schema(store)}".memories SET entity_id = $1 WHERE id = $2`, [
        entityId,
        id,
      ]);
    },
  };
}

const conformanceEncryption = {
  keyring: localKeyring('the conformance run’s secret, 32 bytes or more'),
};

// PGlite: one database, a schema per store.
const db = await PGlite.create();
afterAll(() => db.close());
const pgliteSchemas = new WeakMap<Store, string>();
const pgliteQuery: Query = async (sql, params) =>
  (await db.query<Record<string, unknown>>(sql, params)).rows;

describeEncryptionConformance({
  name: 'postgres (PGlite)',
  create: async (encryption) => {
    const schema = freshSchema();
    const store = await createPostgresStore(
      { client: db },
      { schema, ...(encryption ? { encryption } : {}) },
    );
    pgliteSchemas.set(store, schema);
    return store;
  },
  reopen: async (store, encryption) =>
    createPostgresStore(
      { client: db },
      { schema: pgliteSchemas.get(store)!, ...(encryption ? { encryption } : {}) },
    ),
  destroy: async (store) => {
    await store.close();
    await db.exec(`DROP SCHEMA IF EXISTS "${pgliteSchemas.get(store)!}" CASCADE`);
  },
  rawText: (store) => rawText(pgliteQuery, pgliteSchemas.get(store)!),
  tamper: tamper(
    () => pgliteQuery,
    (store) => pgliteSchemas.get(store)!,
  ),
});

// The whole conformance suite on PGlite and on the server, sealing, but for what needs plaintext.
describeStoreConformance({
  name: 'postgres (PGlite, encrypted)',
  create: async () => {
    const schema = freshSchema();
    const store = await createPostgresStore(
      { client: db },
      { schema, encryption: conformanceEncryption },
    );
    pgliteSchemas.set(store, schema);
    return store;
  },
  destroy: async (store) => {
    await store.close();
    await db.exec(`DROP SCHEMA IF EXISTS "${pgliteSchemas.get(store)!}" CASCADE`);
  },
  reopen: async (store) =>
    createPostgresStore(
      { client: db },
      { schema: pgliteSchemas.get(store)!, encryption: conformanceEncryption },
    ),
  encrypted: true,
});

// The server: a schema per store, raw access through a pool of the test's own.
describeServer('PostgreSQL server', () => {
  const schemas = new WeakMap<Store, string>();
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 });
  afterAll(() => pool.end());
  const query: Query = async (sql, params) => (await pool.query(sql, params)).rows;
  const open = (schema: string, encryption: EncryptionOptions | undefined) =>
    createPostgresStore(
      { connectionString: POSTGRES_URL },
      { schema, maxConnections: 2, ...(encryption ? { encryption } : {}) },
    );
  describeEncryptionConformance({
    name: 'postgres (server)',
    create: async (encryption) => {
      const schema = freshSchema();
      const store = await open(schema, encryption);
      schemas.set(store, schema);
      return store;
    },
    reopen: async (store, encryption) => open(schemas.get(store)!, encryption),
    destroy: async (store) => {
      await store.close();
      await dropSchema(schemas.get(store)!);
    },
    rawText: (store) => rawText(query, schemas.get(store)!),
    tamper: tamper(
      () => query,
      (store) => schemas.get(store)!,
    ),
  });
  describeStoreConformance({
    name: 'postgres (server, encrypted)',
    create: async () => {
      const schema = freshSchema();
      const store = await open(schema, conformanceEncryption);
      schemas.set(store, schema);
      return store;
    },
    destroy: async (store) => {
      await store.close();
      await dropSchema(schemas.get(store)!);
    },
    reopen: async (store) => open(schemas.get(store)!, conformanceEncryption),
    encrypted: true,
  });
});
