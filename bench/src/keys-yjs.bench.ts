/**
 * A big map beside Yjs (issue 43): one room of 4 writers on a map of 1k, 10k or 100k keys, each
 * writer setting one key a turn; Hercules' `keyedMap` against a Y.Map, in one process, alternated.
 *
 * - Hercules: a RoomEngine and 4 ClientRoom + ClientDriver wired in memory (no sockets; the
 *   client's messages are structured-cloned, as a codec would copy them), each client's driver
 *   on a memoryStorage (appends and base saves: every 2,000 ms of the bench's time, which moves
 *   1 ms a turn; the timed turns start after each client's first save, which copies the whole
 *   state once a process). Each turn every writer submits one op, the server orders the frames,
 *   and every client takes what it was sent.
 * - Yjs: a server Y.Doc and 4 client Y.Docs, as y-websocket wires them: each writer's update is
 *   applied on the server and sent to the 3 others, which apply it.
 *
 * Timed: the process's CPU (server and clients together) per update delivered to a client (each
 * write counts at the 3 other writers); the rate is 1 s of CPU over that.
 *
 *   NODE_ENV=production node -C @hercules/source --import tsx bench/src/keys-yjs.bench.ts [--keys 1000,10000,100000] [--rounds 3] [--turns 2000] [--only hercules] [--baseline .baseline]
 *
 * `--baseline <dir>`: another checkout inside this repository's folder (so its imports resolve
 * here, e.g. `git worktree add --detach .baseline <commit>`), run in each round beside this tree
 * (old vs new, alternated in one process).
 *
 * Without NODE_ENV=production each new snapshot is frozen by a walk of every new container
 * (machine.ts, FREEZE_ALL): at 100k keys 2.6 ms a turn of 4 ops, most of the process.
 */
import { parseArgs } from 'node:util';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as Y from 'yjs';
import * as C_ from '@hercules/core';
import type * as C from '@hercules/core';
import { memoryStorage as memoryStorage_, type ClientStorage } from '@hercules/client';
import { prefilledKv } from './peers/kv-machine.ts';

