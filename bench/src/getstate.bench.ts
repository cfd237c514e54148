/**
 * 1. getState on states of ~1 KB, ~1 MB and ~10 MB. Goal: < 1 µs per call, flat in size.
 *
 * Each engine holds a keyed-objects state of the given size and one pending op (so Submitted is
 * a different snapshot from the others). A tight loop calls getState N times and folds a field
 * of every returned snapshot into an accumulator (dead-code guard); time / N is the per-call
 * cost, loop overhead included. Sizes are interleaved within each repetition.
 */
import { ViewEngine, VIEWS, type ViewName } from '@hercules/core';
import { itemsForBytes, jsonBytes, keyedMachine, keyedState, itemId, type KeyedState } from './fixtures.ts';
import { fmt, interleaved, sink, standalone, stats, type Section } from './harness.ts';

const SIZES: [string, number][] = [
  ['~1 KB', 1_000],
  ['~1 MB', 1_000_000],
  ['~10 MB', 10_000_000],
];
const ITERS = 10_000_000;
const REPS = 7;

function loopOne(engine: ViewEngine<KeyedState>, n: number): number {
  let acc = 0;
  for (let i = 0; i < n; i++) acc += engine.getState('submitted').size;
  return acc;
}

const ROTATION: readonly ViewName[] = VIEWS;
function loopRotate(engine: ViewEngine<KeyedState>, n: number): number {
  let acc = 0;
  for (let i = 0, v = 0; i < n; i++) {
    acc += engine.getState(ROTATION[v]).size;
    if (++v === 5) v = 0;
  }
  return acc;
}

export function run(): Section {
  const engines: { label: string; bytes: number; items: number; engine: ViewEngine<KeyedState> }[] = [];
  for (const [label, target] of SIZES) {
    const items = itemsForBytes(target);
    const initial = keyedState(items);
    const machine = keyedMachine(initial);
    const engine = new ViewEngine(machine, { clientId: 'bench', now: () => 0 });
    engine.submit('setQty', { id: itemId(0), qty: 1 });
    engine.drain();
    engines.push({ label, bytes: jsonBytes(machine.initial), items, engine });
  }
  const competitors: Record<string, () => void> = {};
  for (const e of engines) {
    competitors[`one:${e.label}`] = () => {
      sink.n += loopOne(e.engine, ITERS);
    };
    competitors[`rot:${e.label}`] = () => {
      sink.n += loopRotate(e.engine, ITERS);
    };
  }
  const ms = interleaved(competitors, REPS, 2);
  const rows = [];
  const perCall: Record<string, number> = {};
  for (const e of engines) {
    const one = stats(ms[`one:${e.label}`].map((m) => (m * 1e6) / ITERS));
    const rot = stats(ms[`rot:${e.label}`].map((m) => (m * 1e6) / ITERS));
    perCall[e.label] = Math.max(one.median, rot.median);
    rows.push({
      state: e.label,
      'JSON bytes': e.bytes,
      items: e.items,
      "getState('submitted') ns/call (median)": one.median,
      'min': one.min,
      'max': one.max,
      'all 5 views rotating ns/call (median)': rot.median,
      'rot max': rot.max,
    });
  }
  const worst = Math.max(...Object.values(perCall));
  const small = perCall['~1 KB'];
  const large = perCall['~10 MB'];
  return {
    id: 'getState',
    title: `getState per call (tight loop of ${ITERS.toLocaleString('en-US')} calls, median of ${REPS} reps)`,
    command: 'node --expose-gc --import tsx bench/src/getstate.bench.ts',
    params: { sizes: SIZES.map(([l, b]) => ({ label: l, targetBytes: b })), iterations: ITERS, reps: REPS, itemJson: 'keyed map of ~180-byte objects' },
    rows,
    goals: [
      { what: 'getState per call, worst size and loop', goal: '< 1 µs (1000 ns)', measured: `${fmt(worst)} ns`, met: worst < 1000 },
      { what: 'getState flat in size (10 MB / 1 KB)', goal: 'ratio ≈ 1', measured: `${fmt(large / small)}×`, met: large / small < 1.5 },
    ],
    notes: ['Per-call time includes loop overhead and reading one field of the returned snapshot (the dead-code guard).'],
  };
}

await standalone(import.meta.url, run);
