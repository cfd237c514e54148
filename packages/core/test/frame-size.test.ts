/**
 * measureFrame (frame-size.ts): the server measures a client frame's decoded size from its bytes
 * and refuses one over the bound before decoding it (issue 40: a 1 MiB frame of empty maps
 * decoded to ~60 MB). Every frame an honest client sends must pass: it counts no more than its
 * ops as the client counts them when it splits frames (scanOp, FRAME_BUDGET_BYTES).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import {
  ClientCodec,
  FRAME_BUDGET_BYTES,
  HerculesError,
  MAX_FRAME_UNITS,
  MAX_OPS_PER_FRAME,
  MAX_OP_BYTES,
  measureFrame,
  scanOp,
  type OpsMessage,
} from '../src/index.ts';
import { MAX_MEASURED_DEPTH } from '../src/frame-size.ts';

const SEED = Number(process.env.FC_SEED ?? 42);
const RUNS = Number(process.env.FC_RUNS ?? 1);
const packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false, int64AsType: 'number' });

type Op = { seq: number; name: string; args: unknown; after?: number; v?: number };
const scanned = (ops: Op[]) => ops.reduce((n, o) => n + (scanOp(0, o.name, o.args) as { bytes: number }).bytes, 0);

function refused(data: Uint8Array, code: 'too-large' | 'malformed-frame', max?: number): HerculesError {
  let e: unknown;
  try {
    measureFrame(data, max);
  } catch (caught) {
    e = caught;
  }
  assert.ok(e instanceof HerculesError && e.code === code, `expected ${code}, got ${e === undefined ? 'a size' : String(e)}`);
  return e;
}

/** An array 32 of `n` empty fixmaps, as the harness sent it (a byte a map). */
function emptyMaps(n: number): Uint8Array {
  const b = new Uint8Array(5 + n).fill(0x80);
  new DataView(b.buffer).setUint32(1, n);
  b[0] = 0xdd;
  return b;
}

// spec: SEC-LIMITS
test('an honest ops frame counts no more than its ops as scanOp counts them, plus the envelope', () => {
  const json = fc.jsonValue({ maxDepth: 6 }).filter((v) => !('problem' in scanOp(0, 'x', v)));
  const op = fc.record({ name: fc.constantFrom('say', 'move', 'a', 'a-rather-long-op-name'), args: json });
  fc.assert(
    fc.property(fc.array(op, { minLength: 1, maxLength: 40 }), fc.boolean(), (raw, compact) => {
      // compact: consecutive seqs, the tuple frame; otherwise each op declares a gap and an older
      // version, so the frame is the object form (the most it can cost per op).
      const ops: Op[] = raw.map((o, i) => (compact ? { seq: i + 1, ...o } : { seq: 2 * i + 2, after: 2 * i, v: 1, ...o }));
      const m: OpsMessage = { t: 'ops', ops, ack: { pos: 2 ** 40, durable: 2 ** 40 } };
      const { units } = measureFrame(new ClientCodec().encode(m));
      assert.ok(units <= scanned(ops) + (compact ? 0 : 72 * ops.length) + 200, `${units} units for ${scanned(ops)} scanned`);
    }),
    { seed: SEED, numRuns: 200 * RUNS },
  );
});

// spec: SEC-LIMITS
test('the largest frames an honest client sends pass the bound', () => {
  // Two ops at MAX_OP_BYTES of empty arrays (5 units each), the costliest shape per byte.
  const big = (seq: number): Op => ({ seq, name: 'load', args: Array.from({ length: Math.floor((MAX_OP_BYTES - 40) / 5) }, () => []) });
  const two = [big(1), big(2)];
  assert.ok(scanned(two) <= FRAME_BUDGET_BYTES);
  assert.ok(measureFrame(new ClientCodec().encode({ t: 'ops', ops: two })).units <= MAX_FRAME_UNITS);
  // MAX_OPS_PER_FRAME ops in the object form, FRAME_BUDGET_BYTES of them in all.
  const per = Math.floor(FRAME_BUDGET_BYTES / MAX_OPS_PER_FRAME) - 24;
  const many: Op[] = Array.from({ length: MAX_OPS_PER_FRAME }, (_, i) => ({ seq: 2 * i + 2, after: 2 * i, v: 3, name: 'say', args: 'x'.repeat(per) }));
  assert.ok(scanned(many) <= FRAME_BUDGET_BYTES, `${scanned(many)}`);
  const m = measureFrame(new ClientCodec().encode({ t: 'ops', ops: many, ack: { pos: 2 ** 40, durable: 2 ** 40 } }));
  assert.ok(m.units <= MAX_FRAME_UNITS, `${m.units} units`);
});

// spec: SEC-LIMITS
test('a frame that would decode past the bound is refused before it is decoded: 1 MiB of empty maps', () => {
  const args = emptyMaps(1_000_000);
  const frame = new Uint8Array(11 + args.length);
  frame.set([0x94, 0x01, 0x01, 0xa3, 0x73, 0x61, 0x79]); // [1, 1, 'say', ...
  frame.set(args, 7);
  const e = refused(frame.subarray(0, 7 + args.length), 'too-large');
  assert.match(e.message, new RegExp(`more than ${MAX_FRAME_UNITS} units`));
  // The same frame with fewer maps passes, and its heap estimate is what decoding it takes.
  const small = measureFrame(emptyMaps(10_000));
  assert.equal(small.units, 5 + 10_000 * 5);
  assert.ok(small.heap >= 10_000 * 61, 'at least the measured 61 bytes an empty map');
});

// spec: SEC-LIMITS
test('nesting is measured, not refused, up to where msgpackr runs out of stack; bytes that are not one MessagePack value are malformed, as msgpackr finds them', () => {
  const deep = (n: number) => new Uint8Array(n + 1).fill(0x91).fill(0xc0, n);
  assert.equal(measureFrame(deep(3000)).units, 3000 * 5 + 1, 'deep arguments are refused as ops, with their reason (OP-ARG-DOMAIN)');
  assert.doesNotThrow(() => packr.unpack(deep(3000)));
  refused(deep(MAX_MEASURED_DEPTH + 1), 'malformed-frame');
  assert.throws(() => packr.unpack(deep(MAX_MEASURED_DEPTH)), 'msgpackr fails long before that depth');
  for (const bad of [[], [0x92, 0x01], [0x91, 0x01, 0x02], [0xdd, 0xff, 0xff, 0xff, 0xff], [0xda, 0x00, 0x09, 0x41], [0xc1]]) {
    const b = Uint8Array.from(bad);
    refused(b, 'malformed-frame');
    if (bad[0] !== 0xc1) assert.throws(() => packr.unpack(b)); // msgpackr reads 0xc1 as an object; the protocol never sends it
  }
  // Every type msgpackr reads is measured: strings, bin, ext, numbers of each width, undefined.
  const every = packr.pack([
    1,
    -1,
    300,
    -300,
    70000,
    -70000,
    2 ** 40,
    -(2 ** 40),
    1.5,
    'é',
    'x'.repeat(40),
    'y'.repeat(300),
    Buffer.from([1, 2]),
    undefined,
    null,
    true,
    { a: [] },
  ]);
  assert.equal(measureFrame(every).units, 5 + 9 * 9 + (5 + 2) + (5 + 40) + (5 + 300) + (5 + 2) + 1 + 1 + 1 + (5 + (5 + 1) + 5));
});
