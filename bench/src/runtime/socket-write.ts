/**
 * What one send costs the server when the process it wakes was idle (issue 14: the server's
 * tentative send and Notify-Auth are each one such send). Every 100 ms, in turn: a plain
 * `socket.write` of 124 bytes to another process, the same as two corked writes (a 4-byte header
 * and the payload, as `ws` writes a server frame), and `ws.send` of the 120-byte payload on a
 * server-side WebSocket; each timed around the call, and once more right after (the same write,
 * hot). Prints the medians and p90s.
 *
 *   node --import tsx bench/src/runtime/socket-write.ts [--n 300]
 */
import { fork } from 'node:child_process';
import { connect, createServer, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { WebSocket, WebSocketServer } from 'ws';
import { sleep } from './common.ts';

if (process.argv[2] === 'child') {
  // The other process: a TCP sink, and a WebSocket client of the parent's server.
  const sink = createServer((c) => c.on('data', () => {})).listen(0, '127.0.0.1', () => process.send!((sink.address() as { port: number }).port));
  process.on('message', (wsPort: number) => {
    const ws = new WebSocket(`ws://127.0.0.1:${wsPort}`, { perMessageDeflate: false });
    ws.on('message', () => {});
  });
} else {
  const { values } = parseArgs({ options: { n: { type: 'string', default: '300' } } });
  const N = Number(values.n);
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
  await new Promise((r) => wss.once('listening', r));
  const child = fork(fileURLToPath(import.meta.url), ['child'], { execArgv: ['--import', 'tsx'] });
  const sinkPort = await new Promise<number>((r) => child.once('message', (p) => r(p as number)));
  const opened = new Promise<WebSocket>((r) => wss.once('connection', r));
  child.send((wss.address() as { port: number }).port);
  const ws = await opened;
  (ws as unknown as { _socket: Socket })._socket.setNoDelay(true);
  const sock = connect({ port: sinkPort, host: '127.0.0.1', noDelay: true });
  await new Promise((r) => sock.once('connect', r));
  const header = Buffer.alloc(4, 2),
    payload = Buffer.alloc(120, 1),
    frame = Buffer.concat([header, payload]);
  const kinds = {
    'socket.write': () => sock.write(frame),
    'corked header + payload': () => {
      sock.cork();
      sock.write(header);
      sock.write(payload);
      sock.uncork();
    },
    'ws.send': () => ws.send(payload, { binary: true }),
  };
  const idle: Record<string, number[]> = {},
    hot: Record<string, number[]> = {};
  const names = Object.keys(kinds) as (keyof typeof kinds)[];
  for (let i = 0; i < N; i++) {
    const k = names[i % names.length];
    await sleep(100);
    let t = performance.now();
    kinds[k]();
    (idle[k] ??= []).push(performance.now() - t);
    t = performance.now();
    kinds[k]();
    (hot[k] ??= []).push(performance.now() - t);
  }
  const q = (xs: number[], p: number) => +[...xs].sort((a, b) => a - b)[Math.floor(p * xs.length)].toFixed(3);
  console.log(`${N} sends in turn, one every 100 ms, to another process on loopback`);
  console.table(
    Object.fromEntries(
      names.map((k) => [k, { 'after 100 ms idle, p50 ms': q(idle[k], 0.5), p90: q(idle[k], 0.9), 'right after another, p50 ms': q(hot[k], 0.5) }]),
    ),
  );
  sock.destroy();
  ws.terminate();
  wss.close();
  child.kill();
}
