/**
 * The Hercules server's one front door, whatever stores its rooms: an HTTP server with
 * /healthz, /metrics, the admin HTTP API (admin-http.ts) and the app's own paths; webhooks
 * (webhooks.ts); the room service (room-service.ts) on its upgrades; and a room locator
 * (room-locator.ts) that says where each room is served. An embedded server is this over its
 * SQLite store (server.ts) with every room here; a cluster node (@hercules/cluster) is this over
 * a `ClusterStore` with its cluster's locator. This file loads no SQLite: it is
 * `@hercules/server/core`'s `createServer`. docs/architecture.md draws the pipeline and its seams.
 */
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { HerculesError, PROTOCOL_VERSION, type LogEntry } from '@hercules/core';
import type { RoomStore } from './store/room-store.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { adminHttp, checkAdminOptions, type AdminOptions, type DrainResult } from './admin-http.ts';
import { checkWebhooks, memoryCursors, Webhooks, type WebhookCursors, type WebhookOptions } from './webhooks.ts';
import { boundConnections, boundedHttpOptions, countPendingCloses } from './upgrade-bound.ts';
import { StoreHealth } from './store-health.ts';
import { hereLocator, type RemoteRooms, type RoomLocator } from './room-locator.ts';
import { locatedBackend } from './located-backend.ts';
import { routedUpgrade } from './routed-upgrade.ts';
import {
  createRoomService,
  machineMap,
  resolveLimits,
  type Limits,
  type RoomFile,
  type RoomService,
  type RoomsPage,
  type RoomsQuery,
  type ServerRoom,
  type ServiceOptions,
} from './room-service.ts';

export type { Limits };

export interface FrontDoorOptions<Store extends RoomStore = RoomStore> extends ServiceOptions {
  /** TCP port; 0 picks a free one. Default 8787. */
  port?: number;
  /** Interface to listen on. Default 127.0.0.1. */
  host?: string;
  /**
   * Keep the rooms in this store: a `MemoryStore` for rooms that need not outlive the process
   * (tests, throwaway rooms), or your own `RoomStore` that passes
   * `@hercules/server/store-conformance`. The caller owns it: `close()` releases the rooms
   * (writing their checkpoints) and leaves the store open, so a server started again on it finds
   * them there.
   */
  store?: Store;
  /** Where the rooms are stored and served, opened once the server listens (a cluster node's: @hercules/cluster). Instead of `store`. */
  deployment?: Deployment<Store>;
  /** Extra HTTP handler for other paths (e.g. static demo apps); return false to 404. */
  http?: (req: IncomingMessage, res: ServerResponse) => boolean;
  /** The admin HTTP API under /admin/ (admin-http.ts), for a backend holding `token`; absent: none. */
  admin?: AdminOptions;
  /**
   * POST each room's commits to these URLs, at least once, signed (webhooks.ts,
   * docs/admin-api.md), from any store that passes the conformance suite. Where each webhook got
   * to is kept by the deployment (the embedded server's: on disk), else in memory.
   */
  webhooks?: readonly WebhookOptions[];
}

/**
 * Where a server's rooms are stored and served: the embedded server's SQLite file (server.ts),
 * a cluster node's NATS (@hercules/cluster). Opened once the HTTP server listens (a cluster
 * node's id defaults to its address); until it is, requests are answered 503.
 */
export interface Deployment<Store extends RoomStore = RoomStore> {
  open(ctx: DeploymentContext): Promise<Placement<Store>>;
}

export interface DeploymentContext {
  address: AddressInfo;
  /** The server's metrics (the service counts into them too). */
  metrics: Metrics;
  /** The first position of `room` a webhook has not delivered, if any: a store may keep its log from there (SqliteStoreOptions.retainFrom). */
  undelivered(room: string): number | undefined;
}

/** An opened deployment. */
export interface Placement<Store extends RoomStore = RoomStore> {
  store: Store;
  /** Called once with the service: where its rooms are served (default: all here). */
  attach?(service: RoomService): RoomLocator;
  /** Where webhooks keep their positions (default: in memory). */
  webhookCursors?(): WebhookCursors;
  /** For /healthz: why the deployment is unhealthy, if it is, and figures of its own. */
  health?(): { reason?: string; fields?: Record<string, unknown> };
  /** What the start-up log line says of it. */
  describe?: Record<string, unknown>;
  /**
   * Hand this node's rooms over to the other nodes and take no new ones (`POST /admin/drain`);
   * resolves once it holds none, or with those it still holds after a while. Absent: the server
   * cannot drain (embedded).
   */
  drain?(): Promise<DrainResult>;
  /** Stop reaching other nodes (before the service closes). */
  stopping?(): void;
  /** Release what `open` took (after the service closed): a store it opened, its connections. */
  close(): Promise<void>;
}

