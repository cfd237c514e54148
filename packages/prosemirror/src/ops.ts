/**
 * A local change as ops: the editor's new document read flat and compared with the snapshot it
 * mirrored. The characters: one delete and one insert where the two differ, placed by the
 * transaction's own steps (typing "a" before "aaa" is an insert at the start, where comparing
 * strings says the end). Then the blocks and the marks of the new state against the document:
 * a block op per block whose attributes differ, a format op per run of characters whose mark
 * differs. Every op names the characters of the snapshot, never indexes (rich.ts).
 */
import type { Node } from 'prosemirror-model';
import type { Transaction } from 'prosemirror-state';
import { deleteArgs, insertArgs, textNextClock, TEXT_DELETE, TEXT_INSERT, type TextAnchor, type TextPath } from '@hercules/core';
import { Positions } from './convert.ts';
import { flatOf, flatRange, idAt, keyOf, type Flat, type MarkValue } from './flat.ts';
import { RICH_BLOCK, RICH_FORMAT, textPathOf, type CharId, type RichText } from './rich.ts';
import type { Window } from './window.ts';

interface Submitter {
  readonly clientId: string;
  submit(name: string, args?: unknown): unknown;
  /** The lowest clock the room's inserts may take (TEXT-ID-ONCE); absent: 0. */
  textClockFloor?(): number;
}

/**
 * The part of `doc` the transactions from `base` changed, in `doc`'s positions (null when they do
 * not lead from `base` to `doc`: then the strings alone place the change).
 */
export function changedRange(base: Node, doc: Node, trs: readonly Transaction[]): { from: number; to: number } | null {
  const first = trs.findIndex((tr) => tr.before === base);
  if (first < 0) return null;
  let from = Number.POSITIVE_INFINITY;
  let to = Number.NEGATIVE_INFINITY;
  let at = base;
  for (const tr of trs.slice(first)) {
    if (tr.before !== at) return null;
    at = tr.doc;
    if (!tr.docChanged) continue;
    // What earlier transactions changed, moved through this one; then this one's own steps.
    if (from <= to) [from, to] = [tr.mapping.map(from, -1), tr.mapping.map(to, 1)];
    tr.mapping.maps.forEach((map, i) => {
      const rest = tr.mapping.slice(i + 1);
      map.forEach((_oldStart, _oldEnd, newStart, newEnd) => {
        from = Math.min(from, rest.map(newStart, -1));
        to = Math.max(to, rest.map(newEnd, 1));
      });
    });
  }
  if (at !== doc) return null;
  // Mark steps change no positions: the range is then unknown, the strings are equal anyway.
  return from <= to ? { from, to } : null;
}

/**
 * The one replacement from `a` to `b` (both open with a separator, which stays). When the change
 * is an insert or a delete inside repeated text, several places give the same strings: the one
 * nearest `hint` (where the transaction's steps changed the document) is taken.
 */
function replacement(a: string, b: string, hint: number): { at: number; del: number; ins: string } {
  const min = Math.min(a.length, b.length);
  let p = 0;
  while (p < min && a.charCodeAt(p) === b.charCodeAt(p)) p++;
  let s = 0;
  while (s < min && a.charCodeAt(a.length - 1 - s) === b.charCodeAt(b.length - 1 - s)) s++;
  if (p + s >= min) {
    // The shorter is a prefix and a suffix of the longer: an insert or delete anywhere in lo..p.
    const at = Math.min(Math.max(hint, min - s, 1), p);
    const n = b.length - a.length;
    return { at, del: Math.max(0, -n), ins: b.slice(at, at + Math.max(0, n)) };
  }
  const at = Math.max(p, 1);
  s = Math.min(s, min - at);
  return { at, del: a.length - s - at, ins: b.slice(at, b.length - s) };
}

/** One replacement of characters, and the clock of the first inserted one. */
interface Replaced {
  at: number;
  del: number;
  ins: string;
  k: number;
}

/** The text ops turning the mirror's characters in the window into the window's new ones. */
function submitText(
  room: Submitter,
  path: TextPath,
  mirror: RichText,
  w: Window,
  doc: Node,
  range: { from: number; to: number } | null,
  now: () => RichText,
): Replaced {
  const t = mirror.text;
  // Where the steps changed the document, as an index of its flat text (the new one's: the two
  // agree before it), in the window.
  const hint = range === null ? 0 : new Positions(doc).toFlat(range.from) - w.lo;
  const r = replacement(w.old.text, w.next.text, Math.max(hint, 0));
  const tp = textPathOf(path);
  if (r.del > 0) room.submit(TEXT_DELETE, deleteArgs(t, tp, w.lo + r.at, r.del, room.clientId));
  // Anchored on the mirror's characters; the clock follows the ops already submitted, and is at
  // least the room's floor: the view may lack inserts of ours (docs/spec.md, TEXT-ID-ONCE).
  const k = Math.max(textNextClock(now().text, room.clientId), room.textClockFloor?.() ?? 0);
  if (r.ins.length > 0) room.submit(TEXT_INSERT, { ...insertArgs(t, tp, room.clientId, w.lo + r.at, r.ins), k });
  return { ...r, k };
}

