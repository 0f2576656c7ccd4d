// The README's example is examples/agent.mjs verbatim, and it runs as written.
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { afterAll, expect, it } from 'vitest';
import { removeTempDirs, tempDir } from './stores.js';

afterAll(removeTempDirs);
const root = join(import.meta.dirname, '..');

it('runs the README example as written', () => {
  const example = readFileSync(join(root, 'examples/agent.mjs'), 'utf8');
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  expect(readme).toContain(`\`\`\`js\n${example}\`\`\``);
  const path = join(tempDir(), 'agent.db');
  const out = execFileSync(process.execPath, [join(root, 'examples/agent.mjs'), path], {
    encoding: 'utf8',
  });
  const printed = readme.split('It prints:\n\n```\n')[1]!.split('```')[0]!;
  expect(out).toBe(printed.replace('cairn inspect agent.db', `cairn inspect ${path}`));
}, 60_000);

it("runs the README's prune example as written and prints what it says", () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const section = readme.split('## Prune old checkpoints\n')[1]!;
  const code = section.split('```ts\n')[1]!.split('```')[0]!;
  const printed = section.split('It prints:\n\n```\n')[1]!.split('```')[0]!;
  // The example is plain JavaScript: run it from the package, where '@cairn/langgraph' resolves.
  const file = join(root, `.readme-prune-${process.pid}.mjs`);
  writeFileSync(file, code);
  try {
    expect(execFileSync(process.execPath, [file], { encoding: 'utf8' })).toBe(printed);
  } finally {
    rmSync(file, { force: true });
  }
}, 60_000);

it("runs the README's schema migration example as written and prints what it says", () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const section = readme.split("## Change the state's shape: versions and migrations\n")[1]!;
  const code = section.split('```ts\n')[1]!.split('```')[0]!;
  const printed = section.split('It prints:\n\n```\n')[1]!.split('```')[0]!;
  // TypeScript (the state's annotations are typed): its types stripped, as tsx would.
  const js = ts.transpileModule(code, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  const file = join(root, `.readme-schema-${process.pid}.mjs`);
  writeFileSync(file, js);
  try {
    expect(execFileSync(process.execPath, [file], { encoding: 'utf8' })).toBe(printed);
  } finally {
    rmSync(file, { force: true });
  }
}, 60_000);
