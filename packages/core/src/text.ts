/**
 * A collaborative text value (issue 38): plain JSON in the state, edited by ops that name
 * characters, not indexes, so an edit keeps its place whatever was ordered before it.
 *
 * Every character has an id `[client, clock]`: the client that inserted it (the op's ctx.client,
 * which no client can forge) and a clock the client picks, above every clock it used before in
 * this text. Ids are in the op's arguments, so an op means the same on every
 * replica and in every view, even when one of the author's earlier ops was refused.
 *
 * A clock is never given twice, even by a process whose view lacks inserts it or an earlier one
 * sent (docs/spec.md, TEXT-ID-ONCE): the room's textClockFloor() is past the inserts it submitted
 * and its store holds and, the op with seq `s` using clocks below `(s + 1) * TEXT_CLOCKS_PER_SEQ`
 * (enforced here), past those of every op up to seq `u` it may lack (`textClockFloor(u)`).
 *
 * An insert names its left origin L (the character before the caret, or null: the start) and
 * right origin R (the item right after L in the full sequence, tombstones included, or null: the
 * end), as its author's Submitted view showed them; the two were adjacent there. Whatever lies
 * between L and R when the op runs was inserted by ops ordered before it that its author had not
 * seen. The new text goes after L, past every such item whose left origin is L or an item already
 * passed (earlier concurrent inserts at the same place, and what was typed after them), and
 * stops at the first other item or at R (docs/spec.md, TEXT-NO-INTERLEAVE). The server's total
 * order makes this deterministic; it needs no tie-break by id.
 *
 * Deleted characters stay as tombstones (their text dropped) so later ops can still anchor on them.
 *
 * Layout (TEXT-LAYOUT): `{ $text: 3, len, clients, next, root }`; `len` is the visible length;
 * `clients` the ids of the clients that inserted, in the order of their first insert (a run names
 * its client by its index there: a client id, a UUID, is stored once per text), `next[i]` the
 * lowest clock client `i` may use next; `root` is a tree of chunks: a branch `{ v, f, kids }`
 * holds up to BRANCH_MAX nodes, a leaf (a chunk) `{ v, f, runs }` up to CHUNK_MAX runs (`v`
 * visible and `f` total characters under the node), every leaf at the same depth. A run is a
 * tuple `[c, k, x]` or `[c, k, x, lc, lk]`: characters `[c, k]`, `[c, k+1]`, ... typed one after
 * another by one client, visible when `x` is a string (their text) and deleted when it is a
 * number (their count), the first one's left origin `[lc, lk]` (absent: the start). A run is a
 * tuple, not an object with keys, and keeps no right origin (placing an insert reads the op's R,
 * never a run's): 780,213 B of JSON for automerge-paper's end state became 380,606 (Yjs encodes
 * 311,037; docs/benchmarks.md). An edit copies one chunk of runs and the branches on its path
 * (at most BRANCH_MAX pointers a level), not the text nor a list of every chunk: the flat chunk
 * list of `$text: 2` was walked and copied per op (312 chunks at automerge-paper's end), which made
 * a keystroke in that text 1.94-2.8x CPU one in an empty text, 1.33-1.79x with the tree (docs/benchmarks.md).
 * Texts stored before (`$text: 2`, a flat `chunks` list; `$text: 1`, runs `{ c, k, t | d, l, r }`)
 * still read: every function here takes them, `compactText` reads any layout as a flat list of
 * chunks, and an op turns them into this layout (`treeText`).
 */
import { HerculesError } from './errors.ts';
import { isKeyedMap, keyedMapGet } from './keyed-map.ts';
import { current, type PlainOp } from './machine.ts';
import { MAX_OP_BYTES } from './protocol.ts';

/** A character's id: the client that inserted it and its clock. */
export type TextId = readonly [client: number, clock: number];

/**
 * A run: `[c, k, x]` or `[c, k, x, lc, lk]`: the client's index in `Text.clients`, the first
 * clock, the visible characters (a string) or the number of deleted ones, and the first
 * character's left origin `[lc, lk]` (absent: the start). Read it with `textRunText`,
 * `textRunSize` and `textRunLeft`.
 */
export type TextRun = readonly [c: number, k: number, x: string | number, lc?: number, lk?: number];

/** A leaf of a text's tree: up to CHUNK_MAX runs, `v` visible and `f` total characters. */
export interface TextChunk {
  readonly v: number;
  readonly f: number;
  readonly runs: readonly TextRun[];
}

/** A branch of a text's tree: up to BRANCH_MAX nodes (all branches, or all leaves), `v` visible and `f` total characters under it. */
export interface TextBranch {
  readonly v: number;
  readonly f: number;
  readonly kids: readonly TextNode[];
}
export type TextNode = TextChunk | TextBranch;

/** A collaborative text as state: see the module comment, `createText` and `textOps`. */
export interface Text {
  readonly $text: 3;
  readonly len: number;
  readonly clients: readonly string[];
  readonly next: readonly number[];
  readonly root: TextBranch;
}

/**
 * A text as a flat list of chunks: the layout stored before the tree (`$text: 2`), and the form
 * `compactText` reads a text of any layout as (for code that walks every run).
 */
export interface TextFlat {
  readonly $text: 2;
  readonly len: number;
  readonly clients: readonly string[];
  readonly next: readonly number[];
  readonly chunks: readonly TextChunk[];
}

/** A run as a text stored before TEXT-LAYOUT holds it (`$text: 1`): still read, never written. */
export interface TextRunV1 {
  readonly c: number;
  readonly k: number;
  readonly t?: string;
  readonly d?: number;
  readonly l: TextId | null;
  readonly r: TextId | null;
}
/** A text stored before TEXT-LAYOUT. */
export interface TextV1 {
  readonly $text: 1;
  readonly len: number;
  readonly clients: readonly string[];
  readonly next: readonly number[];
  readonly chunks: readonly { readonly v: number; readonly f: number; readonly runs: readonly TextRunV1[] }[];
}

