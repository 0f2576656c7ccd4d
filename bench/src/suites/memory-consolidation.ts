/**
 * Issue 28's consolidation off the hot path, on one SQLite file:
 * - 8 processes write facts (new values by `remember` and by `supersede`, duplicates in
 *   other letter case) while consolidation runs in every one of them (one at a time, by
 *   the lease); then every fact's current value must be the last one written (a lost
 *   update otherwise), and every id a write returned must still be stored.
 * - A turn (`recall` + `remember`) in one process, its p99 with a consolidation runner
 *   working in the same process against the same turns without one, blocks alternated.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { type ConsolidationReport, createMemory } from '@cairn/memory';
import { createSqliteStore } from '@cairn/store-sqlite';
import type { Suite } from '../harness.js';
import { runProcesses } from '../processes.js';
import { rng as seeded } from '../random.js';

const worker = join(dirname(fileURLToPath(import.meta.url)), '..', 'workers', 'memory-writer.js');
const PROCESSES = 8;
const KEYS = 25;
const ROUNDS = 12;
const SEED_FACTS = 2_000;
const TURNS_PER_BLOCK = 100;
const BLOCKS = 10;

interface WriterResult {
  last: Record<string, string>;
  written: string[];
  refused: number;
  ran: number;
  leaseHeld: number;
  ms: number;
}

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};
const f2 = (x: number) => x.toFixed(2);
const note = (i: number) =>
  `note ${i}: the ${['red', 'blue', 'green', 'amber'][i % 4]} file is in drawer ${i % 97}`;

const suite: Suite = {
  id: 'memory-consolidation',
  title: '@cairn/memory: consolidation off the hot path (8 writing processes, turn p99)',
  async run(log) {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-consolidation-'));
    try {
      // ---------------------------------------------------------------- lost updates
      const path = join(dir, 'writers.db');
      const setup = createSqliteStore({ path });
      await setup.migrate();
      await setup.close();
      const t0 = performance.now();
      const results = await runProcesses<WriterResult>(
        worker,
        Array.from({ length: PROCESSES }, (_, w) => [
          path,
          String(w),
          String(KEYS),
          String(ROUNDS),
        ]),
      );
      const writeS = (performance.now() - t0) / 1000;
      const store = createSqliteStore({ path }, { busyTimeoutMs: 60_000 });
      const memory = createMemory({ store, agentId: 'assistant' });
      // What the runners had not reached yet: passes until one changes nothing.
      let final: ConsolidationReport;
      let passes = 0;
      do {
        final = await memory.consolidate();
        passes++;
      } while (final.merged + final.superseded > 0 && passes < 20);
      const now = await store.listMemories(
        { agentId: 'assistant', validAt: Date.now() },
        { limit: 10_000 },
      );
      const byKey = new Map<string, string[]>();
      for (const m of now) {
        const key = m.metadata.factKey as string;
        byKey.set(key, [...(byKey.get(key) ?? []), m.content.text]);
      }
      let facts = 0;
      let lost = 0;
      let ambiguous = 0;
      let missing = 0;
      let written = 0;
      for (const r of results) {
        for (const [key, text] of Object.entries(r.last)) {
          facts++;
          const values = byKey.get(key) ?? [];
          if (!values.includes(text)) lost++;
          else if (values.length > 1) ambiguous++;
        }
        for (const id of r.written) {
          written++;
          if (!(await store.getMemory(id))) missing++;
        }
      }
      const all = await store.countMemories({ agentId: 'assistant' });
      const merged = (await store.listMemories({ agentId: 'assistant' }, { limit: 10_000 })).filter(
        (m) => m.metadata.consolidated !== undefined,
      );
      const mergedCount = merged.filter(
        (m) => (m.metadata.consolidated as { action: string }).action === 'merge',
      ).length;
      const supersededCount = merged.length - mergedCount;
      await store.close();
      const sum = (k: 'ran' | 'leaseHeld' | 'refused') => results.reduce((n, r) => n + r[k], 0);
      log(
        `writers: ${written} writes in ${writeS.toFixed(1)} s; lost ${lost}, missing ${missing}, passes ran ${sum('ran')}, lease held ${sum('leaseHeld')}`,
      );

      // ---------------------------------------------------------------- turn p99
      const turnsPath = join(dir, 'turns.db');
      const turnsStore = createSqliteStore({ path: turnsPath });
      const agent = createMemory({ store: turnsStore, agentId: 'assistant' });
      const next = seeded(28);
      const int = (n: number) => Math.floor(next() * n);
      await agent.rememberMany(
        Array.from({ length: SEED_FACTS }, (_, i) => ({
          text: note(i),
          metadata: { factKey: `note-${i % 500}` },
          validFrom: Date.UTC(2025, 0, 1) + i * 60_000,
        })),
      );
      let turnNo = 0;
      // A turn: recall for the user's message, the model's answer (an I/O wait: here the
      // event loop's next round, where a runner's step may run and delay the turn), then
      // remember what was said; every other turn repeats an earlier note in capitals (work
      // for consolidation to do).
      const turn = async () => {
        const i = turnNo++;
        await agent.recall(`where is the ${['red', 'blue', 'green'][i % 3]} file?`, { limit: 10 });
        await yieldToLoop();
        const k = int(SEED_FACTS);
        await agent.remember(
          i % 2
            ? { text: note(k).toUpperCase() }
            : { text: `turn ${i}: the user asked about drawer ${k % 97}` },
          { allowDuplicate: true },
        );
      };
      // Wall time, and this process's CPU time (what a step of the runner inside the turn
      // adds; unlike wall time, not moved by other processes taking the machine's cores).
      const timed = async (n: number, into: { wall: number[]; cpu: number[] }) => {
        for (let i = 0; i < n; i++) {
          const t = performance.now();
          const c = process.cpuUsage();
          await turn();
          const used = process.cpuUsage(c);
          into.wall.push(performance.now() - t);
          into.cpu.push((used.user + used.system) / 1000);
          // Between requests, as a server's event loop would: timers (the runner) get a turn.
          await yieldToLoop();
        }
      };
      const without = { wall: [] as number[], cpu: [] as number[] };
      const withRunner = { wall: [] as number[], cpu: [] as number[] };
      const reports: ConsolidationReport[] = [];
      const errors: unknown[] = [];
      await timed(30, { wall: [], cpu: [] }); // warm-up
      for (let b = 0; b < BLOCKS; b++) {
        // Alternate which side goes first.
        for (const side of b % 2 ? ['with', 'without'] : ['without', 'with']) {
          if (side === 'without') await timed(TURNS_PER_BLOCK, without);
          else {
            const runner = agent.startConsolidation({
              intervalMs: 1,
              onReport: (r) => reports.push(r),
              onError: (e) => errors.push(e),
            });
            await timed(TURNS_PER_BLOCK, withRunner);
            await runner.stop();
          }
        }
      }
      await turnsStore.close();
      const p99 = (side: { wall: number[]; cpu: number[] }) => ({
        wall: percentile(side.wall, 99),
        cpu: percentile(side.cpu, 99),
      });
      const p99Without = p99(without);
      const p99With = p99(withRunner);
      const passesRan = reports.filter((r) => r.ran).length;
      const closedInTurns = reports.reduce((n, r) => n + r.merged + r.superseded, 0);
      log(
        `turn p99 wall without ${f2(p99Without.wall)} ms, with ${f2(p99With.wall)} ms; cpu without ${f2(p99Without.cpu)} ms, with ${f2(p99With.cpu)} ms (${passesRan} of ${reports.length} passes ran, ${errors.length} failed)`,
      );
      if (errors.length) throw errors[0];

      const rows: Array<[string, string, string, boolean]> = [
        [
          `facts whose current value is not the last one written (${facts} facts, ${written} writes by ${PROCESSES} processes)`,
          String(lost),
          '0',
          lost === 0,
        ],
        ['ids a write returned that are no longer stored', String(missing), '0', missing === 0],
        [
          'facts with more than one current value after the final pass',
          String(ambiguous),
          '0',
          ambiguous === 0,
        ],
        ...(['cpu', 'wall'] as const).map((k): [string, string, string, boolean] => [
          `turn p99 ${k === 'cpu' ? "in this process's CPU time" : 'in wall time (moved by the load of other processes)'}: with a consolidation runner in the same process minus without (ms)`,
          `${f2(p99With[k] - p99Without[k])} (${f2(p99With[k])} vs ${f2(p99Without[k])}; ${(p99With[k] / p99Without[k]).toFixed(2)}x)`,
          '<= 5 ms',
          p99With[k] - p99Without[k] <= 5,
        ]),
      ];
      return {
        markdown: [
          `SQLite file, hashing embedder (default). **Lost updates:** ${PROCESSES} processes, each writing ${KEYS} facts (\`metadata.factKey\`) for ${ROUNDS} rounds — a new value by \`remember\` on even rounds (consolidation's to supersede), by \`supersede\` of the last one on odd rounds, and every third round the value again in capitals (consolidation's to merge) — each process running \`startConsolidation({ intervalMs: 20 })\` meanwhile. ${written} writes in ${writeS.toFixed(1)} s; passes run ${sum('ran')}, passes that found the lease held ${sum('leaseHeld')}; supersedes refused because consolidation had closed the version (then remembered) ${sum('refused')}. Then passes until one changes nothing (${passes}): ${all} versions stored, ${mergedCount} closed as duplicates, ${supersededCount} as superseded. **Turn p99:** a turn is \`recall\` (hybrid, limit 10) + \`remember\` over ${SEED_FACTS}+ memories, every other one a duplicate in capitals; ${BLOCKS} blocks of ${TURNS_PER_BLOCK} turns with a runner (\`intervalMs: 1\`, same process and store: ${passesRan} passes, ${closedInTurns} memories closed) alternated with ${BLOCKS} blocks without.`,
          '',
          '| measure | measured | target | |',
          '| --- | ---: | ---: | --- |',
          ...rows.map((r) => `| ${r[0]} | ${r[1]} | ${r[2]} | ${r[3] ? 'met' : '**missed**'} |`),
          '',
          `Turn wall time (ms): without p50 ${f2(percentile(without.wall, 50))}, p99 ${f2(p99Without.wall)}; with p50 ${f2(percentile(withRunner.wall, 50))}, p99 ${f2(p99With.wall)}. CPU time: without p50 ${f2(percentile(without.cpu, 50))}, with p50 ${f2(percentile(withRunner.cpu, 50))}. Load average when the suite ended: ${loadavg()[0]!.toFixed(1)} on ${availableParallelism()} cores.`,
        ].join('\n'),
      };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default suite;
