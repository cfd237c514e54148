/**
 * The Hercules server: an HTTP server with /healthz and /metrics, the room service
 * (room-service.ts: WebSocket connections, admission, fair input scheduling, rooms) mounted on
 * its upgrades, and SQLite storage. docs/architecture.md draws the pipeline and its seams.
 */
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { HerculesError, PROTOCOL_VERSION, type LogEntry } from '@hercules/core';
import { SqliteStore } from './store/sqlite.ts';
import type { RoomStore } from './store/room-store.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { adminHttp, checkAdminOptions, type AdminOptions } from './admin-http.ts';
import { checkWebhooks, Webhooks, type WebhookOptions } from './webhooks.ts';
import { boundConnections, boundedHttpOptions, countPendingCloses } from './upgrade-bound.ts';
import { StoreHealth } from './store-health.ts';
import {
  createRoomService,
  machineMap,
  resolveLimits,
  type Limits,
  type RoomFile,
  type ServiceOptions,
  type RoomsPage,
  type RoomsQuery,
  type ServerRoom,
} from './room-service.ts';

export type { Limits };

export interface ServerOptions<Store extends RoomStore = SqliteStore> extends ServiceOptions {
  /** TCP port; 0 picks a free one. Default 8787. */
  port?: number;
  /** Interface to listen on. Default 127.0.0.1. */
  host?: string;
  /** Directory for the SQLite file (and the webhooks' outbox). Required unless `store` is given. */
  dataDir?: string;
  /**
   * Keep the rooms in this store instead of a SQLite file in `dataDir`: a `MemoryStore` for rooms
   * that need not outlive the process (tests, throwaway rooms), or your own `RoomStore` that
   * passes `@hercules/server/store-conformance`. The caller owns it: `close()` releases the
   * rooms (writing their checkpoints) and leaves the store open, so a server started again on
   * it finds them there. Webhooks need the SQLite store: they keep unsent commits in its log.
   */
  store?: Store;
  /** Extra HTTP handler for other paths (e.g. static demo apps); return false to 404. */
  http?: (req: IncomingMessage, res: ServerResponse) => boolean;
  /** The admin HTTP API under /admin/ (admin-http.ts), for a backend holding `token`; absent: none. */
  admin?: AdminOptions;
  /** POST each room's commits to these URLs, at least once, signed (webhooks.ts, docs/admin-api.md). */
  webhooks?: readonly WebhookOptions[];
}

