/**
 * The paper's experiments (§7) and the peers, each in its own process, one after the other:
 *
 *   npm run bench:paper                         all (about 6 minutes here)
 *   npm run bench:paper -- --only fig14,peers   some (ids: fig13, fig13-tmpfs, fig14, fig14-procs, fig15, peers, saturation, validators)
 *
 * Results: docs/benchmarks/paper.json and docs/benchmarks/<id>.svg.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const scripts: Record<string, string | string[]> = {
  fig13: 'fig13-views.ts',
  // The same with the server's and clients' storage on tmpfs, where fsync costs nothing: what
  // the software adds to the network without the disk.
  'fig13-tmpfs': ['fig13-views.ts', '--tmpfs', '--seconds', '10'],
  fig14: 'fig14-batching.ts',
  // The same, auto batching, with the clients in 4 processes (the paper's ran on machines of their own).
  'fig14-procs': ['fig14-batching.ts', '--procs', '4', '--modes', 'auto'],
  fig15: 'fig15-failure.ts',
  peers: 'peers.ts',
  saturation: 'saturation.ts',
  validators: '../validators.bench.ts',
};
const { values } = parseArgs({ options: { only: { type: 'string' } } });
const wanted = values.only ? values.only.split(',') : Object.keys(scripts);
for (const w of wanted)
  if (!(w in scripts)) {
    console.error(`unknown experiment "${w}"; choose from ${Object.keys(scripts).join(', ')}`);
    process.exit(2);
  }
const t0 = performance.now();
let failed = 0;
for (const id of wanted) {
  console.log(`\n# ${id}\n`);
  // Clients run as production apps would: Mutative's production build (servers already do).
  const [script, ...args] = ([] as string[]).concat(scripts[id]);
  const r = spawnSync(process.execPath, ['--import', 'tsx', fileURLToPath(new URL(script, import.meta.url)), ...args], {
    stdio: 'inherit',
    env: { ...process.env, NODE_ENV: process.env.NODE_ENV ?? 'production' },
  });
  if (r.status !== 0) {
    failed++;
    console.error(`${id} failed (exit ${r.status ?? r.signal})`);
  }
}
console.log(`\npaper experiments done in ${((performance.now() - t0) / 1000).toFixed(0)} s${failed ? `, ${failed} FAILED` : ''}`);
process.exit(failed ? 1 : 0);
