/**
 * The app-facing room: typed op stubs, `getState(view)`, `subscribe(view, fn)`, op handles.
 * Wraps a ViewEngine and hands its outputs to a driver (client-driver.ts). Still no I/O of its
 * own: the driver, and the transport under it, decide how messages and writes travel.
 */
import type { TextHandle, TextPath } from './text.ts';
import { HerculesError, OpRejectedError, errorMessage, type ErrorCode } from './errors.ts';
import type { Machine, OpArgs, OpsOf, Patch, PresenceOf, StateOf } from './machine.ts';
import type { AckMessage, ClientMessage, OpRecord, ServerMessage } from './protocol.ts';
import type { MemberPosition, ReceiptBook } from './receipts.ts';
import { UNDO_OP } from './undo.ts';
import type { RoomFeatures } from './room-features.ts';
import type { RoomUndo, UndoOptions, UndoStatus } from './undo-stack.ts';
import type { PresenceApi, RoomPresence } from './presence.ts';
import { VIEWS, LeanViewEngine, type BaseSnapshot, type Batching, type ClientRestore, type OwnOp, type Stage, type ViewName } from './view-engine.ts';

/** What the room needs from the world: a way to send frames and to persist ops. */
export type { RoomPresence } from './presence.ts';

export interface RoomDriver {
  send(msg: ClientMessage): void;
  /** Persist ops durably, then call `room.durable(lastSeqWritten)`. */
  persist(ops: OpRecord[]): void;
  /**
   * The connection is out of step with the server (see EngineOutput.resync): close it and connect
   * again; the welcome brings this client back in step.
   */
  resync?(reason: string): void;
  /** Called for protocol warnings and determinism problems. */
  warn?(message: string): void;
  /**
   * A fatal error (e.g. incompatible version, a client id conflict): stop reconnecting. Every
   * pending op's promises then reject with it, unless this returns false (the driver will retry,
   * e.g. with a fresh token).
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: a driver that returns nothing means "stop", so `void` must be accepted
  fatal?(code: ErrorCode, message: string): boolean | void;
  /** Our presence changed and waits to be sent: call `room.flushPresence()`, paced as the driver likes. */
  presenceDue?(): void;
}

export interface OpHandle {
  /** `${clientId}:${seq}`, unique and stable across restarts. */
  readonly id: string;
  readonly seq: number;
  readonly name: string;
  readonly stage: Stage;
  /**
   * Engine-clock time (ms) when each stage was reached, and 'stable' once every member of the
   * room has the op: latency telemetry.
   */
  readonly times: Readonly<Partial<Record<Stage | 'stable', number>>>;
  /** The same as delays after submit (ms): { durable: 0.6, authoritative: 70.1, ... }. */
  readonly delays: Readonly<Partial<Record<Exclude<Stage, 'submitted'> | 'stable', number>>>;
  /** The rejection reason, once rejected. */
  readonly error?: string;
  /**
   * True once rejected if the server refused the op before ordering (no write access, invalid
   * arguments, an unknown op, the authorize hook); false if it threw at its place in the order.
   */
  readonly refused?: boolean;
  /** Global log position once ordered. */
  readonly position?: number;
  readonly durable: Promise<OpHandle>;
  /** Rejects with OpRejectedError if the op threw at its place in the global order, or was refused. */
  readonly authoritative: Promise<OpHandle>;
  readonly visible: Promise<OpHandle>;
  /** Every client in the room has the op (and everything before it): it is in the Stable view. */
  readonly stable: Promise<OpHandle>;
}

export type OpStubs<M> = {
  [K in keyof OpsOf<M>]: OpArgs<OpsOf<M>[K]> extends undefined ? (args?: OpArgs<OpsOf<M>[K]>) => OpHandle : (args: OpArgs<OpsOf<M>[K]>) => OpHandle;
};

export type Listener<S> = (state: S, view: ViewName) => void;

/**
 * The length of each view's log (see docs/spec.md): global positions for Stable, Visible and
 * Authoritative; for Durable and Submitted, Authoritative plus our ops in them. Always
 * stable <= visible <= authoritative <= durable <= submitted.
 */
export type ViewPositions = Readonly<Record<ViewName, number>>;

/**
 * What an app reads and does with a room, whatever drives it: a bare ClientRoom, or the room
 * `connect()` returns. Hooks and the inspector take this, so they see no driver internals.
 */
