/**
 * R2. Authoritative and Visible delays at an emulated 67 ms round trip (server option
 * `simulateRttMs: 67`: every frame waits 33.5 ms in each direction inside the server process).
 *
 * Two clients in one room (spreadsheet machine), both in this process, each with its own SQLite
 * client store. Client A types into cells, one setCell every 100 ms (10 ops/s) for 20 s after a
 * 2 s warm-up; client B only receives (and acks, as every client does). For each of A's ops:
 * authoritative - submitted and visible - submitted, from the op handle's `times`.
 *
 * The server process also runs a probe: a chain of setTimeout(33.5 ms) beside the traffic,
 * recording how long each really took. That is the emulated one-way delay as Node delivers it
 * (timers count on libuv's millisecond loop clock, so a 33.5 ms timer lasts about 32.5 to
 * 34.5 ms), so the excess of each stage over the emulated network can be told apart from timer
 * rounding.
 *
 * Both clients use a WebSocket subclass that counts every frame's payload and header bytes, for
 * the live wire-bytes figure (R4), alongside the server's /metrics byte counters.
 */
import { WebSocket } from 'ws';
import { join } from 'node:path';
import { connect, type ConnectedRoom, type OpHandle } from '@hercules/client';
import { sqliteStorage } from '@hercules/client-sqlite';
import { spreadsheet } from '../../../apps/machines.ts';
import { stats, type Row, type Section } from '../harness.ts';
import { argBytes, delta, removeTemp, round, sleep, startServer, tempDir, until, wsHeader } from './common.ts';

export const RTT = 67;

export interface WireCount {
  txFrames: number;
  txPayload: number;
  txHeader: number;
  rxFrames: number;
  rxPayload: number;
  rxHeader: number;
  /** WebSocket ping/pong control frames (server pings every 5 s; ws answers with a pong). */
  ctlBytes: number;
}
export const newCount = (): WireCount => ({ txFrames: 0, txPayload: 0, txHeader: 0, rxFrames: 0, rxPayload: 0, rxHeader: 0, ctlBytes: 0 });
const sub = (a: WireCount, b: WireCount): WireCount =>
  Object.fromEntries(Object.keys(a).map((k) => [k, b[k as keyof WireCount] - a[k as keyof WireCount]])) as unknown as WireCount;

/** A `ws` WebSocket that counts the bytes of every frame it sends and receives. */
export function countingWebSocket(c: WireCount) {
  return class CountingWebSocket extends WebSocket {
    constructor(url: string) {
      super(url);
      this.on('message', (data: ArrayBuffer | Buffer) => {
        c.rxFrames++;
        c.rxPayload += data.byteLength;
        c.rxHeader += wsHeader(data.byteLength, false);
      });
      this.on('ping', (d: Buffer) => {
        c.ctlBytes += wsHeader(d.length, false) + d.length + wsHeader(d.length, true) + d.length;
      });
    }
    override send(data: any, ...rest: any[]): void {
      const n = (data as Uint8Array).byteLength;
      c.txFrames++;
      c.txPayload += n;
      c.txHeader += wsHeader(n, true);
      (super.send as (...a: unknown[]) => void)(data, ...rest);
    }
  };
}

/** What the live runs hand to the wire-bytes figure. */
export interface LiveBytes {
  label: string;
  ops: number;
  /** Sum over ops of msgpack(args) bytes. */
  argBytes: number;
  /** How many times each op's args cross the wire (Deliver-Operation + one Remote-Operation per other client). */
  argCopies: number;
  server: { bytesIn: number; bytesOut: number; framesIn: number; framesOut: number };
  /** Exact client-side counts (payload + WebSocket headers), all clients together. */
  clients: WireCount;
  notes: string[];
}

const TEXT = 'Gear Bolt Nut Washer Spring Axle Cam Pin Shaft Bearing Sprocket Chain Lever Pulley Gasket Rivet'.split(' ');
function* typing() {
  let cell = 0;
  for (;;) {
    for (const w of TEXT) {
      for (let k = 1; k <= w.length; k++) yield { row: cell % 12, col: Math.floor(cell / 12) % 6, text: w.slice(0, k) };
      cell++;
    }
  }
}

