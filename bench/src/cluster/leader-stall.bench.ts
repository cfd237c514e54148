/**
 * The NATS stream leader's SIGKILL, side by side (issue 42, item 2: "Authoritative stall at most
 * the bare JetStream election measured in the same run plus 1 s"). Three Hercules cluster nodes
 * over a private 3-node NATS cluster, one client with every node's URL submitting a chat message
 * every 50 ms; beside it, a bare JetStream stream (R3) led by the same NATS server as the room's
 * shard stream, and a publisher on its own connection (the node's settings: ping every second,
 * three missed) publishing every 50 ms. Each round SIGKILLs that server, and measures from the
 * kill to the first message sent after it being acknowledged (bare) and to the first op
 * submitted after it being Authoritative (Hercules); then starts the server again and times
 * until both streams have a leader and two current replicas (the restarted replica caught up).
 *
 *   node -C @hercules/source --import tsx bench/src/cluster/leader-stall.bench.ts [--kills 10] [--lease-ms 2000]
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect } from '@hercules/client';
import { auditRoomOnNats, shardOf, startNatsCluster } from '@hercules/cluster';
import { freePort, serveProcess, until } from '@hercules/test-utils';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect } from '@nats-io/transport-node';
import { chat } from '../../../apps/machines.ts';

const arg = (name: string, d: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const KILLS = arg('kills', 10);
const LEASE_MS = arg('lease-ms', 2000);
const SHARDS = 4;
const PREFIX = 'ls';
const ROOM = 'leader-stall-bench';
const BARE = 'BARE_PROBE';
/** LEADER_LOG_DIR=dir: each node's log (info level) in dir/<node>.log. */
const LOG_DIR = process.env.LEADER_LOG_DIR;
if (LOG_DIR) mkdirSync(LOG_DIR, { recursive: true });
const MACHINES = fileURLToPath(new URL('../../../apps/machines.ts', import.meta.url));

const cluster = await startNatsCluster({ nodes: 3 });
const nodes: { id: string; port: number; proc?: ChildProcess }[] = await Promise.all(['n0', 'n1', 'n2'].map(async (id) => ({ id, port: await freePort() })));
// A run that throws leaves no node behind (the NATS servers see to themselves: startNatsCluster).
process.once('exit', () => {
  for (const n of nodes) if (n.proc?.exitCode === null) n.proc.kill('SIGKILL');
});
for (const n of nodes) {
  const args = [
    ...['--machines', MACHINES, '--nats', cluster.urls.join(','), '--node-id', n.id, '--shards', String(SHARDS)],
    ...['--lease-ms', String(LEASE_MS), '--nats-prefix', PREFIX, '--log-level', LOG_DIR ? 'info' : 'error'],
  ];
  const stdio = LOG_DIR ? (['ignore', openSync(join(LOG_DIR, `${n.id}.log`), 'a'), 'pipe'] as const) : undefined;
  n.proc = (await serveProcess(args, { port: n.port, timeoutMs: 120_000, ...(stdio ? { stdio: [...stdio] } : {}) })).proc;
}
const room = await connect({ url: nodes.map((n) => `ws://127.0.0.1:${n.port}`), room: ROOM, machine: chat, onError: () => {} });
await room.whenOnline({ timeoutMs: 30_000 });
const texts = () => room.getState('authoritative').messages;
let sent = 0;
const ticker = setInterval(() => room.submit('say', { text: `m${sent++}` }), 50);
const shardStream = `${PREFIX.toUpperCase()}_${shardOf(ROOM, SHARDS)}`;

// The bare probe: its own connection, as a node's (deployment.ts connectNats).
const nc = await natsConnect({ servers: cluster.urls, maxReconnectAttempts: -1, pingInterval: 1000, maxPingOut: 3 });
const jsm = await jetstreamManager(nc);
const js = jetstream(nc);
await jsm.streams.add({ name: BARE, subjects: ['bare.probe'], num_replicas: 3, max_msgs: 10_000 });
/** Publish times and, once acknowledged, ack times of the bare publisher's messages. */
const bare: { at: number; acked?: number }[] = [];
const bareTicker = setInterval(() => {
  const m: { at: number; acked?: number } = { at: performance.now() };
  bare.push(m);
  js.publish('bare.probe', new Uint8Array(8), { timeout: 30_000 }).then(
    () => (m.acked = performance.now()),
    () => {},
  );
}, 50);

