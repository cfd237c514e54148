/**
 * A cluster node's deployment, for the server's one front door (`createServer` of
 * `@hercules/server/core`): the rooms in a `ClusterStore` on NATS JetStream, and the cluster's
 * room locator (cluster-locator.ts): a room whose shard this node owns (or can take) is served
 * here; one whose shard another live node owns is relayed to it (connections) or forwarded
 * (backend calls); one whose owner died is taken over once the owner's lease expires.
 */
import { HerculesError } from '@hercules/core';
import {
  reconnectToResume,
  runBackendCall,
  type Deployment,
  type Placement,
  type RetentionSetting,
  type RoomLocator,
  type RoomService,
} from '@hercules/server/core';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { callBackend, serveBackendCalls } from './backend-calls.ts';
import { clusterLocator } from './cluster-locator.ts';
import { ClusterStore, type ClusterStoreObserver } from './cluster-store.ts';
import { JetStreamLeases, JetStreamShardLog, natsShortcomings } from './jetstream-log.ts';
import { registerClusterMetrics } from './metrics.ts';
import { Handoffs } from './handoff.ts';
import { Relay } from './relay.ts';
import { natsWebhookCursors } from './webhook-cursors.ts';
import { notReady, ReadinessProbe, type ReadinessFacts } from './readiness.ts';
import { Rebalancer } from './rebalancer.ts';

export interface ClusterDeploymentOptions {
  nats: string[];
  nodeId?: string;
  shards?: number;
  leaseMs?: number;
  replicas?: number;
  prefix: string;
  duplicateWindowMs?: number;
  /** Whether the server sends webhooks: their positions then live in a KV bucket of the cluster (webhook-cursors.ts). */
  webhooks: boolean;
  /** How much history the store reads behind checkpoints (ClusterStoreOptions.retention). */
  retention?: RetentionSetting;
  /** Place shards over the live nodes (placement.ts), moving them when nodes join, return or drain. Default true. */
  placement?: boolean;
  /** How long a node must be heard without a break before shards move to it, ms. Default 5000. */
  settleMs?: number;
  /** ClusterStoreOptions.batchAppends. */
  batchAppends?: boolean;
}

/** What the node's handle shows once the deployment is open and the service attached. */
export interface ClusterParts {
  nodeId: string;
  store: ClusterStore;
  relay: Relay;
  service: RoomService;
  /** Shard placement, if on. */
  rebalancer?: Rebalancer;
}

/**
 * /healthz says not ready once JetStream has not answered a probe (every second) for this long:
 * three missed probes, the client library's own ping limit for a silent server (connectNats).
 */
const READY_STALE_MS = 3000;

/** A backend call forwarded to another node waits this long for its answer: a commit, or a room loading from the stream. */
const CALL_TIMEOUT_MS = 30_000;

export function clusterDeployment(opts: ClusterDeploymentOptions, attached: (parts: ClusterParts) => void): Deployment<ClusterStore> {
  return {
    async open(ctx) {
      const nodeId = (opts.nodeId ?? `${ctx.address.address}:${ctx.address.port}`).replace(/[^A-Za-z0-9_-]/g, '_');
      const [nc, leaseNc] = await connectNats(opts.nats, nodeId);
      try {
        return await placement(opts, nodeId, nc, leaseNc, attached);
      } catch (e) {
        await nc.close().catch(() => {});
        await leaseNc.close().catch(() => {});
        throw e;
      }
    },
  };
}

