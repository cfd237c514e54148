/**
 * The room service: Hercules rooms for any HTTP server. It admits connections (admission.ts),
 * schedules their input fairly, hands their frames to the rooms (RoomRegistry, RoomHost) and
 * their rooms' messages back, with the limits of docs/security.md. `createServer` is this plus
 * an HTTP server with /healthz and /metrics; an existing `node:http`, Express or Fastify server
 * mounts it with `handleUpgrade` on its 'upgrade' event (or, with its own WebSocket layer,
 * `handleConnection` with a `Connection`).
 *
 * Input is handled in turns, round robin over rooms and then over each room's connections
 * (FairQueue), a round's ROUND_MS shared among the rooms waiting: a room flooded with ops,
 * however cheap or costly its ops are, delays another room by at most about one round. A
 * connection whose waiting input nears maxQueuedBytes is not read from (its transport pushes
 * back on the client), so what the server holds per connection stays bounded whatever the
 * client sends.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import pino, { type Logger } from 'pino';
import {
  HerculesError,
  ServerCodec,
  machineAt,
  measureFrame,
  type PeerPresence,
  type AuthorizeOp,
  type ErrorCode,
  type LogEntry,
  type Machine,
  type ServerMessage,
} from '@hercules/core';
import { createMetrics, type Metrics } from './metrics.ts';
import { ServiceMetrics } from './service-metrics.ts';
import { BackendApi, type RoomFile, type RoomsPage, type RoomsQuery, type ServerRoom } from './backend-api.ts';
import { FairQueue } from './fair-queue.ts';
import { jwtAuthenticator, type AccessHook, type Authenticate, type Identity, type JwtOptions } from './auth.ts';
import { acceptClock, Admission, checkHello, isRefusal, roomFull, roomOf, type Admitted, type ConnectionRequest, type Refusal } from './admission.ts';
import { systemClock, type Clock, type TimerHandle } from './clock.ts';
import { delayedConnection, type Connection } from './connection.ts';
import { wsConnection } from './ws-connection.ts';
import { RoomRegistry } from './room-registry.ts';
import type { RoomHost, RoomMember } from './room-host.ts';
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
/** Frames whose decoded heap (measureFrame's estimate) is up to this are decoded without waiting for the server's decoding budget. */
const SMALL_FRAME_HEAP = 256 << 10;
/**
 * A frame is charged to its connection's byte bucket by its bytes on the wire or by the heap it
 * decodes to (measureFrame's estimate), whichever is more: the budget counts what decoding
 * costs. Ordinary ops decode to 1-3 times their bytes (10,000 chat ops: 0.74 MB, 2.0 MB
 * estimated; large string arguments about 1x), so the op rate binds long before this does;
 * 65 KB of empty maps (issue 40), 4.7 MB decoded, is charged 4.7 MB. Measured with a quarter of
 * the heap instead, 64 such connections kept an honest client in another room at p50 373 ms,
 * p99 1.0 s; charged in full, p50 3.8 ms, p99 845 ms (the first burst), bench/src/flood.
 */
const HEAP_PER_CHARGED_BYTE = 1;
/**
 * Presence costs a connection (and its user) as much of the op budget as an op: its work on the
 * server (decode, the domain scan, the schema, one fan-out to each member, coalesced past
 * presenceEveryMs) is at most an op's, which is also ordered and stored. An honest client sends
 * at most 62 a second (16 ms pacing), 6% of the default op rate.
 */
const PRESENCE_OP_COST = 1;
/**
 * Presence for a connection whose unsent output is over this waits in a map of the latest value
 * per peer (the latest wins: a slow reader never needs older ones), sent when its output drains.
 */
const PRESENCE_BACKLOG_BYTES = 64 << 10;
/** Bookkeeping a queued frame costs even when it is empty, counted against maxQueuedBytes. */
const FRAME_OVERHEAD_BYTES = 256;
/**
 * Scheduling: a round of turns runs for about ROUND_MS, then the event loop reads sockets and
 * commits. A turn runs one connection's ops for ROUND_MS shared among the rooms waiting (at most
 * SLICE_MS, at least MIN_SLICE_MS and one op), so under load a room waits about one round for
 * its turn however many ops other rooms queue (measured: bench/src/flood).
 */
const SLICE_MS = 2;
const MIN_SLICE_MS = 0.25;
const ROUND_MS = 8;
/** Ops given to the engine at once, at most: a run this long is cheap to order, store and send. */
const MAX_CHUNK_OPS = 1000;

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

/** Ops tokens of one authenticated user, shared by its open connections. */
interface UserBucket {
  tokens: number;
  refilledAt: number;
  connections: number;
}

