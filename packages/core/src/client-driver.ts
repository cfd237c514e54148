/**
 * The client driver: the policy between a ClientRoom and the world, with none of the world in
 * it. It persists the room's ops in order and reports them durable only once the store confirmed
 * them; with a store that keeps seq reservations it reserves seqs in blocks ahead of the ops, so
 * the room may send an op while it is being persisted, and otherwise the room sends only durable
 * ops (DUR-BEFORE-SEND). It retries a failed write with backoff while later ops wait behind it,
 * saves the base on a schedule (DUR-SURVIVES-RESTART), runs the room's rebase-batching
 * deadlines, and joins the room to whatever connection the transport has (after each welcome
 * the engine resends what the server lacks: DUR-DELIVERED). The store, the clock and the
 * connection are given to it, so `connect()` and the simulator run this same code.
 */
import type { LeanClientRoom, RoomDriver } from './client-room.ts';
import type { Clock } from './clock.ts';
import { HerculesError, errorMessage, type ErrorCode } from './errors.ts';
import type { Machine } from './machine.ts';
import type { ClientMessage, OpRecord, ServerMessage } from './protocol.ts';
import type { BaseSnapshot } from './view-engine.ts';

/**
 * The client's store, as the driver uses it. Callbacks rather than promises, so a simulated
 * store completes inside its own event. `done(error)` means nothing of that call was written.
 */
export interface DriverStore {
  /** Persist ops, in order; `done()` once they would survive a crash. */
  append(ops: readonly OpRecord[], done: (error?: unknown) => void): void;
  /** In one atomic write: keep `base`, delete our ops with seq <= base.ownSeq (ClientStorage.saveBase). */
  saveBase(base: BaseSnapshot, done: (error?: unknown) => void): void;
  /**
   * Persist a reservation of this client's seqs up to `throughSeq` (replacing the last one),
   * handed back on load as ClientRestore.reservedSeq (ClientStorage.reserve). Without it ops
   * are sent only once durable.
   */
  reserve?(throughSeq: number, done: (error?: unknown) => void): void;
}

/** One open connection to the server, as far as the driver needs it. */
export interface DriverLink {
  send(msg: ClientMessage): void;
}

export interface ClientDriverOptions {
  store: DriverStore;
  clock: Clock;
  /**
   * The wall clock, ms since the epoch (default Date.now): each hello says when its connection
   * was opened (HelloMessage.at). A room behind the room service orders connections by when a
   * server accepted them instead; a bare RoomEngine (the simulator's) reads this.
   */
  wallClock?: () => number;
  /** Save a base at most this often after the Stable view moves (0: at the next turn). Default 2000 ms. */
  baseEveryMs?: number;
  /** The position of the base the store already holds (none: 0). */
  basePos?: number;
  /**
   * With a store that reserves seqs: how many seqs one reservation covers (default 1000). The
   * next is written once half of the last is used, so sending does not wait for it; a crash
   * skips what is left of it (a declared gap, OpRecord.after).
   */
  seqBlock?: number;
  /**
   * Presence goes out at most this often (the latest value wins; default 16 ms: a cursor at
   * 60 Hz input); the first change after a quiet spell goes at once.
   */
  presenceEveryMs?: number;
  /**
   * Backoff between attempts of a failed write or seq reservation: first delay and cap.
   * Defaults 50 and 5000 ms.
   */
  retry?: { minMs?: number; maxMs?: number };
  /**
   * The room's warnings, and the store's failures: once per run of failures (the first, then
   * none until a write succeeds; each failed write is retried meanwhile).
   */
  report?(error: Error): void;
  /** The connection is out of step with the server: drop it and connect again. */
  resync?(reason: string): void;
  /** A fatal error from the server; return false to keep going (see RoomDriver.fatal). */
  // biome-ignore lint/suspicious/noConfusingVoidType: as RoomDriver.fatal, returning nothing means "stop"
  fatal?(code: ErrorCode, message: string): boolean | void;
}

