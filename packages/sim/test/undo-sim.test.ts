/**
 * The undo simulator passes over many seeds, replays exactly, and each of its checkers can fail:
 * a planted bug (undo-sim.ts, UndoPlant) is caught by the checker of its rule.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { UndoSim, runUndoSeed, type UndoPlant } from '../src/undo-sim.ts';

// spec: UNDO-OWN, UNDO-REDO, UNDO-CONVERGE
test('undo and redo among concurrent ops, crashes and reconnects: every checker passes over 60 seeds', async () => {
  const totals: Record<string, number> = {};
  for (let seed = 1; seed <= 60; seed++) {
    const r = await runUndoSeed(seed);
    assert.ok(r.ok, `seed ${seed}: ${r.error}`);
    for (const [k, v] of Object.entries(r.counts)) totals[k] = (totals[k] ?? 0) + v;
  }
  // The seeds exercise what they claim to.
  for (const k of ['op', 'undo', 'redo', 'crash', 'disconnect']) assert.ok((totals[k] ?? 0) > 20, `only ${totals[k] ?? 0} ${k}`);
});

test('a seed replays exactly', async () => {
  const run = async () => {
    const sim = new UndoSim(7);
    await sim.run();
    return sim.log.map((e) => `${e.pos}:${e.client}:${e.seq}:${e.name}:${JSON.stringify(e.args)}`).join('\n');
  };
  assert.equal(await run(), await run());
});

/** The rules the plant's failures name, over seeds 1-30. */
async function caught(plant: UndoPlant): Promise<Set<string | undefined>> {
  const rules = new Set<string | undefined>();
  for (let seed = 1; seed <= 30; seed++) {
    const r = await runUndoSeed(seed, plant);
    if (!r.ok) rules.add(r.rule);
  }
  return rules;
}

// spec: UNDO-OWN
test('planted: an undo that restores whatever the room holds is caught by UNDO-OWN', async () => {
  assert.ok((await caught('takes-others')).has('UNDO-OWN'));
});

// spec: UNDO-REDO
test('planted: a redo that does nothing is caught by UNDO-REDO', async () => {
  assert.ok((await caught('redo-nothing')).has('UNDO-REDO'));
});

// spec: UNDO-CONVERGE
test("planted: a client that drops others' undo actions is caught by UNDO-CONVERGE", async () => {
  assert.ok((await caught('diverge')).has('UNDO-CONVERGE'));
});

// spec: UNDO-CONVERGE
test('a run whose clients never settle fails UNDO-CONVERGE instead of hanging', async () => {
  // Seed 348 with a store whose writes overtake each other: a crash loses an op below one
  // reported durable, and the restarted client is refused (seq-gap) on every reconnect.
  const r = await runUndoSeed(348, 'writes-overtake');
  assert.equal(r.rule, 'UNDO-CONVERGE', r.error);
  assert.match(r.error ?? '', /still busy/);
  assert.ok((await runUndoSeed(348)).ok, 'with writes in order, the seed passes');
});
