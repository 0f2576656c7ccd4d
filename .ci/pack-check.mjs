// The pack check: what a user gets from npm, checked as a user would meet it.
//
// 1. Packs every public workspace package (found by .ci/packages.mjs, so new packages are
//    checked without being listed) and checks each tarball with publint and
//    @arethetypeswrong/cli, then its contents: LICENSE, source maps whose sources ship,
//    README links and paths that exist in the tarball.
// 2. Installs all tarballs together with npm into a fresh project outside the workspace,
//    with every peer dependency at the newest version its range admits, and fails on a peer
//    warning. better-sqlite3 is not compiled a second time: the workspace's binary is handed
//    to its installer as a local prebuild (npm_config_better_sqlite3_local_prebuilds).
// 3. import()s and require()s every export of every package there.
// 4. Extracts every TypeScript example from every README, type-checks them all with
//    strict, noUncheckedIndexedAccess and exactOptionalPropertyTypes, and runs each one, one
//    after another in one directory (a `name.test.ts` block runs under vitest).
//
// Usage: node .ci/pack-check.mjs [--keep]   (the packages must be built: pnpm build)
// Examples that read DATABASE_URL get a database of their own on the server at
// CAIRN_POSTGRES_URL; without a server they are skipped unless CAIRN_REQUIRE_POSTGRES=1.
// Examples that read MODEL_DIR get the tiny sentence model @cairn/embedder-transformers'
// tests write (no model hub is reachable from CI).
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, join, posix } from 'node:path';
import { pathToFileURL } from 'node:url';
import { publicPackages, root, workspacePackages } from './packages.mjs';

const keep = process.argv.includes('--keep');
/**
 * Packages this check leaves out, each with what has to change first. Keep it empty: a
 * package listed here is not known to install or to have a README that runs.
 */
const NOT_YET_CHECKED = {};
const started = Date.now();
const failures = [];
const log = (msg) =>
  console.log(`[pack-check ${((Date.now() - started) / 1000).toFixed(0)}s] ${msg}`);
const fail = (msg) => {
  failures.push(msg);
  console.error(`  FAIL ${msg}`);
};

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  return { status: r.status ?? 1, out: `${r.stdout ?? ''}${r.stderr ?? ''}`, signal: r.signal };
}

function runAsync(cmd, args, opts = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, ...opts });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    child.on('close', (status) => resolve({ status: status ?? 1, out }));
  });
}

