import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inspect } from 'node:util';
import { afterAll, describe, expect, it, vi } from 'vitest';

/**
 * Runs every ```ts block of a package's README as written, one test each, in a temporary
 * working directory (where an example's database file goes), and checks that each
 * `console.log(...); // output` line prints that output, as `node:util` `inspect` shows it.
 * The blocks are written next to the README, so they import what the package can (alias
 * the package's own name to its source in the vitest config).
 */
export function describeReadmeExamples(readme: URL, options: { minExamples: number }): void {
  const text = readFileSync(readme, 'utf8');
  const blocks = [...text.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const packageDir = dirname(fileURLToPath(readme));
  const cwd = process.cwd();
  const dir = mkdtempSync(join(tmpdir(), 'cairn-readme-'));

  afterAll(() => {
    process.chdir(cwd);
    rmSync(dir, { recursive: true, force: true });
  });

  describe('README examples', () => {
    it('has examples', () => expect(blocks.length).toBeGreaterThanOrEqual(options.minExamples));
    blocks.forEach((code, i) => {
      it(`example ${i + 1} runs and prints what its comments say`, async () => {
        const file = join(packageDir, `.readme-${i}.ts`);
        writeFileSync(file, code);
        const printed: string[] = [];
        const log = vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
          printed.push(
            args
              .map((a) => (typeof a === 'string' ? a : inspect(a, { breakLength: Infinity })))
              .join(' '),
          );
        });
        process.chdir(dir);
        try {
          await import(file);
        } finally {
          process.chdir(cwd);
          log.mockRestore();
          rmSync(file, { force: true });
        }
        const expected = [...code.matchAll(/console\.log\(.*\); \/\/ (.*)$/gm)].map((m) => m[1]);
        expect(expected.length).toBeGreaterThan(0);
        expect(printed).toEqual(expected);
      });
    });
  });
}