type Room = ConnectedRoom<typeof spreadsheet>;

/** Client A types: one setCell every `everyMs` on a fixed schedule, for `ms`; then waits for Visible. */
async function typeFor(a: Room, gen: Generator<{ row: number; col: number; text: string }>, ms: number, everyMs: number) {
  const hs: OpHandle[] = [];
  let args = 0;
  const t0 = performance.now();
  const total = Math.round(ms / everyMs);
  await new Promise<void>((done) => {
    const tick = () => {
      const due = Math.min(total, Math.floor((performance.now() - t0) / everyMs) + 1);
      while (hs.length < due) {
        const x = gen.next().value!;
        args += argBytes(x);
        hs.push(a.ops.setCell(x));
      }
      if (hs.length >= total) return done();
      setTimeout(tick, Math.max(0, t0 + hs.length * everyMs - performance.now()));
    };
    tick();
  });
  await Promise.all(hs.map((h) => h.visible));
  return { hs, args };
}

export async function run(): Promise<{ section: Section; live: LiveBytes }> {
  const server = await startServer({ simulateRttMs: RTT, hopProbe: true });
  const dir = tempDir('latency');
  const ca = newCount(),
    cb = newCount();
  let a: Room | undefined, b: Room | undefined;
  try {
    a = await connect({
      url: server.url,
      room: 'sheet',
      machine: spreadsheet,
      clientId: 'alice',
      storage: sqliteStorage(join(dir, 'a.sqlite')),
      WebSocket: countingWebSocket(ca),
    });
    b = await connect({
      url: server.url,
      room: 'sheet',
      machine: spreadsheet,
      clientId: 'bob',
      storage: sqliteStorage(join(dir, 'b.sqlite')),
      WebSocket: countingWebSocket(cb),
    });
    await until(() => a!.members().length === 2 && b!.members().length === 2, 10_000, 'both clients in the visibility set');
    const gen = typing();
    await typeFor(a, gen, 2000, 100); // warm-up
    await sleep(4 * RTT); // let trailing acks and stable frames of the warm-up pass
    const m0 = await server.metrics();
    await server.stats(true); // reset the hop probe
    const a0 = { ...ca },
      b0 = { ...cb };
    const { hs, args } = await typeFor(a, gen, 20_000, 100);
    await sleep(4 * RTT);
    const m1 = await server.metrics();
    const { hops } = await server.stats(true);
    const a1 = { ...ca },
      b1 = { ...cb };

    const dur = stats(hs.map((h) => h.times.durable! - h.times.submitted!));
    const auth = stats(hs.map((h) => h.times.authoritative! - h.times.submitted!));
    const vis = stats(hs.map((h) => h.times.visible! - h.times.submitted!));
    const authMinusDur = stats(hs.map((h) => h.times.authoritative! - h.times.durable!));
    const hop = stats(hops);
    const srvAuth = (delta(m0, m1, 'hercules_authoritative_delay_seconds_sum') / delta(m0, m1, 'hercules_authoritative_delay_seconds_count')) * 1000;
    const srvVis = (delta(m0, m1, 'hercules_visible_delay_seconds_sum') / delta(m0, m1, 'hercules_visible_delay_seconds_count')) * 1000;
    const commitMs = (delta(m0, m1, 'hercules_commit_seconds_sum') / delta(m0, m1, 'hercules_commit_seconds_count')) * 1000;
    const effRtt = 2 * hop.median;

    const row = (what: string, x: ReturnType<typeof stats>, ideal: number | undefined, extra: Row = {}): Row => ({
      what,
      'median ms': round(x.median, 2),
      'p99 ms': round(x.p99, 2),
      'max ms': round(x.max, 2),
      ...(ideal ? { 'median ÷ ideal': round(x.median / ideal, 3), 'p99 ÷ ideal': round(x.p99 / ideal, 3) } : {}),
      ...extra,
    });
    const rows: Row[] = [
      row('authoritative - submitted', auth, RTT, { ideal: 'RTT = 67 ms', 'median - 2 probe hops ms': round(auth.median - 2 * hop.median, 2) }),
      row('visible - submitted', vis, 2 * RTT, { ideal: '2·RTT = 134 ms', 'median - 4 probe hops ms': round(vis.median - 4 * hop.median, 2) }),
      row('durable - submitted (part of both)', dur, undefined),
      row('authoritative - durable', authMinusDur, RTT),
      row('probe: setTimeout(33.5 ms) in the server, actual', hop, RTT / 2, { ideal: 'RTT/2 = 33.5 ms' }),
    ];
    const ops = delta(m0, m1, 'hercules_ops_sequenced_total');
    const live: LiveBytes = {
      label: `R2 run: 2 clients, 1 typing 10 ops/s, ${hs.length} ops`,
      ops,
      argBytes: args,
      argCopies: 2,
      server: {
        bytesIn: delta(m0, m1, 'hercules_bytes_received_total'),
        bytesOut: delta(m0, m1, 'hercules_bytes_sent_total'),
        framesIn: delta(m0, m1, 'hercules_frames_received_total'),
        framesOut: delta(m0, m1, 'hercules_frames_sent_total'),
      },
      clients: Object.fromEntries(
        Object.keys(ca).map((k) => [k, sub(a0, a1)[k as keyof WireCount] + sub(b0, b1)[k as keyof WireCount]]),
      ) as unknown as WireCount,
      notes: [
        `client A sent ${sub(a0, a1).txFrames} frames and received ${sub(a0, a1).rxFrames}; client B sent ${sub(b0, b1).txFrames} and received ${sub(b0, b1).rxFrames}`,
      ],
    };
    if (ops !== hs.length) live.notes.push(`server sequenced ${ops} ops in the window, the client submitted ${hs.length}`);
    return {
      live,
      section: {
        id: 'latency',
        title: `R2. Authoritative and Visible delays at an emulated ${RTT} ms round trip (2 clients, 10 ops/s, ${hs.length} ops)`,
        command: 'npm run bench:runtime -- --only latency',
        params: {
          simulateRttMs: RTT,
          clients: 2,
          rate: '1 setCell / 100 ms from client A',
          seconds: 20,
          warmup: '2 s',
          clientStorage: 'sqliteStorage per client',
          server: 'own process',
        },
        rows,
        goals: [
          {
            what: 'Authoritative delay, median',
            goal: `≤ RTT + 1 ms = ${RTT + 1} ms`,
            measured: `${round(auth.median, 2)} ms (${round(auth.median / RTT, 3)} × RTT); p99 ${round(auth.p99, 2)} ms`,
            met: auth.median <= RTT + 1,
          },
          {
            what: 'Visible delay, median',
            goal: `≤ 2·RTT + 2 ms = ${2 * RTT + 2} ms`,
            measured: `${round(vis.median, 2)} ms (${round(vis.median / (2 * RTT), 3)} × 2·RTT); p99 ${round(vis.p99, 2)} ms`,
            met: vis.median <= 2 * RTT + 2,
          },
        ],
        notes: [
          `the emulated one-way delay really took ${round(hop.median, 2)} ms (median of ${hop.n} probe timers; p99 ${round(hop.p99, 2)} ms), so the emulated round trip is ${round(effRtt, 2)} ms rather than ${RTT}: Node timers count on libuv's millisecond loop clock, so a 33.5 ms timer lasts anywhere from about 32.5 to 34.5 ms`,
          `server side (from /metrics, means): frame received -> Notify-Auth sent ${round(srvAuth, 2)} ms; op ordered -> Notify-Visible sent ${round(srvVis, 2)} ms (includes B's two hops); group commit ${round(commitMs, 3)} ms`,
        ],
        extra: {
          simulateRttMs: RTT,
          hopMedianMs: round(hop.median, 3),
          effectiveRttMs: round(effRtt, 3),
          serverAuthMeanMs: round(srvAuth, 3),
          serverVisibleMeanMs: round(srvVis, 3),
          commitMeanMs: round(commitMs, 3),
          samples: hs.length,
        },
      } as Section & { extra: unknown },
    };
  } finally {
    await a?.close();
    await b?.close();
    await server.close();
    removeTemp(dir);
  }
}
