/**
 * Runs every core benchmark in one process, prints their tables and a goal summary, and writes
 * docs/benchmarks/core.json.
 *
 *   npm run bench                          all of them (about 2-3 minutes on 2 cores)
 *   npm run bench -- --only rebase,submit  a subset (ids: getState, submit, rebase, opApply, sim)
 *
 * Each benchmark also runs on its own: node --expose-gc --import tsx bench/src/<name>.bench.ts
 */
import { parseArgs } from 'node:util';
import { gcExposed, machineInfo, runBench, sink, writeSections, type Bench, type Section } from './harness.ts';
import { run as getState } from './getstate.bench.ts';
import { run as submit } from './submit.bench.ts';
import { run as rebase } from './rebase.bench.ts';
import { run as opApply } from './opapply.bench.ts';
import { run as sim } from './sim.bench.ts';

const ALL: Record<string, Bench> = { getState, submit, rebase, opApply, sim };

const { values } = parseArgs({ options: { only: { type: 'string' } } });
const wanted = values.only ? values.only.split(',').map((s) => s.trim()).filter(Boolean) : Object.keys(ALL);
for (const w of wanted) {
  if (!(w in ALL)) {
    console.error(`unknown benchmark "${w}"; choose from ${Object.keys(ALL).join(', ')}`);
    process.exit(2);
  }
}

const t0 = performance.now();
console.log(`machine: ${JSON.stringify(machineInfo())}`);
if (!gcExposed) console.log('note: run node with --expose-gc (npm run bench does) to collect garbage between repetitions');

const sections: Section[] = [];
for (const id of wanted) sections.push(await runBench(ALL[id]));
writeSections(sections);

console.log('\n## Goals\n');
for (const s of sections) {
  for (const g of s.goals) console.log(`${g.met ? 'MET   ' : 'MISSED'}  [${s.id}] ${g.what}: ${g.measured} (goal ${g.goal})`);
}
console.log(`\nwrote docs/benchmarks/core.json (${sections.map((s) => s.id).join(', ')}) in ${((performance.now() - t0) / 1000).toFixed(0)} s (sink ${sink.n & 1})`);
