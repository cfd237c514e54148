/**
 * Where an op's time goes, A -> server -> B, at RTT 0 (issue 14): one writer A and one reader B
 * connected straight to a server process on loopback (SQLite on both sides, as shipped), A sets
 * a cell every 20 ms. Per op, from the clients (one process, one clock): A's store write
 * (submit -> Durable), A's Authoritative, and B seeing the value. From the server's /metrics
 * (`hercules_op_path_seconds`, always on), the mean of each server stage over the same ops.
 * What is left of Authoritative after the server is A's store write (which the server's work
 * overlaps: ops go out while they are being persisted), the sockets both ways and the codecs.
 *
 *   NODE_OPTIONS="-C @hercules/source" NODE_ENV=production node --import tsx bench/src/runtime/breakdown.ts [--ops 400] [--memory]
 *
 * --memory: the clients use memoryStorage() (no client disk).
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect, memoryStorage } from '@hercules/client';
import { sqliteStorage } from '@hercules/client-sqlite';
import { spreadsheet } from '../../../apps/machines.ts';
import { stats } from '../harness.ts';
import { removeTemp, sleep, startServer, tempDir } from './common.ts';

const { values } = parseArgs({ options: { ops: { type: 'string', default: '400' }, memory: { type: 'boolean', default: false } } });
const OPS = Number(values.ops);
const STAGES = ['queued', 'decode', 'engine', 'commit_wait', 'commit', 'send'] as const;

const server = await startServer();
const dir = tempDir('breakdown');
try {
  const storage = (name: string) => (values.memory ? memoryStorage() : sqliteStorage(join(dir, `${name}.sqlite`)));
  const a = await connect({ url: server.url, room: 'breakdown', machine: spreadsheet, storage: storage('a'), clientId: 'bd-a', sendAhead: true });
  const b = await connect({ url: server.url, room: 'breakdown', machine: spreadsheet, storage: storage('b'), clientId: 'bd-b', sendAhead: true });
  while (a.status() !== 'online' || b.status() !== 'online') await sleep(5);
  const seenAt = new Map<string, number>();
  b.subscribe('authoritative', (s) => {
    const t = performance.now();
    const v = s.cells[0][0];
    if (!seenAt.has(v)) seenAt.set(v, t);
  });
  const run = async (n: number) => {
    const rows: { durable: number; auth: number; delivery: number }[] = [];
    for (let i = 0; i < n; i++) {
      const text = `v${performance.now()}-${i}`;
      const t0 = performance.now();
      const h = a.ops.setCell({ row: 0, col: 0, text });
      await h.authoritative;
      while (!seenAt.has(text)) await sleep(1);
      rows.push({ durable: h.delays.durable!, auth: h.delays.authoritative!, delivery: seenAt.get(text)! - t0 });
      await sleep(20);
    }
    return rows;
  };
  await run(50); // warm-up
  const before = await server.metrics();
  const rows = await run(OPS);
  const after = await server.metrics();
  const mean = (st: string) => {
    const sum = after[`hercules_op_path_seconds_sum{stage="${st}"}`] - before[`hercules_op_path_seconds_sum{stage="${st}"}`];
    const count = after[`hercules_op_path_seconds_count{stage="${st}"}`] - before[`hercules_op_path_seconds_count{stage="${st}"}`];
    return (sum / count) * 1000;
  };
  const p50 = (k: 'durable' | 'auth' | 'delivery') => stats(rows.map((r) => r[k])).median;
  const avg = (k: 'durable' | 'auth' | 'delivery') => rows.reduce((x, r) => x + r[k], 0) / rows.length;
  const server_ = STAGES.reduce((x, st) => x + mean(st), 0);
  const table: Record<string, { 'mean ms': string; 'p50 ms'?: string }> = {};
  table["A's client store (submit -> Durable)"] = { 'mean ms': avg('durable').toFixed(3), 'p50 ms': p50('durable').toFixed(3) };
  for (const st of STAGES) table[`server: ${st}`] = { 'mean ms': mean(st).toFixed(3) };
  table['server, all stages'] = { 'mean ms': server_.toFixed(3) };
  // (Since ops go out while they are being persisted, the store write and the server's stages
  // overlap: this is what Authoritative takes beyond the server, and can be below the write.)
  table["Authoritative beyond the server: A's write (overlapping), sockets both ways, codecs"] = { 'mean ms': (avg('auth') - server_).toFixed(3) };
  table['A: Authoritative (submit -> Notify-Auth applied)'] = { 'mean ms': avg('auth').toFixed(3), 'p50 ms': p50('auth').toFixed(3) };
  table['B: delivery (A submit -> B notified)'] = { 'mean ms': avg('delivery').toFixed(3), 'p50 ms': p50('delivery').toFixed(3) };
  console.log(`${OPS} ops, one every 20 ms, RTT 0, client storage ${values.memory ? 'memory' : 'SQLite'}, NODE_ENV=${process.env.NODE_ENV ?? '(unset)'}`);
  console.table(table);
  await a.close();
  await b.close();
} finally {
  await server.close();
  removeTemp(dir);
}
process.exit(0);
