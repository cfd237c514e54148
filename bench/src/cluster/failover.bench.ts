/**
 * Failover, measured with real processes: three Hercules cluster nodes (`hercules serve --nats`)
 * over a private 3-node NATS cluster, one client given every node's URL, submitting a chat
 * message every 50 ms. Repeatedly:
 *   - node kills: SIGKILL the node serving the room (then start it again);
 *   - NATS kills: SIGKILL the NATS server leading the room's shard stream (then start it again);
 *   - NATS pauses: SIGSTOP that server (a frozen VM, a long GC pause), SIGCONT once the room
 *     moved on (a node connected to it must notice by its pings and use another server);
 * and time from each kill to the first op submitted after it becoming Authoritative. At the end
 * every op must be Authoritative exactly once, in order.
 *
 *   node -C @hercules/source --import tsx bench/src/cluster/failover.bench.ts [--node-kills 10] [--nats-kills 3] [--nats-pauses 0] [--lease-ms 2000]
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect } from '@hercules/client';
import { auditRoomOnNats, shardOf, startNatsCluster } from '@hercules/cluster';
import { freePort, serveProcess, until } from '@hercules/test-utils';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect } from '@nats-io/transport-node';
import { chat } from '../../../apps/machines.ts';

const arg = (name: string, d: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const NODE_KILLS = arg('node-kills', 10);
const NATS_KILLS = arg('nats-kills', 3);
const NATS_PAUSES = arg('nats-pauses', 0);
const LEASE_MS = arg('lease-ms', 2000);
const SHARDS = 4;
/** FAILOVER_LOG_DIR=dir: each node's log (info level) in dir/<node>.log. */
const LOG_DIR = process.env.FAILOVER_LOG_DIR;
if (LOG_DIR) mkdirSync(LOG_DIR, { recursive: true });
const PREFIX = 'fo';
const ROOM = 'failover-bench';
const MACHINES = fileURLToPath(new URL('../../../apps/machines.ts', import.meta.url));

const cluster = await startNatsCluster({ nodes: 3 });
interface Node {
  id: string;
  port: number;
  proc?: ChildProcess;
}
const nodes: Node[] = await Promise.all(['n0', 'n1', 'n2'].map(async (id) => ({ id, port: await freePort() })));

async function start(n: Node): Promise<void> {
  const args = [
    ...['--machines', MACHINES, '--nats', cluster.urls.join(','), '--node-id', n.id, '--shards', String(SHARDS)],
    ...['--lease-ms', String(LEASE_MS), '--nats-prefix', PREFIX],
  ];
  const logs = LOG_DIR ? ['ignore' as const, openSync(join(LOG_DIR, `${n.id}.log`), 'a'), openSync(join(LOG_DIR, `${n.id}.err`), 'a')] : ('ignore' as const);
  n.proc = (await serveProcess([...args, '--log-level', LOG_DIR ? 'info' : 'error'], { port: n.port, stdio: logs })).proc;
}
async function health(n: Node): Promise<{ ok: boolean; shards: number[]; rooms: number } | undefined> {
  return fetch(`http://127.0.0.1:${n.port}/healthz`, { signal: AbortSignal.timeout(1000) }).then(
    (r) => r.json(),
    () => undefined,
  );
}
async function kill(n: Node): Promise<void> {
  const p = n.proc!;
  const exited = new Promise((r) => p.once('exit', r));
  p.kill('SIGKILL');
  await exited;
}

for (const n of nodes) await start(n);
const room = await connect({
  url: nodes.map((n) => `ws://127.0.0.1:${n.port}`),
  room: ROOM,
  machine: chat,
  onError: () => {},
  backoff: { minMs: 50, maxMs: 250 },
});
await room.whenOnline({ timeoutMs: 20_000 });
const texts = () => (room.getState('authoritative') as { messages: { text: string }[] }).messages.map((m) => m.text);
let sent = 0;
const ticker = setInterval(() => room.submit('say', { text: `m${sent++}` } as never), 50);
const shard = shardOf(ROOM, SHARDS);

/** From now, how long until an op submitted after now is Authoritative. */
async function recovery(): Promise<number> {
  const t0 = performance.now();
  const mark = sent;
  try {
    await until(() => texts().length > mark, 60_000, 'an op after the kill to become Authoritative', 5);
  } catch (e) {
    await dumpShard();
    throw e;
  }
  return performance.now() - t0;
}

/** What the room's shard stream holds (claims, the room's checkpoints and last log records), for a post-mortem. */
async function dumpShard(): Promise<void> {
  const { JetStreamShardLog, roomToken } = await import('@hercules/cluster');
  const c = await natsConnect({ servers: cluster.urls });
  const log = await JetStreamShardLog.open(c, { streamPrefix: PREFIX.toUpperCase(), subjectPrefix: PREFIX });
  const show = (m: { seq: number; headers: Record<string, string>; data: Uint8Array }) =>
    `${m.seq} claim ${m.headers['Hc-Claim']} epoch ${m.headers['Hc-Epoch']} rev ${m.headers['Hc-Rev']} part ${m.headers['Hc-Part']}/${m.headers['Hc-Parts']}${m.headers['Hc-Mark'] ? ' mark' : ''} ${m.data.length} B`;
  console.error('claims:', (await log.read(shard, `${PREFIX}.${shard}.claim`)).map(show));
  console.error('ckpts:', (await log.read(shard, `${PREFIX}.${shard}.ckpt.${roomToken(ROOM)}`)).map(show));
  console.error('log (last 12):', (await log.read(shard, `${PREFIX}.${shard}.log.${roomToken(ROOM)}`)).slice(-12).map(show));
  console.error('last seq:', await log.lastSeq(shard));
  await c.close();
}

