/**
 * What corking a connection's frames per turn saves the server (ws-connection.ts): C WebSocket
 * connections from another process; each turn (a setImmediate) sends every connection F frames
 * of B bytes, as a busy room's host sends a member its log, committed, visible and stable frames;
 * T turns. Timed: the server process's CPU (user + system, process.cpuUsage) per frame, with and
 * without the socket handed to wsConnection, alternated over R rounds (CPU time, not wall time,
 * so other load on the machine moves it less).
 *
 *   node -C @hercules/source --import tsx bench/src/runtime/socket-cork.bench.ts [--conns 200] [--frames 3] [--bytes 120] [--turns 500] [--rounds 5]
 */
import { fork } from 'node:child_process';
import { createServer, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { WebSocket, WebSocketServer } from 'ws';
import { wsConnection, type WsSocket } from '../../../packages/server/src/ws-connection.ts';
import type { Connection } from '../../../packages/server/src/connection.ts';

if (process.argv[2] === 'child') {
  const [port, conns] = process.argv.slice(3).map(Number);
  let received = 0;
  for (let i = 0; i < conns; i++) new WebSocket(`ws://127.0.0.1:${port}`, { perMessageDeflate: false }).on('message', () => received++);
  process.on('message', () => process.send!(received));
} else {
  const { values } = parseArgs({
    options: {
      conns: { type: 'string', default: '200' },
      frames: { type: 'string', default: '3' },
      bytes: { type: 'string', default: '120' },
      turns: { type: 'string', default: '500' },
      rounds: { type: 'string', default: '5' },
    },
  });
  const [C, F, B, T, R] = [values.conns, values.frames, values.bytes, values.turns, values.rounds].map(Number);
  const http = createServer();
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  const accepted: { ws: WsSocket; socket: Socket }[] = [];
  http.on('upgrade', (req: IncomingMessage, socket, head) =>
    wss.handleUpgrade(req, socket, head, (ws) => {
      (req.socket as Socket).setNoDelay(true);
      accepted.push({ ws: ws as unknown as WsSocket, socket: req.socket });
    }),
  );
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  const child = fork(fileURLToPath(import.meta.url), ['child', String((http.address() as { port: number }).port), String(C)]);
  while (accepted.length < C) await new Promise((r) => setTimeout(r, 20));
  const corked = accepted.map((a) => wsConnection(a.ws, 'bench', a.socket));
  const plain = accepted.map((a) => wsConnection(a.ws, 'bench'));
  const payload = new Uint8Array(B).fill(7);
  const received = () =>
    new Promise<number>((r) => {
      child.once('message', (n) => r(n as number));
      child.send('n');
    });

  /** CPU µs per frame of T turns over `conns`, after the child has them all. */
  async function run(conns: Connection[]): Promise<number> {
    const before = await received();
    const cpu = process.cpuUsage();
    for (let t = 0; t < T; t++) {
      for (const c of conns) for (let f = 0; f < F; f++) c.send(payload);
      await new Promise((r) => setImmediate(r));
    }
    const used = process.cpuUsage(cpu);
    while ((await received()) < before + T * C * F) await new Promise((r) => setTimeout(r, 20));
    return (used.user + used.system) / (T * C * F);
  }

  const rows = [];
  for (let r = 0; r < R; r++) {
    const order = r % 2 === 0 ? (['plain', 'corked'] as const) : (['corked', 'plain'] as const);
    const us: Record<string, number> = {};
    for (const k of order) us[k] = await run(k === 'corked' ? corked : plain);
    rows.push({
      round: r,
      'plain µs/frame': us.plain.toFixed(2),
      'corked µs/frame': us.corked.toFixed(2),
      'corked/plain': (us.corked / us.plain).toFixed(3),
      load: loadavg()[0].toFixed(1),
    });
  }
  console.table(rows);
  console.log(`${C} connections, ${F} frames of ${B} B per connection per turn, ${T} turns per run`);
  child.kill();
  wss.close();
  http.close();
  process.exit(0);
}
