/**
 * The soak's flood: N raw connections, each in its own chat room, sending frames of 10,000
 * small `say` ops (~0.9 MB, the frame of the independent harness that once took the server to
 * 2.5 GB) and keeping two frames ahead of the server's verdicts, so the server always has their
 * input waiting and they run at its rate limits: the worst a client inside the limits can do.
 * Chat's `say` copies nothing but grows the room, so each op costs a little more than the last.
 *
 * Through the soak's proxy, so cut links and server kills hit it too: it reconnects with a new
 * client id each time (it keeps no store, so its old sequence numbers are not its to reuse).
 * Reports on stdout every 500 ms: {t:'flood', sent, verdicts, refused, connects, errors}.
 * Stops sending on 'stop' on stdin and exits after its last report.
 */
import { WebSocket } from 'ws';
import { ClientCodec, PROTOCOL_VERSION } from '@hercules/core';

const [url, nStr, prefix] = process.argv.slice(2);
const n = Number(nStr);
const PER = 10_000;
const stats = { t: 'flood', sent: 0, verdicts: 0, refused: 0, connects: 0, errors: {} as Record<string, number>, closes: {} as Record<string, number> };
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

const report = () => process.stdout.write(JSON.stringify(stats) + '\n');
for (let k = 0; k < n; k++) flood(k, 0);
const reporter = setInterval(report, 500);
process.stdin.on('data', (d) => {
  if (!String(d).includes('stop')) return;
  stopping = true;
  clearInterval(reporter);
  report();
  process.exit(0);
});