export interface AppRoom<M extends Machine<any, any>> {
  readonly machine: M;
  readonly clientId: string;
  readonly ops: OpStubs<M>;
  getState(view?: ViewName): StateOf<M>;
  subscribe(view: ViewName, listener: Listener<StateOf<M>>, opts?: { immediate?: boolean }): () => void;
  until(view: ViewName, predicate: (state: StateOf<M>) => boolean, opts?: { timeoutMs?: number }): Promise<StateOf<M>>;
  onMembers(listener: (members: readonly string[]) => void): () => void;
  members(): readonly string[];
  /**
   * Delivery receipts (protocol 7): calls `listener` whenever what `seenBy` or `memberPositions`
   * answer may have changed. While at least one listens, the server sends this client the other
   * members' acked positions; with none, it sends nothing.
   */
  onReceipts(listener: () => void): () => void;
  /** The other members that hold our op `op` now (they acked its position), sorted; [] until it is ordered or while no one listens. */
  seenBy(op: OpHandle): readonly string[];
  /** Each other member's acked position and how far behind the log as we know it that is (while someone listens to onReceipts). */
  memberPositions(): readonly MemberPosition[];
  /** Presence: apart from the log and every view. */
  readonly presence: RoomPresence<PresenceOf<M>>;
  access(): 'read' | 'write';
  pending(): OpHandle[];
  submit(name: string, args?: unknown): OpHandle;
  /** The length of each view's log now; the same object until one of them changes. */
  positions(): ViewPositions;
  /**
   * Calls `listener` with `positions()` once per batch of progress: a view's log grew (or was
   * reset by a welcome), or one of our ops moved to another stage. For inspectors and meters.
   */
  onProgress(listener: (positions: ViewPositions) => void): () => void;
  /**
   * Calls `listener` with each op of ours the server rejected (it threw at its place, or was
   * refused), including ops of an earlier session that no caller holds a handle of: an op saved
   * offline and refused after a migration, say. Without a listener those are reported as warnings.
   */
  onRejected(listener: (op: OpHandle) => void): () => void;
  /** Deliver pending notifications now (for 'microtask' mode callers that cannot wait). */
  flushNotifications(): void;
  /**
   * The collaborative text at `path` of the state (a `createText()` field; the machine spreads
   * `textOps()` into its ops): indexes in the Submitted view become anchors at submit.
   */
  text(path: TextPath): TextHandle<OpHandle>;
  /**
   * The lowest clock this client's text inserts may take (TEXT-ID-ONCE): past every clock of
   * the inserts this process submitted (its views may lack one for a while), and, if it started
   * from a store that may lack ops an earlier one sent (a crash), above every clock those can
   * hold. `text()` uses it; an app that makes insert arguments itself (insertArgs) passes it, or
   * the submit is refused.
   */
  textClockFloor(): number;
  /**
   * Take back this client's last undo step (docs/undo.md): one ordered op that restores each
   * path it wrote where the value is still what it wrote (UNDO-OWN). Undefined if there is none.
   */
  undo(): OpHandle | undefined;
  /** Redo the last step undone (UNDO-REDO); undefined if there is none. */
  redo(): OpHandle | undefined;
  canUndo(): boolean;
  canRedo(): boolean;
  /** Calls `listener` when canUndo() or canRedo() changes. */
  onUndoChange(listener: (status: UndoStatus) => void): () => void;
  /** Run `fn`; the ops it submits are one undo step. */
  undoGroup<T>(fn: () => T): T;
  /** The next op starts a new undo step, however soon it comes (ends a typing run). */
  stopCapturing(): void;
}

/**
 * Where a client's time went on what the server sent, in ms of its clock, summed since the room
 * was made: decoding frames (the transport), applying them (the view engine: ordering, rebasing
 * our pending ops, batched steps included) and notifying subscribers (listeners included; local
 * submits' rounds too; in 'sync' mode, notifying is inside applyMs). The receiver's share of an
 * op's delivery (docs/benchmarks.md).
 */
export interface ReceiveStats {
  /** Server frames handed to the room (pings excluded). */
  frames: number;
  decodeMs: number;
  applyMs: number;
  /** Notification rounds run (one per turn with a change, in the default 'microtask' mode). */
  notifies: number;
  notifyMs: number;
}

export interface ClientRoomOptions {
  clientId: string;
  author?: string;
  now?: () => number;
  cpuNow?: () => number;
  batching?: Batching;
  restore?: ClientRestore;
  /** 'microtask' (default) coalesces notifications of one tick; 'sync' notifies after each input. */
  notify?: 'microtask' | 'sync';
  /** Undo tracking (docs/undo.md): on by default where the undo feature is given; false turns it off (undo() then does nothing). */
  undo?: UndoOptions | false;
  /**
   * The features this room has (room-features.ts): `ClientRoom` gives all of them unless told
   * otherwise; `LeanClientRoom` only these.
   */
  features?: RoomFeatures;
}

/**
 * One of an op handle's promises, made only when someone reads it: most ops' promises are never
 * awaited, and four promises with their resolvers and catch handlers were most of a pending
 * op's memory (docs/benchmarks.md, text). Settles once; a later settle is ignored, as a
 * promise's is.
 */
