/**
 * Hercules and its peers side by side: the same typing workload, through the same delay proxy,
 * in the same run. For each system:
 *
 *   latency: two clients A and B through the proxy at RTT 67 ms; A sets a cell every 100 ms
 *     (unique values), 100 times. Per edit: local apply (set() returning), server
 *     acknowledgement where the system has one, delivery at B. Ratios to the physical limits:
 *     ack / RTT, delivery / RTT (one hop A->server, one server->B = one RTT).
 *   throughput: four writer clients and one observer through the proxy at RTT 0, writers set
 *     cells as fast as they can (batches of 50, yielding between batches) for 6 s; counted:
 *     edits per second arriving at the observer (after 1 s of warm-up), the server
 *     process's CPU use, and each edit's delay from a writer's set() to its arrival at the
 *     observer (delivery under load).
 *
 * Hercules and tldraw each run twice over their storage: as shipped (Hercules on SQLite, tldraw
 * in memory) and on the other's footing (Hercules on a MemoryStore, tldraw on its SQLite storage
 * with an fsync per push), so server CPU and delivery can be compared on equal storage too.
 *
 *   node --import tsx bench/src/paper/peers.ts [--only hercules,yjs,...] [--edits 100] [--rtt 67] [--keys-per-writer 64]
 */
import { parseArgs } from 'node:util';
import { cpuTimes, sleep } from '../runtime/common.ts';
import { startDelayProxyProcess } from './delay-proxy.ts';
import { writePaperSection } from './report.ts';
import { peersChart } from './charts.ts';
import type { PeerClient, PeerSystem } from '../peers/types.ts';
import { hercules, herculesKeyedMap, herculesMap, herculesMapMemory } from '../peers/hercules.ts';

const { values } = parseArgs({
  options: {
    only: { type: 'string' },
    edits: { type: 'string', default: '100' },
    rtt: { type: 'string', default: '67' },
    seconds: { type: 'string', default: '6' },
    // Keys each throughput writer cycles through (the observer's map holds 4x as many).
    'keys-per-writer': { type: 'string', default: '64' },
  },
});
const EDITS = Number(values.edits),
  RTT = Number(values.rtt),
  SECONDS = Number(values.seconds),
  KEYS_PER_WRITER = Number(values['keys-per-writer']);

/** Systems whose adapters load (a peer whose packages are missing is reported, not fatal). */
async function systems(): Promise<PeerSystem[]> {
  const out: PeerSystem[] = [hercules, herculesMap, herculesMapMemory, herculesKeyedMap];
  for (const [id, mod] of [
    ['yjs', '../peers/yjs.ts'],
    ['tldraw', '../peers/tldraw.ts'],
    ['automerge', '../peers/automerge.ts'],
    ['colyseus', '../peers/colyseus.ts'],
    ['fluid', '../peers/fluid.ts'],
  ] as const) {
    try {
      const m = (await import(mod)) as Record<string, PeerSystem>;
      out.push(m[id]);
      if (m[`${id}Sqlite`]) out.push(m[`${id}Sqlite`]);
    } catch (e) {
      console.log(`peers: ${id} not available (${(e as Error).message.split('\n')[0]})`);
    }
  }
  const only = values.only?.split(',');
  return only ? out.filter((s) => only.some((o) => s.name.toLowerCase().startsWith(o.toLowerCase()))) : out;
}

const pct = (xs: number[], q: number) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
// Two decimals: at RTT 0 the systems differ by tenths of a millisecond.
const r2 = (x: number) => Math.round(x * 100) / 100;

