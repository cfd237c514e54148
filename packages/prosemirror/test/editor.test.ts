/**
 * @hercules/prosemirror with real editors (ProseMirror in happy-dom) on rooms connected to a real
 * server: typing and formatting at once converge with blocks and marks intact, nothing echoes,
 * the selection stays on its characters, the others' carets are drawn with their names, and the
 * text not yet Authoritative is marked, toggled by the app; an edit made before the room's
 * notification arrives, and an insert the server refuses, leave both sides level.
 */
import './dom.ts';
import { test } from 'node:test';
import assert from 'node:assert/strict';

const { EditorState, TextSelection } = await import('prosemirror-state');
const { EditorView } = await import('prosemirror-view');
const { toggleMark, setBlockType } = await import('prosemirror-commands');
const { wrapInList } = await import('prosemirror-schema-list');
const { defineMachine, textOps } = await import('@hercules/core');
const { connect } = await import('@hercules/client');
const { createServer } = await import('@hercules/server');
const { tempDir, until } = await import('@hercules/test-utils');
const { hercules, docOf, schema, setViewMarks, docToFlat } = await import('../src/index.ts');
const { createRichText, richTextOps } = await import('../src/rich.ts');

const notes = defineMachine({ name: 'pm-notes', version: 1, initial: { doc: createRichText() }, ops: { ...textOps(), ...richTextOps() } });

async function setup(t: { after: (fn: () => unknown) => void }, extra: Partial<Parameters<typeof createServer>[0]> = {}) {
  const { dir, cleanup } = tempDir('prosemirror');
  const srv = await createServer({ port: 0, dataDir: dir, machines: [notes], log: 'silent', ...extra });
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  const room = async () => {
    const r = await connect({ url: srv.url, room: 'doc', machine: notes, onError: () => {} });
    t.after(() => r.close());
    await r.whenOnline({ timeoutMs: 5000 });
    return r;
  };
  return { room };
}

type Room = Awaited<ReturnType<Awaited<ReturnType<typeof setup>>['room']>>;
type View = InstanceType<typeof EditorView>;

/** An editor on `room`'s rich text; `submits` counts the ops it sent. */
function editor(room: Room, name: string, marks?: { authoritative?: boolean; visible?: boolean }) {
  let submits = 0;
  const submit = room.submit.bind(room);
  room.submit = (op: string, args?: unknown) => {
    submits++;
    return submit(op as never, args as never);
  };
  const parent = document.createElement('div');
  document.body.append(parent);
  const state = EditorState.create({ doc: docOf(room, 'doc'), plugins: [hercules({ room, path: 'doc', cursors: { name, color: '#e67e22' }, marks })] });
  const view = new EditorView(parent, { state });
  return { view, submits: () => submits };
}

/** Type `s` at `pos` (as the keyboard does: the stored marks carry on). */
function type(view: View, pos: number, s: string) {
  const tr = view.state.tr.setSelection(TextSelection.create(view.state.doc, pos)).insertText(s);
  view.dispatch(tr);
}

const text = (v: View) => v.state.doc.textBetween(0, v.state.doc.content.size, '|');
const agree = (a: View, b: View) => a.state.doc.eq(b.state.doc);

test('two editors typing at once converge; a local change is sent once, the remote ones are not sent back', async (t) => {
  const { room } = await setup(t);
  const [ra, rb] = [await room(), await room()];
  const a = editor(ra, 'Ada');
  const b = editor(rb, 'Bob');
  type(a.view, 1, 'hello world');
  await until(() => text(b.view) === 'hello world', 5000, "Ada's text in Bob's editor");
  const [sa, sb] = [a.submits(), b.submits()];
  assert.equal(sa, 1, 'one insert');
  assert.equal(sb, 0, 'Bob sent nothing back');
  // Both type at several places before either hears of the other.
  for (let i = 0; i < 10; i++) {
    type(a.view, 1, 'a');
    type(b.view, b.view.state.doc.content.size - 1, 'b');
  }
  await until(() => agree(a.view, b.view) && text(a.view).length === 31, 10_000, 'the editors to agree');
  assert.equal(text(a.view), `${'a'.repeat(10)}hello world${'b'.repeat(10)}`);
  assert.equal(a.submits() - sa, 10);
  assert.equal(b.submits() - sb, 10);
  a.view.destroy();
  b.view.destroy();
});

