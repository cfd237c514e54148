/**
 * Paper Fig. 13's workload (client A sets a cell every 100 ms, B receives; SQLite client stores;
 * the delay proxy at RTT 67 ms) against three servers, alternated in one run:
 *   embedded   the CLI's embedded server (SQLite, synchronous=FULL)
 *   cluster    a cluster node (`serve --nats`, a private 3-server NATS cluster, R3 streams),
 *              both clients on the node that owns the room
 *   relayed    the same, both clients on another node, which relays to the owner
 * Reports the median delay from submit to Durable, Authoritative and Visible.
 *
 *   node -C @hercules/source --import tsx bench/src/cluster/fig13-cluster.ts [--seconds 15] [--rounds 2] [--rtt 67]
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { connect, type OpHandle } from '@hercules/client';
import { sqliteStorage } from '@hercules/client-sqlite';
import { startNatsCluster } from '@hercules/cluster';
import { serveProcess, tempDir } from '@hercules/test-utils';
import { spreadsheet } from '../../../apps/machines.ts';
import { startDelayProxyProcess } from '../paper/delay-proxy.ts';

const { values } = parseArgs({
  options: { seconds: { type: 'string', default: '15' }, rounds: { type: 'string', default: '2' }, rtt: { type: 'string', default: '67' } },
});
const SECONDS = Number(values.seconds),
  ROUNDS = Number(values.rounds),
  RTT = Number(values.rtt);
const MACHINES = fileURLToPath(new URL('../../../apps/machines.ts', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const serve = (args: string[]) => serveProcess(['--machines', MACHINES, '--log-level', 'error', ...args], { stdio: 'ignore' });

const data = tempDir('fig13-cluster');
const nats = await startNatsCluster({ nodes: 3 });
const embedded = await serve(['--data-dir', join(data.dir, 'embedded')]);
const nodeA = await serve(['--nats', nats.urls.join(','), '--node-id', 'a', '--shards', '4']);
const nodeB = await serve(['--nats', nats.urls.join(','), '--node-id', 'b', '--shards', '4']);

async function run(label: string, port: number, room: string): Promise<{ label: string; durable: number; authoritative: number; visible: number }> {
  const proxy = await startDelayProxyProcess({ target: { port }, rttMs: RTT });
  const a = await connect({ url: proxy.url(), room, machine: spreadsheet, clientId: 'typist', storage: sqliteStorage(join(data.dir, `${room}-a.sqlite`)) });
  const b = await connect({ url: proxy.url(), room, machine: spreadsheet, clientId: 'reader', storage: sqliteStorage(join(data.dir, `${room}-b.sqlite`)) });
  while (a.members().length < 2 || b.members().length < 2) await sleep(20);
  const type = async (ms: number, keep?: OpHandle[]) => {
    const end = performance.now() + ms;
    for (let i = 0; performance.now() < end; i++) {
      keep?.push(a.ops.setCell({ row: i % 12, col: 1, text: `w${i}` }));
      await sleep(100);
    }
  };
  await type(2000);
  const hs: OpHandle[] = [];
  await type(SECONDS * 1000, hs);
  await Promise.race([Promise.all(hs.map((h) => h.visible)), sleep(5000)]);
  const med = (stage: 'durable' | 'authoritative' | 'visible') => {
    const xs = hs
      .filter((h) => h.times[stage] !== undefined)
      .map((h) => h.times[stage]! - h.times.submitted!)
      .sort((x, y) => x - y);
    return +xs[Math.floor(xs.length / 2)].toFixed(2);
  };
  const out = { label, durable: med('durable'), authoritative: med('authoritative'), visible: med('visible') };
  await a.close();
  await b.close();
  await proxy.close();
  return out;
}

const results: Awaited<ReturnType<typeof run>>[] = [];
try {
  for (let r = 1; r <= ROUNDS; r++) {
    results.push(await run(`embedded ${r}`, embedded.port, `e${r}`));
    // The room's first client reaches node a, which takes its shard; the relayed run's clients reach node b.
    results.push(await run(`cluster ${r}`, nodeA.port, `c${r}`));
    const owned = await (await fetch(`http://127.0.0.1:${nodeB.port}/healthz`)).json();
    results.push(await run(`relayed ${r}${owned.shards.length ? ' (b owns shards too)' : ''}`, nodeB.port, `c${r}`));
    for (const x of results.slice(-3)) console.log(JSON.stringify(x));
  }
} finally {
  for (const s of [embedded, nodeA, nodeB]) s.proc.kill('SIGTERM');
  await sleep(500);
  await nats.close();
  data.cleanup();
}
console.log('| run | Durable p50 ms | Authoritative p50 ms | Visible p50 ms |');
console.log('|---|--:|--:|--:|');
for (const x of results) console.log(`| ${x.label} | ${x.durable} | ${x.authoritative} | ${x.visible} |`);