/** An anchor in an op's arguments: a character's id and where its author saw it (a search hint). */
export type TextAnchor = readonly [client: string, clock: number, hint: number];
/**
 * An anchor on a character of the op's own client (ctx.client): `[clock, hint]`, the client's id
 * not repeated (TEXT-OWN-ID). On the wire an anchor's client id, a UUID, was up to 76 of an
 * insert's 99 bytes, and most anchors name the author's own text.
 */
export type TextOwnAnchor = readonly [clock: number, hint: number];
/** A range of deleted ids: `[client, clock, count, hint]`, or `[clock, count, hint]` for the op's own client's. */
export type TextRange = readonly [client: string, clock: number, count: number, hint: number] | readonly [clock: number, count: number, hint: number];

export interface TextInsertArgs {
  readonly p: TextPath;
  readonly l: TextAnchor | TextOwnAnchor | null;
  readonly r: TextAnchor | TextOwnAnchor | null;
  readonly k: number;
  readonly t: string;
}
export interface TextDeleteArgs {
  readonly p: TextPath;
  /** Ranges of ids. */
  readonly d: readonly TextRange[];
}

/** Where a text is in the state: a key, or the keys down to it (a KeyedMap on the way is looked into). */
export type TextPath = string | readonly (string | number)[];

/**
 * Runs a chunk holds before it splits in two. An edit copies its chunk's runs; with the tree the
 * chunks' number costs little, so 32 (was 64): the ops alone replaying automerge-paper took 8.6
 * and 7.9 CPU µs a patch against 9.1 and 8.7 at 64 (alternating runs, load 20-22; 16 gave 7.2 and
 * 8.8: no clear gain for twice the chunks).
 */
const CHUNK_MAX = 32;
/**
 * Nodes a branch holds before it splits in two: automerge-paper's 312 chunks are two levels (an
 * edit copies at most 2 x 32 pointers above its chunk, where the flat list copied 312).
 */
const BRANCH_MAX = 32;

/** The op names `textOps()` registers. */
export const TEXT_INSERT = 'textInsert';
export const TEXT_DELETE = 'textDelete';

const bad = (msg: string) => new HerculesError('bad-argument', msg);

/**
 * Clocks per op seq: the op with seq `s` takes clocks below `(s + 1) * TEXT_CLOCKS_PER_SEQ`. No
 * op can carry more characters than this (a UTF-16 code unit is at least one byte of the
 * MAX_OP_BYTES an op may have), so a client that takes the next free clock never reaches the
 * bound; only a floor (textClockFloor) moves its clocks, and never past it.
 */
export const TEXT_CLOCKS_PER_SEQ = MAX_OP_BYTES;

/**
 * The lowest clock a process may give its inserts when its store may lack ops of its own up to
 * seq `unknownSeq` (sent by an earlier process and lost in a crash, ordered or not): above every
 * clock those ops can hold (TEXT-ID-ONCE). 0 when it lacks none.
 */
export function textClockFloor(unknownSeq: number): number {
  return unknownSeq > 0 ? (unknownSeq + 1) * TEXT_CLOCKS_PER_SEQ : 0;
}

/** A new text holding `s` (for `initial`, or to assign inside an op). */
export function createText(s = ''): Text {
  if (typeof s !== 'string') throw bad(`createText: expected a string, got ${typeof s}`);
  const runs: TextRun[] = s.length > 0 ? [mkRun(0, 0, s, null)] : [];
  // Client 0, '', holds the initial text.
  return { $text: 3, len: s.length, clients: [''], next: [s.length], root: { v: s.length, f: s.length, kids: [{ v: s.length, f: s.length, runs }] } };
}

/** A text in any layout a store may hold (TEXT-LAYOUT): every reader takes each. */
export type TextLike = Text | TextFlat | TextV1;
type AnyText = TextLike;

/** A text in the state, in today's layout or one before (TEXT-LAYOUT): every reader here takes all of them. */
export function isText(v: unknown): v is Text {
  const t = v as Partial<Text> | Partial<TextFlat> | Partial<TextV1> | null;
  if (t === null || typeof t !== 'object' || typeof t.len !== 'number') return false;
  if (t.$text === 3) return typeof (t as Partial<Text>).root === 'object' && (t as Partial<Text>).root !== null;
  return (t.$text === 2 || t.$text === 1) && Array.isArray((t as Partial<TextFlat>).chunks);
}

/** A run's visible characters, or undefined when it is deleted. */
export const textRunText = (r: TextRun): string | undefined => (typeof r[2] === 'string' ? r[2] : undefined);
/** How many characters a run holds, visible or deleted. */
export const textRunSize = (r: TextRun): number => (typeof r[2] === 'string' ? r[2].length : r[2]);
/** A run's first character's left origin (null: the start). */
export const textRunLeft = (r: TextRun): TextId | null => (r.length > 3 ? [r[3]!, r[4]!] : null);
const runSize = textRunSize;
const hasId = (r: TextRun, c: number, k: number): boolean => r[0] === c && k >= r[1] && k < r[1] + runSize(r);
/** A run from its parts, frozen (a chunk then need not walk its runs to freeze them). */
const mkRun = (c: number, k: number, x: string | number, l: TextId | null): TextRun =>
  Object.freeze(l === null ? ([c, k, x] as const) : ([c, k, x, l[0], l[1]] as const));

const isLeaf = (n: TextNode): n is TextChunk => (n as Partial<TextChunk>).runs !== undefined;

/** The leaves of `n` in order, appended to `out`. */
function leavesInto(n: TextNode, out: TextChunk[]): TextChunk[] {
  if (isLeaf(n)) out.push(n);
  else for (const kid of n.kids) leavesInto(kid, out);
  return out;
}

/**
 * `t` as a flat list of chunks (`$text: 2`'s layout): the leaves of today's tree, or a text of
 * the layout before tuples converted (memoised per snapshot: a frozen one is converted once).
 * Runs keep their ids, text and left origins; old runs drop their right origins, which no
 * placement reads. For code that walks every run; an op's own lookups descend the tree.
 */