/**
 * Frames that only move the log and its frontiers: those of one turn are taken as one step
 * (received). A welcome, an error (either may stop the room on the spot) and receipts go alone.
 */
const BATCHED: ReadonlySet<ServerMessage['t']> = new Set(['log', 'committed', 'visible', 'stable', 'members', 'deregister', 'presence']);

interface FlushWaiter {
  seq: number;
  resolve: () => void;
}

export class ClientDriver<M extends Machine<any, any>> implements RoomDriver {
  readonly #store: DriverStore;
  readonly #clock: Clock;
  readonly #opts: ClientDriverOptions;
  readonly #baseEveryMs: number;
  readonly #retryMinMs: number;
  readonly #retryMaxMs: number;
  #link: DriverLink | undefined;

  // --- persistence: one write at a time; what arrives meanwhile waits for the next
  private queue: OpRecord[] = [];
  #writing: readonly OpRecord[] | undefined;
  #writeScheduled = false;
  #failures = 0;
  #cancelRetry: (() => void) | undefined;
  /** Highest seq the store confirmed in this process, and the highest handed to the driver. */
  #confirmedSeq = 0;
  #queuedSeq = 0;
  #flushWaiters: FlushWaiter[] = [];

  // --- seq reservations (DUR-BEFORE-SEND), one write at a time
  readonly #seqBlock: number;
  /** The highest reservation asked for, and the highest the store confirmed. */
  #reserveAsked: number;
  #reserveConfirmed: number;
  #reserving = false;
  #reserveFailures = 0;
  #cancelReserveRetry: (() => void) | undefined;
  #sendScheduled = false;

  /** A store call failed and none has succeeded since: its failures are not reported again. */
  #storeFailing = false;

  // --- presence pacing
  readonly #presenceEveryMs: number;
  #presenceSentAt = -Infinity;
  #cancelPresence: (() => void) | undefined;

  // --- base
  #basePos: number;
  #cancelBase: (() => void) | undefined;
  #baseWriting = false;

  // --- frames waiting for the end of the turn (received)
  #incoming: ServerMessage[] = [];

  // --- batching deadline
  #batchAt = Infinity;
  #cancelBatch: (() => void) | undefined;

  /** close() began: no new retries, no new timers. */
  #stopping = false;
  #stopped = false;

