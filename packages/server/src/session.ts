/**
 * A session: one client connection as the room service holds it (issue 36, item 1). Its inbox of
 * frames not handled yet and its token buckets (taken in turns by the InputScheduler), its hello
 * and credential-expiry timers, flow control (not reading a connection whose input waits), its
 * output (bounded: a slow consumer is cut off; presence for a slow reader coalesced), its room
 * membership, and the one way every cut goes: told why, counted by reason, logged.
 *
 * What happens to a frame once it is its turn (decoding, hello, the room) is the service's; the
 * session only queues it and hands it to the scheduler.
 */
import type { Logger } from 'pino';
import { HerculesError, MAX_PRESENCE_KEYS, ServerCodec, measureFrame, type ErrorCode, type PeerPresence, type ServerMessage } from '@hercules/core';
import type { Admitted } from './admission.ts';
import type { Identity } from './auth.ts';
import type { Clock } from './clock.ts';
import type { Connection } from './connection.ts';
import { FRAME_OVERHEAD_BYTES, type InputSource, type OpsInProgress, type RawFrame, type UserBucket } from './input-scheduler.ts';
import type { Metrics } from './metrics.ts';
import type { RoomHost, RoomMember } from './room-host.ts';
import type { Limits } from './room-service.ts';

/**
 * Presence for a connection whose unsent output is over this waits in a map of the latest value
 * per peer (the latest wins: a slow reader never needs older ones), sent when its output drains.
 */
export const PRESENCE_BACKLOG_BYTES = 64 << 10;

export function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** Buckets of the users with open connections (Limits.userOpsPerSecond), shared by each user's sessions. */
export class UserBuckets {
  private readonly buckets = new Map<string, UserBucket>();

  constructor(
    private readonly clock: Clock,
    private readonly burst: number,
  ) {}

  /** Users with a bucket (users with open connections). */
  get size(): number {
    return this.buckets.size;
  }

  acquire(user: string): UserBucket {
    let b = this.buckets.get(user);
    if (!b) this.buckets.set(user, (b = { tokens: this.burst, refilledAt: this.clock.now(), connections: 0 }));
    b.connections++;
    return b;
  }

  /** A closed connection lets go of its user's bucket; the last one drops it (memory: users with connections). */
  release(user: string, b: UserBucket): void {
    if (--b.connections === 0 && this.buckets.get(user) === b) this.buckets.delete(user);
  }
}

/** What a session needs of the service that holds it. */
export interface SessionContext {
  clock: Clock;
  /** Wall-clock time, ms since the epoch: credentials expire by it (Identity.expiresAt). Default `Date.now`. */
  wallClock?: () => number;
  limits: Limits;
  metrics: Metrics;
  log: Logger;
  userBuckets: UserBuckets;
  /** The scheduler that takes the session's input in turns. */
  input: { ready(s: Session): void; drop(s: Session): void };
  /** Run a timer's or a transport callback's work, containing what it throws. */
  guard(stage: string, fn: () => void): void;
  closing(): boolean;
  /** The connection is gone (closed by either side): forget it. */
  closed(s: Session): void;
}

export class Session implements InputSource {
  readonly codec = new ServerCodec();
  readonly remote: string;
  readonly roomName: string;
  readonly identity?: Identity;
  readonly access: 'read' | 'write';
  host?: RoomHost;
  member?: RoomMember;
  clientId?: string;
  /** Its room is being loaded: its input waits. */
  joining = false;
  /** A frame or a pong came since the last heartbeat. */
  alive = true;
  closed = false;
  tokens: number;
  byteTokens: number;
  refilledAt: number;
  userBucket?: UserBucket;
  readonly inbox: (RawFrame | OpsInProgress)[] = [];
  queuedBytes = 0;
  /** The connection is paused because input of it waits: its silence is ours. */
  paused = false;
  waitTimer?: () => void;
  /** Presence waiting for this connection's output to drain, the latest per peer (PRESENCE_BACKLOG_BYTES). */
  private presenceHeld?: Map<string, PeerPresence>;
  private helloTimer?: () => void;
  /** Closes the connection when its credential expires (Identity.expiresAt). */
  private expiryTimer?: () => void;