interface Result {
  system: string;
  edits: number;
  delivered: number;
  acked: number | null;
  localMedianMs: number;
  ackMedianMs: number | null;
  ackP99Ms: number | null;
  deliveryMedianMs: number;
  deliveryP99Ms: number;
  ackPerRtt: number | null;
  deliveryPerRtt: number;
  throughputEditsPerS: number;
  serverCpuCores: number;
  /** Server CPU per edit delivered to the observer, µs (from the unrounded CPU time and count). */
  serverCpuUsPerEdit: number;
  /** The kernel's part of it (socket reads and writes, fsyncs), µs per delivered edit. */
  serverSysUsPerEdit: number;
  /** Under the throughput load: from a writer's set() to the observer's onRemote, ms. */
  loadedDeliveryMedianMs: number;
  loadedDeliveryP99Ms: number;
}
/** What the throughput part measures. */
type ThroughputResult = Pick<
  Result,
  'throughputEditsPerS' | 'serverCpuCores' | 'serverCpuUsPerEdit' | 'serverSysUsPerEdit' | 'loadedDeliveryMedianMs' | 'loadedDeliveryP99Ms'
>;

async function latency(sys: PeerSystem, port: number): Promise<Omit<Result, keyof ThroughputResult>> {
  const proxy = await startDelayProxyProcess({ target: { port }, rttMs: RTT });
  const doc = `lat-${Date.now().toString(36)}`;
  const a = await sys.connect('127.0.0.1', proxy.port, doc, 'A');
  const b = await sys.connect('127.0.0.1', proxy.port, doc, 'B');
  const arrived = new Map<string, number>();
  b.onRemote((_k, v) => {
    if (!arrived.has(v)) arrived.set(v, performance.now());
  });
  const tag = Math.random().toString(36).slice(2, 8);
  // Warm-up: the first edits pay for connection set-up and JIT.
  for (let i = 0; i < 10; i++) {
    a.set(`w${i}`, `warm-${tag}-${i}`);
    await sleep(50);
  }
  await sleep(1000);
  const local: number[] = [],
    ack: number[] = [],
    sent: { v: string; t: number }[] = [];
  const acks: Promise<void>[] = [];
  for (let i = 0; i < EDITS; i++) {
    const v = `${tag}-${i}`;
    const t = performance.now();
    a.set(`k${i % 40}`, v);
    local.push(performance.now() - t);
    sent.push({ v, t });
    if (a.acked)
      acks.push(
        a.acked(`k${i % 40}`, v).then(
          () => {
            ack.push(performance.now() - t);
          },
          () => {},
        ),
      );
    await sleep(100);
  }
  const by = performance.now() + 5000;
  while (sent.some((s) => !arrived.has(s.v)) && performance.now() < by) await sleep(20);
  await Promise.race([Promise.all(acks), sleep(3000)]);
  const delivery = sent.filter((s) => arrived.has(s.v)).map((s) => arrived.get(s.v)! - s.t);
  await a.close();
  await b.close();
  await proxy.close();
  return {
    system: sys.name,
    edits: EDITS,
    delivered: delivery.length,
    acked: a.acked ? ack.length : null,
    localMedianMs: +pct(local, 0.5).toFixed(3),
    ackMedianMs: a.acked ? r2(pct(ack, 0.5)) : null,
    ackP99Ms: a.acked ? r2(pct(ack, 0.99)) : null,
    deliveryMedianMs: r2(pct(delivery, 0.5)),
    deliveryP99Ms: r2(pct(delivery, 0.99)),
    ackPerRtt: a.acked ? +(pct(ack, 0.5) / RTT).toFixed(3) : null,
    deliveryPerRtt: +(pct(delivery, 0.5) / RTT).toFixed(3),
  };
}

