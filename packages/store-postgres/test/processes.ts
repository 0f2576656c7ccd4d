import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** Runs a fixture script in a child process; resolves with its stdout, rejects on a non-zero exit. */
export function runFixture(name: string, args: string[]): Promise<string> {
  const script = fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      err += d;
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0) resolve(out.trim());
      else reject(new Error(`${name} exited with ${code}: ${err.trim()}`));
    });
  });
}
