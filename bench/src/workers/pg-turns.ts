/**
 * One of several worker processes running turns against one Postgres server. Spawned by the
 * `workers` and `concurrency` suites.
 *
 *   node pg-turns.js '<Config as JSON>'
 *
 * Runs 5 untimed warm-up turns on its first own thread, prints "ready", waits for "go" on
 * stdin, then runs `turns` turns and prints one JSON line (`Result`). Turn i goes to one of
 * the worker's own threads, every 4th to a shared one (if any); what a turn does: `turnRunner` in
 * ../turns.ts.
 */
import { type Config, leaseWaits, type Result, turnRunner } from '../turns.js';

const WARMUP = 5;

const c = JSON.parse(process.argv[2]!) as Config;
const { turn, close, acquisitions } = await turnRunner(c);
const turnsOn: Record<string, number> = {};
// Warm-up, untimed (a fresh process runs its first turns cold): on the first own thread.
for (let i = 0; i < WARMUP; i++) {
  await turn(c.own[0]!, -1 - i);
  turnsOn[c.own[0]!] = (turnsOn[c.own[0]!] ?? 0) + 1;
}
process.stdout.write('ready\n');
await new Promise<void>((resolve) => {
  process.stdin.on('data', (d) => {
    if (String(d).includes('go')) resolve();
  });
});
const latencies: number[] = [];
const warmups = acquisitions().length;
const cpu0 = process.cpuUsage();
const t0 = performance.now();
for (let i = 0; i < c.turns; i++) {
  const id =
    i % 4 === 3 && c.shared.length > 0
      ? c.shared[((i >> 2) + c.worker) % c.shared.length]!
      : c.own[i % c.own.length]!;
  const start = performance.now();
  await turn(id, i);
  latencies.push(performance.now() - start);
  turnsOn[id] = (turnsOn[id] ?? 0) + 1;
}
const ms = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
await close();
const { waits, retries } = leaseWaits(acquisitions().slice(warmups));
const result: Result = {
  latencies,
  turnsOn,
  leaseWaits: waits,
  leaseRetries: retries,
  ms,
  cpuMs: (cpu.user + cpu.system) / 1000,
};
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
