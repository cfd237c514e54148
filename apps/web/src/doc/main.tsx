/**
 * Document (issue 38): one rich text that everyone edits at once, in ProseMirror bound by
 * @hercules/prosemirror. Everyone's caret and selection with their name (presence, anchored to
 * characters); the text not yet Authoritative underlined and the text not yet Visible faded,
 * each toggled here; Ctrl+Z / Ctrl+Shift+Z undo and redo your own edits (prosemirror-history:
 * an undo is a new edit, sent like any other, and leaves the others' text alone).
 */
import { useEffect, useRef, useState, type CSSProperties, type ReactNode } from 'react';
import { baseKeymap, setBlockType, toggleMark } from 'prosemirror-commands';
import { history, redo, redoDepth, undo, undoDepth } from 'prosemirror-history';
import { keymap } from 'prosemirror-keymap';
import { liftListItem, sinkListItem, splitListItem, wrapInList } from 'prosemirror-schema-list';
import { EditorState, type Command } from 'prosemirror-state';
import { EditorView } from 'prosemirror-view';
import type { ConnectedRoom } from '@hercules/client';
import { docOf, hercules, schema, setViewMarks } from '@hercules/prosemirror';
import { notesDoc } from '../../../machines.ts';
import { Shell, hint } from '../shared/Shell.tsx';
import { startApp } from '../shared/start.tsx';

const { nodes, marks } = schema;
const button: CSSProperties = { fontSize: 12, padding: '1px 8px' };

const link: Command = (state, dispatch) => {
  if (state.selection.empty) return false;
  if (state.doc.rangeHasMark(state.selection.from, state.selection.to, marks.link)) return toggleMark(marks.link)(state, dispatch);
  if (!dispatch) return true;
  const href = prompt('Link to', 'https://');
  return href ? toggleMark(marks.link, { href })(state, dispatch) : false;
};

const TOOLS: [label: string, testid: string, cmd: Command][] = [
  ['B', 'bold', toggleMark(marks.strong)],
  ['I', 'italic', toggleMark(marks.em)],
  ['Link', 'link', link],
  ['H1', 'h1', setBlockType(nodes.heading, { level: 1 })],
  ['H2', 'h2', setBlockType(nodes.heading, { level: 2 })],
  ['¶', 'paragraph', setBlockType(nodes.paragraph)],
  ['• List', 'bullets', wrapInList(nodes.bullet_list)],
  ['1. List', 'numbers', wrapInList(nodes.ordered_list)],
  ['Undo', 'doc-undo', undo],
  ['Redo', 'doc-redo', redo],
];

function editorState(room: ConnectedRoom<typeof notesDoc>): EditorState {
  return EditorState.create({
    doc: docOf(room, 'doc'),
    plugins: [
      // The caret's name and colour are the presence's own (the name field above), so no name here.
      hercules({ room, path: 'doc', cursors: {}, presenceKey: 'caret', marks: { authoritative: true, visible: true } }),
      history(),
      keymap({
        'Mod-z': undo,
        'Mod-Shift-z': redo,
        'Mod-y': redo,
        'Mod-b': toggleMark(marks.strong),
        'Mod-i': toggleMark(marks.em),
        Enter: splitListItem(nodes.list_item),
        Tab: sinkListItem(nodes.list_item),
        'Shift-Tab': liftListItem(nodes.list_item),
      }),
      keymap(baseKeymap),
    ],
  });
}

function Doc({ room }: { room: ConnectedRoom<typeof notesDoc> }) {
  const host = useRef<HTMLDivElement>(null);
  const [view, setView] = useState<EditorView | null>(null);
  const [, redraw] = useState(0);
  const [show, setShow] = useState({ authoritative: true, visible: true });
  useEffect(() => {
    const v: EditorView = new EditorView(host.current!, {
      state: editorState(room),
      dispatchTransaction(tr) {
        v.updateState(v.state.apply(tr));
        redraw((n) => n + 1);
      },
    });
    setView(v);
    (window as unknown as { editor: EditorView }).editor = v; // for tests and the console
    return () => v.destroy();
  }, [room]);
  useEffect(() => {
    if (view) setViewMarks(view, show);
  }, [view, show]);
  const run = (cmd: Command) => {
    if (!view) return;
    cmd(view.state, view.dispatch, view);
    view.focus();
  };
  const toolbar: ReactNode = view && (
    <span style={{ display: 'inline-flex', flexWrap: 'wrap', gap: 4 }}>
      {TOOLS.map(([label, id, cmd]) => (
        <button
          key={id}
          type="button"
          data-testid={id}
          style={button}
          disabled={!cmd(view.state) || (id === 'doc-undo' && undoDepth(view.state) === 0) || (id === 'doc-redo' && redoDepth(view.state) === 0)}
          onMouseDown={(e) => e.preventDefault()}
          onClick={() => run(cmd)}
        >
          {label}
        </button>
      ))}
    </span>
  );
  const toggle = (key: 'authoritative' | 'visible', text: string) => (
    <label style={{ fontSize: 12 }}>
      <input type="checkbox" data-testid={`mark-${key}`} checked={show[key]} onChange={(e) => setShow((s) => ({ ...s, [key]: e.target.checked }))} /> {text}
    </label>
  );
  return (
    <Shell title="Document" room={room} undo={toolbar}>
      <div style={{ display: 'flex', gap: 12, marginBottom: 6 }}>
        {toggle('authoritative', 'underline text the server has not ordered yet')}
        {toggle('visible', 'fade text not everyone has yet')}
      </div>
      <div
        ref={host}
        data-testid="editor"
        style={{ background: 'white', border: '1px solid #e5e7eb', borderRadius: 8, padding: '4px 16px', minHeight: 240, lineHeight: 1.5 }}
      />
      <style>{'.ProseMirror{outline:none;white-space:pre-wrap;min-height:220px}.ProseMirror p{margin:6px 0}'}</style>
      <p style={hint}>
        Open this page in two windows and type in both. Your caret and selection show on the others' screens with your name. Text the server has not ordered yet
        is underlined; text not everyone has yet is faded. Ctrl+Z undoes your own edits only.
      </p>
    </Shell>
  );
}

void startApp(notesDoc, 'Document', Doc);
