/**
 * @hercules/codemirror with real editors (CodeMirror in happy-dom) on rooms connected to a real
 * server: typing converges, nothing echoes, the selection stays on its characters, the others'
 * carets are drawn with their names, and the text not yet Authoritative is marked.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Window } from 'happy-dom';

// A DOM for CodeMirror's view, before it loads.
const win = new Window();
const g = globalThis as Record<string, unknown>;
for (const name of ['window', 'document', 'navigator', 'MutationObserver', 'requestAnimationFrame', 'cancelAnimationFrame', 'getComputedStyle'] as const)
  if (g[name] === undefined || name === 'window' || name === 'document' || name === 'navigator')
    Object.defineProperty(globalThis, name, {
      value: name === 'window' ? win : (win as unknown as Record<string, unknown>)[name],
      configurable: true,
      writable: true,
    });
for (const name of ['Node', 'Element', 'HTMLElement', 'Text', 'Range', 'Selection', 'DocumentFragment', 'Event', 'KeyboardEvent', 'MouseEvent'] as const)
  g[name] ??= (win as unknown as Record<string, unknown>)[name];

const { Compartment, EditorState } = await import('@codemirror/state');
const { EditorView } = await import('@codemirror/view');
const { createText, defineMachine, textOps } = await import('@hercules/core');
const { connect } = await import('@hercules/client');
const { createServer } = await import('@hercules/server');
const { tempDir, until } = await import('@hercules/test-utils');
const { hercules, viewMarks } = await import('../src/index.ts');

const notes = defineMachine({ name: 'cm-notes', version: 1, initial: { doc: createText('hello world') }, ops: { ...textOps() } });

async function setup(t: { after: (fn: () => unknown) => void }, extra: Partial<Parameters<typeof createServer>[0]> = {}) {
  const { dir, cleanup } = tempDir('codemirror');
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

/** An editor on `room`'s text; `submits` counts the ops it sent. */
function editor(room: Room, name: string, extra: unknown[] = []) {
  let submits = 0;
  const text = room.text.bind(room);
  room.text = (path) => {
    const h = text(path);
    return {
      ...h,
      insert: (i, s) => {
        submits++;
        return h.insert(i, s);
      },
      delete: (i, n) => {
        submits++;
        return h.delete(i, n);
      },
    };
  };
  const parent = document.createElement('div');
  document.body.append(parent);
  const state = EditorState.create({
    doc: room.text('doc').toString(),
    extensions: [hercules({ room, path: 'doc', cursors: { name, color: '#e67e22' } }), ...(extra as [])],
  });
  const view = new EditorView({ state, parent });
  return { view, submits: () => submits };
}

/** A user's edit: a transaction as typing makes it. */
function type(view: InstanceType<typeof EditorView>, from: number, to: number, insert: string) {
  view.dispatch({ changes: { from, to, insert }, selection: { anchor: from + insert.length }, userEvent: 'input.type' });
}

test('two editors typing at once through a server converge; each local change is one op, remote ones are not sent back', async (t) => {
  const { room } = await setup(t);
  const [ra, rb] = [await room(), await room()];
  const a = editor(ra, 'Ada');
  const b = editor(rb, 'Bob');
  // Both type at several places before either hears of the other: Ada at the start and over
  // the first letters of "hello", Bob at the end and over the last letters of "world".
  let ws = 0;
  const logBefore = ra.positions().authoritative;
  for (let i = 0; i < 20; i++) {
    type(a.view, 0, 0, 'a');
    type(b.view, b.view.state.doc.length, b.view.state.doc.length, 'b');
    if (i % 5 === 0) type(a.view, i + 1 + ws, i + 2 + ws++, 'W');
    const end = b.view.state.doc.length - (i + 1);
    if (i % 7 === 0) type(b.view, end - 1, end, '');
    if (i % 3 === 0) await new Promise((r) => setTimeout(r, 1));
  }
  await ra.flushed();
  await rb.flushed();
  await until(
    () => ra.text('doc').toString('visible') === rb.text('doc').toString('visible') && a.view.state.doc.toString() === b.view.state.doc.toString(),
    10_000,
    'the editors to agree',
  );
  const text = a.view.state.doc.toString();
  assert.equal(text, `${'a'.repeat(20)}WWWWo wo${'b'.repeat(20)}`);
  assert.equal(text, ra.text('doc').toString('authoritative'));
  assert.equal(text, rb.text('doc').toString());
  // One op per local change (a replacement is a delete and an insert), none for the other's.
  assert.equal(a.submits(), 20 + 4 * 2);
  assert.equal(b.submits(), 20 + 3);
  assert.equal(ra.positions().authoritative - logBefore, 28 + 23, 'the log holds those ops and no others');
  a.view.destroy();
  b.view.destroy();
});