async function inParallel(limit, items, fn) {
  const queue = [...items];
  const worker = async () => {
    while (queue.length > 0) await fn(queue.shift());
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

const work = mkdtempSync(join(tmpdir(), 'cairn-pack-'));
if (work.startsWith(`${root}/`)) throw new Error('the fresh project must be outside the workspace');
const tarballs = join(work, 'tarballs');
const app = join(work, 'app');
mkdirSync(tarballs);
mkdirSync(app);
let database = null;

try {
  const packages = publicPackages().filter((p) => {
    const reason = NOT_YET_CHECKED[p.manifest.name];
    if (reason) log(`NOT CHECKED ${p.manifest.name}: ${reason}`);
    return !reason;
  });
  const names = new Set(packages.map((p) => p.manifest.name));
  log(`${packages.length} packages: ${[...names].join(', ')}`);

  // 1. Pack every package, check what each tarball holds, then publint and attw (two at a time).
  for (const pkg of packages) {
    if (!existsSync(join(root, pkg.dir, 'dist')))
      throw new Error(`${pkg.dir} is not built: run pnpm build first`);
  }
  // One pnpm run packs them all (it turns workspace: ranges into versions).
  execFileSync(
    'pnpm',
    [
      '-r',
      ...packages.flatMap((p) => ['--filter', `./${p.dir}`]),
      'pack',
      '--pack-destination',
      tarballs,
    ],
    { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  for (const pkg of packages) {
    const { name, version } = pkg.manifest;
    pkg.tarball = join(tarballs, `${name.replace(/^@/, '').replace('/', '-')}-${version}.tgz`);
    if (!existsSync(pkg.tarball)) throw new Error(`pnpm pack made no ${basename(pkg.tarball)}`);
    const files = new Set(
      execFileSync('tar', ['-tzf', pkg.tarball], { encoding: 'utf8' })
        .split('\n')
        .filter(Boolean)
        .map((f) => f.replace(/^package\//, '')),
    );
    const unpacked = join(work, 'unpacked', pkg.manifest.name);
    mkdirSync(unpacked, { recursive: true });
    execFileSync('tar', ['-xzf', pkg.tarball, '-C', unpacked, '--strip-components=1']);
    checkContents(pkg.manifest.name, files, unpacked);
  }
  log(`packed ${packages.length} tarballs; running publint and attw`);
  const bin = (name) => join(root, 'node_modules/.bin', name);
  await inParallel(2, packages, async (pkg) => {
    const name = pkg.manifest.name;
    const publint = await runAsync(bin('publint'), ['--strict', pkg.tarball]);
    if (publint.status !== 0 || !/All good/.test(publint.out))
      fail(`${name}: publint\n${publint.out}`);
    // ESM only by design: Node 20.19+ require()s it (checked for real below), so the rule
    // about CommonJS resolving to ESM does not apply, nor TypeScript's node10 resolution
    // (it predates `exports` and cannot see subpaths); every other rule does.
    const attw = await runAsync(bin('attw'), [
      pkg.tarball,
      '--format',
      'ascii',
      '--ignore-rules',
      'cjs-resolves-to-esm',
      '--profile',
      'node16',
    ]);
    if (attw.status !== 0) fail(`${name}: @arethetypeswrong/cli\n${attw.out}`);
    log(`${name}: publint and attw done`);
  });

  // 2. One fresh project with every tarball and every peer dependency.
  const examples = extractExamples(packages);
  const deps = dependenciesFor(packages, examples);
  writeFileSync(
    join(app, 'package.json'),
    `${JSON.stringify({ name: 'cairn-pack-check', private: true, type: 'module' }, null, 2)}\n`,
  );
  // onnxruntime-node's install script would download CUDA libraries (from NuGet, which CI
  // cannot reach); the CPU runtime ships in its npm package.
  const env = { ...process.env, ...prebuildEnv(packages), ONNXRUNTIME_NODE_INSTALL: 'skip' };
  const specs = [
    ...packages.map((p) => p.tarball),
    ...Object.entries(deps).map(([n, r]) => `${n}@${r}`),
  ];
  log(`npm install ${specs.map((s) => (s.endsWith('.tgz') ? basename(s) : s)).join(' ')}`);
  const install = run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=warn', ...specs], {
    cwd: app,
    env,
  });
  process.stdout.write(install.out.replace(/^npm warn Unknown user config "nodedir".*\n/gm, ''));
  if (install.status !== 0) throw new Error('npm install of the tarballs failed');
  const peerWarnings = install.out
    .split('\n')
    .filter((l) => /ERESOLVE|peer dep|conflicting peer/i.test(l));
  if (peerWarnings.length > 0)
    fail(`npm install warned about peer dependencies:\n${peerWarnings.join('\n')}`);
  const bs3 = join(app, 'node_modules/better-sqlite3/build/Release');
  if (existsSync(bs3)) {
    log(
      existsSync(join(bs3, 'obj.target'))
        ? 'better-sqlite3 was compiled from source'
        : 'better-sqlite3: prebuilt binary reused',
    );
  }
  log('installed');

  // 3. Every export, through import and through require.
  for (const pkg of packages) checkEntryPoints(pkg.manifest);
  log('import and require of every export done');

  // 4. README examples: type-check all, then run each.
  checkExamples(examples, { ...env, ...(await modelEnv(examples)) });
} catch (e) {
  fail(e instanceof Error ? e.message : String(e));
} finally {
  if (database) dropDatabase(database);
  if (keep) log(`kept ${work}`);
  else rmSync(work, { recursive: true, force: true });
}

if (failures.length > 0) {
  console.error(`\npack check: ${failures.length} failure(s)`);
  process.exit(1);
}
log('pack check passed');

// ---------------------------------------------------------------------------------------

/** LICENSE, source maps whose sources ship, README references that exist in the tarball. */
function checkContents(name, files, unpacked) {
  if (!files.has('LICENSE')) fail(`${name}: the tarball has no LICENSE`);
  const manifest = readFileSync(join(unpacked, 'package.json'), 'utf8');
  if (manifest.includes('workspace:'))
    fail(`${name}: the packed package.json still says workspace:`);
  if (!files.has('README.md')) fail(`${name}: the tarball has no README.md`);
  for (const f of files) {
    if (/(^|\/)(test|__tests__)\/|\.test\.[cm]?[jt]s$/.test(f))
      fail(`${name}: the tarball holds a test file, ${f}`);
    if (!f.endsWith('.map')) continue;
    const map = JSON.parse(readFileSync(join(unpacked, f), 'utf8'));
    for (const [i, source] of (map.sources ?? []).entries()) {
      const target = posix.normalize(posix.join(posix.dirname(f), map.sourceRoot ?? '', source));
      if (!files.has(target) && !map.sourcesContent?.[i]) {
        fail(`${name}: ${f} points at ${source}, which is not in the tarball`);
      }
    }
  }
  const readme = files.has('README.md') ? readFileSync(join(unpacked, 'README.md'), 'utf8') : '';
  const prose = readme.replace(/```[\s\S]*?```/g, '');
  for (const [, target] of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z]+:|^#/.test(target)) continue;
    const path = posix.normalize(target.split('#')[0]);
    if (!files.has(path) && ![...files].some((f) => f.startsWith(`${path}/`))) {
      fail(`${name}: README links to ${target}, which is not in the tarball`);
    }
  }
  for (const [, path] of prose.matchAll(
    /`((?:\.{0,2}\/)?[\w.-]+(?:\/[\w.-]+)+\.(?:ts|js|mjs|md|json))`/g,
  )) {
    if (!files.has(posix.normalize(path)))
      fail(`${name}: README mentions ${path}, which is not in the tarball`);
  }
}

/** TypeScript code blocks of every package README: ```ts [file-name]. */
function extractExamples(packages) {
  const examples = [];
  for (const pkg of packages) {
    const readme = join(root, pkg.dir, 'README.md');
    if (!existsSync(readme)) continue;
    const text = readFileSync(readme, 'utf8');
    let index = 0;
    for (const m of text.matchAll(/^```(ts|typescript|tsx)(?:[ \t]+([^\n]*))?\n([\s\S]*?)^```/gm)) {
      index += 1;
      const line = text.slice(0, m.index).split('\n').length;
      const named = m[2]?.trim().match(/^[\w.-]+\.tsx?$/)?.[0];
      const file = named ?? `${basename(pkg.dir)}-${index}.ts`;
      examples.push({
        package: pkg.manifest.name,
        where: `${pkg.dir}/README.md:${line}`,
        file,
        code: m[3],
      });
    }
  }
  const seen = new Set();
  for (const ex of examples) {
    if (seen.has(ex.file)) throw new Error(`two README examples are named ${ex.file}`);
    seen.add(ex.file);
  }
  return examples;
}

/** Bare module names a piece of code imports (static and dynamic). */
function importsOf(code) {
  const specs = new Set();
  for (const m of code.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)['"]([^'"]+)['"]/g)) {
    const spec = m[1];
    if (spec.startsWith('.') || spec.startsWith('node:')) continue;
    specs.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]);
  }
  return specs;
}

