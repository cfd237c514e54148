/**
 * Issue 43's client costs at scale, this tree beside another checkout, alternated in one run:
 *
 * - rooms: R rooms (1, 10, 100) of 4 writers, every client a ClientRoom + ClientDriver wired in
 *   memory to its room's RoomEngine (no sockets, disks or codecs). Each turn every writer submits
 *   one op; a client reads its socket every `read` turns, taking everything the server sent it
 *   since in that read (the frames of `read` turns of 4 writers: their log frames and the
 *   progress frames), while its own ops of those turns are pending. What is timed: the clients'
 *   CPU taking those frames (ClientDriver.received and the turn's end), µs per op delivered to a
 *   client. Before issue 43 each frame was one step with one rebase of the pending ops; now the
 *   frames of one read are one step.
 * - keys: a `keyedMap` of 1k, 10k, 100k keys; between two base saves 20 keys change (about what
 *   a busy room's Stable view moves by in the driver's 2 s); what is timed: saveBase of the
 *   memory store, of the SQLite store and of the IndexedDB store (fake-indexeddb in Node, whose
 *   structured clone is JavaScript: slower than a browser's) (ms per save). Before: the whole
 *   state copied or written.
 *
 *   node -C @hercules/source --expose-gc --import tsx bench/src/scale.bench.ts --baseline .baseline [--runs 5] [--only rooms|keys] [--stores memory,sqlite,indexeddb]
 *
 * `--baseline <dir>`: another checkout inside this repository's folder (so its imports resolve
 * here), e.g. `git worktree add .baseline <commit>`. Without it only this tree is measured.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import * as current from '@hercules/core';
import { IDBFactory, IDBKeyRange } from 'fake-indexeddb';
import { indexedDbStorage, memoryStorage } from '@hercules/client';
import { sqliteStorage } from '@hercules/client-sqlite';
import type { ClientStorage } from '@hercules/client';
import { prefilledKv } from './peers/kv-machine.ts';

type Core = typeof current;
type Storages = { memory: () => ClientStorage; sqlite: (file: string) => ClientStorage; indexeddb: () => ClientStorage };
type Kind = keyof Storages;
const { values } = parseArgs({ options: { baseline: { type: 'string' }, runs: { type: 'string' }, only: { type: 'string' }, stores: { type: 'string' } } });
const RUNS = Number(values.runs ?? 5);
const WRITERS = 4;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const cpuUs = () => {
  const c = process.cpuUsage();
  return c.user + c.system;
};

/** A clock whose deferred work runs when the bench says (the turn's end) and whose timers never fire. */
function benchClock() {
  const deferred: (() => void)[] = [];
  let t = 0;
  return {
    now: () => t,
    tick: () => void (t += 1),
    after: () => () => {},
    defer: (fn: () => void) => void deferred.push(fn),
    settle: () => {
      while (deferred.length) deferred.shift()!();
    },
  };
}

/** One room of 4 writers on core C; returns its clients' frame queues and a turn function. */
function makeRoom(C: Core, clock: ReturnType<typeof benchClock>, r: number) {
  const m = prefilledKv(C, 1000, 'keyedMap');
  const server = new C.RoomEngine(m, { ackTimeoutMs: 1e9 });
  const inbox: current.ServerMessage[][] = [];
  const drivers: current.ClientDriver<any>[] = [];
  const rooms: current.ClientRoom<any>[] = [];
  const deliver = (out: current.RoomOutput) => {
    for (const { conn, msg } of out.send) inbox[Number(conn)].push(msg);
  };
  for (let w = 0; w < WRITERS; w++) {
    inbox.push([]);
    const room = new C.ClientRoom(m, { clientId: `r${r}w${w}`, now: clock.now, notify: 'sync', undo: false });
    const store: current.DriverStore = { append: (_ops, done) => clock.defer(() => done()), saveBase: (_b, done) => done() };
    const driver = new C.ClientDriver(room, { store, clock, baseEveryMs: 1e9 });
    deliver(server.open(String(w), 0));
    driver.opened({ send: (msg) => deliver(server.message(String(w), structuredClone(msg), 0)) });
    rooms.push(room);
    drivers.push(driver);
  }
  return { inbox, drivers, rooms };
}

/** µs of client CPU per op delivered to a client, R rooms, a socket read every `read` turns. */
function runRooms(C: Core, R: number, read: number, turns: number): number {
  const clock = benchClock();
  const rooms = Array.from({ length: R }, (_, r) => makeRoom(C, clock, r));
  const take = (x: ReturnType<typeof makeRoom>) => {
    for (let w = 0; w < WRITERS; w++) {
      const frames = x.inbox[w];
      x.inbox[w] = [];
      for (const f of frames) x.drivers[w].received(f);
      clock.settle(); // the read's turn ends
    }
  };
  for (const x of rooms) take(x);
  clock.settle();
  let spent = 0;
  let value = 0;
  for (let t = 0; t < turns; t++) {
    for (const x of rooms) for (let w = 0; w < WRITERS; w++) x.rooms[w].submit('set', { key: `k${w * 250 + (t % 250)}`, value: ++value });
    clock.settle(); // writes confirmed, ops sent, ordered, frames queued
    if ((t + 1) % read !== 0) continue;
    const c0 = cpuUs();
    for (const x of rooms) take(x);
    spent += cpuUs() - c0;
  }
  const ops = turns * WRITERS;
  for (const x of rooms) if (x.rooms[0].positions().authoritative < ops - WRITERS * read) throw new Error('ops were not delivered');
  return spent / (ops * WRITERS * R);
}

