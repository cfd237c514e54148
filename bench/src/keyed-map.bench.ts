/**
 * The engines' CPU per delivered op on the workload an app writes first: one map of `keys` keys,
 * each of 4 writers setting its own keys, 1 observer (the issue-14 throughput shape, without
 * sockets, disks or codecs). One RoomEngine and 5 ViewEngines wired in memory: each writer
 * submits `frame` ops per turn (made durable at once), the room orders each frame, every client
 * receives the log frames and acks; every `batchEvery` turns the clients process what they
 * received in one step (as the client batches a busy room's frames, default 16 ms).
 * CPU (process.cpuUsage) split by side: the room engine, the writers, the observer; µs per op.
 *
 *   NODE_ENV=production node -C @hercules/source --import tsx bench/src/keyed-map.bench.ts [--baseline <dir>]
 *
 * With --baseline, <dir> is another checkout inside this repository's folder (so its imports
 * resolve here), e.g. `git worktree add .baseline <commit>`: its packages/core/src is run
 * alternately with this tree's and the ratios printed.
 *
 * `--layout keyedMap` holds the cells in a `KeyedMap` (@hercules/core's hash trie) instead of a
 * plain object; `--layout both` runs the two alternately in one run and prints keyedMap ÷ plain.
 * `--keys 200,1000,10000` picks the map sizes.
 */
import { parseArgs } from 'node:util';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as current from '@hercules/core';
import { prefilledKv } from './peers/kv-machine.ts';

type Core = typeof current;
const { values } = parseArgs({ options: { baseline: { type: 'string' }, runs: { type: 'string' }, keys: { type: 'string' }, layout: { type: 'string' } } });
const RUNS = Number(values.runs ?? 9);
const WRITERS = 4;
const TURNS = 400;

interface Shape {
  keys: number;
  frame: number;
  batchEvery: number;
}
type Layout = 'plain' | 'keyedMap';

function run(C: Core, sh: Shape, layout: Layout = 'plain'): { server: number; writer: number; observer: number } {
  const m = prefilledKv(C, sh.keys, layout);
  const room = new C.RoomEngine(m, { ackTimeoutMs: 1e9 });
  const names = [...Array.from({ length: WRITERS }, (_, i) => `w${i}`), 'obs'];
  const clients = names.map((n) => new C.ViewEngine(m, { clientId: n, now: () => 0, batching: 'off' }));
  const inbox: current.ServerMessage[][] = names.map(() => []);
  const cpu = { server: 0, writer: 0, observer: 0 };
  const timed = (side: keyof typeof cpu, f: () => void) => {
    const c0 = process.cpuUsage();
    f();
    const c = process.cpuUsage(c0);
    cpu[side] += c.user + c.system;
  };
  const deliver = (out: current.RoomOutput) => {
    for (const { conn, msg } of out.send) inbox[Number(conn)].push(msg);
  };
  const toRoom = (i: number) => {
    const out = clients[i].drain();
    for (const msg of out.send) timed('server', () => deliver(room.message(String(i), msg, 0)));
    return out;
  };
  names.forEach((_, i) => {
    deliver(room.open(String(i), 0));
    clients[i].connected();
    toRoom(i);
  });
  const step = (i: number) => {
    const msgs = inbox[i];
    if (msgs.length === 0) return;
    inbox[i] = [];
    timed(i < WRITERS ? 'writer' : 'observer', () => {
      for (const msg of msgs) clients[i].receive(msg);
    });
    const out = toRoom(i);
    timed(i < WRITERS ? 'writer' : 'observer', () => {
      if (out.persist.length) clients[i].durable(out.persist[out.persist.length - 1].seq);
    });
    toRoom(i);
  };
  for (let i = 0; i < names.length; i++) step(i);
  let value = 0;
  const keysPer = Math.floor(sh.keys / WRITERS);
  for (let t = 0; t < TURNS; t++) {
    for (let w = 0; w < WRITERS; w++) {
      timed('writer', () => {
        for (let k = 0; k < sh.frame; k++) clients[w].submit('set', { key: `k${w * keysPer + ((t * sh.frame + k) % keysPer)}`, value: ++value });
        const out = clients[w].drain();
        clients[w].durable(out.persist[out.persist.length - 1].seq);
      });
      toRoom(w);
    }
    if ((t + 1) % sh.batchEvery === 0) for (let i = 0; i < names.length; i++) step(i);
  }
  for (let i = 0; i < names.length; i++) step(i);
  const ops = TURNS * WRITERS * sh.frame;
  if (clients[WRITERS].positions().authoritative !== ops) throw new Error(`observer has ${clients[WRITERS].positions().authoritative} of ${ops} ops`);
  return { server: cpu.server / ops, writer: cpu.writer / ops, observer: cpu.observer / ops };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const base = values.baseline ? ((await import(pathToFileURL(join(resolve(values.baseline), 'packages/core/src/index.ts')).href)) as Core) : undefined;
const layoutArg = values.layout ?? 'plain';
if (!['plain', 'keyedMap', 'both'].includes(layoutArg)) throw new Error(`--layout is plain, keyedMap or both, not ${layoutArg}`);
if (base && layoutArg !== 'plain') throw new Error('--baseline compares the plain layout; leave out --layout');
const shapes: Shape[] = (values.keys ? values.keys.split(',').map(Number) : [200, 1000]).flatMap((keys) => [
  { keys, frame: 1, batchEvery: 1 },
  { keys, frame: 5, batchEvery: 4 },
  { keys, frame: 50, batchEvery: 4 },
]);
console.log(
  `NODE_ENV=${process.env.NODE_ENV ?? '(unset)'}; layout ${layoutArg}; µs CPU per op (delivered to 5 clients), median of ${RUNS} alternated runs of ${TURNS} turns x ${WRITERS} writers`,
);
const rows: Record<string, Record<string, string>> = {};
for (const sh of shapes) {
  const now: ReturnType<typeof run>[] = [],
    old: ReturnType<typeof run>[] = [];
  for (let r = 0; r < RUNS + 1; r++) {
    // Alternated: the baseline (or the plain layout) then this tree's run.
    const a = base ? run(base, sh) : layoutArg === 'both' ? run(current, sh, 'plain') : undefined;
    const b = run(current, sh, layoutArg === 'both' ? 'keyedMap' : (layoutArg as Layout));
    if (r === 0) continue; // warm-up
    if (a) old.push(a);
    now.push(b);
  }
  const label = `${sh.keys} keys, ${sh.frame} op/frame, step every ${sh.batchEvery} turn(s)`;
  const row: Record<string, string> = {};
  for (const side of ['server', 'writer', 'observer'] as const) {
    const n = median(now.map((x) => x[side]));
    row[side] = n.toFixed(1);
    if (base) {
      const o = median(old.map((x) => x[side]));
      row[`${side} before`] = o.toFixed(1);
      row[`${side} ÷`] = (n / o).toFixed(2);
    } else if (old.length) {
      const o = median(old.map((x) => x[side]));
      row[`${side} plain`] = o.toFixed(1);
      row[`${side} keyedMap ÷ plain`] = (n / o).toFixed(2);
    }
  }
  rows[label] = row;
}
console.table(rows);
