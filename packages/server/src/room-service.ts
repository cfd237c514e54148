/**
 * The room service: Hercules rooms for any HTTP server. It admits connections (admission.ts),
 * schedules their input fairly, hands their frames to the rooms (RoomRegistry, RoomHost) and
 * their rooms' messages back, with the limits of docs/security.md. `createServer` is this plus
 * an HTTP server with /healthz and /metrics; an existing `node:http`, Express or Fastify server
 * mounts it with `handleUpgrade` on its 'upgrade' event (or, with its own WebSocket layer,
 * `handleConnection` with a `Connection`).
 *
 * Input is handled in turns, round robin over rooms and then over each room's connections
 * (input-scheduler.ts): a room flooded with ops delays another room by at most about one round.
 * A connection whose waiting input nears maxQueuedBytes is not read from (its transport pushes
 * back on the client), so what the server holds per connection stays bounded whatever the
 * client sends.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import pino, { type Logger } from 'pino';
import { HerculesError, ServerCodec, machineAt, type AuthorizeOp, type LogEntry, type Machine } from '@hercules/core';
import { createMetrics, type Metrics } from './metrics.ts';
import { ServiceMetrics } from './service-metrics.ts';
import { BackendApi, type RoomFile, type RoomsPage, type RoomsQuery, type ServerRoom } from './backend-api.ts';
import { InputScheduler, type SchedulerHooks } from './input-scheduler.ts';
import { jwtAuthenticator, type AccessHook, type Authenticate, type Identity, type JwtOptions } from './auth.ts';
import { acceptClock, Admission, checkHello, isRefusal, roomFull, roomOf, type Admitted, type ConnectionRequest, type Refusal } from './admission.ts';
import { systemClock, type Clock } from './clock.ts';
import { delayedConnection, type Connection } from './connection.ts';
import { wsConnection } from './ws-connection.ts';
import { Session, UserBuckets, errText, type SessionContext } from './session.ts';
import { RoomRegistry, type RoomRegistryEvents, type RoomRegistryOptions } from './room-registry.ts';
import type { RoomStore } from './store/room-store.ts';

export { ROOMS_PAGE_DEFAULT, ROOMS_PAGE_MAX } from './backend-api.ts';
export type { RoomFile, RoomsPage, RoomsQuery, RoomSummary, ServerRoom } from './backend-api.ts';

/**
 * What one client, one room and the whole server may cost. A demanding client gets slowed down,
 * not served first; docs/security.md gives the memory bound these imply.
 */
export interface Limits {
  /** Largest frame accepted, bytes; bigger ones close the connection (1009). Default 1 MiB. */
  maxFrameBytes: number;
  /** Sustained ops per second per connection (token bucket). Default 1000. */
  opsPerSecond: number;
  /** Bucket size: ops a connection may send in a burst. Default 5000. */
  opsBurst: number;
  /**
   * Sustained ops per second per authenticated user, across all of the user's connections (a
   * token bucket shared by them, beside each connection's own). Default 2000. Anonymous
   * connections have only the per-connection limits.
   */
  userOpsPerSecond: number;
  /** Bucket size of the per-user limit. Default 10,000. */
  userOpsBurst: number;
  /**
   * Sustained bytes per second of frames per connection (token bucket), a frame counting its
   * bytes or the heap it decodes to, whichever is more. Default 1 MiB.
   */
  bytesPerSecond: number;
  /** Bucket size: bytes a connection may send in a burst. Default 8 MiB. */
  bytesBurst: number;
  /**
   * Bytes of frames received but not handled yet, per connection. The server stops reading a
   * connection (TCP pushes back on the client) as soon as anything of it waits, so an honest
   * peer stays far below this; past it the connection is closed (`rate-limited`). Default
   * 2 x maxFrameBytes + 64 KiB; at least maxFrameBytes + 64 KiB.
   */
  maxQueuedBytes: number;
  /**
   * Heap of the large frames decoded and being handled, over the whole server, as measureFrame
   * estimates it from their bytes before decoding (a frame can decode to 64 times its size): this
   * bounds that memory for all connections together; a frame whose estimate is over 256 KiB
   * waits, undecoded, for its turn past it. Default 32 MiB.
   */
  maxDecodingBytes: number;
  /** Connections per room. Default 256. */
  maxClientsPerRoom: number;
  /** Connections per server; more are refused with `server-full` (retried with backoff). Default 10,000. */
  maxConnections: number;
  /**
   * A connection whose unsent output passes this many bytes is a slow consumer: it is
   * disconnected and catches up from the log when it reconnects. Default 16 MiB.
   */
  maxSendBufferBytes: number;
  /** A connection that has not sent a complete first frame (hello) by then is closed, ms. Default 10,000. */
  helloTimeoutMs: number;
  /**
   * A connection whose first request (a WebSocket upgrade) is not in by then is closed
   * (`upgrade-timeout`), ms: whether it sent nothing or part of its headers. Default 10,000, as
   * the hello timeout: the next step of the same handshake. Applied by the HTTP server of
   * createServer and of a cluster node (upgrade-bound.ts); `handleUpgrade` on your own server
   * sees a connection only after this.
   */
  upgradeTimeoutMs: number;
  /**
   * Connections whose first request is not in yet, at most; past this the oldest of them is
   * closed (`server-full`). Default 1,000.
   */
  maxPendingConnections: number;
}

