// npm run pack -- <dir>: every publishable @hercules/* package as a tarball in <dir> (default
// ./packs), for installing Hercules from a clone before it is on the npm registry (README).
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';

const out = resolve(process.argv[2] ?? 'packs');
mkdirSync(out, { recursive: true });
const packages = readdirSync('packages').filter((d) => !JSON.parse(readFileSync(join('packages', d, 'package.json'), 'utf8')).private);
const r = spawnSync('npm', ['pack', '--pack-destination', out, ...packages.flatMap((p) => ['-w', `packages/${p}`])], { stdio: 'inherit' });
if (r.status === 0) console.log(`\n${packages.length} packages packed into ${out}: npm install ${out}/*.tgz`);
process.exit(r.status ?? 1);
