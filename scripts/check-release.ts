/**
 * The release procedure (docs/releasing.md) rehearsed on a copy of the repository's manifests:
 * a changeset of one package, then `changeset version`, as a maintainer would run it. It must
 *   - version every publishable package together (the one "fixed" group of .changeset/config.json,
 *     which must name exactly the packages that are not private), to the bump the changeset asked
 *     for: a minor change on 0.x must not become 1.0.0 (changesets makes a peer dependency's
 *     dependents major unless its range still holds the new version);
 *   - leave every @hercules/* dependency, in every package.json of the repository, satisfied by
 *     that package's new version (npm then links the workspace instead of asking the registry);
 *   - write each package's CHANGELOG.md, with the change.
 *
 *   node --import tsx scripts/check-release.ts     (in npm run check:packages; under a second)
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import semver from 'semver';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  workspaces?: string[];
  [field: string]: unknown;
}
const DEP_FIELDS = ['dependencies', 'devDependencies', 'peerDependencies', 'optionalDependencies'] as const;

/** The repository's package.json files (relative paths): the root's and its workspaces'. */
function manifests(dir: string): string[] {
  const rootManifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;
  const found = ['package.json'];
  for (const pattern of rootManifest.workspaces ?? []) {
    const parent = pattern.endsWith('/*') ? pattern.slice(0, -2) : undefined;
    const dirs = parent ? readdirSync(join(dir, parent)).map((d) => `${parent}/${d}`) : [pattern];
    for (const d of dirs) if (existsSync(join(dir, d, 'package.json'))) found.push(`${d}/package.json`);
  }
  return found;
}

const read = (dir: string, file: string) => JSON.parse(readFileSync(join(dir, file), 'utf8')) as Manifest;

/** A copy of the manifests and the changesets config, with a minor changeset of @hercules/core. */
function rehearsalCopy(): { dir: string; files: string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'hercules-release-'));
  const files = manifests(root);
  for (const f of files) {
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    cpSync(join(root, f), join(dir, f));
  }
  mkdirSync(join(dir, '.changeset'));
  cpSync(join(root, '.changeset', 'config.json'), join(dir, '.changeset', 'config.json'));
  writeFileSync(join(dir, '.changeset', 'rehearsal.md'), "---\n'@hercules/core': minor\n---\n\nA rehearsal change.\n");
  // changesets loads its changelog writer from the project's node_modules.
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return { dir, files };
}

/** What is wrong with the config's fixed group, or nothing. */
function fixedGroupProblems(dir: string, files: string[]): string[] {
  const config = JSON.parse(readFileSync(join(dir, '.changeset', 'config.json'), 'utf8')) as { fixed?: string[][] };
  const publishable = files
    .map((f) => read(dir, f))
    .filter((m) => !m.private)
    .map((m) => m.name);
  const fixed = config.fixed?.length === 1 ? [...config.fixed[0]].sort() : [];
  if (JSON.stringify(fixed) === JSON.stringify([...publishable].sort())) return [];
  return [
    `.changeset/config.json: "fixed" must be one group of exactly the publishable packages (${publishable.join(', ')}), is ${JSON.stringify(config.fixed)}`,
  ];
}

/** What `changeset version` left wrong in the copy, or nothing. */
function versionProblems(dir: string, files: string[], before: Map<string, Manifest>): string[] {
  const after = new Map(files.map((f) => [f, read(dir, f)]));
  const versions = new Map([...after.values()].map((m) => [m.name, m.version]));
  const problems: string[] = [];
  for (const [f, m] of after) {
    const old = before.get(f)!;
    if (!m.private) {
      const want = semver.inc(old.version, 'minor');
      if (m.version !== want) problems.push(`${m.name}: a minor changeset of @hercules/core made ${old.version} ${m.version}, not ${want}`);
      const log = join(dir, dirname(f), 'CHANGELOG.md');
      if (!existsSync(log) || !readFileSync(log, 'utf8').includes(`## ${m.version}`)) problems.push(`${m.name}: no CHANGELOG.md entry for ${m.version}`);
    }
    for (const field of DEP_FIELDS)
      for (const [dep, range] of Object.entries((m[field] ?? {}) as Record<string, string>)) {
        const version = versions.get(dep);
        if (version && !semver.satisfies(version, range)) problems.push(`${f}: ${field}.${dep} is ${range}, which ${dep}@${version} does not satisfy`);
      }
  }
  if (!readFileSync(join(dir, 'packages/core/CHANGELOG.md'), 'utf8').includes('A rehearsal change.'))
    problems.push('packages/core/CHANGELOG.md lacks the change');
  return problems;
}

function main(): void {
  const started = performance.now();
  const { dir, files } = rehearsalCopy();
  try {
    const before = new Map(files.map((f) => [f, read(dir, f)]));
    const problems = fixedGroupProblems(dir, files);
    const bin = join(root, 'node_modules', '@changesets', 'cli', 'bin.js');
    const r = spawnSync(process.execPath, [bin, 'version'], { cwd: dir, encoding: 'utf8' });
    if (r.status !== 0) problems.push(`changeset version failed (status ${r.status}):\n${r.stdout}${r.stderr}`);
    else problems.push(...versionProblems(dir, files, before));
    const s = ((performance.now() - started) / 1000).toFixed(1);
    if (problems.length) {
      for (const p of problems) console.error(p);
      console.error(`check-release: the release rehearsal found ${problems.length} problem(s) (${s} s)`);
      process.exitCode = 1;
    } else {
      const names = [...before.values()].filter((m) => !m.private);
      console.log(
        `check-release: a minor changeset versions the ${names.length} publishable packages together, ${names[0].version} to ${read(dir, 'packages/core/package.json').version}, changelogs written (${s} s)`,
      );
    }
  } finally {
    unlinkSync(join(dir, 'node_modules')); // the link only, never the repository's node_modules
    rmSync(dir, { recursive: true, force: true });
  }
}

main();