const DEFAULT_LIMITS: Omit<Limits, 'maxQueuedBytes'> = {
  maxFrameBytes: 1 << 20,
  opsPerSecond: 1000,
  opsBurst: 5000,
  userOpsPerSecond: 2000,
  userOpsBurst: 10_000,
  bytesPerSecond: 1 << 20,
  bytesBurst: 8 << 20,
  maxDecodingBytes: 32 << 20,
  maxClientsPerRoom: 256,
  maxConnections: 10_000,
  maxSendBufferBytes: 16 << 20,
  helloTimeoutMs: 10_000,
  upgradeTimeoutMs: 10_000,
  // An honest connection is pending for about a round trip (milliseconds behind a proxy): 1,000
  // at once is 100 new connections a second each holding the whole 10 s, and caps the file
  // descriptors that connections without a request hold beside maxConnections.
  maxPendingConnections: 1000,
};

/** What one socket read can still deliver after the server pauses a connection. */
const READ_CHUNK_BYTES = 64 << 10;
/**
 * Presence costs a connection (and its user) as much of the op budget as an op: its work on the
 * server (decode, the domain scan, the schema, one fan-out to each member, coalesced past
 * presenceEveryMs) is at most an op's, which is also ordered and stored. An honest client sends
 * at most 62 a second (16 ms pacing), 6% of the default op rate.
 */
const PRESENCE_OP_COST = 1;
/**
 * The options of a room service that `createServer` passes through as they are (its own add the
 * HTTP server and the store). Named apart from core's `RoomOptions` (a room engine's options),
 * which it was once called too.
 */
export interface ServiceOptions {
  /** The state machines rooms may run, by name. */
  machines: Record<string, Machine<any, any>> | Machine<any, any>[];
  /** Remove a visibility-set member whose ack is outstanding this long. Default 2000 ms. */
  ackTimeoutMs?: number;
  /** Heartbeat interval; a connection silent for two intervals is dropped. Default 5000 ms. */
  heartbeatMs?: number;
  /** Unload a room this long after its last connection closes. Default 30000 ms. */
  idleUnloadMs?: number;
  /** Write a room's checkpoint at most every this many ops (apart from its commits). Default 1000. */
  checkpointEvery?: number;
  /**
   * Group-commit window per room: wait this long after the first pending write to gather more
   * into one append. 0 (default) appends once per event-loop turn: lowest latency, and ops that
   * arrive together still share a commit.
   */
  commitWindowMs?: number;
  /** Delay every frame in each direction by half this (emulates a wide-area round trip). */
  simulateRttMs?: number;
  /** Largest frame accepted, bytes. Default 1 MiB. (Same as `limits.maxFrameBytes`.) */
  maxFrameBytes?: number;
  /**
   * Who is connecting: return an identity or throw `AuthError` to refuse. Default: everyone is
   * anonymous (ops are authored by their client id). See also `jwt`.
   */
  authenticate?: Authenticate;
  /** Built-in JWT authentication (jose): a shared secret, a public key, or a JWKS file/URL. */
  jwt?: JwtOptions;
  /** Per-room access: 'none' refuses, 'read' may only read, 'write' may submit. Default: 'write'. */
  access?: AccessHook;
  /** Op-level authorization, called before each op is ordered (see RoomEngine). */
  authorize?: AuthorizeOp<any>;
  /**
   * Whether read-only connections may set presence (room.presence): true, false (the default:
   * they only see it), or a hook deciding per connection as it joins (`(identity, room) => boolean`).
   */
  readersPresence?: boolean | ((identity: Identity | undefined, room: string) => boolean);
  /**
   * Each connection's presence reaches the others at most once per this many ms on average,
   * after a burst of 5; faster updates are coalesced, the latest winning (default 10; 0: off).
   */
  presenceEveryMs?: number;
  /**
   * Called with each commit's log entries once the store confirmed them, for every room (the
   * in-process change hook). Runs on the server's thread: keep it quick, hand slow work off.
   * A hook that throws is logged; the room goes on.
   */
  onCommit?: (room: string, entries: readonly LogEntry[]) => void;
  /** Resource limits per connection and room; see `Limits` for defaults. */
  limits?: Partial<Limits>;
  /** pino log level, or a pino logger. Default 'info'. */
  log?: string | Logger;
}