export interface HerculesServer<Store extends RoomStore = RoomStore> {
  readonly url: string;
  readonly port: number;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** Rooms currently in memory. */
  loadedRooms(): string[];
  /** The room store: the SQLite store in `dataDir`, the one given as `store`, or the deployment's (for tests and tools). */
  readonly store: Store;
  /**
   * Close every connection of `user` (in `room` only, if given) on this server with the fatal
   * `revoked`; returns how many. `POST /admin/revoke` does this on every node of a cluster.
   */
  revoke(target: { user: string; room?: string; reason?: string }): number;
  /** The server's own access to a room (a backend's): submit ops, read state, follow commits. See RoomService.room. */
  room(name: string, machine?: string): ServerRoom;
  /** A page of the stored rooms, with their machine, version, size and last activity (members for those in memory). See RoomService.rooms. Also `GET /admin/rooms`. */
  rooms(query?: RoomsQuery): Promise<RoomsPage>;
  /** Create a room from an export (`server.room(name).export()` elsewhere). Also `PUT /admin/rooms/:room`. */
  importRoom(name: string, file: RoomFile): Promise<void>;
  /** Stop accepting, close connections, write checkpoints, close the database. */
  close(): Promise<void>;
}

/** The server's parts once its deployment opened, and how it closes. */
interface Parts {
  service: RoomService;
  placement: Placement<RoomStore>;
  locator: RoomLocator;
  webhooks?: Webhooks;
  health: StoreHealth;
  /** The admin API's handler, if `admin` is given: it reaches each room where it is served. */
  admin?: ReturnType<typeof adminHttp>;
}

