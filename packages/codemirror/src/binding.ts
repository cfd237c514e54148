/**
 * An EditorView bound to `room.text(path)`. The editor's document mirrors one snapshot of the
 * text in the Submitted view (`mirror`). A local transaction becomes inserts and deletes at
 * indexes of that snapshot (the core turns them into anchors); when the Submitted view changes
 * under us (another client's op, a rebase, a refusal), the difference, found by character ids,
 * is dispatched as one CodeMirror transaction, so the selection maps through it. Transactions we
 * dispatch carry `fromRoom` and are never sent back: no echo.
 */
import { Annotation, ChangeSet, type ChangeSpec, type Extension, StateEffect, Transaction } from '@codemirror/state';
import { type DecorationSet, type EditorView, type PluginValue, ViewPlugin, type ViewUpdate } from '@codemirror/view';
import { textAt, textPlaceAt, textToString, type Text, type TextHandle, type TextPath, type TextView } from '@hercules/core';
import { buildDecorations, cursorTheme, type PeerLike } from './decorations.ts';
import { changesBetween, stringDiff, type TextChange } from './diff.ts';
import { viewMarks, viewMarksFacet, type ViewMarks } from './marks.ts';

/** What the binding needs of a room: the room `connect()` returns, or a ClientRoom. */
export interface BindableRoom {
  readonly clientId: string;
  getState(view?: TextView): unknown;
  subscribe(view: TextView, listener: (state: any) => void): () => void;
  text(path: TextPath): TextHandle<unknown>;
  readonly presence: {
    get(): unknown;
    update(partial: any): void;
    others(): readonly PeerLike[];
    subscribe(listener: (others: readonly PeerLike[]) => void): () => void;
  };
}

export interface CollabOptions {
  room: BindableRoom;
  /** The text's key path in the state (as for `room.text(path)`). */
  path: TextPath;
  /**
   * Share our cursor and selection through presence as `{ [presenceKey]: { path, anchor, head,
   * name, color } }` (merged into our presence value), and draw the others'. Default: shared,
   * named by the client id. `false`: neither sent nor drawn.
   */
  cursors?: false | { name?: string; color?: string };
  /** The presence key of the cursor (default 'cursor'); a presence schema must allow it. */
  presenceKey?: string;
  /** Which views to mark at first (default: none); toggle later with `viewMarks` in a Compartment. */
  marks?: ViewMarks;
}

/** On the transactions the binding dispatches: the room's changes, never sent back. */
export const fromRoom = Annotation.define<boolean>();
/** Redraw the decorations (presence or a view other than Submitted changed). */
const redraw = StateEffect.define<null>();

const pathKey = (p: TextPath): string => JSON.stringify(typeof p === 'string' ? [p] : p);

const asSpec = (cs: readonly TextChange[]): ChangeSpec[] => cs.map((c) => ({ from: c.from, to: c.to, insert: c.insert }));

class Binding implements PluginValue {
  decorations: DecorationSet;
  /** The Submitted view's text the document mirrors; null until the first pull when they differed. */
  #mirror: Text | null;
  readonly #handle: TextHandle<unknown>;
  readonly #offs: (() => void)[] = [];
  #pushing = false;
  #updating = false;
  /** The cursor we last put in presence (JSON), if any. */
  #cursorSent: string | undefined;

  constructor(
    readonly view: EditorView,
    readonly opts: CollabOptions,
  ) {
    this.#handle = opts.room.text(opts.path);
    const t = this.#submitted();
    this.#mirror = view.state.doc.toString() === textToString(t) ? t : null;
    const { room } = opts;
    this.#offs.push(room.subscribe('submitted', () => this.#pull()));
    this.#offs.push(room.subscribe('authoritative', () => this.#redraw()));
    this.#offs.push(room.subscribe('visible', () => this.#redraw()));
    if (opts.cursors !== false) this.#offs.push(room.presence.subscribe(() => this.#redraw()));
    this.decorations = this.#build();
    // The document was not the text: replaced by it once the view is set up.
    if (this.#mirror === null) queueMicrotask(() => this.#pull());
  }

  #submitted(): Text {
    return textAt(this.opts.room.getState('submitted'), this.opts.path);
  }

