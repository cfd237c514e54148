/**
 * A rich text read flat, the form both sides are compared in: the characters (each block opened
 * by `\n`), each block's attributes, and each mark's value on every character. The state's
 * RichText and a ProseMirror document both read to it; the binding sends the difference between
 * two of them as ops, and builds the document from it.
 */
import { textToString, type Text } from '@hercules/core';
import { idKey, type BlockAttrs, type CharId, type MarkSpan, type RichText } from './rich.ts';

/** A mark's value on a character: true, its attributes, or null (not marked). */
export type MarkValue = MarkSpan['v'];

export interface Flat {
  readonly text: string;
  /** The attributes of each block, in order; `{}` is a paragraph. */
  readonly blocks: readonly BlockAttrs[];
  /** For each mark name, its value on each character (null where unmarked). */
  readonly marks: ReadonlyMap<string, readonly MarkValue[]>;
}

/** Where a character lies: how many visible characters are before it, and whether it is visible. */
function where(t: Text, id: CharId): { before: number; visible: boolean } | null {
  const c = t.clients.indexOf(id[0]);
  if (c < 0) return null;
  let i = 0;
  for (const ch of t.chunks)
    for (const r of ch.runs) {
      const n = r.t !== undefined ? r.t.length : r.d!;
      if (r.c === c && id[1] >= r.k && id[1] < r.k + n) return r.t !== undefined ? { before: i + id[1] - r.k, visible: true } : { before: i, visible: false };
      if (r.t !== undefined) i += n;
    }
  return null;
}

/** The visible range `[from, to)` a span covers (empty when all its characters are deleted). */
export function spanRange(t: Text, sp: MarkSpan): { from: number; to: number } | null {
  const s = where(t, sp.s);
  const e = where(t, sp.e);
  if (s === null || e === null) return null;
  return { from: s.before, to: e.before + (e.visible ? 1 : 0) };
}

/** Each separator's id, in order: the visible `\n`s of the text. */
export function separators(t: Text): CharId[] {
  const out: CharId[] = [];
  for (const ch of t.chunks)
    for (const r of ch.runs) {
      if (r.t === undefined) continue;
      for (let o = r.t.indexOf('\n'); o >= 0; o = r.t.indexOf('\n', o + 1)) out.push([t.clients[r.c], r.k + o]);
    }
  return out;
}

/** A value compared by content: the key of a mark value or of block attributes. */
export const keyOf = (v: unknown): string => (v === null || v === undefined ? '' : v === true ? 't' : JSON.stringify(sorted(v)));

function sorted(v: unknown): unknown {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
  const o = v as Record<string, unknown>;
  return Object.fromEntries(
    Object.keys(o)
      .sort()
      .map((k) => [k, sorted(o[k])]),
  );
}

/** The flat form of a rich text (O(length + spans x runs); memoised per snapshot). */
const flats = new WeakMap<object, Flat>();
export function flatOf(rich: RichText): Flat {
  const hit = flats.get(rich);
  if (hit !== undefined) return hit;
  const t = rich.text;
  const text = textToString(t);
  const blocks = separators(t).map((id) => rich.blocks[idKey(id)] ?? {});
  const marks = new Map<string, MarkValue[]>();
  for (const sp of rich.marks) {
    const r = spanRange(t, sp);
    if (r === null || r.to <= r.from) continue;
    let vals = marks.get(sp.m);
    if (vals === undefined) marks.set(sp.m, (vals = new Array<MarkValue>(text.length).fill(null)));
    // Later spans are painted over earlier ones: the last ordered wins (RICH-MARK).
    vals.fill(sp.v, r.from, r.to);
  }
  // Separators carry no marks: a span over two blocks marks their text only.
  for (const vals of marks.values()) for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) vals[i] = null;
  const flat: Flat = { text, blocks, marks };
  if (Object.isFrozen(rich)) flats.set(rich, flat);
  return flat;
}

/** The id of the character at visible index `i` of `t`. */
export function idAt(t: Text, i: number): CharId {
  let left = i;
  for (const ch of t.chunks) {
    if (left >= ch.v) {
      left -= ch.v;
      continue;
    }
    for (const r of ch.runs) {
      if (r.t === undefined) continue;
      if (left < r.t.length) return [t.clients[r.c], r.k + left];
      left -= r.t.length;
    }
  }
  throw new RangeError(`no character ${i} in a text of ${t.len}`);
}
