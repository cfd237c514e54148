/**
 * 4. Mutative vs Immer for the op application itself: the same op bodies on the same frozen
 * states, both libraries producing frozen, structurally shared results (Mutative with
 * enableAutoFreeze as the engine uses it, Immer with its default autoFreeze). A hand-written
 * copy-on-write update (spread/slice + Object.freeze, no library) is the floor.
 *
 * Cases:
 *   keyed 1 MB        setQty on one item of a ~1 MB keyed map (one map of 5,618 items)
 *   keyed 1 MB, √n    the same items split over √n buckets
 *   bytes flat/chunked  one inc op (500 increments) on the 100,000-element byte array
 *   100 ops in one draft  the rebase workload: 100 inc ops in one create/produce call
 *
 * Each repetition calls each competitor `batch` times from the same base (results are not
 * chained) and divides; competitors are interleaved in every repetition.
 */
import { create } from 'mutative';
import { produce } from 'immer';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import {
  BYTES,
  CHUNK,
  INCREMENTS,
  bucketOf,
  fresh,
  bucketedState,
  chunkedInitial,
  flatInitial,
  incChunked,
  incFlat,
  itemId,
  itemsForBytes,
  jsonBytes,
  keyedState,
  offsets,
  setQty,
  type BucketedState,
  type ChunkedState,
  type FlatState,
  type KeyedState,
} from './fixtures.ts';
import { deepFreeze } from '@hercules/core';
import { fmt, interleaved, sink, standalone, stats, type Goal, type Row, type Section } from './harness.ts';

const REPS = 11;
const WARMUP = 2;
const MUTATIVE = { enableAutoFreeze: true } as const;

function version(pkg: string): string {
  try {
    const req = createRequire(import.meta.url);
    const dir = req.resolve(`${pkg}/package.json`);
    return JSON.parse(readFileSync(dir, 'utf8')).version;
  } catch {
    return 'unknown';
  }
}

// ---------------------------------------------------------------- hand-written floors

function handKeyed(s: KeyedState, a: { id: string; qty: number }): KeyedState {
  const item = Object.freeze({ ...s.items[a.id], qty: a.qty });
  return Object.freeze({ ...s, items: Object.freeze({ ...s.items, [a.id]: item }) });
}

function handBucketed(s: BucketedState, a: { id: string; qty: number }, nb: number): BucketedState {
  const b = bucketOf(a.id, nb);
  const bucket = s.buckets[b];
  const item = Object.freeze({ ...bucket[a.id], qty: a.qty });
  return Object.freeze({ ...s, buckets: Object.freeze({ ...s.buckets, [b]: Object.freeze({ ...bucket, [a.id]: item }) }) });
}

const handIncFlat = fresh(incFlat);
const handIncChunked = fresh(incChunked);

function handFlat(s: FlatState, offs: readonly number[]): FlatState {
  // Spread, not slice: slice and concat leave V8's fast path on frozen arrays.
  const b = [...s.bytes];
  for (const o of offs) handIncFlat({ bytes: b }, { offset: o });
  return Object.freeze({ bytes: Object.freeze(b) as number[] });
}

function handChunked(s: ChunkedState, offs: readonly number[]): ChunkedState {
  const chunks = [...s.chunks];
  const copied = new Uint8Array(chunks.length);
  // Copy each touched chunk once, then run the op on the mutable copies.
  for (const o of offs) {
    for (let i = 0; i < INCREMENTS; i += CHUNK - ((o + i) % CHUNK)) {
      const ci = (((o + i) % BYTES) / CHUNK) | 0;
      if (!copied[ci]) {
        copied[ci] = 1;
        chunks[ci] = [...chunks[ci]];
      }
    }
    const last = (((o + INCREMENTS - 1) % BYTES) / CHUNK) | 0;
    if (!copied[last]) {
      copied[last] = 1;
      chunks[last] = [...chunks[last]];
    }
    handIncChunked({ chunks }, { offset: o });
  }
  for (let ci = 0; ci < chunks.length; ci++) if (copied[ci]) Object.freeze(chunks[ci]);
  return Object.freeze({ chunks: Object.freeze(chunks) as number[][] });
}

// ---------------------------------------------------------------- cases

interface Case {
  name: string;
  bytes: number;
  batch: number;
  mutative: (i: number) => unknown;
  immer: (i: number) => unknown;
  hand: (i: number) => unknown;
}

