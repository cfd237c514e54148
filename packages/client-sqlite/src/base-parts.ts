/**
 * A base stored in parts, so that saving it writes what changed, not the whole state (issue 43:
 * at 100k keys a whole-state save every 2 s took 14.7 % of a client process). Each `keyedMap`
 * at the top level of the state is kept as one row per node of its trie (a leaf of at most 32
 * entries, or a branch that says which of its children exist), keyed by the node's path; the
 * rest of the state is the "skeleton", written whole, with those maps' trees left out (null).
 *
 * Snapshots are immutable (frozen), so a node that is the same object as in the last base
 * holds the same data: a save compares the new state with the one last saved by reference and
 * writes the nodes on the paths that changed (a leaf and the few branches above it per key
 * written), deleting those that went (a leaf split into a branch, a branch collapsed).
 */
import { keyedMap, type KeyedMap } from '@hercules/core';

/** A node of a keyedMap's trie, as stored: a leaf (an object) or a branch ([count, ...children]). */
type TrieNode = Record<string, unknown> | readonly unknown[];

/** What a save does to the part rows of one room: rows to write (id -> JSON) and subtrees to delete. */
export interface PartChanges {
  /** The state without its top-level keyedMaps' trees (JSON). */
  skeleton: string;
  put: Map<string, string>;
  /** Delete the rows of these ids and every id under them. */
  drop: string[];
  /** Delete every part row of the room first (a base written whole). */
  dropAll: boolean;
}

/** The id of the node at `path` (a top-level key, then child slots). */
const idOf = (path: readonly (string | number)[]) => JSON.stringify(path);

/** The ids of the nodes under `id` start with this. */
export const under = (id: string) => `${id.slice(0, -1)},`;

function topMaps(state: unknown): Map<string, KeyedMap<unknown>> {
  const out = new Map<string, KeyedMap<unknown>>();
  if (state === null || typeof state !== 'object' || Array.isArray(state)) return out;
  for (const [k, v] of Object.entries(state)) if (keyedMap.is(v)) out.set(k, v);
  return out;
}

/** The state with its top-level keyedMaps' trees left out, as JSON. */
function skeletonOf(state: unknown, maps: Map<string, KeyedMap<unknown>>): string {
  if (maps.size === 0) return JSON.stringify(state);
  const s: Record<string, unknown> = { ...(state as Record<string, unknown>) };
  for (const [k, m] of maps) s[k] = { $keyedMap: 1, size: m.size, tree: null };
  return JSON.stringify(s);
}

/** The row of one node: a leaf as it is, a branch as [count, 0|1 per child]. */
function rowOf(node: TrieNode): string {
  if (!Array.isArray(node)) return JSON.stringify(node);
  return JSON.stringify(node.map((c, i) => (i === 0 ? c : c === null ? 0 : 1)));
}

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
    if (prevBranch) ch.drop.push(under(id)); // a branch collapsed into this leaf
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

/** The node at `id` and its subtree, from the rows read back (id -> parsed row). */
function buildNode(id: string, rows: Map<string, unknown>): TrieNode {
  const row = rows.get(id);
  if (row === undefined) throw new Error(`base part ${id} is missing`);
  if (!Array.isArray(row)) return row as Record<string, unknown>;
  const path = JSON.parse(id) as (string | number)[];
  return row.map((c, i) => (i === 0 ? c : c === 0 ? null : buildNode(idOf([...path, i]), rows)));
}

/** A keyedMap of the skeleton, its tree in part rows. */
function isLeftOut(v: unknown): v is { $keyedMap: 1; tree: null } {
  return v !== null && typeof v === 'object' && (v as { $keyedMap?: unknown }).$keyedMap === 1 && (v as { tree?: unknown }).tree === null;
}

/** The state saved as `skeleton` and part rows (id -> JSON). */
export function joinParts(skeleton: string, rows: Map<string, string>): unknown {
  const state = JSON.parse(skeleton) as unknown;
  if (rows.size === 0 || state === null || typeof state !== 'object') return state;
  const parsed = new Map<string, unknown>();
  for (const [id, json] of rows) parsed.set(id, JSON.parse(json));
  const s = state as Record<string, unknown>;
  for (const [k, v] of Object.entries(s)) {
    if (!isLeftOut(v)) continue;
    s[k] = { ...v, tree: buildNode(idOf([k]), parsed) };
  }
  return state;
}
