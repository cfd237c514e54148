/**
 * R1. Durable delay in Node with the SQLite client store: `times.durable - times.submitted` of
 * small ops (spreadsheet setCell), a client connected to a live server (its own process, no
 * emulated delay), client storage `sqliteStorage(file)` in the OS temp dir.
 *
 *   steady: one op every 5 ms (200 ops/s) for 3 s;
 *   bursts: 20 ops submitted back to back (a paste), every 100 ms, 30 bursts.
 *
 * After a warm-up (1 s steady + 5 bursts), 3 repetitions of both, alternating; samples pooled.
 * Two reference rows: the same steady load with `memoryStorage()` (everything but the disk
 * write), and bare better-sqlite3 commits (WAL, synchronous=FULL, one small row, 200 per second
 * for 2 s in each repetition) in the same directory: the disk write alone, at the same moments,
 * so a slow moment of the (shared, virtual) disk shows up in both.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { connect, memoryStorage, type ConnectedRoom, type OpHandle } from '@hercules/client';
import { sqliteStorage } from '@hercules/client-sqlite';
import { spreadsheet } from '../../../apps/machines.ts';
import { stats, type Row, type Section } from '../harness.ts';
import { fsType, removeTemp, round, sleep, startServer, tempDir, until } from './common.ts';

type Room = ConnectedRoom<typeof spreadsheet>;
const WORDS = ['Gear', 'Bolt', 'Nut', 'Washer', 'Spring', 'Axle', 'Cam', 'Pin'];
let n = 0;
const submit = (r: Room) => {
  const i = n++;
  return r.ops.setCell({ row: i % 12, col: (i >> 2) % 6, text: WORDS[i % WORDS.length] });
};

/** One op every `everyMs` on a fixed schedule (a late timer submits the ops that fell due). */
async function steady(r: Room, ms: number, everyMs = 5): Promise<{ hs: OpHandle[]; rate: number }> {
  const hs: OpHandle[] = [];
  const t0 = performance.now();
  const total = Math.round(ms / everyMs);
  await new Promise<void>((done) => {
    const tick = () => {
      const due = Math.min(total, Math.floor((performance.now() - t0) / everyMs) + 1);
      while (hs.length < due) hs.push(submit(r));
      if (hs.length >= total) return done();
      setTimeout(tick, Math.max(0, t0 + hs.length * everyMs - performance.now()));
    };
    tick();
  });
  const rate = hs.length / ((performance.now() - t0) / 1000);
  await Promise.all(hs.map((h) => h.durable));
  return { hs, rate };
}

/** The disk write alone: bare SQLite commits of one small row on the same schedule. */
function bareCommits(db: Database.Database, ms: number, everyMs = 5): Promise<number[]> {
  const ins = db.prepare('INSERT OR REPLACE INTO ops (room, seq, op) VALUES (?, ?, ?)');
  const xs: number[] = [];
  const t0 = performance.now();
  const total = Math.round(ms / everyMs);
  return new Promise((done) => {
    const tick = () => {
      const c0 = performance.now();
      db.transaction(() => ins.run('r', xs.length, JSON.stringify({ client: 'x', seq: xs.length, name: 'setCell', args: { row: 1, col: 2, text: 'Gear' } })))();
      xs.push(performance.now() - c0);
      if (xs.length >= total) return done(xs);
      setTimeout(tick, Math.max(0, t0 + xs.length * everyMs - performance.now()));
    };
    tick();
  });
}

async function bursts(r: Room, count: number, size: number, gapMs: number): Promise<OpHandle[]> {
  const hs: OpHandle[] = [];
  for (let b = 0; b < count; b++) {
    for (let i = 0; i < size; i++) hs.push(submit(r));
    await sleep(gapMs);
  }
  await Promise.all(hs.map((h) => h.durable));
  return hs;
}

const delays = (hs: OpHandle[]) => hs.map((h) => h.times.durable! - h.times.submitted!);