/**
 * The characters of the new document as the state names them: those the edit kept are the
 * mirror's (`old` their index there), those it inserted ours (`[clientId, k + offset]`).
 */
class Ids {
  constructor(
    readonly mirror: RichText,
    readonly r: Replaced,
    readonly client: string,
    /** Where the window starts in the flat text: indexes here are the window's. */
    readonly lo: number,
  ) {}
  /** The mirror's index (in the window) of the new window's character `j`, or -1 for an inserted one. */
  old(j: number): number {
    const { at, del, ins } = this.r;
    return j < at ? j : j >= at + ins.length ? j - ins.length + del : -1;
  }
  id(j: number): CharId {
    const o = this.old(j);
    if (o < 0) return [this.client, this.r.k + j - this.r.at];
    return idAt(this.mirror.text, this.lo + o);
  }
  anchor(j: number): TextAnchor {
    return [...this.id(j), this.lo + j];
  }
}

/**
 * A block op for each block whose attributes the edit changed (a kept block: they differ from
 * the mirror's; a new one: they are not a paragraph's).
 */
function submitBlocks(room: Submitter, path: TextPath, ids: Ids, old: Flat, next: Flat): void {
  let ob = 0;
  const oldBlock = new Map<number, number>();
  for (let i = old.text.indexOf('\n'); i >= 0; i = old.text.indexOf('\n', i + 1)) oldBlock.set(i, ob++);
  let j = 0;
  for (let i = next.text.indexOf('\n'); i >= 0; i = next.text.indexOf('\n', i + 1), j++) {
    const want = next.blocks[j] ?? {};
    const o = ids.old(i);
    const was = o < 0 ? {} : (old.blocks[oldBlock.get(o)!] ?? {});
    if (keyOf(want) === keyOf(was)) continue;
    room.submit(RICH_BLOCK, { p: path, b: ids.id(i), a: Object.keys(want).length === 0 ? null : want });
  }
}

/**
 * A format op for each run of characters whose mark `name` the edit changed: a kept character
 * whose value differs from the mirror's, an inserted one whose value differs from what the state
 * gives it (the spans around it), or, when others' ops came in between, from none.
 */
function submitMark(room: Submitter, ids: Ids, path: TextPath, name: string, old: Flat, now: Flat | null, next: Flat): void {
  const want = next.marks.get(name);
  const had = old.marks.get(name);
  const cur = now?.marks.get(name);
  const key = (vals: readonly MarkValue[] | undefined, i: number) => keyOf(vals?.[i] ?? null);
  const have = (j: number) => {
    const o = ids.old(j);
    return o >= 0 ? key(had, o) : now !== null ? key(cur, j) : '';
  };
  const n = next.text.length;
  for (let i = 0; i < n; i++) {
    const k = key(want, i);
    if (have(i) === k) continue;
    let j = i;
    while (j + 1 < n && key(want, j + 1) === k && have(j + 1) !== k) j++;
    // Stretched over the neighbours that already have the value (in this block), so that a span
    // typed onto the end of a bold word covers the word's span, which is then dropped: about one
    // span per formatted run, not one per keystroke.
    let s = i;
    while (s > 0 && next.text[s - 1] !== '\n' && key(want, s - 1) === k && have(s - 1) === k) s--;
    let e = j;
    while (e + 1 < n && next.text[e + 1] !== '\n' && key(want, e + 1) === k && have(e + 1) === k) e++;
    room.submit(RICH_FORMAT, { p: path, m: name, v: want?.[i] ?? null, s: ids.anchor(s), e: ids.anchor(e) });
    i = j;
  }
}

/**
 * Submit the ops turning the mirror into the new document, in the window the change touched
 * (window.ts; `range` where the transactions changed `doc`). The window's `old` is the document
 * before the edit, read flat: its text is the mirror's, its blocks and marks as the schema reads
 * them (a mark it does not know, or attributes it reads otherwise, are not the edit's and are left
 * alone). `now` reads the Submitted view, which each op updates. Only what the edit changed is
 * sent: a mark or block the room changed meanwhile stays the room's.
 */
export function submitChanges(
  room: Submitter,
  path: TextPath,
  mirror: RichText,
  w: Window,
  doc: Node,
  range: { from: number; to: number } | null,
  now: () => RichText,
): void {
  const r = submitText(room, path, mirror, w, doc, range, now);
  const ids = new Ids(mirror, r, room.clientId, w.lo);
  const { old, next } = w;
  submitBlocks(room, path, ids, old, next);
  const after = windowIn(now(), w);
  // Others' ops came in between: the new characters' own marks are not known; sent if any.
  const level = after !== null && after.text === next.text ? after : null;
  for (const name of new Set([...old.marks.keys(), ...(after?.marks.keys() ?? []), ...next.marks.keys()])) submitMark(room, ids, path, name, old, level, next);
}

/** The window's characters in `rich` (null when its length says they are not there). */
export function windowIn(rich: RichText, w: Window): Flat | null {
  if (w.full) return flatOf(rich);
  const to = w.lo + w.next.text.length;
  return rich.text.len === to + w.rest ? flatRange(rich, w.lo, to) : null;
}
