import { type ChildProcess, spawn } from 'node:child_process';

/**
 * Starts one Node process per argument list on `script`, waits until each has printed
 * "ready", sends them all "go" at once, and resolves with the JSON line each prints last
 * (rejecting when one exits with an error). `whileRunning`, when given, runs once they
 * have all been sent "go", and may send each of them a line of its own.
 */
export async function runProcesses<R>(
  script: string,
  argLists: string[][],
  whileRunning?: (send: (line: string) => void) => Promise<void>,
): Promise<R[]> {
  const children: ChildProcess[] = [];
  const results: Promise<R>[] = [];
  const ready: Promise<void>[] = [];
  for (const args of argLists) {
    const child = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    children.push(child);
    let out = '';
    let err = '';
    child.stderr!.on('data', (d) => {
      err += d;
    });
    let onReady!: () => void;
    let onFailed!: (e: Error) => void;
    ready.push(
      new Promise<void>((resolve, reject) => {
        onReady = resolve;
        onFailed = reject;
      }),
    );
    child.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('ready')) onReady();
    });
    results.push(
      new Promise((resolve, reject) =>
        child.on('exit', (code) => {
          const failed = new Error(`${script} exited with ${code}: ${err}`);
          onFailed(failed);
          if (code !== 0) reject(failed);
          else resolve(JSON.parse(out.slice(out.indexOf('{'))) as R);
        }),
      ),
    );
  }
  try {
    await Promise.all(ready);
  } catch (e) {
    for (const c of children) c.kill();
    await Promise.allSettled(results);
    throw e;
  }
  for (const c of children) c.stdin!.write('go\n');
  if (whileRunning) {
    try {
      await whileRunning((line) => {
        for (const c of children) c.stdin!.write(`${line}\n`);
      });
    } catch (e) {
      for (const c of children) c.kill();
      await Promise.allSettled(results);
      throw e;
    }
  }
  return Promise.all(results);
}
