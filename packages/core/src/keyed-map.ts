/**
 * A keyed map whose writes do not copy the map (issue 14). A plain object used
 * as a map is copied whole by every op that writes one of its keys (the op's draft copies each
 * container it writes, and V8 copies a large object one key at a time): 45 µs at 1,000 keys, 1.7
 * ms at 10,000, on the submitter, the server and every client. A `KeyedMap` is still plain JSON
 * data (it is stored, sent and checkpointed like any state), shaped as a hash trie: leaves of at
 * most LEAF_MAX entries under branches of FANOUT children, so a write copies one small leaf and
 * the few branches above it.
 *
 * The shape is a function of the set of keys alone: a node is a branch exactly when more than
 * LEAF_MAX keys hash into it (and it is shallower than MAX_DEPTH); inserting splits the leaf that
 * grew past it, deleting collapses the highest branch that fell to it. Two replicas holding the
 * same entries hold the same tree, whatever order the ops came in, and every replica applies the
 * same ops in the same order anyway. The hash (FNV-1a over UTF-16 code units) is the same in every
 * JavaScript engine. Iteration follows the hashes: deterministic, but not insertion order.
 *
 * Layout, for anyone reading a stored state: `{ $keyedMap: 1, size, tree }`, where a node is a
 * leaf `{ key: value, ... }` or a branch `[count, child0, ..., child31]` (a child is a node, or
 * null when no key hashes into it); the child of a key at depth d is picked by its hash's bits
 * 5d to 5d + 4.
 */
import { HerculesError } from './errors.ts';

/** Entries a leaf holds before it splits into a branch (an op's draft copies a leaf with a spread; Mutative, the drafts before draft.ts, did so up to 128 keys). */
const LEAF_MAX = 32;
const BITS = 5;
const FANOUT = 1 << BITS;
const MASK = FANOUT - 1;
/** Nodes this deep are always leaves: past 32 bits of hash, only keys with equal hashes remain. */
const MAX_DEPTH = Math.ceil(32 / BITS);

export type KeyedMapLeaf<V> = { readonly [key: string]: V };
export type KeyedMapBranch<V> = readonly [count: number, ...children: (KeyedMapNode<V> | null)[]];
export type KeyedMapNode<V> = KeyedMapLeaf<V> | KeyedMapBranch<V>;

/** A map from string keys to JSON values, as state: see the module comment and `keyedMap`. */
export interface KeyedMap<V> {
  readonly $keyedMap: 1;
  /** The number of entries. */
  readonly size: number;
  readonly tree: KeyedMapNode<V>;
}

type Node = Record<string, unknown> | unknown[];
type Mutable = { $keyedMap: 1; size: number; tree: Node };