async function throughput(sys: PeerSystem, port: number, pid: number): Promise<ThroughputResult> {
  const proxy = await startDelayProxyProcess({ target: { port }, rttMs: 0 });
  const doc = `tp-${Date.now().toString(36)}`;
  const observer = await sys.connect('127.0.0.1', proxy.port, doc, 'O');
  const writers: PeerClient[] = [];
  for (let i = 0; i < 4; i++) writers.push(await sys.connect('127.0.0.1', proxy.port, doc, `W${i}`));
  let count = 0,
    counting = false;
  // When each value was set (values are unique; every client is in this process), for the
  // observer's delivery delay under load. A system that merges edits (tldraw's 60 Hz frames)
  // never delivers some values: their entries just stay.
  const setAt = new Map<string, number>();
  const loaded: number[] = [];
  observer.onRemote((_key, value) => {
    const t = setAt.get(value);
    if (t !== undefined) setAt.delete(value);
    if (!counting) return;
    count++;
    if (t !== undefined) loaded.push(performance.now() - t);
  });
  let stop = false;
  const loops = writers.map(async (w, wi) => {
    let n = 0;
    while (!stop) {
      for (let j = 0; j < 50; j++) {
        const value = `${wi}-${n}`;
        setAt.set(value, performance.now());
        w.set(`w${wi}-${n++ % KEYS_PER_WRITER}`, value);
      }
      await new Promise((r) => setImmediate(r));
    }
  });
  await sleep(1000);
  counting = true;
  const t0 = performance.now(),
    c0 = cpuTimes(pid);
  await sleep((SECONDS - 1) * 1000);
  counting = false;
  const secs = (performance.now() - t0) / 1000,
    c1 = cpuTimes(pid),
    cpu = c1.user + c1.system - (c0.user + c0.system),
    kernel = c1.system - c0.system;
  stop = true;
  await Promise.all(loops);
  for (const w of writers) await w.close().catch(() => {});
  await observer.close().catch(() => {});
  await proxy.close();
  return {
    throughputEditsPerS: Math.round(count / secs),
    serverCpuCores: +(cpu / secs).toFixed(2),
    serverCpuUsPerEdit: count > 0 ? +((cpu * 1e6) / count).toFixed(1) : NaN,
    serverSysUsPerEdit: count > 0 ? +((kernel * 1e6) / count).toFixed(1) : NaN,
    loadedDeliveryMedianMs: loaded.length ? +pct(loaded, 0.5).toFixed(2) : NaN,
    loadedDeliveryP99Ms: loaded.length ? +pct(loaded, 0.99).toFixed(2) : NaN,
  };
}

const results: Result[] = [];
for (const sys of await systems()) {
  console.log(`peers: ${sys.name}`);
  const server = await sys.startServer();
  try {
    const lat = await latency(sys, server.port);
    const tp = await throughput(sys, server.port, server.pid);
    results.push({ ...lat, ...tp });
    console.log(results.at(-1));
  } catch (e) {
    console.log(`peers: ${sys.name} failed: ${(e as Error).stack}`);
  } finally {
    await server.stop();
  }
}
console.table(
  results.map((r) => ({
    system: r.system,
    'local ms': r.localMedianMs,
    'ack p50': r.ackMedianMs ?? 'n/a',
    'ack/RTT': r.ackPerRtt ?? 'n/a',
    'delivery p50': r.deliveryMedianMs,
    'delivery p99': r.deliveryP99Ms,
    'delivery/RTT': r.deliveryPerRtt,
    'edits/s': r.throughputEditsPerS,
    'loaded delivery p50': r.loadedDeliveryMedianMs,
    'loaded p99': r.loadedDeliveryP99Ms,
    'server cores': r.serverCpuCores,
    'server µs/edit': r.serverCpuUsPerEdit,
    'of it kernel': r.serverSysUsPerEdit,
  })),
);
const ours = results.find((r) => r.system.startsWith('Hercules'));
const ratios = ours
  ? results
      .filter((r) => r !== ours)
      .map((r) => ({
        peer: r.system,
        'delivery p50, ours/theirs': +(ours.deliveryMedianMs / r.deliveryMedianMs).toFixed(3),
        'ack p50, ours/theirs': r.ackMedianMs && ours.ackMedianMs ? +(ours.ackMedianMs / r.ackMedianMs).toFixed(3) : 'n/a',
        'throughput, ours/theirs': +(ours.throughputEditsPerS / r.throughputEditsPerS).toFixed(2),
        'server CPU per edit, ours/theirs': +(ours.serverCpuUsPerEdit / r.serverCpuUsPerEdit).toFixed(2),
      }))
  : [];
if (ratios.length) console.table(ratios);
const section = { params: { edits: EDITS, everyMs: 100, rttMs: RTT, throughputWriters: 4, throughputSeconds: SECONDS }, results, ratios };
writePaperSection('peers', section, peersChart(section));
process.exit(0);
