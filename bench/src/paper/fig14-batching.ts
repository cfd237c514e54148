/**
 * Paper Figure 14, batching under load: the byte-array app (100,000 bytes), each client
 * submitting `ops` increments of 500 bytes at random offsets with 20 ms between submits; 1 to
 * 32 clients in one room through the delay proxy (RTT 67 ms). Measured: time from the first
 * submit until every op is in every client's Visible view, with rebase batching off, at a fixed
 * 16 ms interval, and auto.
 *
 *   node --import tsx bench/src/paper/fig14-batching.ts [--ops 50] [--clients 1,2,4,8,16,32] [--modes off,interval,auto]
 *   (the paper used 1,000 ops per client: --ops 1000; 50 keeps the whole suite near 10 minutes)
 *
 * All clients run in this one process (2 CPUs here), so every client's rebase work competes
 * for the same cores: the per-client CPU a dedicated device would need is reported beside the
 * wall time, and the paper's "stay flat" goal is judged on both.
 *
 * `--procs P` (P > 1) runs the clients in P processes instead (round robin; fig14-clients-process.ts),
 * closer to the paper's clients on machines of their own: in one process 32 clients share one
 * thread and one heap, whose collector then works on 32 clients' states (37-42 % of that
 * process's samples at 32 clients). The machine's cores are still shared. CPU is then the sum
 * of the client processes'. The one-process run stays the default and is not changed.
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { connect, type ConnectedRoom } from '@hercules/client';
import type { Batching } from '@hercules/core';
import { Rng } from '@hercules/test-utils';
import { byteArray } from '../../../apps/machines.ts';
import { fileURLToPath } from 'node:url';
import { cpuSeconds, spawnChild, startServer, sleep, type Child } from '../runtime/common.ts';
import { startDelayProxyProcess } from './delay-proxy.ts';
import { writePaperSection, svgLineChart } from './report.ts';

const { values } = parseArgs({
  options: {
    ops: { type: 'string', default: '50' },
    clients: { type: 'string', default: '1,2,4,8,16,32' },
    modes: { type: 'string', default: 'off,interval,auto' },
    rtt: { type: 'string', default: '67' },
    store: { type: 'string', default: 'sqlite' },
    // A directory for the server's CPU profile (run this script with --cpu-prof for the clients').
    'server-prof': { type: 'string' },
    procs: { type: 'string', default: '1' },
  },
});
const OPS = Number(values.ops),
  RTT = Number(values.rtt);
const clientCounts = values.clients.split(',').map(Number);
const modes: Record<string, Batching> = { off: 'off', interval: { intervalMs: 16 }, auto: { auto: true } };
const chosen = values.modes.split(',').filter((m) => m in modes);
const PROCS = Number(values.procs);
const children: Child[] = [];
// (Four processes compiling the clients' TypeScript at once took over a minute at load 28.)
for (let j = 0; PROCS > 1 && j < PROCS; j++) children.push(spawnChild(fileURLToPath(new URL('./fig14-clients-process.ts', import.meta.url)), {}, [], 600_000));
await Promise.all(children.map((c) => c.ready));

/** One configuration in this process: seconds until every op is Visible everywhere, and this process's CPU. */
async function runHere(mode: string, n: number, url: string, room: string, start: () => void): Promise<{ seconds: number; cpuS: number }> {
  const rooms: ConnectedRoom<typeof byteArray>[] = [];
  for (let i = 0; i < n; i++) rooms.push(await connect({ url, room, machine: byteArray, clientId: `c${i}`, batching: modes[mode] }));
  while (rooms.some((r) => r.status() !== 'online') || rooms.some((r) => r.members().length < n)) await sleep(20);
  const total = n * OPS;
  const rand = new Rng(12345).source();
  start();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    rooms.map(async (r) => {
      for (let k = 0; k < OPS; k++) {
        r.ops.increment({ offset: Math.floor(rand() * 100_000), count: 500 });
        await sleep(20);
      }
    }),
  );
  while (!rooms.every((r) => r.positions().visible >= total)) await sleep(5);
  const seconds = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(cpu0);
  for (const r of rooms) await r.close();
  return { seconds, cpuS: (c.user + c.system) / 1e6 };
}

/** The same with the clients spread over the child processes (`--procs`): CPU summed over them. */
async function runInChildren(mode: string, n: number, url: string, room: string, start: () => void): Promise<{ seconds: number; cpuS: number }> {
  const used = children.slice(0, Math.min(n, children.length));
  const ids = used.map((_, j) => Array.from({ length: n }, (_, i) => `c${i}`).filter((_, i) => i % used.length === j));
  await Promise.all(used.map((c, j) => c.call({ cmd: 'connect', url, room, ids: ids[j], members: n, mode }, 120_000)));
  start();
  const t0 = performance.timeOrigin + performance.now();
  const done = await Promise.all(
    used.map((c, j) => c.call<{ doneAt: number; cpuS: number }>({ cmd: 'run', ops: OPS, total: n * OPS, seed: 12345 + j }, 600_000)),
  );
  const seconds = (Math.max(...done.map((d) => d.doneAt)) - t0) / 1000;
  await Promise.all(used.map((c) => c.call({ cmd: 'closeRooms' })));
  return { seconds, cpuS: done.reduce((a, d) => a + d.cpuS, 0) };
}

