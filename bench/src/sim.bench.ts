/**
 * 5. Simulator speed: `runSeed` for seeds 1..50 (each seed picks its own configuration: 2-5
 * clients, faults, batching), reporting simulated ops sequenced and events processed per second
 * of wall time. One warm-up pass over a few seeds, then REPS passes; median reported. The
 * simulator checks its invariants after every event (deep checks every event by default); one
 * extra pass with deep checks every 1,000 events shows how much of the time those take.
 */
import { runSeed, type SimConfig } from '@hercules/sim';
import { fmt, gc, stats, standalone, type Row, type Section } from './harness.ts';

const FIRST = 1;
const SEEDS = 50;
const REPS = 3;

interface Pass {
  secs: number;
  events: number;
  sequenced: number;
  submitted: number;
  simSecs: number;
  failed: number;
}

async function pass(overrides: Partial<SimConfig> = {}, first = FIRST, count = SEEDS): Promise<Pass> {
  gc();
  const p: Pass = { secs: 0, events: 0, sequenced: 0, submitted: 0, simSecs: 0, failed: 0 };
  const t0 = performance.now();
  for (let seed = first; seed < first + count; seed++) {
    const r = await runSeed(seed, overrides);
    p.events += r.events;
    p.sequenced += r.sequenced;
    p.submitted += r.submitted;
    p.simSecs += r.simMs / 1000;
    if (!r.ok) p.failed++;
  }
  p.secs = (performance.now() - t0) / 1000;
  return p;
}

export async function run(): Promise<Section> {
  await pass({}, 1000, 5); // warm-up on other seeds
  const passes: Pass[] = [];
  for (let r = 0; r < REPS; r++) passes.push(await pass());
  const light = await pass({ deepCheckEvery: 1_000 });
  const opsPerSec = stats(passes.map((p) => p.sequenced / p.secs));
  const evPerSec = stats(passes.map((p) => p.events / p.secs));
  const secs = stats(passes.map((p) => p.secs));
  const p0 = passes[0];
  const rows: Row[] = [
    {
      run: `seeds ${FIRST}..${FIRST + SEEDS - 1}, default checks (median of ${REPS})`,
      'wall s': secs.median,
      events: p0.events,
      'ops sequenced': p0.sequenced,
      'simulated s': p0.simSecs,
      'sequenced ops / wall s': opsPerSec.median,
      'events / wall s': evPerSec.median,
      failed: Math.max(...passes.map((p) => p.failed)),
    },
    {
      run: `same seeds, deep checks every 1,000 events (1 pass)`,
      'wall s': light.secs,
      events: light.events,
      'ops sequenced': light.sequenced,
      'simulated s': light.simSecs,
      'sequenced ops / wall s': light.sequenced / light.secs,
      'events / wall s': light.events / light.secs,
      failed: light.failed,
    },
  ];
  const failed = passes.some((p) => p.failed > 0) || light.failed > 0;
  return {
    id: 'sim',
    title: `Simulator speed (runSeed, seeds ${FIRST}..${FIRST + SEEDS - 1})`,
    command: 'node --expose-gc --import tsx bench/src/sim.bench.ts',
    params: { seeds: [FIRST, FIRST + SEEDS - 1], reps: REPS, passSeconds: passes.map((p) => Math.round(p.secs * 100) / 100) },
    rows,
    goals: [{ what: 'all seeds pass', goal: '0 failures', measured: failed ? 'FAILURES' : '0 failures', met: !failed }],
    notes: [
      `Simulated time runs ${fmt(p0.simSecs / secs.median)}× faster than wall time at the default checks.`,
      'Each pass replays identical seeds, so events and ops are the same in every pass; only wall time varies.',
    ],
  };
}

await standalone(import.meta.url, run);