  constructor(
    readonly room: LeanClientRoom<M>,
    opts: ClientDriverOptions,
  ) {
    this.#opts = opts;
    this.#store = opts.store;
    this.#clock = opts.clock;
    this.#baseEveryMs = opts.baseEveryMs ?? 2000;
    this.#retryMinMs = opts.retry?.minMs ?? 50;
    this.#retryMaxMs = opts.retry?.maxMs ?? 5000;
    this.#basePos = opts.basePos ?? 0;
    this.#presenceEveryMs = opts.presenceEveryMs ?? 16;
    if (!(this.#presenceEveryMs >= 0 && Number.isFinite(this.#presenceEveryMs)))
      throw new HerculesError('bad-argument', `presenceEveryMs must be a non-negative number of milliseconds, got ${String(opts.presenceEveryMs)}`);
    this.#seqBlock = opts.seqBlock ?? 1000;
    if (!(Number.isSafeInteger(this.#seqBlock) && this.#seqBlock >= 2))
      throw new HerculesError('bad-argument', `seqBlock must be an integer of at least 2, got ${String(opts.seqBlock)}`);
    this.#reserveAsked = this.#reserveConfirmed = room.engine.persistedShape().lastSeq;
    room.attach(this);
    room.subscribe('stable', () => this.#scheduleBase());
    // The first block at once, so the first op need not wait for its own write to go out.
    this.#reserve();
  }

  // ================================================================ the connection

  /** A connection opened: the room says hello on it. */
  opened(link: DriverLink): void {
    if (this.#stopped) return;
    this.#takeIncoming(); // (a connection that was never said closed)
    this.#link = link;
    this.room.connected(Math.floor((this.#opts.wallClock ?? Date.now)()));
    this.#armBatch();
  }

  /**
   * A frame from the server, in the order the connection delivered it. Log and progress frames
   * wait for the end of the turn (the clock's defer: a microtask in `connect()`, no timer), and
   * those of one turn (a socket read that brought several) go to the room as one step: one
   * rebase of our pending ops per batch of frames, not per frame. Any other frame goes at once,
   * after those waiting.
   */
  received(msg: ServerMessage): void {
    if (this.#stopped || !this.#link) return;
    if (!BATCHED.has(msg.t)) {
      this.#takeIncoming();
      this.#take([msg]);
      return;
    }
    this.#incoming.push(msg);
    if (this.#incoming.length === 1) this.#clock.defer(() => this.#takeIncoming());
  }

  /** Hand the room the frames waiting for the turn's end. */
  #takeIncoming(): void {
    if (this.#incoming.length === 0) return;
    const msgs = this.#incoming;
    this.#incoming = [];
    this.#take(msgs);
  }

  #take(msgs: readonly ServerMessage[]): void {
    if (this.#stopped || !this.#link) return;
    this.room.receiveAll(msgs);
    this.#baseIfOwnSettled();
    this.#armBatch();
  }

  /** The connection is gone; the room works offline until the next one. */
  closed(): void {
    if (!this.#link) return;
    this.#takeIncoming(); // what it brought before it closed
    this.#link = undefined;
    this.room.disconnected();
    this.#armBatch();
  }

  // ================================================================ lifecycle

  /** Resolves once every op handed to the driver so far is durable (or the driver stopped). */
  flushed(): Promise<void> {
    const seq = this.#queuedSeq;
    if (this.#confirmedSeq >= seq || this.#stopped) return Promise.resolve();
    return new Promise((resolve) => this.#flushWaiters.push({ seq, resolve }));
  }

  /**
   * Finish the writes under way (a write that fails now is not retried: its ops stay Submitted
   * and, not being in the store, are not part of this client's history), then stop every timer.
   */
  async close(): Promise<void> {
    if (this.#stopped) return;
    this.#stopping = true;
    this.#cancelRetry?.();
    this.#cancelReserveRetry?.();
    this.#cancelRetry = this.#cancelReserveRetry = undefined;
    if (this.#writing === undefined) this.write();
    await this.flushed();
    // Every op we sent is persisted: give back the rest of the block, so the next start
    // continues the seqs without a gap (only a crash leaves one).
    const last = this.room.engine.persistedShape().lastSeq;
    const reserve = this.#store.reserve;
    if (reserve !== undefined && this.#reserveConfirmed > last && !this.#reserving && this.queue.length === 0 && this.#writing === undefined) {
      await new Promise<void>((resolve) => reserve.call(this.#store, last, () => resolve()));
    }
    this.#stopped = true;
    this.#cancelBase?.();
    this.#cancelBatch?.();
    this.#cancelPresence?.();
    this.#cancelBase = this.#cancelBatch = this.#cancelPresence = undefined;
    this.#settleFlushWaiters(true);
  }

  // ================================================================ RoomDriver (called by the room)

  send(msg: ClientMessage): void {
    this.#link?.send(msg);
  }

  persist(ops: OpRecord[]): void {
    for (const op of ops) this.queue.push(op);
    this.#queuedSeq = ops[ops.length - 1].seq;
    this.#reserve();
    if (!this.#sendScheduled) {
      // The ops of one turn go out in one frame, before their write starts (DUR-BEFORE-SEND).
      this.#sendScheduled = true;
      this.#clock.defer(() => {
        this.#sendScheduled = false;
        if (!this.#stopped) this.room.flushSends();
      });
    }
    if (this.#writing === undefined && !this.#writeScheduled && this.#cancelRetry === undefined) {
      this.#writeScheduled = true;
      this.#clock.defer(() => {
        this.#writeScheduled = false;
        if (this.#writing === undefined && this.#cancelRetry === undefined) this.write();
      });
    }
  }

  presenceDue(): void {
    if (this.#cancelPresence || this.#stopping) return;
    const wait = Math.max(0, this.#presenceSentAt + this.#presenceEveryMs - this.#clock.now());
    const go = () => {
      this.#cancelPresence = undefined;
      this.#presenceSentAt = this.#clock.now();
      this.room.flushPresence();
    };
    if (wait > 0) {
      this.#cancelPresence = this.#clock.after(wait, go);
      return;
    }
    // Once the current turn ends (its changes go as one message), not a timer's millisecond later.
    let live = true;
    this.#cancelPresence = () => {
      live = false;
    };
    this.#clock.defer(() => {
      if (live) go();
    });
  }

  warn(message: string): void {
    this.#opts.report?.(new Error(message));
  }

  resync(reason: string): void {
    this.#opts.resync?.(reason);
  }

  // biome-ignore lint/suspicious/noConfusingVoidType: as RoomDriver.fatal
  fatal(code: ErrorCode, message: string): boolean | void {
    return this.#opts.fatal?.(code, message);
  }

  // ================================================================ persistence

  /** Write everything queued, in one call; the room hears `durable` only when the store confirms. */
  private write(): void {
    if (this.#stopped || this.queue.length === 0) return;
    const ops = this.queue;
    this.queue = [];
    this.#writing = ops;
    // Each stored op records the machine version it was written against (docs/migrations.md).
    const v = this.room.machine.version;
    this.#store.append(
      ops.map((o) => (o.v === undefined ? { ...o, v } : o)),
      (error) => this.written(ops, error),
    );
  }

  private written(ops: readonly OpRecord[], error: unknown): void {
    if (this.#writing !== ops) return; // a store that called back twice
    this.#writing = undefined;
    if (error !== undefined) {
      // Nothing was written: the ops stay Submitted and go first in the next attempt, so order holds.
      this.queue = [...ops, ...this.queue];
      const delay = this.#backoff(this.#failures++);
      const last = this.#stopping ? 'not retried: the room is closing' : `retrying in ${delay} ms, then with backoff`;
      const failure = new HerculesError(
        'storage-failed',
        `the client store could not persist ops ${ops[0].seq}..${ops[ops.length - 1].seq}: ${errorMessage(error)}; ${last}`,
        { cause: error },
      );
      if (this.#stopping) {
        // Ops that will never be written get a report of their own, failure run or not.
        this.#opts.report?.(failure);
        this.#settleFlushWaiters(true);
        return;
      }
      this.#storeFailed(failure);
      this.#cancelRetry = this.#clock.after(delay, () => {
        this.#cancelRetry = undefined;
        this.write();
      });
      return;
    }
    this.#failures = 0;
    this.#storeWorked();
    const seq = ops[ops.length - 1].seq;
    if (seq > this.#confirmedSeq) this.#confirmedSeq = seq;
    if (!this.#stopped) this.room.durable(seq);
    this.#settleFlushWaiters(false);
    if (this.queue.length > 0) this.write();
  }

  /** The wait before attempt `failures + 1` of a failed store call (the `retry` options). */
  #backoff(failures: number): number {
    return Math.min(this.#retryMaxMs, this.#retryMinMs * 2 ** Math.min(failures, 16));
  }

  /**
   * A store call failed: reported if it is the first of a run. A full disk fails every call, and
   * the app needs to hear it once, not once per op (issue 40 counted 491-2,187 reports in 5-15 s
   * when each op retried a failed reservation). The run ends when a call succeeds; the ops'
   * durable promises and positions().durable say so.
   */
  #storeFailed(error: HerculesError): void {
    if (this.#storeFailing) return;
    this.#storeFailing = true;
    this.#opts.report?.(error);
  }

  /** A store call succeeded: a failure after it starts a new run, which is reported. */
  #storeWorked(): void {
    this.#storeFailing = false;
  }

  #settleFlushWaiters(all: boolean): void {
    if (this.#flushWaiters.length === 0) return;
    const keep: FlushWaiter[] = [];
    for (const w of this.#flushWaiters) {
      if (all || w.seq <= this.#confirmedSeq) w.resolve();
      else keep.push(w);
    }
    this.#flushWaiters = keep;
  }

  // ================================================================ reservations

  /**
   * Reserve the next block once half of the last one is used (never twice at once). A failed
   * reservation is retried after a backoff, as a failed write is, not by the next op.
   */
  #reserve(): void {
    const store = this.#store;
    if (store.reserve === undefined || this.#reserving || this.#cancelReserveRetry !== undefined || this.#stopping) return;
    const top = Math.max(this.#queuedSeq, this.room.engine.persistedShape().lastSeq);
    if (this.#reserveAsked - top >= this.#seqBlock / 2) return;
    const through = top + this.#seqBlock;
    this.#reserveAsked = through;
    this.#reserving = true;
    store.reserve(through, (error) => {
      this.#reserving = false;
      if (this.#stopped) return;
      if (error !== undefined) {
        // Nothing reserved: ops past the last reservation go out once durable until a retry works.
        this.#reserveAsked = this.#reserveConfirmed;
        const delay = this.#backoff(this.#reserveFailures++);
        this.#storeFailed(
          new HerculesError(
            'storage-failed',
            `the client store could not reserve seqs through ${through}: ${errorMessage(error)}; ops are sent once durable until it can (retrying in ${delay} ms, then with backoff)`,
            { cause: error },
          ),
        );
        if (this.#stopping) return;
        this.#cancelReserveRetry = this.#clock.after(delay, () => {
          this.#cancelReserveRetry = undefined;
          this.#reserve();
        });
        return;
      }
      this.#reserveFailures = 0;
      this.#storeWorked();
      if (through > this.#reserveConfirmed) {
        this.#reserveConfirmed = through;
        this.room.reserved(through);
      }
      this.#reserve();
    });
  }

  // ================================================================ base

  #scheduleBase(): void {
    if (this.#cancelBase || this.#stopping) return;
    this.#cancelBase = this.#clock.after(this.#baseEveryMs, () => {
      this.#cancelBase = undefined;
      this.#saveBase();
    });
  }

  /**
   * Our ops reached Stable without changing its snapshot (rejected ones): a base must still take
   * them out of the store, or a restart restores them and asks the server for verdicts it may
   * have forgotten (OP-VERDICT-KEPT).
   */
  #baseIfOwnSettled(): void {
    if (this.room.engine.stableOwnUnsaved()) this.#scheduleBase();
  }

  #saveBase(): void {
    if (this.#baseWriting || this.#stopped) return;
    const base = this.room.baseToSave();
    if (base.pos <= this.#basePos) return;
    const before = this.#basePos;
    this.#basePos = base.pos;
    this.#baseWriting = true;
    this.#store.saveBase({ ...base, v: this.room.machine.version }, (error) => {
      this.#baseWriting = false;
      if (error !== undefined) {
        // The ops inside stay in the store (safe, only larger); the next change of Stable tries again.
        this.#basePos = before;
        this.#storeFailed(
          new HerculesError('storage-failed', `the client store could not save the base at position ${base.pos}: ${errorMessage(error)}`, { cause: error }),
        );
        return;
      }
      this.#storeWorked();
      // The server may forget the rejections of the ops it holds (SettledMessage).
      if (!this.#stopped) this.room.baseSaved(base.ownSeq);
      // Stable moved on while this was written: keep up.
      if (this.room.baseToSave().pos > this.#basePos) this.#scheduleBase();
    });
  }

  // ================================================================ batching

  /** Keep one timer at the room's next batching deadline (§4.5). */
  #armBatch(): void {
    const at = this.room.nextDeadline();
    if (at === this.#batchAt || this.#stopped) return;
    this.#cancelBatch?.();
    this.#cancelBatch = undefined;
    this.#batchAt = at;
    if (at === Infinity) return;
    this.#cancelBatch = this.#clock.after(Math.max(0, at - this.#clock.now()), () => {
      this.#cancelBatch = undefined;
      this.#batchAt = Infinity;
      this.room.tick();
      this.#baseIfOwnSettled();
      this.#armBatch();
    });
  }
}
