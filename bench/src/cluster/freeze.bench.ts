/**
 * Stalls when a node stops answering (issue 42, item 2), with real processes: three Hercules
 * cluster nodes (`hercules serve --nats`) over a private 3-node NATS cluster, and several clients
 * in one room, each given every node's URL starting at a different node (so some are on the
 * room's owner and the others relayed to it through another node), each submitting a chat message
 * every `--every-ms`. Repeatedly, the node that owns the room's shard is SIGSTOPped (a frozen VM,
 * a long GC pause) and SIGCONTed once every client recovered (at least `--pause-ms` later), or
 * SIGKILLed and started again (`--kills`). For each client, the time from the fault to the first
 * op it submitted after the fault becoming Authoritative is recorded. At the end every client's
 * ops must be Authoritative exactly once, in order, and the room's audit clean.
 *
 * The first `--baseline` clients (default 0) give a link up after 15 s without a frame (the
 * client's watchdog before it followed the server's heartbeat), the others after `--watchdog-ms`,
 * or by default twice the heartbeat the node announces (its default for a cluster node, 1 s):
 * both kinds see the same faults in the same run.
 *
 *   node -C @hercules/source --import tsx bench/src/cluster/freeze.bench.ts [--freezes 20] [--kills 0]
 *     [--clients 6] [--baseline 0] [--watchdog-ms 0 (derived)] [--heartbeat-ms 0 (the node's default)] [--lease-ms 2000]
 *     [--every-ms 200] [--pause-ms 4000] [--settle-ms 12000]
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect, type ConnectedRoom } from '@hercules/client';
import { auditRoomOnNats, shardOf, startNatsCluster } from '@hercules/cluster';
import { freePort, serveProcess, until } from '@hercules/test-utils';
import { chat } from '../../../apps/machines.ts';

const arg = (name: string, d: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const FREEZES = arg('freezes', 20);
const KILLS = arg('kills', 0);
const CLIENTS = arg('clients', 6);
const BASELINE = arg('baseline', 0);
const WATCHDOG_MS = arg('watchdog-ms', 0);
const HEARTBEAT_MS = arg('heartbeat-ms', 0);
const LEASE_MS = arg('lease-ms', 2000);
const EVERY_MS = arg('every-ms', 200);
const PAUSE_MS = arg('pause-ms', 4000);
const SETTLE_MS = arg('settle-ms', 12_000);
/** Clients that join through the owner just before each fault (its own clients), and leave after it. */
const DIRECT = arg('direct', 2);
const SHARDS = 4;
const PREFIX = 'fz';
const ROOM = 'freeze-bench';
/** FREEZE_LOG_DIR=dir: each node's log (info level) in dir/<node>.log. */
const LOG_DIR = process.env.FREEZE_LOG_DIR;
if (LOG_DIR) mkdirSync(LOG_DIR, { recursive: true });
const MACHINES = fileURLToPath(new URL('../../../apps/machines.ts', import.meta.url));

interface Node {
  id: string;
  port: number;
  proc?: ChildProcess;
}
interface Client {
  i: number;
  baseline: boolean;
  /** Joined through the owner just before a fault (DIRECT); it leaves after. */
  direct?: boolean;
  done?: boolean;
  room: ConnectedRoom<typeof chat>;
  sent: number;
  ms: number[];
  /** Status changes (performance.now, status, detail): printed for a recovery over 3 s. */
  statuses: [number, string, string][];
}

const cluster = await startNatsCluster({ nodes: 3 });
const nodes: Node[] = await Promise.all(['n0', 'n1', 'n2'].map(async (id) => ({ id, port: await freePort() })));

async function start(n: Node): Promise<void> {
  const args = [
    ...['--machines', MACHINES, '--nats', cluster.urls.join(','), '--node-id', n.id, '--shards', String(SHARDS)],
    ...['--lease-ms', String(LEASE_MS), '--nats-prefix', PREFIX, '--log-level', LOG_DIR ? 'info' : 'error'],
    ...(HEARTBEAT_MS ? ['--heartbeat', String(HEARTBEAT_MS)] : []),
  ];
  const stdio = LOG_DIR ? (['ignore', openSync(join(LOG_DIR, `${n.id}.log`), 'a'), 'pipe'] as const) : undefined;
  n.proc = (await serveProcess(args, { port: n.port, timeoutMs: 120_000, ...(stdio ? { stdio: [...stdio] } : {}) })).proc;
}
async function health(n: Node): Promise<{ ok: boolean; shards: number[] } | undefined> {
  return fetch(`http://127.0.0.1:${n.port}/healthz`, { signal: AbortSignal.timeout(1000) }).then(
    (r) => r.json(),
    () => undefined,
  );
}

