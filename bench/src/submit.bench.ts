/**
 * 2. Submit → Submitted view for a small op. Goal: < 50 µs (median and p99 reported).
 *
 * One sample = `engine.submit('setQty', args)` + `engine.getState('submitted')`, timed with
 * performance.now() around exactly those two calls. The op sets one number field of one item.
 * The goal case is the one the brief names: 1,000 items in one keyed map. Other rows show how
 * the cost depends on the layout: the same op on 10,000 and 100,000 items in one map, and
 * 1,000 / 100,000 items split over √n buckets (two-level map) or held in an array, and the same
 * 1,000 / 10,000 / 100,000 items in one `KeyedMap` (core's hash trie: one map as the app writes it).
 *
 * Between samples (untimed) the adapter's work is simulated: every 10 submits storage confirms
 * them (`durable`) and the output queue is drained. Each block of 1,000 submits uses a fresh
 * engine so the op lists do not grow without bound.
 *
 * Breakdown: `applyOp alone` times the Mutative application of the same op on the same state in
 * its own loop; `args check` times what submit does to the arguments (findNonJson +
 * structuredClone + deepFreeze), state-independent, measured once.
 */
import { ViewEngine, applyOp, deepFreeze, findNonJson, type Machine } from '@hercules/core';
import {
  bucketCount,
  bucketedMachine,
  bucketedState,
  itemId,
  jsonBytes,
  keyedMachine,
  keyedMapMachine,
  keyedMapState,
  keyedState,
  listMachine,
  listState,
} from './fixtures.ts';
import { fmt, gc, sink, standalone, stats, timerOverheadUs, type Row, type Section, type Stats } from './harness.ts';

interface Case {
  layout: string;
  items: number;
  samples: number;
  warmup: number;
  make: () => { machine: Machine<any>; args: (k: number, i: number) => unknown; read: (s: any, k: number) => number };
}

const keyed = (items: number) => () => {
  const ids = Array.from({ length: items }, (_, i) => itemId(i));
  return {
    machine: keyedMachine(keyedState(items)) as Machine<any>,
    args: (k: number, i: number) => ({ id: ids[k], qty: i & 1023 }),
    read: (s: any, k: number) => s.items[ids[k]].qty as number,
  };
};
const bucketed = (items: number) => () => {
  const ids = Array.from({ length: items }, (_, i) => itemId(i));
  const m = bucketedMachine(bucketedState(items));
  return {
    machine: m as Machine<any>,
    args: (k: number, i: number) => ({ id: ids[k], qty: i & 1023 }),
    read: (s: any) => s.size as number,
  };
};
const trie = (items: number) => () => {
  const ids = Array.from({ length: items }, (_, i) => itemId(i));
  return {
    machine: keyedMapMachine(keyedMapState(items)) as Machine<any>,
    args: (k: number, i: number) => ({ id: ids[k], qty: i & 1023 }),
    read: (s: any) => s.size as number,
  };
};
const list = (items: number) => () => ({
  machine: listMachine(listState(items)) as Machine<any>,
  args: (k: number, i: number) => ({ index: k, qty: i & 1023 }),
  read: (s: any, k: number) => s.list[k].qty as number,
});

const CASES: Case[] = [
  { layout: 'one keyed map', items: 1_000, samples: 20_000, warmup: 3_000, make: keyed(1_000) },
  { layout: 'one keyed map', items: 10_000, samples: 500, warmup: 100, make: keyed(10_000) },
  { layout: 'one keyed map', items: 100_000, samples: 20, warmup: 5, make: keyed(100_000) },
  { layout: `√n buckets (${bucketCount(1_000)}) of keyed maps`, items: 1_000, samples: 20_000, warmup: 3_000, make: bucketed(1_000) },
  { layout: `√n buckets (${bucketCount(100_000)}) of keyed maps`, items: 100_000, samples: 2_000, warmup: 300, make: bucketed(100_000) },
  { layout: 'one KeyedMap', items: 1_000, samples: 20_000, warmup: 3_000, make: trie(1_000) },
  { layout: 'one KeyedMap', items: 10_000, samples: 20_000, warmup: 3_000, make: trie(10_000) },
  { layout: 'one KeyedMap', items: 100_000, samples: 20_000, warmup: 3_000, make: trie(100_000) },
  { layout: 'array of items', items: 1_000, samples: 20_000, warmup: 3_000, make: list(1_000) },
  { layout: 'array of items', items: 100_000, samples: 300, warmup: 50, make: list(100_000) },
];
const BLOCK = 1_000;

