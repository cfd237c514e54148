/**
 * A Hercules cluster node: the same room service as the embedded server, over a `ClusterStore`
 * on NATS JetStream, plus the relay. Any node accepts any client (no load-balancer affinity):
 * a room whose shard this node owns (or can take) is served here; one whose shard another live
 * node owns is relayed to it; one whose owner died is taken over once the owner's lease expires.
 */
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { HerculesError, PROTOCOL_VERSION } from '@hercules/core';
import {
  acceptClock,
  boundConnections,
  boundedHttpOptions,
  type Connection,
  countPendingCloses,
  createMetrics,
  createRoomService,
  resolveLimits,
  StoreHealth,
  type ServiceOptions,
  type RoomService,
  wsConnection,
  type WsSocket,
} from '@hercules/server';
import { reconnectToResume, systemClock } from '@hercules/server/pipeline';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { type WebSocket, WebSocketServer } from 'ws';
import { ClusterStore, type ClusterStoreObserver, NotOwnerError } from './cluster-store.ts';
import { auditRoom, type RoomAudit } from './audit.ts';
import { JetStreamLeases, JetStreamShardLog, natsShortcomings } from './jetstream-log.ts';
import { registerClusterMetrics } from './metrics.ts';
import { Relay } from './relay.ts';
import { type Route, routeRoom } from './routing.ts';

