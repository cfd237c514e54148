/**
 * Where an op's time goes, A -> server -> B, at RTT 0 (issue 14): one writer A and one reader B
 * connected straight to a server process on loopback (SQLite on both sides, as shipped), A sets
 * a cell every 20 ms. Per op, from the clients (one process, one clock): A's store write
 * (submit -> Durable), A's Authoritative, and B seeing the value: in its Submitted view (the
 * delivery the peers' benchmark measures: another client's op shows there before its commit,
 * LOG-TENTATIVE) and in its Authoritative view (once the server stored it). From the server's /metrics
 * (`hercules_op_path_seconds`, always on), the mean of each server stage over the same ops.
 * What is left of Authoritative after the server is A's store write (which the server's work
 * overlaps: ops go out while they are being persisted), the sockets both ways and the codecs.
 * Also the gaps between a 1 ms timer's runs on A's thread: how long A's work held it at a time.
 *
 *   NODE_OPTIONS="-C @hercules/source" NODE_ENV=production node --import tsx bench/src/runtime/breakdown.ts [--ops 400] [--memory] [--b-in-process]
 *
 * --memory: the clients use memoryStorage() (no client disk).
 * B runs in its own process (breakdown-reader.ts), as on another device; --b-in-process puts it
 * in A's, the method before 2026-11-27 (side by side, B's delivery p50 differed by at most 0.3 ms
 * either way; in A's process B's own stages cost less, its code kept warm by A's work).
 * B's own share (decode, apply, notify) comes from its `receiveStats()` over the same ops.
 */
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { connect, memoryStorage } from '@hercules/client';
import { sqliteStorage } from '@hercules/client-sqlite';
import { spreadsheet } from '../../../apps/machines.ts';
import { stats } from '../harness.ts';
import { removeTemp, sleep, spawnChild, startServer, tempDir } from './common.ts';
import type { ReceiveStats } from '@hercules/core';

const { values } = parseArgs({
  options: { ops: { type: 'string', default: '400' }, memory: { type: 'boolean', default: false }, 'b-in-process': { type: 'boolean', default: false } },
});
const OPS = Number(values.ops);
const STAGES = ['queued', 'decode', 'engine', 'tentative', 'apply', 'commit_wait', 'commit', 'send'] as const;

