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
 * `--base-bin PATH`: also cluster nodes of another build (its bin/hercules.js, batched), in turn
 * with the others: old against new in the same run.
 *
 * Every round runs each variant once, in turn, the order reversed every other round (so a load
 * that grows or falls through the run weighs on every variant alike); the machine's 1-minute
 * load average is taken at each measurement. At the end: per variant the medians over rounds of
 * ops/s and CPU per op, and of its ratios to the embedded server of the same round.
 * Batched variants also report the log records a batch message held on average.
 * `--cpu-prof DIR`: every server writes a V8 CPU profile there as it exits.
 *
 *   node -C @hercules/source --import tsx bench/src/cluster/throughput.bench.ts [--nodes 1,2,3] [--rooms 1,1000] [--batch on] [--base-bin PATH] [--rounds 1] [--windows 5] [--window-ms 2000] [--in-flight 2000]
 */
import type { ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
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
    'cpu-prof': { type: 'string' },
    'base-bin': { type: 'string' },
  },
});
const NODES = values.nodes.split(',').map(Number),
  ROOMS = values.rooms.split(',').map(Number),
  WINDOWS = Number(values.windows),
  WINDOW_MS = Number(values['window-ms']),
  WARMUP_MS = Number(values['warmup-ms']),
  IN_FLIGHT = Number(values['in-flight']),
  ROUNDS = Number(values.rounds),
  BATCH = values.batch.split(','),
  /** `--cpu-prof DIR`: the cluster nodes write V8 CPU profiles there (on their SIGTERM exit). */
  PROF_DIR = values['cpu-prof'],
  BASE_BIN = values['base-bin'];
const SHARDS = 12;
const MACHINES = fileURLToPath(new URL('../../../apps/machines.ts', import.meta.url));

interface Node {
  id: string;
  port: number;
  proc: ChildProcess;
}