/**
 * What the fresh project installs besides the tarballs: every peer dependency of every
 * package (the newest version its range admits, as npm would pick for a user), what the
 * examples import that no tarball provides (the range a workspace package declares), the
 * workspace's better-sqlite3 (so its binary can be reused), TypeScript and @types/node.
 */
function dependenciesFor(packages, examples) {
  const names = new Set(packages.map((p) => p.manifest.name));
  const workspace = workspacePackages().map((p) => p.manifest);
  const declared = (dep) => {
    for (const m of [...packages.map((p) => p.manifest), ...workspace]) {
      for (const field of ['dependencies', 'peerDependencies', 'devDependencies']) {
        const range = m[field]?.[dep];
        if (range && !range.startsWith('workspace:')) return range;
      }
    }
    return JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).devDependencies?.[dep];
  };
  const deps = {};
  for (const { manifest } of packages) {
    for (const [dep, range] of Object.entries(manifest.peerDependencies ?? {})) {
      if (!names.has(dep)) deps[dep] = range;
    }
  }
  for (const ex of examples) {
    for (const dep of importsOf(ex.code)) {
      if (names.has(dep) || deps[dep]) continue;
      const range = declared(dep);
      if (!range)
        throw new Error(`${ex.where}: the example imports ${dep}, which no package declares`);
      deps[dep] = range;
    }
  }
  // Type declarations the workspace uses for a module the examples import (pg -> @types/pg).
  for (const dep of Object.keys(deps)) {
    const types = `@types/${dep.replace(/^@([^/]+)\//, '$1__')}`;
    const range = declared(types);
    if (range) deps[types] = range;
  }
  const sqlite = betterSqlite(packages);
  if (sqlite) deps['better-sqlite3'] = sqlite.version;
  deps.typescript = declared('typescript');
  deps['@types/node'] = declared('@types/node');
  return deps;
}