/** A Hercules server over `opts.store` or `opts.deployment` (the embedded server's `createServer` adds SQLite in `dataDir`). */
export async function createServer<Store extends RoomStore = RoomStore>(opts: FrontDoorOptions<Store>): Promise<HerculesServer<Store>> {
  const deployment = deploymentOf(opts);
  // Options are checked before anything is opened.
  const machines = [...machineMap('createServer', opts.machines).values()];
  const limits = resolveLimits('createServer', opts);
  checkAdminOptions('createServer', opts.admin);
  checkWebhooks('createServer', opts.webhooks);
  const metrics = createMetrics();
  let parts: Parts | undefined;
  // Until the deployment is open and the service made, requests are answered 503 and upgrades refused.
  const http: HttpServer = createHttpServer(boundedHttpOptions(limits), (req, res) => {
    if (!parts) return starting(res);
    handleHttp(parts, opts, metrics, req, res).catch((e) => internalError(parts!.service.log, req, res, e));
  });
  let routeUpgrades: ((req: IncomingMessage, socket: Duplex, head: Buffer) => void) | undefined;
  http.on('upgrade', (req, socket: Duplex, head: Buffer) => {
    if (routeUpgrades) routeUpgrades(req, socket, head);
    else socket.end('HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n\r\n');
  });
  const pending = boundConnections(
    http,
    limits,
    countPendingCloses(metrics, () => parts?.service.log),
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
  const address = http.address() as AddressInfo;
  try {
    parts = await openParts(opts, deployment, address, metrics);
  } catch (e) {
    await closeHttp();
    throw e;
  }
  const p = parts;
  const upgrade = p.locator.remote ? routedUpgrade(p.service, p.locator as RoomLocator & { remote: RemoteRooms }, p.service.log) : undefined;
  routeUpgrades = (req, socket, head) => (upgrade ? upgrade.upgrade(req, socket, head) : p.service.handleUpgrade(req, socket, head));
  const url = `ws://${address.address.includes(':') ? `[${address.address}]` : address.address}:${address.port}`;
  p.service.log.info({ url, ...p.placement.describe, machines: machines.map((m) => m.name), ...startupFields(opts, p.service) }, 'hercules server listening');
  let closed: Promise<void> | undefined;
  return {
    url,
    port: address.port,
    metrics,
    log: p.service.log,
    loadedRooms: () => p.service.loadedRooms(),
    revoke: (target) => p.service.revoke(target),
    room: (name, machine) => p.service.room(name, machine),
    rooms: (query) => p.service.rooms(query),
    importRoom: (name, file) => p.service.importRoom(name, file),
    store: p.placement.store as Store,
    close() {
      closed ??= (async () => {
        p.placement.stopping?.();
        await p.service.close();
        await p.webhooks?.close();
        upgrade?.close();
        await closeHttp();
        await p.placement.close();
        p.service.log.info('hercules server closed');
      })();
      return closed;
    },
  };
}

/** The deployment from the options: the one given, or the given store's (the caller owns it). */
function deploymentOf<Store extends RoomStore>(opts: FrontDoorOptions<Store>): Deployment<Store> {
  if (!opts || typeof opts !== 'object') throw new HerculesError('bad-argument', 'createServer: options are required (machines, and a store)');
  if (opts.deployment !== undefined) {
    if (opts.store !== undefined) throw new HerculesError('bad-argument', 'createServer: give `store` or `deployment`, not both');
    return opts.deployment;
  }
  const given = opts.store;
  if (given === undefined || given === null || typeof given !== 'object' || typeof given.open !== 'function' || typeof given.append !== 'function') {
    throw new HerculesError(
      'bad-argument',
      given === undefined
        ? 'createServer: `store` is required here (@hercules/server/core keeps no SQLite file): a MemoryStore or your own RoomStore; for rooms in a SQLite file in `dataDir`, use createServer from @hercules/server'
        : 'createServer: `store` must be a RoomStore (a MemoryStore, a SqliteStore, or your own store with open, append, release, rooms and close)',
    );
  }
  const describe = { store: given.constructor?.name ?? 'given' };
  return { open: async () => ({ store: given, describe, close: async () => {} }) };
}

/** Open the deployment, then the service over its store, its locator and the webhooks; on a failure, what was opened is let go. */
async function openParts(opts: FrontDoorOptions<any>, deployment: Deployment<any>, address: AddressInfo, metrics: Metrics): Promise<Parts> {
  let webhooks: Webhooks | undefined;
  const placement: Placement<RoomStore> = await deployment.open({ address, metrics, undelivered: (room) => webhooks?.retainFrom(room) });
  // Whether the store commits, for /healthz: the service's appends go through it (store-health.ts).
  const health = new StoreHealth();
  let service: RoomService;
  try {
    // Webhooks hear of each commit (an O(1) note; the requests go from their own worker).
    const onCommit =
      opts.webhooks?.length || opts.onCommit
        ? (room: string, entries: readonly LogEntry[]) => {
            webhooks?.committed(room, entries);
            opts.onCommit?.(room, entries);
          }
        : undefined;
    service = createRoomService({ ...opts, ...(onCommit ? { onCommit } : {}), store: health.watch(placement.store), metrics, caller: 'createServer' });
  } catch (e) {
    await placement.close();
    throw e;
  }
  try {
    const locator = placement.attach?.(service) ?? hereLocator();
    if (opts.webhooks?.length)
      webhooks = new Webhooks(
        opts.webhooks,
        placement.webhookCursors?.() ?? memoryCursors(),
        (r, after, max) => service.readLog(r, after, max),
        service.log,
        metrics,
      );
    const drain = placement.drain?.bind(placement);
    const admin = opts.admin ? adminHttp(opts.admin, { ...locatedBackend(service, locator), ...(drain ? { drain } : {}) }) : undefined;
    return { service, placement, locator, health, ...(webhooks ? { webhooks } : {}), ...(admin ? { admin } : {}) };
  } catch (e) {
    // The webhooks' positions could not be opened (the data directory's lock): let go of what was opened so far.
    placement.stopping?.();
    await service.close();
    await placement.close();
    throw e;
  }
}

/** The routes: /healthz, /metrics, the admin API, the app's own, else 404. */
async function handleHttp(p: Parts, opts: FrontDoorOptions<any>, metrics: Metrics, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/healthz') return healthz(p, res);
  if (path === '/metrics') {
    const text = await metrics.registry.metrics();
    res.writeHead(200, { 'content-type': metrics.registry.contentType });
    res.end(text);
    return;
  }
  if (p.admin && (await p.admin(req, res, path))) return;
  if (opts.http?.(req, res)) return;
  res.writeHead(404, { 'content-type': 'text/plain' });
  res.end('not found: WebSocket clients connect to /?room=NAME; see also /healthz and /metrics\n');
}

/** /healthz: the deployment answers (the SQLite file a query, a node its NATS) and the store's commits are not failing (store-health.ts). */
function healthz(p: Parts, res: ServerResponse): void {
  const own = p.placement.health?.() ?? {};
  const commits = p.health.report();
  const reason = own.reason ?? (commits.ok ? undefined : `the room store cannot commit: ${commits.error}`);
  res.writeHead(reason ? 503 : 200, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({
      ok: !reason,
      ...(reason ? { reason } : {}),
      rooms: p.service.loadedRooms().length,
      connections: p.service.connectionCount(),
      protocol: PROTOCOL_VERSION,
      store: commits,
      ...own.fields,
    }),
  );
}

function starting(res: ServerResponse): void {
  res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
  res.end(JSON.stringify({ ok: false, starting: true }));
}

function internalError(log: Logger, req: IncomingMessage, res: ServerResponse, e: unknown): void {
  log.error({ err: e instanceof Error ? e.stack : String(e), path: req.url }, 'HTTP handler failed');
  try {
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
    res.end('internal error\n');
  } catch {
    /* the response is gone */
  }
}

function startupFields(opts: FrontDoorOptions<any>, service: RoomService): Record<string, unknown> {
  return {
    ackTimeoutMs: opts.ackTimeoutMs ?? 2000,
    simulateRttMs: opts.simulateRttMs ?? 0,
    auth: opts.jwt ? 'jwt' : opts.authenticate ? 'custom' : 'none (anonymous clients; see docs/security.md)',
    limits: service.limits,
  };
}
