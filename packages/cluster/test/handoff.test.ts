/**
 * The handoff of a shard placement moves (handoff.ts): the node it goes to holds connections
 * for the shard from the announcement until the old owner released the lease (instead of
 * refusing them, to be routed again 100 ms later), then takes the shard and loads the rooms the
 * old owner had loaded; a cancelled or lost release holds them no longer than `waitMs`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Handoffs } from '../src/handoff.ts';
import { Bus } from './fake-bus.ts';

const tick = () => new Promise((r) => setTimeout(r, 5));

function pair(waitMs = 1000) {
  const bus = new Bus();
  const taken: { shard: number; rooms: string[] }[] = [];
  const from = new Handoffs({ nc: bus.connection(), prefix: 'hx', nodeId: 'a', take: async () => {} });
  const to = new Handoffs({
    nc: bus.connection(),
    prefix: 'hx',
    nodeId: 'b',
    waitMs,
    take: async (shard, rooms) => {
      taken.push({ shard, rooms });
    },
  });
  return { from, to, taken };
}

test('announced: a connection for the shard waits for the release; then the shard is taken with the rooms named', async () => {
  const { from, to, taken } = pair();
  let released = false;
  from.start('b', 3);
  await tick();
  const waited = to.wait(3).then(() => assert.ok(released, 'resolved only after the release'));
  let other = false;
  void to.wait(4).then(() => (other = true));
  await tick();
  assert.ok(other, 'another shard does not wait');
  assert.deepEqual(taken, []);
  released = true;
  from.released('b', 3, ['r1', 'r2']);
  await waited;
  await tick();
  assert.deepEqual(taken, [{ shard: 3, rooms: ['r1', 'r2'] }]);
  from.close();
  to.close();
});

test('a cancelled handover lets its connections go without waiting out the hold', async () => {
  const { from, to, taken } = pair(600_000); // a hold that would outlast the test: only the cancel can end it
  from.start('b', 1);
  await tick();
  const held = to.wait(1);
  from.cancel('b', 1);
  await held;
  assert.deepEqual(taken, [], 'nothing taken without a release');
  from.close();
  to.close();
});

test('a release that never comes holds connections only until waitMs', async () => {
  const { from, to, taken } = pair(50);
  from.start('b', 2);
  await tick();
  const alive = setInterval(() => {}, 10); // the hold's timer is unref'd: keep the test's loop running
  await to.wait(2);
  clearInterval(alive);
  assert.deepEqual(taken, []);
  from.close();
  to.close();
});
