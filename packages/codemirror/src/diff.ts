/**
 * What changed between two snapshots of one collaborative text, found by character ids rather
 * than by comparing strings: a character typed next to an equal one is still told apart, so a
 * caret beside it stays on the right side. Chunks held by both snapshots (the same object: an
 * edit copies only the chunk it touches) are skipped, so the cost is that of the chunks that
 * changed, not of the document.
 */
import { compactText, textRunSize, textToString, type Text, type TextFlat } from '@hercules/core';

/** A change in the old text's coordinates: replace `from..to` by `insert`. */
export interface TextChange {
  from: number;
  to: number;
  insert: string;
}

/** A piece of a run: `n` characters `[client, k]`, `[client, k+1]`, ...; `t` their text, '' once deleted. */
interface Seg {
  c: string;
  k: number;
  n: number;
  t: string;
}

function segments(t: TextFlat, from: number, to: number): Seg[] {
  const out: Seg[] = [];
  for (let ci = from; ci < to; ci++)
    for (const r of t.chunks[ci].runs) out.push({ c: t.clients[r[0]], k: r[1], n: textRunSize(r), t: typeof r[2] === 'string' ? r[2] : '' });
  return out;
}

/** Each client's clocks the segments hold, as sorted, merged [from, to) intervals. */
function held(segs: readonly Seg[]): Map<string, [number, number][]> {
  const by = new Map<string, [number, number][]>();
  for (const s of segs) {
    const list = by.get(s.c) ?? [];
    list.push([s.k, s.k + s.n]);
    by.set(s.c, list);
  }
  for (const [c, list] of by) {
    list.sort((x, y) => x[0] - y[0]);
    const merged: [number, number][] = [];
    for (const iv of list) {
      const last = merged[merged.length - 1];
      if (last !== undefined && last[1] >= iv[0]) last[1] = Math.max(last[1], iv[1]);
      else merged.push(iv);
    }
    by.set(c, merged);
  }
  return by;
}

/** Whether `[c, k]` is held, and for how many clocks from k (at most `max`) that stays so. */
function span(by: Map<string, [number, number][]>, c: string, k: number, max: number): { inside: boolean; n: number } {
  const list = by.get(c) ?? [];
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (list[mid][1] <= k) lo = mid + 1;
    else hi = mid;
  }
  const iv = list[lo];
  if (iv !== undefined && iv[0] <= k) return { inside: true, n: Math.min(max, iv[1] - k) };
  return { inside: false, n: Math.min(max, iv === undefined ? max : iv[0] - k) };
}

/** How many chunks `a` and `b` share at the start, and then at the end (not overlapping). */
function shared(a: TextFlat, b: TextFlat): { head: number; tail: number } {
  let head = 0;
  const max = Math.min(a.chunks.length, b.chunks.length);
  while (head < max && a.chunks[head] === b.chunks[head]) head++;
  let tail = 0;
  while (tail < max - head && a.chunks[a.chunks.length - 1 - tail] === b.chunks[b.chunks.length - 1 - tail]) tail++;
  return { head, tail };
}

/** Changes in ascending order, each joined to the one before when they touch. */
class Changes {
  readonly list: TextChange[] = [];
  add(from: number, to: number, insert: string): void {
    const last = this.list[this.list.length - 1];
    if (last !== undefined && last.to === from) {
      last.to = to;
      last.insert += insert;
    } else this.list.push({ from, to, insert });
  }
}

/**
 * The changes that turn `a` into `b`, in `a`'s visible coordinates, ascending and apart; null
 * when the two do not hold their common characters in one order (then a caller falls back to
 * `stringDiff`). Characters only in `a` (an insert of ours the server refused) count as deleted.
 * It walks pieces of runs, not characters: one character at a time took 90 to 200 ms for one
 * insert into a 100k-character text made by createText (one run in one chunk); by pieces, 1 to
 * 14 µs (2026-11-28, load 7).
 */
