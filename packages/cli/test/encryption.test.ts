// An encrypted database on the command line: export, show, import and inspect take the
// local keyring's secret (--keyring <file> or CAIRN_KEYRING_SECRET) and are refused without
// it, or with another, before anything is read or written.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { localKeyring } from '@cairn/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cairn,
  cairnHere,
  kinds,
  seed,
  startInspect,
  type TestDb,
  tempDir,
  testDb,
} from './support.js';

const SECRET = 'the cli test secret, thirty-two bytes or more';
const encryption = { keyring: localKeyring(SECRET) };

describe.each(kinds)('an encrypted database on %s', (kind) => {
  let db: TestDb;
  let plainCopy: TestDb;
  let sealedCopy: TestDb;
  let seeded: Awaited<ReturnType<typeof seed>>;
  const dir = tempDir();
  const keyFile = join(dir, 'keyring');
  const otherKeyFile = join(dir, 'other');
  beforeAll(async () => {
    db = testDb(kind);
    plainCopy = testDb(kind);
    sealedCopy = testDb(kind);
    const store = await db.open({ encryption });
    seeded = await seed(store);
    await store.close();
    writeFileSync(keyFile, `${SECRET}\n`);
    writeFileSync(otherKeyFile, 'another secret, also thirty-two bytes or more');
  });
  afterAll(async () => {
    for (const d of [db, plainCopy, sealedCopy]) await d.drop();
  });

  it('export and show are refused without the keyring, or with another, and read with it', async () => {
    for (const args of [
      ['export', db.arg],
      ['show', db.arg, seeded.thread.id],
    ]) {
      const refused = await cairn(args);
      expect(refused.code).toBe(1);
      expect(refused.stdout).toBe('');
      expect(refused.stderr).toMatch(
        /is encrypted \(data keys wrapped by "local:[0-9a-f]+"\): give its keyring secret with --keyring <file> or CAIRN_KEYRING_SECRET/,
      );
      const other = await cairn([...args, '--keyring', otherKeyFile]);
      expect(other.code).toBe(1);
      expect(other.stdout).toBe('');
      expect(other.stderr).toMatch(/is encrypted with another key/);
      const opened = await cairn([...args, '--keyring', keyFile]);
      expect(opened.stderr).toBe('');
      expect(opened.code).toBe(0);
      expect(opened.stdout).toContain('reply');
    }
    // The secret from the environment, as well.
    process.env.CAIRN_KEYRING_SECRET = SECRET;
    try {
      const dump = await cairnHere(['export', db.arg]);
      expect(dump.code).toBe(0);
      expect(dump.stdout).toContain('hi there');
    } finally {
      delete process.env.CAIRN_KEYRING_SECRET;
    }
    const missing = await cairn(['export', db.arg, '--keyring', join(dir, 'none')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--keyring: cannot read/);
  });

  it('import seals with --keyring, and is refused into an encrypted database without it', async () => {
    const dump = (await cairn(['export', db.arg, '--keyring', keyFile])).stdout;
    const imported = await cairn(['import', sealedCopy.arg, '--keyring', keyFile], dump);
    expect(imported.code).toBe(0);
    // What it wrote is sealed: a store without the keyring cannot read it.
    const plain = await sealedCopy.open();
    try {
      const head = seeded.messages.b2.id;
      await expect(plain.getChain(head)).rejects.toMatchObject({ code: 'DECRYPTION_FAILED' });
    } finally {
      await plain.close();
    }
    expect((await cairn(['export', sealedCopy.arg, '--keyring', keyFile])).stdout).toBe(dump);
    const refused = await cairn(['import', sealedCopy.arg, '--skip-existing'], dump);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/is encrypted/);
    const copied = await cairn(['copy', db.arg, join(dir, 'copy.db')]);
    expect(copied.code).toBe(1);
    expect(copied.stderr).toMatch(/is encrypted/);
    // Without a keyring, into a new database: in plaintext, as before.
    expect((await cairn(['import', plainCopy.arg], dump)).code).toBe(0);
    expect((await cairn(['export', plainCopy.arg])).stdout).toBe(dump);
  });

  it('inspect is refused without the keyring and serves the thread with it', async () => {
    const refused = await cairn(['inspect', db.arg, '--port', '0']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/is encrypted/);

    const inspector = await startInspect([db.arg, '--port', '0', '--keyring', keyFile]);
    let code: number | null;
    try {
      const res = await fetch(`${inspector.url}/api/threads/${seeded.thread.id}`);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('hi there');
    } finally {
      code = await inspector.stop();
    }
    expect(code).toBe(0);
  });
});