export interface RoomServiceOptions extends ServiceOptions {
  /** Where rooms are stored. The service does not close it (its owner does, after `close`). */
  store: RoomStore;
  /** Metrics to count into (default: a registry of its own). */
  metrics?: Metrics;
  /** Time and timers. Default: the system clock. */
  clock?: Clock;
  /**
   * Wall-clock time, ms since the epoch, against which credentials expire (Identity.expiresAt).
   * Default `Date.now`; the simulator gives its simulated clock.
   */
  wallClock?: () => number;
  /**
   * Make the room registry from the options the service built (default: `new RoomRegistry(opts)`).
   * A seam for the simulator, which adds its own hooks and keeps hold of the registry.
   */
  createRegistry?: (opts: RoomRegistryOptions) => RoomRegistry;
  /**
   * The id of a new connection's session, its member id in its room (default k1, k2, ...; unique
   * per service). A seam for the simulator, whose checkers know connections by its own ids.
   */
  sessionId?: (conn: Connection) => string;
  /** What a failure message calls the service in errors about options (default 'createRoomService'). */
  caller?: string;
}

export interface RoomService {
  /** Handle an HTTP upgrade to a Hercules WebSocket (call it from the HTTP server's 'upgrade' event). */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Admit and serve a connection accepted by another transport; `request` names the room (`?room=`) and carries credentials. */
  handleConnection(conn: Connection, request: ConnectionRequest): Promise<void>;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly limits: Readonly<Limits>;
  /** Rooms currently in memory. */
  loadedRooms(): string[];
  /** Open connections. */
  connectionCount(): number;
  /**
   * Stop serving the loaded rooms that `match`: their members are told `why` (not fatal: they
   * reconnect) and closed, and each room is handed back to the store. For a room that moved to
   * another server (cluster mode: its shard's lease was lost). Returns how many.
   */
  failRooms(match: (room: string) => boolean, why: string): number;
  /**
   * Close every connection of `user` (in `room` only, if given) with `revoked`, which is fatal:
   * the client stops and its app decides (sign in again, reload). Its durable ops stay in its
   * store and go out when it connects again with access. Returns how many connections closed.
   * Stop issuing the user tokens (or refuse them in `access`) so it cannot simply come back.
   */
  revoke(target: { user: string; room?: string; reason?: string }): number;
  /**
   * The server's own access to room `name` (a backend's, in process): submit ops, read its
   * state, follow its commits. `machine` (a name) is needed only to create a room that does not
   * exist yet; an existing room runs the machine it was created with.
   */
  room(name: string, machine?: string): ServerRoom;
  /**
   * A page of the stored rooms, by name (`compareRoomNames`: code point order): what the store
   * knows of each without loading it (`RoomStore.listRooms`), with the live figures of the rooms
   * loaded. `after`: the `next` of the previous page (absent: from the first room); `limit`:
   * default ROOMS_PAGE_DEFAULT (100), at most ROOMS_PAGE_MAX (1000; more is taken as that). No
   * `next` in the answer: that was the last page.
   */
  rooms(query?: RoomsQuery): Promise<RoomsPage>;
  /**
   * Create room `name` from an export (RoomFile), of a machine this server serves. Rejects with
   * `bad-argument` if the room exists or the file is not a consistent export.
   */
  importRoom(name: string, file: RoomFile): Promise<void>;
  /**
   * Up to `max` entries of `room`'s log after position `after`, as stored (RoomStore.peek; the
   * room is not loaded for it). `from` > after + 1: the ones before were compacted.
   */
  readLog(room: string, after: number, max: number): Promise<{ from: number; entries: readonly LogEntry[] }>;
  /** Stop accepting, close connections, hand every room back to the store (it stays open). */
  close(): Promise<void>;
}

/** Validate the limits: defaults filled in, unknown or non-positive ones refused. */
export function resolveLimits(caller: string, opts: { limits?: Partial<Limits>; maxFrameBytes?: number }): Limits {
  const given = { ...DEFAULT_LIMITS, ...(opts.maxFrameBytes !== undefined ? { maxFrameBytes: opts.maxFrameBytes } : {}), ...(opts.limits ?? {}) };
  const limits: Limits = { ...given, maxQueuedBytes: given.maxQueuedBytes ?? 2 * given.maxFrameBytes + READ_CHUNK_BYTES };
  for (const [k, v] of Object.entries(limits)) {
    if (!(k in DEFAULT_LIMITS) && k !== 'maxQueuedBytes')
      throw new HerculesError('bad-argument', `${caller}: unknown limit limits.${k}; known: ${[...Object.keys(DEFAULT_LIMITS), 'maxQueuedBytes'].join(', ')}`);
    if (typeof v !== 'number' || !(v > 0)) throw new HerculesError('bad-argument', `${caller}: limits.${k} must be a positive number, got ${String(v)}`);
  }
  if (limits.maxQueuedBytes < limits.maxFrameBytes + READ_CHUNK_BYTES) {
    throw new HerculesError(
      'bad-argument',
      `${caller}: limits.maxQueuedBytes (${limits.maxQueuedBytes}) must be at least maxFrameBytes + 64 KiB (${limits.maxFrameBytes + READ_CHUNK_BYTES}), or a frame could never be queued`,
    );
  }
  return limits;
}