const compacted = new WeakMap<object, TextFlat>();
export function compactText(t: Text | TextFlat | TextV1): TextFlat {
  if (t.$text === 2) return t;
  const hit = compacted.get(t);
  if (hit !== undefined) return hit;
  const chunks =
    t.$text === 3
      ? leavesInto(t.root, [])
      : t.chunks.map((ch) => Object.freeze({ v: ch.v, f: ch.f, runs: Object.freeze(ch.runs.map((r) => Object.freeze(mkRun(r.c, r.k, r.t ?? r.d!, r.l)))) }));
  const out: TextFlat = { $text: 2, len: t.len, clients: t.clients, next: t.next, chunks: Object.freeze(chunks) };
  if (Object.isFrozen(t)) compacted.set(t, Object.freeze(out));
  return out;
}

/** Nodes in branches of at most BRANCH_MAX, level by level, up to one root (a pure function of the nodes: every replica builds the same tree). */
function treeOf(nodes: readonly TextNode[]): TextBranch {
  let level: readonly TextNode[] = nodes;
  do {
    const up: TextBranch[] = [];
    const n = Math.ceil(level.length / BRANCH_MAX);
    for (let i = 0; i < n; i++) {
      const kids = level.slice(Math.floor((i * level.length) / n), Math.floor(((i + 1) * level.length) / n));
      up.push(mkBranch(kids, sum(kids, 'v'), sum(kids, 'f')));
    }
    level = up;
  } while (level.length > 1);
  return level[0] as TextBranch;
}

const sum = (ns: readonly TextNode[], key: 'v' | 'f'): number => ns.reduce((n, x) => n + x[key], 0);
const mkBranch = (kids: readonly TextNode[], v: number, f: number): TextBranch => Object.freeze({ v, f, kids: Object.freeze(kids) });

/**
 * `t` in today's layout (TEXT-LAYOUT): itself, or a text stored before the tree with its chunks
 * (converted from runs of the first layout) as the leaves of one (memoised per frozen snapshot).
 */
const trees = new WeakMap<object, Text>();
export function treeText(t: AnyText): Text {
  if (t.$text === 3) return t;
  const hit = trees.get(t);
  if (hit !== undefined) return hit;
  const flat = compactText(t);
  const leaves = flat.chunks.length > 0 ? flat.chunks : [Object.freeze({ v: 0, f: 0, runs: Object.freeze([]) })];
  const out: Text = Object.freeze({ $text: 3, len: t.len, clients: t.clients, next: t.next, root: treeOf(leaves) });
  if (Object.isFrozen(t)) trees.set(t, out);
  return out;
}
const sameId = (a: TextId | null, b: TextId | null): boolean => (a === null ? b === null : b !== null && a[0] === b[0] && a[1] === b[1]);

/** The text at `path` in `root` (a state or an op's draft). */
export function textAt(root: unknown, path: TextPath, call = 'text'): Text {
  const keys = typeof path === 'string' ? [path] : path;
  if (!Array.isArray(keys) || keys.length === 0) throw bad(`${call}: the path must be a key or a non-empty array of keys`);
  let v: unknown = root;
  for (const key of keys) {
    if (typeof key !== 'string' && typeof key !== 'number') throw bad(`${call}: path keys are strings or numbers`);
    if (v === null || typeof v !== 'object') throw bad(`${call}: nothing at ${JSON.stringify(keys)}`);
    v = isKeyedMap(v) ? keyedMapGet(v, String(key)) : Object.hasOwn(v, key) ? (v as Record<string | number, unknown>)[key] : undefined;
  }
  if (!isText(v)) throw bad(`${call}: ${JSON.stringify(keys)} is not a text (make one with createText())`);
  return v;
}

/** The visible text (O(length); memoised per snapshot, which never changes). */
const strings = new WeakMap<object, string>();
export function textToString(t: TextLike): string {
  const hit = strings.get(t);
  if (hit !== undefined) return hit;
  const parts: string[] = [];
  for (const ch of leavesInto(treeText(t).root, [])) for (const r of ch.runs) if (typeof r[2] === 'string') parts.push(r[2]);
  const s = parts.join('');
  if (Object.isFrozen(t)) strings.set(t, s);
  return s;
}

// ---------------------------------------------------------------- positions in the tree

/** A branch on the way down to a leaf, and which of its kids the way takes. */
interface Step {
  readonly node: TextBranch;
  readonly i: number;
}

/**
 * A place in the tree: before the character `off` of run `ri` of `leaf`, reached through `path`
 * (root first). The end of the text is the last leaf at `ri === leaf.runs.length`.
 */
interface Loc {
  path: readonly Step[];
  leaf: TextChunk;
  ri: number;
  off: number;
}

/**
 * Down from `root` to the leaf holding index `i` of the visible characters (`visible`) or of all
 * of them, deleted included (an index past the end: the last leaf): the way, the leaf, `i` within
 * it and the characters (all) before it. Two loops, not one reading `kids[j][key]`: the keyed read
 * made this 3.6 % of a room.text replay's profile.
 */
function descend(root: TextBranch, i: number, visible: boolean): { path: Step[]; leaf: TextChunk; rest: number; full: number } {
  const path: Step[] = [];
  let node: TextNode = root;
  let full = 0;
  while (!isLeaf(node)) {
    const kids: readonly TextNode[] = node.kids;
    const last = kids.length - 1;
    let j = 0;
    if (visible)
      for (; j < last && i >= kids[j].v; j++) {
        i -= kids[j].v;
        full += kids[j].f;
      }
    else
      for (; j < last && i >= kids[j].f; j++) {
        i -= kids[j].f;
        full += kids[j].f;
      }
    path.push({ node, i: j });
    node = kids[j];
  }
  return { path, leaf: node, rest: i, full };
}

