/**
 * A ProseMirror editor bound to a rich text of the room (rich.ts). The document mirrors one
 * snapshot of the rich text in the Submitted view (`mirror`). A local change is read flat and
 * compared with that snapshot: the characters that differ become one delete and one insert, the
 * blocks and marks that differ become block and format ops, all naming the snapshot's characters
 * (ops.ts). When the Submitted view changes under us (another client's op, a rebase, a refusal),
 * the document is rebuilt from it and only the part that differs is replaced, in one transaction
 * marked as the room's and kept out of the undo history; the selection is put back on its
 * characters. Nothing the room sent is sent back.
 */
import type { Node, Schema } from 'prosemirror-model';
import { Plugin, PluginKey, TextSelection, type EditorState, type Transaction } from 'prosemirror-state';
import { DecorationSet, type EditorView } from 'prosemirror-view';
import { textPlaceAt, textPlaceIndex, type TextPath, type TextView } from '@hercules/core';
import { docToFlat, flatToDoc, Positions, sameFlat } from './convert.ts';
import { buildDecorations, type PeerLike } from './decorations.ts';
import { flatOf } from './flat.ts';
import { changedRange, submitChanges, windowIn } from './ops.ts';
import { richAt, type RichText } from './rich.ts';
import { schema as defaultSchema } from './schema.ts';
import { fullWindow, localWindow } from './window.ts';

/** What the binding needs of a room: the room `connect()` returns, or a ClientRoom. */
export interface BindableRoom {
  readonly clientId: string;
  getState(view?: TextView): unknown;
  subscribe(view: TextView, listener: (state: any) => void): () => void;
  submit(name: string, args?: unknown): unknown;
  readonly presence: {
    get(): unknown;
    update(partial: any): void;
    others(): readonly PeerLike[];
    subscribe(listener: (others: readonly PeerLike[]) => void): () => void;
  };
}

/** Which views the editor marks: the text not yet Authoritative, not yet Visible. */
export interface ViewMarks {
  authoritative?: boolean;
  visible?: boolean;
}

export interface CollabOptions {
  room: BindableRoom;
  /** The rich text's key path in the state (a `createRichText()` value). */
  path: TextPath;
  /**
   * Share our cursor and selection through presence as `{ [presenceKey]: { path, anchor, head,
   * name, color } }` and draw the others'. Default: shared, named by the client id. `false`:
   * neither sent nor drawn.
   */
  cursors?: false | { name?: string; color?: string };
  /** The presence key of the cursor (default 'cursor'); a presence schema must allow it. */
  presenceKey?: string;
  /** Which views to mark at first (default: none); toggle later with `setViewMarks`. */
  marks?: ViewMarks;
  /** The editor's schema: the binding's `schema` (default) or one with the same node and mark names. */
  schema?: Schema;
}

interface PluginValue {
  readonly marks: Required<ViewMarks>;
  readonly decos: DecorationSet;
}
interface Meta {
  marks?: ViewMarks;
  decos?: DecorationSet;
  fromRoom?: true;
}

export const herculesKey = new PluginKey<PluginValue>('hercules');

const fullMarks = (m: ViewMarks | undefined): Required<ViewMarks> => ({ authoritative: m?.authoritative === true, visible: m?.visible === true });

/** Mark these views in the editor (the app's toggle). */
export function setViewMarks(view: EditorView, marks: ViewMarks): void {
  view.dispatch(view.state.tr.setMeta(herculesKey, { marks } satisfies Meta));
}

/** Whether a transaction is the room's (dispatched by the binding, never sent back). */
export const isFromRoom = (tr: Transaction): boolean => (tr.getMeta(herculesKey) as Meta | undefined)?.fromRoom === true;

const pathKey = (p: TextPath): string => JSON.stringify(typeof p === 'string' ? [p] : p);

class Binding {
  /** The Submitted view's rich text the document mirrors; null until the first pull when they differed. */
  #mirror: RichText | null;
  /** The document that mirrors it (a later one holds local changes not yet sent). */
  #level: Node | null;
  #recorded: readonly Transaction[] = [];
  readonly #offs: (() => void)[] = [];
  readonly #schema: Schema;
  #pushing = false;
  #cursorSent: string | undefined;
  #marks: Required<ViewMarks>;