/** Two connections: leases on one of their own, so renewals never queue behind the appends. */
async function connectNats(servers: string[], nodeId: string): Promise<[NatsConnection, NatsConnection]> {
  let nc: NatsConnection | undefined;
  try {
    // A server that stops answering (frozen, a GC pause, a VM stalled) is left within about 3 s
    // for another one: the client library's default ping (every 2 minutes) would hold appends and
    // lease renewals for minutes.
    // noAsyncTraces: the library builds an Error (a stack trace) for every request and its
    // timeout in advance, for every append's publish: 2 % of a node's CPU at 100 rooms (profiled,
    // throughput.bench.ts --cpu-prof). Our errors name the shard and the append instead.
    const link = { maxReconnectAttempts: -1, pingInterval: 1000, maxPingOut: 3, noAsyncTraces: true };
    nc = await connect({ servers, name: `hercules-${nodeId}`, ...link });
    return [nc, await connect({ servers, name: `hercules-${nodeId}-leases`, ...link })];
  } catch (e) {
    await nc?.close();
    throw new HerculesError(
      'storage-failed',
      `cannot reach NATS at ${servers.join(', ')}: ${(e as Error).message}. Check the servers run and the URLs are right.`,
    );
  }
}

/**
 * Connected: JetStream may still be electing a leader (a NATS server just restarted, or frozen),
 * which answers with timeouts for seconds. A node started then waits it out (answering 503)
 * instead of exiting.
 */
