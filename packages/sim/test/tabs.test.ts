/**
 * The simulator's model of the tab leader handover (src/tabs.ts): a crash of the leader tab at
 * every step of 300 interleavings keeps each follower request exactly once, and each planted
 * bug makes the checker fail, with the replay command.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkTabsSeed, runTabs } from '../src/tabs.ts';

// spec: DUR-HANDOVER
test('the leader tab crashing after any step of 300 seeds: every follower request reaches the server exactly once', () => {
  let runs = 0;
  for (let seed = 1; seed <= 300; seed++) {
    const failed = checkTabsSeed(seed);
    assert.equal(failed?.violation, undefined, `seed ${seed}, crash after step ${failed?.crashAt}: ${failed?.violation}\n  ${failed?.trace.join(' / ')}`);
    runs += runTabs(seed, Number.MAX_SAFE_INTEGER).trace.length + 1;
  }
  assert.ok(runs > 300 * 5, `${runs} crash points checked`);
});

// spec: DUR-HANDOVER
for (const plant of ['no-marks', 'send-ahead'] as const) {
  test(`planted bug '${plant}': the checker fails within 300 seeds`, () => {
    let failed: ReturnType<typeof checkTabsSeed>;
    for (let seed = 1; seed <= 300 && !failed; seed++) failed = checkTabsSeed(seed, plant);
    assert.ok(failed, `no seed made '${plant}' fail`);
    assert.match(failed.violation!, /^\[DUR-HANDOVER\] request B\/\d+ is in the server's log 2 times/);
  });
}
