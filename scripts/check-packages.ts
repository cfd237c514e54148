/**
 * Every publishable package checked as the ecosystem checks packages before publishing (issue 41,
 * item 6), on the very tarball `npm publish` would upload (`npm pack`, whose prepack builds it):
 *
 *   - publint, strict and down to suggestions: the exports map, the files it names being in the
 *     tarball, each file's module format, types conditions first;
 *   - Are the Types Wrong (@arethetypeswrong/core, the CLI's engine): each entry point's types resolve, in node10,
 *     node16 (from CommonJS and from ESM) and bundler resolution, to declarations of the same
 *     format as the JavaScript that Node or a bundler loads;
 *   - `npm publish <tarball> --dry-run`, which must publish with public access (a scoped
 *     package is private by default, so its first real publish would fail without it).
 *
 * attw's rule cjs-resolves-to-esm is not applied: the packages are ESM only, and since Node 20.19
 * (the engines field) `require()` loads them; TypeScript 5.8+ under `module: nodenext` types such
 * a require too. attw 0.18 models Node 16's CommonJS, which cannot. The consumer test requires
 * them from a CommonJS project to show it.
 *
 *   npm run check:packages      (part of npm test; about 5 s)
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkPackage, createPackageFromTarballData, type Problem } from '@arethetypeswrong/core';
import { problemKindInfo } from '@arethetypeswrong/core/problems';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
interface Packed {
  name: string;
  filename: string;
}
interface Finding {
  pkg: string;
  tool: string;
  detail: string;
}

/** The workspace folders under packages/ whose package is not private. */
function publishable(): string[] {
  return readdirSync(join(root, 'packages'))
    .filter((dir) => {
      try {
        return !(JSON.parse(readFileSync(join(root, 'packages', dir, 'package.json'), 'utf8')) as { private?: boolean }).private;
      } catch {
        return false; // not a package
      }
    })
    .map((dir) => `packages/${dir}`);
}

/** `npm pack` of each folder into `dest` (prepack builds it). */
function packAll(dirs: string[], dest: string): Packed[] {
  const r = spawnSync('npm', ['pack', '--json', '--pack-destination', dest, ...dirs.flatMap((d) => ['-w', d])], {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  if (r.status !== 0) throw new Error(`npm pack failed (status ${r.status}):\n${r.stderr}`);
  return JSON.parse(r.stdout.slice(r.stdout.indexOf('['))) as Packed[];
}

/** Run a command; its status and output. */
function exec(cmd: string, args: string[], cwd: string): Promise<{ status: number | null; out: string }> {
  return new Promise((done) => {
    const child = spawn(cmd, args, { cwd });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('close', (status) => done({ status, out }));
  });
}

async function checkPublint(p: Packed, dir: string): Promise<Finding[]> {
  const tarball = readFileSync(join(dir, p.filename));
  const { messages, pkg } = await publint({
    pack: { tarball: tarball.buffer.slice(tarball.byteOffset, tarball.byteOffset + tarball.length) },
    level: 'suggestion',
    strict: true,
  });
  return messages.map((m) => ({ pkg: p.name, tool: 'publint', detail: `${m.type}: ${formatMessage(m, pkg, { color: false }) ?? m.code}` }));
}

/** attw's problems, but for cjs-resolves-to-esm (see above). In process: TypeScript loads once. */
async function checkAttw(p: Packed, dir: string): Promise<Finding[]> {
  const result = await checkPackage(createPackageFromTarballData(new Uint8Array(readFileSync(join(dir, p.filename)))));
  if (result.types === false) return [{ pkg: p.name, tool: 'attw', detail: 'ships no types' }];
  const problems = result.problems.filter((x: Problem) => x.kind !== 'CJSResolvesToESM');
  return problems.map((x) => {
    const info = problemKindInfo[x.kind];
    const { kind: _, ...where } = x;
    return { pkg: p.name, tool: 'attw', detail: `${info.emoji} ${info.title} ${JSON.stringify(where)}: ${info.shortDescription} (${info.docsUrl})` };
  });
}

async function checkPublish(p: Packed, dir: string): Promise<Finding[]> {
  const r = await exec('npm', ['publish', p.filename, '--dry-run'], dir);
  if (r.status !== 0) return [{ pkg: p.name, tool: 'npm publish --dry-run', detail: r.out.trim() }];
  if (!/ with tag latest and public access \(dry-run\)/.test(r.out))
    return [
      { pkg: p.name, tool: 'npm publish --dry-run', detail: `not public access (publishConfig.access): ${r.out.trim().split('\n').slice(-2).join(' ')}` },
    ];
  return [];
}

/** `tasks` run at most `width` at a time (the machine has 2 cores). */
async function pooled<T>(tasks: (() => Promise<T>)[], width: number): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await tasks[i]();
    }
  };
  await Promise.all(Array.from({ length: width }, worker));
  return results;
}

async function main(): Promise<void> {
  const started = performance.now();
  const dest = mkdtempSync(join(tmpdir(), 'hercules-check-packages-'));
  const dirs = publishable();
  // Inside the repository everything runs from the sources: a dist/ that prepack builds is
  // removed again unless it was there before (npm test builds first), so none goes stale.
  const built = dirs.map((d) => join(root, d, 'dist')).filter((d) => !existsSync(d));
  try {
    const packed = packAll(dirs, dest);
    const tasks = packed.flatMap((p) => [() => checkPublint(p, dest), () => checkAttw(p, dest), () => checkPublish(p, dest)]);
    const findings = (await pooled(tasks, 2)).flat();
    for (const f of findings) console.error(`\n${f.pkg}: ${f.tool}\n${f.detail}`);
    const s = ((performance.now() - started) / 1000).toFixed(1);
    if (findings.length > 0) {
      console.error(`\ncheck:packages: ${findings.length} problem(s) in ${new Set(findings.map((f) => f.pkg)).size} package(s) (${s} s)`);
      process.exitCode = 1;
    } else console.log(`check:packages: publint, attw and npm publish --dry-run pass for ${packed.map((p) => p.name).join(', ')} (${s} s)`);
  } finally {
    rmSync(dest, { recursive: true, force: true });
    for (const d of built) rmSync(d, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
