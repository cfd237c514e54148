/**
 * A rich text read flat, the form both sides are compared in: the characters (each block opened
 * by `\n`), each block's attributes, and each mark's value on every character. The state's
 * RichText and a ProseMirror document both read to it; the binding sends the difference between
 * two of them as ops, and builds the document from it.
 */
import { compactText, textRunSize, textRunText, type Text } from '@hercules/core';
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

/** One run of a client, placed: its first clock, its size, the visible characters before it. */
interface Placed {
  readonly k: number;
  readonly n: number;
  readonly before: number;
  readonly visible: boolean;
}

/**
 * Each client's runs sorted by clock (memoised per snapshot): a character is then found by a
 * binary search, not a walk of every run, so placing the spans costs O(runs + spans x log runs)
 * rather than O(spans x runs).
 */
const placed = new WeakMap<object, Map<number, Placed[]>>();
function runsByClient(t: Text): Map<number, Placed[]> {
  const hit = placed.get(t);
  if (hit !== undefined) return hit;
  const by = new Map<number, Placed[]>();
  let i = 0;
  for (const ch of compactText(t).chunks)
    for (const r of ch.runs) {
      const visible = typeof r[2] === 'string';
      const n = textRunSize(r);
      let list = by.get(r[0]);
      if (list === undefined) by.set(r[0], (list = []));
      list.push({ k: r[1], n, before: i, visible });
      if (visible) i += n;
    }
  for (const list of by.values()) list.sort((a, b) => a.k - b.k);
  if (Object.isFrozen(t)) placed.set(t, by);
  return by;
}

/** Where a character lies: how many visible characters are before it, and whether it is visible. */
function where(t: Text, id: CharId): { before: number; visible: boolean } | null {
  const list = runsByClient(t).get(t.clients.indexOf(id[0]));
  if (list === undefined) return null;
  let lo = 0;
  let hi = list.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (list[mid].k <= id[1]) lo = mid;
    else hi = mid - 1;
  }
  const p = list[lo];
  if (id[1] < p.k || id[1] >= p.k + p.n) return null;
  return p.visible ? { before: p.before + id[1] - p.k, visible: true } : { before: p.before, visible: false };
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
  for (const ch of compactText(t).chunks)
    for (const r of ch.runs) {
      const s = textRunText(r);
      if (s === undefined) continue;
      for (let o = s.indexOf('\n'); o >= 0; o = s.indexOf('\n', o + 1)) out.push([t.clients[r[0]], r[1] + o]);
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

/** The visible characters `[from, to)` of `t`, and the ids of the separators among them (O(chunks + to - from)). */
export function textRange(t: Text, from: number, to: number): { text: string; seps: CharId[] } {
  const parts: string[] = [];
  const seps: CharId[] = [];
  let i = 0;
  for (const ch of compactText(t).chunks) {
    if (i >= to) break;
    if (i + ch.v <= from) {
      i += ch.v;
      continue;
    }
    for (const r of ch.runs) {
      const rt = textRunText(r);
      if (rt === undefined) continue;
      const a = Math.max(from - i, 0);
      const b = Math.min(to - i, rt.length);
      if (a < b) {
        const s = rt.slice(a, b);
        parts.push(s);
        for (let o = s.indexOf('\n'); o >= 0; o = s.indexOf('\n', o + 1)) seps.push([t.clients[r[0]], r[1] + a + o]);
      }
      i += rt.length;
    }
  }
  return { text: parts.join(''), seps };
}

/**
 * The flat form of the characters `[from, to)` of a rich text (a window starting at a separator):
 * O(chunks + window + runs + spans x log runs), not O(length), so that a keystroke compares the
 * blocks it touched only.
 */
export function flatRange(rich: RichText, from: number, to: number): Flat {
  const t = rich.text;
  const { text, seps } = textRange(t, from, to);
  const blocks = seps.map((id) => rich.blocks[idKey(id)] ?? {});
  const marks = new Map<string, MarkValue[]>();
  for (const sp of rich.marks) {
    const r = spanRange(t, sp);
    if (r === null) continue;
    const a = Math.max(r.from, from) - from;
    const b = Math.min(r.to, to) - from;
    if (b <= a) continue;
    let vals = marks.get(sp.m);
    if (vals === undefined) marks.set(sp.m, (vals = new Array<MarkValue>(text.length).fill(null)));
    // Later spans are painted over earlier ones: the last ordered wins (RICH-MARK).
    vals.fill(sp.v, a, b);
  }
  // Separators carry no marks: a span over two blocks marks their text only.
  for (const vals of marks.values()) for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) vals[i] = null;
  return { text, blocks, marks };
}

/** The flat form of a rich text (O(length + runs + spans x log runs); memoised per snapshot). */
const flats = new WeakMap<object, Flat>();
export function flatOf(rich: RichText): Flat {
  const hit = flats.get(rich);
  if (hit !== undefined) return hit;
  const flat = flatRange(rich, 0, rich.text.len);
  if (Object.isFrozen(rich)) flats.set(rich, flat);
  return flat;
}

/** The id of the character at visible index `i` of `t`. */
export function idAt(t: Text, i: number): CharId {
  let left = i;
  for (const ch of compactText(t).chunks) {
    if (left >= ch.v) {
      left -= ch.v;
      continue;
    }
    for (const r of ch.runs) {
      const s = textRunText(r);
      if (s === undefined) continue;
      if (left < s.length) return [t.clients[r[0]], r[1] + left];
      left -= s.length;
    }
  }
  throw new RangeError(`no character ${i} in a text of ${t.len}`);
}