  constructor(
    readonly view: EditorView,
    readonly opts: CollabOptions,
  ) {
    this.#schema = opts.schema ?? defaultSchema;
    const now = this.#submitted();
    const level = flatToDoc(this.#schema, flatOf(now)).eq(view.state.doc);
    this.#mirror = level ? now : null;
    this.#level = level ? view.state.doc : null;
    this.#marks = herculesKey.getState(view.state)!.marks;
    const { room } = opts;
    this.#offs.push(room.subscribe('submitted', () => this.#pull()));
    this.#offs.push(room.subscribe('authoritative', () => this.#redraw()));
    this.#offs.push(room.subscribe('visible', () => this.#redraw()));
    if (opts.cursors !== false) this.#offs.push(room.presence.subscribe(() => this.#redraw()));
    // The document was not the text: replaced by it once the view is set up; else drawn.
    queueMicrotask(() => (level ? this.#redraw() : this.#pull()));
  }

  #submitted(): RichText {
    return richAt(this.opts.room.getState('submitted'), this.opts.path);
  }

  #inView(view: TextView): RichText | null {
    try {
      return richAt(this.opts.room.getState(view), this.opts.path);
    } catch {
      return null;
    }
  }

  /** The transactions of the latest state update (appendTransaction sees them; update does not). */
  record(trs: readonly Transaction[]): void {
    // Called again for transactions appended by other plugins: kept in order.
    this.#recorded = [...this.#recorded, ...trs];
  }

  /** The Submitted view changed: bring the document to it (nothing when it is what we mirror). */
  #pull(): void {
    if (this.#pushing || this.view.isDestroyed) return;
    const now = this.#submitted();
    if (now === this.#mirror && this.view.state.doc === this.#level) return;
    const state = this.view.state;
    const target = flatToDoc(this.#schema, flatOf(now));
    const tr = replaceTo(state, target);
    if (this.#mirror !== null && state.doc === this.#level) this.#keepSelection(state, tr, this.#mirror, now);
    // A step or a selection clears the marks set for the next character (Ctrl+B, then type): a
    // remote change arriving in between must not, or the word is typed plain.
    if (state.storedMarks) tr.setStoredMarks(state.storedMarks);
    this.#mirror = now;
    this.#level = tr.doc;
    tr.setMeta(herculesKey, { fromRoom: true, decos: this.#build(tr.doc) } satisfies Meta).setMeta('addToHistory', false);
    this.view.dispatch(tr);
  }

  /** Our selection put back on the characters it was on (a mapping through a replace may move it). */
  #keepSelection(state: EditorState, tr: Transaction, before: RichText, now: RichText): void {
    const sel = state.selection;
    if (!(sel instanceof TextSelection) || !tr.docChanged) return;
    const was = new Positions(state.doc);
    const is = new Positions(tr.doc);
    const move = (pos: number) => {
      const i = textPlaceIndex(now.text, textPlaceAt(before.text, was.toFlat(pos)));
      return i < 0 ? null : is.toPos(i);
    };
    const anchor = move(sel.anchor);
    const head = move(sel.head);
    if (anchor !== null && head !== null) tr.setSelection(TextSelection.create(tr.doc, anchor, head));
  }

  #redraw(): void {
    if (this.#pushing || this.view.isDestroyed || this.view.state.doc !== this.#level) return;
    this.view.dispatch(this.view.state.tr.setMeta(herculesKey, { decos: this.#build(this.view.state.doc) } satisfies Meta).setMeta('addToHistory', false));
  }

  update(view: EditorView, prev: EditorState): void {
    const trs = this.#recorded;
    this.#recorded = [];
    if (view.state.doc !== this.#level && this.#level !== null) this.#push(this.#level, view.state.doc, trs);
    if (this.opts.cursors !== false && (prev.doc !== view.state.doc || !prev.selection.eq(view.state.selection))) this.#sendCursor();
    const marks = herculesKey.getState(view.state)!.marks;
    if (marks !== this.#marks) {
      this.#marks = marks;
      queueMicrotask(() => this.#redraw());
    }
  }

  /** Local changes from `base` (which mirrors the mirror) to `doc`, sent as ops on the mirror's characters. */
  #push(base: Node, doc: Node, trs: readonly Transaction[]): void {
    const mirror = this.#mirror!;
    const stale = this.#submitted() !== mirror;
    // Only the blocks the change touched are compared (window.ts); a race with the room, whole.
    const w = stale ? fullWindow(base, doc, mirror) : localWindow(base, doc, mirror);
    this.#pushing = true;
    try {
      submitChanges(this.opts.room, this.opts.path, mirror, w, doc, changedRange(base, doc, trs), () => this.#submitted());
    } finally {
      this.#pushing = false;
    }
    this.#mirror = this.#submitted();
    this.#level = doc;
    // Whatever still differs (a race with the room, or a document the state reads otherwise): levelled.
    const now = stale ? null : windowIn(this.#mirror, w);
    const levelled = now !== null && sameFlat(now, w.full ? docToFlat(doc) : w.next);
    queueMicrotask(() => (levelled ? this.#redraw() : this.#pull()));
    if (!levelled) this.#level = null;
  }

  /** Our selection as places (character ids), so it stays on its characters on every replica. */
  #sendCursor(): void {
    const mirror = this.#mirror;
    if (mirror === null || !this.view.hasFocus() || this.view.state.doc !== this.#level) return;
    const pos = new Positions(this.view.state.doc);
    const { anchor, head } = this.view.state.selection;
    const mine = this.opts.cursors || {};
    const key = this.opts.presenceKey ?? 'cursor';
    const cursor = {
      path: pathKey(this.opts.path),
      anchor: textPlaceAt(mirror.text, pos.toFlat(anchor)),
      head: textPlaceAt(mirror.text, pos.toFlat(head)),
      name: mine.name,
      color: mine.color,
    };
    // A remote edit maps our selection but leaves it on the same characters: nothing to resend.
    const json = JSON.stringify(cursor);
    if (json === this.#cursorSent) return;
    this.opts.room.presence.update({ [key]: JSON.parse(json) });
    this.#cursorSent = json;
  }

  #build(doc: Node): DecorationSet {
    const mirror = this.#mirror;
    if (mirror === null) return DecorationSet.empty;
    const marks = this.#marks;
    return buildDecorations({
      doc,
      text: mirror.text,
      unauthoritative: marks.authoritative ? (this.#inView('authoritative')?.text ?? null) : undefined,
      invisible: marks.visible ? (this.#inView('visible')?.text ?? null) : undefined,
      peers: this.opts.cursors === false ? [] : this.opts.room.presence.others(),
      presenceKey: this.opts.presenceKey ?? 'cursor',
      path: pathKey(this.opts.path),
    });
  }

  destroy(): void {
    for (const off of this.#offs.splice(0)) off();
    // Our caret leaves the others' editors with this one.
    if (this.opts.cursors !== false && this.#cursorSent !== undefined) this.opts.room.presence.update({ [this.opts.presenceKey ?? 'cursor']: null });
  }
}

/** A transaction turning `state.doc` into `target`: only the part that differs replaced. */
function replaceTo(state: EditorState, target: Node): Transaction {
  const tr = state.tr;
  const start = state.doc.content.findDiffStart(target.content);
  if (start === null) return tr;
  let { a: endA, b: endB } = state.doc.content.findDiffEnd(target.content)!;
  // Repeated text can make the two ends overlap the start: widen both by the overlap.
  const overlap = start - Math.min(endA, endB);
  if (overlap > 0) {
    endA += overlap;
    endB += overlap;
  }
  try {
    tr.replace(start, endA, target.slice(start, endB));
    if (tr.doc.eq(target)) return tr;
  } catch {
    // A slice that does not fit there: the whole content replaced below.
  }
  return state.tr.replaceWith(0, state.doc.content.size, target.content);
}

/**
 * The plugin that binds an editor to the rich text at `path` (a `createRichText()` value; the
 * machine spreads `textOps()` and `richTextOps()` into its ops). Start the editor with
 * `docOf(room, path)`; another document is replaced by it. Undo is the app's:
 * prosemirror-history undoes local transactions only (the room's are kept out of it), by new ops
 * like any edit.
 */
export function hercules(opts: CollabOptions): Plugin<PluginValue> {
  let binding: Binding | undefined;
  return new Plugin<PluginValue>({
    key: herculesKey,
    state: {
      init: () => ({ marks: fullMarks(opts.marks), decos: DecorationSet.empty }),
      apply(tr, v) {
        const meta = tr.getMeta(herculesKey) as Meta | undefined;
        return { marks: meta?.marks ? fullMarks(meta.marks) : v.marks, decos: meta?.decos ?? v.decos.map(tr.mapping, tr.doc) };
      },
    },
    props: { decorations: (state) => herculesKey.getState(state)?.decos },
    appendTransaction(trs) {
      binding?.record(trs);
      return null;
    },
    view(view) {
      binding = new Binding(view, opts);
      return binding;
    },
  });
}

/** The document of the rich text at `path` in the room's Submitted view: the editor's first `doc`. */
export function docOf(room: Pick<BindableRoom, 'getState'>, path: TextPath, schema: Schema = defaultSchema): Node {
  return flatToDoc(schema, flatOf(richAt(room.getState('submitted'), path)));
}
