// The README's example is examples/agent.mjs verbatim, and it runs as written.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
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
