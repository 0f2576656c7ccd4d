// Runs LangGraph's own graph-execution suite (`runPregelTests` of
// libs/langgraph-core/src/tests/pregel.test.ts) with CairnSaver on the in-memory, SQLite and
// Postgres stores and with MemorySaver under the same set-up, and fails on any test that
// fails with CairnSaver but passes with MemorySaver.
//
// The suite is LangGraph's code and is never committed here: this script extracts
// libs/langgraph-core/src from a langgraphjs mirror (a bare git directory; path from
// CAIRN_LANGGRAPH_MIRROR) at a pinned commit into a temporary directory, whose node_modules are
// this package's: the suite's LangGraph runs on the @langchain/langgraph-checkpoint and
// @langchain/core instances CairnSaver uses (checked when the tests load). Without the mirror
// it skips, saying so; with CAIRN_REQUIRE_LANGGRAPH_PREGEL=1 that is a failure.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const MIRROR = process.env.CAIRN_LANGGRAPH_MIRROR ?? '/work/.mirror/langchain-ai+langgraphjs/repo';
/** The langgraphjs commit whose suite runs (@langchain/langgraph 1.4.12). */
const COMMIT = 'f8bdf16d4fe23a79e945ea5dc6f86bbf09abb77d';

/**
 * Tests where CairnSaver differs from MemorySaver on purpose, by full name, and why.
 * Any other test that passes with MemorySaver must pass with CairnSaver.
 */
const DIFFERENT_ON_PURPOSE = {
  'Channel > obtain correct channel values from checkpointer':
    "reads a raw checkpoint's channel_values, where MemorySaver keeps the unversioned `__pregel_tasks: []`; CairnSaver, like PostgresSaver, stores only versioned channels (packages/langgraph README, test/pregel-cases.test.ts)",
};

/** The savers, each one test file: [file, how the file makes a checkpointer]. */
const SAVERS = {
  MemorySaver: `
import { MemorySaver } from '@langchain/langgraph-checkpoint';
runPregelTests(() => new MemorySaver());
`,
  'CairnSaver on the in-memory store': `
import { createMemoryStore } from '@cairn/store';
const stores = [];
runPregelTests(
  () => { const s = createMemoryStore(); stores.push(s); return new CairnSaver(s); },
  () => Promise.all(stores.map((s) => s.close())),
);
`,
  'CairnSaver on SQLite': `
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '@cairn/store-sqlite';
const dir = mkdtempSync(join(tmpdir(), 'cairn-pregel-'));
const stores = [];
let n = 0;
runPregelTests(
  () => { const s = createSqliteStore({ path: join(dir, \`\${++n}.db\`) }); stores.push(s); return new CairnSaver(s); },
  async () => { for (const s of stores) await s.close(); rmSync(dir, { recursive: true, force: true }); },
);
`,
  'CairnSaver on Postgres': `
import { createPostgresStore } from '@cairn/store-postgres';
import { dropSchema, freshSchema, POSTGRES_TEST_URL } from '@cairn/store-postgres/testing';
// Each test makes a checkpointer, none is closed: only the newest few keep their connections.
const opened = [];
const closeOne = async () => { const [s, schema] = opened.shift(); await s.close(); await dropSchema(schema); };
runPregelTests(
  async () => {
    while (opened.length >= 4) await closeOne();
    const schema = freshSchema('pregel');
    const s = await createPostgresStore({ connectionString: POSTGRES_TEST_URL }, { schema });
    opened.push([s, schema]);
    return new CairnSaver(s);
  },
  async () => { while (opened.length > 0) await closeOne(); },
);
`,
};

/** What every test file starts with: the suite, CairnSaver, and the check that they share classes. */
const PRELUDE = `
import { createRequire } from 'node:module';
import { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { Runnable } from '@langchain/core/runnables';
import { CairnSaver } from '@cairn/langgraph';
import { runPregelTests } from './pregel.test.js';
import { Pregel } from '../pregel/index.js';
{
  // One instance of each: CairnSaver's checkpoint package is the suite's, and so is its core.
  const cairn = createRequire(createRequire(import.meta.url).resolve('@cairn/langgraph'));
  const own = createRequire(import.meta.url);
  for (const pkg of ['@langchain/langgraph-checkpoint', '@langchain/core/runnables']) {
    if (cairn.resolve(pkg) !== own.resolve(pkg))
      throw new Error(\`\${pkg}: the suite loads \${own.resolve(pkg)}, CairnSaver \${cairn.resolve(pkg)}\`);
  }
  if (!(Object.create(CairnSaver.prototype) instanceof BaseCheckpointSaver))
    throw new Error('CairnSaver does not extend the suite\\'s BaseCheckpointSaver');
  if (!(Pregel.prototype instanceof Runnable))
    throw new Error('the suite\\'s Pregel does not extend the @langchain/core Runnable CairnSaver uses');
}
`;