/** A cluster node over `nats`, or with `dataDir` the embedded server (SQLite), for the baseline. */
async function startNode(id: string, where: { nats: string[]; prefix: string; batch: string; bin?: string } | { dataDir: string }): Promise<Node> {
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
    ...(PROF_DIR ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${PROF_DIR}`] } : {}),
    ...('nats' in where && where.bin ? { bin: where.bin } : {}),
  });
  if (PROF_DIR) console.error(`${id} (${'nats' in where ? `cluster, batch ${where.batch}` : 'embedded'}): pid ${proc.pid}, its profile in ${PROF_DIR}`);
  return { id, port, proc };
}

const metricsOf = async (n: Node) => parseProm(await (await fetch(`http://127.0.0.1:${n.port}/metrics`)).text());

interface Result {
  /** 0: the embedded server (SQLite). */
  nodes: number;
  rooms: number;
  /** Batched appends (cluster nodes): on or off; `base`: the --base-bin build's nodes (batched). */
  batch: string;
  round: number;
  /** The 1-minute load average when the windows ended. */
  load: number;
  /** Log records a batch message held on average over the windows (batched nodes that count them). */
  recordsPerBatch?: number;
  opsPerSec: number;
  nodeCores: number;
  natsCores: number;
  loadgenCores: number;
  /** (nodes + NATS) CPU µs per op. */
  cpuUsPerOp: number;
  nodeUsPerOp: number;
  natsUsPerOp: number;
}

async function measure(
  nats: Awaited<ReturnType<typeof startNatsCluster>>,
  nNodes: number,
  nRooms: number,
  run: number,
  batch: string,
  round: number,
): Promise<Result> {
  const prefix = `tp${run}`;
  const nodes: Node[] = [];
  const gens: Child[] = [];
  const embedded = nNodes === 0;
  try {
    if (embedded) nodes.push(await startNode('embedded', { dataDir: join(data.dir, prefix) }));
    else
      for (let i = 0; i < nNodes; i++)
        nodes.push(
          await startNode(`n${i}`, { nats: nats.urls, prefix, batch: batch === 'base' ? 'on' : batch, ...(batch === 'base' ? { bin: BASE_BIN } : {}) }),
        );
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
    const snap = async () => {
      const ms = await Promise.all(nodes.map(metricsOf));
      const sum = (k: string) => ms.reduce((a, m) => a + (m[k] ?? 0), 0);
      return {
        t: performance.now(),
        ops: sum('hercules_ops_sequenced_total'),
        records: sum('hercules_cluster_batch_records_total'),
        messages: sum('hercules_cluster_batch_messages_total'),
        node: nodes.reduce((a, n) => a + cpuSeconds(n.proc.pid!), 0),
        nats: natsPids.reduce((a, p) => a + cpuSeconds(p), 0),
        gen: gens.reduce((a, g) => a + cpuSeconds(g.proc.pid!), 0),
      };
    };
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
    const first = snaps[0],
      last = snaps[snaps.length - 1];
    return {
      nodes: nNodes,
      rooms: nRooms,
      batch: embedded ? '' : batch,
      round,
      load: loadavg()[0],
      ...(last.messages > first.messages ? { recordsPerBatch: +((last.records - first.records) / (last.messages - first.messages)).toFixed(1) } : {}),
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
    // A profiled node writes its profile as it exits: wait for that (up to 20 s).
    if (PROF_DIR) await Promise.all(nodes.map((n) => Promise.race([new Promise((r) => n.proc.once('exit', r)), sleep(20_000)])));
    await sleep(1000);
    for (const n of nodes) n.proc.kill('SIGKILL');
  }
}

const data = tempDir('cluster-throughput');
const nats = await startNatsCluster({ nodes: 3, dir: join(data.dir, 'nats') });
const results: Result[] = [];
const variants = [[0, ''] as const, ...NODES.flatMap((n) => [...BATCH, ...(BASE_BIN ? ['base'] : [])].map((b) => [n, b] as const))];
try {
  let run = 0;
  // The embedded server (SQLite, nodes 0) beside each cluster size, in turn, each round; every
  // other round in the reverse order.
  for (let round = 1; round <= ROUNDS; round++)
    for (const rooms of ROOMS)
      for (const [n, batch] of round % 2 === 1 ? variants : [...variants].reverse()) {
        const r = await measure(nats, n, rooms, ++run, batch, round);
        results.push(r);
        console.log(JSON.stringify(r));
      }
} finally {
  await nats.close();
  data.cleanup();
}
console.log(
  '\n| round | load | rooms | nodes | batch | ops/s | node cores | NATS cores | load cores | CPU per op (nodes + NATS) | of it nodes | of it NATS | records a batch message |',
);
console.log('|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|');
for (const r of results)
  console.log(
    `| ${r.round} | ${r.load.toFixed(1)} | ${r.rooms} | ${r.nodes || 'embedded'} | ${r.batch} | ${r.opsPerSec} | ${r.nodeCores} | ${r.natsCores} | ${r.loadgenCores} | ${r.cpuUsPerOp} µs | ${r.nodeUsPerOp} µs | ${r.natsUsPerOp} µs | ${r.recordsPerBatch ?? ''} |`,
  );
summary(results);

/** Per variant, medians over the rounds: ops/s, CPU per op, and their ratios to the same round's embedded server. */
function summary(rs: Result[]): void {
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  console.log('\nMedians over rounds (ratios: against the embedded server of the same round and rooms):');
  console.log('\n| rooms | nodes | batch | rounds | load | ops/s | CPU per op | throughput / embedded | CPU per op / embedded |');
  console.log('|--:|--:|---|--:|--:|--:|--:|--:|--:|');
  for (const rooms of ROOMS)
    for (const [n, batch] of variants) {
      const mine = rs.filter((r) => r.rooms === rooms && r.nodes === n && r.batch === batch);
      if (mine.length === 0) continue;
      const base = (r: Result) => rs.find((e) => e.nodes === 0 && e.rooms === rooms && e.round === r.round);
      const paired = mine.filter((r) => base(r));
      const tput = median(paired.map((r) => r.opsPerSec / base(r)!.opsPerSec));
      const cpu = median(paired.map((r) => r.cpuUsPerOp / base(r)!.cpuUsPerOp));
      console.log(
        `| ${rooms} | ${n || 'embedded'} | ${batch} | ${mine.length} | ${median(mine.map((r) => r.load)).toFixed(1)} | ${Math.round(median(mine.map((r) => r.opsPerSec)))} | ${median(mine.map((r) => r.cpuUsPerOp)).toFixed(1)} µs | ${tput.toFixed(2)}x | ${cpu.toFixed(2)}x |`,
      );
    }
}