// spec: RICH-BLOCK, RICH-MARK
test('blocks and marks made at once by two people converge and survive concurrent typing', async (t) => {
  const { room } = await setup(t);
  const [ra, rb] = [await room(), await room()];
  const a = editor(ra, 'Ada');
  const b = editor(rb, 'Bob');
  type(a.view, 1, 'Title');
  a.view.dispatch(a.view.state.tr.split(6));
  type(a.view, 8, 'first point');
  a.view.dispatch(a.view.state.tr.split(19));
  type(a.view, 21, 'second point');
  await until(() => agree(a.view, b.view), 5000, 'the three paragraphs to reach Bob');
  assert.equal(text(b.view), 'Title|first point|second point');
  // At once: Ada makes the title a heading and bolds "first"; Bob types inside "first" and makes
  // the last two paragraphs a bullet list.
  const selA = (from: number, to: number) => a.view.dispatch(a.view.state.tr.setSelection(TextSelection.create(a.view.state.doc, from, to)));
  selA(2, 2);
  setBlockType(schema.nodes.heading, { level: 1 })(a.view.state, a.view.dispatch);
  selA(8, 13);
  toggleMark(schema.marks.strong)(a.view.state, a.view.dispatch);
  type(b.view, 10, 'XY');
  b.view.dispatch(b.view.state.tr.setSelection(TextSelection.create(b.view.state.doc, 9, 25)));
  wrapInList(schema.nodes.bullet_list)(b.view.state, b.view.dispatch);
  await until(() => agree(a.view, b.view), 10_000, 'the editors to agree');
  const doc = a.view.state.doc;
  assert.equal(doc.child(0).type.name, 'heading', "Ada's heading");
  assert.equal(doc.child(1).type.name, 'bullet_list', "Bob's list");
  assert.equal(doc.child(1).childCount, 2, 'two items');
  assert.equal(text(a.view), 'Title|fiXYrst point|second point');
  // "first" is bold, and Bob's "XY", typed inside it, with it.
  const flat = docToFlat(doc);
  const bold = [...flat.text].filter((_, i) => flat.marks.get('strong')?.[i] === true).join('');
  assert.equal(bold, 'fiXYrst');
  assert.deepEqual(ra.getState().doc, rb.getState().doc, 'one state');
  a.view.destroy();
  b.view.destroy();
});

test('a remote insert before the caret moves it along; text typed right at it leaves it after the same character', async (t) => {
  const { room } = await setup(t);
  const [ra, rb] = [await room(), await room()];
  const a = editor(ra, 'Ada');
  const b = editor(rb, 'Bob');
  type(a.view, 1, 'aaa');
  await until(() => text(b.view) === 'aaa', 5000, 'the text');
  // Bob's caret after the first "a".
  b.view.dispatch(b.view.state.tr.setSelection(TextSelection.create(b.view.state.doc, 2)));
  type(a.view, 1, 'a');
  await until(() => text(b.view) === 'aaaa', 5000, 'the insert');
  assert.equal(b.view.state.selection.head, 3, 'an "a" typed before "aaa" is before the caret, not after it');
  type(a.view, 3, 'Z');
  await until(() => text(b.view) === 'aaZaa', 5000, 'the insert at the caret');
  assert.equal(b.view.state.selection.head, 3, 'text typed at the caret goes after it');
  a.view.destroy();
  b.view.destroy();
});

test("the others' carets are drawn with their names, on their character", async (t) => {
  const { room } = await setup(t);
  const [ra, rb] = [await room(), await room()];
  const a = editor(ra, 'Ada');
  const b = editor(rb, 'Bob');
  a.view.focus();
  type(a.view, 1, 'hello world');
  a.view.dispatch(a.view.state.tr.setSelection(TextSelection.create(a.view.state.doc, 6)));
  await until(() => b.view.dom.querySelector('.pm-hercules-caret-name')?.textContent === 'Ada', 5000, "Ada's caret in Bob's editor");
  const caretAt = () => b.view.posAtDOM(b.view.dom.querySelector('.pm-hercules-caret')!, 0);
  assert.equal(caretAt(), 6);
  type(b.view, 1, 'Oh, ');
  await until(() => text(a.view) === 'Oh, hello world', 5000, "Bob's words in Ada's editor");
  await until(() => caretAt() === 10, 5000, 'the caret moved with its character');
  a.view.destroy();
  await until(() => b.view.dom.querySelector('.pm-hercules-caret') === null, 5000, "Ada's caret to go");
  b.view.destroy();
});

test('a caret right before a bold word is drawn outside its <strong>: the name label takes no mark of the text', async (t) => {
  const { room } = await setup(t);
  const [ra, rb] = [await room(), await room()];
  const a = editor(ra, 'Ada');
  const b = editor(rb, 'Bob');
  a.view.focus();
  type(a.view, 1, 'say BOLD');
  a.view.dispatch(a.view.state.tr.setSelection(TextSelection.create(a.view.state.doc, 5, 9)));
  toggleMark(schema.marks.strong)(a.view.state, a.view.dispatch);
  a.view.dispatch(a.view.state.tr.setSelection(TextSelection.create(a.view.state.doc, 5)));
  await until(() => b.view.dom.querySelector('.pm-hercules-caret-name')?.textContent === 'Ada', 5000, "Ada's caret in Bob's editor");
  await until(() => b.view.dom.querySelector('strong')?.textContent?.startsWith('BOLD'), 5000, "the bold word in Bob's editor");
  assert.equal(b.view.dom.querySelector('.pm-hercules-caret')!.closest('strong'), null, 'the caret is not inside the bold text');
  assert.equal(b.view.dom.querySelector('strong')!.textContent, 'BOLD');
  a.view.destroy();
  b.view.destroy();
});

