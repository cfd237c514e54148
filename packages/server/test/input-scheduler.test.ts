/**
 * The input scheduler on its own (one of the room service's named parts, issue 36 item 1): fake
 * sources, a clock that handling a frame moves forward by a set cost, and hooks that record what
 * reached the "room". The service's behaviour under a real flood is bench/src/flood's.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '@hercules/test-utils';
import {
  FRAME_OVERHEAD_BYTES,
  InputScheduler,
  MAX_CHUNK_OPS,
  ROUND_MS,
  SMALL_FRAME_HEAP,
  type InputSource,
  type SchedulerLimits,
} from '../src/input-scheduler.ts';

interface Src extends InputSource {
  name: string;
  closed: boolean;
  joining: boolean;
}

const LIMITS: SchedulerLimits = {
  opsPerSecond: 1000,
  opsBurst: 5000,
  bytesPerSecond: 1 << 20,
  bytesBurst: 8 << 20,
  userOpsPerSecond: 2000,
  userOpsBurst: 10_000,
  maxDecodingBytes: 1 << 20,
};

function source(name: string, room: string, frames = 0, heap = 0): Src {
  const s: Src = { name, roomName: room, inbox: [], queuedBytes: 0, closed: false, joining: false, tokens: 5000, byteTokens: 8 << 20, refilledAt: 0 };
  for (let i = 0; i < frames; i++) push(s, 0, heap);
  return s;
}

function push(s: Src, at: number, heap = 0): void {
  s.inbox.push({ data: new Uint8Array([s.inbox.length]), isBinary: true, at, heap });
  s.queuedBytes += FRAME_OVERHEAD_BYTES;
}

/** A scheduler whose frames each cost `frameMs` and whose ops frames (frames of sources in `opsOf`) decode to that many ops. */
function setup(frameMs: number, opsOf: Map<string, number> = new Map()) {
  // Time moves only when a hook (a frame's cost) or the test moves it; `turn()` runs the timers due.
  const clock = new FakeClock();
  const handled: string[] = [];
  const runs: { src: string; n: number; ack: unknown }[] = [];
  const events: string[] = [];
  const cost = new Map<string, number>();
  const sched: InputScheduler<Src> = new InputScheduler<Src>(clock, LIMITS, {
    frame(s, _data, _bin, held) {
      clock.t += frameMs;
      if (s.name === 'bad') {
        s.closed = true; // as the service's failed() would
        throw new Error('boom');
      }
      const n = opsOf.get(s.name);
      if (n === undefined) handled.push(s.name);
      else
        sched.pushOps(
          s,
          Array.from({ length: n }, (_, i) => i),
          held,
          `ack-${s.name}`,
        );
    },
    ops(s, ops, ack) {
      runs.push({ src: s.name, n: ops.length, ack });
      clock.t += ops.length * (cost.get(s.roomName) ?? 0.001);
    },
    costPerOp: (s) => cost.get(s.roomName),
    measured: (s, n, ms) => cost.set(s.roomName, ms / n),
    failed: (s, e) => events.push(`failed ${s.name}: ${(e as Error).message}`),
    flow() {},
    rateLimited: (s) => events.push(`rate ${s.name}`),
    guard: (_stage, fn) => fn(),
    closing: () => false,
  });
  return { clock, sched, handled, runs, events, cost };
}

test('a flooding room gets one turn per round like a quiet one: the quiet frame waits about one round, not the flood', () => {
  const { clock, sched, handled } = setup(1);
  const flood = source('flood', 'A', 200);
  sched.ready(flood); // nobody waits: its turn runs at once, for SLICE_MS
  assert.equal(handled.length, 2, 'the first turn handles SLICE_MS of 1 ms frames');
  const quiet = source('quiet', 'B', 1);
  sched.ready(quiet); // the flood waits for a turn: the quiet one queues behind it
  assert.equal(sched.waiting, 2);
  clock.turn(); // one round
  const at = handled.indexOf('quiet');
  assert.ok(at >= 0 && at <= 2 + 2, `the quiet frame is handled within the first round, after at most one turn of the flood (at ${at})`);
  assert.ok(handled.length <= 2 + ROUND_MS + 2, 'a round ends near ROUND_MS');
  while (sched.waiting > 0) clock.turn();
  assert.equal(handled.filter((h) => h === 'flood').length, 200, 'the flood is handled to its end, in later rounds');
});

