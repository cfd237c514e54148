/**
 * ClusterStore over the in-memory ShardLog and LeaseTable (`sim-log.ts`, no faults): the room
 * store conformance suite, each case on a log of its own. It runs the simulated log's side of
 * every seam the store uses (`last`, `readHeaders`, `readAt` included) without NATS.
 */
import { test } from 'node:test';
import { runRoomStoreTests, type StoreFactory } from '@hercules/server/store-conformance';
import { ClusterStore } from '../src/cluster-store.ts';
import { SimLeaseTable, SimShardLog, seededRandom } from '../src/sim-log.ts';

let cases = 0;
const factory: StoreFactory = () => {
  const rng = seededRandom(++cases);
  const log = new SimShardLog(rng, Date.now, {}, { subjectPrefix: 'hc', maxPayload: 1024 * 1024 });
  const leases = new SimLeaseTable(2000, rng, Date.now);
  const make = () => new ClusterStore({ log, leases, nodeId: 'node-a', shards: 2 });
  return { store: make(), reopen: make };
};

runRoomStoreTests('ClusterStore (simulated log)', factory, test);
