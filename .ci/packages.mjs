// The publishable packages of the workspace: every package.json under the workspace globs
// that is not `private`. Shared by the manifest check (pnpm lint) and the pack check (CI),
// so a package added later is checked without anyone listing it.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const REPOSITORY = 'https://github.com/cairn-dev/cairn';

function workspaceGlobs() {
  const yaml = readFileSync(join(root, 'pnpm-workspace.yaml'), 'utf8');
  const globs = [];
  let inPackages = false;
  for (const line of yaml.split('\n')) {
    if (/^packages:\s*$/.test(line)) inPackages = true;
    else if (inPackages && /^\s+-\s+/.test(line))
      globs.push(
        line
          .replace(/^\s+-\s+/, '')
          .replace(/['"]/g, '')
          .trim(),
      );
    else if (inPackages && /^\S/.test(line)) inPackages = false;
  }
  return globs;
}

/** Every workspace package: { dir (relative to the root), manifest }. */
export function workspacePackages() {
  const dirs = [];
  for (const glob of workspaceGlobs()) {
    if (glob.endsWith('/*')) {
      const parent = join(root, glob.slice(0, -2));
      if (!existsSync(parent)) continue;
      for (const entry of readdirSync(parent, { withFileTypes: true })) {
        if (entry.isDirectory()) dirs.push(join(parent, entry.name));
      }
    } else {
      dirs.push(join(root, glob));
    }
  }
  return dirs
    .filter((dir) => existsSync(join(dir, 'package.json')))
    .map((dir) => ({
      dir: relative(root, dir),
      manifest: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')),
    }))
    .sort((a, b) => a.dir.localeCompare(b.dir));
}

/** The packages that get published (not `private`). */
export function publicPackages() {
  return workspacePackages().filter((p) => p.manifest.private !== true);
}

// Run directly: print one line per public package, "name<TAB>dir".
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const p of publicPackages()) console.log(`${p.manifest.name}\t${p.dir}`);
}