const { values } = parseArgs({
  options: { keys: { type: 'string' }, rounds: { type: 'string' }, turns: { type: 'string' }, only: { type: 'string' }, baseline: { type: 'string' } },
});
const KEYS = (values.keys ?? '1000,10000,100000').split(',').map(Number);
const ROUNDS = Number(values.rounds ?? 3);
const TURNS = Number(values.turns ?? 2000);
const WRITERS = 4;
/** Turns before the timed ones: past the drivers' first base save (2,000 ms, 1 ms a turn). */
const WARM = 2100;
const cpuUs = () => {
  const c = process.cpuUsage();
  return c.user + c.system;
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** A clock of the bench's time: deferred work runs at the turn's end, timers when their time comes. */
function benchClock() {
  const deferred: (() => void)[] = [];
  let timers: { at: number; fn: () => void }[] = [];
  let t = 0;
  return {
    now: () => t,
    after: (ms: number, fn: () => void) => {
      const timer = { at: t + ms, fn };
      timers.push(timer);
      return () => void (timers = timers.filter((x) => x !== timer));
    },
    defer: (fn: () => void) => void deferred.push(fn),
    settle: () => {
      while (deferred.length) deferred.shift()!();
    },
    tick: () => {
      t += 1;
      const due = timers.filter((x) => x.at <= t);
      timers = timers.filter((x) => x.at > t);
      for (const x of due) x.fn();
    },
  };
}

/** A DriverStore on `s` (its promises settle in microtasks: awaited at the turn's end). */
function driverStore(s: ClientStorage, pending: Promise<void>[]): C.DriverStore {
  const track = (p: Promise<void>, done: (e?: unknown) => void) => pending.push(p.then(() => done(), done));
  return { append: (ops, done) => track(s.append('room', ops), done), saveBase: (b, done) => track(s.saveBase('room', b), done) };
}

type Core = typeof C_;
type MemoryStorage = typeof memoryStorage_;
const baseDir = values.baseline ? resolve(values.baseline) : undefined;
const imp = async <T>(rel: string) => (await import(pathToFileURL(join(baseDir!, rel)).href)) as T;
const baseline = baseDir
  ? {
      C: await imp<Core>('packages/core/src/index.ts'),
      memoryStorage: (await imp<{ memoryStorage: MemoryStorage }>('packages/client/src/storage.ts')).memoryStorage,
    }
  : undefined;

/** µs of CPU per update delivered to a client, Hercules (this tree's, or the baseline's core and store). */
async function hercules(keys: number, C: Core = C_, memoryStorage: MemoryStorage = memoryStorage_): Promise<number> {
  const m = prefilledKv(C, keys, 'keyedMap');
  const clock = benchClock();
  const server = new C.RoomEngine(m, { ackTimeoutMs: 1e9 });
  const inbox: C.ServerMessage[][] = [];
  const drivers: C.ClientDriver<any>[] = [];
  const rooms: C.ClientRoom<any>[] = [];
  const pending: Promise<void>[] = [];
  const deliver = (out: C.RoomOutput) => {
    for (const { conn, msg } of out.send) inbox[Number(conn)].push(msg);
  };
  for (let w = 0; w < WRITERS; w++) {
    inbox.push([]);
    const store = memoryStorage();
    await store.init('room', `w${w}`);
    const room = new C.ClientRoom(m, { clientId: `w${w}`, now: clock.now, notify: 'sync', undo: false });
    const driver = new C.ClientDriver(room, { store: driverStore(store, pending), clock });
    deliver(server.open(String(w), 0));
    driver.opened({ send: (msg) => deliver(server.message(String(w), structuredClone(msg), 0)) });
    rooms.push(room);
    drivers.push(driver);
  }
  const turn = async (t: number) => {
    for (let w = 0; w < WRITERS; w++) rooms[w].submit('set', { key: `k${(t * 7919 + w * 31) % keys}`, value: t });
    clock.settle();
    while (pending.length) await pending.shift();
    clock.settle();
    for (let w = 0; w < WRITERS; w++) {
      const frames = inbox[w];
      inbox[w] = [];
      for (const f of frames) drivers[w].received(f);
      clock.settle();
    }
    while (pending.length) await pending.shift();
    clock.tick();
  };
  // Warm-up past each client's first base save, which copies the whole state (once a process).
  for (let t = 0; t < WARM; t++) await turn(t);
  const c0 = cpuUs();
  for (let t = WARM; t < WARM + TURNS; t++) await turn(t);
  const spent = cpuUs() - c0;
  if (rooms[0].positions().authoritative < (WARM + TURNS - 10) * WRITERS) throw new Error('ops were not delivered');
  return spent / (TURNS * WRITERS * (WRITERS - 1));
}

/** µs of CPU per update delivered to a client, Yjs. */
function yjs(keys: number): number {
  const seed = new Y.Doc();
  const map = seed.getMap('cells');
  seed.transact(() => {
    for (let i = 0; i < keys; i++) map.set(`k${i}`, 0);
  });
  const start = Y.encodeStateAsUpdate(seed);
  const server = new Y.Doc();
  Y.applyUpdate(server, start);
  const clients = Array.from({ length: WRITERS }, () => {
    const d = new Y.Doc();
    Y.applyUpdate(d, start);
    return d;
  });
  let delivered = 0;
  clients.forEach((d, w) => {
    d.on('update', (u: Uint8Array, origin: unknown) => {
      if (origin === 'remote') return;
      Y.applyUpdate(server, u, 'remote');
      for (let o = 0; o < WRITERS; o++)
        if (o !== w) {
          Y.applyUpdate(clients[o], u, 'remote');
          delivered++;
        }
    });
  });
  const turn = (t: number) => {
    for (let w = 0; w < WRITERS; w++) clients[w].getMap('cells').set(`k${(t * 7919 + w * 31) % keys}`, t);
  };
  for (let t = 0; t < 50; t++) turn(t);
  const c0 = cpuUs();
  for (let t = 50; t < 50 + TURNS; t++) turn(t);
  const spent = cpuUs() - c0;
  if (delivered !== (TURNS + 50) * WRITERS * (WRITERS - 1)) throw new Error('Yjs updates were not delivered');
  return spent / (TURNS * WRITERS * (WRITERS - 1));
}

console.log(`node ${process.version}; ${WRITERS} writers, ${TURNS} turns, medians of ${ROUNDS} alternated rounds`);
const rows: Record<string, Record<string, string>> = {};
for (const keys of KEYS) {
  const h: number[] = [];
  const y: number[] = [];
  const b: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    if (baseline) b.push(await hercules(keys, baseline.C, baseline.memoryStorage));
    h.push(await hercules(keys));
    y.push(values.only === 'hercules' ? Number.NaN : yjs(keys)); // --only hercules: to profile it alone
  }
  const hm = median(h);
  const ym = median(y);
  rows[`${keys} keys`] = {
    'Hercules µs/update': hm.toPrecision(3),
    'Yjs µs/update': ym.toPrecision(3),
    'Hercules updates/s (CPU)': Math.round(1e6 / hm).toLocaleString('en'),
    'Yjs updates/s (CPU)': Math.round(1e6 / ym).toLocaleString('en'),
    'rate Hercules ÷ Yjs': (ym / hm).toFixed(2),
    'rounds, Hercules ÷ Yjs': h.map((x, i) => (y[i] / x).toFixed(2)).join(' / '),
  };
  if (baseline) {
    rows[`${keys} keys`]['baseline µs/update'] = median(b).toPrecision(3);
    rows[`${keys} keys`]['CPU now ÷ baseline'] = (hm / median(b)).toFixed(2);
    rows[`${keys} keys`]['rounds, now ÷ baseline'] = h.map((x, i) => (x / b[i]).toFixed(2)).join(' / ');
  }
}
console.table(rows);
