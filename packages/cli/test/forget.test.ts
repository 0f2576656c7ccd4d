import { isCairnError } from '@cairn/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cairnHere, kinds, seed, type TestDb, testDb } from './support.js';

describe.each(kinds)('forget on %s', (kind) => {
  let db: TestDb;
  beforeAll(() => {
    db = testDb(kind);
  });
  afterAll(() => db.drop());

  it('deletes the resource’s threads, prints the receipt as JSON, and leaves a tombstone', async () => {
    const store = await db.open();
    let other: string;
    try {
      await seed(store); // user-1's thread
      other = (await store.createThread({ resourceId: 'user-2' })).id;
      await store.addMemories([
        { agentId: 'a', entityId: 'user-1', content: { text: 'likes tea' } },
        { agentId: 'a', entityId: 'user-2', content: { text: 'likes coffee' } },
      ]);
    } finally {
      await store.close();
    }

    const r = await cairnHere(['forget', db.arg, '--resource', 'user-1', '--entity', 'user-1']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const receipt = JSON.parse(r.stdout);
    expect(receipt.subject).toEqual({ resourceId: 'user-1', entityId: 'user-1' });
    expect(receipt.counts).toMatchObject({
      threads: 1,
      branches: 2,
      messages: 3,
      stateCommits: 1,
      checkpoints: 1,
      memories: 1,
    });
    expect(typeof receipt.at).toBe('number');

    const after = await db.open();
    try {
      expect((await after.listThreads({ resourceId: 'user-1' })).items).toEqual([]);
      expect((await after.getThread(other))?.resourceId).toBe('user-2');
      expect((await after.listMemories()).map((m) => m.entityId)).toEqual(['user-2']);
      const late = await after.createThread({ resourceId: 'user-1' }).catch((e: unknown) => e);
      expect(isCairnError(late, 'FORGOTTEN'), String(late)).toBe(true);
    } finally {
      await after.close();
    }
  });

  it('asks whom to forget, and refuses a bad id before writing', async () => {
    const none = await cairnHere(['forget', db.arg]);
    expect(none.code).not.toBe(0);
    expect(none.stderr).toContain('--resource');
    const bad = await cairnHere(['forget', db.arg, '--resource', 'x'.repeat(201)]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('resourceId');
  });
});
