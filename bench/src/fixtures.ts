/**
 * Workloads shared by the benchmarks: a keyed-objects state of a chosen size, and the paper's
 * byte-array benchmark app (§7) in two JSON layouts.
 */
import { defineMachine, keyedMap, type KeyedMap, type OpInvocation } from '@hercules/core';
import { Rng } from '@hercules/test-utils';

// ------------------------------------------------------------------ keyed objects

export interface Item {
  id: string;
  title: string;
  qty: number;
  price: number;
  done: boolean;
  tags: string[];
  owner: { name: string; team: string };
}

export interface KeyedState {
  /** Bumped by nothing; read by benchmarks as a cheap dead-code guard. */
  size: number;
  items: Record<string, Item>;
}

export const itemId = (i: number) => `item-${i.toString(36).padStart(5, '0')}`;

function makeItem(i: number): Item {
  return {
    id: itemId(i),
    title: `Item number ${i} with a short title`,
    qty: i % 97,
    price: ((i * 7919) % 10_000) / 100,
    done: i % 3 === 0,
    tags: ['alpha', 'beta', `t${i % 17}`],
    owner: { name: `user-${i % 1000}`, team: `team-${i % 13}` },
  };
}

/** JSON bytes of one item plus its key: used to size states. */
export const ITEM_BYTES = JSON.stringify({ [itemId(0)]: makeItem(0) }).length;

export function keyedState(items: number): KeyedState {
  const out: Record<string, Item> = {};
  for (let i = 0; i < items; i++) out[itemId(i)] = makeItem(i);
  return { size: items, items: out };
}

/** Number of items for a state of about `bytes` bytes of JSON. */
export const itemsForBytes = (bytes: number) => Math.max(1, Math.round(bytes / ITEM_BYTES));

export const jsonBytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

/** A keyed machine: `setQty` is the small op (one field of one item). */
export function keyedMachine(initial: KeyedState) {
  return defineMachine({
    name: 'bench-keyed',
    version: 1,
    initial,
    ops: {
      setQty(s: KeyedState, a: { id: string; qty: number }) {
        s.items[a.id].qty = a.qty;
      },
    },
  });
}

/** The same items in a `KeyedMap` (core's hash trie): the app writes one map, the op copies a leaf. */
export interface KeyedMapState {
  size: number;
  items: KeyedMap<Item>;
}

export function keyedMapState(items: number): KeyedMapState {
  return { size: items, items: keyedMap.from(keyedState(items).items) };
}

export function keyedMapMachine(initial: KeyedMapState) {
  return defineMachine({
    name: 'bench-keyed-map',
    version: 1,
    initial,
    ops: {
      setQty(s: KeyedMapState, a: { id: string; qty: number }) {
        keyedMap.get(s.items, a.id)!.qty = a.qty;
      },
    },
  });
}

/** The op body alone, for Mutative/Immer/plain comparisons. */
export function setQty(s: KeyedState, a: { id: string; qty: number }): void {
  s.items[a.id].qty = a.qty;
}

// ------------------------------------------------------------------ the paper's byte array (§7)

/** 100 KB shared byte array, 500 increments per op (paper §7.3). */
export const BYTES = 100_000;
export const INCREMENTS = 500;
export const CHUNK = 1_000;
export const CHUNKS = BYTES / CHUNK;

/**
 * `inc({ offset })` adds 1 (mod 256: they are bytes) to INCREMENTS contiguous elements starting
 * at `offset`, wrapping around the end of the array.
 */
export interface IncArgs {
  offset: number;
}

export interface FlatState {
  bytes: number[];
}
export interface ChunkedState {
  chunks: number[][];
}

export function incFlat(s: FlatState, a: IncArgs): void {
  const b = s.bytes;
  for (let i = 0; i < INCREMENTS; i++) {
    const j = (a.offset + i) % BYTES;
    b[j] = (b[j] + 1) & 255;
  }
}