/**
 * The machines option as a map by name to the newest version given, checked: several versions of
 * one name must form one migrateFrom chain (docs/migrations.md).
 */
export function machineMap(caller: string, machines: RoomServiceOptions['machines'] | undefined): Map<string, Machine<any, any>> {
  const map = new Map<string, Machine<any, any>>();
  const all = Array.isArray(machines) ? machines : Object.values(machines ?? {});
  for (const m of all) {
    if (!m || typeof m.name !== 'string' || !(m.opNames instanceof Set))
      throw new HerculesError('bad-argument', `${caller}: \`machines\` must hold machines made with defineMachine`);
    const had = map.get(m.name);
    if (!had || m.version > had.version) map.set(m.name, m);
  }
  for (const m of all) {
    const newest = map.get(m.name)!;
    if (machineAt(newest, m.version) !== m)
      throw new HerculesError(
        'bad-argument',
        `${caller}: ${m.name}@${m.version} is not in the migrateFrom chain of ${newest.name}@${newest.version}; give each version a migrateFrom pointing at the one before (docs/migrations.md)`,
      );
  }
  if (map.size === 0) throw new HerculesError('bad-argument', `${caller}: no machines given; pass the machines your apps use`);
  return map;
}

export function createRoomService(opts: RoomServiceOptions): RoomService {
  const caller = opts.caller ?? 'createRoomService';
  if (!opts || typeof opts.store !== 'object' || opts.store === null) throw new HerculesError('bad-argument', `${caller}: \`store\` (a RoomStore) is required`);
  const machines = machineMap(caller, opts.machines);
  const ackTimeoutMs = opts.ackTimeoutMs ?? 2000;
  const heartbeatMs = opts.heartbeatMs ?? 5000;
  const halfRtt = Math.max(0, (opts.simulateRttMs ?? 0) / 2);
  const limits = resolveLimits(caller, opts);
  /** A connection is paused once this much of its input waits (see Session.flow). */
  const pauseAtBytes = limits.maxQueuedBytes - limits.maxFrameBytes - READ_CHUNK_BYTES;
  const authenticate = checkHooks(caller, opts);
  const log: Logger = typeof opts.log === 'object' ? opts.log : pino({ level: opts.log ?? 'info', base: { svc: 'hercules' } });
  const metrics = opts.metrics ?? createMetrics();
  const clock = opts.clock ?? systemClock;
  const sessions = new Map<string, Session>();
  const stats = new ServiceMetrics(metrics, clock, (conn) => sessions.get(conn)?.clientId);
  let closing = false;

  // ------------------------------------------------------------ containment
  // Nothing that goes wrong for one connection or one room may reach another, or the process:
  // every timer, transport callback and deferred callback below runs its work through `guard`,
  // and per-room and per-connection work is wrapped closer still, so a failure is charged to
  // the room or connection it belongs to.

  /** Run `fn`; an exception is logged and counted, never thrown into a timer or an event emitter. */
  function guard(stage: string, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      metrics.outputFailures.inc({ stage });
      log.error({ stage, err: e instanceof Error ? e.stack : String(e) }, `unexpected error in ${stage}; the server goes on`);
    }
  }

  // ------------------------------------------------------------ rooms

  const registry: RoomRegistry = (opts.createRegistry ?? ((o: RoomRegistryOptions) => new RoomRegistry(o)))({
    store: opts.store,
    clock,
    ackTimeoutMs,
    authorize: opts.authorize,
    readersPresence: opts.readersPresence === true,
    presenceEveryMs: opts.presenceEveryMs,
    checkpointEvery: opts.checkpointEvery,
    commitWindowMs: opts.commitWindowMs,
    idleUnloadMs: opts.idleUnloadMs,
    events: roomEvents({ stats, metrics, log, size: (): number => registry.size, onCommit: opts.onCommit, listeners: (room) => backend.commitListeners(room) }),
  });

  const backend = new BackendApi({
    store: opts.store,
    registry,
    machines,
    closing: () => closing,
    revokeSessions: (user, room, message) => revokeSessions(sessions.values(), user, room, message),
  });

  // ------------------------------------------------------------ frames

  const frames: FrameDeps = {
    metrics,
    log,
    clock,
    limits,
    machines,
    registry,
    readersPresence: opts.readersPresence,
    scheduler: () => scheduler,
    guard,
    closing: () => closing,
  };
  const onFrame = (c: Session, data: Uint8Array, isBinary: boolean, held: number, queuedMs: number) => handleFrame(frames, c, data, isBinary, held, queuedMs);

  // ------------------------------------------------------------ input scheduling

  const scheduler: InputScheduler<Session> = new InputScheduler<Session>(
    clock,
    limits,
    schedulerHooks({ stats, metrics, log, pauseAtBytes, guard, closing: () => closing, frame: onFrame }),
  );

  const refuse = (conn: Connection, r: Refusal) => refuseConnection({ metrics, log, clock, halfRtt, guard }, conn, r);

  const start = sessionStarter({ clock, limits, metrics, log, scheduler, guard, halfRtt, sessions, closing: () => closing, seams: opts });

  const admission = new Admission({ authenticate, access: opts.access, maxConnections: limits.maxConnections, openConnections: () => sessions.size, log });

  const wss = new WebSocketServer({ noServer: true, maxPayload: limits.maxFrameBytes, perMessageDeflate: false });

  const handleUpgrade = upgradeHandler({ guard, wss, closing: () => closing, admission, refuse, start, log });

  async function handleConnection(conn: Connection, request: ConnectionRequest): Promise<void> {
    if (closing) {
      conn.close(1001, 'server shutting down');
      return;
    }
    const acceptedAt = request.acceptedAt ?? acceptClock();
    const r = await admission.admit(request);
    if (isRefusal(r)) refuse(conn, r);
    else start(conn, r, acceptedAt);
  }

  // ------------------------------------------------------------ timers

  const stopTicks = every(
    clock,
    tickEveryMs(ackTimeoutMs),
    () => closing,
    () =>
      guard('tick', () => {
        registry.tick();
        sample({ registry, sessions: sessions.values(), scheduler, stats, metrics, now: clock.now() });
      }),
  );
  const stopBeats = every(
    clock,
    heartbeatMs,
    () => closing,
    () => guard('heartbeat', () => heartbeatAll(sessions.values(), heartbeatMs, log)),
  );

  return {
    handleUpgrade,
    handleConnection,
    metrics,
    log,
    limits,
    loadedRooms: () => registry.names(),
    connectionCount: () => sessions.size,
    failRooms: (match, why) => registry.failRooms(match, why),
    room: (name, machineName) => backend.room(name, machineName),
    rooms: (query) => backend.rooms(query),
    importRoom: (name, file) => backend.importRoom(name, file),
    readLog: (name, after, max) => backend.readLog(name, after, max),
    revoke: (target) => backend.revoke(target),
    async close() {
      if (closing) return;
      closing = true;
      stopTicks();
      stopBeats();
      for (const c of sessions.values()) c.conn.close(1001, 'server shutting down');
      await new Promise<void>((r) => wss.close(() => r()));
      await registry.close();
    },
  };
}

