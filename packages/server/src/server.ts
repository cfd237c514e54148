/**
 * The Hercules server: WebSocket transport (`ws`), SQLite storage, rooms loaded on first use and
 * unloaded when idle, group commit, heartbeats, /metrics and /healthz. A thin adapter around the
 * pure RoomEngine: it turns sockets, disk and timers into the engine's ordered inputs, and
 * carries out its outputs — persisting before sending, so nothing is announced Authoritative
 * before it is on disk (outputs of pure bookkeeping, such as acks, go out first: see
 * RoomOutput.sendFirst).
 */
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import pino, { type Logger } from 'pino';
import {
  HerculesError,
  PROTOCOL_VERSION,
  RoomEngine,
  ServerCodec,
  parseClientMessage,
  type ErrorCode,
  type Machine,
  type RoomOutput,
  type ServerMessage,
} from '@hercules/core';
import { SqliteStore, type PreparedWrite } from './store/sqlite.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { FairQueue } from './fair-queue.ts';
import { AuthError, jwtAuthenticator, type Access, type AccessHook, type Authenticate, type Identity, type JwtOptions } from './auth.ts';
import type { AuthorizeOp } from '@hercules/core';

export interface ServerOptions {
  /** TCP port; 0 picks a free one. Default 8787. */
  port?: number;
  /** Interface to listen on. Default 127.0.0.1. */
  host?: string;
  /** Directory for the SQLite file. Required. */
  dataDir: string;
  /** The state machines rooms may run, by name. */
  machines: Record<string, Machine<any, any>> | Machine<any, any>[];
  /** Remove a visibility-set member whose ack is outstanding this long. Default 2000 ms. */
  ackTimeoutMs?: number;
  /** Heartbeat interval; a connection silent for two intervals is dropped. Default 5000 ms. */
  heartbeatMs?: number;
  /** Unload a room this long after its last connection closes. Default 30000 ms. */
  idleUnloadMs?: number;
  /** Write a room's checkpoint state at most every this many ops. Default 1000. */
  checkpointEvery?: number;
  /**
   * Group-commit window: wait this long after the first pending write to gather more into one
   * transaction. 0 (default) commits once per event-loop turn: lowest latency, and ops that
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
  /** Resource limits per connection and room; see `Limits` for defaults. */
  limits?: Partial<Limits>;
  /** pino log level, or a pino logger. Default 'info'. */
  log?: string | Logger;
  /** Extra HTTP handler for other paths (e.g. static demo apps); return false to 404. */
  http?: (req: IncomingMessage, res: ServerResponse) => boolean;
}

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
  /** Sustained bytes per second of frames per connection (token bucket). Default 1 MiB. */
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
   * Bytes of frames over 64 KiB decoded and being handled, over the whole server: a frame
   * decodes to up to about 64 times its size, so this bounds that memory for all connections
   * together; large frames past it wait, undecoded, for their turn. Default 8 MiB.
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
}

const DEFAULT_LIMITS: Omit<Limits, 'maxQueuedBytes'> = {
  maxFrameBytes: 1 << 20,
  opsPerSecond: 1000,
  opsBurst: 5000,
  bytesPerSecond: 1 << 20,
  bytesBurst: 8 << 20,
  maxDecodingBytes: 8 << 20,
  maxClientsPerRoom: 256,
  maxConnections: 10_000,
  maxSendBufferBytes: 16 << 20,
  helloTimeoutMs: 10_000,
};

/** What one socket read can still deliver after the server pauses a connection. */
const READ_CHUNK_BYTES = 64 << 10;
/** Frames up to this size are decoded without waiting for the server's decoding budget. */
const SMALL_FRAME_BYTES = 64 << 10;
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

/** How long a closed connection's peer has to answer the close before its socket is dropped. */
const CLOSE_GRACE_MS = 1000;

interface Conn {
  id: string;
  ws: WebSocket;
  codec: ServerCodec;
  roomName: string;
  room?: RoomHost;
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
  /**
   * Frames not handled yet, oldest first: raw frames, and at the front possibly an ops frame
   * decoded and handled in part (`done` of its ops so far; `raw`, its size, is counted in the
   * server's decoding budget until it is done).
   */
  inbox: ({ data: Buffer; isBinary: boolean } | { ops: unknown[]; done: number; raw: number })[];
  /** Bytes of the raw frames in `inbox` (each at least FRAME_OVERHEAD_BYTES). */
  queuedBytes: number;
  /** The socket is paused because input of this connection waits: its silence is ours. */
  paused: boolean;
  /** Set while the connection waits for its rate-limit tokens. */
  waitTimer?: ReturnType<typeof setTimeout>;
  helloTimer?: ReturnType<typeof setTimeout>;
  /** Bytes handed to the simulated-delay queue and not yet to the socket. */
  delayed: number;
}

interface RoomHost {
  name: string;
  engine: RoomEngine<any>;
  conns: Map<string, Conn>;
  emptySince: number;
  /**
   * Per client, the ops not yet visible and when they were sequenced (seq order = time order),
   * for the visible-delay metric. A queue per client: a Notify-Visible pops a prefix, in time
   * proportional to the ops it covers, not to everything in flight.
   */
  orderedAt: Map<string, { seq: number; t: number }[]>;
  lastStableAt: number;
  /** Recent engine time per op (ms, moving average): sizes this room's runs of ops to a turn. */
  costPerOp: number;
}

const ROOM_NAME = /^[A-Za-z0-9._~-]{1,128}$/;

export interface HerculesServer {
  readonly url: string;
  readonly port: number;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** Rooms currently in memory. */
  loadedRooms(): string[];
  /** The SQLite store (for tests and tools). */
  readonly store: SqliteStore;
  /** Stop accepting, close connections, flush checkpoints, close the database. */
  close(): Promise<void>;
}