export function textDiff(a0: Text, b0: Text): TextChange[] | null {
  if (a0 === b0) return [];
  // Read as a flat list of chunks: the tree's leaves, shared between snapshots (a text stored in
  // the layout before tuples, TEXT-LAYOUT, is read converted: no chunk shared then).
  const a = compactText(a0);
  const b = compactText(b0);
  const { head, tail } = shared(a, b);
  let pos = 0;
  for (let ci = 0; ci < head; ci++) pos += a.chunks[ci].v;
  const xs = segments(a, head, a.chunks.length - tail);
  const ys = segments(b, head, b.chunks.length - tail);
  const inA = held(xs);
  const inB = held(ys);
  const out = new Changes();
  // The next segment of each side, and how far into it the walk is.
  let i = 0;
  let xo = 0;
  let j = 0;
  let yo = 0;
  while (i < xs.length || j < ys.length) {
    const x = xs[i];
    const y = ys[j];
    const xin = x === undefined ? undefined : span(inB, x.c, x.k + xo, x.n - xo);
    if (x !== undefined && !xin!.inside) {
      if (x.t !== '') out.add(pos, (pos += xin!.n), '');
      xo += xin!.n;
    } else if (y !== undefined && !span(inA, y.c, y.k + yo, y.n - yo).inside) {
      const m = span(inA, y.c, y.k + yo, y.n - yo).n;
      if (y.t !== '') out.add(pos, pos, y.t.slice(yo, yo + m));
      yo += m;
    } else {
      if (x === undefined || y === undefined || x.c !== y.c || x.k + xo !== y.k + yo) return null;
      const m = Math.min(x.n - xo, y.n - yo);
      if (x.t !== '' && y.t === '') out.add(pos, pos + m, '');
      else if (x.t === '' && y.t !== '') out.add(pos, pos, y.t.slice(yo, yo + m));
      if (x.t !== '') pos += m;
      xo += m;
      yo += m;
    }
    if (x !== undefined && xo === x.n) [i, xo] = [i + 1, 0];
    if (y !== undefined && yo === y.n) [j, yo] = [j + 1, 0];
  }
  return out.list;
}

/** One change from the common prefix and suffix of two strings: the fallback. */
export function stringDiff(a: string, b: string): TextChange[] {
  let p = 0;
  const max = Math.min(a.length, b.length);
  while (p < max && a.charCodeAt(p) === b.charCodeAt(p)) p++;
  let s = 0;
  while (s < max - p && a.charCodeAt(a.length - 1 - s) === b.charCodeAt(b.length - 1 - s)) s++;
  return p === a.length && p === b.length ? [] : [{ from: p, to: a.length - s, insert: b.slice(p, b.length - s) }];
}

/** `changes` applied to `s` (to check a diff). */
export function applyChanges(s: string, changes: readonly TextChange[]): string {
  let out = '';
  let at = 0;
  for (const c of changes) {
    out += s.slice(at, c.from) + c.insert;
    at = c.to;
  }
  return out + s.slice(at);
}

/** The changes from `a` to `b`: by ids, checked against the strings, else by prefix and suffix. */
export function changesBetween(a: Text, b: Text): TextChange[] {
  const byId = textDiff(a, b);
  const sb = textToString(b);
  if (byId !== null && applyChanges(textToString(a), byId) === sb) return byId;
  return stringDiff(textToString(a), sb);
}

/**
 * The ranges of `b` (its visible coordinates) that `a` does not show: in the binding, the text
 * of the Submitted view not yet in the Authoritative (or Visible) one.
 */
export function newRanges(a: Text, b: Text): { from: number; to: number }[] {
  const changes = textDiff(a, b) ?? stringDiff(textToString(a), textToString(b));
  const out: { from: number; to: number }[] = [];
  let shift = 0;
  for (const c of changes) {
    const from = c.from + shift;
    if (c.insert.length > 0) out.push({ from, to: from + c.insert.length });
    shift += c.insert.length - (c.to - c.from);
  }
  return out;
}
