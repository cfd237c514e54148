/**
 * ClusterStore over the in-memory ShardLog and LeaseTable (`sim-log.ts`, no faults): the room
 * store conformance suite, each case on a log of its own. It runs the simulated log's side of
 * every seam the store uses (`last`, `readHeaders`, `readAt` included) without NATS.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defineMachine } from '@hercules/core';
import { RoomRegistry, type RoomHost, systemClock } from '@hercules/server/pipeline';
import { runRoomStoreTests, type StoreFactory } from '@hercules/server/store-conformance';
import { ClusterStore } from '../src/cluster-store.ts';
import { Rng } from '@hercules/test-utils';
import { SimLeaseTable, SimShardLog } from '../src/sim-log.ts';

let cases = 0;
const factory: StoreFactory = (setup) => {
  const rng = new Rng(++cases).source();
  const log = new SimShardLog(rng, Date.now, {}, { subjectPrefix: 'hc', maxPayload: 1024 * 1024 });
  const leases = new SimLeaseTable(2000, rng, Date.now);
  const make = () =>
    new ClusterStore({ log, leases, nodeId: 'node-a', shards: 2, retention: setup?.retention, ...(setup?.now ? { wallClock: setup.now } : {}) });
  return { store: make(), reopen: make };
};

runRoomStoreTests('ClusterStore (simulated log)', factory, test);

// The cluster simulator's seeds 692 and 5375: a node paused or cut off, still within its lease by
// its own clock, while the lease table (going back in revisions, or letting two creates win) let
// another node take the shard, claim it and write; the first node then welcomed a joiner from the
// room in its memory, with a log older than the one the joiner had seen at the other node.
test('a join is not welcomed from memory once another node claimed the shard: the room is dropped, and the retried join reloads what that node wrote', async () => {
  const rng = new Rng(692).source();
  const log = new SimShardLog(rng, Date.now, {}, { subjectPrefix: 'hc', maxPayload: 1024 * 1024 });
  // A lease table each: both nodes hold the shard's lease, as a faulty table can let happen.
  const a = new ClusterStore({ log, leases: new SimLeaseTable(2000, rng, Date.now), nodeId: 'node-a', shards: 1 });
  const b = new ClusterStore({ log, leases: new SimLeaseTable(2000, rng, Date.now), nodeId: 'node-b', shards: 1 });
  const count = defineMachine({
    name: 'count',
    version: 1,
    initial: { n: 0 },
    ops: {
      add(s, by: number) {
        s.n += by;
      },
    },
  });
  const registry = new RoomRegistry({ store: a, clock: systemClock });
  try {
    const host = (await registry.acquire('r', count, { join: true })) as RoomHost;
    await host.submit('api', 'add', 1);
    assert.equal(host.engine.head(), 1);
    // While it is in node-a's memory, node-b takes the shard and writes the room's second entry.
    const loaded = (await b.open('r'))!;
    assert.equal(loaded.durable.suffix.length, 1);
    await b.append('r', { after: loaded.rev, entries: [{ pos: 2, client: 'x', seq: 1, name: 'add', args: 2, author: 'x' }] });
    // A joiner that saw entry 2 at node-b comes to node-a: not welcomed from memory (head 1).
    await assert.rejects(registry.acquire('r', count, { join: true }), /reload the room/);
    assert.equal(registry.get('r'), undefined, 'the stale room is dropped');
    assert.equal(host.state, 'failed');
    // Its retry loads the room from the stream, entry 2 included.
    const again = (await registry.acquire('r', count, { join: true })) as RoomHost;
    assert.equal(again.engine.head(), 2);
  } finally {
    await registry.close();
    await a.close();
    await b.close();
  }
});