/** The workspace's installed better-sqlite3, if a package depends on it. */
function betterSqlite(packages) {
  const user = packages.find((p) => p.manifest.dependencies?.['better-sqlite3']);
  if (!user) return null;
  const manifest = createRequire(join(root, user.dir, 'package.json')).resolve(
    'better-sqlite3/package.json',
  );
  const dir = dirname(manifest);
  return { dir, version: JSON.parse(readFileSync(manifest, 'utf8')).version };
}

/**
 * better-sqlite3's installer (prebuild-install) looks for its prebuilt binary in a local
 * folder before downloading it, and compiles only when both fail: hand it the binary the
 * workspace already built for this Node ABI, platform and architecture.
 */
function prebuildEnv(packages) {
  const sqlite = betterSqlite(packages);
  const binary = sqlite && join(sqlite.dir, 'build/Release/better_sqlite3.node');
  if (!binary || !existsSync(binary)) return {};
  const dir = join(work, 'prebuilds');
  mkdirSync(dir);
  const name = `better-sqlite3-v${sqlite.version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  execFileSync('tar', [
    '-czf',
    join(dir, name),
    '-C',
    sqlite.dir,
    'build/Release/better_sqlite3.node',
  ]);
  return { npm_config_better_sqlite3_local_prebuilds: dir };
}

/**
 * import() and require() of every export give the same module. A pattern (`./examples/*`)
 * names files, not an entry point: the README examples that use them run below.
 */
function checkEntryPoints(manifest) {
  const subpaths = Object.keys(manifest.exports ?? { '.': null }).filter(
    (k) => !k.endsWith('.json') && !k.includes('*'),
  );
  for (const sub of subpaths) {
    const spec = sub === '.' ? manifest.name : `${manifest.name}/${sub.slice(2)}`;
    const script = `
      const viaImport = Object.keys(await import(${JSON.stringify(spec)})).sort();
      const { createRequire } = await import('node:module');
      const viaRequire = Object.keys(createRequire(import.meta.url)(${JSON.stringify(spec)})).sort();
      if (viaImport.length === 0) throw new Error('no exports');
      if (JSON.stringify(viaImport) !== JSON.stringify(viaRequire)) throw new Error('import and require differ');`;
    const r = run('node', ['--no-warnings', '--input-type=module', '-e', script], { cwd: app });
    if (r.status !== 0) fail(`${spec}: import/require from the installed tarball\n${r.out}`);
  }
}

function checkExamples(examples, env) {
  const src = join(app, 'examples');
  mkdirSync(src);
  for (const ex of examples) writeFileSync(join(src, ex.file), `// ${ex.where}\n${ex.code}`);
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify(
      {
        compilerOptions: {
          target: 'ES2022',
          lib: ['ES2023'],
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noUncheckedIndexedAccess: true,
          exactOptionalPropertyTypes: true,
          verbatimModuleSyntax: true,
          skipLibCheck: true, // as most projects have it (some dependencies' declarations need DOM types)
          types: ['node'],
          rootDir: 'examples',
          outDir: 'out',
          noEmitOnError: true,
        },
        include: ['examples'],
        exclude: ['examples/**/*.test.ts'],
      },
      null,
      2,
    ),
  );
  const tests = examples.filter((e) => e.file.endsWith('.test.ts'));
  log(`type-checking ${examples.length} README examples (${tests.length} vitest files)`);
  const tsc = run('npx', ['--no-install', 'tsc', '-p', '.'], { cwd: app });
  if (tsc.status !== 0) {
    fail(`README examples do not type-check:\n${tsc.out}`);
    return;
  }
  if (tests.length > 0) {
    writeFileSync(
      join(app, 'tsconfig.test.json'),
      JSON.stringify({
        extends: './tsconfig.json',
        compilerOptions: { noEmit: true },
        include: ['examples'],
        exclude: [],
      }),
    );
    const t = run('npx', ['--no-install', 'tsc', '-p', 'tsconfig.test.json'], { cwd: app });
    if (t.status !== 0) fail(`README test examples do not type-check:\n${t.out}`);
  }

  const runDir = join(app, 'run'); // every example runs here, one after another
  mkdirSync(runDir);
  const runEnv = { ...env, ...postgresEnv(examples) };
  for (const ex of examples) {
    if (/\bDATABASE_URL\b/.test(ex.code) && !runEnv.DATABASE_URL) {
      log(`SKIP ${ex.where}: no PostgreSQL server (CAIRN_REQUIRE_POSTGRES=1 makes this a failure)`);
      continue;
    }
    const t0 = Date.now();
    const r = ex.file.endsWith('.test.ts')
      ? run(
          'npx',
          ['--no-install', 'vitest', 'run', '--root', app, '--dir', join(app, 'examples'), ex.file],
          {
            cwd: runDir,
            env: runEnv,
            timeout: 300_000,
          },
        )
      : run('node', [join(app, 'out', ex.file.replace(/\.tsx?$/, '.js'))], {
          cwd: runDir,
          env: runEnv,
          timeout: 300_000,
        });
    if (r.status !== 0) {
      fail(
        `${ex.where} (${ex.file}) ${r.signal ? `did not exit (killed after a timeout: a store left open?)` : `exited with ${r.status}`}\n${r.out}`,
      );
    } else {
      log(`ran ${ex.where} in ${Date.now() - t0} ms`);
    }
  }
}

