#!/usr/bin/env node
/**
 * The benchmarks compare Hercules with Yjs, Automerge, Colyseus and Fluid. Those systems (and
 * the validator libraries the validators benchmark measures) are not part of the root install:
 * they have their own lockfile here (bench/package-lock.json) and are installed on demand by
 * `npm run bench`, `bench:runtime`, `bench:paper` and `typecheck:bench` through this script.
 * It installs in bench/ only when bench/node_modules is missing or was installed from another
 * lockfile. @hercules/* and tsx still come from the repository root's node_modules.
 *
 * `npm install --no-save` rather than `npm ci`: both install exactly the locked versions, but
 * npm ci refuses this lockfile where the registry lacks some platform-only optional packages
 * (@cbor-extract/*, @msgpackr-extract/* for other platforms), which it then counts as missing
 * from the lock. --no-save leaves package-lock.json as committed.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const stamp = join(here, 'node_modules', '.hercules-lock-hash');
const hash = createHash('sha256')
  .update(readFileSync(join(here, 'package.json')))
  .update(readFileSync(join(here, 'package-lock.json')))
  .digest('hex');
if (existsSync(stamp) && readFileSync(stamp, 'utf8') === hash) process.exit(0);

console.error('bench: installing the benchmark dependencies (bench/package-lock.json)...');
// npm's own entry point when run from an npm script, so the same npm installs.
const npm = process.env.npm_execpath ? [process.execPath, process.env.npm_execpath] : ['npm'];
const r = spawnSync(npm[0], [...npm.slice(1), 'install', '--no-save', '--no-audit', '--no-fund'], { cwd: here, stdio: 'inherit' });
if (r.status !== 0) {
  console.error(`bench: npm install in ${here} failed (${r.error?.message ?? `exit ${r.status}`})`);
  process.exit(1);
}
writeFileSync(stamp, hash);