test('two connections of one room alternate turns (round robin within the room)', () => {
  const { clock, sched, handled } = setup(2); // one frame per turn
  const a = source('a', 'R', 3);
  const b = source('b', 'R', 3);
  sched.ready(a); // its first turn at once
  sched.ready(b);
  while (sched.waiting > 0) clock.turn();
  // Then a round robin over the two: a (queued first), b, a, b, and b's last frame.
  assert.deepEqual(handled, ['a', 'a', 'b', 'a', 'b', 'b']);
});

test('a large ops frame goes to its room in runs sized to the turn, at most MAX_CHUNK_OPS, the ack with the first run', () => {
  const { clock, sched, runs, cost } = setup(0, new Map([['big', 5000]]));
  cost.set('R', 0.0001); // cheap ops: a slice would fit 20,000; the chunk bound holds it to 1,000
  const big = source('big', 'R', 1);
  sched.ready(big);
  while (sched.waiting > 0) clock.turn();
  assert.equal(
    runs.reduce((n, r) => n + r.n, 0),
    5000,
  );
  assert.ok(
    runs.every((r) => r.n <= MAX_CHUNK_OPS),
    JSON.stringify(runs),
  );
  assert.equal(runs[0].ack, 'ack-big');
  assert.ok(runs.slice(1).every((r) => r.ack === undefined));
  assert.equal(sched.decoding, 0);
});

test("costly ops are handed over in smaller runs: one turn's run fits its slice", () => {
  const { clock, sched, runs, cost } = setup(0, new Map([['big', 100]]));
  cost.set('R', 0.5); // 2 ms slice: 4 ops a turn
  const big = source('big', 'R', 1);
  sched.ready(big);
  while (sched.waiting > 0) clock.turn();
  assert.equal(runs[0].n, 4);
  assert.equal(
    runs.reduce((n, r) => n + r.n, 0),
    100,
  );
});

test('a connection out of tokens waits for its bucket to refill, counted once, then goes on', () => {
  const { clock, sched, handled, events } = setup(0);
  const s = source('s', 'R', 2);
  s.tokens = 0.5;
  sched.ready(s);
  assert.deepEqual(handled, []);
  assert.deepEqual(events, ['rate s']);
  assert.ok(s.waitTimer, 'a timer waits for the refill');
  sched.ready(s); // input arriving meanwhile does not start a turn
  assert.deepEqual(handled, []);
  clock.t += 1; // 1 ms at 1000 ops/s: 1 token
  clock.turn();
  assert.deepEqual(handled, ['s', 's']);
  assert.equal(s.waitTimer, undefined);
});

test('a large frame waits for the decoding budget while another is decoded; small frames do not', () => {
  const { clock, sched, runs, handled } = setup(0, new Map([['a', 100_000]]));
  const heap = LIMITS.maxDecodingBytes - 1000;
  const a = source('a', 'A', 1, heap); // decodes to a slow ops frame that holds the budget
  sched.ready(a);
  assert.ok(sched.decoding > 0, 'the ops frame being handled holds its heap');
  const b = source('b', 'B', 1, SMALL_FRAME_HEAP + 1); // large: waits for a's ops to be done
  const c = source('c', 'C', 1, 10); // small: never waits
  sched.ready(b);
  sched.ready(c);
  clock.turn();
  assert.ok(handled.includes('c'), 'the small frame went through');
  assert.ok(runs.reduce((n, r) => n + r.n, 0) < 100_000, "a's ops take more than a round");
  assert.ok(!handled.includes('b'), 'the large frame waits for the budget meanwhile');
  while (sched.waiting > 0) clock.turn();
  assert.deepEqual(handled.sort(), ['b', 'c']);
  assert.equal(sched.decoding, 0);
});

test('drop releases what a closed connection held and takes it out of the turns', () => {
  const { clock, sched, runs } = setup(0, new Map([['a', 50_000]]));
  const a = source('a', 'A', 2, SMALL_FRAME_HEAP * 2);
  sched.ready(a);
  assert.equal(sched.decoding, SMALL_FRAME_HEAP * 2);
  a.closed = true;
  sched.drop(a);
  assert.equal(sched.decoding, 0);
  assert.equal(a.inbox.length, 0);
  assert.equal(a.queuedBytes, 0);
  assert.equal(sched.waiting, 0);
  const before = runs.length;
  clock.turn();
  assert.equal(runs.length, before, 'no more turns for it');
});

test('a frame whose handling throws is reported for its connection; the others go on', () => {
  const { clock, sched, handled, events } = setup(0);
  const bad = source('bad', 'A', 1);
  const good = source('good', 'B', 1);
  sched.ready(bad);
  sched.ready(good);
  clock.turn();
  assert.deepEqual(events, ['failed bad: boom']);
  assert.deepEqual(handled, ['good']);
});
