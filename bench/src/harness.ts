/**
 * A small benchmark harness. Every figure is a ratio against a baseline measured in the
 * same process, interleaved with the subject run by run, so that a noisy machine moves
 * both sides alike.
 */

export interface Measured {
  name: string;
  /** Median milliseconds per run. */
  medianMs: number;
  samples: number[];
}

export interface Case {
  name: string;
  /** One run. Its duration is measured; return a value to keep the work from being optimised away. */
  run: () => unknown | Promise<unknown>;
  /** Untimed, before each run (fresh tables, say). */
  before?: () => unknown | Promise<unknown>;
  /** Untimed, after each run. */
  after?: () => unknown | Promise<unknown>;
}

export interface CompareOptions {
  /** What is measured, as a row title. */
  name: string;
  baseline: Case;
  subject: Case;
  warmup?: number;
  runs?: number;
  /** The target as the issue states it, on the time ratio subject/baseline. */
  target?: { maxRatio: number; label?: string };
  /** Operations in one run, to print a rate. */
  ops?: number;
}

export interface Comparison {
  name: string;
  baseline: Measured;
  subject: Measured;
  /** subject median time / baseline median time. */
  ratio: number;
  ops?: number;
  target?: { maxRatio: number; label?: string };
  pass?: boolean;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

async function timeOnce(c: Case): Promise<number> {
  await c.before?.();
  const t0 = performance.now();
  await c.run();
  const ms = performance.now() - t0;
  await c.after?.();
  return ms;
}

/** Measures one case alone: `warmup` untimed runs, then the median of `runs`. */
export async function measure(c: Case, warmup = 2, runs = 7): Promise<Measured> {
  for (let i = 0; i < warmup; i++) await timeOnce(c);
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) samples.push(await timeOnce(c));
  return { name: c.name, medianMs: median(samples), samples };
}

/**
 * Measures a subject against its baseline, alternating them run by run.
 *
 * @example
 * ```ts
 * const row = await compare({
 *   name: 'applyUpdate, 50 fields',
 *   baseline: { name: 'object spread', run: () => ({ ...state, a: 1 }) },
 *   subject: { name: 'applyUpdate', run: () => applyUpdate(S, state, { a: 1 }) },
 *   target: { maxRatio: 10 },
 * });
 * ```
 */
export async function compare(o: CompareOptions): Promise<Comparison> {
  const warmup = o.warmup ?? 2;
  const runs = o.runs ?? 7;
  for (let i = 0; i < warmup; i++) {
    await timeOnce(o.baseline);
    await timeOnce(o.subject);
  }
  const b: number[] = [];
  const s: number[] = [];
  for (let i = 0; i < runs; i++) {
    // Alternate which side goes first so that neither always gets the warmer cache.
    if (i % 2 === 0) {
      b.push(await timeOnce(o.baseline));
      s.push(await timeOnce(o.subject));
    } else {
      s.push(await timeOnce(o.subject));
      b.push(await timeOnce(o.baseline));
    }
  }
  const baseline = { name: o.baseline.name, medianMs: median(b), samples: b };
  const subject = { name: o.subject.name, medianMs: median(s), samples: s };
  const ratio = subject.medianMs / baseline.medianMs;
  const row: Comparison = { name: o.name, baseline, subject, ratio };
  if (o.ops !== undefined) row.ops = o.ops;
  if (o.target) {
    row.target = o.target;
    row.pass = ratio <= o.target.maxRatio;
  }
  return row;
}

/** Repeats a synchronous function enough times that one run lasts a measurable while. */
export function loop(times: number, fn: () => unknown): () => unknown {
  return () => {
    let last: unknown;
    for (let i = 0; i < times; i++) last = fn();
    return last;
  };
}

const fmtMs = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms >= 1 ? ms.toFixed(2) : ms.toFixed(4));

/** Renders comparisons as a Markdown table. */
export function comparisonTable(rows: Comparison[]): string {
  const lines = [
    '| measure | baseline | baseline median ms | Cairn median ms | ratio (time) | target | |',
    '| --- | --- | ---: | ---: | ---: | --- | --- |',
  ];
  for (const r of rows) {
    const target = r.target ? (r.target.label ?? `<= ${r.target.maxRatio}x`) : '';
    const verdict = r.pass === undefined ? '' : r.pass ? 'met' : '**missed**';
    lines.push(
      `| ${r.name} | ${r.baseline.name} | ${fmtMs(r.baseline.medianMs)} | ${fmtMs(r.subject.medianMs)} | ${r.ratio.toFixed(3)}x | ${target} | ${verdict} |`,
    );
  }
  return lines.join('\n');
}

/** What a suite gives back: Markdown for its section of bench/REPORT.md. */
export interface SuiteResult {
  markdown: string;
}

/** A benchmark suite; `bench/src/suites/*.ts` each export one as default. */
export interface Suite {
  /** Short id, used by `pnpm bench -- --only <id>` and as the report section key. */
  id: string;
  title: string;
  run(log: (line: string) => void): Promise<SuiteResult>;
}