// A run that throws leaves no node behind (the NATS servers see to themselves: startNatsCluster).
process.once('exit', () => {
  for (const n of nodes) if (n.proc?.exitCode === null) n.proc.kill('SIGKILL');
});
for (const n of nodes) await start(n);
const clients: Client[] = [];
for (let i = 0; i < CLIENTS; i++) {
  const urls = nodes.map((_, k) => `ws://127.0.0.1:${nodes[(i + k) % nodes.length].port}`);
  const baseline = i < BASELINE;
  const room = await connect({
    url: urls,
    room: ROOM,
    machine: chat,
    clientId: `c${i}`,
    onError: () => {},
    ...(baseline ? { watchdogMs: 15_000 } : WATCHDOG_MS ? { watchdogMs: WATCHDOG_MS } : {}),
  });
  await room.whenOnline({ timeoutMs: 30_000 });
  const c: Client = { i, baseline, room, sent: 0, ms: [], statuses: [] };
  room.onStatus((st, detail) => c.statuses.push([performance.now(), st, detail ?? '']));
  clients.push(c);
}
const ticker = setInterval(() => {
  for (const c of clients) if (!c.done) c.room.submit('say', { text: `c${c.i}-${c.sent++}` });
}, EVERY_MS);
const shard = shardOf(ROOM, SHARDS);

/** The highest index of client `c`'s messages in its Authoritative view (a scan from the end, bounded). */
function lastOwn(c: Client): number {
  const msgs = c.room.getState('authoritative').messages;
  const prefix = `c${c.i}-`;
  for (let k = msgs.length - 1, seen = 0; k >= 0 && seen < 2000; k--, seen++)
    if (msgs[k].text.startsWith(prefix)) return Number(msgs[k].text.slice(prefix.length));
  return -1;
}

/** Each client's time from now to an op it submits after now being Authoritative. */
async function recoveries(): Promise<(number | undefined)[]> {
  const t0 = performance.now();
  const marks = clients.map((c) => c.sent);
  const out: (number | undefined)[] = clients.map((c) => (c.done ? -1 : undefined));
  while (out.some((x) => x === undefined) && performance.now() - t0 < 60_000) {
    for (const c of clients) if (out[c.i] === undefined && lastOwn(c) >= marks[c.i]) out[c.i] = performance.now() - t0;
    await new Promise((r) => setTimeout(r, 10));
  }
  return out;
}

async function owner(): Promise<Node> {
  let found: Node | undefined;
  await until(
    async () => {
      for (const n of nodes) if ((await health(n))?.shards.includes(shard)) found = n;
      return found !== undefined;
    },
    30_000,
    'a node to own the room',
    100,
  );
  return found!;
}

const caughtUp = () => until(() => clients.every((c) => c.done || lastOwn(c) >= c.sent - 3), 60_000, 'every client caught up', 20);

/** Whether every op of `c` is Authoritative exactly once, in order (printed). */
function verify(c: Client): boolean {
  const prefix = `c${c.i}-`;
  const mine = c.room
    .getState('authoritative')
    .messages.filter((m) => m.text.startsWith(prefix))
    .map((m) => Number(m.text.slice(prefix.length)));
  const ok = mine.length === c.sent && mine.every((x, k) => x === k);
  if (!ok || !c.direct)
    console.log(`client c${c.i}: ${c.sent} submitted, ${mine.length} Authoritative, distinct ${new Set(mine).size}, exactly once in order: ${ok}`);
  return ok;
}
let bad = 0;

/** DIRECT clients whose first URL is the owner's: on it, not relayed. */
async function joinDirect(o: Node): Promise<Client[]> {
  const out: Client[] = [];
  for (let j = 0; j < DIRECT; j++) {
    const k = nodes.indexOf(o);
    const urls = nodes.map((_, m) => `ws://127.0.0.1:${nodes[(k + m) % nodes.length].port}`);
    const i = clients.length;
    const room = await connect({ url: urls, room: ROOM, machine: chat, clientId: `c${i}`, onError: () => {} });
    await room.whenOnline({ timeoutMs: 30_000 });
    const c: Client = { i, baseline: false, direct: true, room, sent: 0, ms: [], statuses: [] };
    room.onStatus((st, detail) => c.statuses.push([performance.now(), st, detail ?? '']));
    clients.push(c);
    out.push(c);
  }
  await caughtUp();
  // A ping or two first: the watchdog follows the interval they name.
  await new Promise((r) => setTimeout(r, 2500));
  return out;
}

