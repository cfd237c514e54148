/**
 * The input scheduler: when each connection's waiting input is handled, and how much of it at
 * once (issue 36, item 1). Input is handled in turns, round robin over rooms and then over each
 * room's connections (FairQueue), a round's ROUND_MS shared among the rooms waiting: a room
 * flooded with ops, however cheap or costly its ops are, delays another room by at most about
 * one round. A turn refills the connection's token buckets and stops when they run dry, decodes a
 * large frame only within the server-wide decoding budget, and hands a decoded ops frame to the
 * room in runs (chunks) sized to what is left of the turn, so one turn's ops share one group
 * commit and a 100,000-op frame does not hold the loop.
 *
 * It knows a connection only as an `InputSource` (the session) and the rest of the service only
 * through `SchedulerHooks`: decoding a frame, handing ops to a room and closing a connection on a
 * failure stay with the session and the service.
 */
import { FairQueue } from './fair-queue.ts';
import type { Clock } from './clock.ts';
import type { Limits } from './room-service.ts';

/** Frames whose decoded heap (measureFrame's estimate) is up to this are decoded without waiting for the server's decoding budget. */
export const SMALL_FRAME_HEAP = 256 << 10;
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
/** Bookkeeping a queued frame costs even when it is empty, counted against maxQueuedBytes. */
export const FRAME_OVERHEAD_BYTES = 256;
/**
 * Scheduling: a round of turns runs for about ROUND_MS, then the event loop reads sockets and
 * commits. A turn runs one connection's ops for ROUND_MS shared among the rooms waiting (at most
 * SLICE_MS, at least MIN_SLICE_MS and one op), so under load a room waits about one round for
 * its turn however many ops other rooms queue (measured: bench/src/flood).
 */
export const SLICE_MS = 2;
const MIN_SLICE_MS = 0.25;
export const ROUND_MS = 8;
/** Ops given to the engine at once, at most: a run this long is cheap to order, store and send. */
export const MAX_CHUNK_OPS = 1000;
/** The cost of an op in a room not measured yet, ms. */
const DEFAULT_COST_PER_OP = 0.01;

/** A raw frame waiting (`heap`: measureFrame's estimate of its decoded size). */
export interface RawFrame {
  data: Uint8Array;
  isBinary: boolean;
  /** When it arrived (clock.now()). */
  at: number;
  heap: number;
}

/** An ops frame decoded and handled in part: `done` of its ops so far; `held`, its heap, counted in the decoding budget until it is done. */
export interface OpsInProgress {
  ops: unknown[];
  done: number;
  held: number;
  ack?: unknown;
}

/** Ops tokens of one authenticated user, shared by its open connections. */
export interface UserBucket {
  tokens: number;
  refilledAt: number;
  connections: number;
}

/** One connection's input as the scheduler sees it (the session). */
export interface InputSource {
  /** Its room: the group it takes turns in. */
  readonly roomName: string;
  /** Frames not handled yet, oldest first; at the front possibly an ops frame handled in part. */
  readonly inbox: (RawFrame | OpsInProgress)[];
  /** Bytes of the raw frames in `inbox` (each at least FRAME_OVERHEAD_BYTES). */
  queuedBytes: number;
  readonly closed: boolean;
  /** Its room is being loaded: its input waits. */
  readonly joining: boolean;
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
  /** Set while it waits for its buckets to refill. */
  waitTimer?: () => void;
}