/** One client connection and its input, before and after it joined a room. */
interface Session {
  id: string;
  conn: Connection;
  /** When a server accepted it (ConnectionRequest.acceptedAt): its hello's `at`, whatever the client said. */
  acceptedAt: number;
  codec: ServerCodec;
  roomName: string;
  host?: RoomHost;
  member?: RoomMember;
  /** Its room is being loaded: its input waits. */
  joining: boolean;
  alive: boolean;
  closed: boolean;
  clientId?: string;
  remote: string;
  identity?: Identity;
  access: 'read' | 'write';
  /**
   * Token buckets for ops and bytes. A decoded frame is charged in full and may take them
   * negative; the next frame waits until both are positive again, so the rates hold whatever
   * the frame size and no decoded frame is ever held while its connection waits.
   */
  tokens: number;
  byteTokens: number;
  refilledAt: number;
  /** The bucket of its user, shared with the user's other connections (Limits.userOpsPerSecond). */
  userBucket?: UserBucket;
  /**
   * Frames not handled yet, oldest first: raw frames (`heap`: measureFrame's estimate of their
   * decoded size), and at the front possibly an ops frame decoded and handled in part (`done` of
   * its ops so far; `held`, its heap, is counted in the server's decoding budget until it is done).
   */
  inbox: ({ data: Uint8Array; isBinary: boolean; at: number; heap: number } | { ops: unknown[]; done: number; held: number; ack?: unknown })[];
  /** Presence waiting for this connection's output to drain, the latest per peer (PRESENCE_BACKLOG_BYTES). */
  presenceHeld?: Map<string, PeerPresence>;
  /** Bytes of the raw frames in `inbox` (each at least FRAME_OVERHEAD_BYTES). */
  queuedBytes: number;
  /** The connection is paused because input of it waits: its silence is ours. */
  paused: boolean;
  waitTimer?: TimerHandle;
  helloTimer?: TimerHandle;
  /** Closes the connection when its credential expires (Identity.expiresAt). */
  expiryTimer?: TimerHandle;
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
  /** A connection is paused once this much of its input waits (see flow()). */
  const pauseAtBytes = limits.maxQueuedBytes - limits.maxFrameBytes - READ_CHUNK_BYTES;
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
  const log: Logger = typeof opts.log === 'object' ? opts.log : pino({ level: opts.log ?? 'info', base: { svc: 'hercules' } });
  const metrics = opts.metrics ?? createMetrics();
  const clock = opts.clock ?? systemClock;
  const sessions = new Map<string, Session>();
  const stats = new ServiceMetrics(metrics, clock, (conn) => sessions.get(conn)?.clientId);
  let nextConn = 0;
  let closing = false;

  // ------------------------------------------------------------ containment
  // Nothing that goes wrong for one connection or one room may reach another, or the process:
  // every timer, transport callback and deferred callback below runs its work through `guard`,
  // and per-room and per-connection work is wrapped closer still, so a failure is charged to
  // the room or connection it belongs to.

  function errText(e: unknown): string {
    return e instanceof Error ? e.message : String(e);
  }

