/**
 * What changed between two snapshots of one collaborative text, found by character ids rather
 * than by comparing strings: a character typed next to an equal one is still told apart, so a
 * caret beside it stays on the right side. Chunks held by both snapshots (the same object: an
 * edit copies only the chunk it touches) are skipped, so the cost is that of the chunks that
 * changed, not of the document.
 */
import { textToString, type Text } from '@hercules/core';

/** A change in the old text's coordinates: replace `from..to` by `insert`. */
export interface TextChange {
  from: number;
  to: number;
  insert: string;
}

/** One character of a snapshot: its id as `client:clock` and its text ('' once deleted). */
interface Item {
  id: string;
  ch: string;
}

function items(t: Text, from: number, to: number): Item[] {
  const out: Item[] = [];
  for (let ci = from; ci < to; ci++)
    for (const r of t.chunks[ci].runs) {
      const client = t.clients[r.c];
      const n = r.t !== undefined ? r.t.length : r.d!;
      for (let i = 0; i < n; i++) out.push({ id: `${client}:${r.k + i}`, ch: r.t !== undefined ? r.t[i] : '' });
    }
  return out;
}

/** How many chunks `a` and `b` share at the start, and then at the end (not overlapping). */
function shared(a: Text, b: Text): { head: number; tail: number } {
  let head = 0;
  const max = Math.min(a.chunks.length, b.chunks.length);
  while (head < max && a.chunks[head] === b.chunks[head]) head++;
  let tail = 0;
  while (tail < max - head && a.chunks[a.chunks.length - 1 - tail] === b.chunks[b.chunks.length - 1 - tail]) tail++;
  return { head, tail };
}

/**
 * The changes that turn `a` into `b`, in `a`'s visible coordinates, ascending and apart; null
 * when the two do not hold their common characters in one order (then a caller falls back to
 * `stringDiff`). Characters only in `a` (an insert of ours the server refused) count as deleted.
 */
export function textDiff(a: Text, b: Text): TextChange[] | null {
  if (a === b) return [];
  const { head, tail } = shared(a, b);
  let pos = 0;
  for (let ci = 0; ci < head; ci++) pos += a.chunks[ci].v;
  const xs = items(a, head, a.chunks.length - tail);
  const ys = items(b, head, b.chunks.length - tail);
  const inA = new Set(xs.map((x) => x.id));
  const inB = new Set(ys.map((y) => y.id));
  const out: TextChange[] = [];
  const add = (from: number, to: number, insert: string) => {
    const last = out[out.length - 1];
    if (last !== undefined && last.to === from) {
      last.to = to;
      last.insert += insert;
    } else out.push({ from, to, insert });
  };
  let i = 0;
  let j = 0;
  while (i < xs.length || j < ys.length) {
    const x = xs[i];
    const y = ys[j];
    if (x !== undefined && !inB.has(x.id)) {
      if (x.ch !== '') add(pos, ++pos, '');
      i++;
    } else if (y !== undefined && !inA.has(y.id)) {
      if (y.ch !== '') add(pos, pos, y.ch);
      j++;
    } else {
      if (x === undefined || y === undefined || x.id !== y.id) return null;
      if (x.ch !== '' && y.ch === '') add(pos, pos + 1, '');
      else if (x.ch === '' && y.ch !== '') add(pos, pos, y.ch);
      if (x.ch !== '') pos++;
      i++;
      j++;
    }
  }
  return out;
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
