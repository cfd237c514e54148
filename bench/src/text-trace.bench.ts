/**
 * Collaborative text on real editing traces (issue 38, item 4 (a)), Hercules beside Yjs (Y.Text)
 * in one run, alternating. The traces are Joseph Gentle's `editing-traces` collection
 * (github.com/josephg/editing-traces, CC BY 4.0): automerge-paper by Martin Kleppmann
 * (automerge-perf), seph-blog1 and friendsforever_flat by Joseph Gentle. Give the directory
 * holding the .json.gz files with --traces (default: ../shared/data/editing-traces from the
 * repository root).
 *
 *   npm run bench:deps && node --expose-gc --import tsx bench/src/text-trace.bench.ts [--traces DIR] [--reps 3] [--only automerge-paper]
 *
 * Per trace and system: replay every patch in order through the app-facing API (Hercules: a
 * ClientRoom's `room.text('doc')`, every patch an op applied to the Submitted view, no server;
 * also the ops alone through `applyOp`, without the room; Yjs: `Y.Text` insert/delete), check the
 * result is `endContent` exactly, and report the time (wall, and the process's CPU time, which a
 * loaded machine moves less), the heap it retains (after gc) and the
 * size of the final document encoded (Hercules: the state as msgpack, the form sent (the stores keep JSON);
 * Yjs: `Y.encodeStateAsUpdate`). Then the cost of one keystroke in a 100k-character document
 * (automerge-paper's end state, with all its runs and tombstones) against one in an empty one.
 */
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as Y from 'yjs';
import { ClientRoom, applyOp, compactText, createText, defineMachine, deleteArgs, insertArgs, textOps, textToString, type Text } from '@hercules/core';
import { encode } from '../../packages/core/src/msgpack.ts';
import { Rng } from '@hercules/test-utils';
import { consume, fmt, gc, machineInfo, median, repoRoot } from './harness.ts';

const { values } = parseArgs({
  options: {
    traces: { type: 'string', default: join(repoRoot, '..', 'shared', 'data', 'editing-traces') },
    reps: { type: 'string', default: '3' },
    only: { type: 'string' },
    /** Only the keystroke comparison (the replays skipped): for quick A/B runs. */
    'keystrokes-only': { type: 'boolean', default: false },
  },
});

type Patch = [pos: number, del: number, ins: string];
interface Trace {
  startContent: string;
  endContent: string;
  txns: { patches: Patch[] }[];
}

function load(name: string): { patches: Patch[]; start: string; end: string } {
  const t = JSON.parse(gunzipSync(readFileSync(join(values.traces!, `${name}.json.gz`))).toString('utf8')) as Trace;
  const patches = t.txns.flatMap((x) => x.patches);
  // Positions are in Unicode characters, Hercules' and Yjs' indexes in UTF-16 units: equal without astral characters.
  if (/[\u{10000}-\u{10FFFF}]/u.test(t.endContent + patches.map((p) => p[2]).join('')))
    throw new Error(`${name} has characters outside the BMP; convert its positions first`);
  return { patches, start: t.startContent, end: t.endContent };
}

/** Client ids are UUIDs (connect() makes them so): the size at rest counts them as they are. */
const WRITER = '6f1c2a3e-9b7d-4e21-8c55-0d4f3a2b1e90';

const machine = defineMachine({ name: 'text-bench', version: 1, initial: { doc: createText() }, ops: { ...textOps() } });

function cpuSince(c0: NodeJS.CpuUsage): number {
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1000;
}

