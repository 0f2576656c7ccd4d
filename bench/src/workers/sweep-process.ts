/**
 * A process of the retention suite: either workers running turns, or the sweeper.
 * Forked with an IPC channel:
 *
 *   sweep-process.js turns <store spec JSON> <threadId,threadId,...>
 *   sweep-process.js sweep <store spec JSON> <dutyCycle | "default">
 *
 * Sends `{ ready: true }` once the store is open. Turns: `{ phase }` names the bucket the
 * next turns go to; `{ intervalMs }` switches to open loop (a turn every that many ms per
 * worker); `{ report: true }` answers `{ times }` (ms by phase) so far; `{ stop: true }`
 * ends them and answers `{ times }`. Sweep: `{ go: true }` runs one `store.sweep` and
 * answers `{ report, ms }`.
 */
import { openStore, runTurns, type StoreSpec, SWEEP_POLICY } from '../sweep-turns.js';

const [role, specJson, arg] = process.argv.slice(2) as [string, string, string];
const store = await openStore(JSON.parse(specJson) as StoreSpec);
const send = (m: unknown) => new Promise<void>((r) => process.send!(m, () => r()));

if (role === 'turns') {
  let phase = 'warmup';
  let interval: number | null = null;
  const turns = runTurns(
    store,
    arg.split(','),
    () => phase,
    () => interval,
  );
  process.on(
    'message',
    async (m: { phase?: string; intervalMs?: number; report?: boolean; stop?: boolean }) => {
      if (m.phase) phase = m.phase;
      if (m.intervalMs !== undefined) interval = m.intervalMs;
      if (m.report) await send({ times: Object.fromEntries(turns.times) });
      if (m.stop) {
        await turns.stop();
        await store.close();
        await send({ times: Object.fromEntries(turns.times) });
        process.exit(0);
      }
    },
  );
} else {
  process.on('message', async (m: { go?: boolean }) => {
    if (!m.go) return;
    const t0 = performance.now();
    const report = await store.sweep(
      SWEEP_POLICY,
      arg === 'default' ? { batch: 100 } : { batch: 100, dutyCycle: Number(arg) },
    );
    const ms = performance.now() - t0;
    await store.close();
    await send({ report, ms });
    process.exit(0);
  });
}
await send({ ready: true });