export async function run(): Promise<Section> {
  const server = await startServer();
  const dir = tempDir('client');
  const fs = fsType(dir);
  try {
    // Bare commits in the same directory: what one durable write costs on this disk.
    const db = new Database(join(dir, 'raw.sqlite'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.exec('CREATE TABLE ops (room TEXT NOT NULL, seq INTEGER NOT NULL, op TEXT NOT NULL, PRIMARY KEY (room, seq)) WITHOUT ROWID');
    const raw: number[] = [];
    await bareCommits(db, 500);

    const room = await connect({
      url: server.url,
      room: 'durable',
      machine: spreadsheet,
      storage: sqliteStorage(join(dir, 'client.sqlite')),
      clientId: 'bench-durable',
    });
    await until(() => room.status() === 'online', 10_000, 'online');
    await steady(room, 1000);
    await bursts(room, 5, 20, 100);
    const st: number[] = [],
      bu: number[] = [],
      perRep: Row[] = [];
    const rates: number[] = [];
    for (let rep = 0; rep < 3; rep++) {
      const s = await steady(room, 3000);
      const b = await bursts(room, 30, 20, 100);
      const bare = await bareCommits(db, 2000);
      raw.push(...bare);
      const ds = delays(s.hs),
        db2 = delays(b);
      st.push(...ds);
      bu.push(...db2);
      rates.push(s.rate);
      const a = stats(ds),
        c = stats(db2);
      perRep.push({
        rep: rep + 1,
        'steady p50 ms': round(a.median),
        'steady p99 ms': round(a.p99),
        'bursts p50 ms': round(c.median),
        'bursts p99 ms': round(c.p99),
        'bare commit p99 ms': round(stats(bare).p99),
        'bare commit max ms': round(stats(bare).max),
      });
    }
    await room.close();
    db.close();

    // Reference: memory storage, same steady load (no disk).
    const mem = await connect({ url: server.url, room: 'durable-mem', machine: spreadsheet, storage: memoryStorage(), clientId: 'bench-mem' });
    await until(() => mem.status() === 'online', 10_000, 'online');
    await steady(mem, 1000);
    const m = await steady(mem, 3000);
    await mem.close();

    const S = stats(st),
      B = stats(bu),
      R = stats(raw),
      M = stats(delays(m.hs));
    const over = (xs: number[], t: number) => xs.filter((x) => x > t).length;
    const row = (what: string, x: ReturnType<typeof stats>, xs: number[], extra: Row = {}): Row => ({
      what,
      samples: x.n,
      'p50 ms': round(x.median),
      'p99 ms': round(x.p99),
      'max ms': round(x.max),
      '> 5 ms': over(xs, 5),
      ...extra,
    });
    const rows: Row[] = [
      row('steady 200 ops/s, sqliteStorage', S, st, { 'achieved ops/s': round(stats(rates).median, 0) }),
      row('bursts of 20 every 100 ms, sqliteStorage', B, bu),
      row('steady 200 ops/s, memoryStorage (reference)', M, delays(m.hs)),
      row('bare SQLite commit, WAL + FULL, 200/s (reference)', R, raw),
    ];
    const worstP50 = Math.max(S.median, B.median),
      worstP99 = Math.max(S.p99, B.p99);
    return {
      id: 'durable',
      title: 'R1. Durable delay, Node, SQLite client store (durable - submitted)',
      command: 'npm run bench:runtime -- --only durable',
      params: {
        machine: 'spreadsheet.setCell',
        steady: '1 op / 5 ms for 3 s',
        bursts: '30 bursts of 20 ops, 100 ms apart',
        bareCommits: '1 / 5 ms for 2 s',
        reps: 3,
        warmup: '1 s steady + 5 bursts',
        tempFs: fs,
        server: 'own process, no emulated delay',
      },
      rows,
      goals: [
        { what: 'durable delay p50 (worse of steady and bursts)', goal: '< 1 ms', measured: `${round(worstP50)} ms`, met: worstP50 < 1 },
        { what: 'durable delay p99 (worse of steady and bursts)', goal: '< 5 ms (paper: 2.2 ms)', measured: `${round(worstP99)} ms`, met: worstP99 < 5 },
      ],
      notes: [
        `temp dir filesystem: stat -f says ${fs.statF}${fs.mount ? `, the mount is ${fs.mount}` : ''}`,
        `per repetition: ${perRep.map((r) => `steady ${r['steady p50 ms']}/${r['steady p99 ms']}, bursts ${r['bursts p50 ms']}/${r['bursts p99 ms']} (p50/p99), bare commit p99/max ${r['bare commit p99 ms']}/${r['bare commit max ms']} ms`).join('; ')}`,
      ],
      extra: { perRep },
    } as Section & { extra: unknown };
  } finally {
    await server.close();
    removeTemp(dir);
  }
}