const nodeMs: number[] = [];
for (let i = 0; i < NODE_KILLS; i++) {
  await until(() => texts().length >= sent - 2, 30_000, 'caught up', 20);
  let owner: Node | undefined;
  for (const n of nodes) if ((await health(n))?.shards.includes(shard)) owner = n;
  if (!owner) throw new Error('no node owns the room now');
  await kill(owner);
  nodeMs.push(await recovery());
  console.log(`node kill ${i + 1} (${owner.id}): ${Math.round(nodeMs[nodeMs.length - 1])} ms`);
  await start(owner);
}

const natsMs: number[] = [];
const pauseMs: number[] = [];
const nc = await natsConnect({ servers: cluster.urls, pingInterval: 1000, maxPingOut: 3 });
const jsm = await jetstreamManager(nc);
async function streamLeader() {
  const info = await jsm.streams.info(`${PREFIX.toUpperCase()}_${shard}`);
  const leader = cluster.servers.find((s) => s.name === info.cluster?.leader);
  if (!leader) throw new Error(`no leader for the stream (${info.cluster?.leader})`);
  return leader;
}
/** One failure at a time: the stream must have a leader and two current replicas before the next. */
async function streamHealthy(): Promise<void> {
  await until(
    async () => {
      const i = await jsm.streams.info(`${PREFIX.toUpperCase()}_${shard}`).catch(() => undefined);
      const replicas = i?.cluster?.replicas ?? [];
      return !!i?.cluster?.leader && replicas.length === 2 && replicas.every((r) => r.current);
    },
    60_000,
    'the stream to have a leader and two current replicas',
    100,
  );
}
for (let i = 0; i < NATS_KILLS; i++) {
  await until(() => texts().length >= sent - 2, 30_000, 'caught up', 20);
  const leader = await streamLeader();
  await leader.kill();
  natsMs.push(await recovery());
  console.log(`NATS stream-leader kill ${i + 1} (${leader.name}): ${Math.round(natsMs[natsMs.length - 1])} ms`);
  await leader.start();
  await cluster.ready();
  await streamHealthy();
}
for (let i = 0; i < NATS_PAUSES; i++) {
  await until(() => texts().length >= sent - 2, 30_000, 'caught up', 20);
  const leader = await streamLeader();
  leader.signal('SIGSTOP');
  try {
    pauseMs.push(await recovery());
  } finally {
    leader.signal('SIGCONT');
  }
  console.log(`NATS stream-leader SIGSTOP ${i + 1} (${leader.name}): ${Math.round(pauseMs[pauseMs.length - 1])} ms`);
  await cluster.ready();
  await streamHealthy();
}
await nc.close().catch(() => {});

clearInterval(ticker);
await until(() => texts().length === sent, 60_000, 'every op Authoritative', 20);
const got = texts();
const expected = Array.from({ length: sent }, (_, i) => `m${i}`);
const lost = expected.filter((t) => !got.includes(t)).length;
const dup = got.length - new Set(got).size;
const inOrder = JSON.stringify(got) === JSON.stringify(expected);
const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
console.log(
  `\nnode kills: ${nodeMs.length}, kill -> first op after it Authoritative: p50 ${Math.round(q(nodeMs, 0.5))} ms, max ${Math.round(Math.max(...nodeMs))} ms (lease ${LEASE_MS} ms)`,
);
if (natsMs.length)
  console.log(`NATS stream-leader kills: ${natsMs.length}, stall: p50 ${Math.round(q(natsMs, 0.5))} ms, max ${Math.round(Math.max(...natsMs))} ms`);
if (pauseMs.length)
  console.log(`NATS stream-leader SIGSTOPs: ${pauseMs.length}, stall: p50 ${Math.round(q(pauseMs, 0.5))} ms, max ${Math.round(Math.max(...pauseMs))} ms`);
console.log(`ops: ${sent} submitted, ${got.length} Authoritative, lost ${lost}, duplicated ${dup}, in order: ${inOrder}`);
// The room's stream, audited as `hercules audit` does: one chain, every op once.
const audit = await auditRoomOnNats({ nats: cluster.urls, room: ROOM, prefix: PREFIX, shards: SHARDS });
console.log(
  `audit: ${audit.claims} claims, ${audit.checkpoints.length} checkpoints, ${audit.counted} records on the chain, ignored ${JSON.stringify(audit.ignored)}, problems: ${audit.problems.length ? audit.problems.join('; ') : 'none'}`,
);
await room.close();
for (const n of nodes) if (n.proc?.exitCode === null) n.proc.kill('SIGKILL');
await cluster.close();
process.exit(lost === 0 && dup === 0 && inOrder && audit.problems.length === 0 ? 0 : 1);