test('a remote insert before the caret moves it along; one right at it leaves it after the same character', async (t) => {
  const { room } = await setup(t);
  const [ra, rb] = [await room(), await room()];
  const a = editor(ra, 'Ada');
  const b = editor(rb, 'Bob');
  // Bob's caret after "hello".
  b.view.dispatch({ selection: { anchor: 5 } });
  type(a.view, 0, 0, '>> ');
  await until(() => b.view.state.doc.toString() === '>> hello world', 5000, 'the insert to reach Bob');
  assert.equal(b.view.state.selection.main.head, 8, 'still after "hello"');
  type(a.view, 3, 3, 'a');
  type(a.view, 4, 4, 'a');
  await until(() => b.view.state.doc.toString() === '>> aahello world', 5000, 'the second insert');
  assert.equal(b.view.state.selection.main.head, 10);
  // A selection over "world" stays over it when text is typed inside "hello".
  b.view.dispatch({ selection: { anchor: 11, head: 16 } });
  type(a.view, 7, 7, 'XYZ');
  await until(() => b.view.state.doc.toString() === '>> aaheXYZllo world', 5000, 'the third insert');
  const sel = b.view.state.selection.main;
  assert.equal(b.view.state.sliceDoc(sel.from, sel.to), 'world');
  a.view.destroy();
  b.view.destroy();
});

test("the others' carets are drawn with their names and stay on their character when text is typed before them", async (t) => {
  const { room } = await setup(t);
  const [ra, rb] = [await room(), await room()];
  const a = editor(ra, 'Ada');
  const b = editor(rb, 'Bob');
  // Only a focused editor shares its caret: Ada's editor has the focus.
  a.view.focus();
  type(a.view, 5, 5, '!');
  await until(() => b.view.contentDOM.querySelector('.cm-hercules-caret-name')?.textContent === 'Ada', 5000, "Ada's caret in Bob's editor");
  const caretAt = () => b.view.posAtDOM(b.view.contentDOM.querySelector('.cm-hercules-caret')!);
  assert.equal(b.view.state.sliceDoc(0, caretAt()), 'hello!');
  // Bob types before Ada's caret: Ada's presence is not resent, her caret stays after "!".
  let adaSent = 0;
  const presence = ra.presence;
  const update = presence.update.bind(presence);
  presence.update = (partial) => {
    adaSent++;
    update(partial);
  };
  b.view.dispatch({ changes: { from: 0, insert: 'Oh, ' }, userEvent: 'input.type' });
  await until(() => a.view.state.doc.toString() === 'Oh, hello! world', 5000, "Bob's words in Ada's editor");
  await until(() => b.view.contentDOM.querySelector('.cm-hercules-caret') !== null, 5000, 'the caret redrawn');
  assert.equal(b.view.state.sliceDoc(0, caretAt()), 'Oh, hello!');
  assert.equal(adaSent, 0, "a remote edit moved Ada's caret on her screen, not off its character: nothing resent");
  assert.equal(b.view.contentDOM.querySelectorAll('.cm-hercules-caret').length, 1, "only Ada's caret (one's own is not drawn)");
  // Her selection over "hello" is drawn over it.
  a.view.dispatch({ selection: { anchor: 4, head: 9 } });
  const selected = () => Array.from(b.view.contentDOM.querySelectorAll('.cm-hercules-selection'), (e) => e.textContent).join('');
  await until(() => selected() === 'hello', 5000, "Ada's selection in Bob's editor");
  // Ada's editor goes: her caret leaves Bob's.
  a.view.destroy();
  await until(() => b.view.contentDOM.querySelector('.cm-hercules-caret') === null, 5000, "Ada's caret to go");
  b.view.destroy();
});