async function settingUp<T>(servers: string[], what: string, fn: () => Promise<T>): Promise<T> {
  const deadline = performance.now() + 60_000;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (performance.now() > deadline)
        throw new HerculesError(
          'storage-failed',
          `NATS at ${servers.join(', ')} did not ${what} within 60 s: ${(e as Error).message}. Check JetStream is enabled and has a leader.`,
        );
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

async function placement(
  opts: ClusterDeploymentOptions,
  nodeId: string,
  nc: NatsConnection,
  leaseNc: NatsConnection,
  attached: (parts: ClusterParts) => void,
): Promise<Placement<ClusterStore>> {
  const { prefix } = opts;
  const replicas = opts.replicas ?? 3;
  const leaseMs = opts.leaseMs ?? 2000;
  const log = await settingUp(opts.nats, 'answer JetStream requests', () =>
    JetStreamShardLog.open(nc, { streamPrefix: prefix.toUpperCase(), subjectPrefix: prefix, replicas, duplicateWindowMs: opts.duplicateWindowMs }),
  );
  const leases = await settingUp(opts.nats, 'set up the lease bucket', () =>
    JetStreamLeases.open(leaseNc, { bucket: `${prefix}_owners`, ttlMs: leaseMs, replicas }),
  );
  const cursors = opts.webhooks
    ? await settingUp(opts.nats, 'set up the webhook positions bucket', () =>
        natsWebhookCursors(nc, { bucket: `${prefix}_webhooks`, replicas, onWarning: (m) => service?.log.warn(m) }),
      )
    : undefined;
  // The store is made before the service: its events reach the service through these once it exists.
  let service: RoomService | undefined;
  let observer: ClusterStoreObserver | undefined;
  const store = new ClusterStore({
    log,
    leases,
    nodeId,
    shards: opts.shards,
    subjectPrefix: prefix,
    retention: opts.retention,
    batchAppends: opts.batchAppends,
    onShardLost: (k, why) => {
      service?.log.warn({ shard: k, why }, 'gave up a shard; its rooms move to another node');
      service?.failRooms((room) => store.shardOf(room) === k, reconnectToResume(`the room moved to another server (${why})`));
    },
    onWarning: (m) => service?.log.warn(m),
    observer: {
      appendConfirmed: (ms) => observer?.appendConfirmed?.(ms),
      pipelineBroken: (cause) => observer?.pipelineBroken?.(cause),
      claimed: (k) => observer?.claimed?.(k),
      shardLost: (k) => observer?.shardLost?.(k),
      batchFlushed: (records, messages) => observer?.batchFlushed?.(records, messages),
    },
  });
  let relay: Relay | undefined;
  let calls: { unsubscribe(): void } | undefined;
  let rebalancer: Rebalancer | undefined;
  const probe = new ReadinessProbe(async () => {
    await log.probe();
    await leases.probe(`${prefix}_probe_${nodeId}`);
  });
  return {
    store,
    ...(cursors ? { webhookCursors: () => cursors } : {}),
    describe: { node: nodeId, nats: opts.nats, natsVersion: log.serverVersion, shards: store.shards, leaseMs },
    attach(svc) {
      service = svc;
      const node = attachService(svc, { nc, prefix, nodeId, store, log, leaseMs, placement: opts.placement ?? true, settleMs: opts.settleMs ?? 5000 });
      ({ relay, calls, observer, rebalancer } = node);
      attached({ nodeId, store, relay: node.relay, service: svc, rebalancer });
      return node.locator;
    },
    health: () => {
      const reason = relay?.draining
        ? 'draining: this node hands its rooms over to the other nodes (POST /admin/drain)'
        : notReady({ closed: nc.isClosed() || leaseNc.isClosed(), ...readinessFacts(probe, store, leaseMs) });
      return { ...(reason ? { reason } : {}), fields: { node: nodeId, shards: store.owned(), relayed: relay?.counts() } };
    },
    drain: () => drainNode(store, relay, rebalancer),
    stopping() {
      probe.stop();
      rebalancer?.stop();
      calls?.unsubscribe();
      relay?.close();
    },
    async close() {
      probe.stop();
      rebalancer?.stop();
      await store.close();
      await nc.close();
      await leaseNc.close();
    },
  };
}

/** The node's parts over its service: the relay, the backend calls it answers, its metrics, and the locator of its rooms. */
function attachService(
  svc: RoomService,
  env: {
    nc: NatsConnection;
    prefix: string;
    nodeId: string;
    store: ClusterStore;
    log: JetStreamShardLog;
    leaseMs: number;
    placement: boolean;
    settleMs: number;
  },
): { relay: Relay; calls: { unsubscribe(): void }; observer: ClusterStoreObserver; locator: RoomLocator; rebalancer?: Rebalancer } {
  const { nc, prefix, nodeId, store, log, leaseMs } = env;
  let rebalancer: Rebalancer | undefined;
  const handoffs = env.placement ? handedOver(svc, store, nc, prefix, () => rebalancer) : undefined;
  const relay = new Relay({
    nc,
    nodeId,
    prefix,
    onWarning: (m) => svc.log.warn(m),
    async accept(conn, request, room) {
      try {
        await handoffs?.wait(store.shardOf(room));
        await store.acquire(store.shardOf(room));
      } catch (e) {
        return { ok: false, owner: (e as { owner?: string }).owner, message: (e as Error).message };
      }
      await svc.handleConnection(conn, request);
      return { ok: true };
    },
  });
  const observer = registerClusterMetrics(svc.metrics.registry, {
    owned: () => store.owned(),
    leaseAges: () => store.leaseAges(),
    relayCounts: () => relay.counts(),
    readStats: () => log.readStats,
  });
  // Backend calls forwarded here run on this node's service, never forwarded again.
  const calls = serveBackendCalls(
    nc,
    prefix,
    nodeId,
    (c) => runBackendCall(svc, c),
    (m) => svc.log.warn(m),
  );
  rebalancer = handoffs ? placeShards(svc, store, relay, handoffs, env.settleMs) : undefined;
  for (const lack of natsShortcomings(log.serverVersion))
    svc.log.warn({ natsVersion: log.serverVersion }, `nats-server ${log.serverVersion}: ${lack}; run a current release in production (docs/deployment.md)`);
  const locator = clusterLocator({
    // A shard being handed to this node: its connections wait for the old owner's release instead of being refused.
    store: handoffs
      ? { shardOf: (room) => store.shardOf(room), owns: (k) => store.owns(k), acquire: (k) => handoffs.wait(k).then(() => store.acquire(k)) }
      : store,
    nodeId,
    alive: (node) => relay.alive(node),
    // Long enough for a dead owner's lease to expire and for NATS to elect a leader (4-9 s on 2.9).
    waitMs: leaseMs + 10_000,
    rerouteMs: leaseMs + 3000,
    relay: (node, room, request, socket) => relay.open(node, room, request, socket),
    call: (node, call) => callBackend(nc, prefix, node, call, CALL_TIMEOUT_MS),
    peers: () => relay.peers(),
    ...(rebalancer ? { preferred: (k: number) => rebalancer.preferred(k) } : {}),
  });
  const stop = {
    unsubscribe() {
      calls.unsubscribe();
      handoffs?.close();
    },
  };
  return { relay, calls: stop, observer, locator, ...(rebalancer ? { rebalancer } : {}) };
}

/** What readiness.ts decides on, but the connections' state. */
function readinessFacts(probe: ReadinessProbe, store: ClusterStore, leaseMs: number): Omit<ReadinessFacts, 'closed'> {
  return { now: performance.now(), lastOkAt: probe.lastOkAt, lastError: probe.lastError, leaseAges: store.leaseAges(), leaseMs, staleMs: READY_STALE_MS };
}

/** How long POST /admin/drain waits for the node to hold no shard before it answers with those left. */
const DRAIN_WAIT_MS = 30_000;

/**
 * Drain: the node's heartbeats say it drains, so every node (this one too) leaves it out of
 * placement: its shards are handed over by the rebalancer, new rooms go elsewhere. Resolves when
 * it holds no shard, or after DRAIN_WAIT_MS with those it holds.
 */
async function drainNode(store: ClusterStore, relay: Relay | undefined, rebalancer: Rebalancer | undefined): Promise<{ draining: boolean; shards: number[] }> {
  if (!relay || !rebalancer)
    throw new HerculesError('bad-argument', 'this node places no shards (placement: false): it cannot drain; stop it with SIGTERM instead');
  relay.drain();
  const deadline = performance.now() + DRAIN_WAIT_MS;
  while (store.owned().length > 0 && performance.now() < deadline) {
    await rebalancer.tick();
    await new Promise((r) => setTimeout(r, 100));
  }
  return { draining: true, shards: store.owned() };
}

/**
 * The new owner's side of a handover (handoff.ts): take the shard and load the rooms the old
 * owner had loaded, while their clients reconnect; only if placement still says this node (a
 * shard placed elsewhere meanwhile would only be handed on again).
 */
function handedOver(svc: RoomService, store: ClusterStore, nc: NatsConnection, prefix: string, rebalancer: () => Rebalancer | undefined): Handoffs {
  return new Handoffs({
    nc,
    prefix,
    nodeId: store.nodeId,
    async take(k, rooms) {
      const placed = rebalancer();
      placed?.refresh();
      if (placed?.preferred(k) !== store.nodeId) return;
      await store.acquire(k);
      await Promise.all(
        rooms
          .filter((r) => store.shardOf(r) === k)
          .map((r) =>
            svc
              .room(r)
              .state()
              .catch(() => {}),
          ),
      );
    },
    onWarning: (m) => svc.log.warn(m),
  });
}

/** Shard placement on this node: its shards that belong elsewhere are handed over as on a clean close (their rooms' members reconnect). */
function placeShards(svc: RoomService, store: ClusterStore, relay: Relay, handoffs: Handoffs, settleMs: number): Rebalancer {
  return new Rebalancer({
    nodeId: store.nodeId,
    shards: store.shards,
    settleMs,
    heard: () => relay.peers(),
    draining: () => relay.drainingPeers(),
    owned: () => store.owned(),
    handOver: async (k, to) => {
      const t0 = performance.now();
      // `to` takes the shard as soon as the lease is free, and loads the rooms loaded here (handoff.ts).
      let rooms: string[] = [];
      const announced = store.owns(k);
      if (announced) handoffs.start(to, k);
      const moved = await store.handOver(k, to, () => {
        rooms = svc.loadedRooms().filter((room) => store.shardOf(room) === k);
        svc.failRooms((room) => store.shardOf(room) === k, reconnectToResume(`the room moved to node ${to} (shard placement)`));
      });
      if (moved) handoffs.released(to, k, rooms);
      else if (announced) handoffs.cancel(to, k);
      if (moved) svc.log.info({ shard: k, to, ms: Math.round(performance.now() - t0) }, 'handed a shard over (placement)');
    },
    onWarning: (m) => svc.log.warn(m),
  });
}