  /**
   * `acceptedAt`: when a server accepted it (ConnectionRequest.acceptedAt), its hello's `at`
   * whatever the client said. Call `open` to start reading it.
   */
  constructor(
    private readonly ctx: SessionContext,
    readonly id: string,
    readonly conn: Connection,
    admitted: Admitted,
    readonly acceptedAt: number,
  ) {
    this.remote = conn.remote;
    this.roomName = admitted.room;
    if (admitted.identity) this.identity = admitted.identity;
    this.access = admitted.access;
    this.tokens = ctx.limits.opsBurst;
    this.byteTokens = ctx.limits.bytesBurst;
    this.refilledAt = ctx.clock.now();
    if (admitted.identity) this.userBucket = ctx.userBuckets.acquire(admitted.identity.user);
  }

  /** Arm the hello and expiry timers and start reading. */
  open(): void {
    const { clock, limits, guard } = this.ctx;
    // A connection that never completes a first frame holds a socket and a parser: close it.
    this.helloTimer = clock.after(limits.helloTimeoutMs, () =>
      guard('hello-timeout', () => {
        this.helloTimer = undefined;
        if (!this.closed && !this.host && !this.joining)
          this.cut('hello-timeout', 4010, `no hello within ${limits.helloTimeoutMs} ms of connecting; a client says hello as soon as it connects`, false);
      }),
    );
    this.armExpiry();
    this.conn.listen({
      pong: () => {
        this.alive = true;
      },
      message: (data, isBinary) => guard('message', () => this.receive(data, isBinary)),
      close: () =>
        guard('close', () => {
          this.markClosed();
          const b = this.userBucket;
          if (b && this.identity) this.ctx.userBuckets.release(this.identity.user, b);
          this.userBucket = undefined;
          this.ctx.closed(this);
          this.host?.leave(this.id);
          this.ctx.log.debug({ conn: this.id }, 'connection closed');
        }),
    });
  }

  /** A frame from the peer: queued (its decoded size measured first) for its turn. */
  private receive(data: Uint8Array, isBinary: boolean): void {
    this.alive = true;
    if (this.closed || this.ctx.closing()) return;
    if (this.helloTimer) {
      this.helloTimer();
      this.helloTimer = undefined;
    }
    const size = Math.max(data.length, FRAME_OVERHEAD_BYTES);
    const max = this.ctx.limits.maxQueuedBytes;
    if (this.queuedBytes + size > max) {
      // Only a peer that ignores backpressure gets here: the connection was paused long before.
      const why = `more than ${max} bytes of frames queued while the server was not reading this connection; reconnect and send slower`;
      this.cut('rate-limited', 4008, why, false);
      return;
    }
    // Its decoded size, from its bytes: a frame over the bound is refused before it is decoded.
    let heap = 0;
    if (isBinary) {
      try {
        heap = measureFrame(data).heap;
      } catch (e) {
        this.refuseFrame(e);
        return;
      }
    }
    this.inbox.push({ data, isBinary, at: this.ctx.clock.now(), heap });
    this.queuedBytes += size;
    this.ctx.input.ready(this);
  }

  /**
   * A frame measureFrame refused before decoding it: over the decoded-size bound, `too-large`
   * with 1009 (as a frame over maxFrameBytes), or not one MessagePack value, `malformed-frame`
   * with 1007 (as a frame that fails to decode). Fatal: the client library never sends either.
   */
  private refuseFrame(e: unknown): void {
    const tooLarge = e instanceof HerculesError && e.code === 'too-large';
    if (!tooLarge) this.ctx.metrics.malformed.inc();
    this.cut(tooLarge ? 'too-large' : 'malformed-frame', tooLarge ? 1009 : 1007, errText(e), true);
  }

  /** Take `n` from the connection's op bucket and its user's (they may go negative: the next frame waits). */
  chargeOps(n: number): void {
    this.tokens -= n;
    if (this.userBucket) this.userBucket.tokens -= n;
  }