/** The leaf after (dir 1) or before (dir -1) the one `path` leads to, and the way to it; undefined past either end. */
function stepLeaf(path: readonly Step[], dir: 1 | -1): { path: Step[]; leaf: TextChunk } | undefined {
  let d = path.length - 1;
  while (d >= 0 && (dir === 1 ? path[d].i + 1 >= path[d].node.kids.length : path[d].i === 0)) d--;
  if (d < 0) return undefined;
  const out = path.slice(0, d);
  out.push({ node: path[d].node, i: path[d].i + dir });
  let node = path[d].node.kids[path[d].i + dir];
  while (!isLeaf(node)) {
    const i = dir === 1 ? 0 : node.kids.length - 1;
    out.push({ node, i });
    node = node.kids[i];
  }
  return { path: out, leaf: node };
}

/** Where the character `[c, k]` is: in the leaf holding total index `hint` first, then forward from it, wrapping. */
function locate(root: TextBranch, c: number, k: number, hint: number): Loc {
  const d = descend(root, Math.max(0, hint), false);
  let at: { path: readonly Step[]; leaf: TextChunk } | undefined = d;
  for (let wrapped = false; ; ) {
    const runs = at.leaf.runs;
    for (let ri = 0; ri < runs.length; ri++) if (hasId(runs[ri], c, k)) return { path: at.path, leaf: at.leaf, ri, off: k - runs[ri][1] };
    at = stepLeaf(at.path, 1);
    if (at === undefined) {
      if (wrapped) break;
      wrapped = true;
      at = descend(root, 0, false);
    }
    if (wrapped && at.leaf === d.leaf) break;
  }
  throw bad(`text: no character ${k} of client #${c} (its insert was refused or belongs to another text)`);
}

/** The place right after `loc`'s character (the start of the next run when it is a run's last). */
function after(loc: Loc): Loc {
  const run = loc.leaf.runs[loc.ri];
  if (loc.off + 1 < runSize(run)) return { path: loc.path, leaf: loc.leaf, ri: loc.ri, off: loc.off + 1 };
  return normal({ path: loc.path, leaf: loc.leaf, ri: loc.ri + 1, off: 0 });
}

/** `loc` moved past the ends of runs and leaves (never past the last leaf's end: the end of the text). */
function normal(loc: Loc): Loc {
  let out = loc;
  while (out.ri >= out.leaf.runs.length) {
    const next = stepLeaf(out.path, 1);
    if (next === undefined) return out;
    out = { path: next.path, leaf: next.leaf, ri: 0, off: 0 };
  }
  return out;
}

/** Skipped pieces of runs: [client, first clock, end clock). */
type Piece = [number, number, number];
const inPieces = (ps: readonly Piece[], id: TextId): boolean => ps.some(([c, a, b]) => c === id[0] && id[1] >= a && id[1] < b);

/**
 * Where an insert between L and R goes (see the module comment): past the items between them
 * whose left origin is L or an item already passed; at the first other one, or at R.
 */
function placeInsert(root: TextBranch, L: Anchor | null, R: Anchor | null): Loc {
  let loc = L === null ? start(root) : after(locate(root, L[0], L[1], L[2]));
  const passed: Piece[] = [];
  while (loc.ri < loc.leaf.runs.length) {
    const run = loc.leaf.runs[loc.ri];
    const size = runSize(run);
    const [c, k] = run;
    const rHere = R !== null && c === R[0] && R[1] >= k + loc.off && R[1] < k + size;
    if (rHere && R[1] === k + loc.off) break;
    // Inside a run, a character's left origin is the one before it: L, or one passed.
    const l = textRunLeft(run);
    const mine = loc.off > 0 || (l === null ? L === null : (L !== null && sameId(l, [L[0], L[1]])) || inPieces(passed, l));
    if (!mine) break;
    const end = rHere ? R[1] - k : size;
    passed.push([c, k + loc.off, k + end]);
    if (rHere) return { path: loc.path, leaf: loc.leaf, ri: loc.ri, off: end };
    loc = normal({ path: loc.path, leaf: loc.leaf, ri: loc.ri + 1, off: 0 });
  }
  return loc;
}

/** The start of the text. */
function start(root: TextBranch): Loc {
  const d = descend(root, 0, false);
  return normal({ path: d.path, leaf: d.leaf, ri: 0, off: 0 });
}

// ---------------------------------------------------------------- editing runs

function piece(run: TextRun, from: number, to: number): TextRun {
  const l: TextId | null = from === 0 ? textRunLeft(run) : [run[0], run[1] + from - 1];
  return mkRun(run[0], run[1] + from, typeof run[2] === 'string' ? run[2].slice(from, to) : to - from, l);
}

/** `b` continues `a`: one client's characters typed one after the other, in the same state. */
function joins(a: TextRun, b: TextRun): boolean {
  const end = a[1] + runSize(a);
  return a[0] === b[0] && b[1] === end && typeof a[2] === typeof b[2] && b.length > 3 && b[3] === a[0] && b[4] === end - 1;
}

function join(a: TextRun, b: TextRun): TextRun {
  return mkRun(a[0], a[1], typeof a[2] === 'string' ? a[2] + (b[2] as string) : a[2] + (b[2] as number), textRunLeft(a));
}

/** Append `run` to `out`, joined to its last run when it continues it. */
function push(out: TextRun[], run: TextRun): void {
  const last = out[out.length - 1];
  if (last !== undefined && joins(last, run)) out[out.length - 1] = join(last, run);
  else out.push(run);
}

/**
 * The chunks of `runs` (frozen runs: mkRun's, or a snapshot's), `v` and `f` their visible and
 * total characters, split in two while past CHUNK_MAX. The counts come from the chunk they
 * replace and the edit, not a walk of the runs (that walk, with a freeze per run, was 5 % of a
 * replay through room.text: docs/benchmarks.md, text).
 */
