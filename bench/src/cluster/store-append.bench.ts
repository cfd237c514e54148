/**
 * ClusterStore (rooms on a private 3-node JetStream cluster, R3 file streams) beside SqliteStore
 * (the embedded default, synchronous=FULL), in one process, alternated: the delay of one append
 * awaited at a time (what an op waits before it is announced Authoritative), and appends per
 * second with many in flight over many rooms, and the CPU each append costs (this process and the
 * NATS servers, from /proc). The cluster store twice each round: with batched appends (a
 * shard's appends of one turn as one message, the default) and without (one message each).
 *
 *   node --import tsx bench/src/cluster/store-append.bench.ts [--n 2000] [--rounds 2] [--rooms 100]
 */
import { connect } from '@nats-io/transport-node';
import { ClusterStore, JetStreamLeases, JetStreamShardLog, startNatsCluster } from '@hercules/cluster';
import { SqliteStore, type RoomStore } from '@hercules/server';
import { tempDir } from '@hercules/test-utils';
import { cpuSeconds } from '../runtime/common.ts';

const arg = (name: string, d: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const N = arg('n', 2000);
const ROUNDS = arg('rounds', 2);
const ROOMS = arg('rooms', 100);
const INIT = { machine: 'bench', version: 1, initial: { cells: {} } };
const entry = (pos: number) => ({ pos, client: 'c1', seq: pos, name: 'setCell', args: { cell: `A${pos % 72}`, value: `v${pos}` }, author: 'c1' });
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];

async function sequential(store: RoomStore, room: string): Promise<{ p50: number; p99: number }> {
  const r = await store.open(room, INIT);
  const ms: number[] = [];
  for (let i = 0; i < N; i++) {
    const t = performance.now();
    await store.append(room, { after: r.rev + i, entries: [entry(i + 1)], clients: { c1: { highWater: i + 1, visibleSeq: 0 } } });
    ms.push(performance.now() - t);
  }
  return { p50: pct(ms, 50), p99: pct(ms, 99) };
}

/** Appends per second, and CPU µs per append of this process plus `pids` (the NATS servers). */
async function measured(store: RoomStore, tag: string, pids: number[]): Promise<{ perSec: number; cpuUs: number }> {
  const perRoom = Math.max(10, Math.round(10_000 / ROOMS));
  const cpu = () => process.cpuUsage().user / 1e6 + process.cpuUsage().system / 1e6 + pids.reduce((a, p) => a + cpuSeconds(p), 0);
  const c0 = cpu();
  const perSec = await pipelined(store, tag, ROOMS, perRoom);
  return { perSec, cpuUs: ((cpu() - c0) / (ROOMS * perRoom)) * 1e6 };
}

async function pipelined(store: RoomStore, tag: string, rooms = 100, perRoom = 100, window = 1000): Promise<number> {
  const revs = new Map<string, number>();
  for (let r = 0; r < rooms; r++) revs.set(`${tag}-${r}`, (await store.open(`${tag}-${r}`, INIT)).rev);
  const t = performance.now();
  // A window of appends in flight: a slot frees when any settles (a counter, not Promise.race over the set).
  let inFlight = 0;
  let wake: (() => void) | undefined;
  let failed: unknown;
  let pos = 0;
  for (let i = 0; i < perRoom; i++) {
    for (let r = 0; r < rooms; r++) {
      const name = `${tag}-${r}`;
      const after = revs.get(name)!;
      revs.set(name, after + 1);
      inFlight++;
      pos++;
      store.append(name, { after, entries: [entry(i + 1)] }).then(
        () => {
          inFlight--;
          wake?.();
        },
        (e) => {
          failed ??= e;
          inFlight--;
          wake?.();
        },
      );
      while (inFlight >= window) await new Promise<void>((w) => (wake = w));
      if (failed) throw failed;
    }
  }
  while (inFlight > 0) await new Promise<void>((w) => (wake = w));
  if (failed) throw failed;
  return (pos * 1000) / (performance.now() - t);
}

const cluster = await startNatsCluster({ nodes: 3, ...(process.env.NATS_DIR ? { dir: process.env.NATS_DIR } : {}) });
const nc = await connect({ servers: cluster.urls });
// Leases on a connection of their own: renewals must not queue behind a thousand appends.
const leaseConn = await connect({ servers: cluster.urls });
const leases = await JetStreamLeases.open(leaseConn, { bucket: 'bench_owners', ttlMs: 2000 });
const rows: string[] = [];
try {
  const pids = cluster.servers.map((s) => s.pid!);
  const fmt = (x: { perSec: number; cpuUs: number }) => `${Math.round(x.perSec).toLocaleString('en-US')} / ${x.cpuUs.toFixed(1)} µs`;
  for (let round = 1; round <= ROUNDS; round++) {
    const runs: { batched: boolean; one: { p50: number; p99: number }; many: { perSec: number; cpuUs: number } }[] = [];
    for (const batchAppends of [true, false]) {
      const prefix = `b${round}${batchAppends ? 'b' : 'o'}`;
      const log = await JetStreamShardLog.open(nc, { streamPrefix: prefix.toUpperCase(), subjectPrefix: prefix });
      const cs = new ClusterStore({
        log,
        leases,
        nodeId: 'bench',
        shards: 8,
        subjectPrefix: prefix,
        batchAppends,
        onWarning: (w) => console.error('warning:', w),
        onShardLost: (k, why) => console.error('lost', k, why),
      });
      const one = await sequential(cs, 'seq');
      const many = await measured(cs, 'pipe', pids);
      await cs.close();
      runs.push({ batched: batchAppends, one, many });
    }
    const { dir, cleanup } = tempDir('bench-sqlite');
    const ss = new SqliteStore(dir);
    const s1 = await sequential(ss, 'seq');
    const s2 = await measured(ss, 'pipe', []);
    await ss.close();
    cleanup();
    const [b, o] = runs;
    rows.push(
      `| ${round} | ${b.one.p50.toFixed(2)} / ${b.one.p99.toFixed(2)} | ${o.one.p50.toFixed(2)} / ${o.one.p99.toFixed(2)} | ${s1.p50.toFixed(2)} / ${s1.p99.toFixed(2)} | ${fmt(b.many)} | ${fmt(o.many)} | ${fmt(s2)} |`,
    );
    console.log(rows[rows.length - 1]);
  }
} finally {
  await nc.close();
  await leaseConn.close();
  await cluster.close();
}
console.log(
  `| round | cluster batched: one append awaited, p50 / p99 ms | cluster one message an append: same | SQLite: same | cluster batched: appends/s, CPU per append, 1,000 in flight over ${ROOMS} rooms | cluster one message an append: same | SQLite: same |`,
);
console.log('|---|---|---|---|--:|--:|--:|');
for (const r of rows) console.log(r);
