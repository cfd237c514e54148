/**
 * Runs every core benchmark in one process, prints their tables and a goal summary, and writes
 * docs/benchmarks/core.json.
 *
 *   npm run bench                          all of them (about 2-3 minutes on 2 cores), then the
 *                                          runtime benchmarks (about 2 more; see runtime/run.ts)
 *                                          and the paper's experiments with the peers (about 5 more;
 *                                          see paper/run.ts)
 *   npm run bench -- --only rebase,submit  a subset (ids: getState, submit, rebase, opApply, sim, runtime, paper)
 *
 * Each benchmark also runs on its own: node --expose-gc --import tsx bench/src/<name>.bench.ts
 * The runtime benchmarks (servers in child processes) run as `npm run bench:runtime`, here as a
 * child process after the core ones; they write docs/benchmarks/runtime.json.
 */
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { gcExposed, machineInfo, repoRoot, runBench, sink, writeSections, type Bench, type Section } from './harness.ts';
import { run as getState } from './getstate.bench.ts';
import { run as submit } from './submit.bench.ts';
import { run as rebase } from './rebase.bench.ts';
import { run as opApply } from './opapply.bench.ts';
import { run as sim } from './sim.bench.ts';

const ALL: Record<string, Bench> = { getState, submit, rebase, opApply, sim };

const RUNTIME = 'runtime';
const PAPER = 'paper';
const { values } = parseArgs({ options: { only: { type: 'string' } } });
const wanted = values.only
  ? values.only
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
  : [...Object.keys(ALL), RUNTIME, PAPER];
for (const w of wanted) {
  if (!(w in ALL) && w !== RUNTIME && w !== PAPER) {
    console.error(`unknown benchmark "${w}"; choose from ${[...Object.keys(ALL), RUNTIME, PAPER].join(', ')}`);
    process.exit(2);
  }
}

const t0 = performance.now();
console.log(`machine: ${JSON.stringify(machineInfo())}`);
if (!gcExposed) console.log('note: run node with --expose-gc (npm run bench does) to collect garbage between repetitions');

const sections: Section[] = [];
for (const id of wanted) if (id in ALL) sections.push(await runBench(ALL[id]));
if (sections.length) writeSections(sections);

if (sections.length) {
  console.log('\n## Goals\n');
  for (const s of sections) {
    for (const g of s.goals) console.log(`${g.met ? 'MET   ' : 'MISSED'}  [${s.id}] ${g.what}: ${g.measured} (goal ${g.goal})`);
  }
  console.log(
    `\nwrote docs/benchmarks/core.json (${sections.map((s) => s.id).join(', ')}) in ${((performance.now() - t0) / 1000).toFixed(0)} s (sink ${sink.n & 1})`,
  );
}

if (wanted.includes(RUNTIME)) {
  console.log('\n# Runtime benchmarks (npm run bench:runtime)\n');
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'bench/src/runtime/run.ts'], { cwd: repoRoot, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(`runtime benchmarks failed (exit ${r.status ?? r.signal})`);
    process.exitCode = 1;
  }
}

if (wanted.includes(PAPER)) {
  console.log("\n# The paper's experiments and the peers (npm run bench:paper)\n");
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'bench/src/paper/run.ts'], { cwd: repoRoot, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(`paper experiments failed (exit ${r.status ?? r.signal})`);
    process.exitCode = 1;
  }
}
if (wanted.includes(RUNTIME) || wanted.includes(PAPER)) console.log(`\nall benchmarks done in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
