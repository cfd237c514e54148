/**
 * The part of the document a local change touched, read flat: the top-level nodes that are not
 * the same objects in the documents before and after (ProseMirror keeps the nodes a step does not
 * touch, so the window is the blocks the transaction's steps changed), and where they start in the
 * flat text. Everything outside the window is the same in both documents, so a keystroke compares
 * and sends the window only: the cost of one no longer grows with the document (measured in
 * docs/benchmarks.md, rich text). A top-level node is the unit because a block's attributes (its
 * lists, whether it continues an item) are read from the nodes around it up to there.
 */
import type { Node } from 'prosemirror-model';
import { docToFlat, flatLength, readFlat } from './convert.ts';
import { flatOf, textRange, type Flat } from './flat.ts';
import type { RichText } from './rich.ts';

export interface Window {
  /** The flat index where the window starts, in both documents. */
  readonly lo: number;
  /** The window before the change (its text is the mirror's there) and after it. */
  readonly old: Flat;
  readonly next: Flat;
  /** The flat characters after the window (the same in both). */
  readonly rest: number;
  /** The whole document (the windowed reading did not hold; compared whole, as before). */
  readonly full: boolean;
}

/** The whole documents as the window (and the mirror's own reading when its text reads otherwise). */
export function fullWindow(base: Node, doc: Node, mirror: RichText): Window {
  const old = docToFlat(base);
  return { lo: 0, old: old.text === flatOf(mirror).text ? old : flatOf(mirror), next: docToFlat(doc), rest: 0, full: true };
}

/**
 * The window of the change from `base` (which mirrors `mirror`) to `doc`: O(top-level nodes)
 * identity checks, plus the window's characters. Falls back to the whole documents when the
 * mirror's characters there are not the window's (a text that does not open with a separator).
 */
export function localWindow(base: Node, doc: Node, mirror: RichText): Window {
  const na = base.childCount;
  const nb = doc.childCount;
  let s = 0;
  while (s < na && s < nb && base.child(s) === doc.child(s)) s++;
  let ea = na;
  let eb = nb;
  while (ea > s && eb > s && base.child(ea - 1) === doc.child(eb - 1)) {
    ea--;
    eb--;
  }
  let lo = 0;
  for (let i = 0; i < s; i++) lo += flatLength(base.child(i));
  let rest = 0;
  for (let i = ea; i < na; i++) rest += flatLength(base.child(i));
  const old = readFlat(base, s, ea);
  if (mirror.text.len !== lo + old.text.length + rest || textRange(mirror.text, lo, lo + old.text.length).text !== old.text)
    return fullWindow(base, doc, mirror);
  return { lo, old, next: readFlat(doc, s, eb), rest, full: false };
}
