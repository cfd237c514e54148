/**
 * The page keystroke-chromium.ts loads into Chromium: the work of bench/src/text/prosemirror-keystroke.bench.ts
 * (a ProseMirror EditorView bound by `hercules()` to a ClientRoom's rich text, no server; a
 * one-character insert dispatched at a random text position, then the microtasks the binding and
 * the room queue) in a real DOM. `setup` builds the editor, `run` types, `teardown` drops it, so
 * the caller can read the renderer's CPU time around `run` alone.
 */
import { EditorState, Selection } from 'prosemirror-state';
import { EditorView } from 'prosemirror-view';
import { ClientRoom, defineMachine, textOps, type Text } from '@hercules/core';
import { docOf, hercules } from '../src/index.ts';
import { createRichText, richTextOps } from '../src/rich.ts';

/** mulberry32: the same positions for both documents of a round. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

let editor: { view: EditorView; room: ClientRoom<any>; parent: HTMLElement; before: number; bound: boolean } | undefined;

/** An editor on a room whose rich text holds `text` (null: empty); `bound` false: ProseMirror alone, on the same document. */
function setup(text: Text | null, bound: boolean): number {
  const rich = text === null ? createRichText() : { ...createRichText(), text };
  const machine = defineMachine({ name: 'pm-keys', version: 1, initial: { doc: rich }, ops: { ...textOps(), ...richTextOps() } });
  const room = new ClientRoom(machine, { clientId: 'k' });
  const parent = document.createElement('div');
  document.body.append(parent);
  const view = new EditorView(parent, {
    state: EditorState.create({ doc: docOf(room, 'doc'), plugins: bound ? [hercules({ room, path: 'doc', cursors: false })] : [] }),
  });
  editor = { view, room, parent, before: bound ? rich.text.len : view.state.doc.content.size, bound };
  return view.state.doc.content.size;
}

/** Type `n` keystrokes; after each, a microtask (or, with `frames`, the next animation frame: the browser lays out and paints it). */
async function run(n: number, seed: number, frames: boolean): Promise<{ wallUs: number; typed: number }> {
  const { view, room, before, bound } = editor!;
  const rand = random(seed);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const doc = view.state.doc;
    const sel = Selection.near(doc.resolve(1 + Math.floor(rand() * (doc.content.size - 1))));
    view.dispatch(view.state.tr.setSelection(sel).insertText('x'));
    if (frames) await new Promise<void>((r) => requestAnimationFrame(() => r()));
    else await Promise.resolve();
  }
  const wallUs = ((performance.now() - t0) * 1000) / n;
  const now = bound ? (room.getState('submitted') as { doc: { text: Text } }).doc.text.len : view.state.doc.content.size;
  return { wallUs, typed: now - before };
}

function teardown(): void {
  if (!editor) return;
  editor.view.destroy();
  editor.parent.remove();
  editor.room.close();
  editor = undefined;
}

(window as unknown as { keystrokes: unknown }).keystrokes = { setup, run, teardown };
