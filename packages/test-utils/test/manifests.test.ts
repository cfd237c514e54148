/**
 * Every file a workspace package's manifest points at exists: a wrong path is only found by the
 * first importer otherwise (@hercules/sim once exported a src/index.ts that was never there).
 * Targets under dist/ are built, not committed: they must come from a source file under src/.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const workspaces = [...readdirSync(join(root, 'packages')).map((d) => join('packages', d)), 'apps/web'].filter((d) =>
  existsSync(join(root, d, 'package.json')),
);

/** Every path string in a manifest field, however deeply nested in conditions. */
function targets(v: unknown): string[] {
  if (typeof v === 'string') return [v];
  if (v && typeof v === 'object') return Object.values(v).flatMap(targets);
  return [];
}

/** The file a target is, or is built from. */
function source(dir: string, target: string): string[] {
  const m = /^\.\/dist\/(.*?)(\.d\.ts|\.js)$/.exec(target);
  if (!m) return [join(dir, target)];
  return ['.ts', '.tsx'].map((ext) => join(dir, 'src', m[1] + ext));
}

test('every path in every workspace manifest (main, types, exports, imports, bin) exists, or is built from a file in src/', () => {
  assert.ok(workspaces.length >= 7, `found the workspaces: ${workspaces.join(', ')}`);
  const missing: string[] = [];
  let checked = 0;
  for (const dir of workspaces) {
    const pkg = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')) as Record<string, unknown>;
    for (const field of ['main', 'types', 'exports', 'imports', 'bin']) {
      for (const t of targets(pkg[field])) {
        checked++;
        if (!source(join(root, dir), t).some((f) => existsSync(f))) missing.push(`${dir}/package.json ${field}: ${t}`);
      }
    }
  }
  assert.ok(checked > 20, `checked ${checked} paths`);
  assert.deepEqual(missing, [], `these manifest paths point at nothing; fix the path or add the file:\n${missing.join('\n')}`);
});

test('the check itself finds a missing file', () => {
  assert.equal(
    source(join(root, 'packages/core'), './dist/index.js').some((f) => existsSync(f)),
    true,
  );
  assert.equal(
    source(join(root, 'packages/core'), './dist/nothing.js').some((f) => existsSync(f)),
    false,
  );
  assert.equal(
    source(join(root, 'packages/sim'), './src/index.ts').some((f) => existsSync(f)),
    false,
  );
});
