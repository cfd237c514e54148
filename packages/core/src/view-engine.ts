/**
 * The client view engine (§4.4–4.6): a deterministic function of its ordered inputs
 * (submits, storage confirmations, server messages, connection changes, clock ticks).
 * It owns no sockets, disks or timers; it queues what the adapter must do (send, persist)
 * and the adapter drains the queue after every input.
 *
 * Logs and lists (positions are 1-based global log positions):
 *
 *   global log:   1 .. stableLen .. visibleLen .. authLen
 *                    [  settled   ][  authList  ]
 *   Stable        = log[1..stableLen]
 *   Visible       = log[1..visibleLen]     (stops before our first op not yet visible)
 *   Authoritative = log[1..authLen]
 *   Durable       = Authoritative + tentList + durableList   (others' ops the server has not
 *                   stored yet, LOG-TENTATIVE; our ops persisted locally, not yet ordered)
 *   Submitted     = Durable + submittedList       (our ops in memory only)
 *
 * Each view keeps a frozen snapshot. An own-progress message moves an op from one list to the
 * next and applies it directly to one snapshot; a remote op lands in the middle of the
 * speculative logs, so Durable and Submitted are rebased on Authoritative (§4.4). Whenever two
 * adjacent logs are equal their snapshots are the same object, so quiet views share identity.
 */
import { HerculesError, isErrorCode, type ErrorCode } from './errors.ts';
import type { PresenceState } from './presence.ts';
import { applyOps, deepFreeze, hasOp, migrateState, translateOp, type Machine, type OpInvocation, type Patch } from './machine.ts';
import { GENESIS_DIGEST, domainCopy, sameArgs, scanOp, wellFormed } from './args.ts';
import { TEXT_INSERT, textClockEnd, textClockFloor } from './text.ts';
import {
  FRAME_BUDGET_BYTES,
  MAX_OPS_PER_FRAME,
  MAX_OP_BYTES,
  MAX_VERIFY,
  PROTOCOL_VERSION,
  RECENT_DIGESTS,
  type ClientMessage,
  type LogEntry,
  type OpRecord,
  type PeerPresence,
  type ServerMessage,
  type WelcomeMessage,
  type WireEntry,
} from './protocol.ts';

export type ViewName = 'submitted' | 'durable' | 'authoritative' | 'visible' | 'stable';
/** Views from newest (least certain) to oldest (most certain). */
export const VIEWS: readonly ViewName[] = ['submitted', 'durable', 'authoritative', 'visible', 'stable'];

export type Stage = 'submitted' | 'durable' | 'authoritative' | 'visible' | 'rejected';

/** The engine's record of one of our ops; the app-facing handle wraps it. */
export interface OwnOp extends OpInvocation {
  readonly id: string;
  stage: Stage;
  /** When each stage was reached, by the engine's clock (ms). */
  readonly times: Partial<Record<Stage, number>>;
  /** Estimated wire size, measured once at submit (ops restored from storage measure on send). */
  bytes?: number;
  error?: string;
  /** Refused before ordering (see LogEntry.refused); `error` says why. */
  refused?: true;
  /** Global position once ordered. */
  pos?: number;
  /** This client's op digest chain after this op (see args.ts); absent for ops from a store that kept none. */
  digest?: number;
  /** The seq of our previous op, when it is not seq - 1 (a declared gap: OpRecord.after). */
  after?: number;
}

/**
 * Rebase batching (§4.5).
 * - `off`: rebase on every server frame that carries remote ops.
 * - `{ intervalMs }`: queue frames that carry remote ops and process them every interval.
 * - `{ auto }`: rebase at once while the estimated rebase cost stays under `budgetMs` of CPU and
 *   frames come less often than `intervalMs` (default 16 ms: one frame at 60 Hz); otherwise
 *   queue them and process the queue once per interval. Sparse traffic (typing) is applied on
 *   arrival; under load a client does at most one step per interval, however cheap each is.
 * Frames that only report our own progress never wait: they need no rebase.
 */
export type Batching = 'off' | { intervalMs: number } | { auto: true; budgetMs?: number; intervalMs?: number };

export interface ViewEngineOptions<S = unknown> {
  clientId: string;
  /** Author used for speculative application until the server's welcome names the real one. */
  author?: string;
  /** Wall clock for stage times and batching deadlines (ms). */
  now: () => number;
  /** CPU clock used by auto batching to estimate rebase cost (ms). Defaults to `now`. */
  cpuNow?: () => number;
  batching?: Batching;
  /**
   * Told each time ops of ours submitted since the last run run on Submitted: the snapshot
   * before and after them, with nothing else in between (undo bookkeeping: undo-stack.ts).
   */
  onOwnRun?: (before: S, after: S, ops: readonly OwnOp[], patches: readonly Patch[]) => void;
  /**
   * This client's presence (presence.ts): `ViewEngine` makes one unless told `false`;
   * `LeanViewEngine` has presence only when given one (none: presence messages are ignored).
   */
  presence?: PresenceState | false;
}

/** What a restarted client recovers from its own storage. */
export interface ClientRestore {
  /** Highest seq this client ever persisted. */
  lastSeq: number;
  /**
   * Seqs up to here may have been sent by an earlier process without being persisted
   * (DUR-BEFORE-SEND): the next op gets max(lastSeq, reservedSeq) + 1 and declares the gap.
   */
  reservedSeq?: number;
  /** Persisted ops not known to be authoritative, in seq order. */
  durable: readonly OpRecord[];
  /**
   * Digest of this client's op chain at `lastSeq` (see args.ts); absent when the store predates
   * digests (then ops are not checked against the server's).
   */
  lastDigest?: number;
  /**
   * A snapshot of the global log prefix the client had, to start offline from. `ownSeq`: the
   * highest seq of this client's ops inside it; the store keeps every op after it.
   */
  base?: { pos: number; state: unknown; ownSeq: number; v?: number };
}

/** A snapshot to keep on the device, and which of our ops it holds (see ViewEngine.baseToSave). */
export interface BaseSnapshot {
  pos: number;
  state: unknown;
  /** Every op of ours with seq <= ownSeq is inside `state`; the store may delete them with it. */
  ownSeq: number;
  /** The machine version of `state` (docs/migrations.md); absent: the restoring machine's. */
  v?: number;
}

/** Work the adapter must carry out, drained after each input. */
export interface EngineOutput {
  send: ClientMessage[];
  /** Ops to persist in order; confirm with `durable(seq)` once written. */
  persist: OpRecord[];
  /**
   * The connection is out of step with the server (a gap in the log, an entry we cannot place):
   * the adapter must drop it and connect again, so the welcome resynchronises this client.
   */
  resync?: string;
  /** Our ops whose stage changed, in the order the changes happened. */
  progressed: OwnOp[];
  /** Views whose snapshot changed (by identity). */
  changed: Set<ViewName>;
  /** Membership of the visibility set changed. */
  membersChanged: boolean;
  /** Another connection's presence changed (or all of them: a welcome, a disconnect). */
  presenceChanged: boolean;
  /** Non-fatal protocol or determinism problems, for logging. */
  warnings: string[];
  /** A fatal error from the server: the adapter must stop reconnecting. */
  fatal?: { code: ErrorCode; message: string };
}

type AuthItem = LogEntry & { readonly own?: OwnOp };

/** The view engine, with presence only when its options give it (see ViewEngine). */
export class LeanViewEngine<S = unknown> {
  readonly machine: Machine<S>;
  readonly clientId: string;
  private author: string;
  /** What the server lets this client do, from the last welcome; 'write' until told otherwise. */
  #access: 'read' | 'write' = 'write';
  private readonly now: () => number;
  readonly #cpuNow: () => number;
  readonly #onOwnRun: ((before: S, after: S, ops: readonly OwnOp[], patches: readonly Patch[]) => void) | undefined;
  private batching: Batching;

  // --- the five snapshots
  #stableState: S;
  #visibleState: S;
  #authState: S;
  #durableState: S;
  /** Read through `submitted()`: the last `ownUnapplied` ops of submittedList are not in it yet. */
  #submittedState: S;
  /**
   * Ops submitted and not yet applied to the Submitted snapshot: `submit` leaves that to the
   * first read (a getState, the notification round after the turn's send, a step that rebases),
   * so the op goes on the wire before the speculative run, not after it (60.6 of submit's 124 µs
   * at the median after 100 ms idle: bench/src/submit-idle.bench.ts).
   */
  #ownUnapplied = 0;

