/**
 * Cluster throughput: ops ordered, appended to JetStream (R3, file) and announced per second, for
 * one room and for 1,000 rooms, on 1, 2 and 3 Hercules nodes (`hercules serve --nats`, separate
 * processes) beside a private 3-server NATS cluster, and the CPU each op costs.
 *
 * The per-connection rate limits are raised, as in the embedded runtime benchmark (R3).
 * Rooms hash to 12 shards; node i serves the shards k with k mod N = i: each room's two clients
 * connect to that node (its first client makes it take the shard), so nothing is relayed. One
 * load generator process per node (runtime/loadgen-process.ts: raw WebSockets, pipelined ops
 * frames of 20 setCell ops under a budget of ops in flight, an ack per log frame).
 * Throughput: the nodes' `hercules_ops_sequenced_total`, summed, over windows after a warm-up
 * (median window). CPU: /proc of every node, NATS server and load generator over the same
 * windows. Beside each, the embedded server (SQLite) under the same load, in turn (`nodes` 0).
 * On 2 cores everything shares the same two cores, so aggregate ops/s cannot grow with
 * nodes here; CPU per op (nodes + NATS) says what a node and the log cost per op, which is what
 * adding machines divides.
 *
 * `--batch on,off`: the cluster nodes with batched appends (a shard's appends of one turn as one
 * message, the default) and without (one message an append), each beside embedded in turn.
 *
 *   node -C @hercules/source --import tsx bench/src/cluster/throughput.bench.ts [--nodes 1,2,3] [--rooms 1,1000] [--batch on] [--rounds 1] [--windows 5] [--window-ms 2000] [--in-flight 2000]
 */
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { shardOf, startNatsCluster } from '@hercules/cluster';
import { serveProcess, tempDir } from '@hercules/test-utils';
import { cpuSeconds, parseProm, sleep, spawnChild, type Child } from '../runtime/common.ts';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '1,2,3' },
    rooms: { type: 'string', default: '1,1000' },
    windows: { type: 'string', default: '5' },
    'window-ms': { type: 'string', default: '2000' },
    'warmup-ms': { type: 'string', default: '4000' },
    'in-flight': { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '1' },
    batch: { type: 'string', default: 'on' },
  },
});
const NODES = values.nodes.split(',').map(Number),
  ROOMS = values.rooms.split(',').map(Number),
  WINDOWS = Number(values.windows),
  WINDOW_MS = Number(values['window-ms']),
  WARMUP_MS = Number(values['warmup-ms']),
  IN_FLIGHT = Number(values['in-flight']),
  ROUNDS = Number(values.rounds),
  BATCH = values.batch.split(',');
const SHARDS = 12;
const MACHINES = fileURLToPath(new URL('../../../apps/machines.ts', import.meta.url));

interface Node {
  id: string;
  port: number;
  proc: ChildProcess;
}

/** A cluster node over `nats`, or with `dataDir` the embedded server (SQLite), for the baseline. */
async function startNode(id: string, where: { nats: string[]; prefix: string; batch: string } | { dataDir: string }): Promise<Node> {
  const mode =
    'nats' in where
      ? ['--nats', where.nats.join(','), '--node-id', id, '--shards', String(SHARDS), '--nats-prefix', where.prefix, '--nats-batch', where.batch]
      : ['--data-dir', where.dataDir];
  // The rate limits raised, as in the embedded runtime benchmark (R3): with the defaults (1,000
  // ops/s a connection) one room's two clients measure the limit, 2,000 ops/s.
  const limits = ['--ops-per-second', '10000000', '--bytes-per-second', '10000000000'];
  const { port, proc } = await serveProcess(['--machines', MACHINES, ...mode, ...limits, '--log-level', 'error'], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, NODE_ENV: 'production' },
  });
  return { id, port, proc };
}

const sequenced = async (n: Node) => parseProm(await (await fetch(`http://127.0.0.1:${n.port}/metrics`)).text()).hercules_ops_sequenced_total ?? 0;

interface Result {
  /** 0: the embedded server (SQLite). */
  nodes: number;
  rooms: number;
  /** Batched appends (cluster nodes): on or off. */
  batch: string;
  opsPerSec: number;
  nodeCores: number;
  natsCores: number;
  loadgenCores: number;
  /** (nodes + NATS) CPU µs per op. */
  cpuUsPerOp: number;
  nodeUsPerOp: number;
  natsUsPerOp: number;
}

