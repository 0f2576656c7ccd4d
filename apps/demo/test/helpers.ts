import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const CLI = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
export const ARTIFACTS = fileURLToPath(new URL('../test-artifacts/', import.meta.url));

export function tempDir(prefix = 'cairn-demo-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the built CLI (dist/cli.js) in a child process, as `pnpm demo` does. */
export function runCli(
  args: string[],
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: {
        ...process.env,
        NO_COLOR: '1',
        CAIRN_CHAT_BASE_URL: '',
        CAIRN_CHAT_MODEL: '',
        // Fast and deterministic; one test runs the offline sentence encoder instead.
        CAIRN_DEMO_EMBEDDER: 'hashing',
        ...options.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`cli ${args.join(' ')} did not finish in time\n${stdout}\n${stderr}`));
    }, options.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** A CLI failure as the issue wants it: one line on stderr, no stack, exit code 1. */
export function expectOneLineError(result: CliResult, pattern: RegExp): void {
  const lines = result.stderr.trimEnd().split('\n');
  if (
    result.code !== 1 ||
    lines.length !== 1 ||
    !pattern.test(lines[0]!) ||
    /\n\s+at /.test(result.stderr)
  ) {
    throw new Error(
      `expected exit 1 and one line matching ${pattern}, got exit ${result.code}:\n${result.stderr}\n${result.stdout}`,
    );
  }
}

export const POSTGRES_URL =
  process.env.CAIRN_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