/** What the scheduler asks of the service around it. */
export interface SchedulerHooks<S extends InputSource> {
  /** Decode and handle a raw frame (`held`: its heap counted in the decoding budget, 0 for a small frame). */
  frame(s: S, data: Uint8Array, isBinary: boolean, held: number, queuedMs: number): void;
  /** Hand a run of ops (and, with the first run, the frame's ack) to the source's room. */
  ops(s: S, ops: unknown[], ack: unknown): void;
  /** The ms an op of the source's room costs lately, to size a run (undefined: not measured). */
  costPerOp(s: S): number | undefined;
  /** A run of `n` ops took `ms`: the room's cost per op is updated from it. */
  measured(s: S, n: number, ms: number): void;
  /** Handling a frame threw: close the source (never the room or the process). */
  failed(s: S, e: unknown): void;
  /** Pause or resume reading the source, after its input changed. */
  flow(s: S): void;
  /** The source ran out of tokens (counted). */
  rateLimited(s: S): void;
  /** Run a timer's work, containing what it throws. */
  guard(stage: string, fn: () => void): void;
  /** The service is closing: no more turns. */
  closing(): boolean;
}

export type SchedulerLimits = Pick<
  Limits,
  'opsPerSecond' | 'opsBurst' | 'bytesPerSecond' | 'bytesBurst' | 'userOpsPerSecond' | 'userOpsBurst' | 'maxDecodingBytes'
>;

export class InputScheduler<S extends InputSource> {
  private readonly work = new FairQueue<string, S>();
  private roundScheduled = false;
  private inRound = false;
  private decodingBytes = 0;

  constructor(
    private readonly clock: Clock,
    private readonly limits: SchedulerLimits,
    private readonly hooks: SchedulerHooks<S>,
  ) {}

  /** Heap of the frames decoded and not yet handled to their end, over all connections. */
  get decoding(): number {
    return this.decodingBytes;
  }

  /** Connections waiting for a turn. */
  get waiting(): number {
    return this.work.size;
  }

  /** Input arrived, or a wait ended: give the source a turn, now if nobody else waits. */
  ready(s: S): void {
    if (s.closed || this.hooks.closing() || s.waitTimer || s.joining || s.inbox.length === 0) return this.hooks.flow(s);
    if (this.inRound || this.work.size > 0) {
      this.work.add(s.roomName, s);
      this.scheduleRound();
      return this.hooks.flow(s);
    }
    this.inRound = true;
    try {
      this.turn(s, SLICE_MS);
    } finally {
      this.inRound = false;
    }
  }

  /** A decoded ops frame, handled in runs over the next turns (it goes first in the source's inbox). */
  pushOps(s: S, ops: unknown[], held: number, ack: unknown): void {
    this.decodingBytes += held;
    s.inbox.unshift({ ops, done: 0, held, ack });
  }

  /** The source closed: its waiting input is dropped and it takes no more turns. */
  drop(s: S): void {
    for (const f of s.inbox) if ('held' in f) this.decodingBytes -= f.held;
    s.inbox.length = 0;
    s.queuedBytes = 0;
    this.work.delete(s.roomName, s);
  }

  private scheduleRound(): void {
    if (this.roundScheduled) return;
    this.roundScheduled = true;
    this.clock.after(0, () => this.hooks.guard('round', () => this.round()));
  }

  /** Turns until the queue is empty or ROUND_MS is spent; then sockets are read and outputs committed. */
  round(): void {
    this.roundScheduled = false;
    const end = this.clock.now() + ROUND_MS;
    this.inRound = true;
    try {
      for (let next = this.work.take(); next; next = this.clock.now() < end ? this.work.take() : undefined) {
        this.turn(next.member, Math.min(SLICE_MS, Math.max(MIN_SLICE_MS, ROUND_MS / (this.work.groups + 1))));
      }
    } finally {
      this.inRound = false;
    }
    if (this.work.size > 0) this.scheduleRound();
  }

  /** One turn of a source: handle its input for about `sliceMs`; queue it again if more waits. */
  private turn(s: S, sliceMs: number): void {
    const start = this.clock.now();
    while (s.inbox.length > 0 && !s.closed && !this.hooks.closing() && !s.joining) {
      const now = this.clock.now();
      this.refill(s, now);
      try {
        const next = s.inbox[0];
        if ('data' in next) {
          if (!this.hasTokens(s)) return this.waitForTokens(s);
          if (!this.decodeRaw(s, next, now)) break;
        } else {
          this.runOps(s, next, sliceMs - (now - start), now);
        }
      } catch (e) {
        // Never let one bad frame or bug take the process or the room's other clients down.
        this.hooks.failed(s, e);
      }
      if (this.clock.now() - start >= sliceMs) break;
    }
    if (s.inbox.length > 0 && !s.closed && !this.hooks.closing() && !s.joining) {
      this.work.add(s.roomName, s);
      this.scheduleRound();
    }
    this.hooks.flow(s);
  }

