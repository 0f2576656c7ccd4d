// Runs LangGraph's own API end-to-end tests against `cairn serve`: api.test.mts on SQLite
// and on Postgres, auth.test.mts (its LangGraph Auth: JWT users, handlers that filter by
// owner) on SQLite.
//
// The tests are LangGraph's code and are never committed here: this script extracts
// libs/langgraph-api/tests (and src/auth, which auth.test.mts imports) from a langgraphjs
// mirror (a bare git directory; path from CAIRN_LANGGRAPH_MIRROR) at a pinned commit into a
// temporary directory, starts `cairn serve` on its test graphs at 127.0.0.1 on the port
// each file calls (2024, and 2025 for auth), runs them with vitest through
// @langchain/langgraph-sdk, and reports passed/failed per describe block.
// Without the mirror it skips, saying so; with CAIRN_REQUIRE_LANGGRAPH_API=1 that is a failure.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const here = dirname(fileURLToPath(import.meta.url));
const MIRROR = process.env.CAIRN_LANGGRAPH_MIRROR ?? '/work/.mirror/langchain-ai+langgraphjs/repo';
/** The langgraphjs commit whose tests run (libs/langgraph-api 1.4.5). */
const COMMIT = 'f8bdf16d4fe23a79e945ea5dc6f86bbf09abb77d';
/** The test files, the langgraph.json each runs on, the port it calls, and the stores it runs on. */
const SUITES = [
  { file: 'api.test.mts', config: 'graphs/langgraph.json', port: 2024, postgres: true },
  // Auth decides in the server, the same on every store: SQLite is enough.
  { file: 'auth.test.mts', config: 'graphs/langgraph.auth.json', port: 2025, postgres: false },
];
const CLI = join(here, 'node_modules/@cairn/cli/dist/bin.js');
const POSTGRES_URL = process.env.CAIRN_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Runs one statement on the Postgres test server; null when it cannot be reached. */
async function postgres(sql) {
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query(sql);
    return true;
  } catch (e) {
    if (client._connected) throw e;
    return null;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Tests that do not apply to `cairn serve`, by full name, and why. Any other test must pass.
 */
const STATIC_SCHEMA =
  "reads JSON schemas that the LangGraph API server extracts from the graph's TypeScript source with the TypeScript compiler (Annotation types); cairn serve reads schemas from the running graph (StateSchema, Zod), where an Annotation graph has none";
const NOT_APPLICABLE = {
  'assistants > schemas': STATIC_SCHEMA,
  'subgraphs > get subgraphs': STATIC_SCHEMA,
  'runtime API > schema': STATIC_SCHEMA,
  'generative ui':
    "langgraph.json's `ui` (React components bundled and served by the LangGraph CLI): cairn serve serves graphs, not UI bundles",
  'custom routes':
    "langgraph.json's `http.app` (a Hono app mounted into the LangGraph API server): not part of cairn serve",
  'custom routes - mutate request body': "langgraph.json's `http.app`: not part of cairn serve",
  'custom routes - langgraph': "langgraph.json's `http.app`: not part of cairn serve",
};
/**
 * The other test files of libs/langgraph-api/tests at COMMIT, and why they do not run: none
 * calls a server. They import the LangGraph API server's own modules and test those.
 */
const FILES_NOT_RUN = {
  'stream.test.mts': "unit tests of the server's streamState and omitUndefined (src/stream.mts)",
  'protocol-v2/multitask-strategy.test.mts':
    "unit tests of its normalizeMultitaskStrategy; the strategies themselves are api.test.mts's multitasking block, which runs",
  'protocol-v2/stream-sdk.test.mts':
    'the protocol v2 (streaming projections) against its own embedded Hono server: a protocol cairn serve does not serve',
  'protocol-transport.test.mts':
    'the protocol v2 WebSocket transport (/threads/:id/stream/events): a protocol cairn serve does not serve',
  'protocol-session.test.mts': 'unit tests of its RunProtocolSession (protocol v2)',
  'run-auth.test.mts':
    'unit tests of its applyAuthToRunConfig (what auth.test.mts checks through a server)',
  'persist.test.mts': 'unit tests of its in-memory storage serializer',
  'parser.test.mts': 'unit tests of its TypeScript schema parser',
  'embed.test.mts': 'unit tests of its embeddable Hono app',
  'semver.test.mts': 'unit tests of its version checks',
  'spawn-args.test.mts': 'unit tests of its CLI argument building',
};

/** Describe blocks none of whose tests apply, and why. */
const NOT_APPLICABLE_BLOCKS = {
  'auth filter matching':
    "unit tests of the LangGraph API server's own isAuthMatching function (imported from its source), not of a server",
};
const notApplicable = (name) => NOT_APPLICABLE[name] ?? NOT_APPLICABLE_BLOCKS[name.split(' > ')[0]];

/** Every test but those that do not apply (vitest matches a test's names joined by spaces). */
function applicablePattern() {
  const literal = (t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const names = [
    ...Object.keys(NOT_APPLICABLE).map((n) => literal(n.split(' > ').join(' '))),
    ...Object.keys(NOT_APPLICABLE_BLOCKS).map((n) => `${literal(n)} .*`),
  ];
  return `^(?!(${names.join('|')})$)`;
}

function log(line) {
  process.stdout.write(`${line}\n`);
}

/** `wanted` when 127.0.0.1 can bind it, else a free port (some machines hold 2024 on 0.0.0.0). */
async function choosePort(wanted) {
  const tryPort = (port) =>
    new Promise((resolve) => {
      const probe = createServer();
      probe.once('error', () => resolve(null));
      probe.listen(port, '127.0.0.1', () => {
        const { port: bound } = probe.address();
        probe.close(() => resolve(bound));
      });
    });
  return (await tryPort(wanted)) ?? (await tryPort(0));
}

/**
 * Extracts the tests at COMMIT into a new temporary directory with this package's
 * node_modules. Where a suite's port is taken here, its copy calls `ports[file]` instead
 * (the one change made to the tests).
 */
function extract(ports) {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-langgraph-api-'));
  const archive = execFileSync(
    'git',
    [
      `--git-dir=${MIRROR}`,
      'archive',
      COMMIT,
      'libs/langgraph-api/tests',
      'libs/langgraph-api/src/auth',
    ],
    {
      maxBuffer: 256 * 1024 * 1024,
    },
  );
  execFileSync('tar', ['x', '-C', dir], { input: archive });
  symlinkSync(join(here, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const tests = join(dir, 'libs/langgraph-api/tests');
  for (const suite of SUITES) {
    const port = ports[suite.file];
    if (port === suite.port) continue;
    const file = join(tests, suite.file);
    writeFileSync(
      file,
      readFileSync(file, 'utf8').replaceAll(`localhost:${suite.port}`, `localhost:${port}`),
    );
    log(
      `port ${suite.port} is taken on this machine: ${suite.file} calls cairn serve on port ${port}`,
    );
  }
  writeFileSync(
    join(tests, 'vitest.config.mjs'),
    `export default { test: { include: ${JSON.stringify(SUITES.map((s) => s.file))}, testTimeout: 30000, hookTimeout: 60000, fileParallelism: false } };\n`,
  );
  return { dir, tests };
}

async function waitForServer(child, output, port) {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  for (let i = 0; i < 1200; i++) {
    const code = await Promise.race([
      exited,
      new Promise((r) => setTimeout(() => r(undefined), 100)),
    ]);
    if (code !== undefined) throw new Error(`cairn serve exited with ${code}:\n${output()}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/ok`);
      if (res.ok) return;
    } catch {}
  }
  throw new Error(`cairn serve did not answer on /ok within 120 s:\n${output()}`);
}

/** Starts `cairn serve` on the suite's graphs and `db`, runs its tests, stops it; returns vitest's JSON report. */
async function runOn(label, db, tests, suite, port) {
  log(`\n== LangGraph API tests: ${suite.file} on ${label}`);
  const server = spawn(
    process.execPath,
    [
      CLI,
      'serve',
      '--config',
      join(tests, suite.config),
      '--db',
      db,
      '--port',
      String(port),
      '--host',
      '127.0.0.1',
      '--lease-ms',
      '5000',
      '--allow-truncate',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env } },
  );
  let serverLog = '';
  server.stdout.on('data', (d) => (serverLog += d));
  server.stderr.on('data', (d) => (serverLog += d));
  try {
    await waitForServer(server, () => serverLog, port);
    const report = join(tests, `report-${suite.file}-${label}.json`);
    const env = { ...process.env };
    // The tests spawn LangGraph's own server when CI is set; here `cairn serve` is the server.
    delete env.CI;
    const vitest = spawn(
      process.execPath,
      [
        join(here, 'node_modules/vitest/vitest.mjs'),
        'run',
        '--config',
        'vitest.config.mjs',
        suite.file,
        '--reporter=default',
        '--reporter=json',
        `--outputFile.json=${report}`,
        `--testNamePattern=${applicablePattern()}`,
      ],
      { cwd: tests, stdio: 'inherit', env },
    );
    await new Promise((resolve) => vitest.once('exit', resolve));
    if (!existsSync(report))
      throw new Error(`vitest wrote no report; cairn serve said:\n${serverLog}`);
    return JSON.parse(readFileSync(report, 'utf8'));
  } finally {
    server.kill('SIGTERM');
    await new Promise((resolve) =>
      server.exitCode !== null ? resolve() : server.once('exit', resolve),
    );
    if (process.env.CAIRN_SERVE_LOG) log(serverLog);
  }
}

/** Passed and failed per describe block; failures of tests that apply. */
function summarize(label, report) {
  const blocks = new Map();
  const unexpected = [];
  for (const file of report.testResults)
    for (const t of file.assertionResults) {
      const block = t.ancestorTitles[0] ?? '(top level)';
      const b = blocks.get(block) ?? { passed: 0, failed: 0, notApplicable: 0, skipped: 0 };
      const name = [...t.ancestorTitles, t.title].join(' > ');
      if (t.status === 'passed') b.passed++;
      else if (notApplicable(name)) b.notApplicable++;
      else if (t.status === 'failed') {
        b.failed++;
        unexpected.push(`${name}: ${(t.failureMessages?.[0] ?? '').split('\n')[0]}`);
      } else b.skipped++;
      blocks.set(block, b);
    }
  log(`\nLangGraph API tests on ${label}, per describe block:`);
  for (const [block, b] of blocks)
    log(
      `  ${block.padEnd(28)} ${b.passed} passed, ${b.failed} failed${b.notApplicable ? `, ${b.notApplicable} not applicable` : ''}${b.skipped ? `, ${b.skipped} skipped` : ''}`,
    );
  for (const u of unexpected) log(`  FAILED ${u}`);
  const seen = new Set();
  for (const file of report.testResults)
    for (const t of file.assertionResults) {
      const name = [...t.ancestorTitles, t.title].join(' > ');
      const key = NOT_APPLICABLE[name] ? name : t.ancestorTitles[0];
      if (notApplicable(name) && !seen.has(key)) {
        seen.add(key);
        log(`  not applicable: ${key}: ${notApplicable(name)}`);
      }
    }
  return unexpected.length;
}

async function main() {
  if (!existsSync(MIRROR)) {
    const message = `no langgraphjs mirror at ${MIRROR} (set CAIRN_LANGGRAPH_MIRROR): LangGraph's API tests skipped`;
    if (process.env.CAIRN_REQUIRE_LANGGRAPH_API === '1') throw new Error(message);
    log(message);
    return 0;
  }
  for (const [file, why] of Object.entries(FILES_NOT_RUN)) log(`not run: ${file}: ${why}`);
  const ports = {};
  for (const suite of SUITES) ports[suite.file] = await choosePort(suite.port);
  const { dir, tests } = extract(ports);
  const postgresUp = (await postgres('SELECT 1')) !== null;
  let failures = 0;
  try {
    for (const suite of SUITES) {
      const port = ports[suite.file];
      const label = `sqlite (${suite.file})`;
      const sqliteDir = mkdtempSync(join(tmpdir(), 'cairn-serve-'));
      try {
        failures += summarize(
          label,
          await runOn('sqlite', join(sqliteDir, 'serve.db'), tests, suite, port),
        );
      } finally {
        rmSync(sqliteDir, { recursive: true, force: true });
      }
      if (!suite.postgres) continue;
      if (!postgresUp) {
        const message = `no Postgres server at ${POSTGRES_URL}: LangGraph's API tests on Postgres skipped`;
        if (process.env.CAIRN_REQUIRE_POSTGRES === '1') throw new Error(message);
        log(message);
        continue;
      }
      const schema = `cairn_serve_${process.pid}_${Date.now()}`;
      const url = new URL(POSTGRES_URL);
      url.searchParams.set('schema', schema);
      try {
        failures += summarize(
          `postgres (${suite.file})`,
          await runOn('postgres', url.toString(), tests, suite, port),
        );
      } finally {
        await postgres(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return failures === 0 ? 0 : 1;
}

process.exitCode = await main().catch((e) => {
  log(`langgraph-api-tests: ${e.message}`);
  return 1;
});