function log(line) {
  process.stdout.write(`${line}\n`);
}

function extract() {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-langgraph-pregel-'));
  const archive = execFileSync(
    'git',
    [`--git-dir=${MIRROR}`, 'archive', COMMIT, 'libs/langgraph-core/src'],
    { maxBuffer: 256 * 1024 * 1024 },
  );
  execFileSync('tar', ['x', '-C', dir], { input: archive });
  symlinkSync(join(here, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const root = join(dir, 'libs/langgraph-core');
  const files = {};
  for (const [i, [saver, body]] of Object.entries(SAVERS).entries()) {
    const file = `src/tests/cairn-saver-${i}.test.ts`;
    files[file] = saver;
    writeFileSync(join(root, file), `${PRELUDE}${body}`);
  }
  writeFileSync(
    join(root, 'vitest.config.mjs'),
    `export default { test: { include: ${JSON.stringify(Object.keys(files))}, globals: true, setupFiles: ['./src/tests/setup.node.ts', './src/tests/matchers/setup.ts'], testTimeout: 30000, hookTimeout: 60000, fileParallelism: true, maxWorkers: 4 } };\n`,
  );
  return { dir, root, files };
}

async function main() {
  if (!existsSync(MIRROR)) {
    const message = `LangGraph's pregel suite skipped: no langgraphjs mirror at ${MIRROR} (set CAIRN_LANGGRAPH_MIRROR)`;
    if (process.env.CAIRN_REQUIRE_LANGGRAPH_PREGEL === '1') {
      log(`${message}, and CAIRN_REQUIRE_LANGGRAPH_PREGEL=1 requires it`);
      process.exit(1);
    }
    log(message);
    return;
  }
  const { dir, root, files } = extract();
  try {
    const report = join(root, 'report.json');
    const vitest = spawn(
      process.execPath,
      [
        join(here, 'node_modules/vitest/vitest.mjs'),
        'run',
        '--config',
        'vitest.config.mjs',
        '--reporter=dot',
        '--reporter=json',
        `--outputFile.json=${report}`,
      ],
      { cwd: root, stdio: 'inherit', env: { ...process.env } },
    );
    await new Promise((resolve) => vitest.once('exit', resolve));
    if (!existsSync(report)) throw new Error('vitest wrote no report');
    const { testResults } = JSON.parse(readFileSync(report, 'utf8'));
    const bySaver = new Map();
    for (const file of testResults) {
      const saver = Object.entries(files).find(([f]) => file.name.endsWith(f))?.[1];
      if (!saver) continue;
      const results = new Map();
      for (const t of file.assertionResults) {
        results.set([...t.ancestorTitles, t.title].join(' > '), t.status);
      }
      // A file that failed to load has no tests: its message says why.
      if (results.size === 0) throw new Error(`${saver}: ${file.message || 'no tests ran'}`);
      bySaver.set(saver, results);
    }
    const reference = bySaver.get('MemorySaver');
    if (!reference || bySaver.size !== Object.keys(SAVERS).length)
      throw new Error(`not every saver ran: ${[...bySaver.keys()].join(', ')}`);
    const unexpected = [];
    log("\n== LangGraph's pregel suite (langgraphjs f8bdf16d4, @langchain/langgraph 1.4.12)");
    for (const [saver, results] of bySaver) {
      const count = (s) => [...results.values()].filter((v) => v === s).length;
      let onPurpose = 0;
      for (const [name, status] of results) {
        if (status !== 'failed' || reference.get(name) !== 'passed') continue;
        if (DIFFERENT_ON_PURPOSE[name]) onPurpose++;
        else unexpected.push(`${saver}: ${name}`);
      }
      if (process.env.CAIRN_PREGEL_VERBOSE)
        for (const [name, status] of results) if (status !== 'passed') log(`  ${status}: ${name}`);
      log(
        `${saver}: ${count('passed')} passed, ${count('failed')} failed (${onPurpose} on purpose), ${count('skipped') + count('pending') + count('todo')} skipped`,
      );
    }
    for (const [name, why] of Object.entries(DIFFERENT_ON_PURPOSE))
      log(`on purpose: ${name}: ${why}`);
    if (unexpected.length > 0) {
      log(`\nFailing with CairnSaver, passing with MemorySaver:\n  ${unexpected.join('\n  ')}`);
      process.exitCode = 1;
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