test('the text not yet Authoritative is underlined until the server orders it; the app toggles the marks', async (t) => {
  const { room } = await setup(t);
  const ra = await room();
  const marks = new Compartment();
  const a = editor(ra, 'Ada', [marks.of(viewMarks({ authoritative: true, visible: true }))]);
  type(a.view, 11, 11, ' again');
  const marked = (cls: string) => Array.from(a.view.contentDOM.querySelectorAll(`.${cls}`), (e) => e.textContent).join('');
  // Submitted, not yet ordered: nothing has reached the server yet.
  assert.equal(marked('cm-hercules-unauthoritative'), ' again');
  assert.equal(marked('cm-hercules-invisible'), ' again');
  await until(() => marked('cm-hercules-unauthoritative') === '' && marked('cm-hercules-invisible') === '', 5000, 'the marks to clear');
  assert.equal(ra.text('doc').toString('visible'), 'hello world again');
  // Toggled off: typing marks nothing.
  a.view.dispatch({ effects: marks.reconfigure(viewMarks({})) });
  type(a.view, 0, 0, '> ');
  assert.equal(marked('cm-hercules-unauthoritative'), '');
  a.view.dispatch({ effects: marks.reconfigure(viewMarks({ authoritative: true })) });
  const now = marked('cm-hercules-unauthoritative');
  assert.ok(now === '> ' || now === '', `toggled on: the part not yet ordered, if any (${JSON.stringify(now)})`);
  a.view.destroy();
});

test("a local edit made before the room's notification reaches the binding is mapped through the room's change", async (t) => {
  const { room } = await setup(t);
  const [ra, rb] = [await room(), await room()];
  // Bob's binding hears of the Submitted view 300 ms late: a window in which he types.
  const subscribe = rb.subscribe.bind(rb);
  rb.subscribe = (view, fn, opts) => subscribe(view, view === 'submitted' ? (s, v) => setTimeout(() => fn(s, v), 300) : fn, opts);
  const a = editor(ra, 'Ada');
  const b = editor(rb, 'Bob');
  type(a.view, 0, 0, 'X');
  await until(() => rb.text('doc').toString() === 'Xhello world', 5000, "Ada's insert in Bob's room");
  assert.equal(b.view.state.doc.toString(), 'hello world', 'not yet in his editor');
  // At the end of what he sees; index 11 of the room's text would be before the "d".
  type(b.view, 11, 11, '!');
  assert.equal(rb.text('doc').toString(), 'Xhello world!');
  await until(() => b.view.state.doc.toString() === 'Xhello world!', 5000, "Bob's editor brought level");
  await until(() => a.view.state.doc.toString() === 'Xhello world!', 5000, "Bob's edit in Ada's editor");
  a.view.destroy();
  b.view.destroy();
});

test('an editor started with another document is given the text, and edits made before that land in the text', async (t) => {
  const { room } = await setup(t);
  const ra = await room();
  const parent = document.createElement('div');
  document.body.append(parent);
  const view = new EditorView({ parent, state: EditorState.create({ doc: 'stale', extensions: [hercules({ room: ra, path: 'doc' })] }) });
  // Typed at the end of "stale" before the binding replaced it: mapped to the end of the text.
  type(view, 5, 5, '?');
  assert.equal(ra.text('doc').toString(), 'hello world?');
  await until(() => view.state.doc.toString() === 'hello world?', 5000, 'the document replaced by the text');
  view.destroy();
});

test('an insert the server refuses leaves the editor, and the text after it stays', async (t) => {
  // The authorize hook refuses any insert holding a "#".
  const { room } = await setup(t, { authorize: (op) => !(op.name === 'textInsert' && String((op.args as { t?: unknown }).t).includes('#')) });
  const ra = await room();
  const rejected: string[] = [];
  ra.onRejected((op) => rejected.push(op.name));
  const a = editor(ra, 'Ada');
  a.view.dispatch({ selection: { anchor: 11 } });
  type(a.view, 5, 5, '#');
  assert.equal(a.view.state.doc.toString(), 'hello# world');
  assert.equal(a.view.state.selection.main.head, 6);
  await until(() => a.view.state.doc.toString() === 'hello world', 5000, 'the refused "#" to leave the editor');
  assert.deepEqual(rejected, ['textInsert']);
  assert.equal(a.view.state.selection.main.head, 5, 'the caret after "hello", where the "#" was');
  type(a.view, 11, 11, '!');
  await until(() => ra.text('doc').toString('authoritative') === 'hello world!', 5000, 'a later insert ordered');
  a.view.destroy();
});
