import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterAll, describe, expect, it, vi } from 'vitest';

// Every ```ts block of the README runs as written (`@cairn/ai-sdk` is this package's
// source); each `console.log(...); // output` line must print that output.
const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
const cwd = process.cwd();
const dir = mkdtempSync(join(tmpdir(), 'cairn-ai-sdk-readme-'));

afterAll(() => {
  process.chdir(cwd);
  rmSync(dir, { recursive: true, force: true });
});

describe('README examples', () => {
  it('has examples', () => expect(blocks.length).toBeGreaterThanOrEqual(3));
  blocks.forEach((code, i) => {
    it(`example ${i + 1} runs and prints what its comments say`, async () => {
      const file = join(import.meta.dirname, `.readme-${i}.ts`);
      writeFileSync(file, code);
      const printed: string[] = [];
      const log = vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
        printed.push(
          args
            .map((a) => (typeof a === 'string' ? a : inspect(a, { breakLength: Infinity })))
            .join(' '),
        );
      });
      process.chdir(dir); // where the example's database file goes
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
