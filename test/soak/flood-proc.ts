/**
 * The soak's flood: N raw connections, each in its own chat room, sending frames of 10,000
 * small `say` ops (~0.9 MB, the frame of the independent harness that once took the server to
 * 2.5 GB) and keeping two frames ahead of the server's verdicts, so the server always has their
 * input waiting and they run at its rate limits: the worst a client inside the limits can do.
 * Chat's `say` copies nothing but grows the room, so each op costs a little more than the last.
 *
 * Beside them (issue 40), `amplifiers` connections send decode-amplifying ops frames as fast as
 * their sockets take them: one op whose arguments are empty maps, a byte each on the wire, in
 * turn 1,000,000 (a frame under 1 MiB over the server's decoded-size bound: refused, close
 * 1009, and they come back) and 65,000 (65 KB under the bound, ~4.7 MB decoded: charged to
 * their byte budget by that); and `presence` connections, all in one room, send 4,000-character
 * presence values as fast as their sockets take them, every other one never reading.
 *
 * Through the soak's proxy, so cut links and server kills hit it too: it reconnects with a new
 * client id each time (it keeps no store, so its old sequence numbers are not its to reuse).
 * Reports on stdout every 500 ms: {t:'flood', sent, verdicts, refused, connects, errors,
 * amplified, presence, closes}.
 * Stops sending on 'stop' on stdin and exits after its last report.
 */
import { WebSocket } from 'ws';
import { ClientCodec, PROTOCOL_VERSION } from '@hercules/core';

const [url, nStr, prefix, amplifiersStr = '0', presenceStr = '0'] = process.argv.slice(2);
const n = Number(nStr),
  amplifiers = Number(amplifiersStr),
  presenceFlooders = Number(presenceStr);
const PER = 10_000;
const stats = {
  t: 'flood',
  sent: 0,
  verdicts: 0,
  refused: 0,
  connects: 0,
  amplified: 0,
  presence: 0,
  errors: {} as Record<string, number>,
  closes: {} as Record<string, number>,
};
let stopping = false;
process.stdout.on('error', () => process.exit(0));

function frameOps(seq0: number): { seq: number; name: string; args: { text: string } }[] {
  return Array.from({ length: PER }, (_, i) => ({
    seq: seq0 + i,
    name: 'say',
    args: { text: `flood message number ${seq0 + i} with some words in it to look like chat` },
  }));
}

function flood(k: number, generation: number): void {
  if (stopping) return;
  const codec = new ClientCodec();
  const ws = new WebSocket(`${url}/?room=${prefix}-${k}`);
  let seq = 0,
    mine = 0,
    open = false;
  stats.connects++;
  ws.on('error', () => {});
  ws.on('close', (code) => {
    open = false;
    stats.closes[code] = (stats.closes[code] ?? 0) + 1;
    // Back after a pause, as a new client: the server or the link is back soon.
    setTimeout(() => flood(k, generation + 1), 500);
  });
  ws.on('message', (d: Buffer) => {
    const m = codec.decode(new Uint8Array(d));
    if (m.t === 'error') stats.errors[m.code] = (stats.errors[m.code] ?? 0) + 1;
    // Acknowledge like a real member, so the room's stable frontier moves and its suffix is compacted.
    if (m.t === 'welcome' || m.t === 'log') {
      if (m.t === 'log')
        for (const e of m.entries)
          if (e.k === 'own') {
            stats.verdicts++;
            mine++;
            if (e.refused || e.error !== undefined) stats.refused++;
          }
      const head = m.from + m.entries.length - 1;
      if (head > 0) ws.send(codec.encode({ t: 'ack', pos: head }));
    }
  });
  ws.on('open', () => {
    open = true;
    ws.send(codec.encode({ t: 'hello', v: PROTOCOL_VERSION, client: `flooder-${prefix}-${k}-${generation}`, machine: { name: 'chat', version: 1 }, have: 0 }));
    const pump = () => {
      if (!open || stopping) return;
      // Two frames ahead of the verdicts: the server always has work, and this process does not
      // burn the CPU the server needs encoding frames the kernel would only buffer.
      while (seq - mine < 2 * PER) {
        const ops = frameOps(seq + 1);
        seq += ops.length;
        stats.sent += ops.length;
        ws.send(codec.encode({ t: 'ops', ops }));
      }
      setTimeout(pump, 5);
    };
    pump();
  });
}

/** An ops frame [1, seq, 'say', args] whose args are `maps` empty maps, a byte each. */
function amplifyingFrame(seq: number, maps: number): Uint8Array {
  const f = new Uint8Array(11 + 5 + maps).fill(0x80);
  f.set([0x94, 0x01, 0xce, 0, 0, 0, 0, 0xa3, 0x73, 0x61, 0x79, 0xdd]);
  const v = new DataView(f.buffer);
  v.setUint32(3, seq);
  v.setUint32(12, maps);
  return f;
}
const OVER_BOUND = amplifyingFrame(1, 1_000_000);

/** A raw connection that floods as fast as its socket takes frames (under 1 MiB unsent), and comes back when closed. */
function blast(room: string, client: string, frame: (i: number) => Uint8Array, deaf: boolean, count: () => void): void {
  if (stopping) return;
  const codec = new ClientCodec();
  const ws = new WebSocket(`${url}/?room=${room}`);
  stats.connects++;
  let open = false,
    i = 0;
  ws.on('error', () => {});
  ws.on('close', (code) => {
    open = false;
    stats.closes[code] = (stats.closes[code] ?? 0) + 1;
    setTimeout(() => blast(room, `${client}x`, frame, deaf, count), 500);
  });
  ws.on('message', (d: Buffer) => {
    const m = codec.decode(new Uint8Array(d));
    if (m.t === 'error') stats.errors[m.code] = (stats.errors[m.code] ?? 0) + 1;
  });
  ws.on('open', () => {
    open = true;
    if (deaf) (ws as unknown as { _socket: { pause(): void } })._socket.pause();
    ws.send(codec.encode({ t: 'hello', v: PROTOCOL_VERSION, client, machine: { name: room.endsWith('-presence') ? 'soak' : 'chat', version: 1 }, have: 0 }));
    const pump = () => {
      if (!open || stopping) return;
      while (ws.bufferedAmount < 1 << 20) {
        ws.send(frame(++i));
        count();
      }
      setTimeout(pump, 5);
    };
    pump();
  });
}

const report = () => process.stdout.write(JSON.stringify(stats) + '\n');
for (let k = 0; k < n; k++) flood(k, 0);
for (let k = 0; k < amplifiers; k++)
  blast(
    `${prefix}-amp-${k}`,
    `amplifier-${prefix}-${k}`,
    (i) => (i % 2 ? OVER_BOUND : amplifyingFrame(i, 65_000)),
    false,
    () => stats.amplified++,
  );
for (let k = 0; k < presenceFlooders; k++) {
  const presence = new ClientCodec();
  blast(
    `${prefix}-presence`,
    `presence-${prefix}-${k}`,
    (i) => presence.encode({ t: 'presence', value: `${i} ${'p'.repeat(4000)}`.slice(0, 4000) }),
    k % 2 === 1,
    () => stats.presence++,
  );
}
const reporter = setInterval(report, 500);
process.stdin.on('data', (d) => {
  if (!String(d).includes('stop')) return;
  stopping = true;
  clearInterval(reporter);
  report();
  process.exit(0);
});
