/**
 * Runs the benchmark suites and writes their sections into bench/REPORT.md.
 *
 *   pnpm bench                      every suite
 *   pnpm bench -- --only core,sqlite  just those (other sections of the report are kept)
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Suite } from './harness.js';

const here = dirname(fileURLToPath(import.meta.url));
const reportPath = join(here, '..', 'REPORT.md');

function parseOnly(argv: string[]): Set<string> | null {
  const i = argv.indexOf('--only');
  if (i < 0) return null;
  return new Set((argv[i + 1] ?? '').split(',').filter(Boolean));
}

async function loadSuites(): Promise<Suite[]> {
  const dir = join(here, 'suites');
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.js'))
    .sort();
  const suites: Suite[] = [];
  for (const f of files) {
    const mod = (await import(pathToFileURL(join(dir, f)).href)) as { default: Suite };
    suites.push(mod.default);
  }
  return suites;
}

function readSections(): Map<string, string> {
  const sections = new Map<string, string>();
  if (!existsSync(reportPath)) return sections;
  const text = readFileSync(reportPath, 'utf8');
  const re = /<!-- suite:([\w-]+) -->\n([\s\S]*?)<!-- \/suite:\1 -->/g;
  for (const m of text.matchAll(re)) sections.set(m[1]!, m[2]!);
  return sections;
}

async function main() {
  const only = parseOnly(process.argv.slice(2));
  const suites = await loadSuites();
  for (const suite of suites) {
    if (only && !only.has(suite.id)) continue;
    console.log(`\n== ${suite.title} (${suite.id})`);
    const started = performance.now();
    const result = await suite.run((line) => console.log(`  ${line}`));
    const secs = ((performance.now() - started) / 1000).toFixed(1);
    console.log(result.markdown);
    const when = new Date().toISOString().slice(0, 16).replace('T', ' ');
    // Re-read just before writing: other runs (of other suites) may have written meanwhile.
    const sections = readSections();
    sections.set(
      suite.id,
      `## ${suite.title}\n\n_Measured ${when} UTC in ${secs} s with \`pnpm bench -- --only ${suite.id}\`._\n\n${result.markdown.trim()}\n\n`,
    );
    writeReport(suites, sections);
  }
  console.log(`\nwrote ${reportPath}`);
}

function writeReport(suites: Suite[], sections: Map<string, string>) {
  // Sections of suites this build does not know (written by a newer checkout) are kept too.
  const known = suites.map((s) => s.id);
  const others = [...sections.keys()].filter((id) => !known.includes(id)).sort();
  const order = [...known.filter((id) => sections.has(id)), ...others];
  const body = order
    .map((id) => `<!-- suite:${id} -->\n${sections.get(id)}<!-- /suite:${id} -->`)
    .join('\n\n');
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  writeFileSync(
    reportPath,
    `# Cairn benchmarks\n\nEvery figure is a ratio against a baseline run in the same process, run by run\n(median of several runs after warm-up), because these machines are noisy. A time ratio\nbelow 1 means Cairn was faster than its baseline. Machine of the last run: ${os.cpus().length} x ${cpu},\nNode ${process.version}. Regenerate everything with \`pnpm bench\`.\n\n${body}\n`,
  );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
