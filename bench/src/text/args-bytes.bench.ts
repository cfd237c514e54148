/**
 * Bytes of the text ops' arguments on the wire (issue 38 (b), TEXT-OWN-ID): a sequential trace
 * (default automerge-paper, Martin Kleppmann, from Joseph Gentle's `editing-traces`, CC BY 4.0)
 * replayed through `insertArgs`/`deleteArgs` by one writer whose id is a UUID; each op's arguments
 * as msgpack as written (own ids short) and with every id in full (`textLongArgs`), in one run.
 * The frame around them is not counted.
 *
 *   NODE_ENV=production node -C @hercules/source --import tsx bench/src/text/args-bytes.bench.ts [--traces DIR] [--trace automerge-paper]
 */
import { parseArgs } from 'node:util';
import { applyOp, createText, defineMachine, deleteArgs, insertArgs, textLongArgs, textOps, TEXT_DELETE, TEXT_INSERT } from '@hercules/core';
import { encode } from '../../../packages/core/src/msgpack.ts';
import { repoRoot } from '../harness.ts';
import { defaultTracesDir, sequentialPatches } from './traces.ts';

const { values } = parseArgs({
  options: { traces: { type: 'string', default: defaultTracesDir(repoRoot) }, trace: { type: 'string', default: 'automerge-paper' } },
});
const { patches, end } = sequentialPatches(values.traces!, values.trace!);
const machine = defineMachine({ name: 'args-bytes', version: 1, initial: { doc: createText() }, ops: { ...textOps() } });
const WRITER = '0b9f8e2c-5d1a-4c3e-9f7a-2b6d8e1c4a57';
let s = machine.initial;
let seq = 0;
let short = 0;
let long = 0;
const step = (name: string, args: unknown) => {
  short += encode(args).length;
  long += encode(textLongArgs(name, args, WRITER)).length;
  const r = applyOp(machine, s, { client: WRITER, seq: ++seq, author: WRITER, name, args }, seq);
  if (r.error !== undefined) throw new Error(r.error);
  s = r.state;
};
for (const [pos, del, ins] of patches) {
  if (del > 0) step(TEXT_DELETE, deleteArgs(s.doc, 'doc', pos, del, WRITER));
  if (ins.length > 0) step(TEXT_INSERT, insertArgs(s.doc, 'doc', WRITER, pos, ins));
}
if (s.doc.len !== end.length) throw new Error('the replay does not give endContent');
const per = (n: number) => (n / seq).toFixed(1);
console.log(`| ${values.trace}, ${seq.toLocaleString('en-US')} ops | bytes of arguments | per op |\n|---|--:|--:|`);
console.log(`| every id in full | ${long.toLocaleString('en-US')} | ${per(long)} |\n| own ids short | ${short.toLocaleString('en-US')} | ${per(short)} |`);
console.log(`\nshort / full: ${(short / long).toFixed(3)}`);