function chunksOf(runs: TextRun[], v: number, f: number): TextChunk[] {
  if (runs.length > CHUNK_MAX) {
    const left = runs.slice(0, runs.length >> 1);
    let lv = 0;
    let lf = 0;
    for (const r of left) {
      const n = runSize(r);
      lf += n;
      if (typeof r[2] === 'string') lv += n;
    }
    return [...chunksOf(left, lv, lf), ...chunksOf(runs.slice(runs.length >> 1), v - lv, f - lf)];
  }
  return [Object.freeze({ v, f, runs: Object.freeze(runs) })];
}

/**
 * The tree with the leaf `path` leads to replaced by the chunks of `runs`, which hold `dv` more
 * visible and `df` more characters than it: that leaf's branches copied (frozen: no freeze walks
 * them again), a branch past BRANCH_MAX split in two, a new root above a split root.
 */
function store(path: readonly Step[], runs: TextRun[], dv: number, df: number): TextBranch {
  const leaf = path[path.length - 1].node.kids[path[path.length - 1].i];
  let repl: readonly TextNode[] = chunksOf(runs, leaf.v + dv, leaf.f + df);
  for (let d = path.length - 1; d >= 0; d--) {
    const { node, i } = path[d];
    const kids = node.kids.slice(0, i);
    for (const x of repl) kids.push(x);
    for (let j = i + 1; j < node.kids.length; j++) kids.push(node.kids[j]);
    repl = branchesOf(kids, node.v + dv, node.f + df);
  }
  return repl.length === 1 ? (repl[0] as TextBranch) : mkBranch(repl, path[0].node.v + dv, path[0].node.f + df);
}

/** One branch of `kids` (`v` and `f` their counts), or two while past BRANCH_MAX. */
function branchesOf(kids: TextNode[], v: number, f: number): TextBranch[] {
  if (kids.length <= BRANCH_MAX) return [mkBranch(kids, v, f)];
  const left = kids.slice(0, kids.length >> 1);
  const lv = sum(left, 'v');
  const lf = sum(left, 'f');
  return [mkBranch(left, lv, lf), mkBranch(kids.slice(kids.length >> 1), v - lv, f - lf)];
}

// ---------------------------------------------------------------- ops

/** An anchor with its client as an index in `clients`. */
type Anchor = readonly [client: number, clock: number, hint: number];

function checkAnchor(clients: readonly string[], a: unknown, what: string, self: string): Anchor | null {
  if (a === null) return null;
  const long = longAnchor(a, self);
  if (long === undefined || typeof long[0] !== 'string' || !Number.isSafeInteger(long[1]) || !Number.isSafeInteger(long[2]))
    throw bad(`${TEXT_INSERT}: ${what} must be null, [client, clock, hint] or [clock, hint]`);
  return [clientIndex(clients, long[0]), long[1], long[2]];
}

/** An anchor with its client named (TEXT-OWN-ID: `[clock, hint]` is `self`'s); undefined if it is neither form. */
function longAnchor(a: unknown, self: string): TextAnchor | undefined {
  if (!Array.isArray(a)) return undefined;
  return a.length === 2 ? [self, a[0], a[1]] : a.length === 3 ? (a as unknown as TextAnchor) : undefined;
}

/** A delete range with its client named (TEXT-OWN-ID); undefined if it is neither form. */
function longRange(r: unknown, self: string): readonly [string, number, number, number] | undefined {
  if (!Array.isArray(r)) return undefined;
  return r.length === 3 ? [self, r[0], r[1], r[2]] : r.length === 4 ? (r as [string, number, number, number]) : undefined;
}

/**
 * A text op's arguments with every anchor and range naming its client, `self` (the op's
 * ctx.client) for the short forms (TEXT-OWN-ID): for code that reads ids out of ops. Other ops'
 * arguments are returned as they are.
 */
export function textLongArgs(name: string, args: unknown, self: string): unknown {
  if (args === null || typeof args !== 'object') return args;
  if (name === TEXT_INSERT) {
    const a = args as TextInsertArgs;
    const long = (x: unknown) => (x === null ? null : (longAnchor(x, self) ?? x));
    return { ...a, l: long(a.l), r: long(a.r) };
  }
  if (name === TEXT_DELETE && Array.isArray((args as TextDeleteArgs).d)) {
    const a = args as TextDeleteArgs;
    return { ...a, d: a.d.map((r) => longRange(r, self) ?? r) };
  }
  return args;
}

function clientIndex(clients: readonly string[], c: string): number {
  const i = clients.indexOf(c);
  if (i < 0) throw bad(`text: no character of client ${c} (its insert was refused or belongs to another text)`);
  return i;
}

/** The text at `path` of an op's draft, turned into today's layout in the draft if it was stored before it (TEXT-LAYOUT). */
function draftText(state: unknown, path: TextPath, call: string): Text {
  const t = textAt(state, path, call);
  if (t.$text !== 3) {
    const w = t as unknown as { $text: number; chunks?: readonly TextChunk[]; root: TextBranch };
    w.root = treeText(current(t) as unknown as AnyText).root;
    delete w.chunks;
    w.$text = 3;
  }
  return t;
}

/**
 * A text edited by an op, as plain values: what the op writes back. `me` is the op's client's
 * index in `clients`, `added` whether the op added it there.
 */
interface Edited {
  root: TextBranch;
  len: number;
  clients: readonly string[];
  next: readonly number[];
  me: number;
  added: boolean;
}

type Ctx = { readonly client: string; readonly seq: number };

function checkInsert(a: TextInsertArgs, ctx: Ctx): void {
  if (a === null || typeof a !== 'object' || typeof a.t !== 'string' || a.t.length === 0 || !Number.isSafeInteger(a.k))
    throw bad(`${TEXT_INSERT}: expected { p, l, r, k, t } with a non-empty string t`);
  // The bound a restarted client's floor rests on (TEXT-ID-ONCE): never reached by a free clock.
  if (a.k + a.t.length > (ctx.seq + 1) * TEXT_CLOCKS_PER_SEQ)
    throw bad(`${TEXT_INSERT}: clocks ${a.k}..${a.k + a.t.length - 1} are past those of op seq ${ctx.seq} (below ${(ctx.seq + 1) * TEXT_CLOCKS_PER_SEQ})`);
}

