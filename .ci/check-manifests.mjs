// Checks what every published package needs to be installed, read and trusted, from the
// files in the repository (fast: part of `pnpm lint`). `--fix` writes the fixable parts.
// The tarballs themselves are checked by .ci/pack-check.
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { publicPackages, REPOSITORY, root } from './packages.mjs';

const fix = process.argv.includes('--fix');
const ENGINES = '^20.19.0 || >=22.12.0'; // require() of ES modules without a flag
const license = readFileSync(join(root, 'LICENSE'), 'utf8');
const problems = [];

/** `exports` entries with `types` first and `default` last (import and require both work). */
function fixExports(value) {
  if (typeof value === 'string') return value;
  const out = {};
  if (value.types) out.types = value.types;
  for (const [k, v] of Object.entries(value)) {
    if (k !== 'types' && k !== 'import' && k !== 'default') out[k] = fixExports(v);
  }
  const target = value.default ?? value.import;
  if (target !== undefined) out.default = fixExports(target);
  return out;
}

function checkExports(name, key, value) {
  if (typeof value === 'string' || value === null) return;
  const keys = Object.keys(value);
  if (keys.some((k) => k.startsWith('.'))) {
    for (const [k, v] of Object.entries(value)) checkExports(name, k, v);
    return;
  }
  if (key === './package.json') return;
  if (keys.includes('types') && keys[0] !== 'types')
    problems.push(`${name}: exports["${key}"].types must come first`);
  if (keys.at(-1) !== 'default')
    problems.push(
      `${name}: exports["${key}"] must end with a "default" condition (an "import"-only entry cannot be require()d)`,
    );
}

for (const { dir, manifest: m } of publicPackages()) {
  const name = m.name;
  const want = {
    repository: { type: 'git', url: `git+${REPOSITORY}.git`, directory: dir },
    homepage: `${REPOSITORY}/tree/main/${dir}#readme`,
    bugs: { url: `${REPOSITORY}/issues` },
    publishConfig: { access: 'public' },
  };
  if (fix) {
    const next = {};
    for (const [k, v] of Object.entries(m)) {
      next[k] = v;
      if (k === 'license') Object.assign(next, want);
    }
    Object.assign(next, want);
    if (next.exports) next.exports = fixExports(next.exports);
    next.files = [...new Set([...(next.files ?? ['dist']), 'src'])];
    next.engines = { ...next.engines, node: ENGINES };
    writeFileSync(join(root, dir, 'package.json'), `${JSON.stringify(next, null, 2)}\n`);
    const readme = join(root, dir, 'README.md');
    if (existsSync(readme)) {
      const text = readFileSync(readme, 'utf8');
      if (!text.includes(`npm install ${name}`)) {
        // After the title and the first paragraph: the package and its @cairn peers.
        const peers = Object.keys(m.peerDependencies ?? {}).filter((d) => d.startsWith('@cairn/'));
        const line = `\`\`\`sh\nnpm install ${[name, ...peers].join(' ')}\n\`\`\`\n\n`;
        const at = text.search(/\n\n(?!#)/);
        const cut = at === -1 ? text.length : text.indexOf('\n\n', at + 2) + 2;
        writeFileSync(
          readme,
          cut < 2 ? `${text}\n${line}` : text.slice(0, cut) + line + text.slice(cut),
        );
      }
    }
    if (!existsSync(join(root, dir, 'LICENSE')))
      copyFileSync(join(root, 'LICENSE'), join(root, dir, 'LICENSE'));
    continue;
  }
  for (const [k, v] of Object.entries(want)) {
    if (JSON.stringify(m[k]) !== JSON.stringify(v))
      problems.push(`${name}: "${k}" should be ${JSON.stringify(v)}`);
  }
  if (m.license !== 'MIT') problems.push(`${name}: "license" should be "MIT"`);
  if (!m.description) problems.push(`${name}: no "description"`);
  if (m.type !== 'module') problems.push(`${name}: "type" should be "module"`);
  if (!m.exports) problems.push(`${name}: no "exports"`);
  else checkExports(name, '.', m.exports);
  if (!m.types) problems.push(`${name}: no "types" (for TypeScript's node10 resolution)`);
  if (!m.files?.includes('dist') || !m.files?.includes('src'))
    problems.push(`${name}: "files" should hold "dist" and "src" (source maps point into src)`);
  if (m.engines?.node !== ENGINES) problems.push(`${name}: "engines.node" should be "${ENGINES}"`);
  const licensePath = join(root, dir, 'LICENSE');
  if (!existsSync(licensePath) || readFileSync(licensePath, 'utf8') !== license)
    problems.push(`${name}: ${dir}/LICENSE should be a copy of the root LICENSE`);
  const readmePath = join(root, dir, 'README.md');
  if (!existsSync(readmePath)) problems.push(`${name}: no README.md`);
  else if (!readFileSync(readmePath, 'utf8').includes(`npm install ${name}`))
    problems.push(`${name}: README.md has no install line (\`npm install ${name}\`)`);
}

if (fix) {
  console.log('manifests: fixed (metadata, exports, files, engines, LICENSE, install lines)');
} else if (problems.length > 0) {
  console.error(problems.map((p) => `manifest: ${p}`).join('\n'));
  console.error(
    `\n${problems.length} problem(s); \`node .ci/check-manifests.mjs --fix\` fixes most of them`,
  );
  process.exit(1);
} else {
  console.log(`manifests: ${publicPackages().length} packages ready to publish`);
}
