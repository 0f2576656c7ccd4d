import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { cairn } from './support.js';

const BIN = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
const AGENT = createRequire(import.meta.url).resolve('@cairn/server/examples/agent.mjs');

describe('cairn serve off loopback', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-cli-serve-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const config = (auth: boolean) => {
    const file = join(dir, auth ? 'with-auth.json' : 'no-auth.json');
    writeFileSync(
      file,
      JSON.stringify({
        graphs: { agent: `${AGENT}:graph` },
        ...(auth ? { auth: { path: './auth.mjs:authenticate' } } : {}),
      }),
    );
    return file;
  };
  writeFileSync(
    join(dir, 'auth.mjs'),
    "export const authenticate = (req) => (req.headers.authorization === 'Bearer t' ? 'ada' : null);\n",
  );

  it('refuses without auth, before it opens the database', async () => {
    const db = join(dir, 'refused.db');
    const r = await cairn(['serve', '--config', config(false), '--db', db, '--host', '0.0.0.0']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('--host 0.0.0.0 lets other machines call the server');
    expect(existsSync(db)).toBe(false);
  });

  it("serves with langgraph.json's auth.path and no --token", async () => {
    const child = spawn(
      process.execPath,
      [
        BIN,
        'serve',
        '--config',
        config(true),
        '--db',
        join(dir, 'served.db'),
        '--host',
        '0.0.0.0',
        '--port',
        '0',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stderr.on('data', (d) => (out += d));
    const line = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (d) => {
        out += d;
        if (out.includes('\n')) resolve(out);
      });
      child.once('exit', (code) => reject(new Error(`cairn serve exited with ${code}: ${out}`)));
    });
    expect(line).toMatch(/^serving agent on .* at http:\/\/0\.0\.0\.0:\d+ \(auth required\)/);
    const port = /:(\d+) \(auth required\)/.exec(line)![1];
    expect(
      (await fetch(`http://127.0.0.1:${port}/threads/search`, { method: 'POST' })).status,
    ).toBe(401);
    const ok = await fetch(`http://127.0.0.1:${port}/threads/search`, {
      method: 'POST',
      headers: { authorization: 'Bearer t' },
    });
    expect(ok.status).toBe(200);
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  });
});
