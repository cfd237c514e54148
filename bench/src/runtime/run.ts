/**
 * Runtime benchmarks: the client's durable delay, the latency of each stage at an emulated
 * round trip, server throughput, and wire bytes per op. Servers run in their own processes on
 * 127.0.0.1; data directories live in the OS temp dir and are removed at the end.
 *
 *   npm run bench:runtime                                   all (about 2 minutes on 2 cores)
 *   npm run bench:runtime -- --only durable,latency         a subset (ids: durable, latency, throughput, wire)
 *   npm run bench:runtime -- --no-profile                   skip the profiled throughput run
 *
 * Results are merged into docs/benchmarks/runtime.json. `wire` uses the live byte counts of
 * `latency` and `throughput` when they ran in the same invocation.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { machineInfo, printSection, printTable, type Row, type Section } from '../harness.ts';
import { cleanupTemp, writeRuntimeSections } from './common.ts';
import { run as durable } from './durable.ts';
import { run as latency, type LiveBytes } from './latency.ts';
import { run as throughput } from './throughput.ts';
import { run as wire } from './wire.ts';

const IDS = ['durable', 'latency', 'throughput', 'wire'] as const;
const { values } = parseArgs({ options: { only: { type: 'string' }, 'no-profile': { type: 'boolean' } } });
const wanted = values.only
  ? values.only
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
  : [...IDS];
for (const w of wanted) {
  if (!(IDS as readonly string[]).includes(w)) {
    console.error(`unknown runtime benchmark "${w}"; choose from ${IDS.join(', ')}`);
    process.exit(2);
  }
}

const t0 = performance.now();
console.log(`machine: ${JSON.stringify(machineInfo())}`);
const sections: Section[] = [];
const live: { latency?: LiveBytes; throughput?: LiveBytes } = {};

async function timed(fn: () => Promise<Section>): Promise<Section> {
  const load = Math.round(os.loadavg()[0] * 100) / 100;
  const s0 = performance.now();
  const s = await fn();
  s.loadAvg1m = load;
  s.seconds = Math.round((performance.now() - s0) / 100) / 10;
  s.measuredAt = new Date().toISOString();
  printSection(s);
  console.log(`  (${s.seconds} s; 1-minute load average at start: ${load} on ${os.cpus().length} CPUs)`);
  sections.push(s);
  return s;
}

try {
  if (wanted.includes('durable')) await timed(durable);
  if (wanted.includes('latency'))
    await timed(async () => {
      const r = await latency();
      live.latency = r.live;
      return r.section;
    });
  if (wanted.includes('throughput')) {
    const s = await timed(async () => {
      const r = await throughput({ profile: !values['no-profile'] });
      live.throughput = r.live;
      return r.section;
    });
    const p = (s as Section & { extra: { profile?: { topFunctions: Row[]; byCategory: Row[]; inclusive: Row[] } } }).extra.profile;
    if (p) {
      printTable('R3 profile: self time by function (share of busy server time)', p.topFunctions.slice(0, 15));
      printTable('R3 profile: self time by package / file', p.byCategory.slice(0, 12));
      printTable('R3 profile: inclusive time of server functions', p.inclusive);
    }
  }
  if (wanted.includes('wire')) {
    const s = await timed(async () => wire(live));
    const x = (s as Section & { extra: { frames: Row[]; live: Row[] } }).extra;
    printTable('R4 detail: each frame of one op (seq 4,212, pos 123,456)', x.frames);
    if (x.live.length) printTable('R4 detail: live runs', x.live);
  }
} finally {
  cleanupTemp();
}
writeRuntimeSections(sections);

console.log('\n## Goals\n');
for (const s of sections) for (const g of s.goals) console.log(`${g.met ? 'MET   ' : 'MISSED'}  [${s.id}] ${g.what}: ${g.measured} (goal ${g.goal})`);
console.log(`\nwrote docs/benchmarks/runtime.json (${sections.map((s) => s.id).join(', ')}) in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
