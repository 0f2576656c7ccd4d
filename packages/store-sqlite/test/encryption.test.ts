import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@cairn/core';
import { type EncryptionOptions, localKeyring, type Store } from '@cairn/store';
import { describeEncryptionConformance, describeStoreConformance } from '@cairn/store/testing';
import Database from 'better-sqlite3';
import { afterAll } from 'vitest';
import { createSqliteStore } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'cairn-encryption-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const files = new WeakMap<Store, string>();
const open = (path: string, encryption: EncryptionOptions | undefined) =>
  createSqliteStore({ path }, encryption ? { encryption } : {});

/** Runs `fn` on a connection of its own to the store's file: edits around the store. */
function raw<T>(store: Store, fn: (db: Database.Database) => T): T {
  const db = new Database(files.get(store)!);
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** The sealed text of a stored value with one character changed. */
function edited(stored: string): string {
  const value = JSON.parse(stored) as Record<string, string>;
  const sealed = value.$cairnSealed!;
  const at = sealed.length - 10;
  value.$cairnSealed =
    sealed.slice(0, at) + (sealed[at] === 'A' ? 'B' : 'A') + sealed.slice(at + 1);
  return JSON.stringify(value);
}

describeEncryptionConformance({
  name: 'sqlite',
  create: async (encryption) => {
    const path = join(dir, `${newId()}.db`);
    const store = open(path, encryption);
    files.set(store, path);
    return store;
  },
  reopen: async (store, encryption) => open(files.get(store)!, encryption),
  destroy: async (store) => {
    await store.close();
    for (const suffix of ['', '-wal', '-shm'])
      rmSync(`${files.get(store)!}${suffix}`, { force: true });
  },
  // The file and its WAL, byte for byte, as the disk holds them.
  rawText: async (store) =>
    ['', '-wal']
      .map((suffix) => {
        try {
          return readFileSync(`${files.get(store)!}${suffix}`).toString('latin1');
        } catch {
          return '';
        }
      })
      .join('\n'),
  tamper: {
    copyMessageData: async (store, fromId, toId) =>
      raw(store, (db) => {
        db.prepare(
          'UPDATE cairn_messages SET data = (SELECT data FROM cairn_messages WHERE id = ?) WHERE id = ?',
        ).run(fromId, toId);
      }),
    editMessageData: async (store, id) =>
      raw(store, (db) => {
        const { data } = db.prepare('SELECT data FROM cairn_messages WHERE id = ?').get(id) as {
          data: string;
        };
        db.prepare('UPDATE cairn_messages SET data = ? WHERE id = ?').run(edited(data), id);
      }),
    setMessageData: async (store, id, data) =>
      raw(store, (db) => {
        db.prepare('UPDATE cairn_messages SET data = ? WHERE id = ?').run(JSON.stringify(data), id);
      }),
    setMemoryEntity: async (store, id, entityId) =>
      raw(store, (db) => {
        db.prepare('UPDATE cairn_memories SET entity_id = ? WHERE id = ?').run(entityId, id);
      }),
  },
});

// The whole conformance suite on a file whose store seals, but for what needs plaintext.
const encryption = { keyring: localKeyring('the conformance run’s secret, 32 bytes or more') };
describeStoreConformance({
  name: 'sqlite (encrypted)',
  create: async () => {
    const path = join(dir, `${newId()}.db`);
    const store = open(path, encryption);
    files.set(store, path);
    return store;
  },
  destroy: async (store) => {
    await store.close();
    for (const suffix of ['', '-wal', '-shm'])
      rmSync(`${files.get(store)!}${suffix}`, { force: true });
  },
  reopen: async (store) => open(files.get(store)!, encryption),
  encrypted: true,
});