async function leave(cs: Client[]): Promise<void> {
  for (const c of cs) c.done = true;
  await until(() => cs.every((c) => lastOwn(c) === c.sent - 1), 60_000, 'the direct clients caught up', 20);
  for (const c of cs) {
    if (!verify(c)) bad++;
    await c.room.close();
  }
}

async function fault(kind: 'freeze' | 'kill', n: number): Promise<void> {
  await caughtUp();
  const o = await owner();
  const direct = await joinDirect(o);
  if ((await owner()) !== o) console.log('  (the room moved while the direct clients joined)');
  const t0 = performance.now();
  const wall = Date.now();
  if (kind === 'freeze') o.proc!.kill('SIGSTOP');
  else {
    const exited = new Promise((r) => o.proc!.once('exit', r));
    o.proc!.kill('SIGKILL');
    await exited;
  }
  const ms = await recoveries();
  if (kind === 'freeze') {
    await new Promise((r) => setTimeout(r, Math.max(0, PAUSE_MS - (performance.now() - t0))));
    o.proc!.kill('SIGCONT');
  } else await start(o);
  // Faults apart: placement moves the room back to the node once it has been heard for 5 s
  // (settleMs), and its members reconnect; the next fault comes after that, on connections
  // that held (a client's backoff starts again only after a connection that held 5 s).
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  for (const c of clients) if (ms[c.i] !== undefined && ms[c.i]! >= 0) c.ms.push(ms[c.i]!);
  for (const c of clients)
    if (!c.baseline && !c.done && !(ms[c.i]! <= 3000))
      console.log(
        `  c${c.i}: ${c.statuses
          .filter(([t]) => t >= t0 - 1000 && t <= t0 + 20_000)
          .map(([t, st, d]) => `${Math.round(t - t0)} ${st} ${d.slice(0, 90)}`)
          .join(' | ')}`,
      );
  const show = (cs: Client[]) => cs.map((c) => (ms[c.i] === undefined ? 'none' : `${Math.round(ms[c.i]!)}`)).join(' ');
  console.log(
    `${kind} ${n + 1} at ${wall} (${o.id}): next op Authoritative, ms: on it ${show(direct)}; the others ${show(clients.filter((c) => !c.direct && !c.done))}`,
  );
  await leave(direct);
}

for (let k = 0; k < FREEZES; k++) await fault('freeze', k);
for (let k = 0; k < KILLS; k++) await fault('kill', k);

clearInterval(ticker);
await until(() => clients.every((c) => c.done || lastOwn(c) === c.sent - 1), 60_000, 'every op Authoritative', 20);
const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const report = (label: string, xs: number[]) =>
  xs.length
    ? console.log(
        `${label}: ${xs.length} recoveries, p50 ${Math.round(q(xs, 0.5))} ms, p99 ${Math.round(q(xs, 0.99))} ms, max ${Math.round(Math.max(...xs))} ms`,
      )
    : undefined;
console.log(
  `\n${FREEZES} freezes (SIGSTOP >= ${PAUSE_MS} ms), ${KILLS} kills; lease ${LEASE_MS} ms, server heartbeat ${HEARTBEAT_MS || 'default'} ms, ${CLIENTS} clients, an op each every ${EVERY_MS} ms`,
);
const watchdog = `watchdog ${WATCHDOG_MS ? `${WATCHDOG_MS} ms` : 'derived'}`;
report(
  `the faulty node's own clients (${watchdog})`,
  clients.filter((c) => c.direct).flatMap((c) => c.ms),
);
report(
  `the other clients (${watchdog})`,
  clients.filter((c) => !c.baseline && !c.direct).flatMap((c) => c.ms),
);
report(
  `every client (${watchdog})`,
  clients.filter((c) => !c.baseline).flatMap((c) => c.ms),
);
report(
  'watchdog 15 s',
  clients.filter((c) => c.baseline).flatMap((c) => c.ms),
);
for (const c of clients) if (!c.done && !verify(c)) bad++;
console.log(`clients that joined through the owner before a fault: ${clients.filter((c) => c.direct).length}, each exactly once in order unless printed above`);
const audit = await auditRoomOnNats({ nats: cluster.urls, room: ROOM, prefix: PREFIX, shards: SHARDS });
console.log(
  `audit: ${audit.claims} claims, ${audit.counted} records on the chain, ignored ${JSON.stringify(audit.ignored)}, problems: ${audit.problems.length ? audit.problems.join('; ') : 'none'}`,
);
for (const c of clients) if (!c.done) await c.room.close();
for (const n of nodes) if (n.proc?.exitCode === null) n.proc.kill('SIGKILL');
await cluster.close();
process.exit(bad === 0 && audit.problems.length === 0 ? 0 : 1);