function measure(c: Case): { bytes: number; submit: Stats; apply: Stats } {
  const { machine, args, read } = c.make();
  const submitUs: number[] = [];
  const applyUs: number[] = [];
  let engine!: ViewEngine<any>;
  let k = 0;
  gc();
  for (let i = 0; i < c.warmup + c.samples; i++) {
    if (i % BLOCK === 0) engine = new ViewEngine(machine, { clientId: 'bench', now: () => 0 });
    k = (k * 31 + 17) % c.items;
    const a = args(k, i);
    const t0 = performance.now();
    const op = engine.submit('setQty', a);
    const s = engine.getState('submitted');
    const t1 = performance.now();
    sink.n += read(s, k) + op.seq;
    if (i % 10 === 9) engine.durable(op.seq);
    engine.drain();
    if (i >= c.warmup) submitUs.push((t1 - t0) * 1000);
  }
  gc();
  const base = machine.initial;
  const n = Math.min(c.samples, 5_000);
  for (let i = 0; i < c.warmup + n; i++) {
    k = (k * 31 + 17) % c.items;
    const inv = { client: 'bench', seq: i + 1, name: 'setQty', args: args(k, i), author: 'bench' };
    const t0 = performance.now();
    const r = applyOp(machine, base, inv, 1);
    const t1 = performance.now();
    sink.o = r.state;
    if (i >= c.warmup) applyUs.push((t1 - t0) * 1000);
  }
  return { bytes: jsonBytes(base), submit: stats(submitUs), apply: stats(applyUs) };
}

function argsCheck(): Stats {
  const xs: number[] = [];
  for (let i = 0; i < 25_000; i++) {
    const a = { id: itemId(i % 1000), qty: i & 1023 };
    const t0 = performance.now();
    const bad = findNonJson(a, 'args');
    const frozen = deepFreeze(structuredClone(a));
    const t1 = performance.now();
    sink.n += (bad ? 1 : 0) + frozen.qty;
    if (i >= 5_000) xs.push((t1 - t0) * 1000);
  }
  return stats(xs);
}

export function run(): Section {
  const timerUs = timerOverheadUs();
  const rows: Row[] = [];
  let goal: Stats | undefined;
  const trieAt = new Map<number, Stats>();
  for (const c of CASES) {
    const m = measure(c);
    if (c.layout === 'one keyed map' && c.items === 1_000) goal = m.submit;
    if (c.layout === 'one KeyedMap') trieAt.set(c.items, m.submit);
    rows.push({
      layout: c.layout,
      items: c.items,
      'JSON bytes': m.bytes,
      samples: m.submit.n,
      'submit+getState median µs': m.submit.median,
      'p99 µs': m.submit.p99,
      'applyOp alone median µs': m.apply.median,
    });
  }
  const ac = argsCheck();
  const g = goal!;
  const t1k = trieAt.get(1_000)!;
  const growth10k = trieAt.get(10_000)!.median / t1k.median;
  const growth100k = trieAt.get(100_000)!.median / t1k.median;
  return {
    id: 'submit',
    title: 'Submit → Submitted view (small op: set one field of one item)',
    command: 'node --expose-gc --import tsx bench/src/submit.bench.ts',
    params: {
      cases: CASES.map(({ layout, items, samples, warmup }) => ({ layout, items, samples, warmup })),
      block: BLOCK,
      op: 'setQty({ id, qty }): items[id].qty = qty (array layout: list[index].qty = qty)',
      timerOverheadUs: timerUs,
      argsCheckMedianUs: ac.median,
    },
    rows,
    goals: [
      { what: 'submit + getState, 1,000 items in one keyed map, median', goal: '< 50 µs', measured: `${fmt(g.median)} µs`, met: g.median < 50 },
      { what: 'submit + getState, 1,000 items in one keyed map, p99', goal: '< 50 µs', measured: `${fmt(g.p99)} µs`, met: g.p99 < 50 },
      { what: 'the same, 1,000 items in one KeyedMap, median', goal: '< 50 µs', measured: `${fmt(t1k.median)} µs`, met: t1k.median < 50 },
      { what: 'the same, 1,000 items in one KeyedMap, p99', goal: '< 50 µs', measured: `${fmt(t1k.p99)} µs`, met: t1k.p99 < 50 },
      // A cost that does not grow with the map: the trie adds a level of branches per 32× keys.
      { what: 'KeyedMap: median at 10,000 items ÷ at 1,000', goal: '≤ 1.5', measured: `${fmt(growth10k)}×`, met: growth10k <= 1.5 },
      { what: 'KeyedMap: median at 100,000 items ÷ at 1,000', goal: '≤ 1.5', measured: `${fmt(growth100k)}×`, met: growth100k <= 1.5 },
    ],
    notes: [
      `performance.now() overhead (median of back-to-back calls): ${fmt(timerUs)} µs, included in every sample.`,
      `submit's argument check (findNonJson + structuredClone + deepFreeze of {id, qty}): median ${fmt(ac.median)} µs.`,
      'Mutative copies each container on the written path: a write into a keyed map of N items makes a shallow copy of N keys, and V8 copies large string-keyed (dictionary-mode) objects slowly. A KeyedMap is a hash trie of small leaves: a write copies one leaf of at most 32 entries and the branches above it.',
    ],
  };
}

await standalone(import.meta.url, run);
