/**
 * Flooding connections, in their own process: each joins a room with raw frames and floods it.
 * Shapes:
 * - `small`: frames of 10,000 chat ops of ~80 bytes (~0.9 MB, the harness's frame), kept two
 *   frames ahead of the server's verdicts, so the server always has input waiting and runs at its
 *   rate limits: the worst a client inside the limits can do;
 * - `large`: 4 ops of 240 KB a frame (~1 MB; the schema checks `text` only, so the padding is
 *   stored and fanned out: big arguments);
 * - `amplify`: issue 40's decode amplification: one `say` op whose arguments are 1,000,000 empty
 *   maps (a frame just under 1 MiB that decodes to ~60 MB), as fast as the socket takes them;
 * - `amplify-small`: the same with 65,000 empty maps (a frame under 64 KiB, ~4 MB decoded);
 * - `presence`: issue 40's presence flood: 4,000-character presence values as fast as the socket
 *   takes them (reading what the server sends);
 * - `presence-deaf`: the same from a connection that never reads, with 5,000-character (oversize)
 *   values.
 * Every shape but `small` and `large` reconnects (a new client id) when the server closes it.
 */
import { WebSocket } from 'ws';
import { ClientCodec, PROTOCOL_VERSION } from '@hercules/core';

const [url, nStr, shape, prefix, sameRoom] = process.argv.slice(2);
const n = Number(nStr);
let sent = 0,
  verdicts = 0,
  closes = 0,
  opened = 0;
const closeCodes: Record<number, number> = {};
const PER = shape === 'large' ? 4 : 10_000;
const reconnects = shape !== 'small' && shape !== 'large';

function frameOps(seq0: number): { seq: number; name: string; args: { text: string } }[] {
  if (shape === 'large')
    return Array.from({ length: PER }, (_, i) => ({ seq: seq0 + i, name: 'say', args: { text: `big ${seq0 + i}`, pad: 'y'.repeat(240_000) } }));
  return Array.from({ length: PER }, (_, i) => ({
    seq: seq0 + i,
    name: 'say',
    args: { text: `flood message number ${seq0 + i} with some words in it to look like chat` },
  }));
}

/** An ops frame ([1, seq, 'say', args]) whose args are `maps` empty maps (a byte each on the wire), its seq written in place per frame. */
function amplifyingFrame(maps: number): (seq: number) => Uint8Array {
  // array 32 of `maps` fixmaps of 0 entries (0x80): msgpackr would write each as a 3-byte map 16
  const args = new Uint8Array(5 + maps).fill(0x80);
  args.set([0xdd, maps >>> 24, (maps >>> 16) & 255, (maps >>> 8) & 255, maps & 255]);
  const frame = new Uint8Array(11 + args.length);
  frame.set([0x94, 0x01, 0xce, 0, 0, 0, 0, 0xa3, 0x73, 0x61, 0x79]); // [1, uint32 seq, 'say', ...
  frame.set(args, 11);
  return (seq) => {
    new DataView(frame.buffer).setUint32(3, seq);
    return frame;
  };
}
const amplifying = shape === 'amplify' || shape === 'amplify-small' ? amplifyingFrame(shape === 'amplify' ? 1_000_000 : 65_000) : undefined;
const presenceFrame = (codec: ClientCodec, i: number) =>
  codec.encode({ t: 'presence', value: `${i} ${'p'.repeat(shape === 'presence-deaf' ? 5000 : 4000)}`.slice(0, shape === 'presence-deaf' ? 5000 : 4000) });

function flood(k: number, generation: number): void {
  const codec = new ClientCodec();
  const ws = new WebSocket(`${url}/?room=${prefix}-${sameRoom === 'same' ? 0 : k}`);
  let seq = 0,
    mine = 0,
    stopped = false;
  ws.on('error', () => {});
  ws.on('close', (code) => {
    stopped = true;
    closes++;
    closeCodes[code] = (closeCodes[code] ?? 0) + 1;
    if (reconnects) setTimeout(() => flood(k, generation + 1), 50);
  });
  ws.on('message', (d: Buffer) => {
    if (shape === 'presence-deaf') return;
    const m = codec.decode(new Uint8Array(d));
    // Acknowledge like a real member, so the room's stable frontier moves and its suffix is compacted.
    if (m.t === 'welcome' || m.t === 'log') {
      if (m.t === 'log')
        for (const e of m.entries)
          if (e.k === 'own') {
            verdicts++;
            mine++;
          }
      const head = m.from + m.entries.length - 1;
      if (head > 0) ws.send(codec.encode({ t: 'ack', pos: head }));
    }
  });
  if (shape === 'presence-deaf') ws.on('open', () => (ws as unknown as { _socket: { pause(): void } })._socket.pause());
  ws.on('open', () => {
    // Every connection open: the flood starts now (the bench times its phase from here).
    if (++opened === n) process.send!({ t: 'ready' });
    ws.send(codec.encode({ t: 'hello', v: PROTOCOL_VERSION, client: `flooder-${prefix}-${k}-${generation}`, machine: { name: 'chat', version: 1 }, have: 0 }));
    const pump = () => {
      if (stopped || ws.readyState !== ws.OPEN) return;
      if (reconnects) {
        // As fast as the socket takes them: keep about 1 MiB in the kernel's and ws's buffers.
        while (ws.bufferedAmount < 1 << 20) {
          sent++;
          ws.send(amplifying ? amplifying(++seq) : presenceFrame(codec, sent));
        }
        setTimeout(pump, 1);
        return;
      }
      // Two frames ahead of the server's verdicts: it always has work, and this process does not
      // burn the CPU the server needs encoding frames the kernel would only buffer.
      while (seq - mine < 2 * PER) {
        const ops = frameOps(seq + 1);
        seq += ops.length;
        sent += ops.length;
        ws.send(codec.encode({ t: 'ops', ops }));
      }
      setTimeout(pump, 5);
    };
    pump();
  });
}
for (let k = 0; k < n; k++) flood(k, 0);
// The counts, on the bench's asking (as the flood phase ends: its last figures, not half a second old).
process.on('message', (m: { t?: string }) => {
  if (m.t === 'report') process.send!({ t: 'counts', sent, verdicts, closes, closeCodes });
});