interface Row {
  mode: string;
  clients: number;
  ops: number;
  seconds: number;
  ratioTo1: number;
  /** CPU of this process (all clients) per client: what one client's own device would spend. */
  perClientCpuS: number;
  /** That CPU over the workload's own duration (ops x 20 ms): under 1, a dedicated device keeps up. */
  deviceLoad: number;
  /** CPU per op applied at one client (every client applies every op). */
  cpuPerClientOpUs: number;
  cpuUtil: number;
  /** CPU seconds of the server's and the proxy's processes over the same span. */
  serverCpuS: number;
  proxyCpuS: number;
}
const rows: Row[] = [];

// The child processes start cold: one untimed run with 2 clients in each compiles the clients'
// code in every one of them (the one-process run warms up in its first configurations instead).
if (PROCS > 1) {
  const server = await startServer({ store: values.store === 'memory' ? 'memory' : 'sqlite' });
  const proxy = await startDelayProxyProcess({ target: { port: server.port }, rttMs: RTT });
  await runInChildren(chosen[0], 2 * PROCS, proxy.url(), `fig14-warmup-${Date.now()}`, () => {});
  await proxy.close();
  await server.close();
}
for (const mode of chosen) {
  for (const n of clientCounts) {
    const server = await startServer({ store: values.store === 'memory' ? 'memory' : 'sqlite', cpuProfDir: values['server-prof'] });
    const proxy = await startDelayProxyProcess({ target: { port: server.port }, rttMs: RTT });
    const room = `fig14-${mode}-${n}-${Date.now()}`;
    const total = n * OPS;
    let server0 = 0,
      proxy0 = 0;
    const start = () => {
      server0 = cpuSeconds(server.child.proc.pid!);
      proxy0 = cpuSeconds(proxy.pid!);
    };
    const { seconds, cpuS } = await (PROCS > 1 ? runInChildren : runHere)(mode, n, proxy.url(), room, start);
    const serverCpuS = +(cpuSeconds(server.child.proc.pid!) - server0).toFixed(2),
      proxyCpuS = +(cpuSeconds(proxy.pid!) - proxy0).toFixed(2);
    const base = rows.find((x) => x.mode === mode && x.clients === clientCounts[0]);
    const row: Row = {
      mode,
      clients: n,
      ops: total,
      seconds: +seconds.toFixed(2),
      ratioTo1: base ? +(seconds / base.seconds).toFixed(2) : 1,
      perClientCpuS: +(cpuS / n).toFixed(3),
      deviceLoad: +(cpuS / n / (OPS * 0.02)).toFixed(3),
      cpuPerClientOpUs: Math.round((cpuS * 1e6) / (n * total)),
      cpuUtil: +(cpuS / seconds).toFixed(2),
      serverCpuS,
      proxyCpuS,
    };
    rows.push(row);
    console.log(
      `fig14 ${mode.padEnd(8)} ${String(n).padStart(2)} clients: ${seconds.toFixed(2)} s until all ${total} ops are Visible everywhere (x${row.ratioTo1} of ${clientCounts[0]} client); client CPU ${cpuS.toFixed(1)} s = ${row.perClientCpuS} s per client, device load ${row.deviceLoad}, ${row.cpuPerClientOpUs} us per op per client; server CPU ${serverCpuS} s, proxy ${proxyCpuS} s`,
    );
    await proxy.close();
    await server.close();
  }
}
console.table(rows);
for (const c of children) c.proc.kill();
// The variant's results go beside the original's, not over them.
const id = PROCS > 1 ? 'fig14-procs' : 'fig14';
const svgLoad = svgLineChart({
  title: `Fig. 14 (per device): CPU one client needs over the workload's duration (${OPS} ops per client)`,
  xLabel: 'clients',
  yLabel: 'device load (1 = a core fully busy)',
  logX: true,
  series: chosen.map((m) => ({ name: m, points: rows.filter((r) => r.mode === m).map((r) => [r.clients, r.deviceLoad] as [number, number]) })),
});
writeFileSync(new URL(`../../../docs/benchmarks/${id}-device-load.svg`, import.meta.url), svgLoad);
const svg = svgLineChart({
  title: `Fig. 14: time until every op is Visible at every client (${OPS} ops per client, RTT ${RTT} ms${PROCS > 1 ? `, clients in ${PROCS} processes` : ''})`,
  xLabel: 'clients',
  yLabel: 'seconds',
  logX: true,
  series: chosen.map((m) => ({ name: m, points: rows.filter((r) => r.mode === m).map((r) => [r.clients, r.seconds] as [number, number]) })),
});
writePaperSection(
  id,
  { params: { opsPerClient: OPS, incrementsPerOp: 500, sleepMs: 20, bytes: 100_000, rttMs: RTT, clients: clientCounts, modes: chosen, procs: PROCS }, rows },
  svg,
);
process.exit(0);
