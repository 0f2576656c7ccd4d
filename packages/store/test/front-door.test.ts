import { CairnError, isCairnError, newId } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { createStore, type Driver, memoryDriver } from '../src/adapter.js';
import type { StoreChange } from '../src/index.js';
import { sweepRestMs } from '../src/retention.js';

/** A memory driver whose sessions fail with `error` while `failing` is set. */
function flakyDriver(error: unknown, translateError?: Driver['translateError']) {
  const inner = memoryDriver();
  const state = { failing: false };
  const driver: Driver = {
    capabilities: inner.capabilities,
    run: (fn, options) => {
      if (state.failing) return Promise.reject(error);
      return inner.run(fn, options);
    },
    migrate: () => inner.migrate(),
    close: () => inner.close(),
    ...(translateError ? { translateError } : {}),
  };
  return { driver, state };
}

describe('createStore: driver failures', () => {
  it('wraps what the driver throws as UNAVAILABLE, with the driver error as cause', async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
      code: 'ECONNREFUSED',
    });
    const { driver, state } = flakyDriver(refused);
    const store = createStore(driver);
    state.failing = true;
    const e = await store.getThread('t').catch((x: unknown) => x);
    expect(isCairnError(e, 'UNAVAILABLE')).toBe(true);
    expect((e as CairnError).cause).toBe(refused);
    expect((e as CairnError).message).toContain('ECONNREFUSED');
  });

  it('uses the driver translation when it has one', async () => {
    const busy = new Error('SQLITE_BUSY');
    const { driver, state } = flakyDriver(busy, (x) =>
      x === busy ? new CairnError('TIMEOUT', 'locked', { cause: x }) : undefined,
    );
    const store = createStore(driver);
    state.failing = true;
    await expect(store.createThread({})).rejects.toMatchObject({ code: 'TIMEOUT', cause: busy });
  });

  it("passes the caller's own error out of a transaction unchanged", async () => {
    const store = createStore(memoryDriver());
    const mine = new TypeError('mine');
    await expect(
      store.transaction(async () => {
        throw mine;
      }),
    ).rejects.toBe(mine);
  });
});

describe('createStore: notifications and disposal', () => {
  it('emits a transaction’s changes only after it commits, and none when it rolls back', async () => {
    const store = createStore(memoryDriver());
    const id = newId();
    const heard: StoreChange[] = [];
    store.subscribe(id, (c) => heard.push(c));
    await store
      .transaction(async (tx) => {
        await tx.createThread({ id });
        throw new Error('undo');
      })
      .catch(() => {});
    expect(heard).toEqual([]);
    await store.transaction(async (tx) => {
      await tx.createThread({ id });
      await tx.updateThread(id, { title: 'x' });
      expect(heard).toEqual([]);
    });
    expect(heard).toEqual([
      { threadId: id, kind: 'thread' },
      { threadId: id, kind: 'thread' },
    ]);
  });

  it('a failed call inside a transaction changes nothing, and the transaction goes on', async () => {
    const store = createStore(memoryDriver());
    const id = newId();
    await store.transaction(async (tx) => {
      await tx.createThread({ id });
      await expect(tx.createThread({ id })).rejects.toMatchObject({ code: 'CONFLICT' });
      await tx.updateThread(id, { title: 'kept' });
    });
    expect((await store.getThread(id))!.title).toBe('kept');
  });

  it('closes on `await using`', async () => {
    const store = createStore(memoryDriver());
    {
      await using s = store;
      await s.createThread({});
    }
    await expect(store.listThreads()).rejects.toMatchObject({ code: 'CLOSED' });
  });
});

describe('sweep pacing', () => {
  it('rests after a thread in proportion to its work: at most dutyCycle of the wall time', () => {
    expect(sweepRestMs(10, 0.5)).toBe(10);
    expect(sweepRestMs(10, 0.25)).toBe(30);
    expect(sweepRestMs(10, 1)).toBe(0);
    expect(sweepRestMs(0, 0.5)).toBe(0);
  });

  it('starts no thread while the driver says sessions queue for a connection', async () => {
    const inner = memoryDriver();
    const log: string[] = [];
    let queued = 3;
    const driver: Driver = {
      capabilities: inner.capabilities,
      run: (fn, options) => {
        if (options.write) log.push(`write with ${queued} queued`);
        return inner.run(fn, options);
      },
      migrate: () => inner.migrate(),
      close: () => inner.close(),
      queuedSessions: () => {
        log.push('asked');
        return queued > 0 ? queued-- : 0;
      },
    };
    const store = createStore(driver);
    const { thread } = await store.createThreadWithBranch({});
    log.length = 0;
    const report = await store.sweep(
      { turnTtlMs: 1 },
      { threadIds: [thread.id], dutyCycle: 1, owner: 'sweeper' },
    );
    expect(report.scanned).toBe(1);
    // The lease is taken first; the thread's session waits until nothing queues.
    const sweptAt = log.indexOf('asked');
    expect(log.slice(sweptAt, sweptAt + 5)).toEqual([
      'asked',
      'asked',
      'asked',
      'asked',
      'write with 0 queued',
    ]);
    await store.close();
  });
});

describe('sweep lease', () => {
  it('is renewed in time however long the sweep rests, so a slow sweep finishes its threads', async () => {
    const store = createStore(memoryDriver());
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await store.createThreadWithBranch({})).thread.id);
    // Each thread's rest (9,999 times its work) would outlast the 1 s lease, page by page.
    const report = await store.sweep(
      { turnTtlMs: 1 },
      { threadIds: ids, batch: 1, leaseTtlMs: 1000, dutyCycle: 0.0001 },
    );
    expect(report).toMatchObject({ ran: true, scanned: 3 });
    await store.close();
  });
});