  /**
   * Stop reading a connection once its waiting input nears `maxQueuedBytes`: the transport holds
   * the rest, not our memory. Not as soon as anything waits: a connection read one frame per turn
   * falls behind a busy client's small frames (its ops and acks) whenever a round takes longer
   * than the client's gap between frames, as under a flood next door, and its delays grew without
   * end. The margin (pauseAtBytes): a frame being read when the threshold is crossed (at most
   * maxFrameBytes), and what one socket read still delivers after the pause.
   */
  flow(pauseAtBytes: number): void {
    const hold = this.inbox.length > 0 && !this.closed && this.queuedBytes >= pauseAtBytes;
    if (hold === this.paused || !this.conn.isOpen) return;
    this.paused = hold;
    if (hold) this.conn.pause();
    else this.conn.resume();
  }

  /** Close `c` when its credential expires; a client with a token function returns with a fresh one. */
  private armExpiry(): void {
    const at = this.identity?.expiresAt;
    if (at === undefined || !Number.isFinite(at)) return;
    const wait = at - (this.ctx.wallClock ?? Date.now)(); // expiry is wall-clock time, like the token's `exp`
    if (wait <= 0) {
      this.cut('unauthenticated', 4401, `the credential expired at ${new Date(at).toISOString()}; reconnect with a fresh token`, true);
      return;
    }
    // Timers take at most 2^31 - 1 ms (24.8 days): a longer wait is armed in steps.
    this.expiryTimer = this.ctx.clock.after(Math.min(wait, 2 ** 31 - 1), () =>
      this.ctx.guard('credential-expiry', () => {
        this.expiryTimer = undefined;
        if (!this.closed) this.armExpiry();
      }),
    );
  }

  // ------------------------------------------------------------ output

  send(msg: ServerMessage): void {
    if (this.closed) return;
    if (msg.t === 'presence' && (this.presenceHeld || this.conn.bufferedAmount > PRESENCE_BACKLOG_BYTES)) return this.holdPresence(msg.peers);
    const { metrics, limits } = this.ctx;
    let buf: Uint8Array;
    try {
      buf = this.codec.encode(msg);
    } catch (e) {
      // This message cannot be encoded (e.g. nesting deeper than the encoder's stack). Skipping
      // it would leave a gap in this connection's log, and the codec's intern table may now be
      // ahead of the client's: close this connection only. It resyncs from the log.
      metrics.outputFailures.inc({ stage: 'encode' });
      this.ctx.log.error(
        { conn: this.id, room: this.roomName, msg: msg.t, err: errText(e) },
        'cannot encode a message for this connection; closing it (the rest of the batch and the room go on)',
      );
      const why = `the server could not encode a ${msg.t} message for this connection (${errText(e).slice(0, 120)}); reconnect to resume`;
      this.cut('encode-failed', 1011, why, false);
      return;
    }
    const backlog = this.conn.bufferedAmount;
    // The bound is on backlog: one frame bigger than it (a large checkpoint) still goes out.
    if (backlog > 0 && backlog + buf.length > limits.maxSendBufferBytes) {
      // It cannot keep up; holding more for it would let one phone grow our memory without
      // bound. Cut it off: it reconnects and catches up from the log or a checkpoint.
      this.slowConsumer(backlog, `unsent output over ${limits.maxSendBufferBytes} bytes`);
      return;
    }
    this.conn.send(buf);
    metrics.framesOut.inc();
    metrics.frameSent(msg.t);
    metrics.bytesOut.inc(buf.length);
  }

  /**
   * Presence for a connection that is behind on its output waits here, the latest value per peer
   * (a slow reader needs no older one), so it holds at most one value per presence of the room (one per client, or per key: protocol 8);
   * a reader so slow that more clients came and went than the room holds is a slow consumer.
   */
  private holdPresence(peers: readonly PeerPresence[]): void {
    const held = (this.presenceHeld ??= new Map());
    for (const p of peers) {
      const id = p.key === undefined ? p.client : `${p.client}\n${p.key}`; // one per presence (protocol 8: per key)
      held.delete(id); // re-inserted last: the held peers go out in the order they changed
      held.set(id, p);
    }
    if (held.size > 2 * this.ctx.limits.maxClientsPerRoom * (1 + MAX_PRESENCE_KEYS))
      this.slowConsumer(this.conn.bufferedAmount, `presence of ${held.size} clients held for it`);
  }

