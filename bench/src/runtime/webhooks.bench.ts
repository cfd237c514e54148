/**
 * Do webhooks slow the commit path? (issue 16, part 3.) One server in this process (SQLite in a
 * temp dir), one client (memory store) in this process too ordering ops one at a time as fast as Authoritative comes
 * back, then a burst; with no webhook, and with one whose receiver (its own process) answers
 * each request after 20 ms. Runs alternate none / webhook; per run: Authoritative p50/p99 of the
 * one-at-a-time ops and the burst's ops per second.
 *
 *   node -C @hercules/source --import tsx bench/src/runtime/webhooks.bench.ts [--ops 1000] [--burst 4000] [--rounds 3]
 */
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import { connect, memoryStorage } from '@hercules/client';
import { createServer, newWebhookSecret } from '@hercules/server';
import { chat } from '../../../apps/machines.ts';
import { removeTemp, sleep, tempDir } from './common.ts';

const { values } = parseArgs({
  options: { ops: { type: 'string', default: '1000' }, burst: { type: 'string', default: '4000' }, rounds: { type: 'string', default: '3' } },
});
const OPS = Number(values.ops),
  BURST = Number(values.burst),
  ROUNDS = Number(values.rounds);

// The receiver runs in its own process, as a backend would: its request parsing must not be
// counted against the server's CPU. It answers each POST after 20 ms and GET / with the number of
// entries it has received so far.
const RECEIVER = `
const http = require('node:http');
let received = 0;
const srv = http.createServer((req, res) => {
  if (req.method === 'GET') return res.end(String(received));
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    received += JSON.parse(Buffer.concat(chunks).toString('utf8')).entries.length;
    setTimeout(() => res.writeHead(200).end(), 20);
  });
});
srv.listen(0, '127.0.0.1', () => console.log('PORT ' + srv.address().port));
`;
const receiverProc = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit'] });
const receiverPort = await new Promise<number>((resolve, reject) => {
  receiverProc.once('exit', (code) => reject(new Error(`the webhook receiver exited with ${code}`)));
  receiverProc.stdout.on('data', (d: Buffer) => {
    const m = /PORT (\d+)/.exec(d.toString());
    if (m) resolve(Number(m[1]));
  });
});
const hookUrl = `http://127.0.0.1:${receiverPort}/`;
const receivedSoFar = async () => Number(await (await fetch(hookUrl)).text());

const pct = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];

async function run(withHook: boolean): Promise<{ p50: number; p99: number; burstPerS: number; delivered: number }> {
  const dir = tempDir('webhook-bench');
  const receivedBefore = await receivedSoFar();
  const srv = await createServer({
    port: 0,
    dataDir: dir,
    machines: [chat],
    log: 'silent',
    ...(withHook ? { webhooks: [{ url: hookUrl, secret: newWebhookSecret() }] } : {}),
  });
  const c = await connect({ url: srv.url, room: 'bench', machine: chat, clientId: 'bench', storage: memoryStorage() });
  while (c.status() !== 'online') await sleep(5);
  const lat: number[] = [];
  for (let i = 0; i < OPS; i++) {
    const t0 = performance.now();
    await c.ops.say({ text: `one ${i}` }).authoritative;
    lat.push(performance.now() - t0);
  }
  const t0 = performance.now();
  const hs = Array.from({ length: BURST }, (_, i) => c.ops.say({ text: `burst ${i}` }));
  await Promise.all(hs.map((h) => h.authoritative));
  const burstPerS = BURST / ((performance.now() - t0) / 1000);
  let delivered = 0;
  if (withHook)
    for (const end = Date.now() + 60_000; delivered < OPS + BURST && Date.now() < end; ) {
      await sleep(20);
      delivered = (await receivedSoFar()) - receivedBefore;
    }
  await c.close();
  await srv.close();
  removeTemp(dir);
  return { p50: pct(lat, 0.5), p99: pct(lat, 0.99), burstPerS, delivered };
}

const rows: string[] = [];
for (let r = 1; r <= ROUNDS; r++) {
  for (const withHook of [false, true]) {
    const x = await run(withHook);
    rows.push(
      `| ${withHook ? 'webhook' : 'none'} ${r} | ${x.p50.toFixed(2)} / ${x.p99.toFixed(2)} ms | ${x.burstPerS.toFixed(0)} | ${withHook ? x.delivered : '-'} |`,
    );
    console.log(rows[rows.length - 1]);
  }
}
console.log(
  `\n| run | Authoritative p50 / p99, one at a time (${OPS}) | burst ops/s (${BURST}) | ops delivered to the receiver |\n|---|---|--:|--:|\n${rows.join('\n')}`,
);
receiverProc.kill();
