import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ViewEngine, RoomEngine } from '@hercules/core';
import { runSeed, Simulation, configFor } from '../src/sim.ts';

test('a seed replays exactly: same events, same global log', () => {
  const run = (seed: number) => {
    const sim = new Simulation(seed, configFor(seed));
    sim.run();
    return { events: sim.events, now: sim.now, log: sim.global.map((e) => `${e.pos}:${e.client}:${e.seq}:${e.error ?? ''}`).join(',') };
  };
  for (const seed of [3, 11]) assert.deepEqual(run(seed), run(seed));
});

test('different seeds explore different faults', () => {
  const kinds = new Set<string>();
  for (let s = 1; s <= 40; s++) {
    const r = runSeed(s);
    assert.ok(r.ok, r.error);
    for (const k of Object.keys(r.counts)) kinds.add(k);
  }
  for (const k of ['crash', 'disconnect', 'server-restart', 'stall', 'server-crash-before-commit']) assert.ok(kinds.has(k), `no seed in 1..40 exercised ${k}`);
});

/** Break one piece of the engine and expect the simulator to notice within a few seeds. */
function expectCaught(patch: () => () => void, re: RegExp): void {
  const undo = patch();
  try {
    let caught: string | undefined;
    for (let s = 1; s <= 60 && !caught; s++) {
      const r = runSeed(s);
      if (!r.ok) caught = r.error;
    }
    assert.ok(caught, 'the planted bug went unnoticed');
    assert.match(caught!, re);
  } finally {
    undo();
  }
}

const proto = (c: object) => (c as { prototype: Record<string, unknown> }).prototype;

test('the checker catches a client that skips the rebase after a remote op', () => {
  expectCaught(() => {
    const p = proto(ViewEngine);
    const orig = p.finishStep as () => void;
    p.finishStep = function (this: { needRebase: boolean }) { this.needRebase = false; };
    return () => { p.finishStep = orig; };
  }, /durable view|submitted view|not a prefix|differs/);
});

test('the checker catches a client that claims visibility too early', () => {
  expectCaught(() => {
    const p = proto(ViewEngine);
    const orig = p.onVisible as (seq: number) => void;
    p.onVisible = function (this: unknown, seq: number) { orig.call(this, seq + 1); };
    return () => { p.onVisible = orig; };
  }, /Visible view but member|visible view differs|is visible but/);
});

test('the checker catches a server that forgets deduplication', () => {
  expectCaught(() => {
    const p = proto(RoomEngine);
    const orig = p.onOps as (s: { client: string }, ops: { seq: number }[], now: number) => void;
    p.onOps = function (this: { clients: Map<string, { highWater: number }> }, s: { client: string }, ops: { seq: number }[], now: number) {
      const rec = this.clients.get(s.client)!;
      const first = ops[0]?.seq;
      if (first !== undefined && first <= rec.highWater) rec.highWater = first - 1; // accept resends
      orig.call(this, s, ops, now);
    };
    return () => { p.onOps = orig; };
  }, /sequenced twice/);
});

test('the checker catches a stable frontier that ignores a lagging member', () => {
  expectCaught(() => {
    const p = proto(RoomEngine);
    const orig = p.finish as (now: number) => unknown;
    p.finish = function (this: { stable: number; head(): number; compact(): void }, now: number) {
      const out = orig.call(this, now);
      if (this.head() > this.stable) { this.stable = this.head(); this.compact(); }
      return out;
    };
    return () => { p.finish = orig; };
  }, /stable frontier \d+ but member|checkpoint at/);
});

test('the checker catches a server that sends new ops before they are on disk', () => {
  expectCaught(() => {
    const p = proto(RoomEngine);
    const orig = p.finish as (now: number) => { sendFirst: boolean };
    // Every output goes out before its commit, ops included; a crash in between loses them.
    p.finish = function (this: unknown, now: number) { const out = orig.call(this, now); out.sendFirst = true; return out; };
    return () => { p.finish = orig; };
  }, /authoritative|global log|differs/);
});
