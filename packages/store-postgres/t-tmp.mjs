import { createPostgresStore } from './dist/index.js';
import pg from 'pg';
const url = 'postgres://postgres@127.0.0.1:5432/test';
const store = await createPostgresStore({ connectionString: url }, { schema: 'tmp_cmt' });
const t0 = await store.createThread({});
const b = await store.createBranch({ threadId: t0.id, name: 'main', headMessageId: null });
let v = 0;
let t = performance.now();
for (let i = 0; i < 400; i++) { await store.appendStateCommit({ branchId: b.id, messageId: null, update: { n: i } }, v++); }
console.log('store', (performance.now() - t) / 400);
const pool = new pg.Pool({ connectionString: url });
const sqlN = (notify) => `WITH ins AS (INSERT INTO tmp_cmt.state_commits (branch_id, thread_id, version, message_id, message_depth, "update", snapshot, created_at)
  SELECT b.id, b.thread_id, ($3::bigint + 1)::int, $2::text, m.depth, $4::jsonb, $5::jsonb, $6
  FROM tmp_cmt.branches b LEFT JOIN tmp_cmt.messages m ON m.id = $2::text AND m.thread_id = b.thread_id
  WHERE b.id = $1 AND ($2::text IS NULL OR m.id IS NOT NULL)
  AND (SELECT COALESCE(max(version), 0) FROM tmp_cmt.state_commits WHERE branch_id = $1) = $3::bigint
  ON CONFLICT (branch_id, version) DO NOTHING RETURNING *) SELECT i.version ${notify ? ", pg_notify('cairn:tmp_cmt', 'x')" : ''} FROM ins i`;
for (let k = 0; k < 2; k++) { t = performance.now();
for (let i = 0; i < 400; i++) { await store.appendStateCommit({ branchId: b.id, messageId: null, update: { n: i } }, v++); }
console.log('store', (performance.now() - t) / 400); }
for (const notify of [true, false, true, false]) {
  t = performance.now();
  for (let i = 0; i < 400; i++) { await pool.query(sqlN(notify), [b.id, null, v++, '{}', null, Date.now()]); }
  console.log('raw stmt notify=' + notify, (performance.now() - t) / 400);
  t = performance.now();
  for (let i = 0; i < 400; i++) { await pool.query({ name: 'c' + notify, text: sqlN(notify), values: [b.id, null, v++, '{}', null, Date.now()] }); }
  console.log('named stmt notify=' + notify, (performance.now() - t) / 400);
}
t = performance.now();
for (let i = 0; i < 400; i++) { const c = await pool.connect(); await c.query('BEGIN'); await c.query('SELECT 1'); await c.query('SELECT 1'); await c.query('COMMIT'); c.release(); }
console.log('4 trivial', (performance.now() - t) / 400);
await store.close(); await pool.query('drop schema tmp_cmt cascade'); await pool.end();