/** The hooks among the options, checked; the authenticator they give (`jwt` or `authenticate`). */
function checkHooks(caller: string, opts: ServiceOptions): Authenticate | undefined {
  if (opts.authenticate && opts.jwt) throw new HerculesError('bad-argument', `${caller}: give \`authenticate\` or \`jwt\`, not both`);
  const authenticate: Authenticate | undefined = opts.jwt ? jwtAuthenticator(opts.jwt) : opts.authenticate;
  if (authenticate !== undefined && typeof authenticate !== 'function')
    throw new HerculesError('bad-argument', `${caller}: \`authenticate\` must be a function (request) => identity`);
  if (opts.access !== undefined && typeof opts.access !== 'function')
    throw new HerculesError('bad-argument', `${caller}: \`access\` must be a function (identity, room) => access`);
  if (opts.authorize !== undefined && typeof opts.authorize !== 'function')
    throw new HerculesError('bad-argument', `${caller}: \`authorize\` must be a function (op, ctx, state) => verdict`);
  if (opts.readersPresence !== undefined && typeof opts.readersPresence !== 'boolean' && typeof opts.readersPresence !== 'function')
    throw new HerculesError('bad-argument', `${caller}: \`readersPresence\` must be true, false or a function (identity, room) => boolean`);
  const pe = opts.presenceEveryMs;
  if (pe !== undefined && !(typeof pe === 'number' && pe >= 0 && Number.isFinite(pe)))
    throw new HerculesError('bad-argument', `${caller}: \`presenceEveryMs\` must be a non-negative number of milliseconds, got ${String(pe)}`);
  return authenticate;
}

/** How the service hears of its rooms: counted in the metrics, logged, and commits handed to the hooks. */
function roomEvents(d: {
  stats: ServiceMetrics;
  metrics: Metrics;
  log: Logger;
  size: () => number;
  onCommit: ServiceOptions['onCommit'];
  listeners: (room: string) => Iterable<(entries: readonly LogEntry[]) => void>;
}): RoomRegistryEvents {
  return {
    loaded(host, loaded) {
      d.stats.roomLoaded(host.name);
      d.metrics.rooms.set(d.size());
      const e = host.engine;
      d.log.info({ room: host.name, machine: host.machine.name, head: e.head(), stable: e.stableFrontier() }, loaded.fresh ? 'room created' : 'room loaded');
    },
    unloaded(name) {
      d.stats.roomGone(name);
      d.metrics.rooms.set(d.size());
      d.log.debug({ room: name }, 'room unloaded (idle)');
    },
    failed(host, stage, e, why) {
      d.stats.roomGone(host.name);
      d.metrics.rooms.set(d.size());
      if (stage === 'evicted') {
        d.log.info({ room: host.name, why }, `room ${host.name} stopped: ${why}`);
        return;
      }
      d.stats.roomFailed(stage, e);
      d.log.error(
        { room: host.name, stage, err: e instanceof Error ? e.stack : String(e), why },
        `room ${host.name} failed in ${stage}; dropping it from memory so it reloads from its store (other rooms are not affected)`,
      );
    },
    warning(host, m) {
      d.log.warn({ room: host.name }, m);
    },
    delivered: (host, out, at, now, path) => d.stats.delivered(host.name, out, at, now, path),
    committedEntries(host, entries) {
      // A hook that throws is logged; the room and the other hooks go on.
      const call = (fn: () => void) => {
        try {
          fn();
        } catch (e) {
          d.log.warn({ room: host.name, err: errText(e) }, 'an onCommit hook threw; the room goes on');
        }
      };
      if (d.onCommit) call(() => d.onCommit!(host.name, entries));
      for (const fn of d.listeners(host.name)) call(() => fn(entries));
    },
    releaseFailed(name, e) {
      d.log.warn({ room: name, err: errText(e) }, 'handing a room back to its store failed (checkpoint on unload); the log is intact');
    },
  };
}

