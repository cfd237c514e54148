/**
 * The cost of undo bookkeeping (docs/undo.md; issue 39: under 10 % of submit).
 *
 * One sample = `room.submit('setQty', args)` + `room.getState('submitted')` on a ClientRoom (the
 * path an app takes; the op runs at the read), with undo tracking on (the default) or off
 * (`undo: false`). Rounds alternate off and on, so both see the same machine state. Each op is
 * its own undo step (`stopCapturing()` between ops, in both variants). A room lives for 1,000
 * ops. Memory: the heap after 500 ops (the undo stack's default bound) with tracking on, minus
 * off, per op, after a full GC.
 *
 *   NODE_OPTIONS="-C @hercules/source" NODE_ENV=production node --expose-gc --import tsx bench/src/undo.bench.ts
 */
import { ClientRoom, type Machine } from '@hercules/core';
import { itemId, keyedMachine, keyedMapMachine, keyedMapState, keyedState } from './fixtures.ts';
import { gc, sink, stats } from './harness.ts';

interface Case {
  name: string;
  machine: Machine<any>;
  items: number;
}

const CASES: Case[] = [
  { name: 'one KeyedMap, 1,000 items', machine: keyedMapMachine(keyedMapState(1_000)) as Machine<any>, items: 1_000 },
  { name: 'one KeyedMap, 100,000 items', machine: keyedMapMachine(keyedMapState(100_000)) as Machine<any>, items: 100_000 },
  { name: 'one plain object, 1,000 keys', machine: keyedMachine(keyedState(1_000)) as Machine<any>, items: 1_000 },
];

const ROUNDS = 12;
const PER_ROUND = 2_000;
const BLOCK = 1_000;

/** Median µs of submit + read over `n` ops, tracking on or off. */
function timeRound(c: Case, undo: boolean, n: number, salt: number): number[] {
  const us: number[] = [];
  let room!: ClientRoom<any>;
  let k = salt;
  for (let i = 0; i < n; i++) {
    if (i % BLOCK === 0) room = new ClientRoom(c.machine, { clientId: 'bench', now: () => 0, ...(undo ? {} : { undo: false }) });
    k = (k * 31 + 17) % c.items;
    const args = { id: itemId(k), qty: (i + salt) & 1023 };
    const t0 = performance.now();
    room.submit('setQty', args);
    const s = room.getState('submitted');
    const t1 = performance.now();
    sink.o = s;
    room.stopCapturing();
    us.push((t1 - t0) * 1000);
  }
  return us;
}

/** Heap bytes per op held after 500 ops, tracking on minus off. */
function memoryPerOp(c: Case): number {
  const heapAfter = (undo: boolean): number => {
    gc();
    const h0 = process.memoryUsage().heapUsed;
    const room = new ClientRoom(c.machine, { clientId: 'bench', now: () => 0, ...(undo ? {} : { undo: false }) });
    for (let i = 0; i < 500; i++) {
      room.submit('setQty', { id: itemId((i * 31 + 17) % c.items), qty: i & 1023 });
      room.getState('submitted');
      room.stopCapturing();
    }
    gc();
    const h1 = process.memoryUsage().heapUsed;
    sink.o = room;
    return h1 - h0;
  };
  const on: number[] = [];
  const off: number[] = [];
  for (let r = 0; r < 5; r++) {
    off.push(heapAfter(false));
    on.push(heapAfter(true));
  }
  return (stats(on).median - stats(off).median) / 500;
}

function run(c: Case): void {
  timeRound(c, false, 2_000, 1);
  timeRound(c, true, 2_000, 1);
  const off: number[] = [];
  const on: number[] = [];
  const ratios: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const a = stats(timeRound(c, false, PER_ROUND, r)).median;
    const b = stats(timeRound(c, true, PER_ROUND, r)).median;
    off.push(a);
    on.push(b);
    ratios.push(b / a);
  }
  const m = (xs: number[]) => stats(xs).median;
  const sorted = [...ratios].sort((x, y) => x - y);
  console.log(
    `${c.name.padEnd(30)} off ${m(off).toFixed(2)} µs  on ${m(on).toFixed(2)} µs  on/off median ${m(ratios).toFixed(3)} (rounds ${sorted[0].toFixed(3)} to ${sorted[sorted.length - 1].toFixed(3)})  memory ${memoryPerOp(c).toFixed(0)} B/op`,
  );
}

console.log(`undo bookkeeping: submit + getState('submitted'), ${ROUNDS} alternating rounds of ${PER_ROUND} ops, NODE_ENV=${process.env.NODE_ENV ?? ''}`);
for (const c of CASES) run(c);
