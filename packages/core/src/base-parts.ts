/**
 * A client store's base kept in parts, so that saving it writes what changed, not the whole
 * state (issue 43: at 100k keys a whole-state save every 2 s took 14.7 % of a client process).
 * Each `keyedMap` at the top level of the state is kept as one row per node of its trie (a leaf
 * of at most 32 entries, or a branch that says which of its children exist), keyed by the
 * node's path; the rest of the state is the "skeleton", written whole, with those maps' trees
 * left out (null). The SQLite store writes each row as JSON, the IndexedDB store as it is.
 *
 * Snapshots are immutable (frozen), so a node that is the same object as in the last base
 * holds the same data: a save compares the new state with the one last saved by reference and
 * writes the nodes on the paths that changed (a leaf and the few branches above it per key
 * written), deleting those that went (a leaf split into a branch, a branch collapsed).
 */
import type { KeyedMap } from './keyed-map.ts';

/** keyed-map.ts's isKeyedMap, not imported: a browser bundle holds none of keyed-map.js unless the app uses it (consumer test). */
const isKeyedMap = (v: unknown): v is KeyedMap<unknown> =>
  v !== null &&
  typeof v === 'object' &&
  (v as KeyedMap<unknown>).$keyedMap === 1 &&
  typeof (v as KeyedMap<unknown>).tree === 'object' &&
  (v as KeyedMap<unknown>).tree !== null;

/** A node of a keyedMap's trie, as held: a leaf (an object) or a branch ([count, ...children]). */
type TrieNode = Record<string, unknown> | readonly unknown[];

/** What a save does to the part rows of one room: rows to write (id -> row) and subtrees to delete. */
export interface PartChanges {
  /** The state without its top-level keyedMaps' trees (a shallow copy; the state itself if it has none). */
  skeleton: unknown;
  /** A leaf as it is (frozen: copy it before changing it), a branch as [count, 0|1 per child]. */
  put: Map<string, unknown>;
  /** Delete the rows of these ids and every id under them (partsUnder). */
  drop: string[];
  /** Delete every part row of the room first (a base written whole). */
  dropAll: boolean;
}

/** The id of the node at `path` (a top-level key, then child slots). */
const idOf = (path: readonly (string | number)[]) => JSON.stringify(path);

/** The ids of the nodes under `id` start with this (and nothing else does). */
export const partsUnder = (id: string) => `${id.slice(0, -1)},`;

function topMaps(state: unknown): Map<string, KeyedMap<unknown>> {
  const out = new Map<string, KeyedMap<unknown>>();
  if (state === null || typeof state !== 'object' || Array.isArray(state)) return out;
  for (const [k, v] of Object.entries(state)) if (isKeyedMap(v)) out.set(k, v);
  return out;
}

/** The state with its top-level keyedMaps' trees left out. */
function skeletonOf(state: unknown, maps: Map<string, KeyedMap<unknown>>): unknown {
  if (maps.size === 0) return state;
  const s: Record<string, unknown> = { ...(state as Record<string, unknown>) };
  for (const [k, m] of maps) s[k] = { $keyedMap: 1, size: m.size, tree: null };
  return s;
}

/** The row of one node: a leaf as it is, a branch as [count, 0|1 per child]. */
const rowOf = (node: TrieNode): unknown => (Array.isArray(node) ? node.map((c, i) => (i === 0 ? c : c === null ? 0 : 1)) : node);

/** Record the rows of the subtree `next` at `path`, given the one saved there (`prev`, undefined: none). */
function diffNode(prev: TrieNode | null | undefined, next: TrieNode | null, path: (string | number)[], ch: PartChanges): void {
  if (next === prev) return;
  const id = idOf(path);
  if (next === null) {
    ch.drop.push(id);
    return;
  }
  ch.put.set(id, rowOf(next));
  const prevBranch = Array.isArray(prev) ? prev : undefined;
  if (!Array.isArray(next)) {
    if (prevBranch) ch.drop.push(partsUnder(id)); // a branch collapsed into this leaf
    return;
  }
  for (let i = 1; i < next.length; i++) {
    const before = prevBranch ? (prevBranch[i] as TrieNode | null) : undefined;
    const child = next[i] as TrieNode | null;
    if (child === null && (before === null || before === undefined)) continue;
    diffNode(before, child, [...path, i], ch);
  }
}

/**
 * What to write to turn the parts saved for `prev` into those of `next`; `prev` undefined: the
 * rows held are unknown (the first save of this process), so every row is written anew.
 */
export function partChanges(prev: unknown, next: unknown): PartChanges {
  const maps = topMaps(next);
  const ch: PartChanges = { skeleton: skeletonOf(next, maps), put: new Map(), drop: [], dropAll: prev === undefined };
  const before = prev === undefined ? new Map<string, KeyedMap<unknown>>() : topMaps(prev);
  for (const [k, m] of maps) diffNode(before.get(k)?.tree as TrieNode | undefined, m.tree as TrieNode, [k], ch);
  for (const k of before.keys()) if (!maps.has(k)) ch.drop.push(idOf([k]));
  return ch;
}

/** The node at `id` and its subtree, from the rows read back (id -> row). */
function buildNode(id: string, rows: Map<string, unknown>): TrieNode {
  const row = rows.get(id);
  if (row === undefined) throw new Error(`base part ${id} is missing`);
  if (!Array.isArray(row)) return row as Record<string, unknown>;
  return row.map((c, i) => (i === 0 ? c : c === 0 ? null : buildNode(`${partsUnder(id)}${i}]`, rows))); // idOf([...path, i])
}

/** A keyedMap of the skeleton, its tree in part rows. */
function isLeftOut(v: unknown): v is { $keyedMap: 1; tree: null } {
  return v !== null && typeof v === 'object' && (v as { $keyedMap?: unknown }).$keyedMap === 1 && (v as { tree?: unknown }).tree === null;
}

/** The state saved as `skeleton` (a copy read back, which this fills in) and its part rows (id -> row). */
export function joinParts(skeleton: unknown, rows: Map<string, unknown>): unknown {
  if (rows.size === 0 || skeleton === null || typeof skeleton !== 'object') return skeleton;
  const s = skeleton as Record<string, unknown>;
  for (const [k, v] of Object.entries(s)) {
    if (!isLeftOut(v)) continue;
    s[k] = { ...v, tree: buildNode(idOf([k]), rows) };
  }
  return skeleton;
}