function checkDelete(a: TextDeleteArgs): void {
  if (a === null || typeof a !== 'object' || !Array.isArray(a.d)) throw bad(`${TEXT_DELETE}: expected { p, d: [[client, clock, count, hint], ...] }`);
}

/** The insert op on a plain text of today's layout, its arguments checked (checkInsert): the text it leaves. */
function inserted(t: Text, a: TextInsertArgs, ctx: Ctx): Edited {
  const L = checkAnchor(t.clients, a.l, 'l', ctx.client);
  const R = checkAnchor(t.clients, a.r, 'r', ctx.client);
  let me = t.clients.indexOf(ctx.client);
  const added = me < 0;
  if (added) me = t.clients.length;
  const next = added ? 0 : t.next[me];
  if (a.k < next) throw bad(`${TEXT_INSERT}: clock ${a.k} was used already (next is ${next})`);
  const at = placeInsert(t.root, L, R);
  // At the start of a chunk, the end of the previous one: typing there joins the run before it.
  const prev = at.off === 0 && at.ri === 0 ? stepLeaf(at.path, -1) : undefined;
  const old = prev === undefined ? at.leaf.runs : prev.leaf.runs;
  const ri = prev === undefined ? at.ri : old.length;
  const run = mkRun(me, a.k, a.t, L === null ? null : [L[0], L[1]]);
  const runs: TextRun[] = old.slice(0, ri);
  if (at.off > 0) push(runs, piece(old[ri], 0, at.off));
  push(runs, run);
  if (at.off > 0) runs.push(piece(old[ri], at.off, runSize(old[ri])));
  else if (ri < old.length) runs.push(old[ri]);
  for (let i = ri + 1; i < old.length; i++) runs.push(old[i]);
  const nexts = Array.from(t.next);
  nexts[me] = a.k + a.t.length;
  const clients = added ? Object.freeze([...t.clients, ctx.client]) : t.clients;
  const root = store(prev === undefined ? at.path : prev.path, runs, a.t.length, a.t.length);
  return { root, len: t.len + a.t.length, clients, next: Object.freeze(nexts), me, added };
}

/** Delete up to `n` characters from `[c, k]` within one run of `e`: how many it covered (deleted or not). */
function deleteIn(e: Edited, c: number, k: number, n: number, hint: number): number {
  const at = locate(e.root, c, k, hint);
  const old = at.leaf.runs;
  const run = old[at.ri];
  const m = Math.min(n, runSize(run) - at.off);
  if (typeof run[2] !== 'string') return m;
  const runs: TextRun[] = old.slice(0, at.ri);
  if (at.off > 0) runs.push(piece(run, 0, at.off));
  const gone = piece(run, at.off, at.off + m);
  push(runs, mkRun(gone[0], gone[1], m, textRunLeft(gone)));
  if (at.off + m < runSize(run)) runs.push(piece(run, at.off + m, runSize(run)));
  for (let i = at.ri + 1; i < old.length; i++) push(runs, old[i]);
  e.root = store(at.path, runs, -m, 0);
  e.len -= m;
  return m;
}

/** The delete op on a plain text of today's layout, its arguments checked (checkDelete): the text it leaves. */
function deleted(t: Text, a: TextDeleteArgs, ctx: { readonly client: string }): Edited {
  const e: Edited = { root: t.root, len: t.len, clients: t.clients, next: t.next, me: -1, added: false };
  for (const r of a.d) {
    const range = longRange(r, ctx.client);
    if (range === undefined || typeof range[0] !== 'string' || !range.slice(1, 4).every(Number.isSafeInteger) || range[2] < 1)
      throw bad(`${TEXT_DELETE}: a range is [client?, clock, count >= 1, hint]`);
    const [client, k, n, hint] = range;
    const c = clientIndex(t.clients, client);
    for (let done = 0; done < n; ) done += deleteIn(e, c, k + done, n - done, hint + done);
  }
  return e;
}

/** Write `e` back into the draft's text `t` (only what changed: the patches name those paths). */
function writeBack(t: Text, was: Text, e: Edited): void {
  if (e.root === was.root) return;
  const w = t as unknown as { len: number; root: TextBranch; clients: string[]; next: number[] };
  if (e.added) {
    w.clients.push(e.clients[e.me]);
    w.next.push(e.next[e.me]);
  } else if (e.me >= 0) w.next[e.me] = e.next[e.me];
  w.root = e.root;
  w.len = e.len;
}

/**
 * The draft's text as plain values, field by field: `current` of the whole text walked every
 * chunk and run of a text an earlier op of the same draft wrote (a rebase's run of ops): the
 * two-client friendsforever replay (test:text-trace) took over 50 s of CPU with it, against 6.3
 * before the plain path; 5.2 with this (6.5 for the old code in the same run).
 */
function plainOf(t: Text): Text {
  return { $text: 3, len: t.len, clients: current(t.clients), next: current(t.next), root: current(t.root) };
}

/** The insert op: `a.t` as the characters `[ctx.client, a.k]`, ... between the anchors. */
export function textInsert(state: unknown, a: TextInsertArgs, ctx: Ctx): void {
  checkInsert(a, ctx);
  const t = draftText(state, a.p, TEXT_INSERT);
  const was = plainOf(t);
  writeBack(t, was, inserted(was, a, ctx));
}

/** The delete op: each range of ids becomes tombstones (a character deleted twice is deleted once). */
export function textDelete(state: unknown, a: TextDeleteArgs, ctx: { readonly client: string }): void {
  checkDelete(a);
  const t = draftText(state, a.p, TEXT_DELETE);
  const was = plainOf(t);
  writeBack(t, was, deleted(was, a, ctx));
}

// ---------------------------------------------------------------- ops without a draft