/** FNV-1a of `key` (exported for tests that need keys sharing hash bits). */
export function hashKey(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function slotOf(hash: number, depth: number): number {
  return 1 + ((hash >>> (BITS * depth)) & MASK);
}

export function isKeyedMap(m: unknown): m is KeyedMap<unknown> {
  const mm = m as Partial<Mutable> | null;
  return mm !== null && typeof mm === 'object' && mm.$keyedMap === 1 && typeof mm.size === 'number' && mm.tree !== null && typeof mm.tree === 'object';
}

function notAMap(call: string): HerculesError {
  return new HerculesError('bad-argument', `keyedMap.${call}: the first argument is not a KeyedMap (make one with keyedMap.empty() or keyedMap.from(...))`);
}

/** `m`'s tree, once `m` is known to be a KeyedMap: two property reads (in an op, each a proxy trap). */
function treeOf(m: unknown, call: string): Node {
  const tree = m !== null && typeof m === 'object' && (m as Partial<Mutable>).$keyedMap === 1 ? (m as Mutable).tree : undefined;
  if (tree === null || typeof tree !== 'object') throw notAMap(call);
  return tree;
}

function checkKey(key: unknown, call: string): string {
  if (typeof key !== 'string') throw new HerculesError('bad-argument', `keyedMap.${call}: keys are strings, got ${typeof key}`);
  // Assigning "__proto__" to a plain object sets its prototype instead of adding an entry.
  if (key === '__proto__') throw new HerculesError('bad-argument', `keyedMap.${call}: "__proto__" cannot be a key (choose another, e.g. prefix your keys)`);
  return key;
}

function checkWritable(m: unknown, call: string): void {
  // A draft is a proxy whose target is extensible, so this is false inside an op without a trap.
  if (Object.isFrozen(m))
    throw new HerculesError(
      'bad-argument',
      `keyedMap.${call} changes a map in an op's draft (or one you are building); this one is a frozen snapshot: call it inside an op, on the state the op receives`,
    );
}

function isBranch(n: Node): n is unknown[] {
  return Array.isArray(n);
}

function leafOf(entries: readonly (readonly [string, unknown, ...unknown[]])[]): Record<string, unknown> {
  const leaf: Record<string, unknown> = {};
  for (const [k, v] of entries) leaf[k] = v;
  return leaf;
}

/** The canonical node for `entries` (all hashing to this node) at `depth`. */
function build(entries: readonly (readonly [string, unknown, number])[], depth: number): Node {
  if (entries.length <= LEAF_MAX || depth >= MAX_DEPTH) return leafOf(entries);
  const groups: (readonly [string, unknown, number])[][] = Array.from({ length: FANOUT }, () => []);
  for (const e of entries) groups[slotOf(e[2], depth) - 1].push(e);
  const branch: unknown[] = [entries.length];
  for (const g of groups) branch.push(g.length === 0 ? null : build(g, depth + 1));
  return branch;
}

/**
 * Every entry under a node, with its key's hash. Inside an op the node is a draft and so are the
 * values read from it: a rebuilt leaf holds the drafts, so a value the same op changes later
 * (`keyedMap.get(s.m, k)!.qty = 3` after a split) is still changed through its draft, and
 * the draft (draft.ts) puts the final values in place when the op ends. (Plain copies would hold the frozen
 * snapshot's values, which such a write would hit.)
 */
function collect(n: Node | null, out: [string, unknown, number][]): void {
  if (n === null) return;
  if (isBranch(n)) {
    for (let i = 1; i < n.length; i++) collect(n[i] as Node | null, out);
    return;
  }
  for (const k of Object.keys(n)) out.push([k, n[k], hashKey(k)]);
}

function* walk<V>(n: Node | null): Generator<[string, V]> {
  if (n === null) return;
  if (isBranch(n)) {
    for (let i = 1; i < n.length; i++) yield* walk<V>(n[i] as Node | null);
    return;
  }
  for (const k of Object.keys(n)) yield [k, n[k] as V];
}

/** A branch on the way down to a key, with the container and slot that hold it. */
interface Step {
  node: unknown[];
  parent: Record<string | number, unknown>;
  slot: string | number;
}

/** The way down to `key`'s leaf: the branches passed, the leaf (null: none yet) and what holds it. */
function descend(
  m: Mutable,
  tree: Node,
  key: string,
): { branches: Step[]; parent: Record<string | number, unknown>; slot: string | number; leaf: Record<string, unknown> | null; depth: number } {
  const h = hashKey(key);
  const branches: Step[] = [];
  let parent: Record<string | number, unknown> = m;
  let slot: string | number = 'tree';
  let n: Node | null = tree;
  let depth = 0;
  for (; n !== null && isBranch(n); depth++) {
    branches.push({ node: n, parent, slot });
    parent = n as unknown as Record<number, unknown>;
    slot = slotOf(h, depth);
    n = n[slot] as Node | null;
  }
  return { branches, parent, slot, leaf: n, depth };
}

/** One side of each entry (the map was checked when the call was made, not at the first `next`). */
function* pick<V, I extends 0 | 1>(entries: Iterable<[string, V]>, i: I): Generator<I extends 0 ? string : V> {
  for (const e of entries) yield e[i] as I extends 0 ? string : V;
}

function leafFor(tree: Node, key: string): Record<string, unknown> | null {
  const h = hashKey(key);
  let n: Node | null = tree;
  for (let d = 0; n !== null && isBranch(n); d++) n = n[slotOf(h, d)] as Node | null;
  return n;
}

/** `keyedMap.get`, on its own so a bundle that needs only it (the text's paths) leaves the rest out. */
export function keyedMapGet<V>(m: KeyedMap<V>, key: string): V | undefined {
  const leaf = leafFor(treeOf(m, 'get'), checkKey(key, 'get'));
  return leaf !== null && Object.hasOwn(leaf, key) ? (leaf[key] as V) : undefined;
}

/**
 * Functions over `KeyedMap`s. Read with `get`, `has`, `size`, `entries` (on a snapshot or in an
 * op); write with `set` and `delete` inside an op, on the state the op receives:
 *
 *   initial: { cells: keyedMap.empty<Cell>() },
 *   ops: { setCell(s, { id, cell }) { keyedMap.set(s.cells, id, cell) } }
 *   ...
 *   keyedMap.get(room.getState('submitted').cells, id)
 *
 * A value read with `get` inside an op is part of the draft: change it in place
 * (`keyedMap.get(s.cells, id)!.qty = 3`) and only its leaf is copied.
 */
export const keyedMap = {
  /** A new empty map (for `initial`, or to assign inside an op). */
  empty<V>(): KeyedMap<V> {
    return { $keyedMap: 1, size: 0, tree: {} };
  },

  /** A new map holding `entries`: an object's own entries, or [key, value] pairs (later pairs win). */
  from<V>(entries: Readonly<Record<string, V>> | Iterable<readonly [string, V]>): KeyedMap<V> {
    const byKey = new Map<string, V>();
    const pairs: Iterable<readonly [string, V]> =
      entries !== null && typeof entries === 'object' && Symbol.iterator in entries
        ? (entries as Iterable<readonly [string, V]>)
        : Object.entries(entries as Record<string, V>);
    for (const [k, v] of pairs) {
      checkKey(k, 'from');
      if (v === undefined) throw new HerculesError('bad-argument', `keyedMap.from: the value of "${k}" is undefined; state holds JSON values only`);
      byKey.set(k, v);
    }
    const all = Array.from(byKey, ([k, v]) => [k, v, hashKey(k)] as const);
    return { $keyedMap: 1, size: all.length, tree: build(all, 0) as KeyedMapNode<V> };
  },

  /** Whether `m` is a KeyedMap (by its shape). */
  is: isKeyedMap,

  size(m: KeyedMap<unknown>): number {
    treeOf(m, 'size');
    const n = (m as Partial<Mutable>).size;
    if (typeof n !== 'number') throw notAMap('size');
    return n;
  },

  /** The value of `key`, or undefined. In an op, a draft: changing it changes the entry. */
  get: keyedMapGet,

  has(m: KeyedMap<unknown>, key: string): boolean {
    const leaf = leafFor(treeOf(m, 'has'), checkKey(key, 'has'));
    return leaf !== null && Object.hasOwn(leaf, key);
  },

  /** Set `key` to `value` (JSON data; not undefined). Inside an op, or on a map being built. */
  set<V>(m: KeyedMap<V>, key: string, value: V): void {
    const tree = treeOf(m, 'set');
    const mm = m as unknown as Mutable;
    checkKey(key, 'set');
    checkWritable(mm, 'set');
    if (value === undefined)
      throw new HerculesError('bad-argument', `keyedMap.set("${key}"): the value is undefined; to remove the entry, call keyedMap.delete`);
    const { branches, parent, slot, leaf: n, depth } = descend(mm, tree, key);
    if (n !== null && Object.hasOwn(n, key)) {
      n[key] = value;
      return;
    }
    for (const b of branches) (b.node[0] as number) += 1;
    mm.size += 1;
    if (n === null) {
      parent[slot] = { [key]: value };
      return;
    }
    n[key] = value;
    if (depth < MAX_DEPTH && Object.keys(n).length > LEAF_MAX) {
      const all: [string, unknown, number][] = [];
      collect(n, all);
      parent[slot] = build(all, depth);
    }
  },

  /** Remove `key`; whether it was there. Inside an op, or on a map being built. */
  delete(m: KeyedMap<unknown>, key: string): boolean {
    const tree = treeOf(m, 'delete');
    const mm = m as unknown as Mutable;
    checkKey(key, 'delete');
    checkWritable(mm, 'delete');
    const { branches: path, parent, slot, leaf: n } = descend(mm, tree, key);
    if (n === null || !Object.hasOwn(n, key)) return false;
    delete n[key];
    mm.size -= 1;
    for (const p of path) (p.node[0] as number) -= 1;
    // The highest branch left with few enough keys becomes a leaf (every branch under it has fewer).
    const top = path.find((p) => (p.node[0] as number) <= LEAF_MAX);
    if (top) {
      const all: [string, unknown, number][] = [];
      collect(top.node, all);
      top.parent[top.slot] = leafOf(all);
    } else if (path.length > 0 && Object.keys(n).length === 0) {
      parent[slot] = null;
    }
    return true;
  },

  /** The entries, in the order of the keys' hashes (the same on every replica). */
  entries<V>(m: KeyedMap<V>): IterableIterator<[string, V]> {
    return walk<V>(treeOf(m, 'entries'));
  },

  keys(m: KeyedMap<unknown>): IterableIterator<string> {
    return pick(walk(treeOf(m, 'keys')), 0);
  },

  values<V>(m: KeyedMap<V>): IterableIterator<V> {
    return pick(walk<V>(treeOf(m, 'values')), 1);
  },

  /** A plain object of the entries (a new object: O(size)). */
  toObject<V>(m: KeyedMap<V>): Record<string, V> {
    const out: Record<string, V> = {};
    for (const [k, v] of walk<V>(treeOf(m, 'toObject'))) out[k] = v;
    return out;
  },
};
