/**
 * Paper Figure 13, delay to each view: the spreadsheet typing workload (client A sets a cell
 * every 100 ms, the next letter of a word; client B receives), 2 clients, each with a SQLite
 * client store, through the delay proxy at RTT 67 ms (the same proxy the peers go through;
 * runtime benchmark R2 emulates the RTT inside the server instead). Per op of A: delay from
 * submit to Durable, Authoritative and Visible; ratios to the physical limits
 * (Authoritative / RTT, Visible / 2·RTT).
 *
 *   node --import tsx bench/src/paper/fig13-views.ts [--seconds 20] [--rtt 67]
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect, type OpHandle } from '@hercules/client';
import { sqliteStorage } from '@hercules/client/sqlite';
import { spreadsheet } from '../../../apps/machines.ts';
import { removeTemp, sleep, startServer, tempDir } from '../runtime/common.ts';
import { startDelayProxy } from './delay-proxy.ts';
import { writePaperSection } from './report.ts';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '20' }, rtt: { type: 'string', default: '67' } } });
const SECONDS = Number(values.seconds), RTT = Number(values.rtt);
const server = await startServer();
const proxy = await startDelayProxy({ target: { port: server.port }, rttMs: RTT });
const dir = tempDir('fig13');
const room = `fig13-${Date.now()}`;
const a = await connect({ url: proxy.url(), room, machine: spreadsheet, clientId: 'typist', storage: sqliteStorage(join(dir, 'a.sqlite')) });
const b = await connect({ url: proxy.url(), room, machine: spreadsheet, clientId: 'reader', storage: sqliteStorage(join(dir, 'b.sqlite')) });
while (a.members().length < 2 || b.members().length < 2) await sleep(20);
const words = ['Gear', 'Sprocket', 'Flange', 'Bracket', 'Widget'];
const type = async (ms: number, keep: OpHandle[] | undefined) => {
  const end = performance.now() + ms;
  let i = 0;
  while (performance.now() < end) {
    const w = words[i % words.length];
    for (let n = 1; n <= w.length && performance.now() < end; n++) {
      const h = a.ops.setCell({ row: i % 12, col: 1, text: w.slice(0, n) });
      keep?.push(h);
      await sleep(100);
    }
    i++;
  }
};
await type(2000, undefined); // warm-up
const hs: OpHandle[] = [];
await type(SECONDS * 1000, hs);
await Promise.race([Promise.all(hs.map((h) => h.visible)), sleep(5000)]);
const pct = (xs: number[], q: number) => { const s = [...xs].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };
const d = (stage: 'durable' | 'authoritative' | 'visible') => hs.filter((h) => h.times[stage] !== undefined).map((h) => h.times[stage]! - h.times.submitted!);
const rows = (['durable', 'authoritative', 'visible'] as const).map((v) => {
  const xs = d(v);
  const ideal = v === 'authoritative' ? RTT : v === 'visible' ? 2 * RTT : NaN;
  return { view: v, ops: xs.length, medianMs: +pct(xs, 0.5).toFixed(2), p99Ms: +pct(xs, 0.99).toFixed(2), idealMs: ideal, medianPerIdeal: +(pct(xs, 0.5) / ideal).toFixed(3), p99PerIdeal: +(pct(xs, 0.99) / ideal).toFixed(3) };
});
console.table(rows);
const auth = rows[1], vis = rows[2], dur = rows[0];
console.log(`goals: Authoritative within 2% of RTT: ${auth.medianPerIdeal} -> ${auth.medianPerIdeal <= 1.02 ? 'met' : 'missed'}; Visible within 3% of 2·RTT: ${vis.medianPerIdeal} -> ${vis.medianPerIdeal <= 1.03 ? 'met' : 'missed'}; Durable p50 under 1 ms: ${dur.medianMs} ms -> ${dur.medianMs < 1 ? 'met' : 'missed'}`);
await a.close(); await b.close(); await proxy.close(); await server.close(); removeTemp(dir);
writePaperSection('fig13', { params: { seconds: SECONDS, everyMs: 100, rttMs: RTT, clients: 2, storage: 'sqlite' }, rows });
process.exit(0);
