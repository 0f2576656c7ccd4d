/**
 * One of several processes writing memories to one SQLite file while consolidation runs.
 * Spawned by the `memory-consolidation` suite.
 *
 *   node memory-writer.js <path> <writer> <keys> <rounds>
 *
 * Prints "ready", waits for "go" on stdin, then for `rounds` rounds writes a new value of
 * each of its `keys` facts (`metadata.factKey`, a later `validFrom` each round): by
 * `remember` on even rounds (a new memory the old one contradicts: consolidation's to
 * supersede), by `supersede` of the last one on odd rounds; and, every third round, the
 * same value again in other letter case (a duplicate: consolidation's to merge). Each
 * process also runs its own consolidation runner, so that runners of eight processes
 * compete for the lease. Prints one JSON line: the last value written of each fact,
 * every id a write returned, the writes refused, and the runner's passes.
 */
import { isCairnError } from '@cairn/core';
import { createMemory } from '@cairn/memory';
import { createSqliteStore } from '@cairn/store-sqlite';

const [path, writer, keyCount, roundCount] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
];
const keys = Array.from({ length: Number(keyCount) }, (_, k) => `w${writer}-k${k}`);
const rounds = Number(roundCount);
const store = createSqliteStore({ path }, { busyTimeoutMs: 60_000 });
const memory = createMemory({ store, agentId: 'assistant' });

process.stdout.write('ready\n');
await new Promise<void>((resolve) => {
  process.stdin.on('data', (d) => {
    if (String(d).includes('go')) resolve();
  });
});

let ran = 0;
let leaseHeld = 0;
const runner = memory.startConsolidation({
  intervalMs: 20,
  onReport: (r) => {
    if (r.ran) ran++;
    else leaseHeld++;
  },
});
const last = new Map<string, { id: string; text: string }>();
const written: string[] = [];
let refused = 0;
const base = Date.UTC(2026, 0, 1);
const t0 = performance.now();
for (let r = 0; r < rounds; r++) {
  for (const [k, key] of keys.entries()) {
    const text = `fact ${key} has value ${r}`;
    const validFrom = base + r * 86_400_000 + k;
    const prev = last.get(key);
    let m: { id: string } | undefined;
    if (prev && r % 2 === 1) {
      try {
        m = await memory.supersede(prev.id, { text, validFrom });
      } catch (e) {
        // Consolidation closed it meanwhile: what this process wanted still goes in.
        if (!isCairnError(e, 'CONFLICT')) throw e;
        refused++;
      }
    }
    m ??= await memory.remember({ text, validFrom, metadata: { factKey: key } });
    written.push(m.id);
    last.set(key, { id: m.id, text });
    if (r % 3 === 2) {
      const dup = await memory.remember(
        { text: text.toUpperCase(), validFrom, metadata: { factKey: key } },
        { allowDuplicate: true },
      );
      written.push(dup.id);
    }
  }
}
const ms = performance.now() - t0;
await runner.stop();
await store.close();
process.stdout.write(
  `${JSON.stringify({
    last: Object.fromEntries([...last].map(([k, v]) => [k, v.text])),
    written,
    refused,
    ran,
    leaseHeld,
    ms,
  })}\n`,
);
process.exit(0);
