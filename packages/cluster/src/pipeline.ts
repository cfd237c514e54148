/**
 * Cluster mode without NATS (`@hercules/cluster/pipeline`): the `ClusterStore` over the
 * `ShardLog` and `LeaseTable` seams, the routing rule, and in-memory doubles of both seams with
 * injectable faults. What the simulator runs, and what another replicated log is built against.
 * Importing it loads neither the NATS clients nor `ws`.
 */
export {
  batchRecords,
  ClusterStore,
  confirmedCheckpoints,
  counts,
  NotOwnerError,
  RECORD_HEADERS,
  roomToken,
  shardOf,
  subjectOf,
  validRecords,
  type CkptBody,
  type ClusterStoreObserver,
  type ClusterStoreOptions,
  type LogBody,
} from './cluster-store.ts';
export { routeRoom, type Route, type RouteOptions } from './routing.ts';
export { LeaseConflictError, WrongLastSequenceError, type Ack, type Lease, type LeaseTable, type LogMessage, type ShardLog } from './shard-log.ts';
export { SimLeaseTable, SimShardLog, type Schedule, type SimFaults, type SimLeaseFaults } from './sim-log.ts';