test('marks set for the next character (Ctrl+B with no selection) survive a remote change arriving before the typing', async (t) => {
  const { room } = await setup(t);
  const [ra, rb] = [await room(), await room()];
  const a = editor(ra, 'Ada');
  const b = editor(rb, 'Bob');
  type(a.view, 1, 'say ');
  await until(() => text(b.view) === 'say ', 5000, 'the text');
  a.view.dispatch(a.view.state.tr.setSelection(TextSelection.create(a.view.state.doc, 5)));
  toggleMark(schema.marks.strong)(a.view.state, a.view.dispatch);
  assert.ok(
    a.view.state.storedMarks?.some((m) => m.type === schema.marks.strong),
    'bold is set for the next character',
  );
  // Bob types at the start; Ada's editor takes his change before she types.
  type(b.view, 1, 'Oh, ');
  await until(() => text(a.view) === 'Oh, say ', 5000, "Bob's text in Ada's editor");
  a.view.dispatch(a.view.state.tr.insertText('BOLD'));
  await until(() => b.view.dom.querySelector('strong')?.textContent === 'BOLD', 5000, "Ada's bold word in Bob's editor");
  assert.equal(a.view.dom.querySelector('strong')?.textContent, 'BOLD');
  a.view.destroy();
  b.view.destroy();
});

test('the text not yet Authoritative is underlined until the server orders it; the app toggles the marks', async (t) => {
  const { room } = await setup(t);
  const ra = await room();
  const a = editor(ra, 'Ada', { authoritative: true, visible: true });
  type(a.view, 1, 'again');
  const marked = (cls: string) => Array.from(a.view.dom.querySelectorAll(`.${cls}`), (e) => e.textContent).join('');
  // Drawn right after the edit (a microtask later), before the server could have answered.
  await Promise.resolve();
  assert.equal(marked('pm-hercules-unauthoritative'), 'again');
  assert.equal(marked('pm-hercules-invisible'), 'again');
  await until(() => marked('pm-hercules-unauthoritative') === '' && marked('pm-hercules-invisible') === '', 5000, 'the marks to clear');
  setViewMarks(a.view, {});
  type(a.view, 1, '> ');
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(marked('pm-hercules-unauthoritative'), '', 'toggled off: nothing marked');
  a.view.destroy();
});

test("a local edit made before the room's notification reaches the binding lands on the characters it was made on", async (t) => {
  const { room } = await setup(t);
  const [ra, rb] = [await room(), await room()];
  // Bob's binding hears of the Submitted view 300 ms late: a window in which he types.
  const subscribe = rb.subscribe.bind(rb);
  rb.subscribe = (view, fn, opts) => subscribe(view, view === 'submitted' ? (s, v) => setTimeout(() => fn(s, v), 300) : fn, opts);
  const a = editor(ra, 'Ada');
  const b = editor(rb, 'Bob');
  type(a.view, 1, 'hello world');
  await until(() => text(b.view) === 'hello world', 5000, "Ada's text in Bob's editor");
  type(a.view, 1, 'X');
  await until(() => rb.getState().doc.text.len === 13, 5000, "Ada's insert in Bob's room");
  assert.equal(text(b.view), 'hello world', 'not yet in his editor');
  // At the end of what he sees, in bold: index 12 of the room's text would be before the "d".
  b.view.dispatch(b.view.state.tr.setSelection(TextSelection.create(b.view.state.doc, 12)));
  toggleMark(schema.marks.strong)(b.view.state, b.view.dispatch);
  b.view.dispatch(b.view.state.tr.insertText('!'));
  assert.equal(docToFlat(b.view.state.doc).marks.get('strong')?.[12], true, 'bold in his editor');
  await until(() => agree(a.view, b.view) && text(a.view) === 'Xhello world!', 5000, 'both editors level');
  const flat = docToFlat(a.view.state.doc);
  assert.equal(flat.marks.get('strong')?.[flat.text.length - 1], true, 'his "!" is bold');
  a.view.destroy();
  b.view.destroy();
});

test('an insert the server refuses leaves the editor, and the formatting and text around it stay', async (t) => {
  // The authorize hook refuses any insert holding a "#".
  const { room } = await setup(t, { authorize: (op) => !(op.name === 'textInsert' && String((op.args as { t?: unknown }).t).includes('#')) });
  const ra = await room();
  const a = editor(ra, 'Ada');
  type(a.view, 1, 'hello world');
  a.view.dispatch(a.view.state.tr.setSelection(TextSelection.create(a.view.state.doc, 1, 6)));
  toggleMark(schema.marks.em)(a.view.state, a.view.dispatch);
  type(a.view, 6, '#');
  assert.equal(text(a.view), 'hello# world');
  await until(() => text(a.view) === 'hello world', 5000, 'the refused "#" to leave the editor');
  const flat = docToFlat(a.view.state.doc);
  assert.deepEqual(flat.marks.get('em')?.slice(1, 7), [true, true, true, true, true, null], '"hello" still italic');
  type(a.view, 12, '!');
  await until(() => ra.text(['doc', 'text']).toString('authoritative') === '\nhello world!', 5000, 'a later insert ordered');
  a.view.destroy();
});
