/**
 * A collaborative rich text as state (`@hercules/prosemirror/ops`: no ProseMirror here, so a
 * server's machine imports it without the editor). Three parts, each converging under the
 * server's order without a rule of its own beyond "ops name characters, never indexes":
 *
 * - `text`: a collaborative text (`createText`, edited by `textOps()` at `[...path, 'text']`),
 *   the characters of every block, each block opened by a `\n` (its separator; the first block's
 *   is the text's first character). Splitting a block inserts a separator, joining two deletes
 *   one: concurrent typing keeps its place as in any text (TEXT-NO-INTERLEAVE).
 * - `blocks`: each block's attributes (paragraph, heading and level, the lists it is in), keyed by
 *   the id of its separator, `client:clock`. A block without an entry is a paragraph. The last
 *   op ordered wins (RICH-BLOCK); a block whose separator is deleted is joined to the one before,
 *   as ProseMirror joins them, and its entry no longer shows.
 * - `marks`: spans `{ m, v, s, e }`, in the order the server ordered them: mark `m` with value `v`
 *   (true, an attrs object for a link, or null: removed) on the characters from `s` to `e`, both
 *   ids, inclusive, in the text's full order (deleted characters included). A character's value for
 *   `m` is that of the last span of `m` over it (RICH-MARK). Text later inserted between `s` and
 *   `e` by anyone is inside the span: typed inside a bold word, bold (Peritext's rule for bold).
 *   A span hides every earlier span of its mark that it covers, which is then dropped, so the
 *   list holds about one span per formatting change, not one per keystroke.
 *
 * Why ids and not indexes: two people formatting concurrently name the same characters on every
 * replica whatever text was typed before them; an index would move under a concurrent insert.
 */
import {
  compactText,
  createText,
  current,
  HerculesError,
  isText,
  textAt,
  textIndexOf,
  textRunSize,
  type Text,
  type TextAnchor,
  type TextPath,
} from '@hercules/core';

/** A character's id as marks and blocks name it: its client and clock. */
export type CharId = readonly [client: string, clock: number];

export interface MarkSpan {
  /** The mark's name (the ProseMirror mark type: strong, em, link). */
  readonly m: string;
  /** true, the mark's attributes (a link's href), or null: the mark removed. */
  readonly v: true | Readonly<Record<string, unknown>> | null;
  readonly s: CharId;
  readonly e: CharId;
}

/** A block's attributes, as the binding writes them (opaque to the ops). */
export type BlockAttrs = Readonly<Record<string, unknown>>;

export interface RichText {
  readonly $rich: 1;
  readonly text: Text;
  readonly blocks: Readonly<Record<string, BlockAttrs>>;
  readonly marks: readonly MarkSpan[];
}

export interface RichBlockArgs {
  readonly p: TextPath;
  /** The block's separator. */
  readonly b: CharId;
  /** Its attributes, or null: back to a paragraph. */
  readonly a: BlockAttrs | null;
}

export interface RichFormatArgs {
  readonly p: TextPath;
  readonly m: string;
  readonly v: MarkSpan['v'];
  /** The first and last character, each with where its author saw it (a search hint). */
  readonly s: TextAnchor;
  readonly e: TextAnchor;
}

export const RICH_BLOCK = 'richBlock';
export const RICH_FORMAT = 'richFormat';

const bad = (msg: string) => new HerculesError('bad-argument', msg);

/** A new rich text holding one paragraph (for `initial`, or to assign inside an op). */
export function createRichText(): RichText {
  // The first block's separator: the initial client's character ['', 0].
  return { $rich: 1, text: createText('\n'), blocks: {}, marks: [] };
}

export function isRichText(v: unknown): v is RichText {
  const r = v as Partial<RichText> | null;
  return r !== null && typeof r === 'object' && r.$rich === 1 && isText(r.text) && Array.isArray(r.marks) && typeof r.blocks === 'object';
}

/** The rich text at `path` of a state or an op's draft. */
export function richAt(root: unknown, path: TextPath, call = 'richText'): RichText {
  const keys = typeof path === 'string' ? [path] : path;
  // The text inside checks the path and says what is missing.
  textAt(root, [...keys, 'text'], call);
  let v: unknown = root;
  for (const key of keys) v = (v as Record<string | number, unknown>)[key];
  if (!isRichText(v)) throw bad(`${call}: ${JSON.stringify(keys)} is not a rich text (make one with createRichText())`);
  return v;
}

/** The path of the rich text's characters, for `room.text()` and the text ops. */
export const textPathOf = (path: TextPath): readonly (string | number)[] => [...(typeof path === 'string' ? [path] : path), 'text'];

export const idKey = (id: CharId): string => `${id[0]}:${id[1]}`;

function checkId(v: unknown, what: string, call: string): CharId {
  if (!Array.isArray(v) || typeof v[0] !== 'string' || !Number.isSafeInteger(v[1])) throw bad(`${call}: ${what} must be [client, clock]`);
  return [v[0], v[1]];
}