  /** Its output drained: the presence held for it goes out in one frame. */
  releaseHeldPresence(): void {
    const held = this.presenceHeld;
    if (!held || this.closed || this.conn.bufferedAmount > PRESENCE_BACKLOG_BYTES) return;
    this.presenceHeld = undefined;
    this.send({ t: 'presence', peers: [...held.values()] });
  }

  private slowConsumer(backlog: number, why: string): void {
    if (this.closed) return;
    const { metrics, log } = this.ctx;
    metrics.slowConsumers.inc();
    metrics.refusedConnections.inc({ reason: 'slow-consumer' });
    log.warn(
      { conn: this.id, room: this.roomName, remote: this.remote, buffered: backlog, reason: 'slow-consumer' },
      `slow consumer (${why}); disconnecting it`,
    );
    this.markClosed();
    this.conn.terminate();
  }

  // ------------------------------------------------------------ closing

  /**
   * Close the connection for a reason: tell it why (unless it cannot be told), count it by reason
   * and log it. Every connection the service cuts goes through here.
   */
  cut(reason: ErrorCode, closeCode: number, message: string, fatal: boolean): void {
    if (this.closed) return;
    this.ctx.metrics.refusedConnections.inc({ reason });
    this.ctx.log.info(
      { conn: this.id, room: this.roomName, remote: this.remote, user: this.identity?.user, client: this.clientId, reason },
      `connection closed: ${message}`,
    );
    this.send({ t: 'error', code: reason, message, fatal });
    this.close(closeCode, reason.replaceAll('-', ' '));
  }

  close(code: number, reason: string): void {
    if (this.closed) return;
    this.markClosed();
    this.conn.close(code, reason);
  }

  /** Drop at once (a dead peer, or a heartbeat that failed). */
  terminate(): void {
    this.markClosed();
    this.conn.terminate();
  }

  /** No more input from this connection is handled: drop what it queued, now. */
  markClosed(): void {
    this.closed = true;
    // Each timer is its cancel function (Clock.after).
    this.helloTimer?.();
    this.waitTimer?.();
    this.expiryTimer?.();
    this.helloTimer = this.waitTimer = this.expiryTimer = undefined;
    this.presenceHeld = undefined;
    this.ctx.input.drop(this);
  }

  /**
   * A heartbeat: a connection silent since the last one (no frame, no pong) is dropped; a paused
   * one is not (its silence is ours: its input waits for a turn or for tokens, pongs too).
   */
  heartbeat(heartbeatMs: number): void {
    if (this.paused) {
      this.alive = true;
      return;
    }
    if (!this.alive) {
      if (!this.closed) {
        this.ctx.metrics.refusedConnections.inc({ reason: 'heartbeat-timeout' });
        this.ctx.log.info(
          { conn: this.id, room: this.roomName, remote: this.remote, reason: 'heartbeat-timeout' },
          `connection closed: no frame or pong for ${heartbeatMs} ms`,
        );
      }
      this.terminate();
      return;
    }
    this.alive = false;
    this.conn.ping?.();
    if (this.host) this.send({ t: 'ping', every: heartbeatMs });
  }

  /**
   * Up to when this connection's input has been handled: the arrival of its oldest raw frame
   * still waiting (behind a busy server's other rooms, or for its tokens), else now. A frame
   * handled in part has had its ack handled with its first run (VIS-ACK-WITH-OPS). Writers of a
   * 100-room bench were deregistered at 2,0xx ms with their acks in here (issue 43).
   */
  heardUntil(): number {
    for (const f of this.inbox) if ('at' in f) return f.at;
    return this.ctx.clock.now();
  }

  /** The session as its room sees it (made once it joins). */
  asMember(): RoomMember {
    return {
      id: this.id,
      send: (msg) => this.send(msg),
      heardUntil: () => this.heardUntil(),
      close: (code, reason, refused) => {
        if (this.closed) return;
        if (refused !== undefined) {
          this.ctx.metrics.refusedConnections.inc({ reason: refused });
          this.ctx.log.info(
            { conn: this.id, room: this.roomName, remote: this.remote, user: this.identity?.user, client: this.clientId, reason: refused },
            refused === 'storage-failed' ? `connection closed: ${reason}` : `connection closed by the room: ${refused}`,
          );
        }
        this.close(code, refused === 'storage-failed' ? 'storage failed' : reason);
      },
    };
  }
}