  /** Run `fn`; an exception is logged and counted, never thrown into a timer or an event emitter. */
  function guard(stage: string, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      metrics.outputFailures.inc({ stage });
      log.error({ stage, err: e instanceof Error ? e.stack : String(e) }, `unexpected error in ${stage}; the server goes on`);
    }
  }

  /**
   * Close a connection for a reason: tell it why (unless it cannot be told), count it by reason
   * and log it. Every connection the service refuses or cuts goes through here or `refuse`.
   */
  function cut(c: Session, reason: ErrorCode, closeCode: number, message: string, fatal: boolean): void {
    if (c.closed) return;
    metrics.refusedConnections.inc({ reason });
    log.info({ conn: c.id, room: c.roomName, remote: c.remote, user: c.identity?.user, client: c.clientId, reason }, `connection closed: ${message}`);
    send(c, { t: 'error', code: reason, message, fatal });
    closeSession(c, closeCode, reason.replaceAll('-', ' '));
  }

  // ------------------------------------------------------------ rooms

  const registry = new RoomRegistry({
    store: opts.store,
    clock,
    ackTimeoutMs,
    authorize: opts.authorize,
    readersPresence: opts.readersPresence === true,
    presenceEveryMs: opts.presenceEveryMs,
    checkpointEvery: opts.checkpointEvery,
    commitWindowMs: opts.commitWindowMs,
    idleUnloadMs: opts.idleUnloadMs,
    events: {
      loaded(host, loaded) {
        stats.roomLoaded(host.name);
        metrics.rooms.set(registry.size);
        const e = host.engine;
        log.info({ room: host.name, machine: host.machine.name, head: e.head(), stable: e.stableFrontier() }, loaded.fresh ? 'room created' : 'room loaded');
      },
      unloaded(name) {
        stats.roomGone(name);
        metrics.rooms.set(registry.size);
        log.debug({ room: name }, 'room unloaded (idle)');
      },
      failed(host, stage, e, why) {
        stats.roomGone(host.name);
        metrics.rooms.set(registry.size);
        if (stage === 'evicted') {
          log.info({ room: host.name, why }, `room ${host.name} stopped: ${why}`);
          return;
        }
        stats.roomFailed(stage, e);
        log.error(
          { room: host.name, stage, err: e instanceof Error ? e.stack : String(e), why },
          `room ${host.name} failed in ${stage}; dropping it from memory so it reloads from its store (other rooms are not affected)`,
        );
      },
      warning(host, m) {
        log.warn({ room: host.name }, m);
      },
      delivered: (host, out, at, now, path) => stats.delivered(host.name, out, at, now, path),
      committedEntries(host, entries) {
        // A hook that throws is logged; the room and the other hooks go on.
        const call = (fn: () => void) => {
          try {
            fn();
          } catch (e) {
            log.warn({ room: host.name, err: errText(e) }, 'an onCommit hook threw; the room goes on');
          }
        };
        if (opts.onCommit) call(() => opts.onCommit!(host.name, entries));
        for (const fn of backend.commitListeners(host.name)) call(() => fn(entries));
      },
      releaseFailed(name, e) {
        log.warn({ room: name, err: errText(e) }, 'handing a room back to its store failed (checkpoint on unload); the log is intact');
      },
    },
  });

  const backend = new BackendApi({
    store: opts.store,
    registry,
    machines,
    closing: () => closing,
    revokeSessions(user, room, message) {
      let n = 0;
      for (const c of [...sessions.values()]) {
        if (c.closed || c.identity?.user !== user || (room !== undefined && c.roomName !== room)) continue;
        cut(c, 'revoked', 4403, message, true);
        n++;
      }
      return n;
    },
  });

  // ------------------------------------------------------------ sending

  function send(c: Session, msg: ServerMessage): void {
    if (c.closed) return;
    if (msg.t === 'presence' && (c.presenceHeld || c.conn.bufferedAmount > PRESENCE_BACKLOG_BYTES)) return holdPresence(c, msg.peers);
    let buf: Uint8Array;
    try {
      buf = c.codec.encode(msg);
    } catch (e) {
      // This message cannot be encoded (e.g. nesting deeper than the encoder's stack). Skipping
      // it would leave a gap in this connection's log, and the codec's intern table may now be
      // ahead of the client's: close this connection only. It resyncs from the log.
      metrics.outputFailures.inc({ stage: 'encode' });
      log.error(
        { conn: c.id, room: c.roomName, msg: msg.t, err: errText(e) },
        'cannot encode a message for this connection; closing it (the rest of the batch and the room go on)',
      );
      cut(
        c,
        'encode-failed',
        1011,
        `the server could not encode a ${msg.t} message for this connection (${errText(e).slice(0, 120)}); reconnect to resume`,
        false,
      );
      return;
    }
    const backlog = c.conn.bufferedAmount;
    // The bound is on backlog: one frame bigger than it (a large checkpoint) still goes out.
    if (backlog > 0 && backlog + buf.length > limits.maxSendBufferBytes) {
      // It cannot keep up; holding more for it would let one phone grow our memory without
      // bound. Cut it off: it reconnects and catches up from the log or a checkpoint.
      slowConsumer(c, backlog, `unsent output over ${limits.maxSendBufferBytes} bytes`);
      return;
    }
    c.conn.send(buf);
    metrics.framesOut.inc();
    metrics.frameSent(msg.t);
    metrics.bytesOut.inc(buf.length);
  }

  /**
   * Presence for a connection that is behind on its output waits here, the latest value per peer
   * (a slow reader needs no older one), so it holds at most one value per client of the room;
   * a reader so slow that more clients came and went than the room holds is a slow consumer.
   */
  function holdPresence(c: Session, peers: readonly PeerPresence[]): void {
    const held = (c.presenceHeld ??= new Map());
    for (const p of peers) {
      held.delete(p.client); // re-inserted last: the held peers go out in the order they changed
      held.set(p.client, p);
    }
    if (held.size > 2 * limits.maxClientsPerRoom) slowConsumer(c, c.conn.bufferedAmount, `presence of ${held.size} clients held for it`);
  }

  /** Its output drained: the presence held for it goes out in one frame. */
  function releaseHeldPresence(c: Session): void {
    const held = c.presenceHeld;
    if (!held || c.closed || c.conn.bufferedAmount > PRESENCE_BACKLOG_BYTES) return;
    c.presenceHeld = undefined;
    send(c, { t: 'presence', peers: [...held.values()] });
  }

  function slowConsumer(c: Session, backlog: number, why: string): void {
    if (c.closed) return;
    metrics.slowConsumers.inc();
    metrics.refusedConnections.inc({ reason: 'slow-consumer' });
    log.warn({ conn: c.id, room: c.roomName, remote: c.remote, buffered: backlog, reason: 'slow-consumer' }, `slow consumer (${why}); disconnecting it`);
    markClosed(c);
    c.conn.terminate();
  }

  function closeSession(c: Session, code: number, reason: string): void {
    if (c.closed) return;
    markClosed(c);
    c.conn.close(code, reason);
  }

  /** No more input from this connection is handled: drop what it queued, now. */
  function markClosed(c: Session): void {
    c.closed = true;
    if (c.helloTimer) clock.clearTimeout(c.helloTimer);
    if (c.waitTimer) clock.clearTimeout(c.waitTimer);
    if (c.expiryTimer) clock.clearTimeout(c.expiryTimer);
    c.helloTimer = c.waitTimer = c.expiryTimer = undefined;
    for (const f of c.inbox) if ('held' in f) decoding -= f.held;
    c.inbox.length = 0;
    c.queuedBytes = 0;
    c.presenceHeld = undefined;
    work.delete(c.roomName, c);
  }

  /** The session as its room sees it. */
  function memberOf(c: Session): RoomMember {
    return {
      id: c.id,
      send: (msg) => send(c, msg),
      close(code, reason, refused) {
        if (c.closed) return;
        if (refused !== undefined) {
          metrics.refusedConnections.inc({ reason: refused });
          log.info(
            { conn: c.id, room: c.roomName, remote: c.remote, user: c.identity?.user, client: c.clientId, reason: refused },
            refused === 'storage-failed' ? `connection closed: ${reason}` : `connection closed by the room: ${refused}`,
          );
        }
        closeSession(c, code, refused === 'storage-failed' ? 'storage failed' : reason);
      },
    };
  }

  // ------------------------------------------------------------ frames

  /**
   * `held`: the heap counted in the decoding budget while the frame's ops are handled (0: a small
   * frame); `queuedMs`: how long the frame waited for its turn since it arrived (for opPath).
   */
  function onFrame(c: Session, data: Uint8Array, isBinary: boolean, held: number, queuedMs: number): void {
    metrics.framesIn.inc();
    metrics.bytesIn.inc(data.length);
    if (!isBinary) {
      metrics.malformed.inc();
      cut(c, 'malformed-frame', 1003, 'Hercules speaks binary frames only; use @hercules/client', true);
      return;
    }
    let frame: unknown;
    const decodeStart = clock.now();
    try {
      frame = c.codec.decode(data);
    } catch (e) {
      metrics.malformed.inc();
      cut(c, 'malformed-frame', 1007, errText(e), true);
      return;
    }
    if (!c.host) return join(c, frame);
    if (isOpsFrame(frame)) {
      metrics.opPath.observe({ stage: 'queued' }, queuedMs / 1000);
      metrics.opPath.observe({ stage: 'decode' }, (clock.now() - decodeStart) / 1000);
      // Charged in full now; handled in runs over the next turns (see turn()).
      chargeOps(c, frame.ops.length);
      decoding += held;
      // An ack the frame carries (VIS-ACK-WITH-OPS) goes to the room with its first run of ops.
      c.inbox.unshift({ ops: frame.ops, done: 0, held, ack: (frame as { ack?: unknown }).ack });
    } else {
      if ((frame as { t?: unknown } | null)?.t === 'presence') chargeOps(c, PRESENCE_OP_COST);
      c.host.receive(c.id, frame);
    }
  }

  /** Take `n` from the connection's op bucket and its user's (they may go negative: the next frame waits). */
  function chargeOps(c: Session, n: number): void {
    c.tokens -= n;
    if (c.userBucket) c.userBucket.tokens -= n;
  }

  /**
   * A frame measureFrame refused before decoding it: over the decoded-size bound, `too-large`
   * with 1009 (as a frame over maxFrameBytes), or not one MessagePack value, `malformed-frame`
   * with 1007 (as a frame that fails to decode). Fatal: the client library never sends either.
   */
  function refuseFrame(c: Session, e: unknown): void {
    const tooLarge = e instanceof HerculesError && e.code === 'too-large';
    if (!tooLarge) metrics.malformed.inc();
    cut(c, tooLarge ? 'too-large' : 'malformed-frame', tooLarge ? 1009 : 1007, errText(e), true);
  }

  /** The first frame must be hello: it names the machine, which picks (or creates) the room. Its input waits meanwhile. */
  function join(c: Session, frame: unknown): void {
    const checked = checkHello(frame, machines);
    if (isRefusal(checked)) {
      if (checked.closeCode === 1008) metrics.malformed.inc();
      cut(c, checked.code, checked.closeCode, checked.message, checked.fatal);
      return;
    }
    c.joining = true;
    registry.acquire(c.roomName, checked.machine, { join: true }).then(
      (host) =>
        guard('join', () => {
          c.joining = false;
          if (c.closed || closing) return;
          if (typeof host === 'string') return cut(c, 'machine-mismatch', 4002, host, true);
          const full = roomFull(c.roomName, host.memberCount, limits.maxClientsPerRoom);
          if (full) return cut(c, full.code, full.closeCode, full.message, full.fatal);
          c.host = host;
          c.clientId = checked.hello.client;
          c.member = memberOf(c);
          host.join(c.member, { ...(c.identity ? { user: c.identity.user } : {}), access: c.access, ...readerPresence(c) });
          // Which of two connections of this client id is newer is the server's to say: a client
          // whose clock went back an hour was refused `replaced` until its dead connection went.
          host.receive(c.id, { ...checked.hello, at: c.acceptedAt });
          ready(c);
        }),
      (e) =>
        guard('join', () => {
          c.joining = false;
          if (c.closed || closing) return;
          // The room runs a version this server cannot run (docs/migrations.md): retrying cannot help.
          if (e instanceof HerculesError && (e.code === 'server-too-old' || e.code === 'machine-mismatch')) return cut(c, e.code, 4002, e.message, true);
          metrics.storageErrors.inc();
          log.error({ room: c.roomName, err: errText(e) }, 'cannot load room');
          // Not fatal: a store that is down or slow (a full disk, a replicated log electing a
          // leader, a shard changing owner) comes back; the client retries with backoff.
          cut(c, 'storage-failed', 1011, `the server cannot load room ${c.roomName} now: ${errText(e)}; retrying`, false);
        }),
    );
  }

  // ------------------------------------------------------------ input scheduling

  const work = new FairQueue<string, Session>();
  let roundScheduled = false;
  let inRound = false;
  /** Raw bytes of the frames decoded and not yet handled to their end, over all connections. */
  let decoding = 0;

  /** Input arrived, or a wait ended: give the connection a turn, now if nobody else waits. */
  function ready(c: Session): void {
    if (c.closed || closing || c.waitTimer || c.joining || c.inbox.length === 0) return flow(c);
    if (inRound || work.size > 0) {
      work.add(c.roomName, c);
      scheduleRound();
      return flow(c);
    }
    inRound = true;
    try {
      turn(c, SLICE_MS);
    } finally {
      inRound = false;
    }
  }

  function scheduleRound(): void {
    if (roundScheduled) return;
    roundScheduled = true;
    clock.setTimeout(() => guard('round', round), 0);
  }

  /** Turns until the queue is empty or ROUND_MS is spent; then sockets are read and outputs committed. */
  function round(): void {
    roundScheduled = false;
    const end = clock.now() + ROUND_MS;
    inRound = true;
    try {
      for (let next = work.take(); next; next = clock.now() < end ? work.take() : undefined) {
        turn(next.member, Math.min(SLICE_MS, Math.max(MIN_SLICE_MS, ROUND_MS / (work.groups + 1))));
      }
    } finally {
      inRound = false;
    }
    if (work.size > 0) scheduleRound();
  }

  /** One turn of a connection: handle its input for about `sliceMs`; queue it again if more waits. */
  function turn(c: Session, sliceMs: number): void {
    const start = clock.now();
    while (c.inbox.length > 0 && !c.closed && !closing && !c.joining) {
      const now = clock.now();
      const elapsed = (now - c.refilledAt) / 1000;
      c.tokens = Math.min(limits.opsBurst, c.tokens + elapsed * limits.opsPerSecond);
      c.byteTokens = Math.min(limits.bytesBurst, c.byteTokens + elapsed * limits.bytesPerSecond);
      c.refilledAt = now;
      const u = c.userBucket;
      if (u) {
        u.tokens = Math.min(limits.userOpsBurst, u.tokens + ((now - u.refilledAt) / 1000) * limits.userOpsPerSecond);
        u.refilledAt = now;
      }
      const next = c.inbox[0];
      try {
        if ('data' in next) {
          if (c.tokens < 1 || c.byteTokens < 1 || (u && u.tokens < 1)) return waitForTokens(c);
          // The server-wide decoding budget, for large frames (by the heap they decode to):
          // they wait for others to be handled first (one is always allowed, so a frame larger
          // than the budget still goes through). Small frames never wait for it, so a room that
          // sends little is not held up behind rooms that send much; each connection has at
          // most one frame decoded.
          const large = next.heap > SMALL_FRAME_HEAP;
          if (large && decoding > 0 && decoding + next.heap > limits.maxDecodingBytes) break;
          c.inbox.shift();
          c.queuedBytes -= Math.max(next.data.length, FRAME_OVERHEAD_BYTES);
          c.byteTokens -= Math.max(next.data.length, next.heap / HEAP_PER_CHARGED_BYTE);
          onFrame(c, next.data, next.isBinary, large ? next.heap : 0, now - next.at);
        } else {
          const host = c.host!; // ops frames are queued only after hello
          const room = stats.room(host.name);
          const cost = room?.costPerOp ?? 0.01;
          const n = Math.min(next.ops.length - next.done, Math.max(1, Math.min(MAX_CHUNK_OPS, Math.floor((sliceMs - (now - start)) / cost))));
          const ops = n === next.ops.length ? next.ops : next.ops.slice(next.done, next.done + n);
          const ack = next.done === 0 ? next.ack : undefined;
          next.done += n;
          if (next.done === next.ops.length) {
            c.inbox.shift();
            decoding -= next.held;
          }
          host.receive(c.id, ack === undefined ? { t: 'ops', ops } : { t: 'ops', ops, ack });
          if (room) room.costPerOp = Math.max(1e-4, 0.7 * room.costPerOp + (0.3 * (clock.now() - now)) / n);
        }
      } catch (e) {
        // Never let one bad frame or bug take the process or the room's other clients down.
        metrics.outputFailures.inc({ stage: 'frame' });
        log.error({ conn: c.id, room: c.roomName, err: e instanceof Error ? e.stack : String(e) }, 'error handling frame');
        cut(c, 'internal', 1011, `the server failed on this frame: ${errText(e)}`, true);
      }
      if (clock.now() - start >= sliceMs) break;
    }
    if (c.inbox.length > 0 && !c.closed && !closing && !c.joining) {
      work.add(c.roomName, c);
      scheduleRound();
    }
    flow(c);
  }

  /** Over its rate: no turn until the buckets refill; the connection stays paused meanwhile. */
  function waitForTokens(c: Session): void {
    metrics.rateLimited.inc();
    const waitS = Math.max(
      (1 - c.tokens) / limits.opsPerSecond,
      (1 - c.byteTokens) / limits.bytesPerSecond,
      c.userBucket ? (1 - c.userBucket.tokens) / limits.userOpsPerSecond : 0,
    );
    c.waitTimer = clock.setTimeout(
      () =>
        guard('rate', () => {
          c.waitTimer = undefined;
          ready(c);
        }),
      Math.max(1, Math.ceil(waitS * 1000)),
    );
    flow(c);
  }

  /**
   * Stop reading a connection once its waiting input nears `maxQueuedBytes`: the transport holds
   * the rest, not our memory. Not as soon as anything waits: a connection read one frame per turn
   * falls behind a busy client's small frames (its ops and acks) whenever a round takes longer
   * than the client's gap between frames, as under a flood next door, and its delays grew without
   * end. The margin: a frame being read when the threshold is crossed (at most maxFrameBytes), and
   * what one socket read still delivers after the pause.
   */
  function flow(c: Session): void {
    const hold = c.inbox.length > 0 && !c.closed && c.queuedBytes >= pauseAtBytes;
    if (hold === c.paused || !c.conn.isOpen) return;
    c.paused = hold;
    if (hold) c.conn.pause();
    else c.conn.resume();
  }

  // ------------------------------------------------------------ connections

  /** Refuse a connection that was accepted only so the client can read why (browsers see no HTTP status). */
  function refuse(conn: Connection, r: Refusal): void {
    metrics.refusedConnections.inc({ reason: r.code });
    log.info({ remote: conn.remote, reason: r.code }, `connection refused: ${r.message}`);
    const c = halfRtt > 0 ? delayedConnection(conn, halfRtt, clock) : conn;
    c.listen({ message() {}, close() {} });
    guard('refuse', () => {
      c.send(new ServerCodec().encode({ t: 'error', code: r.code, message: r.message, fatal: r.fatal }));
      c.close(r.closeCode, r.message);
    });
  }

  /** Close `c` when its credential expires; a client with a token function returns with a fresh one. */
  function armExpiry(c: Session): void {
    const at = c.identity?.expiresAt;
    if (at === undefined || !Number.isFinite(at)) return;
    const wait = at - Date.now(); // expiry is wall-clock time, like the token's `exp`
    if (wait <= 0) {
      cut(c, 'unauthenticated', 4401, `the credential expired at ${new Date(at).toISOString()}; reconnect with a fresh token`, true);
      return;
    }
    // Timers take at most 2^31 - 1 ms (24.8 days): a longer wait is armed in steps.
    c.expiryTimer = clock.setTimeout(
      () =>
        guard('credential-expiry', () => {
          c.expiryTimer = undefined;
          if (!c.closed) armExpiry(c);
        }),
      Math.min(wait, 2 ** 31 - 1),
    );
  }

  /** A read-only connection's say on presence, when `readersPresence` is a hook (a hook that throws says no). */
  function readerPresence(c: Session): { presence?: boolean } {
    const hook = opts.readersPresence;
    if (c.access !== 'read' || typeof hook !== 'function') return {};
    try {
      return { presence: hook(c.identity, c.roomName) === true };
    } catch (e) {
      log.warn({ room: c.roomName, user: c.identity?.user, err: errText(e) }, 'the readersPresence hook threw; this reader may not set presence');
      return { presence: false };
    }
  }

  /** Buckets of the users with open connections (Limits.userOpsPerSecond). */
  const userBuckets = new Map<string, UserBucket>();
  function userBucketFor(user: string): UserBucket {
    let b = userBuckets.get(user);
    if (!b) userBuckets.set(user, (b = { tokens: limits.userOpsBurst, refilledAt: clock.now(), connections: 0 }));
    b.connections++;
    return b;
  }
  /** A closed connection lets go of its user's bucket; the last one drops it (memory: users with connections). */
  function releaseUserBucket(c: Session): void {
    const b = c.userBucket;
    const user = c.identity?.user;
    if (!b || user === undefined) return;
    c.userBucket = undefined;
    if (--b.connections === 0 && userBuckets.get(user) === b) userBuckets.delete(user);
  }

  function start(raw: Connection, admitted: Admitted, acceptedAt: number): void {
    if (closing) {
      raw.close(1001, 'server shutting down');
      return;
    }
    const conn = halfRtt > 0 ? delayedConnection(raw, halfRtt, clock) : raw;
    const c: Session = {
      id: `k${++nextConn}`,
      conn,
      acceptedAt,
      codec: new ServerCodec(),
      roomName: admitted.room,
      joining: false,
      alive: true,
      closed: false,
      remote: conn.remote,
      ...(admitted.identity ? { identity: admitted.identity } : {}),
      access: admitted.access,
      tokens: limits.opsBurst,
      byteTokens: limits.bytesBurst,
      refilledAt: clock.now(),
      ...(admitted.identity ? { userBucket: userBucketFor(admitted.identity.user) } : {}),
      inbox: [],
      queuedBytes: 0,
      paused: false,
    };
    sessions.set(c.id, c);
    metrics.connections.set(sessions.size);
    log.debug({ conn: c.id, room: c.roomName, remote: c.remote, user: admitted.identity?.user, access: c.access }, 'connection open');
    // A connection that never completes a first frame holds a socket and a parser: close it.
    c.helloTimer = clock.setTimeout(
      () =>
        guard('hello-timeout', () => {
          c.helloTimer = undefined;
          if (!c.closed && !c.host && !c.joining)
            cut(c, 'hello-timeout', 4010, `no hello within ${limits.helloTimeoutMs} ms of connecting; a client says hello as soon as it connects`, false);
        }),
      limits.helloTimeoutMs,
    );
    armExpiry(c);
    conn.listen({
      pong() {
        c.alive = true;
      },
      message: (data, isBinary) =>
        guard('message', () => {
          c.alive = true;
          if (c.closed || closing) return;
          if (c.helloTimer) {
            clock.clearTimeout(c.helloTimer);
            c.helloTimer = undefined;
          }
          const size = Math.max(data.length, FRAME_OVERHEAD_BYTES);
          if (c.queuedBytes + size > limits.maxQueuedBytes) {
            // Only a peer that ignores backpressure gets here: the connection was paused long before.
            cut(
              c,
              'rate-limited',
              4008,
              `more than ${limits.maxQueuedBytes} bytes of frames queued while the server was not reading this connection; reconnect and send slower`,
              false,
            );
            return;
          }
          // Its decoded size, from its bytes: a frame over the bound is refused before it is decoded.
          let heap = 0;
          if (isBinary) {
            try {
              heap = measureFrame(data).heap;
            } catch (e) {
              refuseFrame(c, e);
              return;
            }
          }
          c.inbox.push({ data, isBinary, at: clock.now(), heap });
          c.queuedBytes += size;
          ready(c);
        }),
      close: () =>
        guard('close', () => {
          markClosed(c);
          sessions.delete(c.id);
          releaseUserBucket(c);
          metrics.connections.set(sessions.size);
          c.host?.leave(c.id);
          log.debug({ conn: c.id }, 'connection closed');
        }),
    });
  }

  const admission = new Admission({ authenticate, access: opts.access, maxConnections: limits.maxConnections, openConnections: () => sessions.size, log });

  const wss = new WebSocketServer({ noServer: true, maxPayload: limits.maxFrameBytes, perMessageDeflate: false });

  function handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    guard('upgrade', () => {
      socket.on('error', () => {}); // a peer that vanishes mid-handshake is not our error
      const accept = (fn: (ws: WebSocket) => void) =>
        guard('upgrade', () => {
          if (socket.destroyed) return;
          wss.handleUpgrade(req, socket, head, (ws) => guard('upgrade', () => fn(ws)));
        });
      const remote = req.socket.remoteAddress ?? '?';
      const acceptedAt = acceptClock();
      if (closing) return accept((ws) => ws.close(1001, 'server shutting down'));
      // Refusals that need no hook are answered at once; admission repeats the cheap checks.
      const room = roomOf(req);
      if (typeof room !== 'string') return accept((ws) => refuse(wsConnection(ws, remote), room));
      admission.admit(req).then(
        (r) => accept((ws) => (isRefusal(r) ? refuse(wsConnection(ws, remote), r) : start(wsConnection(ws, remote), r, acceptedAt))),
        (e) => log.error({ err: (e as Error).stack }, 'admitting a connection failed'),
      );
    });
  }

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

  // A dead member is dropped at most one tick after its ack timeout; at ackTimeout/4 (500 ms
  // for the default 2 s) Fig. 15 measured Visible stalls 280 ms past ack timeout + RTT. A tick
  // walks the loaded rooms' members only, so 10 per second costs little.
  const tickEvery = Math.min(100, Math.max(25, Math.floor(ackTimeoutMs / 20)));
  let ticker: TimerHandle | undefined;
  const tick = () => {
    guard('tick', () => {
      registry.tick();
      const now = clock.now();
      let members = 0,
        unstable = 0,
        buffered = 0,
        waiting = 0;
      for (const host of registry.hostsInMemory()) {
        members += host.engine.members().length;
        unstable += host.engine.suffixLength();
        waiting += host.waiting;
      }
      let queued = 0;
      for (const c of sessions.values()) {
        releaseHeldPresence(c);
        buffered += c.conn.bufferedAmount;
        queued += c.queuedBytes;
      }
      metrics.inputQueued.set(queued);
      metrics.inputDecoding.set(decoding);
      metrics.inputWaiting.set(work.size);
      metrics.pendingOutputs.set(waiting);
      stats.dropStale(now);
      metrics.rooms.set(registry.size);
      metrics.members.set(members);
      metrics.unstable.set(unstable);
      metrics.sendBuffer.set(buffered);
    });
    if (!closing) ticker = clock.setTimeout(tick, tickEvery);
  };
  ticker = clock.setTimeout(tick, tickEvery);

  let heartbeat: TimerHandle | undefined;
  const beat = () => {
    guard('heartbeat', () => {
      for (const c of sessions.values()) {
        try {
          if (c.paused) {
            c.alive = true; // not read from because its input waits for a turn or for tokens: pongs wait too
            continue;
          }
          if (!c.alive) {
            if (!c.closed) {
              metrics.refusedConnections.inc({ reason: 'heartbeat-timeout' });
              log.info(
                { conn: c.id, room: c.roomName, remote: c.remote, reason: 'heartbeat-timeout' },
                `connection closed: no frame or pong for ${heartbeatMs} ms`,
              );
            }
            markClosed(c);
            c.conn.terminate();
            continue;
          }
          c.alive = false;
          c.conn.ping?.();
          if (c.host) send(c, { t: 'ping' });
        } catch (e) {
          log.warn({ conn: c.id, err: errText(e) }, 'heartbeat failed for a connection; dropping it');
          markClosed(c);
          c.conn.terminate();
        }
      }
    });
    if (!closing) heartbeat = clock.setTimeout(beat, heartbeatMs);
  };
  heartbeat = clock.setTimeout(beat, heartbeatMs);

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
      if (ticker) clock.clearTimeout(ticker);
      if (heartbeat) clock.clearTimeout(heartbeat);
      for (const c of sessions.values()) c.conn.close(1001, 'server shutting down');
      await new Promise<void>((r) => wss.close(() => r()));
      await registry.close();
    },
  };
}

function isOpsFrame(f: unknown): f is { t: 'ops'; ops: unknown[] } {
  return typeof f === 'object' && f !== null && (f as { t?: unknown }).t === 'ops' && Array.isArray((f as { ops?: unknown }).ops);
}