export async function createServer(opts: ServerOptions): Promise<HerculesServer> {
  if (!opts || typeof opts.dataDir !== 'string' || opts.dataDir.length === 0) {
    throw new HerculesError('bad-argument', 'createServer: `dataDir` is required (a directory for the SQLite file)');
  }
  const machines = new Map<string, Machine<any, any>>();
  for (const m of Array.isArray(opts.machines) ? opts.machines : Object.values(opts.machines ?? {})) {
    if (!m || typeof m.name !== 'string' || !(m.opNames instanceof Set))
      throw new HerculesError('bad-argument', 'createServer: `machines` must hold machines made with defineMachine');
    machines.set(m.name, m);
  }
  if (machines.size === 0) throw new HerculesError('bad-argument', 'createServer: no machines given; pass the machines your apps use');
  const ackTimeoutMs = opts.ackTimeoutMs ?? 2000;
  const heartbeatMs = opts.heartbeatMs ?? 5000;
  const idleUnloadMs = opts.idleUnloadMs ?? 30_000;
  const halfRtt = Math.max(0, (opts.simulateRttMs ?? 0) / 2);
  const commitWindowMs = Math.max(0, opts.commitWindowMs ?? 0);
  const given = { ...DEFAULT_LIMITS, ...(opts.maxFrameBytes !== undefined ? { maxFrameBytes: opts.maxFrameBytes } : {}), ...(opts.limits ?? {}) };
  const limits: Limits = { ...given, maxQueuedBytes: given.maxQueuedBytes ?? 2 * given.maxFrameBytes + READ_CHUNK_BYTES };
  /** A connection is paused once this much of its input waits (see flow()). */
  const pauseAtBytes = limits.maxQueuedBytes - limits.maxFrameBytes - READ_CHUNK_BYTES;
  for (const [k, v] of Object.entries(limits)) {
    if (!(k in DEFAULT_LIMITS) && k !== 'maxQueuedBytes')
      throw new HerculesError(
        'bad-argument',
        `createServer: unknown limit limits.${k}; known: ${[...Object.keys(DEFAULT_LIMITS), 'maxQueuedBytes'].join(', ')}`,
      );
    if (typeof v !== 'number' || !(v > 0)) throw new HerculesError('bad-argument', `createServer: limits.${k} must be a positive number, got ${String(v)}`);
  }
  if (limits.maxQueuedBytes < limits.maxFrameBytes + READ_CHUNK_BYTES) {
    throw new HerculesError(
      'bad-argument',
      `createServer: limits.maxQueuedBytes (${limits.maxQueuedBytes}) must be at least maxFrameBytes + 64 KiB (${limits.maxFrameBytes + READ_CHUNK_BYTES}), or a frame could never be queued`,
    );
  }
  const maxFrameBytes = limits.maxFrameBytes;
  if (opts.authenticate && opts.jwt) throw new HerculesError('bad-argument', 'createServer: give `authenticate` or `jwt`, not both');
  const authenticate: Authenticate | undefined = opts.jwt ? jwtAuthenticator(opts.jwt) : opts.authenticate;
  if (authenticate !== undefined && typeof authenticate !== 'function')
    throw new HerculesError('bad-argument', 'createServer: `authenticate` must be a function (request) => identity');
  if (opts.access !== undefined && typeof opts.access !== 'function')
    throw new HerculesError('bad-argument', 'createServer: `access` must be a function (identity, room) => access');
  if (opts.authorize !== undefined && typeof opts.authorize !== 'function')
    throw new HerculesError('bad-argument', 'createServer: `authorize` must be a function (op, ctx, state) => verdict');
  const log: Logger = typeof opts.log === 'object' ? opts.log : pino({ level: opts.log ?? 'info', base: { svc: 'hercules' } });
  const metrics = createMetrics();
  const store = new SqliteStore(opts.dataDir, { checkpointEvery: opts.checkpointEvery });
  const rooms = new Map<string, RoomHost>();
  const conns = new Map<string, Conn>();
  let nextConn = 0;
  /** Upgrades being authenticated: they count against maxConnections already. */
  let admitting = 0;
  let closing = false;

  // ------------------------------------------------------------ containment
  // Nothing that goes wrong for one connection or one room may reach another, or the process:
  // every timer, socket handler and deferred callback below runs its work through `guard`, and
  // per-room and per-connection work is wrapped closer still, so a failure is charged to the
  // room or connection it belongs to.

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

  /** Something failed inside one room: drop it from memory (it reloads from disk); its clients resync. */
  function roomFailed(room: RoomHost, stage: string, e: unknown, why: string): void {
    metrics.outputFailures.inc({ stage });
    log.error(
      { room: room.name, stage, err: e instanceof Error ? e.stack : String(e) },
      `room ${room.name} failed in ${stage}; dropping it from memory so it reloads from disk (other rooms are not affected)`,
    );
    poison(room, why);
  }

  /**
   * Close a connection for a reason: tell it why (unless it cannot be told), count it by reason
   * and log it. Every connection the server refuses or cuts goes through here or `refuse`.
   */
  function cut(c: Conn, reason: ErrorCode, closeCode: number, message: string, fatal: boolean): void {
    if (c.closed) return;
    metrics.refusedConnections.inc({ reason });
    log.info({ conn: c.id, room: c.roomName, remote: c.remote, user: c.identity?.user, client: c.clientId, reason }, `connection closed: ${message}`);
    send(c, { t: 'error', code: reason, message, fatal });
    closeConn(c, closeCode, reason.replaceAll('-', ' '));
  }

  // ------------------------------------------------------------ group commit
  let pending: { room: RoomHost; out: RoomOutput; at: number }[] = [];
  let flushScheduled = false;

  function enqueue(room: RoomHost, out: RoomOutput, at: number): void {
    for (const w of out.warnings) log.warn({ room: room.name }, w);
    // A room dropped after a failure is gone: what its old engine still says must not be stored
    // or sent (its clients were closed and resync from the reloaded room).
    if (rooms.get(room.name) !== room) return;
    if (out.send.length === 0 && out.close.length === 0 && !writesOf(out)) return;
    pending.push({ room, out, at });
    metrics.pendingOutputs.set(pending.length);
    if (!flushScheduled) {
      flushScheduled = true;
      if (commitWindowMs > 0) setTimeout(flush, commitWindowMs);
      else setImmediate(flush);
    }
  }

  function flush(): void {
    flushScheduled = false;
    const batch = pending;
    pending = [];
    metrics.pendingOutputs.set(0);
    let failed = new Map<RoomHost, string>();
    try {
      // Bookkeeping-only batches (acks: Notify-Visible, stable) go out before their commit; the
      // rest wait for it (see RoomOutput.sendFirst). All or nothing keeps each socket's order.
      const sendFirst = batch.every((b) => b.out.sendFirst);
      if (sendFirst) deliver(batch, failed);
      failed = commitBatch(batch, failed);
      if (!sendFirst) deliver(batch, failed);
    } catch (e) {
      // Not one room's doing (those are caught per room below): a bug here. What this batch
      // announced is unknown, so its rooms resync from disk.
      metrics.outputFailures.inc({ stage: 'flush' });
      log.error({ err: e instanceof Error ? e.stack : String(e) }, 'group commit failed unexpectedly; its rooms reload from disk');
      for (const { room } of batch)
        if (!failed.has(room))
          failed.set(room, "the server failed while storing or sending your room's changes; reconnect to resume (nothing you made durable is lost)");
    }
    for (const [room, why] of failed) guard('poison', () => poison(room, why));
  }

  function writesOf(out: RoomOutput): boolean {
    return out.persist.appended.length > 0 || out.persist.checkpoint !== undefined || Object.keys(out.persist.clients).length > 0;
  }

  /**
   * Store the batch's writes in one durable transaction. Each room's writes are serialised on
   * their own first, outside the transaction: a room whose output cannot be serialised fails
   * alone. If the transaction fails, each room is retried in a transaction of its own, so a
   * room whose writes the database refuses fails alone too (a full disk fails them all again).
   * Returns the rooms that failed, with what to tell their clients.
   */
  function commitBatch(batch: typeof pending, failed: Map<RoomHost, string>): Map<RoomHost, string> {
    const byRoom = new Map<RoomHost, { writes: PreparedWrite[]; ops: number }>();
    for (const { room, out } of batch) {
      if (!writesOf(out) || failed.has(room)) continue;
      let w: PreparedWrite;
      try {
        w = store.serialize(room.name, out.persist);
      } catch (e) {
        // Nothing of this room's batch is stored: a later output of it would leave a gap.
        byRoom.delete(room);
        metrics.outputFailures.inc({ stage: 'serialize' });
        log.error(
          { room: room.name, err: errText(e) },
          'an output of this room cannot be serialised for storage; dropping the room from memory (other rooms are not affected)',
        );
        failed.set(
          room,
          `the server could not store a change in room ${room.name} (${errText(e).slice(0, 200)}); it was dropped, reconnect to resume (nothing you made durable is lost)`,
        );
        continue;
      }
      let r = byRoom.get(room);
      if (!r) byRoom.set(room, (r = { writes: [], ops: 0 }));
      r.writes.push(w);
      r.ops += out.persist.appended.length;
    }
    if (byRoom.size === 0) return failed;
    const t0 = performance.now();
    const all = [...byRoom.values()];
    try {
      store.commitPrepared(all.flatMap((r) => r.writes));
      metrics.commitSeconds.observe((performance.now() - t0) / 1000);
      metrics.commitOps.observe(all.reduce((a, r) => a + r.ops, 0));
      return failed;
    } catch (e) {
      metrics.storageErrors.inc();
      log.error(
        { err: errText(e), rooms: [...byRoom.keys()].map((r) => r.name) },
        byRoom.size > 1 ? 'group commit failed; retrying room by room' : 'storage commit failed; dropping the room from memory so it reloads from disk',
      );
      if (byRoom.size === 1) {
        for (const room of byRoom.keys()) failed.set(room, storageFailedWhy);
        return failed;
      }
    }
    for (const [room, r] of byRoom) {
      try {
        store.commitPrepared(r.writes);
        metrics.commitOps.observe(r.ops);
      } catch (e) {
        metrics.outputFailures.inc({ stage: 'commit' });
        log.error({ room: room.name, err: errText(e) }, 'storage commit of this room failed; dropping it from memory so it reloads from disk');
        failed.set(room, storageFailedWhy);
      }
    }
    return failed;
  }
  const storageFailedWhy = 'the server could not write to its storage; reconnect to resume (nothing you made durable is lost)';

  /** Send a batch's messages and closes, and count what it sequenced; skips failed rooms. */
  function deliver(batch: typeof pending, failed: Map<RoomHost, string>): void {
    const now = performance.now();
    for (const { room, out, at } of batch) {
      if (failed.has(room)) continue;
      try {
        deliverOne(room, out, at, now);
      } catch (e) {
        // A bug while sending one room's output: some of its connections may have missed a
        // message, and a missed message is a gap in their log. They resync from disk.
        metrics.outputFailures.inc({ stage: 'deliver' });
        log.error(
          { room: room.name, err: e instanceof Error ? e.stack : String(e) },
          'delivering an output of this room failed; dropping the room from memory so its clients resync',
        );
        failed.set(room, "the server failed while sending your room's changes; reconnect to resume (nothing you made durable is lost)");
      }
    }
  }

  function deliverOne(room: RoomHost, out: RoomOutput, at: number, now: number): void {
    for (const e of out.persist.appended) {
      let q = room.orderedAt.get(e.client);
      if (!q) room.orderedAt.set(e.client, (q = []));
      q.push({ seq: e.seq, t: now });
    }
    if (out.persist.appended.length) {
      metrics.opsSequenced.inc(out.persist.appended.length);
      const rej = out.persist.appended.filter((e) => e.error !== undefined);
      if (rej.length) metrics.opsRejected.inc(rej.length);
      const refused = rej.filter((e) => e.refused).length;
      if (refused) metrics.opsRefused.inc(refused);
    }
    if (out.persist.checkpoint) {
      metrics.stableDelay.observe((now - room.lastStableAt) / 1000);
      room.lastStableAt = now;
    }
    /** Fatal errors the engine sent, by connection: the reason a close below is counted under. */
    let fatal: Map<string, ErrorCode> | undefined;
    for (const { conn, msg } of out.send) {
      const c = room.conns.get(conn) ?? conns.get(conn);
      if (!c) continue;
      if (msg.t === 'log' && msg.entries.some((w) => w.k === 'own')) metrics.authoritativeDelay.observe((now - at) / 1000);
      if (msg.t === 'visible') observeVisible(room, c, msg.seq, now);
      if (msg.t === 'error' && msg.fatal) (fatal ??= new Map()).set(conn, msg.code);
      send(c, msg);
    }
    for (const { conn, reason } of out.close) {
      const c = room.conns.get(conn) ?? conns.get(conn);
      if (!c || c.closed) continue;
      const why = fatal?.get(conn);
      if (why !== undefined) {
        metrics.refusedConnections.inc({ reason: why });
        log.info(
          { conn: c.id, room: room.name, remote: c.remote, user: c.identity?.user, client: c.clientId, reason: why },
          `connection closed by the room: ${why}`,
        );
      }
      closeConn(c, 4000, why ?? reason);
    }
  }

  function observeVisible(room: RoomHost, c: Conn, seq: number, now: number): void {
    if (c.clientId === undefined) return;
    dropVisibleDelays(room, c.clientId, (o) => {
      if (o.seq > seq) return false;
      metrics.visibleDelay.observe((now - o.t) / 1000);
      return true;
    });
  }

  /** Drop the leading entries of a client's visible-delay queue while `take` says so. */
  function dropVisibleDelays(room: RoomHost, client: string, take: (o: { seq: number; t: number }) => boolean): void {
    const q = room.orderedAt.get(client);
    if (!q) return;
    let n = 0;
    while (n < q.length && take(q[n])) n++;
    if (n === q.length) room.orderedAt.delete(client);
    else if (n > 0) q.splice(0, n);
  }

  /** This room's memory may be ahead of its disk, or its clients may have missed a message: drop it; clients resync. */
  function poison(room: RoomHost, why: string): void {
    if (rooms.get(room.name) !== room) return;
    rooms.delete(room.name);
    store.forget(room.name);
    metrics.rooms.set(rooms.size);
    for (const c of room.conns.values()) cut(c, 'storage-failed', 1011, why, false);
  }

  // ------------------------------------------------------------ sockets

  function send(c: Conn, msg: ServerMessage): void {
    if (c.closed) return;
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
    const backlog = c.ws.bufferedAmount + c.delayed;
    // The bound is on backlog: one frame bigger than it (a large checkpoint) still goes out.
    if (backlog > 0 && backlog + buf.length > limits.maxSendBufferBytes) {
      // It cannot keep up; holding more for it would let one phone grow our memory without
      // bound. Cut it off: it reconnects and catches up from the log or a checkpoint.
      slowConsumer(c, backlog, `unsent output over ${limits.maxSendBufferBytes} bytes`);
      return;
    }
    const go = () => {
      c.delayed -= buf.length;
      if (c.ws.readyState !== c.ws.OPEN) return;
      c.ws.send(buf, { binary: true });
      metrics.framesOut.inc();
      metrics.bytesOut.inc(buf.length);
    };
    c.delayed += buf.length;
    if (halfRtt > 0) setTimeout(() => guard('send', go), halfRtt);
    else go();
  }

  function slowConsumer(c: Conn, backlog: number, why: string): void {
    if (c.closed) return;
    metrics.slowConsumers.inc();
    metrics.refusedConnections.inc({ reason: 'slow-consumer' });
    log.warn({ conn: c.id, room: c.roomName, remote: c.remote, buffered: backlog, reason: 'slow-consumer' }, `slow consumer (${why}); disconnecting it`);
    markClosed(c);
    c.ws.terminate();
  }

  function closeConn(c: Conn, code: number, reason: string): void {
    if (c.closed) return;
    markClosed(c);
    const go = () => {
      c.ws.close(code, reason.slice(0, 120));
      // A peer that never answers the close (a raw socket, a stalled one) would hold its socket
      // for ws's 30 s close timeout: it gets a second.
      setTimeout(() => {
        if (c.ws.readyState !== c.ws.CLOSED) c.ws.terminate();
      }, CLOSE_GRACE_MS).unref();
    };
    if (halfRtt > 0) setTimeout(() => guard('close', go), halfRtt + 1);
    else go();
  }

  /** No more input from this connection is handled: drop what it queued, now. */
  function markClosed(c: Conn): void {
    c.closed = true;
    if (c.helloTimer) clearTimeout(c.helloTimer);
    if (c.waitTimer) clearTimeout(c.waitTimer);
    c.helloTimer = c.waitTimer = undefined;
    for (const f of c.inbox) if ('raw' in f) decoding -= f.raw;
    c.inbox.length = 0;
    c.queuedBytes = 0;
    work.delete(c.roomName, c);
  }

  function loadRoom(name: string, machine: Machine<any, any>): RoomHost | string {
    let host = rooms.get(name);
    if (host) {
      if (host.engine.machine !== machine)
        return `room ${name} runs ${host.engine.machine.name}@${host.engine.machine.version}, not ${machine.name}@${machine.version}`;
      return host;
    }
    const stored = store.load(name);
    let engine: RoomEngine<any>;
    if (stored) {
      if (stored.machine !== machine.name || stored.version !== machine.version) {
        return `room ${name} runs ${stored.machine}@${stored.version}, not ${machine.name}@${machine.version}; use another room name or deploy the matching machine`;
      }
      engine = new RoomEngine(machine, { ackTimeoutMs, authorize: opts.authorize }, stored.durable);
    } else {
      store.create(name, machine.name, machine.version, machine.initial);
      engine = new RoomEngine(machine, { ackTimeoutMs, authorize: opts.authorize });
    }
    host = { name, engine, conns: new Map(), emptySince: Date.now(), orderedAt: new Map(), lastStableAt: performance.now(), costPerOp: 0.01 };
    rooms.set(name, host);
    metrics.rooms.set(rooms.size);
    log.info({ room: name, machine: machine.name, head: engine.head(), stable: engine.stableFrontier() }, stored ? 'room loaded' : 'room created');
    return host;
  }

  function onFrame(c: Conn, data: Buffer, isBinary: boolean, budgeted: boolean): void {
    metrics.framesIn.inc();
    metrics.bytesIn.inc(data.length);
    if (!isBinary) {
      metrics.malformed.inc();
      cut(c, 'malformed-frame', 1003, 'Hercules speaks binary frames only; use @hercules/client', true);
      return;
    }
    let frame: unknown;
    try {
      frame = c.codec.decode(data);
    } catch (e) {
      metrics.malformed.inc();
      cut(c, 'malformed-frame', 1007, errText(e), true);
      return;
    }
    const now = performance.now();
    if (!c.room) {
      // The first frame must be hello: it names the machine, which picks (or creates) the room.
      let hello;
      try {
        const m = parseClientMessage(frame);
        if (m.t !== 'hello') throw new HerculesError('not-ready', `the first message must be hello, got ${m.t}`);
        hello = m;
      } catch (e) {
        metrics.malformed.inc();
        cut(c, e instanceof HerculesError ? e.code : 'malformed-frame', 1008, errText(e), true);
        return;
      }
      if (hello.v !== PROTOCOL_VERSION) {
        cut(c, 'protocol-version', 4001, `this server speaks protocol ${PROTOCOL_VERSION}, the client ${hello.v}; upgrade the older side`, true);
        return;
      }
      const machine = machines.get(hello.machine.name);
      if (!machine || machine.version !== hello.machine.version) {
        const known = [...machines.values()].map((m) => `${m.name}@${m.version}`).join(', ');
        cut(c, 'machine-mismatch', 4002, `this server has no machine ${hello.machine.name}@${hello.machine.version}; it serves ${known}`, true);
        return;
      }
      let host: RoomHost | string;
      try {
        host = loadRoom(c.roomName, machine);
      } catch (e) {
        metrics.storageErrors.inc();
        log.error({ room: c.roomName, err: errText(e) }, 'cannot load room');
        cut(c, 'storage-failed', 1011, `the server cannot load room ${c.roomName}: ${errText(e)}`, true);
        return;
      }
      if (typeof host === 'string') {
        cut(c, 'machine-mismatch', 4002, host, true);
        return;
      }
      if (host.conns.size >= limits.maxClientsPerRoom) {
        cut(c, 'room-full', 4009, `room ${c.roomName} has its maximum of ${limits.maxClientsPerRoom} connections; retrying later may succeed`, false);
        return;
      }
      c.room = host;
      c.clientId = hello.client;
      host.conns.set(c.id, c);
      enqueue(host, host.engine.open(c.id, now, { ...(c.identity ? { user: c.identity.user } : {}), access: c.access }), now);
    }
    if (isOpsFrame(frame)) {
      // Charged in full now; handled in runs over the next turns (see turn()).
      c.tokens -= frame.ops.length;
      const raw = budgeted ? data.length : 0;
      decoding += raw;
      c.inbox.unshift({ ops: frame.ops, done: 0, raw });
    } else enqueue(c.room, c.room.engine.message(c.id, frame, now), now);
  }

  // ------------------------------------------------------------ input scheduling
  // Input is handled in turns, round robin over rooms and then over each room's connections
  // (FairQueue), a round's ROUND_MS shared among the rooms waiting: a room flooded with ops, however
  // cheap or costly its ops are, delays another room by at most about one round. A connection
  // with input waiting is not read from (TCP pushes back on its client), so what the server
  // holds per connection stays bounded whatever the client sends.

  const work = new FairQueue<string, Conn>();
  let roundScheduled = false;
  let inRound = false;
  /** Raw bytes of the frames decoded and not yet handled to their end, over all connections. */
  let decoding = 0;

  /** Input arrived, or a wait ended: give the connection a turn, now if nobody else waits. */
  function ready(c: Conn): void {
    if (c.closed || closing || c.waitTimer || c.inbox.length === 0) return flow(c);
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
    setImmediate(() => guard('round', round));
  }

  /** Turns until the queue is empty or ROUND_MS is spent; then sockets are read and outputs committed. */
  function round(): void {
    roundScheduled = false;
    const end = performance.now() + ROUND_MS;
    inRound = true;
    try {
      for (let next = work.take(); next; next = performance.now() < end ? work.take() : undefined) {
        turn(next.member, Math.min(SLICE_MS, Math.max(MIN_SLICE_MS, ROUND_MS / (work.groups + 1))));
      }
    } finally {
      inRound = false;
    }
    if (work.size > 0) scheduleRound();
  }

  /** One turn of a connection: handle its input for about `sliceMs`; queue it again if more waits. */
  function turn(c: Conn, sliceMs: number): void {
    const start = performance.now();
    while (c.inbox.length > 0 && !c.closed && !closing) {
      const now = performance.now();
      const elapsed = (now - c.refilledAt) / 1000;
      c.tokens = Math.min(limits.opsBurst, c.tokens + elapsed * limits.opsPerSecond);
      c.byteTokens = Math.min(limits.bytesBurst, c.byteTokens + elapsed * limits.bytesPerSecond);
      c.refilledAt = now;
      const next = c.inbox[0];
      try {
        if ('data' in next) {
          if (c.tokens < 1 || c.byteTokens < 1) return waitForTokens(c);
          // The server-wide decoding budget, for large frames: they wait for others to be
          // handled first (one is always allowed, so a frame larger than the budget still goes
          // through). Small frames never wait for it, so a room that sends little is not held
          // up behind rooms that send much; each connection has at most one frame decoded.
          if (next.data.length > SMALL_FRAME_BYTES && decoding > 0 && decoding + next.data.length > limits.maxDecodingBytes) break;
          c.inbox.shift();
          c.queuedBytes -= Math.max(next.data.length, FRAME_OVERHEAD_BYTES);
          c.byteTokens -= next.data.length;
          onFrame(c, next.data, next.isBinary, next.data.length > SMALL_FRAME_BYTES);
        } else {
          const room = c.room!; // ops frames are queued only after hello
          const n = Math.min(next.ops.length - next.done, Math.max(1, Math.min(MAX_CHUNK_OPS, Math.floor((sliceMs - (now - start)) / room.costPerOp))));
          const ops = n === next.ops.length ? next.ops : next.ops.slice(next.done, next.done + n);
          next.done += n;
          if (next.done === next.ops.length) {
            c.inbox.shift();
            decoding -= next.raw;
          }
          enqueue(room, room.engine.message(c.id, { t: 'ops', ops }, now), now);
          room.costPerOp = Math.max(1e-4, 0.7 * room.costPerOp + (0.3 * (performance.now() - now)) / n);
        }
      } catch (e) {
        // Never let one bad frame or bug take the process or the room's other clients down.
        metrics.outputFailures.inc({ stage: 'frame' });
        log.error({ conn: c.id, room: c.roomName, err: e instanceof Error ? e.stack : String(e) }, 'error handling frame');
        cut(c, 'internal', 1011, `the server failed on this frame: ${errText(e)}`, true);
      }
      if (performance.now() - start >= sliceMs) break;
    }
    if (c.inbox.length > 0 && !c.closed && !closing) {
      work.add(c.roomName, c);
      scheduleRound();
    }
    flow(c);
  }

  /** Over its rate: no turn until the buckets refill; the socket stays paused meanwhile. */
  function waitForTokens(c: Conn): void {
    metrics.rateLimited.inc();
    const waitS = Math.max((1 - c.tokens) / limits.opsPerSecond, (1 - c.byteTokens) / limits.bytesPerSecond);
    c.waitTimer = setTimeout(
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
   * Stop reading a connection once its waiting input nears `maxQueuedBytes`: TCP holds the rest,
   * not our memory. Not as soon as anything waits: a connection read one frame per turn falls
   * behind a busy client's small frames (its ops and acks) whenever a round takes longer than
   * the client's gap between frames, as under a flood next door, and its delays grew without end.
   * The margin: a frame being read when the threshold is crossed (at most maxFrameBytes), and
   * what one socket read still delivers after the pause.
   */
  function flow(c: Conn): void {
    const hold = c.inbox.length > 0 && !c.closed && c.queuedBytes >= pauseAtBytes;
    if (hold === c.paused || c.ws.readyState !== c.ws.OPEN) return;
    c.paused = hold;
    if (hold) c.ws.pause();
    else c.ws.resume();
  }

  /** Refuse a WebSocket that was accepted only so the client can read why (browsers see no HTTP status). */
  function refuse(ws: WebSocket, req: IncomingMessage, code: ErrorCode, closeCode: number, message: string, fatal = true): void {
    metrics.refusedConnections.inc({ reason: code });
    log.info({ remote: req.socket.remoteAddress, reason: code }, `connection refused: ${message}`);
    const codec = new ServerCodec();
    const go = () =>
      guard('refuse', () => {
        if (ws.readyState !== ws.OPEN) return;
        ws.send(codec.encode({ t: 'error', code, message, fatal }), { binary: true });
        ws.close(closeCode, message.slice(0, 120));
      });
    ws.on('error', () => {});
    if (halfRtt > 0) setTimeout(go, halfRtt);
    else go();
  }

  /** Authenticate and authorize an upgrade request: the identity and access, or why not. */
  async function admit(
    req: IncomingMessage,
    roomName: string,
  ): Promise<{ identity?: Identity; access: 'read' | 'write' } | { code: ErrorCode; closeCode: number; message: string }> {
    let identity: Identity | undefined;
    if (authenticate) {
      try {
        const id = await authenticate(req);
        if (!id) return { code: 'unauthenticated', closeCode: 4401, message: 'unauthenticated: the server refused your credentials' };
        if (typeof id.user !== 'string' || id.user.length === 0) throw new Error('authenticate returned an identity without a user');
        identity = id;
      } catch (e) {
        if (e instanceof AuthError) return { code: 'unauthenticated', closeCode: 4401, message: `unauthenticated: ${e.message}` };
        log.error({ err: (e as Error).stack }, 'authenticate hook failed');
        return { code: 'unauthenticated', closeCode: 4401, message: 'unauthenticated: the server could not check your credentials' };
      }
    }
    let access: Access = 'write';
    if (opts.access) {
      try {
        access = await opts.access(identity, roomName);
      } catch (e) {
        log.error({ err: (e as Error).stack, room: roomName }, 'access hook failed');
        access = 'none';
      }
      if (access !== 'none' && access !== 'read' && access !== 'write') {
        log.error({ room: roomName, access }, 'access hook returned something other than none, read or write; treating it as none');
        access = 'none';
      }
    }
    if (access === 'none')
      return {
        code: 'forbidden',
        closeCode: 4403,
        message: `forbidden: ${identity ? `user ${identity.user}` : 'this client'} has no access to room ${roomName}`,
      };
    return { ...(identity ? { identity } : {}), access };
  }

  function onConnection(ws: WebSocket, req: IncomingMessage, admitted: { identity?: Identity; access: 'read' | 'write' }, roomName: string): void {
    ws.on('error', (e) => log.debug({ err: e.message }, 'socket error'));
    if (closing) {
      ws.close(1001, 'server shutting down');
      return;
    }
    const c: Conn = {
      id: `k${++nextConn}`,
      ws,
      codec: new ServerCodec(),
      roomName,
      alive: true,
      closed: false,
      remote: req.socket.remoteAddress ?? '?',
      ...(admitted.identity ? { identity: admitted.identity } : {}),
      access: admitted.access,
      tokens: limits.opsBurst,
      byteTokens: limits.bytesBurst,
      refilledAt: performance.now(),
      inbox: [],
      queuedBytes: 0,
      paused: false,
      delayed: 0,
    };
    conns.set(c.id, c);
    metrics.connections.set(conns.size);
    log.debug({ conn: c.id, room: roomName, remote: c.remote, user: admitted.identity?.user, access: c.access }, 'connection open');
    // A connection that never completes a first frame holds a socket and a parser: close it.
    c.helloTimer = setTimeout(
      () =>
        guard('hello-timeout', () => {
          c.helloTimer = undefined;
          if (!c.closed && !c.room)
            cut(c, 'hello-timeout', 4010, `no hello within ${limits.helloTimeoutMs} ms of connecting; a client says hello as soon as it connects`, false);
        }),
      limits.helloTimeoutMs,
    );
    c.helloTimer.unref?.();
    ws.on('pong', () => {
      c.alive = true;
    });
    ws.on('message', (data: Buffer, isBinary: boolean) =>
      guard('message', () => {
        c.alive = true;
        if (c.closed || closing) return;
        if (c.helloTimer) {
          clearTimeout(c.helloTimer);
          c.helloTimer = undefined;
        }
        const run = () =>
          guard('message', () => {
            if (c.closed || closing) return;
            const size = Math.max(data.length, FRAME_OVERHEAD_BYTES);
            if (c.queuedBytes + size > limits.maxQueuedBytes) {
              // Only a peer that ignores TCP backpressure gets here: the socket was paused long before.
              cut(
                c,
                'rate-limited',
                4008,
                `more than ${limits.maxQueuedBytes} bytes of frames queued while the server was not reading this connection; reconnect and send slower`,
                false,
              );
              return;
            }
            c.inbox.push({ data, isBinary });
            c.queuedBytes += size;
            ready(c);
          });
        if (halfRtt > 0) setTimeout(run, halfRtt);
        else run();
      }),
    );
    ws.on('close', () => {
      const run = () =>
        guard('close', () => {
          markClosed(c);
          conns.delete(c.id);
          metrics.connections.set(conns.size);
          const room = c.room;
          if (room && room.conns.delete(c.id)) {
            if (room.conns.size === 0) room.emptySince = Date.now();
            if (rooms.get(room.name) === room) {
              let out: RoomOutput;
              try {
                out = room.engine.close(c.id, performance.now());
              } catch (e) {
                roomFailed(room, 'close', e, 'the server failed while a member of your room left; reconnect to resume (nothing you made durable is lost)');
                return;
              }
              enqueue(room, out, performance.now());
            }
          }
          log.debug({ conn: c.id }, 'connection closed');
        });
      if (halfRtt > 0) setTimeout(run, halfRtt);
      else run();
    });
  }

  // ------------------------------------------------------------ timers

  // A dead member is dropped at most one tick after its ack timeout; at ackTimeout/4 (500 ms
  // for the default 2 s) Fig. 15 measured Visible stalls 280 ms past ack timeout + RTT. A tick
  // walks the loaded rooms' members only, so 10 per second costs little.
  const tickEvery = Math.min(100, Math.max(25, Math.floor(ackTimeoutMs / 20)));
  const ticker = setInterval(
    () =>
      guard('tick', () => {
        const now = performance.now();
        let members = 0,
          unstable = 0,
          buffered = 0;
        for (const room of [...rooms.values()]) {
          try {
            enqueue(room, room.engine.tick(now), now);
            members += room.engine.members().length;
            unstable += room.engine.suffixLength();
          } catch (e) {
            roomFailed(room, 'tick', e, 'the server failed while keeping time in your room; reconnect to resume (nothing you made durable is lost)');
            continue;
          }
          if (room.conns.size === 0 && Date.now() - room.emptySince > idleUnloadMs) {
            try {
              store.flushCheckpoint(room.name);
            } catch (e) {
              log.warn({ room: room.name, err: errText(e) }, 'checkpoint flush on unload failed; the log is intact');
            }
            rooms.delete(room.name);
            store.forget(room.name);
            log.debug({ room: room.name }, 'room unloaded (idle)');
          }
        }
        let queued = 0;
        for (const c of conns.values()) {
          buffered += c.ws.bufferedAmount + c.delayed;
          queued += c.queuedBytes;
        }
        metrics.inputQueued.set(queued);
        metrics.inputDecoding.set(decoding);
        metrics.inputWaiting.set(work.size);
        // Visible-delay bookkeeping of ops whose client never came back: drop after 5 minutes.
        const cutoff = now - 300_000;
        for (const room of rooms.values()) {
          for (const client of [...room.orderedAt.keys()]) dropVisibleDelays(room, client, (o) => o.t < cutoff);
        }
        metrics.rooms.set(rooms.size);
        metrics.members.set(members);
        metrics.unstable.set(unstable);
        metrics.sendBuffer.set(buffered);
      }),
    tickEvery,
  );
  ticker.unref();

  const heartbeat = setInterval(
    () =>
      guard('heartbeat', () => {
        for (const c of conns.values()) {
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
              c.ws.terminate();
              continue;
            }
            c.alive = false;
            if (c.ws.readyState === c.ws.OPEN) c.ws.ping();
            if (c.room) send(c, { t: 'ping' });
          } catch (e) {
            log.warn({ conn: c.id, err: errText(e) }, 'heartbeat failed for a connection; dropping it');
            markClosed(c);
            c.ws.terminate();
          }
        }
      }),
    heartbeatMs,
  );
  heartbeat.unref();

  // ------------------------------------------------------------ HTTP

  const http: HttpServer = createHttpServer((req, res) => {
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
      let ok = true;
      try {
        store.roomCount();
      } catch {
        ok = false;
      }
      res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok, rooms: rooms.size, connections: conns.size, protocol: PROTOCOL_VERSION }));
      return;
    }
    if (path === '/metrics') {
      res.writeHead(200, { 'content-type': metrics.registry.contentType });
      res.end(await metrics.registry.metrics());
      return;
    }
    if (opts.http && opts.http(req, res)) return;
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found: WebSocket clients connect to /?room=NAME; see also /healthz and /metrics\n');
  }
  const wss = new WebSocketServer({ noServer: true, maxPayload: maxFrameBytes, perMessageDeflate: false });
  http.on('upgrade', (req, socket, head) =>
    guard('upgrade', () => {
      socket.on('error', () => {}); // a peer that vanishes mid-handshake is not our error
      const accept = (fn: (ws: WebSocket) => void) =>
        guard('upgrade', () => {
          if (socket.destroyed) return;
          wss.handleUpgrade(req, socket, head, (ws) => guard('upgrade', () => fn(ws)));
        });
      if (closing) return accept((ws) => ws.close(1001, 'server shutting down'));
      let roomName = '';
      try {
        roomName = new URL(req.url ?? '/', 'http://x').searchParams.get('room') ?? '';
      } catch {
        /* an unparsable URL names no room */
      }
      if (!ROOM_NAME.test(roomName)) return accept((ws) => refuse(ws, req, 'bad-room', 4003, 'missing or bad ?room= (1-128 of A-Z a-z 0-9 . _ ~ -)'));
      // Counted with the connections still being admitted, so a burst of upgrades cannot overshoot.
      if (conns.size + admitting >= limits.maxConnections) {
        return accept((ws) =>
          refuse(ws, req, 'server-full', 4011, `this server has its maximum of ${limits.maxConnections} connections; retrying later may succeed`, false),
        );
      }
      admitting++;
      admit(req, roomName).then(
        (r) => {
          admitting--;
          accept((ws) => ('code' in r ? refuse(ws, req, r.code, r.closeCode, r.message) : onConnection(ws, req, r, roomName)));
        },
        (e) => {
          admitting--;
          log.error({ err: (e as Error).stack }, 'admitting a connection failed');
          accept((ws) => refuse(ws, req, 'internal', 1011, 'the server failed to admit this connection'));
        },
      );
    }),
  );

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(opts.port ?? 8787, opts.host ?? '127.0.0.1', () => resolve());
  });
  const addr = http.address() as AddressInfo;
  const url = `ws://${addr.address.includes(':') ? `[${addr.address}]` : addr.address}:${addr.port}`;
  log.info(
    {
      url,
      dataDir: opts.dataDir,
      machines: [...machines.keys()],
      ackTimeoutMs,
      simulateRttMs: opts.simulateRttMs ?? 0,
      auth: opts.jwt ? 'jwt' : authenticate ? 'custom' : 'none (anonymous clients; see docs/security.md)',
      limits,
    },
    'hercules server listening',
  );

  return {
    url,
    port: addr.port,
    metrics,
    log,
    loadedRooms: () => [...rooms.keys()],
    store,
    async close() {
      if (closing) return;
      closing = true;
      clearInterval(ticker);
      clearInterval(heartbeat);
      if (flushScheduled) flush();
      for (const c of conns.values()) c.ws.close(1001, 'server shutting down');
      await new Promise<void>((r) => wss.close(() => r()));
      await new Promise<void>((r) => http.close(() => r()));
      await store.close();
      log.info('hercules server closed');
    },
  };
}

function isOpsFrame(f: unknown): f is { t: 'ops'; ops: unknown[] } {
  return typeof f === 'object' && f !== null && (f as { t?: unknown }).t === 'ops' && Array.isArray((f as { ops?: unknown }).ops);
}
