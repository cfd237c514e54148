/**
 * A Hercules cluster node: the server's one front door (`createServer` of
 * `@hercules/server/core`: HTTP, /healthz, /metrics, the admin API, webhooks, the room service)
 * over the cluster's deployment (deployment.ts): a `ClusterStore` on NATS JetStream and the
 * cluster's room locator. Any node accepts any client (no load-balancer affinity) and answers
 * the admin API for any room: a room another node serves is relayed or forwarded there.
 */
import { HerculesError } from '@hercules/core';
import { createServer, retentionSetting, type FrontDoorOptions, type HistoryOption, type RoomService } from '@hercules/server/core';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { auditRoom, type RoomAudit } from './audit.ts';
import type { ClusterStore } from './cluster-store.ts';
import { clusterDeployment, type ClusterParts } from './deployment.ts';
import { JetStreamShardLog } from './jetstream-log.ts';
import type { Relay } from './relay.ts';

export interface ClusterNodeOptions extends Omit<FrontDoorOptions<ClusterStore>, 'store' | 'deployment'> {
  /** NATS server URLs (the cluster's, any of them). */
  nats: string[];
  /** This node's id: unique in the cluster, stable across restarts is not required. Default host:port. */
  nodeId?: string;
  /** How many shards rooms hash to (fixed for the cluster's data; every node must agree). Default 64. */
  shards?: number;
  /** The lease of a shard, ms: how long a dead owner's rooms wait before another node takes them. Default 2000. */
  leaseMs?: number;
  /** Replicas of each shard's stream and of the lease bucket. Default 3. */
  replicas?: number;
  /** Subject prefix, stream and bucket names derive from it (several clusters on one NATS). Default `hc`. */
  prefix?: string;
  /** JetStream's duplicate window for the streams this node creates (default 2 min; see JetStreamLogOptions). */
  duplicateWindowMs?: number;
  /** A shard's appends of one turn as one message (default true; ClusterStoreOptions.batchAppends: off for a rolling upgrade from a version without it). */
  batchAppends?: boolean;
  /**
   * How much history `room(name).stateAt` and `log` read behind the newest checkpoint
   * (docs/history.md): `{ ops?, days?, machines? }`, default the last 10,000 ops. The streams
   * keep older history too (purging is off); it is not read.
   */
  history?: HistoryOption;
  /**
   * Place shards over the live nodes by rendezvous hashing (placement.ts): a shard a settled
   * node should own moves to it (handed over as on SIGTERM) when it joins or returns, and away
   * from a node that drains. Default true; false: a shard stays with whichever node took it.
   */
  placement?: boolean;
  /** How long a node must be heard without a break before shards move to it, ms. Default 5000. */
  settleMs?: number;
  /**
   * The service's heartbeat (ServiceOptions.heartbeatMs), which its pings announce. Default
   * 1000 ms, not 5000 as on an embedded server: a client that did not choose its watchdog gives
   * a link up after two heartbeats without a frame, so a frozen node's clients move to another
   * node within about 2 s (with 5000: 10 s; the room itself moved after its 2 s lease). The cost
   * is one small frame per connection per second.
   */
  heartbeatMs?: number;
}

/** ClusterNodeOptions.heartbeatMs's default. */
export const CLUSTER_HEARTBEAT_MS = 1000;

export interface ClusterNode {
  readonly url: string;
  readonly port: number;
  readonly nodeId: string;
  readonly store: ClusterStore;
  readonly service: RoomService;
  readonly relay: Relay;
  /** Stop: close connections, hand rooms back (checkpoints), give up leases, close NATS. */
  close(): Promise<void>;
}

export async function createClusterNode(opts: ClusterNodeOptions): Promise<ClusterNode> {
  if (!opts || !Array.isArray(opts.nats) || opts.nats.length === 0)
    throw new HerculesError('bad-argument', 'createClusterNode: `nats` must list the NATS servers, e.g. ["nats://127.0.0.1:4222"]');
  const prefix = opts.prefix ?? 'hc';
  if (!/^[A-Za-z0-9_-]+$/.test(prefix))
    throw new HerculesError('bad-argument', `createClusterNode: prefix must be letters, digits, _ or -, got ${JSON.stringify(prefix)}`);
  const { nats, nodeId, shards, leaseMs, replicas, duplicateWindowMs, history, placement, settleMs, batchAppends, ...server } = opts;
  const retention = retentionSetting('createClusterNode', history);
  let parts: ClusterParts | undefined;
  const deployment = clusterDeployment(
    {
      nats,
      nodeId,
      shards,
      leaseMs,
      replicas,
      prefix,
      duplicateWindowMs,
      retention,
      placement,
      settleMs,
      batchAppends,
      webhooks: (opts.webhooks?.length ?? 0) > 0,
    },
    (p) => {
      parts = p;
    },
  );
  const front = await createServer({ ...server, heartbeatMs: server.heartbeatMs ?? CLUSTER_HEARTBEAT_MS, deployment });
  const { store, relay, service } = parts!;
  return { url: front.url, port: front.port, nodeId: parts!.nodeId, store, service, relay, close: () => front.close() };
}
/** Audit a room's history on a NATS cluster (read-only): see `auditRoom`. What `hercules audit` runs. */
export async function auditRoomOnNats(opts: { nats: string[]; room: string; prefix?: string; shards?: number }): Promise<RoomAudit> {
  const prefix = opts.prefix ?? 'hc';
  let nc: NatsConnection;
  try {
    nc = await connect({ servers: opts.nats, name: 'hercules-audit' });
  } catch (e) {
    throw new HerculesError(
      'storage-failed',
      `cannot reach NATS at ${opts.nats.join(', ')}: ${(e as Error).message}. Check the servers run and the URLs are right.`,
    );
  }
  try {
    const log = await JetStreamShardLog.open(nc, { streamPrefix: prefix.toUpperCase(), subjectPrefix: prefix });
    return await auditRoom(log, opts.room, { subjectPrefix: prefix, shards: opts.shards });
  } finally {
    await nc.close();
  }
}