/** A tick's gauges: rooms, members, what waits for input and output; held presence goes out to readers that caught up. */
function sample(d: {
  registry: RoomRegistry;
  sessions: Iterable<Session>;
  scheduler: InputScheduler<Session>;
  stats: ServiceMetrics;
  metrics: Metrics;
  now: number;
}): void {
  let members = 0,
    unstable = 0,
    buffered = 0,
    waiting = 0;
  for (const host of d.registry.hostsInMemory()) {
    members += host.engine.members().length;
    unstable += host.engine.suffixLength();
    waiting += host.waiting;
  }
  let queued = 0;
  for (const c of d.sessions) {
    c.releaseHeldPresence();
    buffered += c.conn.bufferedAmount;
    queued += c.queuedBytes;
  }
  d.metrics.inputQueued.set(queued);
  d.metrics.inputDecoding.set(d.scheduler.decoding);
  d.metrics.inputWaiting.set(d.scheduler.waiting);
  d.metrics.pendingOutputs.set(waiting);
  d.stats.dropStale(d.now);
  d.metrics.rooms.set(d.registry.size);
  d.metrics.members.set(members);
  d.metrics.unstable.set(unstable);
  d.metrics.sendBuffer.set(buffered);
}

/** What the service's frame handling needs of it. */
interface FrameDeps {
  metrics: Metrics;
  log: Logger;
  clock: Clock;
  limits: Limits;
  machines: Map<string, Machine<any, any>>;
  registry: RoomRegistry;
  readersPresence: ServiceOptions['readersPresence'];
  scheduler: () => InputScheduler<Session>;
  guard: (stage: string, fn: () => void) => void;
  closing: () => boolean;
}

/**
 * `held`: the heap counted in the decoding budget while the frame's ops are handled (0: a small
 * frame); `queuedMs`: how long the frame waited for its turn since it arrived (for opPath).
 */
function handleFrame(d: FrameDeps, c: Session, data: Uint8Array, isBinary: boolean, held: number, queuedMs: number): void {
  d.metrics.framesIn.inc();
  d.metrics.bytesIn.inc(data.length);
  if (!isBinary) {
    d.metrics.malformed.inc();
    c.cut('malformed-frame', 1003, 'Hercules speaks binary frames only; use @hercules/client', true);
    return;
  }
  let frame: unknown;
  const decodeStart = d.clock.now();
  try {
    frame = c.codec.decode(data);
  } catch (e) {
    d.metrics.malformed.inc();
    c.cut('malformed-frame', 1007, errText(e), true);
    return;
  }
  if (!c.host) return join(d, c, frame);
  if (isOpsFrame(frame)) {
    d.metrics.opPath.observe({ stage: 'queued' }, queuedMs / 1000);
    d.metrics.opPath.observe({ stage: 'decode' }, (d.clock.now() - decodeStart) / 1000);
    // Charged in full now; handled in runs over the next turns (see turn()).
    c.chargeOps(frame.ops.length);
    // An ack the frame carries (VIS-ACK-WITH-OPS) goes to the room with its first run of ops.
    d.scheduler().pushOps(c, frame.ops, held, (frame as { ack?: unknown }).ack);
  } else {
    if ((frame as { t?: unknown } | null)?.t === 'presence') c.chargeOps(PRESENCE_OP_COST);
    c.host.receive(c.id, frame);
  }
}

