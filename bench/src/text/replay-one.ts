/**
 * One replay of automerge-paper (Martin Kleppmann's trace, from Joseph Gentle's `editing-traces`,
 * CC BY 4.0) in a process of its own, for old ÷ new comparisons: run this file from two checkouts
 * one after the other, alternating, several rounds (a checkout's code is what its process loads).
 *
 *   NODE_ENV=production node -C @hercules/source --expose-gc --import tsx bench/src/text/replay-one.ts room|ops|yjs [--traces DIR]
 *
 * room: a ClientRoom's `room.text('doc')` (no server); ops: `applyOp` alone; yjs: `Y.Text`.
 * Prints wall and CPU (user + system) µs a patch, and the heap in use after two gcs (the trace's
 * patches, about 66 MiB here, included; the text-trace benchmark gives the retained heap alone).
 */
import { parseArgs } from 'node:util';
import * as Y from 'yjs';
import { ClientRoom, applyOp, deleteArgs, insertArgs, textToString } from '@hercules/core';
import { gc, repoRoot } from '../harness.ts';
import { textBench as machine } from './machine.ts';
import { defaultTracesDir, sequentialPatches, type Patch } from './traces.ts';

const { values, positionals } = parseArgs({ options: { traces: { type: 'string', default: defaultTracesDir(repoRoot) } }, allowPositionals: true });
const { patches, end } = sequentialPatches(values.traces!, 'automerge-paper');
const WRITER = '6f1c2a3e-9b7d-4e21-8c55-0d4f3a2b1e90';
const mode = positionals[0] ?? 'room';

function room(ps: readonly Patch[]): string {
  const r = new ClientRoom(machine, { clientId: WRITER });
  const text = r.text('doc');
  for (const [pos, del, ins] of ps) {
    if (del > 0) text.delete(pos, del);
    if (ins.length > 0) text.insert(pos, ins);
  }
  return text.toString();
}

function yjs(ps: readonly Patch[]): string {
  const text = new Y.Doc().getText('doc');
  for (const [pos, del, ins] of ps) {
    if (del > 0) text.delete(pos, del);
    if (ins.length > 0) text.insert(pos, ins);
  }
  return text.toString();
}

function ops(ps: readonly Patch[]): string {
  let s = machine.initial;
  let seq = 0;
  for (const [pos, del, ins] of ps) {
    if (del > 0)
      s = applyOp(machine, s, { client: WRITER, seq: ++seq, author: WRITER, name: 'textDelete', args: deleteArgs(s.doc, 'doc', pos, del) }, seq).state;
    if (ins.length > 0)
      s = applyOp(machine, s, { client: WRITER, seq: ++seq, author: WRITER, name: 'textInsert', args: insertArgs(s.doc, 'doc', WRITER, pos, ins) }, seq).state;
  }
  return textToString(s.doc);
}

const run = mode === 'room' ? room : mode === 'yjs' ? yjs : ops;
const t0 = performance.now();
const c0 = process.cpuUsage();
const out = run(patches);
const ms = performance.now() - t0;
const c = process.cpuUsage(c0);
if (out !== end) throw new Error(`${mode}: the replay does not give endContent`);
gc();
gc();
const n = patches.length;
console.log(
  `${mode}: ${n} patches, ${((ms * 1000) / n).toFixed(1)} µs a patch, CPU ${((c.user + c.system) / n).toFixed(1)} µs a patch, heap in use ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(0)} MiB`,
);