  // --- positions and lists
  private stableLen = 0;
  #visibleLen = 0;
  private authLen = 0;
  /**
   * The longest Authoritative log a server has announced to this process (a base restored from
   * the store does not count: the room may have been restored from a backup since).
   */
  #heardLen = 0;
  #settled: AuthItem[] = [];
  #authList: AuthItem[] = [];
  /**
   * The snapshot of the log right after some held entries: the end of each applied run, each
   * tentative frame's last entry (the state it was applied to), and the entry before each of our
   * ops that Visible may stop at. Visible and Stable are prefixes of Authoritative and
   * Authoritative a prefix of the tentative log, so advancing them is a lookup, not a second and
   * third application of every op (a third of a client's CPU under the paper's byte-array load;
   * re-running promoted entries and Visible's catch-up were still 0.8 of 1.8 runs per op
   * delivered at 32 clients in Fig. 14). Entries leave these lists at the stable frontier, so
   * what this keeps alive is bounded by the unstable window.
   */
  #afterOf = new WeakMap<AuthItem, S>();
  /**
   * Entries at the end of the Authoritative log that are not yet applied: authState is the state
   * before them. A step applies them together (materialize), so a busy room's entries copy a
   * large map once or twice per step, not once each.
   */
  #unapplied: AuthItem[] = [];
  /** A Notify-Visible or Notify-Stable came in this step; its lists move at the step's end. */
  #progressDue = false;
  #durableList: OwnOp[] = [];
  #submittedList: OwnOp[] = [];
  /**
   * Other clients' entries the server sent before storing them (LOG-TENTATIVE), from authLen + 1:
   * in Durable and Submitted, never Authoritative, until a committed message (VIEW-TENTATIVE).
   * A welcome forgets them (the log it brings is the stored one).
   */
  private tentList: LogEntry[] = [];
  /** The state after the tentative entries (log[1..authLen + tentList.length]); undefined when there are none. */
  #tentState: S | undefined;

  // --- own-op bookkeeping
  private lastSeq = 0;
  #highWater = 0;
  #visibleSeq = 0;
  private serverStable = 0;
  /** Highest seq of our ops inside the Stable view (they leave client storage with a base). */
  #stableOwnSeq = 0;
  /** Our ops up to here are inside a base the store holds (restored, or baseSaved): a restart never restores them. */
  #settledSeq = 0;
  /**
   * Seqs of our rejected ops whose rejection the server may still keep: it forgets them once we
   * say a saved base holds them (SettledMessage, OP-VERDICT-KEPT). Rejections are rare: a short list.
   */
  #unsettledRejections = new Set<number>();
  /** Our op digest chain at lastSeq; undefined when a restored store kept none. */
  #headDigest: number | undefined = GENESIS_DIGEST;
  /** The seq of our last op that exists (persisted, or submitted in this process); below lastSeq after a restart from a reservation. */
  #prevSeq = 0;
  /**
   * Our ops up to here may be sent before the store confirms them: the store holds a reservation
   * of these seqs, so a crash can never reuse one (DUR-BEFORE-SEND). 0 with a store that keeps
   * no reservations: then only durable ops are sent, as in the paper.
   */
  private reservedSeq = 0;
  /** The highest seq our store confirmed (in this process, or restored): ops run at most RECENT_DIGESTS ahead of it. */
  #durableSeq = 0;
  /**
   * Restored past seqs an earlier process reserved: our last persisted op and its digest, which
   * each hello asks the server to verify (HelloMessage.verify).
   */
  #verifyFrom: { seq: number; digest: number | undefined } | undefined;
  /**
   * The lowest clock our text inserts may take (TEXT-ID-ONCE): above every clock of our ops
   * this process does not hold, which an earlier one may have sent, of the inserts it restored,
   * and of every insert it submitted. Never taken from a view alone: an own insert anchored on
   * another client's tentative character fails in our views once a server that crashed before
   * its commit welcomes us without it, until that client sends it again (simulator seed 1075).
   * 0 for a new client.
   */
  #textFloor = 0;
  /** Submitted ops may be sent before they are durable: at the end of the turn (flushSends). */
  #sendDue = false;
  /** An own op became authoritative this step straight from the Submitted list (sent before it was durable). */
  #ackedEarly = false;
  /** Ops with seq <= sentSeq went out on the current connection. */
  #sentSeq = 0;

  /** Presence: ephemeral, apart from every view (presence.ts); undefined: this engine has none. */
  readonly presenceState: PresenceState | undefined;

  // --- connection
  #connState: 'offline' | 'hello-sent' | 'ready' | 'resync' = 'offline';
  #memberList: readonly string[] = [];

  // --- batching
  #inbox: ServerMessage[] = [];
  #flushAt = Infinity;
  /** When remote ops were last applied (auto batching: at most one immediate step per interval). */
  private lastRemoteStep = -Infinity;
  #opCostMs = 0; // EWMA of CPU per re-applied op, for auto batching
  private needRebase = false;
  /** Verdicts from the welcome being processed, for ops compacted into its checkpoint. */
  #welcomeRejected: ReadonlyMap<number, Rejection> = NO_REJECTIONS;
  #ackDue = false;
  /** durableSeq as last told the server on this connection (AckMessage.durable). */
  #durableSaid = 0;

  // --- statistics (read by the inspector and benchmarks)
  readonly stats = { rebases: 0, rebasedOps: 0, framesBatched: 0, flushes: 0, divergences: 0 };

  private out: EngineOutput = emptyOutput();