function cases(): Case[] {
  const items = itemsForBytes(1_000_000);
  const keyed = deepFreeze(keyedState(items));
  const ids = Array.from({ length: items }, (_, i) => itemId(i));
  const bucketed = deepFreeze(bucketedState(items));
  const nb = Object.keys(bucketed.buckets).length;
  const flat = deepFreeze(flatInitial());
  const chunked = deepFreeze(chunkedInitial());
  const offs = offsets(1_000, 0xabc);
  const hundred = (i: number) => offs.slice((i * 100) % 900, ((i * 100) % 900) + 100);
  const kArgs = (i: number) => ({ id: ids[(i * 7919) % items], qty: i & 1023 });
  const bSet = (s: BucketedState, a: { id: string; qty: number }) => {
    s.buckets[bucketOf(a.id, nb)][a.id].qty = a.qty;
  };
  // Each library gets its own copy of every op body (see `fresh`).
  const M = { setQty: fresh(setQty), bSet: fresh(bSet, { bucketOf, nb }), incFlat: fresh(incFlat), incChunked: fresh(incChunked) };
  const I = { setQty: fresh(setQty), bSet: fresh(bSet, { bucketOf, nb }), incFlat: fresh(incFlat), incChunked: fresh(incChunked) };
  return [
    {
      name: `keyed 1 MB: one map of ${items.toLocaleString('en-US')} items, set one field`,
      bytes: jsonBytes(keyed),
      batch: 20,
      mutative: (i) => create(keyed, (d) => M.setQty(d, kArgs(i)), MUTATIVE),
      immer: (i) => produce(keyed, (d) => I.setQty(d as KeyedState, kArgs(i))),
      hand: (i) => handKeyed(keyed, kArgs(i)),
    },
    {
      name: `keyed 1 MB: ${nb} buckets of ~${Math.round(items / nb)} items, set one field`,
      bytes: jsonBytes(bucketed),
      batch: 200,
      mutative: (i) => create(bucketed, (d) => M.bSet(d, kArgs(i)), MUTATIVE),
      immer: (i) => produce(bucketed, (d) => I.bSet(d as BucketedState, kArgs(i))),
      hand: (i) => handBucketed(bucketed, kArgs(i), nb),
    },
    {
      name: 'bytes flat number[100000]: one inc op (500 increments)',
      bytes: jsonBytes(flat),
      batch: 10,
      mutative: (i) => create(flat, (d) => M.incFlat(d, { offset: offs[i % 1000] }), MUTATIVE),
      immer: (i) => produce(flat, (d) => I.incFlat(d as FlatState, { offset: offs[i % 1000] })),
      hand: (i) => handFlat(flat, [offs[i % 1000]]),
    },
    {
      name: 'bytes chunked number[100][1000]: one inc op (500 increments)',
      bytes: jsonBytes(chunked),
      batch: 50,
      mutative: (i) => create(chunked, (d) => M.incChunked(d, { offset: offs[i % 1000] }), MUTATIVE),
      immer: (i) => produce(chunked, (d) => I.incChunked(d as ChunkedState, { offset: offs[i % 1000] })),
      hand: (i) => handChunked(chunked, [offs[i % 1000]]),
    },
    {
      name: 'bytes flat: 100 inc ops in one draft (the rebase)',
      bytes: jsonBytes(flat),
      batch: 1,
      mutative: (i) =>
        create(
          flat,
          (d) => {
            for (const o of hundred(i)) M.incFlat(d, { offset: o });
          },
          MUTATIVE,
        ),
      immer: (i) =>
        produce(flat, (d) => {
          for (const o of hundred(i)) I.incFlat(d as FlatState, { offset: o });
        }),
      hand: (i) => handFlat(flat, hundred(i)),
    },
    {
      name: 'bytes chunked: 100 inc ops in one draft (the rebase)',
      bytes: jsonBytes(chunked),
      batch: 1,
      mutative: (i) =>
        create(
          chunked,
          (d) => {
            for (const o of hundred(i)) M.incChunked(d, { offset: o });
          },
          MUTATIVE,
        ),
      immer: (i) =>
        produce(chunked, (d) => {
          for (const o of hundred(i)) I.incChunked(d as ChunkedState, { offset: o });
        }),
      hand: (i) => handChunked(chunked, hundred(i)),
    },
  ];
}

/** The three implementations must agree, and their results must be frozen. */
function check(c: Case): void {
  const a = c.mutative(3),
    b = c.immer(3),
    h = c.hand(3);
  const ja = JSON.stringify(a);
  if (ja !== JSON.stringify(b) || ja !== JSON.stringify(h)) throw new Error(`${c.name}: Mutative, Immer and hand-written results differ`);
  for (const v of [a, b, h]) if (!Object.isFrozen(v)) throw new Error(`${c.name}: a result is not frozen`);
}

export function run(): Section {
  const rows: Row[] = [];
  const goals: Goal[] = [];
  let geo = 0;
  const all = cases();
  for (const c of all) {
    check(c);
    let i = 0;
    const batch = (f: (i: number) => unknown) => () => {
      for (let k = 0; k < c.batch; k++) sink.o = f(i++);
    };
    const ms = interleaved({ mutative: batch(c.mutative), immer: batch(c.immer), hand: batch(c.hand) }, REPS, WARMUP, { gcBetween: true });
    const per = (k: string) => stats(ms[k].map((x) => (x * 1000) / c.batch));
    const m = per('mutative'),
      im = per('immer'),
      h = per('hand');
    geo += Math.log(im.median / m.median);
    rows.push({
      case: c.name,
      'Mutative µs': m.median,
      'Immer µs': im.median,
      'hand-written µs': h.median,
      'Immer ÷ Mutative': im.median / m.median,
      'Mutative ÷ hand': m.median / h.median,
    });
  }
  const gm = Math.exp(geo / all.length);
  goals.push({ what: 'Mutative faster than Immer (geometric mean of Immer ÷ Mutative over the cases)', goal: '> 1×', measured: `${fmt(gm)}×`, met: gm > 1 });
  return {
    id: 'opApply',
    title: 'Op application: Mutative vs Immer (frozen results, median per call)',
    command: 'node --expose-gc --import tsx bench/src/opapply.bench.ts',
    params: {
      mutative: version('mutative'),
      immer: version('immer'),
      mutativeOptions: MUTATIVE,
      immerOptions: 'defaults (autoFreeze on)',
      reps: REPS,
      warmup: WARMUP,
      nodeEnv: process.env.NODE_ENV ?? '(unset: both libraries run their development builds/checks)',
    },
    rows,
    goals,
    notes: ['hand-written = spread/slice copy of the written path + Object.freeze, no draft library: the floor for a frozen, structurally shared result.'],
  };
}

await standalone(import.meta.url, run);
