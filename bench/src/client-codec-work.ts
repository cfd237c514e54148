/**
 * The measurement of client-codec.bench.ts, apart so that it runs the same in Node and, bundled
 * by esbuild, in Chromium: the client's MessagePack codec against msgpackr, alternated.
 */
import { Packr } from 'msgpackr';
import { ClientCodec, ServerCodec, type LogEntry, type ServerMessage } from '@hercules/core';
import { encode, decode } from '../../packages/core/src/msgpack.ts';

export interface CodecRow {
  work: string;
  'frame B': number;
  'msgpackr µs': number;
  'ours µs': number;
  'ours / msgpackr': number;
}

/** `asInput` turns a frame into what the socket hands over (a Buffer from ws, a Uint8Array in a browser). */
export function measure(asInput: (b: Uint8Array) => Uint8Array, reps = 15): { rows: CodecRow[]; clientCodecDecodeUs: { log1: number; log100: number } } {
  const packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false, int64AsType: 'number' });
  const clients = ['71280fd3-326c-4aa7-864b-27e727dc8e1a', '0c5e2bfa-0a7e-4f65-9a43-5d2f1a63c1d0', 'b2a0c0de-3f1e-4b6a-8f7e-9e2d4c5b6a7f'];
  const argsOf = (i: number) => ({ row: (i * 7) % 500, col: i % 26, text: i % 3 ? `Gear ${i}` : 'Gear' });
  const accented = (i: number) => ({ row: (i * 7) % 500, col: i % 26, text: `Zahnräder ${i} ⚙️` });
  const logOf = (from: number, n: number, args = argsOf): ServerMessage => ({
    t: 'log',
    from,
    entries: Array.from({ length: n }, (_, i) => {
      const client = clients[i % 3];
      const e: LogEntry = { pos: from + i, client, seq: 4000 + i, name: i % 4 ? 'setCell' : 'clearCell', args: args(i), author: client };
      return { k: 'op' as const, e };
    }),
  });
  // The server's codec writes the frames, with warm intern tables (ids and names as references).
  const sc = new ServerCodec(),
    cc = new ClientCodec();
  cc.decode(sc.encode(logOf(1, 8)));
  const log1 = asInput(sc.encode(logOf(123456, 1)));
  const log100 = asInput(sc.encode(logOf(123457, 100)));
  const log100u = asInput(sc.encode(logOf(123557, 100, accented)));
  // What ClientCodec.encode hands the codec for an ops frame: [1, firstSeq, name (ref), args, ...].
  const opsTuple = (n: number) => {
    const t: unknown[] = [1, 4212];
    for (let i = 0; i < n; i++) t.push(i % 4 ? 0 : 1, argsOf(i));
    return t;
  };
  const ops1 = opsTuple(1),
    ops100 = opsTuple(100);

  // Same values both ways, before timing anything.
  for (const b of [log1, log100, log100u]) if (JSON.stringify(decode(b)) !== JSON.stringify(packr.unpack(b))) throw new Error('decoders disagree');
  for (const t of [ops1, ops100]) if (JSON.stringify(packr.unpack(encode(t))) !== JSON.stringify(t)) throw new Error('encoders disagree');

  let sink = 0;
  type Work = { name: string; bytes: number; iters: number; msgpackr: () => void; ours: () => void };
  const dec = (name: string, b: Uint8Array, iters: number): Work => ({
    name,
    bytes: b.length,
    iters,
    msgpackr: () => {
      sink += (packr.unpack(b) as unknown[]).length;
    },
    ours: () => {
      sink += (decode(b) as unknown[]).length;
    },
  });
  const enc = (name: string, t: unknown[], iters: number): Work => ({
    name,
    bytes: encode(t).length,
    iters,
    msgpackr: () => {
      sink += packr.pack(t).length;
    },
    ours: () => {
      sink += encode(t).length;
    },
  });
  const work: Work[] = [
    dec('decode log frame, 1 op', log1, 200_000),
    dec('decode log frame, 100 ops', log100, 3_000),
    dec('decode log frame, 100 ops, non-ASCII text', log100u, 3_000),
    enc('encode ops frame, 1 op', ops1, 200_000),
    enc('encode ops frame, 100 ops', ops100, 3_000),
  ];
  const time = (f: () => void, iters: number): number => {
    const t0 = performance.now();
    for (let i = 0; i < iters; i++) f();
    return ((performance.now() - t0) / iters) * 1000; // µs per call
  };
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s[s.length >> 1];
  };

  const times = work.map(() => ({ msgpackr: [] as number[], ours: [] as number[], ratio: [] as number[] }));
  for (const w of work) {
    time(w.msgpackr, w.iters);
    time(w.ours, w.iters);
  } // warm-up
  for (let rep = 0; rep < reps; rep++) {
    work.forEach((w, i) => {
      // Which goes first alternates from one repetition to the next.
      const first = rep % 2 ? time(w.ours, w.iters) : 0;
      const m = time(w.msgpackr, w.iters);
      const o = rep % 2 ? first : time(w.ours, w.iters);
      times[i].msgpackr.push(m);
      times[i].ours.push(o);
      times[i].ratio.push(o / m);
    });
  }
  // The whole ClientCodec.decode (tuple checks, interning, message objects) on the same frames.
  const clientCodecDecodeUs = {
    log1: +median(
      Array.from({ length: 5 }, () =>
        time(() => {
          sink += cc.decode(log1).t.length;
        }, 200_000),
      ),
    ).toFixed(3),
    log100: +median(
      Array.from({ length: 5 }, () =>
        time(() => {
          sink += cc.decode(log100).t.length;
        }, 3_000),
      ),
    ).toFixed(2),
  };
  if (sink === 42) console.log('');
  const rows = work.map((w, i) => ({
    work: w.name,
    'frame B': w.bytes,
    'msgpackr µs': +median(times[i].msgpackr).toFixed(3),
    'ours µs': +median(times[i].ours).toFixed(3),
    'ours / msgpackr': +median(times[i].ratio).toFixed(2),
  }));
  return { rows, clientCodecDecodeUs };
}