/** ms per saveBase of a 20-key change to a `keys`-key keyedMap, on a store of `kind`. */
async function runKeys(S: Storages, kind: Kind, keys: number, saves: number): Promise<number> {
  const m = prefilledKv(current, keys, 'keyedMap');
  const dir = mkdtempSync(join(tmpdir(), 'scale-bench-'));
  const store = kind === 'sqlite' ? S.sqlite(join(dir, 'c.sqlite')) : S[kind]();
  await store.init('room', 'c');
  let state = m.initial;
  let pos = 0;
  const step = () => {
    for (let i = 0; i < 20; i++) {
      pos++;
      state = current.applyOp(m, state, { client: 'c', seq: pos, name: 'set', args: { key: `k${(pos * 7919) % keys}`, value: pos }, author: 'c' }, pos).state;
    }
  };
  step();
  await store.saveBase('room', { pos, state, ownSeq: 0 }); // the first save of a process writes it whole
  let ms = 0;
  for (let s = 0; s < saves; s++) {
    step();
    // With --expose-gc, the garbage of the untimed steps (and of the other side's runs) is
    // collected before the timed save, not during it.
    (globalThis as { gc?: () => void }).gc?.();
    const t0 = performance.now();
    await store.saveBase('room', { pos, state, ownSeq: 0 });
    ms += performance.now() - t0;
  }
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  return ms / saves;
}

/** A store of `make` in a fresh fake-indexeddb, without Web Locks (Node has none). */
const idb = (make: typeof indexedDbStorage) => () => make('bench', { indexedDB: new IDBFactory(), IDBKeyRange });
const baseDir = values.baseline ? resolve(values.baseline) : undefined;
const imp = async <T>(rel: string) => (await import(pathToFileURL(join(baseDir!, rel)).href)) as T;
const base = baseDir ? await imp<Core>('packages/core/src/index.ts') : undefined;
const baseStores: Storages | undefined = baseDir
  ? {
      memory: (await imp<{ memoryStorage: Storages['memory'] }>('packages/client/src/storage.ts')).memoryStorage,
      sqlite: (await imp<{ sqliteStorage: Storages['sqlite'] }>('packages/client-sqlite/src/sqlite-storage.ts')).sqliteStorage,
      indexeddb: idb((await imp<{ indexedDbStorage: typeof indexedDbStorage }>('packages/client/src/indexeddb-storage.ts')).indexedDbStorage),
    }
  : undefined;
const stores: Storages = { memory: memoryStorage, sqlite: (f) => sqliteStorage(f), indexeddb: idb(indexedDbStorage) };

/** Run `f` on the baseline then this tree, RUNS times after a warm-up; medians and their ratio. */
async function alternate(f: (side: 'before' | 'now') => number | Promise<number>): Promise<Record<string, string>> {
  const now: number[] = [];
  const old: number[] = [];
  for (let r = 0; r <= RUNS; r++) {
    const a = base ? await f('before') : undefined;
    const b = await f('now');
    if (r === 0) continue;
    if (a !== undefined) old.push(a);
    now.push(b);
  }
  const row: Record<string, string> = { now: median(now).toPrecision(3) };
  if (old.length) {
    row.before = median(old).toPrecision(3);
    row['now ÷ before'] = (median(now) / median(old)).toFixed(2);
  }
  return row;
}

const only = values.only ?? 'rooms,keys';
console.log(`node ${process.version}; medians of ${RUNS} alternated runs (before: ${baseDir ?? 'none'})`);
if (only.includes('rooms')) {
  const rows: Record<string, Record<string, string>> = {};
  for (const R of [1, 10, 100])
    for (const read of [1, 4, 16]) {
      const turns = Math.max(16, Math.round(1600 / R / read) * read);
      rows[`${R} room(s) x 4 writers, a read every ${read} turn(s)`] = await alternate((side) => runRooms(side === 'before' ? base! : current, R, read, turns));
    }
  console.log('rooms: client CPU taking the server frames, µs per op delivered to a client');
  console.table(rows);
}
if (only.includes('keys')) {
  const rows: Record<string, Record<string, string>> = {};
  const kinds = (values.stores ?? 'memory,sqlite,indexeddb').split(',') as Kind[];
  for (const kind of kinds)
    for (const keys of [1000, 10_000, 100_000]) {
      rows[`${kind} store, ${keys} keys`] = await alternate((side) => runKeys(side === 'before' ? baseStores! : stores, kind, keys, keys >= 100_000 ? 5 : 20));
    }
  console.log('keys: ms per base save of a keyedMap after 20 keys changed');
  console.table(rows);
}