  private refill(s: S, now: number): void {
    const l = this.limits;
    const elapsed = (now - s.refilledAt) / 1000;
    s.tokens = Math.min(l.opsBurst, s.tokens + elapsed * l.opsPerSecond);
    s.byteTokens = Math.min(l.bytesBurst, s.byteTokens + elapsed * l.bytesPerSecond);
    s.refilledAt = now;
    const u = s.userBucket;
    if (u) {
      u.tokens = Math.min(l.userOpsBurst, u.tokens + ((now - u.refilledAt) / 1000) * l.userOpsPerSecond);
      u.refilledAt = now;
    }
  }

  private hasTokens(s: S): boolean {
    return s.tokens >= 1 && s.byteTokens >= 1 && (!s.userBucket || s.userBucket.tokens >= 1);
  }

  /**
   * Decode and handle the raw frame at the front, unless it must wait for the decoding budget
   * (false). The budget is for large frames (by the heap they decode to): they wait for others to
   * be handled first (one is always allowed, so a frame larger than the budget still goes
   * through). Small frames never wait for it, so a room that sends little is not held up behind
   * rooms that send much; each connection has at most one frame decoded.
   */
  private decodeRaw(s: S, next: RawFrame, now: number): boolean {
    const large = next.heap > SMALL_FRAME_HEAP;
    if (large && this.decodingBytes > 0 && this.decodingBytes + next.heap > this.limits.maxDecodingBytes) return false;
    s.inbox.shift();
    s.queuedBytes -= Math.max(next.data.length, FRAME_OVERHEAD_BYTES);
    s.byteTokens -= Math.max(next.data.length, next.heap / HEAP_PER_CHARGED_BYTE);
    this.hooks.frame(s, next.data, next.isBinary, large ? next.heap : 0, now - next.at);
    return true;
  }

  /** Hand the room the next run of a decoded ops frame: as many ops as fit in `leftMs` at the room's cost per op (at least one, at most MAX_CHUNK_OPS). */
  private runOps(s: S, next: OpsInProgress, leftMs: number, now: number): void {
    const cost = this.hooks.costPerOp(s) ?? DEFAULT_COST_PER_OP;
    const n = Math.min(next.ops.length - next.done, Math.max(1, Math.min(MAX_CHUNK_OPS, Math.floor(leftMs / cost))));
    const ops = n === next.ops.length ? next.ops : next.ops.slice(next.done, next.done + n);
    const ack = next.done === 0 ? next.ack : undefined;
    next.done += n;
    if (next.done === next.ops.length) {
      s.inbox.shift();
      this.decodingBytes -= next.held;
    }
    this.hooks.ops(s, ops, ack);
    this.hooks.measured(s, n, this.clock.now() - now);
  }

  /** Over its rate: no turn until the buckets refill; the connection stays paused meanwhile. */
  private waitForTokens(s: S): void {
    this.hooks.rateLimited(s);
    const l = this.limits;
    const waitS = Math.max(
      (1 - s.tokens) / l.opsPerSecond,
      (1 - s.byteTokens) / l.bytesPerSecond,
      s.userBucket ? (1 - s.userBucket.tokens) / l.userOpsPerSecond : 0,
    );
    s.waitTimer = this.clock.after(Math.max(1, Math.ceil(waitS * 1000)), () =>
      this.hooks.guard('rate', () => {
        s.waitTimer = undefined;
        this.ready(s);
      }),
    );
    this.hooks.flow(s);
  }
}
