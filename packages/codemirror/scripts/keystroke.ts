/**
 * The binding's cost per keystroke, in an empty text and in a 100k-character one (CodeMirror in
 * happy-dom, an offline ClientRoom, so each keystroke stays pending: the view marks then diff a
 * growing set of pending inserts against the Authoritative text). Rounds alternate the two
 * sizes; the ratio is what to compare, the machine being shared.
 *
 *   node --conditions=@hercules/source --import tsx packages/codemirror/scripts/keystroke.ts
 */
import { Window } from 'happy-dom';

const win = new Window();
const g = globalThis as Record<string, unknown>;
for (const name of ['window', 'document', 'navigator'] as const)
  Object.defineProperty(globalThis, name, { value: name === 'window' ? win : win[name], configurable: true, writable: true });
for (const name of [
  'MutationObserver',
  'requestAnimationFrame',
  'cancelAnimationFrame',
  'getComputedStyle',
  'Node',
  'Element',
  'HTMLElement',
  'Text',
  'Range',
  'Selection',
  'DocumentFragment',
  'Event',
] as const)
  g[name] ??= (win as unknown as Record<string, unknown>)[name];

const { EditorState } = await import('@codemirror/state');
const { EditorView } = await import('@codemirror/view');
const { ClientRoom, createText, defineMachine, textOps } = await import('@hercules/core');
const { hercules, viewMarks } = await import('../src/index.ts');

const KEYS = 300;

function once(size: number, bound: boolean): number {
  const machine = defineMachine({ name: 'keys', version: 1, initial: { doc: createText('x'.repeat(size)) }, ops: { ...textOps() } });
  const room = new ClientRoom(machine, { clientId: 'me', now: () => 0 });
  const parent = document.createElement('div');
  const state = EditorState.create({
    doc: room.text('doc').toString(),
    extensions: bound ? [hercules({ room, path: 'doc' }), viewMarks({ authoritative: true, visible: true })] : [],
  });
  const view = new EditorView({ state, parent });
  const at = size >> 1;
  const t0 = performance.now();
  for (let i = 0; i < KEYS; i++) view.dispatch({ changes: { from: at + i, insert: 'k' }, selection: { anchor: at + i + 1 }, userEvent: 'input.type' });
  const ms = (performance.now() - t0) / KEYS;
  if (bound && room.text('doc').length() !== size + KEYS) throw new Error('a keystroke was lost');
  view.destroy();
  return ms;
}

const cases = [
  ['empty', 0, true],
  ['100k', 100_000, true],
  ['empty, CodeMirror alone', 0, false],
  ['100k, CodeMirror alone', 100_000, false],
] as const;
const times = new Map<string, number[]>(cases.map(([name]) => [name, []]));
for (let round = 0; round < 5; round++) for (const [name, size, bound] of round % 2 ? [...cases].reverse() : cases) times.get(name)!.push(once(size, bound));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const m = (name: string) => median(times.get(name)!);
for (const [name] of cases) console.log(`${name}: ${(m(name) * 1000).toFixed(0)} µs a keystroke (median of 5 rounds of ${KEYS})`);
console.log(`ratio 100k / empty, bound: ${(m('100k') / m('empty')).toFixed(2)}`);
console.log(
  `the binding's share, empty: ${((m('empty') - m('empty, CodeMirror alone')) * 1000).toFixed(0)} µs; 100k: ${((m('100k') - m('100k, CodeMirror alone')) * 1000).toFixed(0)} µs`,
);
