/**
 * Flooding connections, in their own process: each joins a room with raw frames and keeps two ops
 * frames ahead of the server's verdicts, so the server always has its input waiting and runs
 * at its rate limits: the worst a client inside the limits can do. `small`: 10,000 chat ops of ~80 bytes a frame (~0.9 MB, the harness's
 * frame); `large`: 4 ops of 240 KB a frame (~1 MB; the schema checks `text` only, so the
 * padding is stored and fanned out: big arguments).
 */
import { WebSocket } from 'ws';
import { ClientCodec, PROTOCOL_VERSION } from '@hercules/core';

const [url, nStr, shape, prefix, sameRoom] = process.argv.slice(2);
const n = Number(nStr);
let sent = 0,
  verdicts = 0,
  closes = 0;
const PER = shape === 'large' ? 4 : 10_000;

function frameOps(seq0: number): { seq: number; name: string; args: { text: string } }[] {
  if (shape === 'large')
    return Array.from({ length: PER }, (_, i) => ({ seq: seq0 + i, name: 'say', args: { text: `big ${seq0 + i}`, pad: 'y'.repeat(240_000) } }));
  return Array.from({ length: PER }, (_, i) => ({
    seq: seq0 + i,
    name: 'say',
    args: { text: `flood message number ${seq0 + i} with some words in it to look like chat` },
  }));
}

function flood(k: number): void {
  const codec = new ClientCodec();
  const ws = new WebSocket(`${url}/?room=${prefix}-${sameRoom === 'same' ? 0 : k}`);
  let seq = 0,
    mine = 0,
    stopped = false;
  ws.on('error', () => {});
  ws.on('close', () => {
    stopped = true;
    closes++;
  });
  ws.on('message', (d: Buffer) => {
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
  ws.on('open', () => {
    ws.send(codec.encode({ t: 'hello', v: PROTOCOL_VERSION, client: `flooder-${prefix}-${k}`, machine: { name: 'chat', version: 1 }, have: 0 }));
    const pump = () => {
      if (stopped || ws.readyState !== ws.OPEN) return;
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
for (let k = 0; k < n; k++) flood(k);
setInterval(() => process.send!({ sent, verdicts, closes }), 500);
