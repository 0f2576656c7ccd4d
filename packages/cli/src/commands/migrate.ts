import { check, openStore, probe, type Target } from '../database.js';
import type { Io } from '../output.js';

/** Brings the schema of `t` up to date; a missing SQLite file is refused, not created. */
export async function migrate(t: Target, io: Io): Promise<number> {
  const before = await check(t, 'migrate');
  if (before.version === before.latest) {
    io.stdout.write(`already at schema version ${before.latest}\n`);
    return 0;
  }
  const store = await openStore(t, 'migrate'); // opening migrates
  await store.close();
  const after = await probe(t);
  io.stdout.write(`migrated from schema version ${before.version} to ${after.version}\n`);
  return 0;
}