export interface ClusterNodeOptions extends ServiceOptions {
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
  port?: number;
  host?: string;
  /** Extra HTTP handler for other paths (e.g. static demo apps); return false to 404. */
  http?: (req: IncomingMessage, res: ServerResponse) => boolean;
}

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
  const replicas = opts.replicas ?? 3;
  const limits = resolveLimits('createClusterNode', opts);
  // Made before the service (which counts into them), for what the HTTP server counts before it exists.
  const metrics = createMetrics();
  let service: RoomService | undefined;
  // Listening comes first (the node's id defaults to its address); until the node is ready,
  // requests are answered 503 and upgrades refused, so nothing waits on a half-built node.
  let ready = false;
  const http: HttpServer = createHttpServer(boundedHttpOptions(limits), (_req, res) => {
    if (ready) return;
    res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
    res.end(JSON.stringify({ ok: false, starting: true }));
  });
  const refuseUpgrade = (_req: IncomingMessage, socket: Duplex) => {
    if (ready) return;
    socket.end('HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n\r\n');
  };
  http.on('upgrade', refuseUpgrade);
  // From accept to the upgrade request, as the embedded server (upgrade-bound.ts).
  const pending = boundConnections(
    http,
    limits,
    countPendingCloses(metrics, () => service?.log),
  );
  const closeHttp = () => {
    const closed = new Promise<void>((r) => http.close(() => r()));
    pending.close();
    return closed;
  };
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(opts.port ?? 8787, opts.host ?? '127.0.0.1', () => resolve());
  });
  const addr = http.address() as AddressInfo;
  const nodeId = (opts.nodeId ?? `${addr.address}:${addr.port}`).replace(/[^A-Za-z0-9_-]/g, '_');
  let nc: NatsConnection | undefined, leaseNc: NatsConnection | undefined;
  try {
    // A server that stops answering (frozen, a GC pause, a VM stalled) is left within about 3 s
    // for another one: the client library's default ping (every 2 minutes) would hold appends and
    // lease renewals for minutes.
    const link = { maxReconnectAttempts: -1, pingInterval: 1000, maxPingOut: 3 };
    nc = await connect({ servers: opts.nats, name: `hercules-${nodeId}`, ...link });
    // Leases on a connection of their own: renewals must not queue behind the appends.
    leaseNc = await connect({ servers: opts.nats, name: `hercules-${nodeId}-leases`, ...link });
  } catch (e) {
    await nc?.close();
    await closeHttp();
    throw new HerculesError(
      'storage-failed',
      `cannot reach NATS at ${opts.nats.join(', ')}: ${(e as Error).message}. Check the servers run and the URLs are right.`,
    );
  }
  // Connected: JetStream may still be electing a leader (a NATS server just restarted, or frozen),
  // which answers with timeouts for seconds. A node started then waits it out (answering 503)
  // instead of exiting.
  const settingUp = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    const deadline = performance.now() + 60_000;
    for (;;) {
      try {
        return await fn();
      } catch (e) {
        if (performance.now() > deadline) {
          await nc!.close().catch(() => {});
          await leaseNc!.close().catch(() => {});
          await closeHttp();
          throw new HerculesError(
            'storage-failed',
            `NATS at ${opts.nats.join(', ')} did not ${what} within 60 s: ${(e as Error).message}. Check JetStream is enabled and has a leader.`,
          );
        }
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  };
  const log = await settingUp('answer JetStream requests', () =>
    JetStreamShardLog.open(nc!, { streamPrefix: prefix.toUpperCase(), subjectPrefix: prefix, replicas, duplicateWindowMs: opts.duplicateWindowMs }),
  );
  const natsLacks = natsShortcomings(log.serverVersion);
  const leases = await settingUp('set up the lease bucket', () =>
    JetStreamLeases.open(leaseNc!, { bucket: `${prefix}_owners`, ttlMs: opts.leaseMs ?? 2000, replicas }),
  );
  // The store is made before the service that owns the metrics registry: its events go through this.
  let observer: ClusterStoreObserver | undefined;
  const store = new ClusterStore({
    log,
    leases,
    nodeId,
    shards: opts.shards,
    subjectPrefix: prefix,
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
    },
  });
  // Whether the store commits, for /healthz: the service's appends go through it (store-health.ts).
  const health = new StoreHealth();
  service = createRoomService({ ...opts, store: health.watch(store), metrics, caller: 'createClusterNode' });
  const svc = service;
  observer = registerClusterMetrics(svc.metrics.registry, {
    owned: () => store.owned(),
    leaseAges: () => store.leaseAges(),
    relayCounts: () => relay.counts(),
    readStats: () => log.readStats,
  });
  const log_ = svc.log;

  /** Serve here if this node owns the room's shard or can take it; else at its live owner; else wait (routing.ts). */
  const route = (room: string) =>
    routeRoom(room, {
      store,
      nodeId,
      alive: (node) => relay.alive(node),
      clock: systemClock,
      // Long enough for a dead owner's lease to expire and for NATS to elect a leader (4-9 s on 2.9).
      waitMs: (opts.leaseMs ?? 2000) + 10_000,
    });

  const relay = new Relay({
    nc,
    nodeId,
    prefix,
    onWarning: (m) => log_.warn(m),
    async accept(conn, request, room) {
      const k = store.shardOf(room);
      try {
        await store.acquire(k);
      } catch (e) {
        return { ok: false, owner: e instanceof NotOwnerError ? e.owner : undefined, message: (e as Error).message };
      }
      await svc.handleConnection(conn, request);
      return { ok: true };
    },
  });

  const wss = new WebSocketServer({ noServer: true, maxPayload: svc.limits.maxFrameBytes });
  const leaseMs = opts.leaseMs ?? 2000;

  /** Every WebSocket is accepted here, then served locally or relayed (the client waits in between). */
  function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => {});
    wss.handleUpgrade(req, socket, head, (ws) => {
      serve(req, ws).catch((e) => {
        log_.error({ err: (e as Error).stack }, 'serving a connection failed');
        ws.close(1011, 'internal error');
      });
    });
  }

  async function serve(req: IncomingMessage, ws: WebSocket): Promise<void> {
    const remote = req.socket.remoteAddress ?? '?';
    const request = { url: req.url, headers: req.headers, socket: { remoteAddress: remote }, acceptedAt: acceptClock() };
    const early: Uint8Array[] = [];
    let gone = false;
    const hold = (data: Buffer) => early.push(data);
    ws.on('message', hold);
    ws.on('close', () => {
      gone = true;
    });
    ws.on('error', () => {});
    // The frames that arrive until the service listens (its admission is async) are held, then handed over in order.
    const local = () =>
      svc.handleConnection(
        withEarlyFrames(wsConnection(ws as unknown as WsSocket, remote), early, () => {
          ws.off('message', hold);
          return gone;
        }),
        request,
      );
    const room = roomParam(req.url);
    if (room === undefined) return local(); // the service refuses it, naming what is wrong
    // Until a dead owner's lease has surely expired, keep trying: its rooms come here or to another node.
    const deadline = performance.now() + leaseMs + 3000;
    for (;;) {
      if (gone) return;
      let r: Route;
      try {
        r = await route(room);
      } catch (e) {
        log_.warn({ room, err: (e as Error).message }, 'no node can serve this room now');
        ws.close(1013, 'room unavailable, retry');
        return;
      }
      if (gone) return;
      if (r.local) return local();
      try {
        const link = await relay.open(r.owner, room, request, {
          send: (frame) => ws.readyState === ws.OPEN && ws.send(frame, { binary: true }),
          close: (code, reason) => ws.close(code >= 1000 && code < 5000 && code !== 1005 && code !== 1006 ? code : 1011, reason),
        });
        ws.off('message', hold);
        if (gone) return link.close(1000, 'client left');
        ws.on('message', (data: Buffer) => link.send(data));
        ws.on('close', () => link.close(1000, 'client left'));
        for (const f of early) link.send(f);
        return;
      } catch (e) {
        log_.info({ room, owner: r.owner, err: (e as Error).message }, 'relay not accepted; routing again');
        if (performance.now() > deadline) {
          ws.close(1012, 'room moved, reconnect');
          return;
        }
        await new Promise((res) => setTimeout(res, 100));
      }
    }
  }

  http.on('request', (req, res) => {
    if (!ready) return;
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      const commits = health.report();
      const reason =
        nc!.isClosed() || leaseNc!.isClosed() ? 'the connection to NATS is closed' : commits.ok ? undefined : `the room store cannot commit: ${commits.error}`;
      res.writeHead(reason ? 503 : 200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          ok: !reason,
          ...(reason ? { reason } : {}),
          store: commits,
          node: nodeId,
          shards: store.owned(),
          rooms: svc.loadedRooms().length,
          connections: svc.connectionCount(),
          relayed: relay.counts(),
          protocol: PROTOCOL_VERSION,
        }),
      );
      return;
    }
    if (path === '/metrics') {
      svc.metrics.registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': svc.metrics.registry.contentType });
          res.end(text);
        },
        () => {
          res.writeHead(500);
          res.end();
        },
      );
      return;
    }
    if (opts.http?.(req, res)) return;
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found: WebSocket clients connect to /?room=NAME; see also /healthz and /metrics\n');
  });
  http.on('upgrade', (req, socket, head) => {
    if (ready) upgrade(req, socket, head);
  });
  ready = true;
  const url = `ws://${addr.address.includes(':') ? `[${addr.address}]` : addr.address}:${addr.port}`;
  log_.info(
    { url, node: nodeId, nats: opts.nats, natsVersion: log.serverVersion, shards: store.shards, leaseMs: opts.leaseMs ?? 2000 },
    'hercules cluster node listening',
  );
  for (const lack of natsLacks)
    log_.warn({ natsVersion: log.serverVersion }, `nats-server ${log.serverVersion}: ${lack}; run a current release in production (docs/deployment.md)`);

  let closed: Promise<void> | undefined;
  return {
    url,
    port: addr.port,
    nodeId,
    store,
    service: svc,
    relay,
    close() {
      closed ??= (async () => {
        relay.close();
        await svc.close();
        wss.close();
        await closeHttp();
        await store.close();
        await nc!.close();
        await leaseNc!.close();
      })();
      return closed;
    },
  };
}

/**
 * A connection whose first frames arrived before anyone listened: `stopHolding` ends that (and
 * says whether the socket closed meanwhile), and they are handed over first, in order.
 */
function withEarlyFrames(conn: Connection, early: Uint8Array[], stopHolding: () => boolean): Connection {
  return {
    get remote() {
      return conn.remote;
    },
    get isOpen() {
      return conn.isOpen;
    },
    get bufferedAmount() {
      return conn.bufferedAmount;
    },
    listen(events) {
      const closedAlready = stopHolding(); // its close event has passed: say so, once
      conn.listen(events);
      for (const f of early.splice(0)) events.message(f, true);
      if (closedAlready) queueMicrotask(() => events.close());
    },
    send: (f) => conn.send(f),
    close: (code, reason) => conn.close(code, reason),
    terminate: () => conn.terminate(),
    pause: () => conn.pause(),
    resume: () => conn.resume(),
    ...(conn.ping ? { ping: () => conn.ping!() } : {}),
  };
}

function roomParam(url: string | undefined): string | undefined {
  try {
    const room = new URL(url ?? '/', 'http://x').searchParams.get('room');
    return room === null || room === '' ? undefined : room;
  } catch {
    return undefined;
  }
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
