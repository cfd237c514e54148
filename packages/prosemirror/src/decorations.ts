/**
 * What the binding draws: the other members' carets (with their names) and selections, each
 * resolved from character ids in our copy of the text, and the text not yet Authoritative or
 * Visible. Pure: a function of the document, the texts and the presence values.
 */
import type { Node } from 'prosemirror-model';
import { Decoration, DecorationSet } from 'prosemirror-view';
import { isTextPlace, textPlaceIndex, type Text } from '@hercules/core';
import { newRanges } from './anchor.ts';
import { Positions } from './convert.ts';

/** One other connection's presence (room.presence.others()). */
export interface PeerLike {
  readonly client: string;
  readonly user?: string;
  readonly value: unknown;
}

export interface DecorationInput {
  /** The document, which mirrors `text`. */
  doc: Node;
  text: Text;
  /** The Authoritative view's text when that view is marked (null: the text is not there yet). */
  unauthoritative?: Text | null;
  /** The Visible view's text when that view is marked. */
  invisible?: Text | null;
  peers: readonly PeerLike[];
  presenceKey: string;
  path: string;
}

/** A colour of its own for each client when it names none (a hue from its id). */
function colorOf(id: string): string {
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) >>> 0;
  return `hsl(${h % 360}, 70%, 45%)`;
}

function caret(name: string, color: string): HTMLElement {
  const el = document.createElement('span');
  el.className = 'pm-hercules-caret';
  el.style.cssText = `position: relative; border-left: 2px solid ${color}; margin-left: -1px; margin-right: -1px;`;
  const label = document.createElement('span');
  label.className = 'pm-hercules-caret-name';
  label.style.cssText = `position: absolute; bottom: 100%; left: -2px; font-size: 0.75em; line-height: 1.2; color: white; padding: 0 3px; border-radius: 3px 3px 3px 0; white-space: nowrap; pointer-events: none; background-color: ${color};`;
  label.textContent = name;
  el.append(label);
  return el;
}

interface CursorValue {
  path?: unknown;
  anchor?: unknown;
  head?: unknown;
  name?: unknown;
  color?: unknown;
}

function peerDecorations(input: DecorationInput, pos: Positions, out: Decoration[]): void {
  for (const peer of input.peers) {
    const v = (peer.value as Record<string, unknown> | null)?.[input.presenceKey] as CursorValue | undefined;
    if (v === null || typeof v !== 'object' || v.path !== input.path || !isTextPlace(v.anchor) || !isTextPlace(v.head)) continue;
    const anchor = textPlaceIndex(input.text, v.anchor);
    const head = textPlaceIndex(input.text, v.head);
    // Their characters have not reached us yet: drawn once they have.
    if (anchor < 0 || head < 0) continue;
    // A cursor that names no one takes the name and colour its presence shows (`{ name, color }`).
    const own = peer.value as { name?: unknown; color?: unknown };
    const name = typeof v.name === 'string' ? v.name : typeof own.name === 'string' ? own.name : (peer.user ?? peer.client.slice(0, 8));
    const color = typeof v.color === 'string' ? v.color : typeof own.color === 'string' ? own.color : colorOf(peer.client);
    if (anchor !== head) {
      const style = `background-color: color-mix(in srgb, ${color} 25%, transparent)`;
      out.push(Decoration.inline(pos.toPos(Math.min(anchor, head)), pos.toPos(Math.max(anchor, head)), { class: 'pm-hercules-selection', style }));
    }
    // marks: [] draws the caret outside the text's marks: else, next to a bold word or a link, its
    // name label was drawn inside the <strong> or <a> (bold, or a link to follow).
    out.push(
      Decoration.widget(pos.toPos(head), () => caret(name, color), { key: `${peer.client} ${name} ${color}`, side: 1, marks: [], ignoreSelection: true }),
    );
  }
}

/** The marks' look: a dotted red underline, a fade (inline styles, so no stylesheet is needed; the classes name them). */
const UNAUTHORITATIVE = { class: 'pm-hercules-unauthoritative', style: 'text-decoration: underline dotted #c0392b' };
const INVISIBLE = { class: 'pm-hercules-invisible', style: 'opacity: 0.6' };

function viewDecorations(
  input: DecorationInput,
  pos: Positions,
  view: Text | null | undefined,
  attrs: { class: string; style: string },
  out: Decoration[],
): void {
  if (view === undefined) return;
  for (const r of newRanges(view, input.text)) {
    const from = pos.toPos(r.from);
    const to = pos.toPos(r.to);
    if (to > from) out.push(Decoration.inline(from, to, attrs));
  }
}

/** The decorations of `input.doc` (classes pm-hercules-unauthoritative and -invisible, carets, selections). */
export function buildDecorations(input: DecorationInput): DecorationSet {
  const pos = new Positions(input.doc);
  const out: Decoration[] = [];
  viewDecorations(input, pos, input.invisible, INVISIBLE, out);
  viewDecorations(input, pos, input.unauthoritative, UNAUTHORITATIVE, out);
  peerDecorations(input, pos, out);
  return DecorationSet.create(input.doc, out);
}
