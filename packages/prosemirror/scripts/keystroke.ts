/**
 * The binding's cost per keystroke, in an empty document and in ones of 10k and 100k characters
 * (ProseMirror in happy-dom, an offline ClientRoom, so each keystroke stays pending: the view
 * marks then compare a growing set of pending inserts with the Authoritative text). The document
 * is paragraphs of 100 characters with a bold word each. Rounds alternate the sizes; the ratios
 * are what to compare, the machine being shared.
 *
 *   node --conditions=@hercules/source --import tsx packages/prosemirror/scripts/keystroke.ts
 */
import '../test/dom.ts';

const { EditorState, Selection } = await import('prosemirror-state');
const { EditorView } = await import('prosemirror-view');
const { ClientRoom, defineMachine, textOps } = await import('@hercules/core');
const { docOf, hercules, schema, docToFlat } = await import('../src/index.ts');
const { createRichText, richTextOps } = await import('../src/rich.ts');

const KEYS = 100;

/** A room whose document holds `size` characters: typed by one client, then ordered (offline: Submitted). */
function roomOf(size: number) {
  const machine = defineMachine({ name: 'keys', version: 1, initial: { doc: createRichText() }, ops: { ...textOps(), ...richTextOps() } });
  const room = new ClientRoom(machine, { clientId: 'me', now: () => 0 });
  if (size === 0) return room;
  const para = `${'x'.repeat(40)} bold ${'y'.repeat(54)}`;
  const n = Math.ceil(size / para.length);
  const parts = Array.from({ length: n }, () =>
    schema.nodes.paragraph.create(null, [schema.text(para.slice(0, 41)), schema.text('bold', [schema.marks.strong.create()]), schema.text(para.slice(45))]),
  );
  const doc = schema.nodes.doc.create(null, parts);
  const parent = document.createElement('div');
  const view = new EditorView(parent, { state: EditorState.create({ doc: docOf(room, 'doc'), plugins: [hercules({ room, path: 'doc' })] }) });
  view.dispatch(view.state.tr.replaceWith(0, view.state.doc.content.size, doc.content));
  if (docToFlat(view.state.doc).text.length < size) throw new Error('the document is short');
  view.destroy();
  return room;
}

function once(size: number, bound: boolean): number {
  const room = roomOf(size);
  const plugins = bound ? [hercules({ room, path: 'doc', marks: { authoritative: true, visible: true } })] : [];
  const view = new EditorView(document.createElement('div'), { state: EditorState.create({ doc: docOf(room, 'doc'), plugins }) });
  const at = Math.max(1, view.state.doc.content.size >> 1);
  view.dispatch(view.state.tr.setSelection(Selection.near(view.state.doc.resolve(at))));
  const t0 = performance.now();
  for (let i = 0; i < KEYS; i++) view.dispatch(view.state.tr.insertText('k'));
  const ms = (performance.now() - t0) / KEYS;
  view.destroy();
  return ms;
}

const cases = [
  ['empty', 0, true],
  ['10k', 10_000, true],
  ['100k', 100_000, true],
  ['empty, ProseMirror alone', 0, false],
  ['100k, ProseMirror alone', 100_000, false],
] as const;
const times = new Map<string, number[]>(cases.map(([name]) => [name, []]));
for (let round = 0; round < 3; round++) for (const [name, size, bound] of round % 2 ? [...cases].reverse() : cases) times.get(name)!.push(once(size, bound));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const m = (name: string) => median(times.get(name)!);
for (const [name] of cases) console.log(`${name}: ${(m(name) * 1000).toFixed(0)} µs a keystroke (median of 3 rounds of ${KEYS})`);
console.log(`ratio 10k / empty: ${(m('10k') / m('empty')).toFixed(1)}; 100k / empty: ${(m('100k') / m('empty')).toFixed(1)}`);
console.log(`ProseMirror alone, 100k / empty: ${(m('100k, ProseMirror alone') / m('empty, ProseMirror alone')).toFixed(1)}`);
