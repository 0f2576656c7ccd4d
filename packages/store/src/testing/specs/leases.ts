import { isCairnError, type JsonObject, newId } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { type StoreConformanceOptions, useStore } from '../context.js';
import { expectCode, expectTimestamp, LONG_NAME, NON_JSON, sleep } from '../helpers.js';

/** Short enough to wait out in a test, with a wait long enough for any clock rounding. */
const SHORT_TTL = 40;
const PAST_SHORT_TTL = 150;
const LONG_TTL = 60_000;

export function describeLeases(options: StoreConformanceOptions): void {
  describe('leases', () => {
    const store = useStore(options);
    const key = () => `lease-${newId()}`;

    it('acquires a free lease', async () => {
      const k = key();
      const { lease, tookOver } = await store().acquireLease({
        key: k,
        owner: 'alice',
        ttlMs: LONG_TTL,
        data: { run: 1 },
      });
      expect(tookOver).toBeNull();
      expect(lease).toMatchObject({ key: k, owner: 'alice', releasedAt: null, data: { run: 1 } });
      expectTimestamp(lease.acquiredAt);
      expect(lease.renewedAt).toBe(lease.acquiredAt);
      expect(lease.expiresAt).toBe(lease.acquiredAt + LONG_TTL);
      expect(await store().getLease(k)).toEqual(lease);
    });

    it('defaults data to an empty object', async () => {
      const { lease } = await store().acquireLease({ key: key(), owner: 'alice', ttlMs: LONG_TTL });
      expect(lease.data).toEqual({});
    });

    it('returns null for an unknown lease', async () => {
      expect(await store().getLease(key())).toBeNull();
    });

    it('refuses another owner while the lease is live (CONFLICT) and keeps it', async () => {
      const k = key();
      const { lease } = await store().acquireLease({ key: k, owner: 'alice', ttlMs: LONG_TTL });
      await expectCode(
        () => store().acquireLease({ key: k, owner: 'bob', ttlMs: LONG_TTL }),
        'CONFLICT',
      );
      expect(await store().getLease(k)).toEqual(lease);
    });

    it('renews when the same owner acquires again, merging data', async () => {
      const k = key();
      const first = await store().acquireLease({
        key: k,
        owner: 'alice',
        ttlMs: LONG_TTL,
        data: { a: 1 },
      });
      const again = await store().acquireLease({
        key: k,
        owner: 'alice',
        ttlMs: 2 * LONG_TTL,
        data: { b: 2 },
      });
      expect(again.tookOver).toBeNull();
      expect(again.lease.owner).toBe('alice');
      expect(again.lease.acquiredAt).toBe(first.lease.acquiredAt);
      expect(again.lease.renewedAt).toBeGreaterThanOrEqual(first.lease.renewedAt);
      expect(again.lease.expiresAt).toBe(again.lease.renewedAt + 2 * LONG_TTL);
      expect(again.lease.data).toEqual({ a: 1, b: 2 });
      expect(await store().getLease(k)).toEqual(again.lease);
    });

    it('lets another owner take over an expired lease and says whose it was', async () => {
      const k = key();
      const old = await store().acquireLease({
        key: k,
        owner: 'alice',
        ttlMs: SHORT_TTL,
        data: { from: 'alice' },
      });
      await sleep(PAST_SHORT_TTL);
      const { lease, tookOver } = await store().acquireLease({
        key: k,
        owner: 'bob',
        ttlMs: LONG_TTL,
        data: { from: 'bob' },
      });
      expect(tookOver).toEqual(old.lease);
      expect(lease).toMatchObject({
        key: k,
        owner: 'bob',
        releasedAt: null,
        data: { from: 'bob' },
      });
      expect(lease.acquiredAt).toBeGreaterThanOrEqual(old.lease.expiresAt);
      expect(lease.expiresAt).toBe(lease.acquiredAt + LONG_TTL);
      expect(await store().getLease(k)).toEqual(lease);
    });

    it('refuses the old owner after a take-over: renew and release are CONFLICT', async () => {
      const k = key();
      await store().acquireLease({ key: k, owner: 'alice', ttlMs: SHORT_TTL });
      await sleep(PAST_SHORT_TTL);
      const { lease } = await store().acquireLease({ key: k, owner: 'bob', ttlMs: LONG_TTL });
      await expectCode(() => store().renewLease(k, 'alice', LONG_TTL), 'CONFLICT');
      await expectCode(() => store().releaseLease(k, 'alice'), 'CONFLICT');
      await expectCode(
        () => store().acquireLease({ key: k, owner: 'alice', ttlMs: LONG_TTL }),
        'CONFLICT',
      );
      expect(await store().getLease(k)).toEqual(lease);
    });

    it('lets the same owner take its own expired lease back as a fresh acquisition', async () => {
      const k = key();
      const old = await store().acquireLease({ key: k, owner: 'alice', ttlMs: SHORT_TTL });
      await sleep(PAST_SHORT_TTL);
      const again = await store().acquireLease({ key: k, owner: 'alice', ttlMs: LONG_TTL });
      expect(again.lease.owner).toBe('alice');
      expect(again.lease.acquiredAt).toBeGreaterThan(old.lease.acquiredAt);
      expect(again.lease.expiresAt).toBe(again.lease.acquiredAt + LONG_TTL);
    });

    it('renews a live lease held by its owner, merging data', async () => {
      const k = key();
      const { lease } = await store().acquireLease({
        key: k,
        owner: 'alice',
        ttlMs: LONG_TTL,
        data: { a: 1 },
      });
      const renewed = await store().renewLease(k, 'alice', 3 * LONG_TTL, { b: 2 });
      expect(renewed).toMatchObject({
        key: k,
        owner: 'alice',
        acquiredAt: lease.acquiredAt,
        releasedAt: null,
        data: { a: 1, b: 2 },
      });
      expect(renewed.expiresAt).toBe(renewed.renewedAt + 3 * LONG_TTL);
      expect(renewed.expiresAt).toBeGreaterThan(lease.expiresAt);
      expect(await store().getLease(k)).toEqual(renewed);
      const plain = await store().renewLease(k, 'alice', LONG_TTL);
      expect(plain.data).toEqual({ a: 1, b: 2 });
    });

    it('keeps a lease alive past its first ttl by renewing it', async () => {
      const k = key();
      // The first ttl leaves time for the renewal to arrive on a slow database.
      await store().acquireLease({ key: k, owner: 'alice', ttlMs: 400 });
      await store().renewLease(k, 'alice', LONG_TTL);
      await sleep(500);
      await expectCode(
        () => store().acquireLease({ key: k, owner: 'bob', ttlMs: LONG_TTL }),
        'CONFLICT',
      );
      expect((await store().getLease(k))!.owner).toBe('alice');
    });

    it('refuses to renew an expired lease (CONFLICT)', async () => {
      const k = key();
      const { lease } = await store().acquireLease({ key: k, owner: 'alice', ttlMs: SHORT_TTL });
      await sleep(PAST_SHORT_TTL);
      await expectCode(() => store().renewLease(k, 'alice', LONG_TTL), 'CONFLICT');
      expect(await store().getLease(k)).toEqual(lease);
    });

    it('refuses to renew a lease held by another owner (CONFLICT)', async () => {
      const k = key();
      const { lease } = await store().acquireLease({ key: k, owner: 'alice', ttlMs: LONG_TTL });
      await expectCode(() => store().renewLease(k, 'bob', LONG_TTL), 'CONFLICT');
      expect(await store().getLease(k)).toEqual(lease);
    });

    it('refuses to renew or release an unknown lease (NOT_FOUND)', async () => {
      const k = key();
      await expectCode(() => store().renewLease(k, 'alice', LONG_TTL), 'NOT_FOUND');
      await expectCode(() => store().releaseLease(k, 'alice'), 'NOT_FOUND');
      expect(await store().getLease(k)).toBeNull();
    });

    it('releases a lease, keeping the record with releasedAt and merged data', async () => {
      const k = key();
      const { lease } = await store().acquireLease({
        key: k,
        owner: 'alice',
        ttlMs: LONG_TTL,
        data: { a: 1 },
      });
      const released = await store().releaseLease(k, 'alice', { outcome: 'done' });
      expect(released).toMatchObject({
        key: k,
        owner: 'alice',
        acquiredAt: lease.acquiredAt,
        data: { a: 1, outcome: 'done' },
      });
      expect(released.releasedAt).not.toBeNull();
      expectTimestamp(released.releasedAt);
      expect(await store().getLease(k)).toEqual(released);
    });

    it('releasing twice is harmless and keeps the first release time', async () => {
      const k = key();
      await store().acquireLease({ key: k, owner: 'alice', ttlMs: LONG_TTL });
      const first = await store().releaseLease(k, 'alice');
      const second = await store().releaseLease(k, 'alice');
      expect(second.releasedAt).toBe(first.releasedAt);
    });

    it('refuses to renew a released lease (CONFLICT)', async () => {
      const k = key();
      await store().acquireLease({ key: k, owner: 'alice', ttlMs: LONG_TTL });
      const released = await store().releaseLease(k, 'alice');
      await expectCode(() => store().renewLease(k, 'alice', LONG_TTL), 'CONFLICT');
      expect(await store().getLease(k)).toEqual(released);
    });

    it('refuses a release by another owner (CONFLICT) and keeps the lease', async () => {
      const k = key();
      const { lease } = await store().acquireLease({ key: k, owner: 'alice', ttlMs: LONG_TTL });
      await expectCode(() => store().releaseLease(k, 'bob'), 'CONFLICT');
      expect(await store().getLease(k)).toEqual(lease);
    });

    it('lets anyone acquire a released lease at once, with no take-over', async () => {
      const k = key();
      await store().acquireLease({ key: k, owner: 'alice', ttlMs: LONG_TTL, data: { old: true } });
      await store().releaseLease(k, 'alice');
      const { lease, tookOver } = await store().acquireLease({
        key: k,
        owner: 'bob',
        ttlMs: LONG_TTL,
      });
      expect(tookOver).toBeNull();
      expect(lease).toMatchObject({ owner: 'bob', releasedAt: null, data: {} });
    });

    it('lets exactly one of many racing owners acquire a free lease', async () => {
      const k = key();
      const results = await Promise.allSettled(
        Array.from({ length: 10 }, (_, i) =>
          store().acquireLease({ key: k, owner: `owner-${i}`, ttlMs: LONG_TTL }),
        ),
      );
      const winners = results.flatMap((r) =>
        r.status === 'fulfilled' ? [r.value.lease.owner] : [],
      );
      expect(winners).toHaveLength(1);
      for (const r of results)
        if (r.status === 'rejected') expect(isCairnError(r.reason, 'CONFLICT')).toBe(true);
      expect((await store().getLease(k))!.owner).toBe(winners[0]);
    });

    it('lets exactly one of many racing owners take over an expired lease', async () => {
      const k = key();
      await store().acquireLease({ key: k, owner: 'dead', ttlMs: SHORT_TTL });
      await sleep(PAST_SHORT_TTL);
      const results = await Promise.allSettled(
        Array.from({ length: 6 }, (_, i) =>
          store().acquireLease({ key: k, owner: `owner-${i}`, ttlMs: LONG_TTL }),
        ),
      );
      const winners = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      expect(winners).toHaveLength(1);
      expect(winners[0]!.tookOver!.owner).toBe('dead');
    });

    it('keeps leases of different keys apart', async () => {
      const k1 = key();
      const k2 = key();
      await store().acquireLease({ key: k1, owner: 'alice', ttlMs: LONG_TTL });
      const { lease } = await store().acquireLease({ key: k2, owner: 'bob', ttlMs: LONG_TTL });
      expect(lease.owner).toBe('bob');
      expect((await store().getLease(k1))!.owner).toBe('alice');
    });

    it('restoreLeases never takes or extends a live lease; expired and released ones are replaced', async () => {
      const held = (await store().acquireLease({ key: key(), owner: 'holder', ttlMs: LONG_TTL }))
        .lease;
      const free = key();
      const taken = { ...held, owner: 'intruder', expiresAt: held.expiresAt + LONG_TTL };
      const extended = { ...held, expiresAt: held.expiresAt + LONG_TTL };
      const other = { ...held, key: free, owner: 'intruder' };
      for (const batch of [[taken], [extended], [other, taken]]) {
        const e = await expectCode(() => store().restoreLeases(batch), 'CONFLICT');
        expect(e.message).toMatch(/held by "holder"/);
        expect(await store().getLease(held.key)).toEqual(held);
        expect(await store().getLease(free)).toBeNull();
      }
      // The same record again (a re-run of an import) is no change.
      await store().restoreLeases([held]);
      expect(await store().getLease(held.key)).toEqual(held);
      // An expired lease and a released one are history: a restore replaces them.
      const past = { ...other, acquiredAt: 1, renewedAt: 1, expiresAt: 2 };
      await store().restoreLeases([past]);
      await store().restoreLeases([other]);
      expect(await store().getLease(free)).toEqual(other);
      await store().releaseLease(held.key, 'holder');
      await store().restoreLeases([taken]);
      expect(await store().getLease(held.key)).toEqual(taken);
    });

    describe('bad input writes nothing', () => {
      it.each([
        ['an empty key', { key: '' }],
        ['a blank key', { key: '  ' }],
        ['a key over 200 characters', { key: LONG_NAME }],
        ['an empty owner', { owner: '' }],
        ['an owner over 200 characters', { owner: LONG_NAME }],
        ['a zero ttl', { ttlMs: 0 }],
        ['a negative ttl', { ttlMs: -5 }],
        ['a fractional ttl', { ttlMs: 1.5 }],
        ['a NaN ttl', { ttlMs: Number.NaN }],
        ['data that is not an object', { data: [1] as unknown as JsonObject }],
      ])('rejects %s (INVALID_ARGUMENT)', async (_l, patch) => {
        const k = key();
        await expectCode(
          () => store().acquireLease({ key: k, owner: 'alice', ttlMs: LONG_TTL, ...patch }),
          'INVALID_ARGUMENT',
        );
        expect(await store().getLease(k)).toBeNull();
      });

      it.each(NON_JSON)('rejects data with %s (INVALID_ARGUMENT)', async (_l, make) => {
        const k = key();
        await expectCode(
          () =>
            store().acquireLease({
              key: k,
              owner: 'alice',
              ttlMs: LONG_TTL,
              data: make() as JsonObject,
            }),
          'INVALID_ARGUMENT',
        );
        expect(await store().getLease(k)).toBeNull();
      });

      it('rejects a bad ttl or data on renew and keeps the lease', async () => {
        const k = key();
        const { lease } = await store().acquireLease({ key: k, owner: 'alice', ttlMs: LONG_TTL });
        await expectCode(() => store().renewLease(k, 'alice', 0), 'INVALID_ARGUMENT');
        await expectCode(
          () => store().renewLease(k, 'alice', LONG_TTL, { n: Number.NaN }),
          'INVALID_ARGUMENT',
        );
        expect(await store().getLease(k)).toEqual(lease);
      });

      it('rejects bad data on release and keeps the lease live', async () => {
        const k = key();
        const { lease } = await store().acquireLease({ key: k, owner: 'alice', ttlMs: LONG_TTL });
        await expectCode(
          () => store().releaseLease(k, 'alice', { n: 10n } as unknown as JsonObject),
          'INVALID_ARGUMENT',
        );
        expect(await store().getLease(k)).toEqual(lease);
      });
    });

    describe('waiting for a lease (waitMs)', () => {
      it('waits for the holder to release it, then takes it', async () => {
        const k = key();
        await store().acquireLease({ key: k, owner: 'alice', ttlMs: LONG_TTL });
        const events: string[] = [];
        const waiting = store()
          .acquireLease({ key: k, owner: 'bob', ttlMs: LONG_TTL, waitMs: 30_000 })
          .then((a) => {
            events.push('bob took it');
            return a;
          });
        await sleep(50);
        events.push('alice releases');
        await store().releaseLease(k, 'alice');
        const { lease, tookOver } = await waiting;
        expect(events).toEqual(['alice releases', 'bob took it']);
        expect(lease.owner).toBe('bob');
        expect(tookOver).toBeNull();
      });

      it('waits for the lease to expire, then takes it over', async () => {
        const k = key();
        await store().acquireLease({ key: k, owner: 'alice', ttlMs: PAST_SHORT_TTL });
        const { lease, tookOver } = await store().acquireLease({
          key: k,
          owner: 'bob',
          ttlMs: LONG_TTL,
          waitMs: 30_000,
        });
        expect(lease.owner).toBe('bob');
        expect(tookOver?.owner).toBe('alice');
      });

      it('gives up with TIMEOUT when it is still held after waitMs, changing nothing', async () => {
        const k = key();
        const { lease } = await store().acquireLease({ key: k, owner: 'alice', ttlMs: LONG_TTL });
        const e = await expectCode(
          () => store().acquireLease({ key: k, owner: 'bob', ttlMs: LONG_TTL, waitMs: 100 }),
          'TIMEOUT',
        );
        expect(e.details).toMatchObject({ key: k, owner: 'alice' });
        expect(await store().getLease(k)).toEqual(lease);
      });

      it('hands the lease to its waiters in the order they asked', async () => {
        const k = key();
        await store().acquireLease({ key: k, owner: 'w0', ttlMs: LONG_TTL });
        const order: string[] = [];
        const waiters = ['w1', 'w2', 'w3'].map((owner) =>
          store()
            .acquireLease({ key: k, owner, ttlMs: LONG_TTL, waitMs: 30_000 })
            .then(async ({ lease }) => {
              order.push(lease.owner);
              await sleep(10);
              await store().releaseLease(k, owner);
            }),
        );
        await sleep(50);
        await store().releaseLease(k, 'w0');
        await Promise.all(waiters);
        expect(order).toEqual(['w1', 'w2', 'w3']);
      });

      it('keeps a freed lease for its waiter: an acquisition that does not wait meets CONFLICT naming it', async () => {
        const k = key();
        await store().acquireLease({ key: k, owner: 'alice', ttlMs: LONG_TTL });
        const waiting = store().acquireLease({
          key: k,
          owner: 'bob',
          ttlMs: LONG_TTL,
          waitMs: 30_000,
        });
        await sleep(50);
        await store().releaseLease(k, 'alice');
        const e = await expectCode(
          () => store().acquireLease({ key: k, owner: 'dave', ttlMs: LONG_TTL }),
          'CONFLICT',
        );
        expect(e.details).toMatchObject({ key: k, owner: 'bob' });
        expect((await waiting).lease.owner).toBe('bob');
        // The lease shows no queue; bob's place went with his acquisition.
        await store().releaseLease(k, 'bob');
        expect(Object.keys((await store().getLease(k))!).sort()).toEqual(
          ['acquiredAt', 'data', 'expiresAt', 'key', 'owner', 'releasedAt', 'renewedAt'].sort(),
        );
        expect(
          (await store().acquireLease({ key: k, owner: 'dave', ttlMs: LONG_TTL })).lease.owner,
        ).toBe('dave');
      });

      it('refuses a bad waitMs, and waiting inside a transaction', async () => {
        for (const waitMs of [-1, 1.5, '10', Number.NaN, 2 ** 31])
          await expectCode(
            () => store().acquireLease({ key: key(), owner: 'a', ttlMs: 10, waitMs } as never),
            'INVALID_ARGUMENT',
          );
        const k = key();
        await expectCode(
          () =>
            store().transaction((tx) =>
              tx.acquireLease({ key: k, owner: 'a', ttlMs: 10, waitMs: 10 }),
            ),
          'INVALID_ARGUMENT',
        );
        expect(await store().getLease(k)).toBeNull();
      });
    });
  });
}