  /** A view's text, or null when the text is not in that view yet. */
  #inView(view: TextView): Text | null {
    try {
      return textAt(this.opts.room.getState(view), this.opts.path);
    } catch {
      return null;
    }
  }

  /** The Submitted view changed: bring the document to it (nothing when it is what we mirror). */
  #pull(): void {
    if (this.#pushing) return;
    // Not while CodeMirror is updating (it forbids a dispatch then): right after.
    if (this.#updating) return queueMicrotask(() => this.#pull());
    const now = this.#submitted();
    if (now === this.#mirror) return;
    const changes = this.#mirror === null ? stringDiff(this.view.state.doc.toString(), textToString(now)) : changesBetween(this.#mirror, now);
    this.#mirror = now;
    this.view.dispatch({ changes: asSpec(changes), annotations: [fromRoom.of(true), Transaction.addToHistory.of(false)], effects: redraw.of(null) });
  }

  #redraw(): void {
    if (this.#pushing) return;
    if (this.#updating) return queueMicrotask(() => this.#redraw());
    this.view.dispatch({ effects: redraw.of(null) });
  }

  update(u: ViewUpdate): void {
    this.#updating = true;
    try {
      for (const tr of u.transactions) if (tr.docChanged && !tr.annotation(fromRoom)) this.#push(tr);
      if ((u.docChanged || u.selectionSet) && this.opts.cursors !== false) this.#sendCursor(u);
    } finally {
      this.#updating = false;
    }
    const marksChanged = u.startState.facet(viewMarksFacet) !== u.state.facet(viewMarksFacet);
    if (u.docChanged || marksChanged || u.transactions.some((tr) => tr.effects.some((e) => e.is(redraw)))) this.decorations = this.#build();
  }

  /** A local transaction: its changes as inserts and deletes in the Submitted view. */
  #push(tr: Transaction): void {
    let changes = tr.changes;
    const now = this.#submitted();
    // The Submitted view moved since we mirrored it (its notification has not reached us yet),
    // or the document was never level with it: the local changes are mapped through the room's,
    // and the document is brought level after.
    const stale = now !== this.#mirror;
    if (stale) {
      const before = tr.startState.doc;
      const theirs = this.#mirror === null ? stringDiff(before.toString(), textToString(now)) : changesBetween(this.#mirror, now);
      changes = changes.map(ChangeSet.of(asSpec(theirs), before.length));
    }
    this.#pushing = true;
    try {
      let shift = 0;
      changes.iterChanges((fromA, toA, _fromB, _toB, inserted) => {
        const at = fromA + shift;
        if (toA > fromA) this.#handle.delete(at, toA - fromA);
        if (inserted.length > 0) this.#handle.insert(at, inserted.toString());
        shift += inserted.length - (toA - fromA);
      });
    } finally {
      this.#pushing = false;
    }
    this.#mirror = this.#submitted();
    if (stale) queueMicrotask(() => this.#level());
  }

  /** After a race: whatever still differs between the document and the mirrored text, replaced. */
  #level(): void {
    const want = textToString(this.#mirror!);
    const changes = stringDiff(this.view.state.doc.toString(), want);
    if (changes.length > 0) this.view.dispatch({ changes: asSpec(changes), annotations: [fromRoom.of(true), Transaction.addToHistory.of(false)] });
  }

  /** Our selection as places (character ids), so it stays on its characters on every replica. */
  #sendCursor(u: ViewUpdate): void {
    const t = this.#mirror;
    if (t === null || !u.view.hasFocus) return;
    const { anchor, head } = u.state.selection.main;
    const mine = this.opts.cursors || {};
    const key = this.opts.presenceKey ?? 'cursor';
    const cursor = { path: pathKey(this.opts.path), anchor: textPlaceAt(t, anchor), head: textPlaceAt(t, head), name: mine.name, color: mine.color };
    // A remote edit maps our selection but leaves it on the same characters: nothing to resend
    // (else every keystroke in the room would make every other member send its presence).
    const json = JSON.stringify(cursor);
    if (json === this.#cursorSent) return;
    this.opts.room.presence.update({ [key]: JSON.parse(json) });
    this.#cursorSent = json;
  }

  #build(): DecorationSet {
    const marks = this.view.state.facet(viewMarksFacet);
    return buildDecorations({
      doc: this.#mirror,
      unauthoritative: marks.authoritative ? this.#inView('authoritative') : undefined,
      invisible: marks.visible ? this.#inView('visible') : undefined,
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

/**
 * The extension that binds an editor to `room.text(path)`. Start the editor with the text's
 * Submitted view as its document (`doc: room.text(path).toString()`); another document is
 * replaced by it. Undo is the app's: CodeMirror's history undoes local transactions only (the
 * room's are marked `fromRoom` and kept out of it by `addToHistory`), by new ops like any edit.
 */
export function hercules(opts: CollabOptions): Extension {
  const plugin = ViewPlugin.define((view) => new Binding(view, opts), { decorations: (b) => b.decorations });
  return [plugin, cursorTheme, opts.marks ? viewMarks(opts.marks) : []];
}