async function measure(nats: Awaited<ReturnType<typeof startNatsCluster>>, nNodes: number, nRooms: number, run: number, batch: string): Promise<Result> {
  const prefix = `tp${run}`;
  const nodes: Node[] = [];
  const gens: Child[] = [];
  const embedded = nNodes === 0;
  try {
    if (embedded) nodes.push(await startNode('embedded', { dataDir: join(data.dir, prefix) }));
    else for (let i = 0; i < nNodes; i++) nodes.push(await startNode(`n${i}`, { nats: nats.urls, prefix, batch }));
    // Rooms by the node that serves their shard.
    const byNode: string[][] = nodes.map(() => []);
    for (let r = 0; r < nRooms; r++) {
      const room = `${prefix}-room-${r}`;
      byNode[embedded ? 0 : shardOf(room, SHARDS) % nNodes].push(room);
    }
    for (let i = 0; i < nodes.length; i++) {
      if (byNode[i].length === 0) continue;
      const gen = spawnChild('loadgen-process.ts', {
        url: `ws://127.0.0.1:${nodes[i].port}`,
        rooms: byNode[i].length,
        roomNames: byNode[i],
        clientsPerRoom: 2,
        opsPerFrame: 20,
        inFlight: Math.max(40, Math.round((IN_FLIGHT * byNode[i].length) / nRooms)),
        tag: `${prefix}-n${i}`,
      });
      gens.push(gen);
    }
    await Promise.all(gens.map((g) => g.ready));
    await Promise.all(gens.map((g) => g.call({ cmd: 'start' })));
    await sleep(WARMUP_MS);
    const natsPids = embedded ? [] : nats.servers.map((s) => s.pid!);
    const snap = async () => ({
      t: performance.now(),
      ops: (await Promise.all(nodes.map(sequenced))).reduce((a, b) => a + b, 0),
      node: nodes.reduce((a, n) => a + cpuSeconds(n.proc.pid!), 0),
      nats: natsPids.reduce((a, p) => a + cpuSeconds(p), 0),
      gen: gens.reduce((a, g) => a + cpuSeconds(g.proc.pid!), 0),
    });
    const snaps = [await snap()];
    for (let w = 0; w < WINDOWS; w++) {
      await sleep(WINDOW_MS);
      snaps.push(await snap());
    }
    const windows = snaps.slice(1).map((b, i) => {
      const a = snaps[i];
      const s = (b.t - a.t) / 1000;
      const ops = b.ops - a.ops;
      return {
        opsPerSec: ops / s,
        node: (b.node - a.node) / s,
        nats: (b.nats - a.nats) / s,
        gen: (b.gen - a.gen) / s,
        ops,
        nodeS: b.node - a.node,
        natsS: b.nats - a.nats,
      };
    });
    const med = [...windows].sort((x, y) => x.opsPerSec - y.opsPerSec)[Math.floor(windows.length / 2)];
    const total = windows.reduce((a, w) => ({ ops: a.ops + w.ops, node: a.node + w.nodeS, nats: a.nats + w.natsS }), { ops: 0, node: 0, nats: 0 });
    return {
      nodes: nNodes,
      rooms: nRooms,
      batch: embedded ? '' : batch,
      opsPerSec: Math.round(med.opsPerSec),
      nodeCores: +med.node.toFixed(2),
      natsCores: +med.nats.toFixed(2),
      loadgenCores: +med.gen.toFixed(2),
      cpuUsPerOp: +(((total.node + total.nats) / total.ops) * 1e6).toFixed(1),
      nodeUsPerOp: +((total.node / total.ops) * 1e6).toFixed(1),
      natsUsPerOp: +((total.nats / total.ops) * 1e6).toFixed(1),
    };
  } finally {
    await Promise.all(gens.map((g) => g.call({ cmd: 'stop' }, 10_000).catch(() => g.proc.kill('SIGKILL'))));
    for (const n of nodes) n.proc.kill('SIGTERM');
    await sleep(1000);
    for (const n of nodes) n.proc.kill('SIGKILL');
  }
}

const data = tempDir('cluster-throughput');
const nats = await startNatsCluster({ nodes: 3, dir: join(data.dir, 'nats') });
const results: Result[] = [];
try {
  let run = 0;
  // The embedded server (SQLite, nodes 0) beside each cluster size, in turn, each round.
  for (let round = 1; round <= ROUNDS; round++)
    for (const rooms of ROOMS)
      for (const [n, batch] of [[0, ''] as const, ...NODES.flatMap((n) => BATCH.map((b) => [n, b] as const))]) {
        const r = await measure(nats, n, rooms, ++run, batch);
        results.push(r);
        console.log(JSON.stringify(r));
      }
} finally {
  await nats.close();
  data.cleanup();
}
console.log('\n| rooms | nodes | batch | ops/s | node cores | NATS cores | load cores | CPU per op (nodes + NATS) | of it nodes | of it NATS |');
console.log('|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|');
for (const r of results)
  console.log(
    `| ${r.rooms} | ${r.nodes || 'embedded'} | ${r.batch} | ${r.opsPerSec} | ${r.nodeCores} | ${r.natsCores} | ${r.loadgenCores} | ${r.cpuUsPerOp} µs | ${r.nodeUsPerOp} µs | ${r.natsUsPerOp} µs |`,
  );
