/**
 * What bounding a frame's decoded size costs the honest path (issue 40, item 2): the server's
 * decode of ordinary client frames, as it was (ServerCodec.decode: msgpackr) against with the
 * bound (measureFrame, a scan of the bytes, then msgpackr), and against the other way to bound it,
 * a decoder of our own that counts as it goes (core's msgpack.ts decoder, the client's, which
 * would carry the counters: its time is a floor for that choice). Rounds alternate the three in
 * one process, each round in a different order; medians over the rounds.
 *
 *   node -C @hercules/source --import tsx bench/src/flood/decode-bound.bench.ts [--rounds 15]
 */
import { parseArgs } from 'node:util';
import { ClientCodec, ServerCodec, measureFrame, type ClientMessage } from '@hercules/core';
import { decode as ownDecode } from '../../../packages/core/src/msgpack.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string' } } });
const ROUNDS = Number(values.rounds ?? 15);

const encode = (m: ClientMessage) => new ClientCodec().encode(m);
const chatOps = (n: number) =>
  encode({
    t: 'ops',
    ops: Array.from({ length: n }, (_, i) => ({ seq: i + 1, name: 'say', args: { text: `message number ${i} with some words in it to look like chat` } })),
  });
const frames: Record<string, Uint8Array> = {
  'one chat op': chatOps(1),
  '100 moves (interior design)': encode({
    t: 'ops',
    ops: Array.from({ length: 100 }, (_, i) => ({ seq: i + 1, name: 'move', args: { id: `chair-${i % 7}`, x: i * 1.5, y: 20 - i } })),
  }),
  '10,000 chat ops (0.6 MB)': chatOps(10_000),
  'a 200 KB op of nested records': encode({
    t: 'ops',
    ops: [
      { seq: 1, name: 'load', args: Array.from({ length: 2000 }, (_, i) => ({ id: i, tags: ['a', 'b'], at: { x: i, y: -i }, text: 'lorem ipsum dolor' })) },
    ],
  }),
  ack: encode({ t: 'ack', pos: 123456, durable: 77 }),
  'presence (a cursor)': encode({ t: 'presence', value: { x: 120.5, y: 44, name: 'ada', color: '#ff8800' } }),
};

const ways: Record<string, (f: Uint8Array) => unknown> = {
  'msgpackr (before)': (f) => new ServerCodec().decode(f),
  'measureFrame + msgpackr (after)': (f) => {
    measureFrame(f);
    return new ServerCodec().decode(f);
  },
  'msgpack.ts decoder': (f) => ownDecode(f),
};

/** ns per frame for `fn` over `frame`, run for about 40 ms. */
function time(fn: (f: Uint8Array) => unknown, frame: Uint8Array): number {
  let n = 0;
  const start = performance.now();
  let now = start;
  let sink = 0;
  while (now - start < 40) {
    for (let i = 0; i < 8; i++) if (fn(frame)) sink++;
    n += 8;
    now = performance.now();
  }
  if (sink < 0) console.log(sink);
  return ((now - start) * 1e6) / n;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const names = Object.keys(ways);
console.log(`decode of ordinary client frames, ${ROUNDS} rounds alternating the ways (median ns per frame, and MB/s)`);
for (const [label, frame] of Object.entries(frames)) {
  const got: Record<string, number[]> = Object.fromEntries(names.map((w) => [w, []]));
  for (let r = 0; r < 3; r++) for (const w of names) time(ways[w], frame); // warm up
  for (let r = 0; r < ROUNDS; r++) {
    const order = names.map((_, i) => names[(i + r) % names.length]);
    for (const w of order) got[w].push(time(ways[w], frame));
  }
  const base = median(got[names[0]]);
  const cells = names.map((w) => {
    const m = median(got[w]);
    return `${w} ${m < 10_000 ? m.toFixed(0) : (m / 1000).toFixed(0) + 'k'} ns (${((frame.length / m) * 1000).toFixed(0)} MB/s, ${(m / base).toFixed(2)}x)`;
  });
  console.log(`  ${label} (${frame.length} bytes): ${cells.join('; ')}`);
}
