/**
 * An op that reads the clock or a random number makes replicas diverge: the first such call of
 * each op is reported once, naming the op, and the call still answers as usual.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClientRoom, applyOp, defineMachine } from '@hercules/core';

function captureWarnings(t: { after(fn: () => void): void }): string[] {
  const seen: string[] = [];
  const warn = console.warn;
  console.warn = (...args: unknown[]) => void seen.push(args.map(String).join(' '));
  t.after(() => {
    console.warn = warn;
  });
  return seen;
}

const clocky = defineMachine({
  name: 'clocky',
  version: 1,
  initial: { at: 0, r: 0, d: 0, fixed: 0, items: [] as number[] },
  ops: {
    stamp(s) {
      s.at = Date.now();
    },
    roll(s) {
      s.r = Math.random();
    },
    dated(s) {
      s.d = new Date().getUTCFullYear();
    },
    pure(s, args: { at: number }) {
      s.fixed = new Date(args.at).getUTCFullYear(); // a date from args reads no clock
      s.items.push(args.at);
    },
  },
});

test('Date.now(), Math.random() and new Date() in an op are reported once per op, naming it; the values are the real ones', (t) => {
  const warnings = captureWarnings(t);
  const room = new ClientRoom(clocky, { clientId: 'c', now: () => 0, notify: 'sync' });
  const before = Date.now();
  room.ops.stamp();
  room.ops.stamp();
  room.ops.roll();
  room.ops.dated();
  const s = room.getState('submitted');
  assert.ok(s.at >= before && s.at <= Date.now(), 'Date.now() still answers the time');
  assert.ok(s.r >= 0 && s.r < 1);
  assert.ok(s.d >= 2026);
  assert.equal(warnings.length, 3, warnings.join('\n'));
  assert.match(warnings[0], /op "stamp" of machine "clocky" called Date\.now\(\): .*replicas diverge.*pass it in the op's args/);
  assert.match(warnings[1], /op "roll" of machine "clocky" called Math\.random\(\)/);
  assert.match(warnings[2], /op "dated" of machine "clocky" called new Date\(\)/);
});

test('a deterministic op is not reported, and outside ops the clock and Math.random are untouched', (t) => {
  const warnings = captureWarnings(t);
  const r = applyOp(clocky, clocky.initial, { name: 'pure', args: { at: 0 }, client: 'c', seq: 1, author: 'c' } as never, 1);
  assert.equal(r.error, undefined);
  assert.equal(r.state.fixed, 1970);
  assert.deepEqual(warnings, []);
  assert.equal(Date.now.name, 'now', 'the real Date.now is back');
  assert.equal(Math.random.name, 'random');
  assert.ok(new Date() instanceof Date);
  assert.equal(globalThis.Date.prototype, new Date(0).constructor.prototype);
});