const leaderOf = async (stream: string) => (await jsm.streams.info(stream).catch(() => undefined))?.cluster?.leader;
/** Step the bare stream's leader down until the room's stream leader leads it too. */
async function colocate(): Promise<string> {
  for (let i = 0; i < 40; i++) {
    const want = await leaderOf(shardStream);
    const have = await leaderOf(BARE);
    if (want && have === want) return want;
    if (have) await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${BARE}`, undefined, { timeout: 5000 }).catch(() => {});
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error('could not put the bare stream under the room stream leader');
}
async function healthy(stream: string): Promise<boolean> {
  const i = await jsm.streams.info(stream).catch(() => undefined);
  const replicas = i?.cluster?.replicas ?? [];
  return !!i?.cluster?.leader && replicas.length === 2 && replicas.every((r) => r.current);
}

// Placement settles first (a node is placed shards once heard for 5 s): a shard moving to the
// last node started would otherwise fall in the first kill's window.
await new Promise((r) => setTimeout(r, 7000));
const rows: { bare: number; hercules: number; caughtUp: number; leases: boolean }[] = [];
for (let k = 0; k < KILLS; k++) {
  await until(() => texts().length >= sent - 2, 60_000, 'caught up', 20);
  const leader = await colocate();
  const server = cluster.servers.find((s) => s.name === leader)!;
  const leases = (await leaderOf(`KV_${PREFIX}_owners`)) === leader;
  const t0 = performance.now();
  const wall = Date.now();
  const mark = sent;
  const bareFrom = bare.length;
  await server.kill();
  const [bareMs, herculesMs] = await Promise.all([
    until(() => bare.slice(bareFrom).some((m) => m.acked !== undefined), 60_000, 'a bare publish acknowledged', 5).then(
      () => Math.min(...bare.slice(bareFrom).flatMap((m) => (m.acked === undefined ? [] : [m.acked]))) - t0,
    ),
    until(() => texts().length > mark, 60_000, 'an op after the kill Authoritative', 5).then(() => performance.now() - t0),
  ]);
  const t1 = performance.now();
  await server.start();
  await cluster.ready();
  await until(async () => (await healthy(shardStream)) && (await healthy(BARE)), 120_000, 'both streams with two current replicas', 100);
  const caughtUp = performance.now() - t1;
  rows.push({ bare: bareMs, hercules: herculesMs, caughtUp, leases });
  console.log(
    `kill ${k + 1} at ${wall} (${leader}${leases ? ', also the lease bucket leader' : ''}): bare JetStream ${Math.round(bareMs)} ms, Hercules Authoritative ${Math.round(herculesMs)} ms (${(herculesMs - bareMs) / 1000 >= 0 ? '+' : ''}${((herculesMs - bareMs) / 1000).toFixed(2)} s); restarted replica current after ${Math.round(caughtUp)} ms`,
  );
}
clearInterval(ticker);
clearInterval(bareTicker);
await until(() => texts().length === sent, 60_000, 'every op Authoritative', 20);
const got = texts().map((m) => m.text);
const inOrder = got.length === sent && got.every((t, i) => t === `m${i}`);
const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const diffs = rows.map((r) => r.hercules - r.bare);
const s = (xs: number[]) => `p50 ${Math.round(q(xs, 0.5))} ms, max ${Math.round(Math.max(...xs))} ms`;
console.log(`\n${rows.length} stream-leader SIGKILLs, lease ${LEASE_MS} ms`);
console.log(`bare JetStream election (first ack after the kill): ${s(rows.map((r) => r.bare))}`);
console.log(`Hercules (first op after the kill Authoritative): ${s(rows.map((r) => r.hercules))}`);
console.log(`Hercules minus bare, same kill: ${s(diffs)}; within +1 s: ${diffs.filter((d) => d <= 1000).length}/${diffs.length}`);
console.log(`restarted replica current: ${s(rows.map((r) => r.caughtUp))}`);
const audit = await auditRoomOnNats({ nats: cluster.urls, room: ROOM, prefix: PREFIX, shards: SHARDS });
console.log(`ops: ${sent} submitted, ${got.length} Authoritative, exactly once in order: ${inOrder}`);
console.log(`audit: ${audit.claims} claims, ${audit.counted} records on the chain, problems: ${audit.problems.length ? audit.problems.join('; ') : 'none'}`);
await room.close();
await nc.close();
for (const n of nodes) if (n.proc?.exitCode === null) n.proc.kill('SIGKILL');
await cluster.close();
process.exit(inOrder && audit.problems.length === 0 ? 0 : 1);