class Lazy {
  #promise: Promise<OpHandle> | undefined;
  #resolve: ((h: OpHandle) => void) | undefined;
  #reject: ((e: unknown) => void) | undefined;
  /** 0 pending, 1 resolved, 2 rejected. */
  #state = 0;
  #value: unknown;
  get promise(): Promise<OpHandle> {
    if (this.#promise === undefined) {
      const v = this.#value;
      this.#promise =
        this.#state === 1
          ? Promise.resolve(v as OpHandle)
          : this.#state === 2
            ? Promise.reject(v)
            : new Promise<OpHandle>((res, rej) => {
                this.#resolve = res;
                this.#reject = rej;
              });
      this.#promise.catch(() => {}); // a rejection nobody awaits is not an unhandled error
    }
    return this.#promise;
  }
  resolve(h: OpHandle): void {
    if (this.#state !== 0) return;
    this.#state = 1;
    this.#value = h;
    this.#resolve?.(h);
  }
  reject(e: unknown): void {
    if (this.#state !== 0) return;
    this.#state = 2;
    this.#value = e;
    this.#reject?.(e);
  }
}

class Handle implements OpHandle {
  #d: Lazy | undefined;
  #a: Lazy | undefined;
  #v: Lazy | undefined;
  #s: Lazy | undefined;
  get d(): Lazy {
    return (this.#d ??= new Lazy());
  }
  get a(): Lazy {
    return (this.#a ??= new Lazy());
  }
  get v(): Lazy {
    return (this.#v ??= new Lazy());
  }
  get s(): Lazy {
    return (this.#s ??= new Lazy());
  }
  stableAt: number | undefined;
  /** Made for an op of an earlier session (restored from the store): nobody here holds it. */
  restored = false;
  constructor(readonly op: OwnOp) {}
  get id() {
    return this.op.id;
  }
  get seq() {
    return this.op.seq;
  }
  get name() {
    return this.op.name;
  }
  get stage() {
    return this.op.stage;
  }
  get times(): Readonly<Partial<Record<Stage | 'stable', number>>> {
    return this.stableAt === undefined ? this.op.times : { ...this.op.times, stable: this.stableAt };
  }
  get delays() {
    const t = this.times,
      t0 = t.submitted ?? 0;
    const out: Partial<Record<Exclude<Stage, 'submitted'> | 'stable', number>> = {};
    for (const k of ['durable', 'authoritative', 'visible', 'stable', 'rejected'] as const) if (t[k] !== undefined) out[k] = t[k]! - t0;
    return out;
  }
  get error() {
    return this.op.error;
  }
  get refused() {
    return this.op.stage === 'rejected' ? this.op.refused === true : undefined;
  }
  get position() {
    return this.op.pos;
  }
  get durable() {
    return this.d.promise;
  }
  get authoritative() {
    return this.a.promise;
  }
  get visible() {
    return this.v.promise;
  }
  get stable() {
    return this.s.promise;
  }
  /**
   * A fatal error: every promise not yet settled rejects with it, but `durable` of an op whose
   * store write is under way (HANDLE-DURABLE-AFTER-FATAL): the store's answer settles that one,
   * unless `storeGaveUp` (the room closed with the op not stored).
   */
  fail(err: Error, storeGaveUp = false): void {
    if (storeGaveUp || this.op.stage !== 'submitted') this.d.reject(err);
    this.a.reject(err);
    this.v.reject(err);
    this.s.reject(err);
  }
  reachStable(t: number): void {
    this.stableAt = t;
    this.s.resolve(this);
  }
  settle(): void {
    const st = this.op.stage;
    if (st === 'rejected') {
      this.d.resolve(this);
      const err = new OpRejectedError(this.op.id, this.op.error ?? 'rejected', this.op.refused === true);
      this.a.reject(err);
      this.v.reject(err);
      this.s.reject(err);
      return;
    }
    if (st === 'durable' || st === 'authoritative' || st === 'visible') this.d.resolve(this);
    if (st === 'authoritative' || st === 'visible') this.a.resolve(this);
    if (st === 'visible') this.v.resolve(this);
  }
}

/**
 * The client room, with only the features its options give (room-features.ts); `ClientRoom`
 * (full-client-room.ts) is this with all of them.
 */
export class LeanClientRoom<M extends Machine<any, any>> implements AppRoom<M> {
  /**
   * The sans-I/O engine under this room: for drivers and the simulator's checkers, not for apps
   * (`positions()`, `onProgress()` and `pending()` say what an app or inspector needs; the room
   * `connect()` returns does not expose it).
   */
  readonly engine: LeanViewEngine<StateOf<M>>;
  readonly ops: OpStubs<M>;
  #driver: RoomDriver | undefined;
  readonly #handles = new Map<number, Handle>();
  readonly #listeners = new Map<ViewName, Set<Listener<StateOf<M>>>>();
  readonly #memberListeners = new Set<(members: readonly string[]) => void>();
  /** Delivery receipts, if this room has the receipts feature (receipts.ts). */
  readonly #receipts: ReceiptBook | undefined;
  /** `room.presence`, if this room has the presence feature (presence.ts). */
  readonly #presence: PresenceApi<PresenceOf<M>> | undefined;
  readonly #progressListeners = new Set<(positions: ViewPositions) => void>();
  readonly #rejectedListeners = new Set<(op: OpHandle) => void>();
  /** The positions last returned (kept by identity while equal) and last told to progress listeners. */
  #lastPositions: ViewPositions | undefined;
  #progressNotified: ViewPositions | undefined;
  /** One of our ops changed stage since progress listeners were last called. */
  #opsProgressed = false;
  private readonly notified = new Map<ViewName, StateOf<M>>();
  readonly #notifyMode: 'microtask' | 'sync';
  private readonly now: () => number;
  /** until() calls waiting, so close() can settle them. */
  readonly #waiters = new Set<(e: HerculesError) => void>();
  #notifyScheduled = false;
  readonly #recv = { frames: 0, applyMs: 0, notifies: 0, notifyMs: 0 };
  /** An ack held until this turn's notification round (holdAck). */
  #heldAck: AckMessage | undefined;
  #closed = false;
  /** The fatal error that stopped this room, if any. */
  #failure: HerculesError | undefined;
  /** Undo tracking, if this room has the undo feature and `undo` is not false (undo-stack.ts). */
  readonly #history: RoomUndo<StateOf<M>, Handle> | undefined;
  readonly #textHandle: RoomFeatures['textHandle'];

  constructor(
    readonly machine: M,
    opts: ClientRoomOptions,
    driver?: RoomDriver,
  ) {
    const now = (this.now = opts.now ?? (() => performance.now()));
    const makeUndo = opts.undo === false ? undefined : opts.features?.undoStack;
    this.#textHandle = opts.features?.textHandle;
    const features = opts.features;
    const Engine = features?.engine ?? LeanViewEngine;
    this.engine = new Engine<StateOf<M>>(
      machine,
      {
        clientId: opts.clientId,
        author: opts.author,
        now,
        cpuNow: opts.cpuNow ?? (() => performance.now()),
        batching: opts.batching,
        ...(!makeUndo
          ? {}
          : {
              onOwnRun: (before: StateOf<M>, after: StateOf<M>, ops: readonly OwnOp[], patches: readonly Patch[]) => {
                this.#history!.ran(before, after, ops, patches);
                this.#history!.changed();
              },
            }),
      },
      opts.restore,
    );
    this.#receipts = features?.receipts?.();
    const presence = this.engine.presenceState;
    this.#presence = presence && features?.presenceApi?.<PresenceOf<M>>(presence, () => this.#pump());
    this.#driver = driver;
    this.#notifyMode = opts.notify ?? 'microtask';
    for (const v of VIEWS) this.notified.set(v, this.engine.getState(v));
    for (const op of this.engine.pending()) {
      const h = new Handle(op);
      h.restored = true;
      this.#handles.set(op.seq, h);
    }
    const stubs: Record<string, (args?: unknown) => OpHandle> = {};
    for (const name of machine.opNames) stubs[name] = (args?: unknown) => this.submit(name, args);
    this.ops = Object.freeze(stubs) as OpStubs<M>;
    if (makeUndo)
      this.#history = makeUndo(machine, opts.undo || {}, now, {
        engine: this.engine,
        submit: (name, args) => this.#submitOp(name, args),
        warn: (m) => this.#driver?.warn?.(m),
      });
  }

  attach(driver: RoomDriver): void {
    this.#driver = driver;
    this.#pump();
  }

  // ---------------------------------------------------------------- app API

  get clientId(): string {
    return this.engine.clientId;
  }

  /** Presence (presence.ts); a room without the presence feature throws 'bad-argument' here. */
  get presence(): RoomPresence<PresenceOf<M>> {
    return this.#needPresence();
  }

  #needPresence(): PresenceApi<PresenceOf<M>> {
    return this.#presence ?? missingFeature('room.presence', 'presence');
  }

  getState(view: ViewName = 'submitted'): StateOf<M> {
    return this.engine.getState(view);
  }

  /**
   * Calls `listener` with the new snapshot once per batch of changes to `view`; with
   * `{ immediate: true }`, also once now with the current one.
   */
  subscribe(view: ViewName, listener: Listener<StateOf<M>>, opts?: { immediate?: boolean }): () => void {
    if (!VIEWS.includes(view)) throw new HerculesError('bad-argument', `unknown view ${JSON.stringify(view)}; use one of ${VIEWS.join(', ')}`);
    if (typeof listener !== 'function') throw new HerculesError('bad-argument', 'subscribe(view, listener): listener must be a function');
    let set = this.#listeners.get(view);
    if (!set) this.#listeners.set(view, (set = new Set()));
    set.add(listener);
    if (opts?.immediate) listener(this.engine.getState(view), view);
    return () => {
      set!.delete(listener);
    };
  }

  /**
   * The first state of `view`, now or later, for which `predicate` holds. Rejects with 'timeout'
   * after `timeoutMs` (default: waits as long as it takes) and with 'closed' if the room closes.
   */
  until(view: ViewName, predicate: (state: StateOf<M>) => boolean, opts?: { timeoutMs?: number }): Promise<StateOf<M>> {
    if (typeof predicate !== 'function') throw new HerculesError('bad-argument', 'until(view, predicate): predicate must be a function');
    const t = opts?.timeoutMs;
    if (t !== undefined && !(typeof t === 'number' && t >= 0))
      throw new HerculesError('bad-argument', `until: timeoutMs must be a non-negative number, got ${String(t)}`);
    return new Promise<StateOf<M>>((resolve, reject) => {
      if (this.#closed) return reject(new HerculesError('closed', 'until: the room is closed'));
      let timer: ReturnType<typeof setTimeout> | undefined;
      let off = () => {};
      const end = (e?: HerculesError, s?: StateOf<M>) => {
        off();
        if (timer) clearTimeout(timer);
        this.#waiters.delete(end);
        if (e) reject(e);
        else resolve(s!);
      };
      const check = (s: StateOf<M>) => {
        let ok: boolean;
        try {
          ok = predicate(s);
        } catch (e) {
          return end(new HerculesError('bad-argument', `until: the predicate threw: ${errorMessage(e)}`));
        }
        if (ok) end(undefined, s);
      };
      this.#waiters.add(end);
      off = this.subscribe(view, check);
      if (t !== undefined) timer = setTimeout(() => end(new HerculesError('timeout', `until(${view}): no state matched within ${t} ms`)), t);
      check(this.engine.getState(view));
    });
  }

  onMembers(listener: (members: readonly string[]) => void): () => void {
    this.#memberListeners.add(listener);
    return () => {
      this.#memberListeners.delete(listener);
    };
  }

  members(): readonly string[] {
    return this.engine.members();
  }

  onReceipts(listener: () => void): () => void {
    if (typeof listener !== 'function') throw new HerculesError('bad-argument', 'onReceipts(listener): listener must be a function');
    const book = this.#receipts ?? missingFeature('room.onReceipts()', 'receipts');
    const fn = () => listener(); // one subscription per call, even of the same function
    if (book.add(fn)) this.#askReceipts(true);
    return () => {
      if (!book.remove(fn)) return;
      book.reset(); // no longer kept up to date: say nothing rather than something stale
      this.#askReceipts(false);
    };
  }

  seenBy(op: OpHandle): readonly string[] {
    return this.#receipts?.seenBy(op.position, this.engine.members(), this.clientId) ?? [];
  }

  memberPositions(): readonly MemberPosition[] {
    return this.#receipts?.positions(this.engine.members(), this.clientId, this.engine.positions().authoritative) ?? [];
  }

  /** Ask the server for receipts on this connection, or to stop; a welcome asks again (receiveReceipts). */
  #askReceipts(on: boolean): void {
    if (this.#closed || this.engine.connection() !== 'ready') return;
    this.#driver?.send({ t: 'receipts', on });
  }

  /** Receipts' part of a server message: true if it was the acks message, which is nothing else's. */
  #receiveReceipts(msg: ServerMessage, before: boolean): boolean {
    const book = this.#receipts;
    if (msg.t === 'acks') {
      book?.apply(msg);
      book?.notify((m) => this.#driver?.warn?.(m));
      return true;
    }
    if (msg.t === 'welcome' && !before && book?.wanted()) {
      book.reset();
      this.#askReceipts(true);
    }
    return false;
  }

  positions(): ViewPositions {
    const p = this.engine.positions();
    const l = this.#lastPositions;
    if (l && l.stable === p.stable && l.visible === p.visible && l.authoritative === p.authoritative && l.durable === p.durable && l.submitted === p.submitted)
      return l;
    return (this.#lastPositions = Object.freeze(p));
  }

  onRejected(listener: (op: OpHandle) => void): () => void {
    if (typeof listener !== 'function') throw new HerculesError('bad-argument', 'onRejected(listener): listener must be a function');
    this.#rejectedListeners.add(listener);
    return () => {
      this.#rejectedListeners.delete(listener);
    };
  }

  /**
   * An op of ours was rejected (OP-REJECTED-TOLD): the listeners hear of it; with none, an op of
   * an earlier session (sent offline, refused after a migration, say), which no caller holds a
   * handle of, is reported as a warning rather than dropped without a word.
   */
  #tellRejected(h: Handle): void {
    const d = this.#driver;
    if (this.#rejectedListeners.size === 0) {
      if (h.restored)
        d?.warn?.(`op ${h.seq} (${h.name}), kept from before this session, was rejected: ${h.error ?? 'refused'} [pass onRejected to hear of each]`);
      return;
    }
    for (const fn of [...this.#rejectedListeners]) {
      try {
        fn(h);
      } catch (e) {
        d?.warn?.(`an onRejected listener threw: ${errorMessage(e)}`);
      }
    }
  }

  onProgress(listener: (positions: ViewPositions) => void): () => void {
    if (typeof listener !== 'function') throw new HerculesError('bad-argument', 'onProgress(listener): listener must be a function');
    if (this.#progressListeners.size === 0) this.#progressNotified = this.positions();
    this.#progressListeners.add(listener);
    return () => {
      this.#progressListeners.delete(listener);
    };
  }

  /** 'read' once the server said this client may only read: stubs then throw 'forbidden'. */
  access(): 'read' | 'write' {
    return this.engine.accessLevel();
  }

  /** Handles of our ops not yet visible (including ones recovered after a restart). */
  pending(): OpHandle[] {
    return this.engine.pending().map((op) => this.#handleFor(op));
  }

  text(path: TextPath): TextHandle<OpHandle> {
    return (this.#textHandle ?? missingFeature('room.text()', 'text'))(this, path);
  }

  textClockFloor(): number {
    return this.engine.textClockFloor();
  }

  submit(name: string, args?: unknown): OpHandle {
    if (name === UNDO_OP) throw new HerculesError('unknown-op', `${UNDO_OP} is the engine's own op: call room.undo() or room.redo()`);
    return this.#history ? this.#history.submit(name, args) : this.#submitOp(name, args);
  }

  undo(): OpHandle | undefined {
    return this.#history?.take(false);
  }

  redo(): OpHandle | undefined {
    return this.#history?.take(true);
  }

  canUndo(): boolean {
    return this.#history?.canUndo() ?? false;
  }

  canRedo(): boolean {
    return this.#history?.canRedo() ?? false;
  }

  onUndoChange(listener: (status: UndoStatus) => void): () => void {
    if (typeof listener !== 'function') throw new HerculesError('bad-argument', 'onUndoChange(listener): listener must be a function');
    // (Without undo tracking canUndo and canRedo never change: nothing to tell.)
    return this.#history?.listen(listener) ?? (() => {});
  }

  undoGroup<T>(fn: () => T): T {
    if (typeof fn !== 'function') throw new HerculesError('bad-argument', 'undoGroup(fn): fn must be a function');
    return this.#history ? this.#history.group(fn) : fn();
  }

  stopCapturing(): void {
    this.#history?.stopCapturing();
  }

  #submitOp(name: string, args?: unknown): Handle {
    if (this.#closed) throw new HerculesError('bad-argument', 'this room is closed; connect again to submit ops');
    // A store whose history the server does not share can deliver nothing, now or later.
    if (this.#failure?.code === 'client-id-conflict') throw new HerculesError(this.#failure.code, `this room stopped: ${this.#failure.message}`);
    const op = this.engine.submit(name, args);
    const h = this.#handleFor(op);
    // After any other fatal refusal the op is still kept (OP-KEPT-AFTER-FATAL): it runs in
    // Submitted and goes to the store like any other, and the next connect() on that store sends
    // it; only its server stages fail, at once, since this room will not send it.
    if (this.#failure)
      h.fail(new HerculesError(this.#failure.code, `this room stopped: ${this.#failure.message}; the op is kept on this device for the next connect()`));
    // The op runs after the turn's send (the driver's flushSends drains the engine), or at the
    // first read of Submitted; in 'sync' mode now, for the listeners this call notifies.
    this.#pump(this.#notifyMode !== 'sync');
    return h;
  }

  close(): void {
    this.#closed = true;
    for (const end of [...this.#waiters]) end(new HerculesError('closed', 'the room was closed while until() waited'));
    // The driver finished its writes before this: an op still Submitted was not stored, and no
    // answer will come for it in this process (HANDLE-DURABLE-AFTER-FATAL).
    for (const [seq, h] of this.#handles) {
      if (h.stage !== 'submitted') continue;
      h.fail(new HerculesError('closed', `the room was closed before this device's store confirmed op ${seq} (${h.name}); it is not durable here`), true);
      this.#handles.delete(seq);
    }
    this.#listeners.clear();
    this.#memberListeners.clear();
    this.#presence?.close();
    this.#progressListeners.clear();
    this.#rejectedListeners.clear();
    this.#history?.close();
  }

  // ---------------------------------------------------------------- driver API

  receive(msg: ServerMessage): void {
    const t0 = this.now();
    if (!this.#receiveReceipts(msg, true)) {
      this.engine.receive(msg);
      this.#pump();
      this.#receiveReceipts(msg, false);
    }
    this.#recv.frames++;
    this.#recv.applyMs += this.now() - t0;
  }
  /**
   * Frames the connection delivered together, in order, as one step: one rebase of our pending
   * ops and one round of outputs for all of them (ViewEngine.receiveAll). For log and progress
   * frames (the driver's BATCHED): a welcome, an error or receipts go one at a time (receive).
   */
  receiveAll(msgs: readonly ServerMessage[]): void {
    if (msgs.length === 1) return this.receive(msgs[0]);
    const t0 = this.now();
    this.engine.receiveAll(msgs);
    this.#pump();
    this.#recv.frames += msgs.length;
    this.#recv.applyMs += this.now() - t0;
  }
  durable(seq: number): void {
    this.engine.durable(seq);
    this.#pump();
  }
  /** The submitting turn ended: send what may go before it is durable (ViewEngine.flushSends). */
  flushSends(): void {
    this.engine.flushSends();
    // The frame goes out first, then the ops it carries run (ViewEngine.submit).
    this.#pump(true);
    if (this.engine.submittedWaiting()) this.#pump();
  }
  /**
   * Set one of this client's keyed presences (protocol 8: a tab of a shared client, docs/tabs.md):
   * others see it as a peer of its own, `{ client, key, value }`; null clears it. Paced and
   * checked as presence.set; at most MAX_PRESENCE_KEYS at once.
   */
  setPresenceOf(key: string, value: PresenceOf<M> | null): void {
    this.#needPresence().setOf(key, value);
  }
  /** Send our latest presence now (the driver paces these: RoomDriver.presenceDue). */
  flushPresence(): void {
    this.engine.flushPresence();
    this.#pump();
  }
  /** The store saved a base holding our ops up to `ownSeq` (ViewEngine.baseSaved). */
  baseSaved(ownSeq: number): void {
    this.engine.baseSaved(ownSeq);
    this.#pump();
  }
  /** The store holds a reservation of our seqs up to `seq` (ViewEngine.reserved). */
  reserved(seq: number): void {
    this.engine.reserved(seq);
    this.#pump();
  }
  /** The transport connected, at `at` by the wall clock (HelloMessage.at). */
  connected(at?: number): void {
    this.#heldAck = undefined; // it was for the connection before: this one starts with a hello
    this.engine.connected(at);
    this.#pump();
  }
  disconnected(): void {
    this.#heldAck = undefined;
    this.engine.disconnected();
    this.#pump();
  }
  tick(): void {
    const t0 = this.now();
    this.engine.tick();
    this.#pump();
    this.#recv.applyMs += this.now() - t0;
  }
  nextDeadline(): number {
    return this.engine.nextDeadline();
  }
  /** What the store should keep as a base now (ViewEngine.baseToSave). */
  baseToSave(): BaseSnapshot {
    return this.engine.baseToSave();
  }
  /** Where the engine is with the current connection: 'ready' once welcomed. */
  connection(): 'offline' | 'connecting' | 'ready' {
    return this.engine.connection();
  }

  /** Deliver pending notifications now (for 'microtask' mode callers that cannot wait). */
  flushNotifications(): void {
    const t0 = this.now();
    this.#flushNotificationsNow();
    this.#recv.notifies++;
    this.#recv.notifyMs += this.now() - t0;
    this.#releaseAck();
  }

  /**
   * Where this room's time went on what the server sent, by its clock, since it was made
   * (ReceiveStats): cheap (two clock reads per frame and per notification round), always on.
   */
  receiveStats(): Omit<ReceiveStats, 'decodeMs'> {
    return { ...this.#recv };
  }

  #flushNotificationsNow(): void {
    this.#notifyScheduled = false;
    for (const v of VIEWS) {
      const s = this.engine.getState(v);
      if (this.notified.get(v) === s) continue;
      this.notified.set(v, s);
      const set = this.#listeners.get(v);
      if (!set) continue;
      for (const fn of [...set]) {
        try {
          fn(s, v);
        } catch (e) {
          this.#driver?.warn?.(`a ${v} listener threw: ${errorMessage(e)}`);
        }
      }
    }
    if (this.#progressListeners.size > 0) this.#notifyProgress();
  }

  #notifyProgress(): void {
    const p = this.positions();
    if (p === this.#progressNotified && !this.#opsProgressed) return;
    this.#progressNotified = p;
    this.#opsProgressed = false;
    for (const fn of [...this.#progressListeners]) {
      try {
        fn(p);
      } catch (e) {
        this.#driver?.warn?.(`a progress listener threw: ${errorMessage(e)}`);
      }
    }
  }

  /**
   * Handles in seq order, and our ops take positions in seq order: the stable ones are a prefix.
   * A visible op without a position was settled inside a checkpoint, which is stable.
   */
  #settleStable(): void {
    const stable = this.engine.positions().stable;
    let t: number | undefined;
    for (const [seq, h] of this.#handles) {
      const op = h.op;
      if (op.stage !== 'visible' || (op.pos !== undefined && op.pos > stable)) break;
      h.reachStable((t ??= this.now()));
      this.#handles.delete(seq);
    }
  }

  #handleFor(op: OwnOp): Handle {
    let h = this.#handles.get(op.seq);
    if (!h) this.#handles.set(op.seq, (h = new Handle(op)));
    return h;
  }

  #pump(deferSubmitted = false): void {
    const o = this.engine.drain(deferSubmitted);
    const d = this.#driver;
    if (o.persist.length) d?.persist(o.persist);
    for (const m of o.send) {
      if (m.t === 'ack') {
        this.#holdAck(m);
        continue;
      }
      if (this.#heldAck) {
        // What was held goes first: the order of messages is kept. Ops carry it (VIS-ACK-WITH-OPS).
        if (m.t === 'ops') {
          d?.send({ ...m, ack: this.#takeHeldAck() });
          continue;
        }
        this.#sendHeldAck();
      }
      d?.send(m);
    }
    // 'sync' mode holds no ack past this step's messages (VIS-ACK-AFTER-NOTIFY is microtask mode's).
    if (this.#heldAck && this.#notifyMode === 'sync') this.#sendHeldAck();
    for (const w of o.warnings) d?.warn?.(w);
    if (o.resync !== undefined) d?.resync?.(o.resync);
    if (o.fatal) {
      if (d?.fatal?.(o.fatal.code, o.fatal.message) !== false) {
        // Nothing pending will progress on this client any more: say so to whoever awaits it.
        const err = (this.#failure = new HerculesError(o.fatal.code, o.fatal.message));
        for (const [seq, h] of this.#handles) {
          h.fail(err);
          // Durable is a fact of the device, not of the connection: an op still being written
          // keeps its handle until the store answers (HANDLE-DURABLE-AFTER-FATAL).
          if (h.stage !== 'submitted') this.#handles.delete(seq);
        }
      }
    }
    let undoRejected = false;
    for (const op of o.progressed) {
      const h = this.#handleFor(op);
      h.settle();
      if (op.stage === 'rejected') this.#tellRejected(h);
      if (op.stage === 'rejected' && this.#history) {
        this.#history.rejected(op.seq);
        undoRejected = true;
      }
      if (op.stage === 'rejected' || (this.#failure && op.stage !== 'submitted')) this.#handles.delete(op.seq);
    }
    if (undoRejected) this.#history!.changed();
    if (o.progressed.length || o.changed.has('stable')) this.#settleStable();
    if (o.presenceChanged) this.#presence?.changed((m) => d?.warn?.(m));
    if (this.engine.presencePending()) d?.presenceDue?.();
    if ((o.membersChanged || o.progressed.length) && this.#receipts?.wanted()) this.#receipts.notify((m) => d?.warn?.(m));
    if (o.membersChanged) {
      const m = this.engine.members();
      for (const fn of [...this.#memberListeners]) {
        try {
          fn(m);
        } catch (e) {
          d?.warn?.(`a members listener threw: ${errorMessage(e)}`);
        }
      }
    }
    // Progress without a new snapshot (an entry that changes no state, a stage change) still
    // counts for progress listeners; without any, the hot path skips this.
    let progress = false;
    if (this.#progressListeners.size > 0) {
      if (o.progressed.length) this.#opsProgressed = true;
      progress = this.#opsProgressed || this.positions() !== this.#progressNotified;
    }
    if (o.changed.size === 0 && !progress) {
      if (!this.#notifyScheduled) this.#releaseAck();
      return;
    }
    if (this.#notifyMode === 'sync') this.flushNotifications();
    else if (!this.#notifyScheduled) {
      this.#notifyScheduled = true;
      queueMicrotask(() => {
        if (this.#notifyScheduled) this.flushNotifications();
        else this.#releaseAck();
      });
    }
  }

  /**
   * An ack waits for the notification round of its turn (VIS-ACK-AFTER-NOTIFY): subscribers see a
   * remote op before this client writes to its socket, and the acks of the frames one turn
   * brings go as one (cumulative: the last position, and the highest durable seq said).
   */
  #holdAck(m: AckMessage): void {
    const h = this.#heldAck;
    const durable = Math.max(m.durable ?? 0, h?.durable ?? 0);
    this.#heldAck = durable > 0 ? { t: 'ack', pos: Math.max(m.pos, h?.pos ?? 0), durable } : { t: 'ack', pos: Math.max(m.pos, h?.pos ?? 0) };
  }

  /**
   * Send the held ack now, unless ops submitted in this turn are about to go (the driver's
   * flushSends at the turn's end): they carry it, one frame instead of two (VIS-ACK-WITH-OPS).
   */
  #releaseAck(): void {
    if (this.#heldAck && !this.engine.sendsDue()) this.#sendHeldAck();
  }

  #sendHeldAck(): void {
    this.#driver?.send({ t: 'ack', ...this.#takeHeldAck() });
  }

  #takeHeldAck(): { pos: number; durable?: number } {
    const { pos, durable } = this.#heldAck!;
    this.#heldAck = undefined;
    return durable === undefined ? { pos } : { pos, durable };
  }
}

/** A room without `feature` was asked for `what`, which needs it. */
function missingFeature(what: string, feature: string): never {
  throw new HerculesError(
    'bad-argument',
    `${what} needs the ${feature} feature: connect() of @hercules/client has it; @hercules/client/lean, with features: [${feature}Feature]`,
  );
}
