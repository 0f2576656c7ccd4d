import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineState, field, reducers } from '@cairn/core';
import type { Store } from '@cairn/store';
import { openThread } from '../src/index.js';

const worker = join(dirname(fileURLToPath(import.meta.url)), 'children', 'append-worker.mjs');
export const Items = defineState({
  items: field<string[]>({ reducer: reducers.appendUnique, default: () => [] }),
});

function runChild(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [worker, ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d) => {
      err += String(d);
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`writer exited with ${code}: ${err}`)),
    );
  });
}

/**
 * Runs `processes` writer processes that each append `perProcess` distinct items to one
 * thread's state, and returns the thread's state and commit versions as read afterwards.
 */
export async function appendFromProcesses(
  store: Store,
  child: { kind: 'sqlite' | 'postgres'; target: string; schema?: string },
  processes: number,
  perProcess: number,
): Promise<{ items: string[]; versions: number[] }> {
  const thread = await openThread(store, { schema: Items });
  await Promise.all(
    Array.from({ length: processes }, (_, w) =>
      runChild([
        child.kind,
        child.target,
        child.schema ?? '',
        thread.id,
        String(w),
        String(perProcess),
      ]),
    ),
  );
  const reread = await openThread(store, { schema: Items, threadId: thread.id });
  const versions = (await store.getStateCommits(reread.branchId)).map((c) => c.version);
  return { items: reread.state.items, versions };
}
