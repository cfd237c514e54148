/**
 * Paper Figure 15, client failure: 4 clients (byte array, ops of 1,000 increments within a
 * 10 KB region), one of them in its own process, SIGKILLed at `--kill-at` seconds. Through the
 * delay proxy (RTT 67 ms). Plotted: the delay from submit to Authoritative and to Visible of the
 * surviving clients' ops, by submit time (median per 500 ms bucket).
 *
 * Expected (paper §7.4): Visible stalls when the client dies, because the server waits for its
 * acks, and recovers once the server drops it from the visibility set: within the ack timeout
 * (2 s) plus about one RTT. Authoritative does not move.
 *
 *   node --import tsx bench/src/paper/fig15-failure.ts [--seconds 40] [--kill-at 20] [--every 50]
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { connect, type ConnectedRoom } from '@hercules/client';
import { byteArray } from '../../../apps/machines.ts';
import { startServer, sleep } from '../runtime/common.ts';
import { startDelayProxyProcess } from './delay-proxy.ts';
import { svgLineChart, writePaperSection } from './report.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '40' },
    'kill-at': { type: 'string', default: '20' },
    every: { type: 'string', default: '100' },
    rtt: { type: 'string', default: '67' },
  },
});
const SECONDS = Number(values.seconds),
  KILL_AT = Number(values['kill-at']),
  EVERY = Number(values.every),
  RTT = Number(values.rtt);
const ACK_TIMEOUT_MS = 2000; // the server's default, which startServer keeps

const server = await startServer();
const proxy = await startDelayProxyProcess({ target: { port: server.port }, rttMs: RTT });
// The victim's link goes silent when it dies (no FIN reaches the server), as after a power or
// network loss: the server must notice by the missing acks, as in the paper.
const victimProxy = await startDelayProxyProcess({ target: { port: server.port }, rttMs: RTT, silentOnClientClose: true });
const room = `fig15-${Date.now()}`;
const victim = spawn(
  process.execPath,
  ['--import', 'tsx', fileURLToPath(new URL('fig15-client.ts', import.meta.url)), victimProxy.url(), room, 'victim', String(EVERY)],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
await new Promise<void>((res) => createInterface({ input: victim.stdout! }).once('line', () => res()));
const rooms: ConnectedRoom<typeof byteArray>[] = [];
for (let i = 0; i < 3; i++) rooms.push(await connect({ url: proxy.url(), room, machine: byteArray, clientId: `c${i}` }));
while (rooms.some((r) => r.members().length < 4)) await sleep(20);

const samples: { at: number; auth: number; vis: number }[] = [];
const t0 = performance.now();
let killedAt = 0;
const killer = setTimeout(() => {
  victim.kill('SIGKILL');
  killedAt = (performance.now() - t0) / 1000;
  console.log(`fig15: SIGKILLed the victim at ${killedAt.toFixed(2)} s`);
}, KILL_AT * 1000);
let k = 0;
const pending: Promise<void>[] = [];
while (performance.now() - t0 < SECONDS * 1000) {
  for (const r of rooms) {
    const h = r.ops.increment({ offset: (k++ * 991) % 9000, count: 1000 });
    pending.push(
      h.visible.then(
        () => {
          samples.push({ at: (h.times.submitted! - t0) / 1000, auth: h.times.authoritative! - h.times.submitted!, vis: h.times.visible! - h.times.submitted! });
        },
        () => {},
      ),
    );
  }
  await sleep(EVERY);
}
clearTimeout(killer);
await Promise.race([Promise.all(pending), sleep(10_000)]);
for (const r of rooms) await r.close();
await proxy.close();
await victimProxy.close();
await server.close();

const med = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
};
const buckets = new Map<number, { auth: number[]; vis: number[] }>();
for (const s of samples) {
  const b = Math.floor(s.at * 2) / 2;
  const x = buckets.get(b) ?? { auth: [], vis: [] };
  x.auth.push(s.auth);
  x.vis.push(s.vis);
  buckets.set(b, x);
}
const series = [...buckets.entries()].sort((a, b) => a[0] - b[0]).map(([t, x]) => ({ t, auth: med(x.auth), vis: med(x.vis), n: x.auth.length }));
const before = samples.filter((s) => s.at > 2 && s.at < killedAt - 0.5);
const baseVis = med(before.map((s) => s.vis)),
  baseAuth = med(before.map((s) => s.auth));
const after = samples.filter((s) => s.at >= killedAt);
const worstVis = Math.max(...after.map((s) => s.vis));
const authAfter = med(samples.filter((s) => s.at > killedAt + ACK_TIMEOUT_MS / 1000 + 1).map((s) => s.auth));
// Recovered: the first op submitted after the kill whose Visible delay is back within 1.5x of before.
const rec = after.sort((a, b) => a.at - b.at).find((s) => s.vis <= baseVis * 1.5);
const recoveredAfterS = rec ? rec.at - killedAt : NaN;
console.table(series.filter((_, i) => i % 4 === 0));
const summary = {
  opsMeasured: samples.length,
  killedAtS: +killedAt.toFixed(2),
  beforeKill: { authoritativeMedianMs: +baseAuth.toFixed(1), visibleMedianMs: +baseVis.toFixed(1) },
  worstVisibleAfterKillMs: +worstVis.toFixed(1),
  limitMs: ACK_TIMEOUT_MS + RTT,
  recoveredAfterS: +recoveredAfterS.toFixed(2),
  authoritativeMedianAfterMs: +authAfter.toFixed(1),
};
console.log(summary);
console.log(
  `fig15: Visible worst ${worstVis.toFixed(0)} ms after the kill vs ack timeout + RTT = ${ACK_TIMEOUT_MS + RTT} ms -> ${worstVis <= ACK_TIMEOUT_MS + RTT + baseVis ? 'within' : 'OVER'} (with the normal ${baseVis.toFixed(0)} ms Visible delay on top); Authoritative median ${baseAuth.toFixed(1)} ms before, ${authAfter.toFixed(1)} ms after`,
);
const svg = svgLineChart({
  title: `Fig. 15: delay per view, victim SIGKILLed at ${killedAt.toFixed(1)} s (RTT ${RTT} ms, ack timeout ${ACK_TIMEOUT_MS} ms)`,
  xLabel: 'submit time (s)',
  yLabel: 'delay from submit (ms), median per 0.5 s',
  series: [
    { name: 'Authoritative', points: series.map((s) => [s.t, s.auth]) },
    { name: 'Visible', points: series.map((s) => [s.t, s.vis]) },
  ],
});
writePaperSection(
  'fig15',
  {
    params: {
      clients: 4,
      killAtS: KILL_AT,
      seconds: SECONDS,
      everyMs: EVERY,
      incrementsPerOp: 1000,
      regionBytes: 10_000,
      rttMs: RTT,
      ackTimeoutMs: ACK_TIMEOUT_MS,
    },
    summary,
    series,
  },
  svg,
);
process.exit(0);
