/**
 * @hercules/cluster: Hercules rooms on a NATS JetStream cluster. See docs/deployment.md.
 */
export { auditRoom, type RoomAudit } from './audit.ts';
export { ClusterStore, NotOwnerError, roomToken, shardOf, type ClusterStoreObserver, type ClusterStoreOptions } from './cluster-store.ts';
export { auditRoomOnNats, createClusterNode, type ClusterNode, type ClusterNodeOptions } from './node.ts';
export { Relay, type EdgeSocket, type RelayOptions } from './relay.ts';
export { routeRoom, type Route, type RouteOptions } from './routing.ts';
export { JetStreamLeases, JetStreamShardLog, natsAtLeast, natsShortcomings, type JetStreamLogOptions } from './jetstream-log.ts';
export { findNatsServer, natsServerVersion, startNatsCluster, type NatsCluster, type NatsClusterOptions, type NatsServerProcess } from './nats-dev.ts';
export { LeaseConflictError, WrongLastSequenceError, type Ack, type Lease, type LeaseTable, type LogMessage, type ShardLog } from './shard-log.ts';