export function incChunked(s: ChunkedState, a: IncArgs): void {
  const chunks = s.chunks;
  let i = 0;
  while (i < INCREMENTS) {
    const j = (a.offset + i) % BYTES;
    const ci = (j / CHUNK) | 0;
    const c = chunks[ci];
    let k = j - ci * CHUNK;
    const end = Math.min(CHUNK, k + (INCREMENTS - i));
    for (; k < end; k++, i++) c[k] = (c[k] + 1) & 255;
  }
}

export const flatInitial = (): FlatState => ({ bytes: new Array<number>(BYTES).fill(0) });
export const chunkedInitial = (): ChunkedState => ({
  chunks: Array.from({ length: CHUNKS }, () => new Array<number>(CHUNK).fill(0)),
});

/** An op that the app rejects (throws) without touching the state, e.g. a failed validation. */
export function reject(_s: unknown, _a: unknown): void {
  throw new Error('rejected by the app');
}

export const flatMachine = defineMachine({ name: 'bench-bytes-flat', version: 1, initial: flatInitial(), ops: { inc: incFlat, reject } });
export const chunkedMachine = defineMachine({ name: 'bench-bytes-chunked', version: 1, initial: chunkedInitial(), ops: { inc: incChunked, reject } });

/** Deterministic offsets (the seeded Rng of @hercules/test-utils), so every run applies the same ops. */
export function offsets(n: number, seed: number): number[] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, () => rng.next() % BYTES);
}

/** Log entries (with positions) of `client`'s inc ops. */
export function incOps(client: string, n: number, seed: number, firstSeq = 1): (OpInvocation & { pos: number })[] {
  return offsets(n, seed).map((offset, i) => ({
    pos: 0,
    client,
    seq: firstSeq + i,
    name: 'inc',
    args: { offset },
    author: client,
  }));
}

// ------------------------------------------------------------------ other layouts of the same items

/** Items split over ~√n buckets keyed by a hash of the id: an op copies two small maps. */
export interface BucketedState {
  size: number;
  buckets: Record<string, Record<string, Item>>;
}

export function bucketCount(items: number): number {
  return Math.max(1, Math.ceil(Math.sqrt(items)));
}

/** FNV-1a of the id, modulo the bucket count: what an op would compute from the id. */
export function bucketOf(id: string, buckets: number): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return `b${(h >>> 0) % buckets}`;
}

export function bucketedState(items: number): BucketedState {
  const nb = bucketCount(items);
  const buckets: Record<string, Record<string, Item>> = {};
  for (let b = 0; b < nb; b++) buckets[`b${b}`] = {};
  for (let i = 0; i < items; i++) buckets[bucketOf(itemId(i), nb)][itemId(i)] = makeItem(i);
  return { size: items, buckets };
}

export function bucketedMachine(initial: BucketedState) {
  const nb = Object.keys(initial.buckets).length;
  return defineMachine({
    name: 'bench-bucketed',
    version: 1,
    initial,
    ops: {
      setQty(s: BucketedState, a: { id: string; qty: number }) {
        s.buckets[bucketOf(a.id, nb)][a.id].qty = a.qty;
      },
    },
  });
}

/** Items in an array; the op addresses an item by index. */
export interface ListState {
  size: number;
  list: Item[];
}

export function listState(items: number): ListState {
  return { size: items, list: Array.from({ length: items }, (_, i) => makeItem(i)) };
}

export function listMachine(initial: ListState) {
  return defineMachine({
    name: 'bench-list',
    version: 1,
    initial,
    ops: {
      setQty(s: ListState, a: { index: number; qty: number }) {
        s.list[a.index].qty = a.qty;
      },
    },
  });
}

/**
 * A copy of `fn` with its own JIT feedback. V8 keeps type feedback per function: an op body
 * that sees Mutative proxies, Immer proxies and plain arrays goes megamorphic and slows every
 * caller. In the engine an op only ever sees Mutative drafts, so each competitor in a
 * comparison gets its own copy. `fn` may only use its parameters, globals and `env`.
 */
export function fresh<F extends (...args: any[]) => any>(fn: F, env: Record<string, unknown> = {}): F {
  const all = { BYTES, INCREMENTS, CHUNK, CHUNKS, ...env };
  const names = Object.keys(all);
  return new Function(...names, `return (${fn.toString()});`)(...names.map((n) => all[n as keyof typeof all])) as F;
}