function heapMiB(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

interface Run {
  ms: number;
  /** The process's CPU time over the replay (user + system), ms: on a loaded machine the wall time is mostly waiting for a core. */
  cpuMs: number;
  heapMiB: number;
  bytes: number;
  /** The state as JSON, as the server and client stores keep it (Hercules only). */
  json?: number;
}

/** Replay through a ClientRoom's text handle: what an editor binding does per keystroke. */
function herculesRoom(patches: Patch[], end: string): Run {
  const before = heapMiB();
  const room = new ClientRoom(machine, { clientId: WRITER });
  const text = room.text('doc');
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  for (const [pos, del, ins] of patches) {
    if (del > 0) text.delete(pos, del);
    if (ins.length > 0) text.insert(pos, ins);
  }
  const out = text.toString();
  const ms = performance.now() - t0;
  const cpuMs = cpuSince(c0);
  if (out !== end) throw new Error('Hercules (room): the replay does not give endContent');
  const heap = heapMiB() - before;
  const bytes = encode(room.getState('submitted')).length;
  const json = Buffer.byteLength(JSON.stringify(room.getState('submitted')));
  consume(room);
  return { ms, cpuMs, heapMiB: heap, bytes, json };
}

/** The ops alone, through applyOp (index to anchors on the state, then the op): the pure cost. */
function herculesOps(patches: Patch[], end: string): Run {
  const before = heapMiB();
  let s = machine.initial;
  let seq = 0;
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  for (const [pos, del, ins] of patches) {
    if (del > 0)
      s = applyOp(machine, s, { client: WRITER, seq: ++seq, author: WRITER, name: 'textDelete', args: deleteArgs(s.doc, 'doc', pos, del) }, seq).state;
    if (ins.length > 0)
      s = applyOp(machine, s, { client: WRITER, seq: ++seq, author: WRITER, name: 'textInsert', args: insertArgs(s.doc, 'doc', WRITER, pos, ins) }, seq).state;
  }
  const out = textToString(s.doc);
  const ms = performance.now() - t0;
  const cpuMs = cpuSince(c0);
  if (out !== end) throw new Error('Hercules (ops): the replay does not give endContent');
  const heap = heapMiB() - before;
  consume(s);
  return { ms, cpuMs, heapMiB: heap, bytes: encode(s).length, json: Buffer.byteLength(JSON.stringify(s)) };
}

function yjs(patches: Patch[], end: string): Run {
  const before = heapMiB();
  const doc = new Y.Doc();
  const text = doc.getText('doc');
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  for (const [pos, del, ins] of patches) {
    if (del > 0) text.delete(pos, del);
    if (ins.length > 0) text.insert(pos, ins);
  }
  const out = text.toString();
  const ms = performance.now() - t0;
  const cpuMs = cpuSince(c0);
  if (out !== end) throw new Error('Yjs: the replay does not give endContent');
  const heap = heapMiB() - before;
  const bytes = Y.encodeStateAsUpdate(doc).length;
  consume(doc);
  return { ms, cpuMs, heapMiB: heap, bytes };
}

const SYSTEMS = { 'Hercules (room.text)': herculesRoom, 'Hercules (ops only)': herculesOps, 'Yjs (Y.Text)': yjs } as const;

/** µs per keystroke, wall and CPU: `n` one-character inserts, each at a random index, applied through applyOp. */
function keystrokes(doc: Text, n: number, rand: () => number): { wall: number; cpu: number } {
  let s = { doc };
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  for (let i = 1; i <= n; i++) {
    const at = Math.floor(rand() * (s.doc.len + 1));
    s = applyOp(machine, s, { client: 'k', seq: i, author: 'k', name: 'textInsert', args: insertArgs(s.doc, 'doc', 'k', at, 'x') }, i).state;
  }
  consume(s);
  return { wall: ((performance.now() - t0) * 1000) / n, cpu: (cpuSince(c0) * 1000) / n };
}

const reps = Number(values.reps);
console.log(JSON.stringify(machineInfo()));
const names = values.only ? values.only.split(',') : ['automerge-paper', 'seph-blog1', 'friendsforever_flat'];
let paperEnd: Text | undefined;
for (const name of names) {
  const { patches, start, end } = load(name);
  if (start !== '') throw new Error(`${name} starts with content; this replay starts empty`);
  const runs: Record<string, Run[]> = {};
  for (let r = 0; r < (values['keystrokes-only'] ? 0 : reps); r++) for (const [sys, fn] of Object.entries(SYSTEMS)) (runs[sys] ??= []).push(fn(patches, end));
  if (!values['keystrokes-only']) printReplays(name, patches.length, end.length, runs);
  if (name === 'automerge-paper') paperEnd = replayOps(patches);
}

function replayOps(patches: Patch[]): Text {
  let s = machine.initial;
  let seq = 0;
  for (const [pos, del, ins] of patches) {
    if (del > 0)
      s = applyOp(machine, s, { client: WRITER, seq: ++seq, author: WRITER, name: 'textDelete', args: deleteArgs(s.doc, 'doc', pos, del) }, seq).state;
    if (ins.length > 0)
      s = applyOp(machine, s, { client: WRITER, seq: ++seq, author: WRITER, name: 'textInsert', args: insertArgs(s.doc, 'doc', WRITER, pos, ins) }, seq).state;
  }
  return s.doc;
}

function printReplays(name: string, nPatches: number, endLength: number, runs: Record<string, Run[]>): void {
  console.log(
    `\n## ${name}: ${nPatches.toLocaleString('en-US')} patches, ${endLength.toLocaleString('en-US')} characters at the end (median of ${reps}, alternating)\n`,
  );
  console.log(
    '| system | replay ms | µs per patch | × Yjs | CPU µs per patch | × Yjs | heap retained MiB | encoded document bytes | × Yjs | state as JSON bytes (at rest) | × Yjs |',
  );
  console.log('|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|');
  const yjsMs = median(runs['Yjs (Y.Text)'].map((x) => x.ms));
  const yjsCpu = median(runs['Yjs (Y.Text)'].map((x) => x.cpuMs));
  const yjsBytes = runs['Yjs (Y.Text)'][0].bytes;
  const times = (n: number | undefined) => (n === undefined ? '' : fmt(n / yjsBytes));
  for (const [sys, rs] of Object.entries(runs)) {
    const ms = median(rs.map((x) => x.ms));
    const cpu = median(rs.map((x) => x.cpuMs));
    console.log(
      `| ${sys} | ${fmt(ms)} | ${fmt((ms * 1000) / nPatches)} | ${fmt(ms / yjsMs)} | ${fmt((cpu * 1000) / nPatches)} | ${fmt(cpu / yjsCpu)} | ${fmt(median(rs.map((x) => x.heapMiB)))} | ${rs[0].bytes.toLocaleString('en-US')} | ${times(rs[0].bytes)} | ${rs[0].json?.toLocaleString('en-US') ?? ''} | ${times(rs[0].json)} |`,
    );
  }
}

if (paperEnd) {
  const chunks = compactText(paperEnd).chunks;
  const runs = chunks.reduce((n, c) => n + c.runs.length, 0);
  const empty: { wall: number; cpu: number }[] = [];
  const big: { wall: number; cpu: number }[] = [];
  for (let r = 0; r < 2 + 7; r++) {
    const e = keystrokes(createText(), 2000, new Rng(r + 1).source());
    const b = keystrokes(paperEnd, 2000, new Rng(r + 1).source());
    if (r < 2) continue;
    empty.push(e);
    big.push(b);
  }
  const med = (xs: { wall: number; cpu: number }[], k: 'wall' | 'cpu') => median(xs.map((x) => x[k]));
  console.log(
    `\n## One keystroke (a one-character insert at a random index, index to anchors + applyOp), median of 7 alternating rounds of 2,000\n\n| document | µs per keystroke | CPU µs |\n|---|--:|--:|\n| empty (growing to 2,000) | ${fmt(med(empty, 'wall'))} | ${fmt(med(empty, 'cpu'))} |\n| automerge-paper's end: ${paperEnd.len.toLocaleString('en-US')} characters, ${runs.toLocaleString('en-US')} runs in ${chunks.length} chunks | ${fmt(med(big, 'wall'))} | ${fmt(med(big, 'cpu'))} |\n\nratio ${fmt(med(big, 'wall') / med(empty, 'wall'))}, CPU ${fmt(med(big, 'cpu') / med(empty, 'cpu'))} (goal: at most 2)`,
  );
}