/**
 * For examples that read MODEL_DIR: a model directory transformers.js loads, the tiny
 * BERT-shaped model @cairn/embedder-transformers' tests write (its writer, TypeScript,
 * stripped of types here).
 */
async function modelEnv(examples) {
  if (!examples.some((e) => /\bMODEL_DIR\b/.test(e.code))) return {};
  const { default: ts } = await import('typescript');
  const source = readFileSync(
    join(root, 'packages/embedder-transformers/test/tiny-model.ts'),
    'utf8',
  );
  const writer = join(work, 'tiny-model.mjs');
  writeFileSync(
    writer,
    ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText,
  );
  const { writeTinyModel } = await import(pathToFileURL(writer).href);
  return { MODEL_DIR: writeTinyModel(join(work, 'models', 'tiny-bert')) };
}

/** A database of this run's own on the test server, for examples that read DATABASE_URL. */
function postgresEnv(examples) {
  if (!examples.some((e) => /\bDATABASE_URL\b/.test(e.code))) return {};
  const base = process.env.CAIRN_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const name = `cairn_readme_${process.pid}`;
  const r = run('psql', [base, '-v', 'ON_ERROR_STOP=1', '-qAtc', `CREATE DATABASE ${name}`]);
  if (r.status !== 0) {
    if (process.env.CAIRN_REQUIRE_POSTGRES === '1')
      throw new Error(`no PostgreSQL server at ${base}:\n${r.out}`);
    return {};
  }
  database = { base, name };
  const url = new URL(base);
  url.pathname = `/${name}`;
  return { DATABASE_URL: url.toString() };
}

function dropDatabase({ base, name }) {
  run('psql', [base, '-qAtc', `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`]);
}
