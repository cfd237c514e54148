/**
 * Connections that never finish their upgrade (issue 40, item 4): how long the server keeps
 * them and how many file descriptors it holds meanwhile.
 *
 *   node -C @hercules/source --import tsx bench/src/flood/slowloris.ts [--idle 500] [--half 200] [--limits '{"upgradeTimeoutMs":10000}']
 *
 * A server process (server-proc.ts: createServer on a temp data directory, default limits unless
 * --limits), then from this process `--idle` TCP connections that send nothing and `--half`
 * that send half of an upgrade request's headers, all opened at once; while they are open, an
 * honest client connects and submits an op. Reports when each kind was closed (seconds after
 * it was opened: min, median, max; or how many were still open when the wait ran out), the
 * server's open file descriptors (/proc/PID/fd) before, at the peak and after, its
 * hercules_connections_refused_total by reason, and the honest client's time to Authoritative.
 */
import { fork } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect, memoryStorage } from '@hercules/client';
import { chat } from '../../../apps/machines.ts';
import { quantile } from '../harness.ts';
import { sleep } from '../runtime/common.ts';

const { values } = parseArgs({ options: { idle: { type: 'string' }, half: { type: 'string' }, limits: { type: 'string' }, 'wait-s': { type: 'string' } } });
const IDLE = Number(values.idle ?? 500),
  HALF = Number(values.half ?? 200),
  WAIT_S = Number(values['wait-s'] ?? 60);
const here = new URL('.', import.meta.url).pathname;
const dataDir = mkdtempSync(join(tmpdir(), 'hercules-slowloris-'));
const server = fork(join(here, 'server-proc.ts'), [dataDir, values.limits ?? '{}'], { execArgv: ['-C', '@hercules/source', '--import', 'tsx'] });
const url = await new Promise<string>((r) => server.once('message', (m: { url: string }) => r(m.url)));
const port = Number(new URL(url.replace('ws:', 'http:')).port);
const fds = () => readdirSync(`/proc/${server.pid}/fd`).length;

/** Open one connection that sends `bytes` and never more; `closedAfter` becomes the seconds until the server closed it. */
function hold(bytes: string): { closedAfter?: number; destroy(): void } {
  const t0 = performance.now();
  const s = netConnect(port, '127.0.0.1', () => bytes && s.write(bytes));
  const h: { closedAfter?: number; destroy(): void } = { destroy: () => s.destroy() };
  s.on('error', () => {});
  s.resume(); // read what the server sends, so its end is seen
  s.once('close', () => {
    h.closedAfter = (performance.now() - t0) / 1000;
  });
  return h;
}

const fdsBefore = fds();
const idle = Array.from({ length: IDLE }, () => hold(''));
const half = Array.from({ length: HALF }, () => hold('GET /?room=r HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'));
let peak = fdsBefore;
const sampler = setInterval(() => {
  peak = Math.max(peak, fds());
}, 100);

// An honest client while they are open.
await sleep(1000);
const t = performance.now();
const c = await connect({ url, room: 'honest', machine: chat, storage: memoryStorage(), onError: () => {} });
await c.ops.say({ text: 'hello' }).authoritative;
const honestMs = performance.now() - t;
await c.close();

// Until every one is closed, or WAIT_S.
const deadline = performance.now() + WAIT_S * 1000;
while ([...idle, ...half].some((h) => h.closedAfter === undefined) && performance.now() < deadline) await sleep(100);
/** Close times of one kind, or how many were still open after WAIT_S. */
function closes(kind: string, conns: ReturnType<typeof hold>[]): string {
  const times = conns.flatMap((h) => (h.closedAfter === undefined ? [] : [h.closedAfter])).sort((a, b) => a - b);
  const open = conns.length - times.length;
  const closed = times.length
    ? `closed after ${times[0].toFixed(2)} / ${quantile(times, 0.5).toFixed(2)} / ${times[times.length - 1].toFixed(2)} s (min / median / max)`
    : 'none closed';
  return `${kind}: ${conns.length} opened, ${closed}${open ? `, ${open} still open after ${WAIT_S} s` : ''}`;
}
const fdsOpen = fds();
const [idleLine, halfLine] = [closes('sending nothing', idle), closes('half the headers', half)];
for (const h of [...idle, ...half]) h.destroy();
await sleep(500);
const fdsAfter = fds();
clearInterval(sampler);
const metrics = await (await fetch(`${url.replace('ws:', 'http:')}/metrics`)).text();
const refused = [...metrics.matchAll(/^hercules_connections_refused_total\{reason="([^"]+)"\} (\S+)$/gm)].map((m) => `${m[1]} ${m[2]}`);
console.log(idleLine);
console.log(halfLine);
console.log(
  `server file descriptors: ${fdsBefore} before, ${peak} at the peak, ${fdsOpen} at the end of the wait, ${fdsAfter} once this process let go of its sockets`,
);
console.log(`hercules_connections_refused_total: ${refused.join(', ') || 'none'}`);
console.log(`honest client, connect and first op Authoritative while they were open: ${honestMs.toFixed(0)} ms`);
server.send({ t: 'close' });
await new Promise((r) => server.once('exit', r));
rmSync(dataDir, { recursive: true, force: true });