/**
 * `root` with the value at `keys[i..]` replaced by `v`: each container on the way copied and
 * frozen (a snapshot's are frozen), or undefined when one is not a plain object or array (a
 * KeyedMap, say): the op then runs in a draft.
 */
function setAt(root: unknown, keys: readonly (string | number)[], i: number, v: unknown): unknown {
  if (i === keys.length) return v;
  if (root === null || typeof root !== 'object' || isKeyedMap(root)) return undefined;
  const proto = Object.getPrototypeOf(root);
  const k = keys[i];
  if (proto === Array.prototype) {
    const arr = root as unknown[];
    if (typeof k !== 'number' || !Number.isInteger(k) || k < 0 || k >= arr.length) return undefined;
    const child = setAt(arr[k], keys, i + 1, v);
    if (child === undefined) return undefined;
    const out = Array.from(arr);
    out[k] = child;
    return Object.freeze(out);
  }
  if (proto !== Object.prototype || !Object.hasOwn(root, k)) return undefined;
  const child = setAt((root as Record<string | number, unknown>)[k], keys, i + 1, v);
  if (child === undefined) return undefined;
  return Object.freeze({ ...(root as Record<string | number, unknown>), [k]: child });
}

/**
 * Run a text op on a frozen snapshot without a draft: the next snapshot, the paths it wrote
 * added to `patches` as a draft's would be (undo reads them), or undefined where only a draft
 * can (a text of the old layout, a KeyedMap on the path). An op's cost was a third Mutative's
 * (docs/benchmarks.md, text).
 */
function runPlain(state: unknown, path: TextPath, call: string, edit: (t: Text) => Edited, patches?: { path: readonly (string | number)[] }[]): unknown {
  const t = textAt(state, path, call);
  if (t.$text !== 3) return undefined;
  const e = edit(t);
  if (e.root === t.root) return state;
  const keys = typeof path === 'string' ? [path] : path;
  const nt: Text = Object.freeze({ ...t, root: e.root, len: e.len, clients: e.clients, next: e.next });
  const next = setAt(state, keys, 0, nt);
  if (next === undefined) return undefined;
  if (patches) {
    if (e.added) patches.push({ path: [...keys, 'clients', e.me] });
    if (e.me >= 0) patches.push({ path: [...keys, 'next', e.me] });
    patches.push({ path: [...keys, 'root'] }, { path: [...keys, 'len'] });
  }
  return next;
}

const plainInsert: NonNullable<PlainOp['plain']> = (state, a, ctx, patches) => {
  checkInsert(a as TextInsertArgs, ctx);
  return runPlain(state, (a as TextInsertArgs).p, TEXT_INSERT, (t) => inserted(t, a as TextInsertArgs, ctx), patches);
};
const plainDelete: NonNullable<PlainOp['plain']> = (state, a, ctx, patches) => {
  checkDelete(a as TextDeleteArgs);
  return runPlain(state, (a as TextDeleteArgs).p, TEXT_DELETE, (t) => deleted(t, a as TextDeleteArgs, ctx), patches);
};

/** The text ops, to spread into a machine's ops: `ops: { ...textOps(), ...mine }`. */
export function textOps(): { textInsert: typeof textInsert; textDelete: typeof textDelete } {
  // Their runs without a draft are attached here, not at the module's top level: an assignment
  // there is a side effect a bundler keeps, and it kept the whole text op code (2.4 KiB gzipped)
  // in a browser bundle that never calls textOps() (the lean entry, bench/src/bundle-parts.ts).
  (textInsert as PlainOp).plain ??= plainInsert;
  (textDelete as PlainOp).plain ??= plainDelete;
  return { [TEXT_INSERT]: textInsert, [TEXT_DELETE]: textDelete } as { textInsert: typeof textInsert; textDelete: typeof textDelete };
}

// ---------------------------------------------------------------- indexes to anchors (the client)

/** The character at visible index `i` (0 <= i < len): its run, offset and total index. */
function visibleAt(t: Text, i: number): { loc: Loc; full: number } {
  const d = descend(t.root, i, true);
  let rest = d.rest;
  let full = d.full;
  const runs = d.leaf.runs;
  for (let ri = 0; ri < runs.length; ri++) {
    const r = runs[ri];
    const n = runSize(r);
    const vis = typeof r[2] === 'string';
    if (vis && rest < n) return { loc: { path: d.path, leaf: d.leaf, ri, off: rest }, full: full + rest };
    if (vis) rest -= n;
    full += n;
  }
  throw new HerculesError('internal', 'text: the chunk counts disagree with the runs');
}

/** The anchor on the character at `loc`, short when it is `self`'s (TEXT-OWN-ID); null at the end. */
function anchorAt(t: Text, loc: Loc, full: number, self: string | undefined): TextAnchor | TextOwnAnchor | null {
  if (loc.ri >= loc.leaf.runs.length) return null;
  const r = loc.leaf.runs[loc.ri];
  const c = t.clients[r[0]];
  return c === self ? [r[1] + loc.off, full] : [c, r[1] + loc.off, full];
}

function checkRange(t: Text, index: number, length: number, call: string): void {
  if (!Number.isSafeInteger(index) || index < 0 || index > t.len) throw bad(`${call}: index ${index} is outside 0..${t.len}`);
  if (!Number.isSafeInteger(length) || length < 0 || index + length > t.len) throw bad(`${call}: ${index} + ${length} runs past the end (${t.len})`);
}

/**
 * The arguments of an insert of `s` at visible index `index` of `t`, by `client`, whose clocks
 * start at `floor` or later (the room's textClockFloor()).
 */
export function insertArgs(t0: TextLike, path: TextPath, client: string, index: number, s: string, floor = 0): TextInsertArgs {
  const t = treeText(t0);
  checkRange(t, index, 0, 'text.insert');
  if (typeof s !== 'string') throw bad(`text.insert: expected a string, got ${typeof s}`);
  const k = Math.max(textNextClock(t, client), floor);
  if (index === 0) return { p: path, l: null, r: anchorAt(t, start(t.root), 0, client), k, t: s };
  const { loc, full } = visibleAt(t, index - 1);
  return { p: path, l: anchorAt(t, loc, full, client), r: anchorAt(t, after(loc), full + 1, client), k, t: s };
}

