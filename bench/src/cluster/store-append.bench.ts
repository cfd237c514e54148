/**
 * ClusterStore (rooms on a private 3-node JetStream cluster, R3 file streams) beside SqliteStore
 * (the embedded default, synchronous=FULL), in one process, alternated: the delay of one append
 * awaited at a time (what an op waits before it is announced Authoritative), and appends per
 * second with many in flight over many rooms.
 *
 *   node --import tsx bench/src/cluster/store-append.bench.ts [--n 2000] [--rounds 2]
 */
import { connect } from '@nats-io/transport-node';
import { ClusterStore, JetStreamLeases, JetStreamShardLog, startNatsCluster } from '@hercules/cluster';
import { SqliteStore, type RoomStore } from '@hercules/server';
import { tempDir } from '@hercules/test-utils';

const arg = (name: string, d: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const N = arg('n', 2000);
const ROUNDS = arg('rounds', 2);
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
  for (let round = 1; round <= ROUNDS; round++) {
    const log = await JetStreamShardLog.open(nc, { streamPrefix: `B${round}`, subjectPrefix: `b${round}` });
    const cs = new ClusterStore({
      log,
      leases,
      nodeId: 'bench',
      shards: 8,
      subjectPrefix: `b${round}`,
      onWarning: (w) => console.error('warning:', w),
      onShardLost: (k, why) => console.error('lost', k, why),
    });
    const c1 = await sequential(cs, 'seq');
    const c2 = await pipelined(cs, 'pipe');
    await cs.close();
    const { dir, cleanup } = tempDir('bench-sqlite');
    const ss = new SqliteStore(dir);
    const s1 = await sequential(ss, 'seq');
    const s2 = await pipelined(ss, 'pipe');
    await ss.close();
    cleanup();
    rows.push(
      `| ${round} | ${c1.p50.toFixed(2)} / ${c1.p99.toFixed(2)} | ${s1.p50.toFixed(2)} / ${s1.p99.toFixed(2)} | ${Math.round(c2).toLocaleString('en-US')} | ${Math.round(s2).toLocaleString('en-US')} |`,
    );
    console.log(rows[rows.length - 1]);
  }
} finally {
  await nc.close();
  await leaseConn.close();
  await cluster.close();
}
console.log('| round | cluster: one append awaited, p50 / p99 ms | SQLite: same | cluster: appends/s, 1,000 in flight over 100 rooms | SQLite: same |');
console.log('|---|---|---|--:|--:|');
for (const r of rows) console.log(r);