// HERCULES_CPU_PROF_DIR: the server's and B's processes write CPU profiles to <dir>/server and <dir>/reader.
const profDir = process.env.HERCULES_CPU_PROF_DIR;
const server = await startServer(profDir ? { cpuProfDir: join(profDir, 'server') } : {});
const dir = tempDir('breakdown');
try {
  const storage = (name: string) => (values.memory ? memoryStorage() : sqliteStorage(join(dir, `${name}.sqlite`)));
  const a = await connect({ url: server.url, room: 'breakdown', machine: spreadsheet, storage: storage('a'), clientId: 'bd-a', sendAhead: true });
  /** When B saw each value, per view. */
  const seenAt = { submitted: new Map<string, number>(), authoritative: new Map<string, number>() };
  type View = keyof typeof seenAt;
  /** One clock for both processes: ms since the epoch, sub-millisecond. */
  const clock = () => performance.timeOrigin + performance.now();
  let bStats: () => Promise<ReceiveStats>;
  let closeB: () => Promise<unknown>;
  if (values['b-in-process']) {
    const b = await connect({ url: server.url, room: 'breakdown', machine: spreadsheet, storage: storage('b'), clientId: 'bd-b', sendAhead: true });
    await b.whenOnline({ timeoutMs: 30_000 });
    for (const view of ['submitted', 'authoritative'] as const)
      b.subscribe(view, (s) => {
        const t = clock();
        const v = s.cells[0][0];
        if (!seenAt[view].has(v)) seenAt[view].set(v, t);
      });
    bStats = async () => b.receiveStats();
    closeB = () => b.close();
  } else {
    const prof = profDir && join(profDir, 'reader');
    const child = spawnChild(
      'breakdown-reader.ts',
      { url: server.url, ...(values.memory ? {} : { storagePath: join(dir, 'b.sqlite') }) },
      prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : [],
    );
    await child.ready;
    child.proc.on('message', (m: { seen?: string; view?: View; at?: number }) => {
      if (m.seen !== undefined && m.view && !seenAt[m.view].has(m.seen)) seenAt[m.view].set(m.seen, m.at!);
    });
    bStats = async () => (await child.call<{ stats: ReceiveStats }>({ cmd: 'stats' })).stats;
    closeB = async () => {
      await child.call({ cmd: 'close' });
      await child.exited;
    };
  }
  await a.whenOnline({ timeoutMs: 30_000 });
  const run = async (n: number) => {
    const rows: { durable: number; auth: number; delivery: number; bAuth: number }[] = [];
    for (let i = 0; i < n; i++) {
      const text = `v${performance.now()}-${i}`;
      const t0 = clock();
      const h = a.ops.setCell({ row: 0, col: 0, text });
      await h.authoritative;
      while (!seenAt.submitted.has(text) || !seenAt.authoritative.has(text)) await sleep(1);
      rows.push({
        durable: h.delays.durable!,
        auth: h.delays.authoritative!,
        delivery: seenAt.submitted.get(text)! - t0,
        bAuth: seenAt.authoritative.get(text)! - t0,
      });
      await sleep(20);
    }
    return rows;
  };
  await run(50); // warm-up
  const before = await server.metrics();
  const [bBefore, aBefore] = [await bStats(), a.receiveStats()];
  // How long A's thread was held at a time: what an app on it (rendering, input) waits for.
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const rows = await run(OPS);
  loop.disable();
  const [bAfter, aAfter] = [await bStats(), a.receiveStats()];
  const after = await server.metrics();
  const mean = (st: string) => {
    const sum = after[`hercules_op_path_seconds_sum{stage="${st}"}`] - before[`hercules_op_path_seconds_sum{stage="${st}"}`];
    const count = after[`hercules_op_path_seconds_count{stage="${st}"}`] - before[`hercules_op_path_seconds_count{stage="${st}"}`];
    return (sum / count) * 1000;
  };
  type Col = 'durable' | 'auth' | 'delivery' | 'bAuth';
  const p50 = (k: Col) => stats(rows.map((r) => r[k])).median;
  const avg = (k: Col) => rows.reduce((x, r) => x + r[k], 0) / rows.length;
  const server_ = STAGES.reduce((x, st) => x + mean(st), 0);
  const table: Record<string, { 'mean ms': string; 'p50 ms'?: string }> = {};
  table["A's client store (submit -> Durable)"] = { 'mean ms': avg('durable').toFixed(3), 'p50 ms': p50('durable').toFixed(3) };
  for (const st of STAGES) table[`server: ${st}`] = { 'mean ms': mean(st).toFixed(3) };
  table['server, all stages'] = { 'mean ms': server_.toFixed(3) };
  // (Since ops go out while they are being persisted, the store write and the server's stages
  // overlap: this is what Authoritative takes beyond the server, and can be below the write.)
  table["Authoritative beyond the server: A's write (overlapping), sockets both ways, codecs"] = { 'mean ms': (avg('auth') - server_).toFixed(3) };
  table['A: Authoritative (submit -> Notify-Auth applied)'] = { 'mean ms': avg('auth').toFixed(3), 'p50 ms': p50('auth').toFixed(3) };
  // The receivers' own share, per op (each op is one frame to B; A gets its Notify-Auth, and the
  // Notify-Visible and stable frontier that follow, as frames of their own).
  const perOp = (x: ReceiveStats, y: ReceiveStats, k: 'decodeMs' | 'applyMs' | 'notifyMs') => ((y[k] - x[k]) / OPS).toFixed(3);
  table['B: decode (per op)'] = { 'mean ms': perOp(bBefore, bAfter, 'decodeMs') };
  table['B: apply (view engine, per op)'] = { 'mean ms': perOp(bBefore, bAfter, 'applyMs') };
  table['B: notify (subscribers, per op)'] = { 'mean ms': perOp(bBefore, bAfter, 'notifyMs') };
  const where = values['b-in-process'] ? ", B in A's process" : ', B in its own process';
  table[`B: delivery (A submit -> B's Submitted notified${where})`] = { 'mean ms': avg('delivery').toFixed(3), 'p50 ms': p50('delivery').toFixed(3) };
  table[`B: Authoritative (A submit -> B's Authoritative notified, after the commit${where})`] = {
    'mean ms': avg('bAuth').toFixed(3),
    'p50 ms': p50('bAuth').toFixed(3),
  };
  table["A: its own frames' decode + apply + notify (per op)"] = {
    'mean ms': ((aAfter.decodeMs - aBefore.decodeMs + aAfter.applyMs - aBefore.applyMs + aAfter.notifyMs - aBefore.notifyMs) / OPS).toFixed(3),
  };
  console.log(
    `frames per op: B ${((bAfter.frames - bBefore.frames) / OPS).toFixed(2)}, A ${((aAfter.frames - aBefore.frames) / OPS).toFixed(2)}; notification rounds per op: B ${((bAfter.notifies - bBefore.notifies) / OPS).toFixed(2)}`,
  );
  console.log(`${OPS} ops, one every 20 ms, RTT 0, client storage ${values.memory ? 'memory' : 'SQLite'}, NODE_ENV=${process.env.NODE_ENV ?? '(unset)'}`);
  console.table(table);
  const ms = (ns: number) => (ns / 1e6).toFixed(2);
  console.log(
    `A's event loop over the run, the gap between a 1 ms timer's runs (1.1 ms when nothing holds the thread): p50 ${ms(loop.percentile(50))}, p99 ${ms(loop.percentile(99))}, max ${ms(loop.max)} ms`,
  );
  await a.close();
  await closeB();
} finally {
  await server.close();
  removeTemp(dir);
}
process.exit(0);
