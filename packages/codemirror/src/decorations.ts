/**
 * What the binding draws: the other members' carets (with their names) and selections, each
 * resolved from character ids in our copy of the text, and the text not yet Authoritative or
 * Visible. Pure: a function of the texts and the presence values.
 */
import type { Range } from '@codemirror/state';
import { Decoration, type DecorationSet, EditorView, WidgetType } from '@codemirror/view';
import { isTextPlace, textPlaceIndex, type Text } from '@hercules/core';
import { newRanges } from './diff.ts';

/** One other connection's presence (room.presence.others()). */
export interface PeerLike {
  readonly client: string;
  readonly user?: string;
  readonly value: unknown;
}

export interface DecorationInput {
  /** The text the document mirrors (null: not yet level, nothing drawn). */
  doc: Text | null;
  /** The Authoritative view's text when that view is marked (null: the text is not there yet). */
  unauthoritative?: Text | null;
  /** The Visible view's text when that view is marked. */
  invisible?: Text | null;
  peers: readonly PeerLike[];
  presenceKey: string;
  path: string;
}

class Caret extends WidgetType {
  constructor(
    readonly name: string,
    readonly color: string,
  ) {
    super();
  }
  override eq(o: Caret): boolean {
    return o.name === this.name && o.color === this.color;
  }
  toDOM(): HTMLElement {
    const caret = document.createElement('span');
    caret.className = 'cm-hercules-caret';
    caret.style.borderLeftColor = this.color;
    const label = document.createElement('span');
    label.className = 'cm-hercules-caret-name';
    label.style.backgroundColor = this.color;
    label.textContent = this.name;
    caret.append(label);
    return caret;
  }
  override ignoreEvent(): boolean {
    return true;
  }
}

/** A colour of its own for each client when it names none (a hue from its id). */
function colorOf(id: string): string {
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) >>> 0;
  return `hsl(${h % 360}, 70%, 45%)`;
}

interface CursorValue {
  path?: unknown;
  anchor?: unknown;
  head?: unknown;
  name?: unknown;
  color?: unknown;
}

function peerDecorations(doc: Text, input: DecorationInput, out: Range<Decoration>[]): void {
  for (const peer of input.peers) {
    const v = (peer.value as Record<string, unknown> | null)?.[input.presenceKey] as CursorValue | undefined;
    if (v === null || typeof v !== 'object' || v.path !== input.path || !isTextPlace(v.anchor) || !isTextPlace(v.head)) continue;
    const anchor = textPlaceIndex(doc, v.anchor);
    const head = textPlaceIndex(doc, v.head);
    // Their characters have not reached us yet: drawn once they have.
    if (anchor < 0 || head < 0) continue;
    const name = typeof v.name === 'string' ? v.name : (peer.user ?? peer.client.slice(0, 8));
    const color = typeof v.color === 'string' ? v.color : colorOf(peer.client);
    if (anchor !== head) {
      const style = `background-color: color-mix(in srgb, ${color} 25%, transparent)`;
      out.push(Decoration.mark({ class: 'cm-hercules-selection', attributes: { style } }).range(Math.min(anchor, head), Math.max(anchor, head)));
    }
    out.push(Decoration.widget({ widget: new Caret(name, color), side: 1 }).range(head));
  }
}

const unauthoritative = Decoration.mark({ class: 'cm-hercules-unauthoritative' });
const invisible = Decoration.mark({ class: 'cm-hercules-invisible' });

function viewDecorations(doc: Text, view: Text | null | undefined, mark: Decoration, out: Range<Decoration>[]): void {
  if (view === undefined) return;
  const ranges = view === null ? [{ from: 0, to: doc.len }] : newRanges(view, doc);
  for (const r of ranges) if (r.to > r.from) out.push(mark.range(r.from, r.to));
}

export function buildDecorations(input: DecorationInput): DecorationSet {
  const doc = input.doc;
  if (doc === null) return Decoration.none;
  const out: Range<Decoration>[] = [];
  viewDecorations(doc, input.invisible, invisible, out);
  viewDecorations(doc, input.unauthoritative, unauthoritative, out);
  peerDecorations(doc, input, out);
  return Decoration.set(out, true);
}

export const cursorTheme = EditorView.baseTheme({
  '.cm-hercules-caret': { position: 'relative', borderLeft: '2px solid', marginLeft: '-1px', marginRight: '-1px' },
  '.cm-hercules-caret-name': {
    position: 'absolute',
    bottom: '100%',
    left: '-2px',
    fontSize: '0.75em',
    lineHeight: '1.2',
    color: 'white',
    padding: '0 3px',
    borderRadius: '3px 3px 3px 0',
    whiteSpace: 'nowrap',
    pointerEvents: 'none',
  },
  '.cm-hercules-unauthoritative': { textDecoration: 'underline dotted', textDecorationColor: '#c0392b' },
  '.cm-hercules-invisible': { opacity: '0.6' },
});