/** The first frame must be hello: it names the machine, which picks (or creates) the room. Its input waits meanwhile. */
function join(d: FrameDeps, c: Session, frame: unknown): void {
  const checked = checkHello(frame, d.machines);
  if (isRefusal(checked)) {
    if (checked.closeCode === 1008) d.metrics.malformed.inc();
    c.cut(checked.code, checked.closeCode, checked.message, checked.fatal);
    return;
  }
  c.joining = true;
  d.registry.acquire(c.roomName, checked.machine, { join: true }).then(
    (host) =>
      d.guard('join', () => {
        c.joining = false;
        if (c.closed || d.closing()) return;
        if (typeof host === 'string') return c.cut('machine-mismatch', 4002, host, true);
        const full = roomFull(c.roomName, host.memberCount, d.limits.maxClientsPerRoom);
        if (full) return c.cut(full.code, full.closeCode, full.message, full.fatal);
        c.host = host;
        c.clientId = checked.hello.client;
        c.member = c.asMember();
        host.join(c.member, { ...(c.identity ? { user: c.identity.user } : {}), access: c.access, ...readerPresence(c, d.readersPresence, d.log) });
        // Which of two connections of this client id is newer is the server's to say: a client
        // whose clock went back an hour was refused `replaced` until its dead connection went.
        host.receive(c.id, { ...checked.hello, at: c.acceptedAt });
        d.scheduler().ready(c);
      }),
    (e) =>
      d.guard('join', () => {
        c.joining = false;
        if (c.closed || d.closing()) return;
        // The room runs a version this server cannot run (docs/migrations.md): retrying cannot help.
        if (e instanceof HerculesError && (e.code === 'server-too-old' || e.code === 'machine-mismatch')) return c.cut(e.code, 4002, e.message, true);
        d.metrics.storageErrors.inc();
        d.log.error({ room: c.roomName, err: errText(e) }, 'cannot load room');
        // Not fatal: a store that is down or slow (a full disk, a replicated log electing a
        // leader, a shard changing owner) comes back; the client retries with backoff.
        c.cut('storage-failed', 1011, `the server cannot load room ${c.roomName} now: ${errText(e)}; retrying`, false);
      }),
  );
}

/**
 * The tick's interval: a dead member is dropped at most one tick after its ack timeout; at
 * ackTimeout/4 (500 ms for the default 2 s) Fig. 15 measured Visible stalls 280 ms past ack
 * timeout + RTT. A tick walks the loaded rooms' members only, so 10 per second costs little.
 */
function tickEveryMs(ackTimeoutMs: number): number {
  return Math.min(100, Math.max(25, Math.floor(ackTimeoutMs / 20)));
}

/** A heartbeat for every session; one that throws is dropped, the others go on. */
function heartbeatAll(sessions: Iterable<Session>, heartbeatMs: number, log: Logger): void {
  for (const c of sessions) {
    try {
      c.heartbeat(heartbeatMs);
    } catch (e) {
      log.warn({ conn: c.id, err: errText(e) }, 'heartbeat failed for a connection; dropping it');
      c.terminate();
    }
  }
}

/** Cut every session of `user` (in `room` only, if given) with `revoked`; how many. */
function revokeSessions(sessions: Iterable<Session>, user: string, room: string | undefined, message: string): number {
  let n = 0;
  for (const c of [...sessions]) {
    if (c.closed || c.identity?.user !== user || (room !== undefined && c.roomName !== room)) continue;
    c.cut('revoked', 4403, message, true);
    n++;
  }
  return n;
}

/** Serve an admitted connection: a Session, in `sessions` until it closes. */
function sessionStarter(d: {
  clock: Clock;
  /** The simulator's: sessions named by their connections, credentials expiring by its clock. */
  seams: Pick<RoomServiceOptions, 'wallClock' | 'sessionId'>;
  limits: Limits;
  metrics: Metrics;
  log: Logger;
  scheduler: InputScheduler<Session>;
  guard: (stage: string, fn: () => void) => void;
  halfRtt: number;
  sessions: Map<string, Session>;
  closing: () => boolean;
}): (raw: Connection, admitted: Admitted, acceptedAt: number) => void {
  const { clock, limits, metrics, log, sessions } = d;
  let nextConn = 0;
  const ctx: SessionContext = {
    clock,
    wallClock: d.seams.wallClock ?? Date.now,
    limits,
    metrics,
    log,
    userBuckets: new UserBuckets(clock, limits.userOpsBurst),
    input: d.scheduler,
    guard: d.guard,
    closing: d.closing,
    closed(c) {
      sessions.delete(c.id);
      metrics.connections.set(sessions.size);
    },
  };
  return (raw, admitted, acceptedAt) => {
    if (d.closing()) {
      raw.close(1001, 'server shutting down');
      return;
    }
    const conn = d.halfRtt > 0 ? delayedConnection(raw, d.halfRtt, clock) : raw;
    const c = new Session(ctx, d.seams.sessionId ? d.seams.sessionId(raw) : `k${++nextConn}`, conn, admitted, acceptedAt);
    sessions.set(c.id, c);
    metrics.connections.set(sessions.size);
    log.debug({ conn: c.id, room: c.roomName, remote: c.remote, user: admitted.identity?.user, access: c.access }, 'connection open');
    c.open();
  };
}

/** Run `fn` every `ms` until stopped (the stop function returned) or the service is closing. */
function every(clock: Clock, ms: number, closing: () => boolean, fn: () => void): () => void {
  let handle: (() => void) | undefined;
  const run = () => {
    fn();
    if (!closing()) handle = clock.after(ms, run);
  };
  handle = clock.after(ms, run);
  return () => {
    if (handle) handle();
  };
}

