// The queue's rule, decided from its items alone (planClaim), and its compare-and-set
// claim on every store: two workers never hold one run, one thread never runs two.
import { describe, expect, it } from 'vitest';
import { planClaim, type QueueItem } from '../src/index.js';

const item = (runId: string, threadId: string, over: Partial<QueueItem> = {}) => ({
  value: {
    run_id: runId,
    thread_id: threadId,
    created_at: 100,
    available_at: 100,
    claim: null,
    attempt: 0,
    cancel: null,
    began: null,
    ...over,
  },
  version: 1,
});

describe('planClaim', () => {
  it("offers each thread's oldest run, oldest thread first", () => {
    const plan = planClaim(
      [
        item('r3', 't2', { created_at: 300 }),
        item('r2', 't1', { created_at: 200 }),
        item('r1', 't1', { created_at: 150 }),
      ],
      1000,
    );
    expect(plan.candidates.map((c) => c.value.run_id)).toEqual(['r1', 'r3']);
    expect(plan.wakeAt).toBeNull();
  });

  it('holds a thread whose oldest run is claimed and live, and wakes when the claim expires', () => {
    const plan = planClaim(
      [
        item('r1', 't1', { claim: { owner: 'w', expires_at: 5000 } }),
        item('r2', 't1', { created_at: 200 }),
      ],
      1000,
    );
    expect(plan.candidates).toEqual([]);
    expect(plan.wakeAt).toBe(5000);
  });

  it("offers a dead worker's run again once its claim expired", () => {
    const plan = planClaim(
      [item('r1', 't1', { claim: { owner: 'w', expires_at: 900 }, attempt: 1 })],
      1000,
    );
    expect(plan.candidates.map((c) => c.value.run_id)).toEqual(['r1']);
  });

  it('waits for after_seconds, holding the runs behind it on its thread', () => {
    const plan = planClaim(
      [
        item('r1', 't1', { available_at: 4000 }),
        item('r2', 't1', { created_at: 200 }),
        item('r3', 't2'),
      ],
      1000,
    );
    expect(plan.candidates.map((c) => c.value.run_id)).toEqual(['r3']);
    expect(plan.wakeAt).toBe(4000);
  });
});