  constructor(machine: Machine<S>, opts: ViewEngineOptions<S>, restore?: ClientRestore) {
    if (!opts || typeof opts.clientId !== 'string' || opts.clientId.length === 0 || opts.clientId.length > 128 || !wellFormed(opts.clientId)) {
      // (A lone surrogate would reach the server as U+FFFD: another id than the client's own.)
      throw new HerculesError('bad-argument', 'ViewEngine: clientId must be a non-empty string of at most 128 characters of valid Unicode');
    }
    if (typeof opts.now !== 'function') throw new HerculesError('bad-argument', 'ViewEngine: `now` must be a clock function returning milliseconds');
    this.machine = machine;
    this.clientId = opts.clientId;
    this.author = opts.author ?? opts.clientId;
    this.now = opts.now;
    this.#cpuNow = opts.cpuNow ?? opts.now;
    this.batching = validateBatching(opts.batching ?? 'off');
    this.#onOwnRun = opts.onOwnRun;
    this.presenceState = opts.presence || undefined;

    const base = restore?.base;
    // A base of an older version is migrated here only to show something offline: the welcome
    // replaces it with the room's checkpoint (docs/migrations.md).
    const s0 = (
      base ? (base.v !== undefined && base.v !== machine.version ? migrateState(machine, base.state, base.v) : deepFreeze(base.state)) : machine.initial
    ) as S;
    const pos0 = base ? base.pos : 0;
    this.#stableState = this.#visibleState = this.#authState = this.#durableState = this.#submittedState = s0;
    this.stableLen = this.#visibleLen = this.authLen = this.serverStable = pos0;
    if (restore) {
      this.lastSeq = restore.lastSeq;
      this.#stableOwnSeq = this.#settledSeq = base?.ownSeq ?? 0;
      this.#headDigest = restore.lastDigest ?? (restore.lastSeq === 0 ? GENESIS_DIGEST : undefined);
      const t = this.now();
      for (const r of restore.durable) {
        if (r.client !== this.clientId || r.seq <= this.#stableOwnSeq) continue;
        const op = this.#makeOwn(r.seq, r.name, r.args === undefined ? undefined : deepFreeze(structuredClone(r.args)), 'durable', t);
        if (r.digest !== undefined) op.digest = r.digest;
        // Written against an older version: applied and sent as such, translated (MigrateFrom.op).
        if (r.v !== undefined && r.v !== machine.version) Object.assign(op, { v: r.v });
        this.#durableList.push(op);
        if (r.after !== undefined) op.after = r.after;
        if (r.seq > this.lastSeq) {
          this.lastSeq = r.seq;
          this.#headDigest = r.digest;
        }
      }
      this.#prevSeq = this.#durableSeq = this.lastSeq;
      // Seqs an earlier process reserved may be on the server without being here: never reuse them.
      if (restore.reservedSeq !== undefined && restore.reservedSeq > this.lastSeq) {
        this.#verifyFrom = { seq: this.lastSeq, digest: this.#headDigest };
        this.lastSeq = restore.reservedSeq;
      }
      this.reservedSeq = this.lastSeq;
      this.#textFloor = Math.max(textClockFloor(unheldSeq(this.#durableList, this.#stableOwnSeq, this.lastSeq)), heldClockEnd(this.#durableList));
      this.#durableState = this.#submittedState = this.fold(this.#authState, this.#durableList, this.authLen + 1);
    }
  }

  static emptyOutput(): EngineOutput {
    return emptyOutput();
  }

  // ================================================================ reads

  /** O(1); never blocks; the snapshot is frozen and never mutated afterwards. */
  getState(view: ViewName): S {
    switch (view) {
      case 'submitted':
        return this.submitted();
      case 'durable':
        return this.#durableState;
      case 'authoritative':
        return this.#authState;
      case 'visible':
        return this.#visibleState;
      case 'stable':
        return this.#stableState;
      default:
        throw new HerculesError('bad-argument', `unknown view ${JSON.stringify(view)}; use one of ${VIEWS.join(', ')}`);
    }
  }

  /** Lengths of each view's log: global positions for the three certain views, plus pending counts. */
  positions() {
    return {
      stable: this.stableLen,
      visible: this.#visibleLen,
      authoritative: this.authLen,
      durable: this.authLen + this.tentList.length + this.#durableList.length,
      submitted: this.authLen + this.tentList.length + this.#durableList.length + this.#submittedList.length,
    };
  }

  /** Log ids of each view, for invariant checks and the inspector. O(window). */
  viewLog(view: ViewName): { upTo: number; tail: string[] } {
    const p = this.positions();
    if (view === 'stable' || view === 'visible' || view === 'authoritative') return { upTo: p[view], tail: [] };
    const own = view === 'durable' ? this.#durableList : [...this.#durableList, ...this.#submittedList];
    return { upTo: this.authLen, tail: [...this.tentList.map((e) => `${e.client}:${e.seq}`), ...own.map((o) => o.id)] };
  }

  /** Other clients' entries held before the server stored them (LOG-TENTATIVE), for checks and inspection. */
  tentativeEntries(): readonly LogEntry[] {
    return this.tentList;
  }

  /** Entries between stable and authoritative the engine still holds (for checks and inspection). */
  heldEntries(): readonly LogEntry[] {
    return [...this.#settled, ...this.#authList];
  }

  pending(): readonly OwnOp[] {
    return [...this.#authList.filter((e) => e.own).map((e) => e.own!), ...this.#durableList, ...this.#submittedList];
  }

  members(): readonly string[] {
    return this.#memberList;
  }

  /** What the server lets this client do ('write' until a welcome says otherwise). */
  accessLevel(): 'read' | 'write' {
    return this.#access;
  }

  connection(): 'offline' | 'connecting' | 'ready' {
    return this.#connState === 'offline' || this.#connState === 'resync' ? 'offline' : this.#connState === 'hello-sent' ? 'connecting' : 'ready';
  }

  /** What must be persisted for this client to restart: see ClientRestore. */
  persistedShape(): { lastSeq: number; highWater: number } {
    return { lastSeq: this.lastSeq, highWater: this.#highWater };
  }

  /**
   * What to keep on the device as a base to start offline from: the Stable view, its position,
   * and the highest seq of our ops inside it. A store saves it and deletes our ops up to ownSeq
   * in one atomic step, never before: an op leaves the device only inside a state that holds it,
   * so the Durable view after a crash is never behind the one before.
   */
  baseToSave(): BaseSnapshot {
    return { pos: this.stableLen, state: this.#stableState, ownSeq: this.#stableOwnSeq };
  }

  /** When the adapter should call `tick` next (ms on the engine clock), or Infinity. */
  nextDeadline(): number {
    return this.#inbox.length > 0 ? this.#flushAt : Infinity;
  }

  setBatching(b: Batching): void {
    this.batching = validateBatching(b);
    if (this.batching === 'off') this.flushInbox();
  }

  // ================================================================ presence

  /** Whether a presence change waits for flushPresence. */
  presencePending(): boolean {
    return this.#connState === 'ready' && !!this.presenceState?.due();
  }

  /** Send our latest presence, if it changed since the last one sent (on a ready connection). */
  flushPresence(): void {
    if (this.#connState === 'ready') this.presenceState?.flush(this.out.send);
  }

  #onPresence(peers: readonly PeerPresence[], all = false): void {
    if (!this.presenceState) return;
    this.presenceState.heard(peers, all);
    this.out.presenceChanged = true;
  }

  /**
   * Take what the adapter must do now. Ops `submit` left unapplied run first, unless
   * `deferSubmitted` (the adapter's drain right after a submit, whose op is to be sent before it
   * runs: ClientRoom): then `changed` holds 'submitted' while any wait, whether or not running
   * them will change the snapshot, and a later drain or read runs them.
   */
  drain(deferSubmitted = false): EngineOutput {
    if (deferSubmitted) {
      if (this.#ownUnapplied > 0) this.out.changed.add('submitted');
    } else this.submitted();
    if (this.#ackDue && this.#connState === 'ready') {
      // Piggybacked, never a frame of its own: it only sharpens the server's test for a copied store.
      const grew = this.#durableSeq > this.#durableSaid;
      // What we hold, tentative entries too (protocol 5): the server keeps the stable frontier and
      // visibility within what it stored (AUTH-STORED).
      const pos = this.authLen + this.tentList.length;
      this.out.send.push(grew ? { t: 'ack', pos, durable: this.#durableSeq } : { t: 'ack', pos });
      if (grew) this.#durableSaid = this.#durableSeq;
    }
    this.#ackDue = false;
    if (this.#unsettledRejections.size > 0 && this.#connState === 'ready') this.#saySettled();
    const o = this.out;
    this.out = emptyOutput();
    return o;
  }

  // ================================================================ inputs

  /**
   * Submit an op (§4.3 step 1). The Submitted view holds it from now on; the op itself runs at
   * the first read of that view or the next drain (see `ownUnapplied`).
   */
  submit(name: string, args: unknown): OwnOp {
    if (!hasOp(this.machine, name)) {
      throw new HerculesError('unknown-op', `unknown op "${name}" for machine ${this.machine.name}; known ops: ${[...this.machine.opNames].join(', ')}`);
    }
    if (this.#access === 'read') {
      throw new HerculesError('forbidden', `${name}: this client has read-only access to the room; the server refuses its ops`);
    }
    // The op, the log and every replica hold these args exactly as the wire and the stores will
    // carry them (args.ts): a frozen copy, so no one edits it later either.
    args = domainCopy(name, args);
    const invalid = this.machine.validate(name, args);
    if (invalid !== undefined) throw new HerculesError('bad-argument', `${invalid} (the op was not submitted)`);
    this.checkTextClock(name, args);
    // The first op after seqs an earlier process reserved declares the gap, and starts a new
    // digest chain: the ops in the gap, if any reached the server, are not known here.
    const seq = this.lastSeq + 1;
    const after = seq === this.#prevSeq + 1 ? undefined : this.#prevSeq;
    const scan = scanOp(after === undefined ? (this.#headDigest ?? 0) : GENESIS_DIGEST, name, args);
    if ('problem' in scan) throw new HerculesError('too-large', `${name}: ${scan.problem}; split the change into smaller ops`);
    this.lastSeq = this.#prevSeq = seq;
    const op = this.#makeOwn(seq, name, args, 'submitted', this.now());
    op.bytes = scan.bytes;
    if (after !== undefined) op.after = after;
    if (this.#headDigest !== undefined || after !== undefined) op.digest = this.#headDigest = scan.digest;
    this.#submittedList.push(op);
    // Past this insert's clocks for good: our views may lose it for a while (its anchor is a
    // tentative character a crashed server lost), and a clock taken from them would be its again.
    this.#textFloor = Math.max(this.#textFloor, textClockEnd(name, args));
    this.#ownUnapplied++;
    this.out.progressed.push(op);
    this.out.persist.push({
      client: this.clientId,
      seq,
      name,
      args,
      ...(op.digest !== undefined ? { digest: op.digest } : {}),
      ...(after !== undefined ? { after } : {}),
    });
    if (seq <= this.reservedSeq) this.#sendDue = true;
    return op;
  }

  /** The lowest clock our text inserts may take (TEXT-ID-ONCE; text.ts, textClockFloor). */
  textClockFloor(): number {
    return this.#textFloor;
  }

  /**
   * An insert below the floor could give a character the id of one we sent, or an earlier
   * process of ours sent, which this one does not hold or cannot run yet (TEXT-ID-ONCE): refused
   * at submit.
   */
  private checkTextClock(name: string, args: unknown): void {
    if (name !== TEXT_INSERT || this.#textFloor === 0) return;
    const k = (args as { k?: unknown } | null)?.k;
    if (typeof k === 'number' && k < this.#textFloor)
      throw new HerculesError(
        'bad-argument',
        `${name}: clock ${k} is below ${this.#textFloor}, the first this client may use (earlier inserts may hold those below): take it from room.text() or room.textClockFloor(); op not submitted`,
      );
  }

  /**
   * The store holds a reservation of our seqs up to `seq` (DUR-BEFORE-SEND): ops up to it may
   * be sent before they are durable, so Durable and Authoritative overlap instead of adding.
   */
  reserved(seq: number): void {
    if (seq <= this.reservedSeq) return;
    this.reservedSeq = seq;
    this.#sendPending();
  }

  /**
   * Send the ops submitted since the last call that may go before they are durable, in one
   * frame: the adapter calls it once the submitting turn ends (as it starts their write), so a
   * burst of submits is one frame, and a submit returns without encoding or writing anything.
   */
  flushSends(): void {
    if (!this.#sendDue) return;
    this.#sendDue = false;
    this.#sendPending();
  }

  /**
   * Our ops reached the Stable view that no saved base holds yet. A rejected op changes no
   * snapshot, so the driver asks this too, not only whether Stable changed (OP-VERDICT-KEPT).
   */
  stableOwnUnsaved(): boolean {
    return this.#stableOwnSeq > this.#settledSeq;
  }

  /**
   * The store saved a base holding our ops up to `ownSeq` (BaseSnapshot.ownSeq): their outcome
   * survives a restart, so the server may forget their rejections (OP-VERDICT-KEPT).
   */
  baseSaved(ownSeq: number): void {
    if (ownSeq > this.#settledSeq) this.#settledSeq = ownSeq;
  }

  /** Tell the server which of the rejections it keeps for us our store now holds (protocol 6). */
  #saySettled(): void {
    const settled = this.#settledSeq;
    let said = false;
    for (const seq of this.#unsettledRejections) {
      if (seq > settled) continue;
      this.#unsettledRejections.delete(seq);
      said = true;
    }
    if (said) this.out.send.push({ t: 'settled', seq: settled });
  }

  /** The server rejected our op `seq` and keeps the rejection until we say it is settled. */
  #noteRejection(seq: number): void {
    this.#unsettledRejections.add(seq);
  }

  /** The seq the next `submit` will take. */
  nextSeq(): number {
    return this.lastSeq + 1;
  }

  /** Ops submitted that have not run yet (`ownUnapplied`): the next drain or read runs them. */
  submittedWaiting(): boolean {
    return this.#ownUnapplied > 0;
  }

  /** Ops wait for flushSends (submitted in this turn under a reservation). */
  sendsDue(): boolean {
    return this.#sendDue;
  }

  /** Storage confirms every op up to `seq` is persisted (§4.3 step 2, Make-Durable). */
  durable(seq: number): void {
    this.submitted();
    if (seq > this.#durableSeq) this.#durableSeq = seq;
    let n = 0;
    while (n < this.#submittedList.length && this.#submittedList[n].seq <= seq) n++;
    if (n === 0) return;
    const moved = this.#submittedList.splice(0, n);
    const t = this.now();
    const first = this.authLen + this.tentList.length + this.#durableList.length + 1;
    this.#durableList.push(...moved);
    const before = this.#durableState;
    // If nothing stays memory-only the two logs are equal: share the snapshot.
    this.#durableState = this.#submittedList.length === 0 ? this.#submittedState : applyOps(this.machine, this.#durableState, moved, first);
    if (this.#durableState !== before) this.out.changed.add('durable');
    for (const op of moved) this.advance(op, 'durable', t);
    this.#sendPending();
  }

  /** The transport connected (at `at`, by the wall clock: HelloMessage.at): introduce ourselves (Register, §4.6). */
  connected(at?: number): void {
    this.flushInbox();
    this.#connState = 'hello-sent';
    this.#sentSeq = this.#highWater;
    this.out.send.push({
      t: 'hello',
      v: PROTOCOL_VERSION,
      client: this.clientId,
      machine: { name: this.machine.name, version: this.machine.version },
      have: this.authLen,
      ...(at !== undefined ? { at } : {}),
      ...this.#verifyRequest(),
    });
  }

  /** The transport closed. Everything keeps working offline; ops queue until the next welcome. */
  disconnected(): void {
    this.flushInbox();
    // Whatever that flush wanted to say (acks, register) was for the dead connection.
    this.out.send = [];
    this.#ackDue = false;
    this.#connState = 'offline';
    // Others' presence is unknown offline; ours is said again after the next welcome.
    if (this.presenceState?.offline()) this.out.presenceChanged = true;
    if (this.#memberList.length) {
      this.#memberList = [];
      this.out.membersChanged = true;
    }
  }

  /** A message from the server, in the order the connection delivered it. */
  receive(msg: ServerMessage): void {
    this.receiveAll([msg]);
  }

  /**
   * Messages the connection delivered together (one socket read, one turn), in order: each is
   * taken as `receive` takes it, but the step they make ends once, after the last, so Durable
   * and Submitted are rebased once for all of them rather than once per frame (§4.5, without a
   * wait: a lone frame is one step, as before).
   */
  receiveAll(msgs: readonly ServerMessage[]): void {
    let stepping = false;
    for (const msg of msgs) {
      if (!this.admit(msg)) continue;
      if (!stepping) this.submitted(); // (a step moves our ops between lists and snapshots)
      stepping = true;
      this.#process(msg);
    }
    if (stepping) this.#finishStep();
  }

  /** Whether `msg` is to be processed now: not while offline or resyncing, nor queued for a batch. */
  private admit(msg: ServerMessage): boolean {
    if (this.#connState === 'resync') return false; // the adapter is replacing this connection
    if (this.#connState === 'offline') {
      this.out.warnings.push(`ignored ${msg.t} received while offline`);
      return false;
    }
    // Presence touches no log: never batched behind log frames.
    if (msg.t === 'presence') {
      this.#onPresence(msg.peers);
      return false;
    }
    const due = this.#inbox.length > 0 ? this.#flushAt : this.#batchDeadline(msg);
    if (due === undefined) return true;
    this.#inbox.push(msg);
    this.stats.framesBatched++;
    this.#flushAt = due;
    return false;
  }

  /** Clock tick: processes a due batch (§4.5). */
  tick(): void {
    if (this.#inbox.length > 0 && this.now() >= this.#flushAt) this.flushInbox();
  }

  // ================================================================ processing

  /**
   * When a frame should be processed (§4.5): at a deadline, queued, or now (undefined; auto
   * batching then notes the time of this step).
   */
  #batchDeadline(msg: ServerMessage): number | undefined {
    const b = this.batching;
    if (b === 'off') return undefined;
    if (!carriesRemoteOps(msg, this.clientId)) return undefined;
    const now = this.now();
    const interval = this.#batchInterval();
    if (!('auto' in b)) return now + interval;
    const budget = b.budgetMs ?? 4;
    const estimate = this.#opCostMs * (this.#durableList.length + this.#submittedList.length + countEntries(msg));
    if (estimate > budget) return now + interval;
    // Cheap, but the last step was less than an interval ago: wait for the interval's end.
    if (now - this.lastRemoteStep < interval) return this.lastRemoteStep + interval;
    this.lastRemoteStep = now;
    return undefined;
  }

  #batchInterval(): number {
    const b = this.batching;
    if (b === 'off') return 0;
    return b.intervalMs ?? 16;
  }

  private flushInbox(): void {
    if (this.#inbox.length === 0) return;
    this.submitted();
    const msgs = this.#inbox;
    this.#inbox = [];
    this.#flushAt = Infinity;
    this.lastRemoteStep = this.now();
    this.stats.flushes++;
    for (const m of msgs) this.#process(m);
    this.#finishStep();
  }

  /** Update lists for one message; snapshots of speculative views are rebased once per step. */
  #process(msg: ServerMessage): void {
    if (this.#connState === 'resync') return;
    switch (msg.t) {
      case 'welcome':
        this.#materialize();
        return this.#onWelcome(msg);
      case 'log': {
        if (this.#connState !== 'ready') {
          this.out.warnings.push('log before welcome ignored');
          return;
        }
        if (msg.tentative) {
          if (msg.committed !== undefined) this.promote(msg.committed);
          if (this.#outOfStep()) return;
          return this.onTentative(msg.from, msg.entries);
        }
        // A server confirms every tentative entry (committed) before it sends a later log as stored.
        if (this.tentList.length > 0) {
          this.#resync(`log at ${msg.from} while entries from ${this.authLen + 1} are still tentative`);
          return;
        }
        if (msg.from !== this.authLen + 1) {
          this.#resync(`log gap: expected position ${this.authLen + 1}, got ${msg.from}`);
          return;
        }
        for (const w of msg.entries) {
          this.#onEntry(w);
          if (this.#outOfStep()) return;
        }
        return;
      }
      case 'committed':
        if (this.#connState !== 'ready') return;
        return this.promote(msg.pos);
      // Both only move entries between lists, which the step's end does once for all of them.
      case 'visible':
        if (msg.seq > this.#visibleSeq) this.#visibleSeq = msg.seq;
        this.#progressDue = true;
        return;
      case 'stable':
        // A frontier is never past what the server stored: tentative entries up to it are (protocol 5).
        if (this.tentList.length > 0 && this.#connState === 'ready') {
          this.promote(msg.pos);
          if (this.#outOfStep()) return;
        }
        if (msg.pos > this.serverStable) this.serverStable = msg.pos;
        this.#progressDue = true;
        return;
      case 'members':
        this.#memberList = msg.members;
        this.out.membersChanged = true;
        return;
      case 'deregister':
        // Removed from the visibility set (ack timeout): ask to be re-added (§4.6).
        this.#memberList = this.#memberList.filter((m) => m !== this.clientId);
        this.out.membersChanged = true;
        if (this.#connState === 'ready') {
          this.#ackDue = true;
          this.out.send.push({ t: 'register' });
        }
        return;
      case 'ping':
      case 'acks': // delivery receipts: the room's (ClientRoom.receive), never queued here
        return;
      case 'presence':
        return this.#onPresence(msg.peers);
      case 'error': {
        // A code this version does not know (a newer server): kept in the message, not the code.
        const known = isErrorCode(msg.code);
        const code = known ? msg.code : 'internal';
        const message = known ? msg.message : `${String(msg.code)}: ${msg.message}`;
        if (msg.fatal) this.out.fatal = { code, message };
        else this.out.warnings.push(`server error ${code}: ${message}`);
        return;
      }
      default: {
        const unknown: never = msg; // every message type has its case; this one came off the wire
        this.out.warnings.push(`unknown server message ${(unknown as { t?: unknown }).t}`);
      }
    }
  }

  #onWelcome(w: WelcomeMessage): void {
    this.#durableSaid = 0; // say it again on each connection: the room may have restarted without it
    if (w.v !== PROTOCOL_VERSION) {
      this.out.fatal = { code: 'protocol-version', message: `server speaks protocol ${w.v}, this client ${PROTOCOL_VERSION}; upgrade the older side` };
      return;
    }
    const conflict = this.#ownershipConflict(w);
    if (conflict !== undefined) return this.#conflict(conflict);
    // A log shorter than one a server already announced to us: every announced entry was stored
    // first (AUTH-STORED), so this server serves a stale copy of the room (a cluster node that
    // lost the room without knowing it yet). Adopting it would move our views back (VIEW-*,
    // STABLE-MONOTONIC); reconnect instead, to whichever server holds the room now.
    if (w.checkpoint && w.checkpoint.pos + w.entries.length < this.#heardLen)
      return this.#resync(`stale server: its welcome's log ends at ${w.checkpoint.pos + w.entries.length}, before position ${this.#heardLen} announced to us`);
    this.#connState = 'ready';
    this.#access = w.access ?? 'write';
    // What was sent ahead of its commit on an earlier connection: the welcome brings the stored log.
    if (this.tentList.length > 0) {
      this.tentList = [];
      this.#tentState = undefined;
      this.needRebase = true;
    }
    if (w.author !== this.author) {
      this.author = w.author;
      // Our speculative ops ran with a guessed author: recompute them with the real one.
      for (const op of [...this.#durableList, ...this.#submittedList]) (op as { author: string }).author = w.author;
      this.needRebase = true;
    }
    this.#welcomeRejected = new Map((w.rejected ?? []).map((r) => [r.seq, r]));
    for (const r of w.rejected ?? []) this.#noteRejection(r.seq);
    if (w.checkpoint) {
      // Snapshots handed to the app are immutable, including ones that came off the wire.
      this.#resetTo(w.checkpoint.pos, deepFreeze(w.checkpoint.state as S));
      // Our ops up to highWater that the entries do not carry are inside the checkpoint (our
      // ops are ordered by seq, and the entries follow the checkpoint).
      const firstOwn = w.entries.find((e) => e.client === this.clientId);
      this.#stableOwnSeq = Math.max(this.#stableOwnSeq, firstOwn ? firstOwn.seq - 1 : w.highWater);
    } else if (w.from !== this.authLen + 1) {
      return this.#resync(`welcome resumes at ${w.from} but we hold ${this.authLen}`);
    }
    for (const e of w.entries) {
      this.#onEntry({ k: 'op', e });
      if (this.#connState !== 'ready') return;
    }
    // Our ops the server already ordered but we did not see (their entries were compacted into
    // the checkpoint) are authoritative and, being in the checkpoint, visible to all.
    // (Ops sent before they were durable may be among them, still in the Submitted list.)
    const t = this.now();
    for (let op = this.#heldHead(); op !== undefined && op.seq <= w.highWater; op = this.#heldHead()) {
      this.#settleCompacted(this.#shiftHeld(), this.#welcomeRejected, t);
      this.needRebase = true;
    }
    this.#welcomeRejected = NO_REJECTIONS;
    if (w.highWater > this.lastSeq) {
      // Nothing we hold is that old (checked above): continue the server's chain.
      this.lastSeq = this.#prevSeq = w.highWater;
      this.#headDigest = w.digest;
    }
    if (w.highWater > this.#highWater) this.#highWater = w.highWater;
    this.onVisible(w.visibleSeq);
    this.onStable(w.stable);
    this.#memberList = w.members;
    this.out.membersChanged = true;
    this.#onPresence(w.presence ?? [], true);
    this.#ackDue = true;
    this.#sentSeq = this.#highWater;
    const hole = this.#ownHole();
    if (hole !== undefined) return this.#holeFound(hole);
    this.#sendPending();
  }

  /** Drop everything older than a server checkpoint and restart the certain views from it. */
  #resetTo(pos: number, state: S): void {
    // Ops in our lists that the checkpoint covers are settled below; the rest are re-derived.
    const t = this.now();
    for (const e of [...this.#settled, ...this.#authList]) {
      if (!e.own) continue;
      if (e.pos > pos) {
        // Ordered after the checkpoint: it will come again in the welcome entries.
        this.#durableList.unshift(e.own);
      } else {
        // Inside the checkpoint, which is stable: every member has it.
        this.advance(e.own, 'visible', t);
      }
    }
    this.#durableList.sort((a, b) => a.seq - b.seq);
    this.#settled = [];
    this.#authList = [];
    this.stableLen = this.#visibleLen = this.authLen = pos;
    this.serverStable = Math.max(this.serverStable, pos);
    if (pos > this.#heardLen) this.#heardLen = pos;
    this.#stableState = this.#visibleState = this.#authState = state;
    this.out.changed.add('stable').add('visible').add('authoritative');
    this.needRebase = true;
  }

  /** `promoted`: a tentative entry now stored; the speculative logs already hold it, and it was acked. */
  #onEntry(w: WireEntry, promoted = false): void {
    const pos = this.authLen + 1;
    let entry: AuthItem;
    if (w.k === 'own') {
      const own = this.#heldHead();
      if (!own || own.seq !== w.seq) {
        this.stats.divergences++;
        return this.#resync(`server ordered our op seq ${w.seq} but we hold ${own ? own.seq : 'none'}`);
      }
      entry = {
        pos,
        client: this.clientId,
        seq: own.seq,
        name: own.name,
        args: own.args,
        author: this.author,
        error: w.error,
        ...(w.refused ? { refused: true as const } : {}),
        // Written against an older version: the server ordered its translation (MigrateFrom.op).
        ...(own.v !== undefined ? { v: own.v } : {}),
        own,
      };
    } else {
      const e = w.e;
      if (e.pos !== pos) return this.#resync(`entry at ${e.pos} where ${pos} was expected`);
      let own: OwnOp | undefined;
      if (e.client === this.clientId) {
        // Our op in full form (catch-up). Ours with a lower seq were ordered before it, inside
        // the checkpoint: they are authoritative and visible.
        const t = this.now();
        for (let op = this.#heldHead(); op !== undefined && op.seq < e.seq; op = this.#heldHead()) {
          this.#settleCompacted(this.#shiftHeld(), this.#welcomeRejected, t);
          this.needRebase = true;
        }
        const head = this.#heldHead();
        if (head !== undefined && head.seq === e.seq) {
          own = head;
          // Written against an older version, it was ordered as its translation (the server
          // keeps the op as sent only when the translation refuses it).
          const tr = own.v !== undefined && !e.refused ? translateOp(this.machine, own.v, own.name, own.args) : undefined;
          const ordered = tr !== undefined && !('refuse' in tr) ? tr : own;
          // A refused op enters the log without its arguments: only its name can be compared.
          if (ordered.name !== e.name || (!e.refused && !sameArgs(ordered.args, e.args))) {
            return this.#conflict(`the server ordered a different op (${e.name}) than ours (${own.name}) under ${own.id}`);
          }
        } else if (this.#durableList.some((o) => o.seq === e.seq) || this.#submittedList.some((o) => o.seq === e.seq)) {
          this.out.warnings.push(`our op seq ${e.seq} ordered out of sequence`);
          this.stats.divergences++;
        }
      }
      entry = own ? { ...e, own } : e;
    }
    this.#unapplied.push(entry); // applied at the step's end, with the entries around it (materialize)
    this.authLen = pos;
    if (pos > this.#heardLen) this.#heardLen = pos;
    // A promoted entry was acked when it came (protocol 5): its promotion tells the server nothing.
    if (!promoted) this.#ackDue = true;
    const blocksVisible = entry.client === this.clientId && entry.seq > this.#visibleSeq;
    if (this.#authList.length === 0 && !blocksVisible) {
      this.#settled.push(entry);
      this.#visibleLen = pos;
    } else {
      this.#authList.push(entry);
    }
    if (entry.client === this.clientId) {
      if (entry.seq > this.#highWater) this.#highWater = entry.seq;
      if (entry.error !== undefined) this.#noteRejection(entry.seq);
      if (entry.own) {
        if (this.#heldHead() === entry.own) this.#shiftHeld();
        const t = this.now();
        entry.own.pos = pos;
        if (entry.error !== undefined) {
          entry.own.error = entry.error;
          if (entry.refused) entry.own.refused = true;
          this.advance(entry.own, 'rejected', t);
          // A rejected op had an effect in the speculative views; they must drop it.
          this.needRebase = true;
        } else {
          this.advance(entry.own, 'authoritative', t);
          if (entry.seq <= this.#visibleSeq) this.advance(entry.own, 'visible', t);
        }
      }
      // An own op moving from Durable to Authoritative changes no speculative log.
      if (!entry.own) this.needRebase = true;
    } else if (!promoted) {
      this.needRebase = true;
    }
  }

  /**
   * Other clients' entries sent before their commit (LOG-TENTATIVE): into Durable and Submitted
   * at once (VIEW-TENTATIVE), Authoritative only once a committed message says they are stored.
   */
  private onTentative(from: number, entries: readonly WireEntry[]): void {
    const at = this.authLen + this.tentList.length + 1;
    if (from !== at) return this.#resync(`tentative log gap: expected position ${at}, got ${from}`);
    const added: LogEntry[] = [];
    for (const w of entries) {
      // Our own ops are announced only once stored (AUTH-STORED): never tentative.
      if (w.k !== 'op' || w.e.client === this.clientId) return this.#resync(`our own op came as tentative at ${at + added.length}`);
      if (w.e.pos !== at + added.length) return this.#resync(`tentative entry at ${w.e.pos} where ${at + added.length} was expected`);
      added.push(w.e);
    }
    if (added.length === 0) return;
    this.#materialize();
    // The server sends them before it runs them (LOG-RUN-AFTER-SEND): an op that throws here is
    // what its verdict will be (ops are deterministic), and this copy carries it, so the entry
    // is skipped, not run again, wherever it is applied after its promotion.
    this.#tentState = applyOps(this.machine, this.#tentState ?? this.#authState, added, at, (i, error) => {
      added[i] = { ...added[i], error };
    });
    // Their promotion (materialize) and Visible and Stable start from here instead of re-running them.
    this.#afterOf.set(added[added.length - 1], this.#tentState);
    for (const e of added) this.tentList.push(e);
    this.needRebase = true;
    this.#ackDue = true; // they count as held (protocol 5)
  }

  /** The server applied `e` without error; this replica did not. Ops must be deterministic. */
  #diverged(e: LogEntry, error: string): void {
    this.stats.divergences++;
    this.out.warnings.push(`op ${e.client}:${e.seq} (${e.name}) threw here but not on the server: ${error}. Ops must be deterministic.`);
  }

  /** The server stored the log up to `pos`: its tentative entries up to there become Authoritative. */
  private promote(pos: number): void {
    let n = 0;
    while (n < this.tentList.length && this.tentList[n].pos <= pos) n++;
    if (n === 0) return;
    const moved = this.tentList.splice(0, n);
    // Durable and Submitted, which rest on the tentative state, keep their snapshots; the
    // Authoritative state starts from the tentative frames' states (afterOf) when materialized.
    if (this.tentList.length === 0) this.#tentState = undefined;
    for (const e of moved) {
      this.#onEntry({ k: 'op', e }, true);
      if (this.#outOfStep()) return;
    }
    // A stable frontier or a Notify-Visible may have come before this (it covers them): the
    // step's end moves Visible and Stable up to what is now Authoritative.
    this.#progressDue = true;
  }

  /**
   * Apply the unapplied entries to the Authoritative state: those already settled (a prefix of
   * them, ending at visibleLen) in one draft, whose result is the Visible state, then the rest in
   * another (see `unapplied`); each starts from the latest state known inside it (afterOf).
   */
  #materialize(): void {
    const run = this.#unapplied;
    const ackedEarly = this.#ackedEarly;
    this.#ackedEarly = false;
    if (run.length === 0) return;
    this.#unapplied = [];
    // Our ops became authoritative, accepted, and no other entry came between: Authoritative is
    // now exactly the Durable log, so its snapshot is the Durable one (ops are deterministic).
    // Adopting it saves re-running the ops and makes the two views one object again. Ops sent
    // under a reservation may be acknowledged before they are durable (they come off the
    // Submitted list, `ackedEarly`): then Durable, empty of our ops, becomes Authoritative too,
    // and Submitted keeps its log and its snapshot, which Authoritative adopts if no op is left.
    const adopt = !this.needRebase && this.#durableList.length === 0 && run.every((e) => e.own !== undefined && e.error === undefined);
    // Not adopting, an op of ours acked before it was durable has left the Submitted list while
    // the Durable snapshot lacks it: Durable and Submitted are rebuilt on the new Authoritative
    // state. (Promoted entries set no needRebase, so a step that promotes others' tentative
    // entries and takes our early-acked op, two frames of one turn, needs this.)
    if (ackedEarly && !adopt) this.needRebase = true;
    const adopted = !adopt ? undefined : !ackedEarly ? this.#durableState : this.#submittedList.length === 0 ? this.#submittedState : undefined;
    if (adopted !== undefined) this.#afterOf.set(run[run.length - 1], adopted);
    let k = 0;
    while (k < run.length && run[k].pos <= this.#visibleLen) k++;
    let state = this.#authState;
    if (k > 0) {
      state = this.#runTo(run, 0, k - 1, state);
      if (this.#visibleState !== state) {
        this.#visibleState = state;
        this.out.changed.add('visible');
      }
    }
    if (k < run.length) state = this.#runTo(run, k, run.length - 1, state);
    if (adopt && ackedEarly && this.#durableState !== state) {
      this.#durableState = state;
      this.out.changed.add('durable');
    }
    if (state !== this.#authState) this.out.changed.add('authoritative');
    this.#authState = state;
  }

  /**
   * The state after entries[to], given `state`, the one after entries[from - 1]: from the latest
   * state known in between (afterOf), the rest applied in one draft, cut before each of our ops
   * not yet visible (where Visible may stop) so that state is known too. Each run's end is kept.
   * `report`: an entry that throws here but not on the server is a divergence (a re-run for
   * Visible or Stable repeats what materialize already reported).
   */
  #runTo(entries: readonly AuthItem[], from: number, to: number, state: S, report = true): S {
    for (let i = to; i >= from; i--) {
      const known = this.#afterOf.get(entries[i]);
      if (known === undefined) continue;
      state = known;
      from = i + 1;
      break;
    }
    while (from <= to) {
      let end = from;
      while (end < to && !this.#blocksVisible(entries[end + 1])) end++;
      const first = from;
      const ops = first === 0 && end === entries.length - 1 ? entries : entries.slice(first, end + 1);
      state = applyOps(this.machine, state, ops, entries[first].pos, report ? (i, error) => this.#diverged(entries[first + i], error) : undefined);
      this.#afterOf.set(entries[end], state);
      from = end + 1;
    }
    return state;
  }

  /** Our op, not yet visible: Visible may stop right before it. */
  #blocksVisible(e: AuthItem): boolean {
    return e.client === this.clientId && e.seq > this.#visibleSeq;
  }

  private onVisible(seq: number): void {
    this.#materialize();
    if (seq > this.#visibleSeq) this.#visibleSeq = seq;
    let n = 0;
    while (n < this.#authList.length) {
      const e = this.#authList[n];
      if (e.client === this.clientId && e.seq > this.#visibleSeq) {
        // VIS-BY-STABLE: every member holds the log up to the stable frontier, so our own ops
        // there are visible (a protocol-3 server sends no Notify-Visible the frontier covers).
        if (e.pos > this.serverStable) break;
        this.#visibleSeq = e.seq;
      }
      n++;
    }
    if (n === 0) return;
    const moved = this.#authList.splice(0, n);
    this.#settled.push(...moved);
    this.#visibleLen += moved.length;
    const before = this.#visibleState;
    this.#visibleState = this.#authList.length === 0 ? this.#authState : this.#runTo(moved, 0, moved.length - 1, this.#visibleState, false);
    if (before !== this.#visibleState) this.out.changed.add('visible');
    const t = this.now();
    for (const e of moved) if (e.own && e.own.stage === 'authoritative') this.advance(e.own, 'visible', t);
    this.onStable(this.serverStable);
  }

  private onStable(pos: number): void {
    this.#materialize();
    if (pos > this.serverStable) this.serverStable = pos;
    // Stable is a prefix of Visible on this client: clamp to what we have made visible.
    const target = Math.min(this.serverStable, this.#visibleLen);
    if (target <= this.stableLen) return;
    const n = target - this.stableLen;
    const moved = this.#settled.splice(0, n);
    for (const e of moved) if (e.client === this.clientId && e.seq > this.#stableOwnSeq) this.#stableOwnSeq = e.seq;
    const before = this.#stableState;
    this.#stableState = target === this.#visibleLen ? this.#visibleState : this.#runTo(moved, 0, moved.length - 1, this.#stableState, false);
    this.stableLen = target;
    if (before !== this.#stableState) this.out.changed.add('stable');
  }

  /** After a batch of messages: one rebase of Durable and Submitted on Authoritative (§4.4/4.5). */
  #finishStep(): void {
    this.#materialize();
    if (this.#progressDue) {
      this.#progressDue = false;
      this.onVisible(this.#visibleSeq); // ends with onStable
      this.onStable(this.serverStable); // in case Visible did not move
    }
    this.rebase();
  }

  /** Durable and Submitted again on the new Authoritative state, if a step changed what they rest on. */
  private rebase(): void {
    if (!this.needRebase) return;
    this.needRebase = false;
    // Our new ops run alone first, so their effect is told apart from the remote ops' (undo).
    if (this.#onOwnRun && this.#ownUnapplied > 0) this.submitted();
    this.#ackedEarly = false; // (what it would have adopted is recomputed here)
    const t0 = this.#cpuNow();
    const beforeD = this.#durableState;
    const beforeS = this.#submittedState;
    this.#ownUnapplied = 0; // (folded below with the rest)
    const nd = this.#durableList.length;
    const ns = this.#submittedList.length;
    const nt = this.tentList.length;
    const base = nt === 0 ? this.#authState : this.#tentState!;
    this.#durableState = nd === 0 ? base : this.fold(base, this.#durableList, this.authLen + nt + 1);
    this.#submittedState = ns === 0 ? this.#durableState : this.fold(this.#durableState, this.#submittedList, this.authLen + nt + nd + 1);
    if (beforeD !== this.#durableState) this.out.changed.add('durable');
    if (beforeS !== this.#submittedState) this.out.changed.add('submitted');
    this.stats.rebases++;
    this.stats.rebasedOps += nd + ns;
    if (nd + ns > 0) {
      const perOp = (this.#cpuNow() - t0) / (nd + ns);
      this.#opCostMs = this.#opCostMs === 0 ? perOp : this.#opCostMs * 0.8 + perOp * 0.2;
    }
  }

  /** The Submitted snapshot, with the ops `submit` left unapplied run now, in one draft. */
  private submitted(): S {
    const k = this.#ownUnapplied;
    if (k === 0) return this.#submittedState;
    this.#ownUnapplied = 0;
    const list = this.#submittedList;
    const from = list.length - k;
    const first = this.authLen + this.tentList.length + this.#durableList.length + from + 1;
    const before = this.#submittedState;
    const ops = from === 0 ? list : list.slice(from);
    const patches: Patch[] | undefined = this.#onOwnRun ? [] : undefined;
    this.#submittedState = applyOps(this.machine, before, ops, first, undefined, patches);
    if (this.#submittedState !== before) this.out.changed.add('submitted');
    if (patches) this.#onOwnRun!(before, this.#submittedState, ops, patches);
    return this.#submittedState;
  }

  private fold(state: S, ops: readonly OwnOp[], firstPosition: number): S {
    return applyOps(this.machine, state, ops, firstPosition);
  }

  /**
   * The server's record of our ops must be ours: a client id used by two clients at once, or a
   * store restored from a backup, has ops under the same seqs that are not the ones the server
   * ordered. Taking them for ours would report them Visible while they exist nowhere.
   */
  #ownershipConflict(w: WelcomeMessage): string | undefined {
    const h = w.highWater;
    const held = [...this.#durableList, ...this.#submittedList];
    if (held.length === 0 || held[0].seq > h) return undefined;
    const id = `client id ${this.clientId}`;
    const atH = held.find((o) => o.seq === h);
    if (!atH) {
      // Seqs an earlier process of ours reserved and may have sent without persisting
      // (DUR-BEFORE-SEND): in a gap our next op declares, or past our last op up to lastSeq.
      // Ours only if the server's chain at our last persisted op before it is ours (HelloMessage.verify).
      const next = held.find((o) => o.seq > h);
      const v =
        next === undefined
          ? this.#verifyFrom !== undefined && h > this.#verifyFrom.seq && h <= this.lastSeq
            ? this.#verifyFrom
            : undefined
          : this.#gapBase(next);
      if (v === undefined || h <= v.seq) return `the server holds ops up to seq ${h} under ${id}, but this client only ever wrote up to seq ${this.lastSeq}`;
      if (w.digest === undefined || v.digest === undefined) return undefined; // a record or a store from before digests: nothing to compare
      if (!w.verified?.some((x) => x.seq === v.seq && x.digest === v.digest)) {
        return `the server holds ops up to seq ${h} under ${id}, past this client's last persisted op ${v.seq}, and its history there is not this client's`;
      }
      return undefined;
    }
    if (atH.digest !== undefined && w.digest !== undefined && atH.digest !== w.digest) {
      return `the ops the server holds under ${id} up to seq ${h} are not this client's`;
    }
    return undefined;
  }

  /** Another client wrote under our id: stop, loudly; nothing of ours may be taken as ordered. */
  #conflict(detail: string): void {
    this.stats.divergences++;
    this.#connState = 'resync';
    this.out.send = [];
    this.#ackDue = false;
    this.out.fatal = {
      code: 'client-id-conflict',
      message: `${detail}: another client uses this id, or this store was copied or restored from a backup; no pending op was delivered. Give each client its own id and store (let the library make the id), or discard this store.`,
    };
  }

  /**
   * The first of our ops the server has not ordered that does not follow the one before it (the
   * server's high-water mark, for the first) and declares no gap from there (LOG-OWN-HOLE).
   */
  #ownHole(): { from: number; next: number } | undefined {
    let prev = this.#highWater;
    for (const op of [...this.#durableList, ...this.#submittedList]) {
      if (op.seq !== prev + 1 && (op.after === undefined || op.after > prev)) return { from: prev + 1, next: op.seq };
      prev = op.seq;
    }
    return undefined;
  }

  /**
   * Our own ops have a hole the server would refuse with a fatal seq-gap on every connection:
   * stop before sending any, and say which seqs are missing and what can be done (LOG-OWN-HOLE).
   */
  #holeFound({ from, next }: { from: number; next: number }): void {
    this.#connState = 'resync';
    this.out.send = [];
    this.#ackDue = false;
    const missing = next - 1 > from ? `seqs ${from} to ${next - 1}` : `seq ${from}`;
    this.out.fatal = {
      code: 'seq-gap',
      message: `this client's store holds its op seq ${next} but not ${missing}, which the server never received (it holds up to seq ${this.#highWater}): the store dropped a write, or the server was restored from an older backup. Ops from seq ${next} on cannot be ordered, so none was sent, and reconnecting cannot change that; they stay in the store and room.pending() lists them. Submit again what matters from a new store (new client id), discard this one, and check the store adapter.`,
    };
  }

  #outOfStep(): boolean {
    return this.#connState === 'resync';
  }

  /** This connection is out of step: ignore the rest of it; the adapter reconnects. */
  #resync(reason: string): void {
    this.out.warnings.push(`${reason}; reconnecting to resynchronise`);
    this.#connState = 'resync';
    this.#inbox = [];
    this.#flushAt = Infinity;
    this.out.send = [];
    this.#ackDue = false;
    this.out.resync = reason;
  }

  /** Send Deliver-Operation for durable ops the server has not been sent on this connection. */
  #sendPending(): void {
    if (this.#connState !== 'ready') return;
    // Split into frames the server accepts: a bounded number of ops and of bytes per frame.
    let ops: { seq: number; name: string; args: unknown; after?: number; v?: number }[] = [];
    let bytes = 0;
    // Ops not yet durable go ahead of the store only within a reservation, and at most
    // RECENT_DIGESTS of them, so a restart can verify its last persisted op among the server's
    // recent digests. A burst past that waits for its write and goes in one frame, as it would
    // without reservations: sending part of it early would split it in two frames for nothing.
    const n = this.#submittedList.length;
    const last = n > 0 ? this.#submittedList[n - 1].seq : 0;
    const early = n > 0 && last <= this.reservedSeq && last <= this.#durableSeq + RECENT_DIGESTS;
    for (const op of early ? [...this.#durableList, ...this.#submittedList] : this.#durableList) {
      if (op.seq <= this.#sentSeq) continue;
      // Ops restored from a store are measured when first sent.
      const b = (op.bytes ??= wireBytes(op.name, op.args));
      if (ops.length > 0 && (ops.length >= MAX_OPS_PER_FRAME || bytes + b > FRAME_BUDGET_BYTES)) {
        this.out.send.push({ t: 'ops', ops });
        ops = [];
        bytes = 0;
      }
      const sent: { seq: number; name: string; args: unknown; after?: number; v?: number } = { seq: op.seq, name: op.name, args: op.args };
      if (op.after !== undefined) sent.after = op.after;
      if (op.v !== undefined) sent.v = op.v;
      ops.push(sent);
      bytes += b;
      this.#sentSeq = op.seq;
    }
    if (ops.length > 0) this.out.send.push({ t: 'ops', ops });
  }

  /** The op before the gap `op` declares, and our digest there (undefined: `op` declares none). */
  #gapBase(op: OwnOp): { seq: number; digest: number | undefined } | undefined {
    if (op.after === undefined) return undefined;
    const before = [...this.#durableList, ...this.#submittedList].find((o) => o.seq === op.after);
    // (Not held: ordered and settled already, so the server's ops in the gap follow it.)
    return { seq: op.after, digest: before ? before.digest : undefined };
  }

  /** What each hello asks the server to verify: the op before every gap we hold, and the restart's. */
  #verifyRequest(): { verify?: number[] } {
    const seqs = new Set<number>();
    for (const o of [...this.#durableList, ...this.#submittedList]) if (o.after !== undefined) seqs.add(o.after);
    if (this.#verifyFrom !== undefined) seqs.add(this.#verifyFrom.seq);
    return seqs.size ? { verify: [...seqs].slice(-MAX_VERIFY) } : {};
  }

  /** Our oldest op not yet ordered, as far as we know: Durable ones first, then Submitted ones. */
  #heldHead(): OwnOp | undefined {
    return this.#durableList.length > 0 ? this.#durableList[0] : this.#submittedList[0];
  }

  /**
   * Take heldHead() out of its list: the server ordered it. One from the Submitted list was
   * sent before it was durable (DUR-BEFORE-SEND): the Durable log grows by it (materialize).
   */
  #shiftHeld(): OwnOp {
    if (this.#durableList.length > 0) return this.#durableList.shift()!;
    this.#ackedEarly = true;
    return this.#submittedList.shift()!;
  }

  /** Our op was ordered but its entry is inside a checkpoint: learn its verdict from the welcome. */
  #settleCompacted(op: OwnOp, rejected: ReadonlyMap<number, Rejection>, t: number): void {
    const r = rejected.get(op.seq);
    if (r !== undefined) {
      op.error = r.error;
      if (r.refused) op.refused = true;
      this.advance(op, 'rejected', t);
    } else {
      this.advance(op, 'authoritative', t);
      this.advance(op, 'visible', t);
    }
  }

  #makeOwn(seq: number, name: string, args: unknown, stage: Stage, t: number): OwnOp {
    const op: OwnOp = { id: `${this.clientId}:${seq}`, client: this.clientId, seq, name, args, author: this.author, stage, times: {} };
    if (stage === 'durable') op.times.submitted = t;
    op.times[stage] = t;
    return op;
  }

  private advance(op: OwnOp, stage: Stage, t: number): void {
    const order: Stage[] = ['submitted', 'durable', 'authoritative', 'visible'];
    if (op.stage === 'rejected' || op.stage === stage) return;
    if (stage !== 'rejected' && order.indexOf(stage) < order.indexOf(op.stage)) return;
    // Fill skipped stages (e.g. durable+authoritative learned at once after a restart).
    if (stage !== 'rejected') {
      for (let i = order.indexOf(op.stage) + 1; i < order.indexOf(stage); i++) op.times[order[i]] ??= t;
    }
    op.stage = stage;
    op.times[stage] = t;
    this.out.progressed.push(op);
  }
}

/** A verdict the welcome carries for one of our ops whose entry may be compacted. */
type Rejection = WelcomeMessage['rejected'][number];
const NO_REJECTIONS: ReadonlyMap<number, Rejection> = new Map();

/**
 * The highest of our seqs up to `top` that a restarted process does not hold: not inside its
 * base (ops up to `ownSeq`) nor among the ops its store kept (`held`). An earlier process may
 * have sent it and crashed before its write (a reserved seq: DUR-BEFORE-SEND), or it lies in the
 * gap of an earlier crash, whose ops came back from the server but are in no base saved yet.
 * 0: every op of ours is held.
 */
function unheldSeq(held: readonly { seq: number }[], ownSeq: number, top: number): number {
  const have = new Set(held.map((o) => o.seq));
  for (let seq = top; seq > ownSeq; seq--) if (!have.has(seq)) return seq;
  return 0;
}

/**
 * The clock after the last of the text inserts we hold. One may fail in the view a restarted
 * process starts with (its anchor is another client's character that its base, older than the
 * insert or absent, lacks) though the server ran it: the text's `next` there is below its
 * clocks until the welcome, so they count apart (simulator seeds 1094 and 1).
 */
function heldClockEnd(held: readonly { name: string; args: unknown }[]): number {
  let end = 0;
  for (const o of held) end = Math.max(end, textClockEnd(o.name, o.args));
  return end;
}

function validateBatching(b: Batching): Batching {
  if (b === 'off') return b;
  if (b && typeof b === 'object') {
    const iv = (b as { intervalMs?: unknown }).intervalMs;
    if (iv !== undefined && !(typeof iv === 'number' && iv > 0 && Number.isFinite(iv))) {
      throw new HerculesError('bad-argument', `batching.intervalMs must be a positive number of milliseconds, got ${String(iv)}`);
    }
    if ('auto' in b) {
      const bud = b.budgetMs;
      if (bud !== undefined && !(typeof bud === 'number' && bud >= 0 && Number.isFinite(bud))) {
        throw new HerculesError('bad-argument', `batching.budgetMs must be a non-negative number of milliseconds, got ${String(bud)}`);
      }
      return b;
    }
    if (iv !== undefined) return b;
  }
  throw new HerculesError('bad-argument', `batching must be 'off', { intervalMs }, or { auto: true, budgetMs?, intervalMs? }; got ${JSON.stringify(b)}`);
}

function carriesRemoteOps(msg: ServerMessage, self: string): boolean {
  // A welcome is processed at once: it is rare and the client cannot send until it has it.
  if (msg.t !== 'log') return false;
  return msg.entries.some((w) => w.k === 'op' && w.e.client !== self);
}

function countEntries(msg: ServerMessage): number {
  return msg.t === 'log' || msg.t === 'welcome' ? msg.entries.length : 0;
}

/** An op's size on the wire (upper bound, see scanOp); ops restored from a store measure on send. */
function wireBytes(name: string, args: unknown): number {
  const scan = scanOp(0, name, args);
  return 'bytes' in scan ? scan.bytes : MAX_OP_BYTES;
}

function emptyOutput(): EngineOutput {
  return { send: [], persist: [], progressed: [], changed: new Set(), membersChanged: false, presenceChanged: false, warnings: [] };
}