/** Refuse a connection that was accepted only so the client can read why (browsers see no HTTP status). */
function refuseConnection(
  d: { metrics: Metrics; log: Logger; clock: Clock; halfRtt: number; guard: (stage: string, fn: () => void) => void },
  conn: Connection,
  r: Refusal,
): void {
  d.metrics.refusedConnections.inc({ reason: r.code });
  d.log.info({ remote: conn.remote, reason: r.code }, `connection refused: ${r.message}`);
  const c = d.halfRtt > 0 ? delayedConnection(conn, d.halfRtt, d.clock) : conn;
  c.listen({ message() {}, close() {} });
  d.guard('refuse', () => {
    c.send(new ServerCodec().encode({ t: 'error', code: r.code, message: r.message, fatal: r.fatal }));
    c.close(r.closeCode, r.message);
  });
}

/** The scheduler's hooks in the service: ops to the room, the room's cost per op from ServiceMetrics, failures cut the connection. */
function schedulerHooks(d: {
  stats: ServiceMetrics;
  metrics: Metrics;
  log: Logger;
  pauseAtBytes: number;
  guard: (stage: string, fn: () => void) => void;
  closing: () => boolean;
  frame: SchedulerHooks<Session>['frame'];
}): SchedulerHooks<Session> {
  return {
    frame: d.frame,
    ops(c, ops, ack) {
      c.host!.receive(c.id, ack === undefined ? { t: 'ops', ops } : { t: 'ops', ops, ack }); // ops frames are queued only after hello
    },
    costPerOp: (c) => d.stats.room(c.roomName)?.costPerOp,
    measured(c, n, ms) {
      const room = d.stats.room(c.roomName);
      if (room) room.costPerOp = Math.max(1e-4, 0.7 * room.costPerOp + (0.3 * ms) / n);
    },
    failed(c, e) {
      d.metrics.outputFailures.inc({ stage: 'frame' });
      d.log.error({ conn: c.id, room: c.roomName, err: e instanceof Error ? e.stack : String(e) }, 'error handling frame');
      c.cut('internal', 1011, `the server failed on this frame: ${errText(e)}`, true);
    },
    flow: (c) => c.flow(d.pauseAtBytes),
    rateLimited: () => d.metrics.rateLimited.inc(),
    guard: d.guard,
    closing: d.closing,
  };
}

/** The service's 'upgrade' handler: a WebSocket connection admitted (or refused with why) before it is served. */
function upgradeHandler(d: {
  guard: (stage: string, fn: () => void) => void;
  wss: WebSocketServer;
  closing: () => boolean;
  admission: Admission;
  refuse: (conn: Connection, r: Refusal) => void;
  start: (conn: Connection, admitted: Admitted, acceptedAt: number) => void;
  log: Logger;
}): (req: IncomingMessage, socket: Duplex, head: Buffer) => void {
  return (req, socket, head) => {
    d.guard('upgrade', () => {
      socket.on('error', () => {}); // a peer that vanishes mid-handshake is not our error
      const accept = (fn: (ws: WebSocket) => void) =>
        d.guard('upgrade', () => {
          if (socket.destroyed) return;
          d.wss.handleUpgrade(req, socket, head, (ws) => d.guard('upgrade', () => fn(ws)));
        });
      const remote = req.socket.remoteAddress ?? '?';
      const acceptedAt = acceptClock();
      if (d.closing()) return accept((ws) => ws.close(1001, 'server shutting down'));
      // Refusals that need no hook are answered at once; admission repeats the cheap checks.
      const room = roomOf(req);
      if (typeof room !== 'string') return accept((ws) => d.refuse(wsConnection(ws, remote, req.socket), room));
      d.admission.admit(req).then(
        (r) =>
          accept((ws) => (isRefusal(r) ? d.refuse(wsConnection(ws, remote, req.socket), r) : d.start(wsConnection(ws, remote, req.socket), r, acceptedAt))),
        (e) => d.log.error({ err: (e as Error).stack }, 'admitting a connection failed'),
      );
    });
  };
}

/** A read-only connection's say on presence, when `readersPresence` is a hook (a hook that throws says no). */
function readerPresence(c: Session, hook: ServiceOptions['readersPresence'], log: Logger): { presence?: boolean } {
  if (c.access !== 'read' || typeof hook !== 'function') return {};
  try {
    return { presence: hook(c.identity, c.roomName) === true };
  } catch (e) {
    log.warn({ room: c.roomName, user: c.identity?.user, err: errText(e) }, 'the readersPresence hook threw; this reader may not set presence');
    return { presence: false };
  }
}

function isOpsFrame(f: unknown): f is { t: 'ops'; ops: unknown[] } {
  return typeof f === 'object' && f !== null && (f as { t?: unknown }).t === 'ops' && Array.isArray((f as { ops?: unknown }).ops);
}