function isPlainJson(v: unknown): boolean {
  if (v === null || typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v))) return true;
  if (Array.isArray(v)) return v.every(isPlainJson);
  return typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype && Object.values(v as object).every(isPlainJson);
}

/** The block op: the attributes of the block opened by separator `b`. */
export function richBlock(state: unknown, a: RichBlockArgs): void {
  if (a === null || typeof a !== 'object') throw bad(`${RICH_BLOCK}: expected { p, b, a }`);
  const b = checkId(a.b, 'b', RICH_BLOCK);
  if (a.a !== null && (typeof a.a !== 'object' || Array.isArray(a.a) || !isPlainJson(a.a))) throw bad(`${RICH_BLOCK}: a must be null or a JSON object`);
  const rich = richAt(state, a.p, RICH_BLOCK);
  if (!rich.text.clients.includes(b[0])) throw bad(`${RICH_BLOCK}: no character of client ${b[0]}`);
  const blocks = rich.blocks as Record<string, BlockAttrs>;
  if (a.a === null) delete blocks[idKey(b)];
  else blocks[idKey(b)] = a.a;
}

/** One run of a client: its first clock, its size, the characters before it in the full order. */
type FullRun = readonly [k: number, n: number, before: number];

/**
 * Each client's runs sorted by clock, with where they start in the full order (deleted characters
 * included); memoised per snapshot. A format op places every span of its mark: by a binary search
 * here, O(runs + spans x log runs), where a walk of the runs per span cost O(spans x runs)
 * (0.7 ms a format op with 1,000 bold words, scripts/keystroke.ts).
 */
const fullRuns = new WeakMap<object, Map<number, FullRun[]>>();
function fullRunsOf(t: Text): Map<number, FullRun[]> {
  const hit = fullRuns.get(t);
  if (hit !== undefined) return hit;
  const by = new Map<number, FullRun[]>();
  let i = 0;
  for (const ch of compactText(t).chunks)
    for (const r of ch.runs) {
      const n = textRunSize(r);
      let list = by.get(r[0]);
      if (list === undefined) by.set(r[0], (list = []));
      list.push([r[1], n, i]);
      i += n;
    }
  for (const list of by.values()) list.sort((a, b) => a[0] - b[0]);
  if (Object.isFrozen(t)) fullRuns.set(t, by);
  return by;
}

/**
 * Where each character of the full order (deleted ones included) lies: the full index of `[c, k]`,
 * or -1 when the text has no such character.
 */
export function fullIndexOf(t: Text, client: string, k: number): number {
  const list = fullRunsOf(t).get(t.clients.indexOf(client));
  if (list === undefined) return -1;
  let lo = 0;
  let hi = list.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (list[mid][0] <= k) lo = mid;
    else hi = mid - 1;
  }
  const [k0, n, before] = list[lo];
  return k >= k0 && k < k0 + n ? before + k - k0 : -1;
}

/** The format op: mark `m` set to `v` from `s` to `e`; earlier spans of `m` it covers are dropped. */
export function richFormat(state: unknown, a: RichFormatArgs): void {
  if (a === null || typeof a !== 'object' || typeof a.m !== 'string' || a.m.length === 0) throw bad(`${RICH_FORMAT}: expected { p, m, v, s, e }`);
  if (a.v !== null && a.v !== true && (typeof a.v !== 'object' || Array.isArray(a.v) || !isPlainJson(a.v)))
    throw bad(`${RICH_FORMAT}: v must be true, null or a JSON object`);
  const s = checkId(a.s, 's', RICH_FORMAT);
  const e = checkId(a.e, 'e', RICH_FORMAT);
  const rich = richAt(state, a.p, RICH_FORMAT);
  // Read once as plain data: through the op's draft every read is a proxy trap.
  const t = current(rich.text);
  const from = fullIndexOf(t, s[0], s[1]);
  const to = fullIndexOf(t, e[0], e[1]);
  if (from < 0 || to < 0) throw bad(`${RICH_FORMAT}: no such character in the text (its insert was refused, or it belongs to another text)`);
  if (to < from) throw bad(`${RICH_FORMAT}: the span ends before it starts`);
  const kept = Array.from(current(rich.marks)).filter((sp) => {
    if (sp.m !== a.m) return true;
    const f = fullIndexOf(t, sp.s[0], sp.s[1]);
    return f < from || fullIndexOf(t, sp.e[0], sp.e[1]) > to;
  });
  kept.push({ m: a.m, v: a.v === true || a.v === null ? a.v : { ...a.v }, s, e });
  (rich as { marks: readonly MarkSpan[] }).marks = kept;
}

/** The rich-text ops, to spread beside `textOps()`: `ops: { ...textOps(), ...richTextOps(), ...mine }`. */
export function richTextOps(): { richBlock: typeof richBlock; richFormat: typeof richFormat } {
  return { [RICH_BLOCK]: richBlock, [RICH_FORMAT]: richFormat } as { richBlock: typeof richBlock; richFormat: typeof richFormat };
}

/** The visible index of a character, or -1 when deleted or absent (re-exported for the binding). */
export const visibleIndexOf = (t: Text, id: CharId): number => textIndexOf(t, id[0], id[1]);