/**
 * The arguments of a delete of `length` visible characters from `index`: one range per run
 * piece; the ranges of `client`'s own characters, when given, in the short form (TEXT-OWN-ID).
 */
export function deleteArgs(t0: TextLike, path: TextPath, index: number, length: number, client?: string): TextDeleteArgs {
  const t = treeText(t0);
  checkRange(t, index, length, 'text.delete');
  const d: TextRange[] = [];
  if (length === 0) return { p: path, d };
  let { loc, full } = visibleAt(t, index);
  for (let left = length; left > 0; ) {
    const r = loc.leaf.runs[loc.ri];
    const n = runSize(r) - loc.off;
    if (typeof r[2] === 'string') {
      const m = Math.min(n, left);
      const c = t.clients[r[0]];
      d.push(c === client ? [r[1] + loc.off, m, full] : [c, r[1] + loc.off, m, full]);
      left -= m;
    }
    full += n;
    loc = normal({ path: loc.path, leaf: loc.leaf, ri: loc.ri + 1, off: 0 });
  }
  return { p: path, d };
}

/** What `room.text(path)` returns; `H` is what submitting an op returns (an OpHandle on a room). */
export interface TextHandle<H = unknown> {
  /** Insert `text` at `index` of the Submitted view; the op's handle (undefined for an empty text). */
  insert(index: number, text: string): H | undefined;
  /** Delete `length` characters from `index` of the Submitted view; the op's handle (undefined for none). */
  delete(index: number, length: number): H | undefined;
  /** The text in a view (default: Submitted). */
  toString(view?: TextView): string;
  /** The visible length in a view (default: Submitted). */
  length(view?: TextView): number;
}

export type TextView = 'submitted' | 'durable' | 'authoritative' | 'visible' | 'stable';

/** The clock after the last an op `name` with `args` takes, if it is a text insert; else 0. */
export function textClockEnd(name: string, args: unknown): number {
  if (name !== TEXT_INSERT || args === null || typeof args !== 'object') return 0;
  const { k, t } = args as Partial<TextInsertArgs>;
  return Number.isSafeInteger(k) && typeof t === 'string' ? k! + t.length : 0;
}

/** The lowest clock `client` has not used in `t` (its inserts take this one or a later one). */
export function textNextClock(t: TextLike, client: string): number {
  const i = t.clients.indexOf(client);
  return i < 0 ? 0 : t.next[i];
}

/** What a text handle needs of a room. */
export interface TextRoom<H> {
  readonly clientId: string;
  getState(view?: TextView): unknown;
  submit(name: string, args?: unknown): H;
  /** The lowest clock this client's inserts may take now (TEXT-ID-ONCE); absent: 0. */
  textClockFloor?(): number;
}

/** A handle on the text at `path` of `room`'s state: indexes in the Submitted view become anchors. */
export function textHandle<H>(room: TextRoom<H>, path: TextPath): TextHandle<H> {
  const at = (view: TextView = 'submitted') => textAt(room.getState(view), path);
  return {
    insert(index, s) {
      const args = insertArgs(at(), path, room.clientId, index, s, room.textClockFloor?.() ?? 0);
      return s.length > 0 ? room.submit(TEXT_INSERT, args) : undefined;
    },
    delete(index, length) {
      const args = deleteArgs(at(), path, index, length, room.clientId);
      return args.d.length > 0 ? room.submit(TEXT_DELETE, args) : undefined;
    },
    toString: (view) => textToString(at(view)),
    length: (view) => at(view).len,
  };
}

/** The visible index of the character `[c, k]` in `t`, or -1 if it is deleted or not there (O(length in runs)). */
export function textIndexOf(t: TextLike, client: string, k: number): number {
  const c = t.clients.indexOf(client);
  let i = 0;
  for (const ch of leavesInto(treeText(t).root, []))
    for (const r of ch.runs) {
      const s = textRunText(r);
      if (hasId(r, c, k)) return s !== undefined ? i + k - r[1] : -1;
      if (s !== undefined) i += s.length;
    }
  return -1;
}

// ---------------------------------------------------------------- places (cursors, selections)

/**
 * A place in a text that stays on its character: the id `[client, clock]` of the character before
 * it, or null for the start. Text typed before it moves it along; text typed right at it goes
 * after it (a caret stays behind the character it follows); when that character is deleted, the
 * place is where its tombstone lies. The editor bindings carry cursors and selections in presence
 * in this form, so a place reads the same in every binding.
 */
export type TextPlace = readonly [client: string, clock: number] | null;

/** The place at visible index `index` of `t` (clamped to 0..len). */
export function textPlaceAt(t: TextLike, index: number): TextPlace {
  const left = Math.min(Math.max(0, index), t.len);
  if (left === 0) return null;
  const tree = treeText(t);
  const { loc } = visibleAt(tree, left - 1);
  const r = loc.leaf.runs[loc.ri];
  return [tree.clients[r[0]], r[1] + loc.off];
}

/** The visible index of `place` in `t`, or -1 when `t` does not hold its character (not arrived yet). */
export function textPlaceIndex(t: TextLike, place: TextPlace): number {
  if (place === null) return 0;
  const c = t.clients.indexOf(place[0]);
  if (c < 0) return -1;
  const k = place[1];
  let i = 0;
  for (const ch of leavesInto(treeText(t).root, []))
    for (const r of ch.runs) {
      const s = textRunText(r);
      if (hasId(r, c, k)) return s !== undefined ? i + k - r[1] + 1 : i;
      if (s !== undefined) i += s.length;
    }
  return -1;
}

/** A place as presence carries it: checked, since a peer's presence is its own to shape. */
export function isTextPlace(v: unknown): v is TextPlace {
  return v === null || (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && Number.isSafeInteger(v[1]));
}
