/**
 * What delivery receipts cost on the wire (issue 41, item 3): frames and bytes the server sends
 * per op in a room of N members, with receipts off, with only the writer listening (what the
 * chat demo does on the writer's screen), and with every member listening. A real server and N
 * real clients over WebSocket in this process; one writer says OPS messages, each after the
 * previous one is Visible (a chat's pace: every op is acked by everyone before the next). Counts
 * are the server's own metrics (hercules_frames_sent_total, _by_type, hercules_bytes_sent_total),
 * read before and after. The modes alternate per N (off, writer, all, then all, writer, off) in
 * one run, and each figure is the mean of the two. Counts, not times: the machine's load moves
 * them only through how acks of one turn coalesce.
 *
 *   node --conditions=@hercules/source --import tsx bench/src/receipts.bench.ts [N...]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type ConnectedRoom } from '@hercules/client';
import { createServer } from '@hercules/server';
import { chat } from '../../apps/machines.ts';

const OPS = 100;
type Mode = 'off' | 'writer' | 'all';

async function counters(srv: Awaited<ReturnType<typeof createServer>>): Promise<{ frames: number; bytes: number; acks: number; acksBytes: number }> {
  const m = srv.metrics;
  const frames = (await m.framesOut.get()).values.reduce((a, v) => a + v.value, 0);
  const bytes = (await m.bytesOut.get()).values.reduce((a, v) => a + v.value, 0);
  const acks = (await m.framesOutByType.get()).values.filter((v) => v.labels.type === 'acks').reduce((a, v) => a + v.value, 0);
  return { frames, bytes, acks, acksBytes: 0 };
}

async function run(n: number, mode: Mode, round: number): Promise<{ frames: number; bytes: number; acks: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'receipts-bench-'));
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent' });
  const rooms: ConnectedRoom<typeof chat>[] = [];
  try {
    for (let i = 0; i < n; i++) rooms.push(await connect({ url: srv.url, room: `r${n}-${mode}-${round}`, machine: chat, onError: () => {} }));
    await Promise.all(rooms.map((r) => r.whenOnline({ timeoutMs: 10_000 })));
    const offs = rooms.filter((_, i) => mode === 'all' || (mode === 'writer' && i === 0)).map((r) => r.onReceipts(() => {}));
    await until(() => rooms.every((r) => r.members().length === n));
    const w = rooms[0];
    // One op first, so every connection has said its hello, welcome and first acks before counting.
    await w.ops.say({ text: 'warm-up' }).visible;
    await until(() => rooms.every((r) => r.positions().stable === 1));
    await sleep(50);
    const before = await counters(srv);
    let last = w.ops.say({ text: 'm0' });
    for (let i = 1; i < OPS; i++) {
      await last.visible;
      last = w.ops.say({ text: `m${i}` });
    }
    await last.visible;
    await until(() => rooms.every((r) => r.positions().stable === OPS + 1));
    if (mode !== 'off') await until(() => w.seenBy(last).length === n - 1);
    await sleep(50);
    const after = await counters(srv);
    for (const off of offs) off();
    return { frames: (after.frames - before.frames) / OPS, bytes: (after.bytes - before.bytes) / OPS, acks: (after.acks - before.acks) / OPS };
  } finally {
    await Promise.all(rooms.map((r) => r.close()));
    await srv.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function until(f: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error('timed out');
    await sleep(2);
  }
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const sizes = process.argv
  .slice(2)
  .map(Number)
  .filter((x) => x > 1);
const rows: string[] = [];
for (const n of sizes.length ? sizes : [2, 5, 10, 20]) {
  const sum: Record<Mode, { frames: number; bytes: number; acks: number }> = {
    off: { frames: 0, bytes: 0, acks: 0 },
    writer: { frames: 0, bytes: 0, acks: 0 },
    all: { frames: 0, bytes: 0, acks: 0 },
  };
  const order: Mode[] = ['off', 'writer', 'all', 'all', 'writer', 'off'];
  for (let i = 0; i < order.length; i++) {
    const r = await run(n, order[i], i);
    for (const k of ['frames', 'bytes', 'acks'] as const) sum[order[i]][k] += r[k] / 2;
  }
  const off = sum.off;
  for (const mode of ['off', 'writer', 'all'] as const) {
    const s = sum[mode];
    rows.push(
      `| ${n} | ${mode} | ${s.frames.toFixed(2)} | ${s.bytes.toFixed(0)} | ${s.acks.toFixed(2)} | ${(s.frames / off.frames).toFixed(3)} | ${(s.bytes / off.bytes).toFixed(3)} |`,
    );
  }
  console.error(`N=${n} done`);
}
console.log('| members | receipts | frames sent / op | bytes sent / op | of them acks frames / op | frames vs off | bytes vs off |');
console.log('|---|---|---|---|---|---|---|');
for (const r of rows) console.log(r);
