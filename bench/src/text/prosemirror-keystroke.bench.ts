/**
 * One keystroke through the ProseMirror binding (issue 38's "the cost of one keystroke in a
 * 100k-character document within 2x of one in an empty document", measured through an editor):
 * a ProseMirror EditorView in happy-dom bound by `hercules()` to a ClientRoom's rich text (no
 * server), a one-character insert dispatched at a random text position, then the microtasks the
 * binding and the room queue (their notification, the redraw) run before the next one.
 *
 *   NODE_ENV=production node -C @hercules/source --import tsx bench/src/text/prosemirror-keystroke.bench.ts [--traces DIR] [--n 500] [--rounds 5]
 *
 * The large document is automerge-paper's end state (Martin Kleppmann's trace, from Joseph
 * Gentle's `editing-traces`, CC BY 4.0): the trace replayed through `applyOp` into the rich
 * text's text after its first block's separator, so it keeps the trace's runs and tombstones;
 * each `\n` of the trace is a block separator (a paragraph). The empty one is createRichText().
 * Empty and large alternate, one editor each per round, the same random positions per round.
 */
import '../../../packages/prosemirror/test/dom.ts';
import { parseArgs } from 'node:util';
import { ClientRoom, applyOp, compactText, defineMachine, deleteArgs, insertArgs, textOps, type Text } from '@hercules/core';
import { Rng } from '@hercules/test-utils';
import { fmt, machineInfo, median, repoRoot } from '../harness.ts';
import { defaultTracesDir, sequentialPatches } from './traces.ts';

const { EditorState, Selection } = await import('prosemirror-state');
const { EditorView } = await import('prosemirror-view');
const { hercules, docOf } = await import('@hercules/prosemirror');
const { createRichText, richTextOps } = await import('@hercules/prosemirror/ops');

const { values } = parseArgs({
  options: {
    traces: { type: 'string', default: defaultTracesDir(repoRoot) },
    n: { type: 'string', default: '500' },
    rounds: { type: 'string', default: '5' },
  },
});

const WRITER = '6f1c2a3e-9b7d-4e21-8c55-0d4f3a2b1e90';
const PATH = ['doc', 'text'];

/** automerge-paper's end state as the text of a rich text: after the first block's separator. */
function paperText(): Text {
  const { patches, end } = sequentialPatches(values.traces!, 'automerge-paper');
  const m = defineMachine({ name: 'pm-build', version: 1, initial: { doc: createRichText() }, ops: { ...textOps() } });
  let s = m.initial;
  let seq = 0;
  const text = () => s.doc.text;
  for (const [pos, del, ins] of patches) {
    if (del > 0) s = applyOp(m, s, { client: WRITER, seq: ++seq, author: WRITER, name: 'textDelete', args: deleteArgs(text(), PATH, pos + 1, del) }, seq).state;
    if (ins.length > 0)
      s = applyOp(m, s, { client: WRITER, seq: ++seq, author: WRITER, name: 'textInsert', args: insertArgs(text(), PATH, WRITER, pos + 1, ins) }, seq).state;
  }
  if (text().len !== end.length + 1) throw new Error('the replay does not give endContent');
  return text();
}

/**
 * µs per keystroke in an editor on a room whose rich text holds `text` (undefined: empty): wall
 * time and the process's CPU time (user + system: on a loaded machine the wall time is mostly
 * waiting for a core).
 */
async function keystrokes(text: Text | undefined, n: number, rand: () => number): Promise<{ wall: number; cpu: number }> {
  const rich = text === undefined ? createRichText() : { ...createRichText(), text };
  const machine = defineMachine({ name: 'pm-keys', version: 1, initial: { doc: rich }, ops: { ...textOps(), ...richTextOps() } });
  const room = new ClientRoom(machine, { clientId: 'k' });
  const parent = document.createElement('div');
  document.body.append(parent);
  const view = new EditorView(parent, {
    state: EditorState.create({ doc: docOf(room, 'doc'), plugins: [hercules({ room, path: 'doc', cursors: false })] }),
  });
  await Promise.resolve();
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const doc = view.state.doc;
    const sel = Selection.near(doc.resolve(1 + Math.floor(rand() * (doc.content.size - 1))));
    view.dispatch(view.state.tr.setSelection(sel).insertText('x'));
    await Promise.resolve();
  }
  const wall = ((performance.now() - t0) * 1000) / n;
  const c = process.cpuUsage(c0);
  const cpu = (c.user + c.system) / n;
  const typed = room.getState('submitted').doc.text.len - rich.text.len;
  view.destroy();
  parent.remove();
  room.close();
  if (typed !== n) throw new Error(`${typed} characters reached the room, not ${n}`);
  return { wall, cpu };
}

const n = Number(values.n);
const rounds = Number(values.rounds);
console.log(JSON.stringify(machineInfo()));
const big = paperText();
const empty: { wall: number; cpu: number }[] = [];
const large: { wall: number; cpu: number }[] = [];
for (let r = 0; r < rounds + 1; r++) {
  const e = await keystrokes(undefined, n, new Rng(r + 1).source());
  const b = await keystrokes(big, n, new Rng(r + 1).source());
  if (r === 0) continue; // warm-up
  empty.push(e);
  large.push(b);
  console.log(
    `round ${r}: empty ${fmt(e.wall)} µs (CPU ${fmt(e.cpu)}), large ${fmt(b.wall)} µs (CPU ${fmt(b.cpu)}), ratio ${fmt(b.wall / e.wall)} (CPU ${fmt(b.cpu / e.cpu)})`,
  );
}
const med = (xs: { wall: number; cpu: number }[], k: 'wall' | 'cpu') => median(xs.map((x) => x[k]));
const bigChunks = compactText(big).chunks;
const runs = bigChunks.reduce((k, c) => k + c.runs.length, 0);
console.log(
  `\n## One keystroke through the ProseMirror binding, median of ${rounds} alternating rounds of ${n}\n\n| document | µs per keystroke | CPU µs per keystroke |\n|---|--:|--:|\n| empty (growing to ${n}) | ${fmt(med(empty, 'wall'))} | ${fmt(med(empty, 'cpu'))} |\n| automerge-paper's end: ${(big.len - 1).toLocaleString('en-US')} characters, ${runs.toLocaleString('en-US')} runs in ${bigChunks.length} chunks | ${fmt(med(large, 'wall'))} | ${fmt(med(large, 'cpu'))} |\n\nratio ${fmt(med(large, 'wall') / med(empty, 'wall'))}, CPU ${fmt(med(large, 'cpu') / med(empty, 'cpu'))} (goal: at most 2)`,
);