export interface HerculesServer<Store extends RoomStore = SqliteStore> {
  readonly url: string;
  readonly port: number;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** Rooms currently in memory. */
  loadedRooms(): string[];
  /** The room store: the SQLite store in `dataDir`, or the one given as `store` (for tests and tools). */
  readonly store: Store;
  /**
   * Close every connection of `user` (in `room` only, if given) with the fatal `revoked`; returns
   * how many. Also `POST /admin/revoke`.
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

export async function createServer<Store extends RoomStore = SqliteStore>(opts: ServerOptions<Store>): Promise<HerculesServer<Store>> {
  const given = opts?.store;
  if (given !== undefined && (given === null || typeof given !== 'object' || typeof given.open !== 'function' || typeof given.append !== 'function')) {
    throw new HerculesError(
      'bad-argument',
      'createServer: `store` must be a RoomStore (a MemoryStore, a SqliteStore, or your own store with open, append, release, rooms and close)',
    );
  }
  if (given !== undefined && opts.webhooks?.length) {
    throw new HerculesError(
      'bad-argument',
      "createServer: webhooks need the built-in SQLite store, which keeps a room's commits until they are delivered; drop `store` (the rooms then live in `dataDir`) or the webhooks",
    );
  }
  if (given === undefined && (!opts || typeof opts.dataDir !== 'string' || opts.dataDir.length === 0)) {
    throw new HerculesError('bad-argument', 'createServer: `dataDir` is required (a directory for the SQLite file), unless you give a `store`');
  }
  // Options are checked before the data directory is touched.
  const machines = [...machineMap('createServer', opts.machines).values()];
  const limits = resolveLimits('createServer', opts);
  checkAdminOptions('createServer', opts.admin);
  checkWebhooks('createServer', opts.webhooks);
  const metrics = createMetrics();
  // Checkpoints are timed by the rooms (apart from their commits): the store writes each one it is given.
  let webhooks: Webhooks | undefined;
  const sqlite: SqliteStore | undefined =
    given === undefined
      ? new SqliteStore(opts.dataDir!, {
          checkpointEvery: 1,
          // What webhooks have not delivered stays in the log past a checkpoint.
          ...(opts.webhooks?.length ? { retainFrom: (room: string) => webhooks?.retainFrom(room) ?? Number.POSITIVE_INFINITY } : {}),
          onCommit: (c) => {
            if (c.appends > 0) {
              metrics.commitSeconds.observe(c.seconds);
              metrics.commitOps.observe(c.ops);
            }
            // Appends the database refused after their group's transaction failed: each room fails alone.
            if (c.failed > 0 && c.transactions > 1) metrics.outputFailures.inc({ stage: 'commit' }, c.failed);
          },
          onSync: (s) => metrics.commitSyncSeconds.observe(s.seconds),
        })
      : undefined;
  const store: RoomStore = given ?? sqlite!;
  // The server closes only the store it opened; a given one is the caller's.
  const closeOwnStore = async () => {
    await sqlite?.close();
  };
  // Whether the store commits, for /healthz: the service's appends go through it.
  const health = new StoreHealth();
  let service: ReturnType<typeof createRoomService>;
  try {
    // Webhooks hear of each commit (an O(1) note; the requests go from their own worker).
    const onCommit =
      opts.webhooks?.length || opts.onCommit
        ? (room: string, entries: readonly LogEntry[]) => {
            webhooks?.committed(room, entries);
            opts.onCommit?.(room, entries);
          }
        : undefined;
    service = createRoomService({ ...opts, ...(onCommit ? { onCommit } : {}), machines, store: health.watch(store), metrics, caller: 'createServer' });
  } catch (e) {
    await closeOwnStore();
    throw e;
  }
  const log = service.log;
  if (opts.webhooks?.length) {
    try {
      webhooks = new Webhooks(opts.webhooks, opts.dataDir!, (room, after, max) => service.readLog(room, after, max), log, metrics);
    } catch (e) {
      // Its database could not be opened: let go of what was opened so far (the data directory's lock).
      await service.close();
      await closeOwnStore();
      throw e;
    }
  }
  const admin = opts.admin ? adminHttp(opts.admin, service) : undefined;

  const http: HttpServer = createHttpServer(boundedHttpOptions(limits), (req, res) => {
    handleHttp(req, res).catch((e) => {
      log.error({ err: e instanceof Error ? e.stack : String(e), path: req.url }, 'HTTP handler failed');
      try {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('internal error\n');
      } catch {
        /* the response is gone */
      }
    });
  });
  async function handleHttp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      // The SQLite file answers a query, and the store's commits are not failing (store-health.ts).
      let readable = true;
      try {
        sqlite?.roomCount();
      } catch {
        readable = false;
      }
      const commits = health.report();
      const reason = !readable ? 'the SQLite file does not answer a query' : commits.ok ? undefined : `the room store cannot commit: ${commits.error}`;
      res.writeHead(reason ? 503 : 200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          ok: !reason,
          ...(reason ? { reason } : {}),
          rooms: service.loadedRooms().length,
          connections: service.connectionCount(),
          protocol: PROTOCOL_VERSION,
          store: commits,
        }),
      );
      return;
    }
    if (path === '/metrics') {
      res.writeHead(200, { 'content-type': metrics.registry.contentType });
      res.end(await metrics.registry.metrics());
      return;
    }
    if (admin && (await admin(req, res, path))) return;
    if (opts.http && opts.http(req, res)) return;
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found: WebSocket clients connect to /?room=NAME; see also /healthz and /metrics\n');
  }
  http.on('upgrade', (req, socket, head) => service.handleUpgrade(req, socket, head));
  // From accept to the upgrade request: the service sees a connection only after it.
  const pending = boundConnections(
    http,
    limits,
    countPendingCloses(metrics, () => log),
  );

  try {
    await new Promise<void>((resolve, reject) => {
      http.once('error', reject);
      http.listen(opts.port ?? 8787, opts.host ?? '127.0.0.1', () => resolve());
    });
  } catch (e) {
    await service.close();
    await webhooks?.close();
    await closeOwnStore();
    throw e;
  }
  const addr = http.address() as AddressInfo;
  const url = `ws://${addr.address.includes(':') ? `[${addr.address}]` : addr.address}:${addr.port}`;
  log.info(
    {
      url,
      ...(given === undefined ? { dataDir: opts.dataDir } : { store: given.constructor?.name ?? 'given' }),
      machines: machines.map((m) => m.name),
      ackTimeoutMs: opts.ackTimeoutMs ?? 2000,
      simulateRttMs: opts.simulateRttMs ?? 0,
      auth: opts.jwt ? 'jwt' : opts.authenticate ? 'custom' : 'none (anonymous clients; see docs/security.md)',
      limits: service.limits,
    },
    'hercules server listening',
  );

  let closed: Promise<void> | undefined;
  return {
    url,
    port: addr.port,
    metrics,
    log,
    loadedRooms: () => service.loadedRooms(),
    revoke: (target) => service.revoke(target),
    room: (name, machine) => service.room(name, machine),
    rooms: (query) => service.rooms(query),
    importRoom: (name, file) => service.importRoom(name, file),
    store: store as Store,
    close() {
      closed ??= (async () => {
        await service.close();
        await webhooks?.close();
        const httpClosed = new Promise<void>((r) => http.close(() => r()));
        pending.close();
        await httpClosed;
        await closeOwnStore();
        log.info('hercules server closed');
      })();
      return closed;
    },
  };
}
