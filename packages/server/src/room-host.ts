/**
 * One room's pipeline: its `RoomEngine`, the ordered queue of the engine's outputs, and the
 * rules for carrying them out. Deterministic given its inputs (member events, store completions,
 * the clock): no sockets, no timers but the injected `Clock`, no storage but the `RoomStore`.
 * The server runs it over real connections and SQLite; the simulator over simulated ones and a
 * `MemoryStore`, so what the simulator checks is this code.
 *
 * Persist before send (AUTH-STORED). The engine's writes (log entries, client records) are
 * gathered over one commit window and appended to the store as one fenced append. Outputs go
 * out strictly in the order the engine made them; one that appends or claims (not
 * `RoomOutput.sendFirst`) waits until the store confirmed the append holding its writes, and so
 * does every output after it. Bookkeeping-only outputs (acks, stable frontiers) go out at once
 * when nothing waits before them, and then every entry ordered before them is stored: so a
 * stable frontier or a Notify-Visible that counts a member's ack of an entry it was sent ahead
 * of its commit (LOG-TENTATIVE, protocol 5) never goes out before that commit.
 *
 * Poisoning. When an append fails (I/O error, a value the store cannot hold, fenced by another
 * writer), the room's memory may be ahead of its store: the host stops serving at once. No
 * later output is sent, every member is told (`storage-failed`) and closed, and the owner
 * (the registry) drops the host, so the next join reloads the room from the store. Clients
 * resend what was never confirmed, exactly once by (client, seq).
 *
 * Checkpoints are written apart from the commit path: when the stable frontier has moved
 * `checkpointEvery` ops past the checkpoint the store holds, a checkpoint-only append follows
 * in a later turn. No output waits for it, so a large state never delays the ops being sent.
 * On release (unload, shutdown) the latest checkpoint is written too.
 */
import {
  RoomEngine,
  type AuthorizeOp,
  type ClientRecord,
  type ErrorCode,
  type LogEntry,
  type Machine,
  type Principal,
  type RoomOutput,
  type ServerMessage,
  type ServerSubmitResult,
  type WireEntry,
  HerculesError,
} from '@hercules/core';
import type { Clock } from './clock.ts';
import { reconnectToResume } from './recovery.ts';
import { FencedError, StorageError, type LoadedRoom, type RoomStore } from './store/room-store.ts';

/** A member as the room sees it: where its messages go. Encoding and buffering are the connection's business. */
export interface RoomMember {
  /** The connection id, unique while the host runs. */
  readonly id: string;
  send(msg: ServerMessage): void;
  /**
   * The time (the host's clock) up to which its input has been handed to the room: the arrival
   * of its oldest frame still waiting for a turn, or now. Its ack may be in what waits, so a busy
   * server does not count it late (VIS-DROP-DEAD). Absent: now.
   */
  heardUntil?(): number;
  /**
   * The room is done with this member: close its connection. `refused` is the error code the
   * room sent it just before (a fatal error, or `storage-failed` when the room failed).
   */
  close(code: number, reason: string, refused?: ErrorCode): void;
}

/** What a host reports, for logs and metrics. All optional. */
export interface RoomHostEvents {
  warning?(message: string): void;
  /**
   * An output went out (`at`: when the input that made it came in, by the host's clock), with
   * where its time went (see OutputPath).
   */
  delivered?(out: RoomOutput, at: number, now: number, path: OutputPath): void;
  /** The store confirmed a commit of `ops` log entries, `ms` after it was asked. */
  committed?(ops: number, ms: number): void;
  /** The entries of a commit the store confirmed, in log order (for onCommit hooks). */
  committedEntries?(entries: readonly LogEntry[]): void;
  /** The store confirmed a checkpoint at `pos`. */
  checkpointed?(pos: number): void;
  /** The host stopped serving (poisoned); its members were told `why` and closed. */
  failed?(stage: string, error: unknown, why: string): void;
}

export interface RoomHostOptions {
  /** The room's name in the store. */
  name: string;
  machine: Machine<any, any>;
  /** The room as the store loaded it: the engine starts from it, the first append follows its rev. */
  loaded: LoadedRoom;
  store: RoomStore;
  clock: Clock;
  ackTimeoutMs?: number;
  authorize?: AuthorizeOp<any>;
  /** Whether read-only connections may set presence (RoomOptions.readersPresence). */
  readersPresence?: boolean;
  /** Server-side pace of each connection's presence (RoomOptions.presenceEveryMs). */
  presenceEveryMs?: number;
  /** Write a checkpoint once the stable frontier is this many ops past the stored one. Default 1000. */
  checkpointEvery?: number;
  /** Gather writes this long before appending them (0, the default: until the current work is done). */
  commitWindowMs?: number;
  events?: RoomHostEvents;
}

export type RoomHostState = 'serving' | 'failed' | 'released';

/**
 * Where an output's time went on the server, in ms of the host's clock: the engine call that made
 * it; sending its tentative logs (LOG-TENTATIVE); running its ops after those (`apply`,
 * LOG-RUN-AFTER-SEND); then, for an output that waits for a commit, the wait for the commit to
 * start (the other inputs of the same task, or the commit window) and the commit itself; then
 * sending (encoding and writing each member's frame). Cheap: six clock reads per output.
 */
export interface OutputPath {
  engine: number;
  tentative: number;
  apply: number;
  commitWait?: number;
  commit?: number;
  send: number;
}

/**
 * An output waiting to go out: `needs` is the commit it waits for (0: none); `made`, when the
 * engine made it; `sent`, when its tentative logs were sent; `settled`, when its ops had run.
 */
interface Queued {
  out: RoomOutput;
  at: number;
  made: number;
  sent: number;
  settled: number;
  needs: number;
  /** Called once the output went out (after its commit), or with the error if the room failed first. */
  done?: (error?: Error) => void;
  /** Members sent this output's entries ahead of its commit (LOG-TENTATIVE), and the last position: told `committed` after it. */
  early?: { conn: string; pos: number }[];
}

const STORAGE_FAILED = reconnectToResume('the server could not write to its storage');

export class RoomHost {
  readonly name: string;
  private readonly engine_: RoomEngine<any>;
  private readonly store: RoomStore;
  private readonly clock: Clock;
  private readonly checkpointEvery: number;
  private readonly commitWindowMs: number;
  private readonly events: RoomHostEvents;
  private readonly members_ = new Map<string, RoomMember>();
  private state_: RoomHostState = 'serving';

  /** The rev the next append follows (the store's fence): the loaded rev plus one per append made. */
  private rev: number;
  /** Writes gathered for the next commit. */
  private stage: { entries: LogEntry[]; clients: Record<string, ClientRecord> } = { entries: [], clients: {} };
  private commitTimer: (() => void) | undefined;
  /** A commit is deferred to the end of the task (commitWindowMs 0). */
  private commitQueued = false;
  /** Commits appended so far, and the highest one the store confirmed. The stage becomes commit `issued + 1`. */
  private issued = 0;
  private confirmed = 0;
  /** Outputs not yet sent, in engine order, from `queueHead` on. */
  private queue: Queued[] = [];
  private queueHead = 0;
  /**
   * Each member's messages of the current send pass, in order; `ownEntries`: the last message
   * is a merged log whose entries array belongs to this outbox (see stageMessage).
   */
  private readonly outbox = new Map<string, { member: RoomMember; msgs: ServerMessage[]; ownEntries: WireEntry[] | undefined }>();
  /**
   * Messages queued (not yet sent) for each member. A tentative log goes ahead of its commit only
   * to a member with none, so nothing it was promised earlier (a welcome, a log) comes after it.
   */
  private readonly queuedFor = new Map<string, number>();
  /**
   * Confirmations (LOG-TENTATIVE) not sent yet, by member: held until the end of the event-loop
   * turn, so a tentative log sent meanwhile carries it instead of a frame of its own (a busy room
   * sends each member one frame per commit, not two). Anything else due to the member first sends it.
   */
  private readonly unconfirmed = new Map<string, number>();
  private confirmTimer: (() => void) | undefined;

  /** The checkpoint the store holds, and the newest one the engine made. */
  private storedCheckpoint: number;
  private latestCheckpoint: { pos: number; state: unknown } | undefined;
  private checkpointTimer: (() => void) | undefined;
  private checkpointing = false;
  /** Settles once every append made so far has settled (for release). */
  private tail: Promise<unknown> = Promise.resolve();
  /** Since when the room has had no members (the clock's time), for idle unloading. */
  emptySince: number;

  constructor(opts: RoomHostOptions) {
    this.name = opts.name;
    this.store = opts.store;
    this.clock = opts.clock;
    this.checkpointEvery = Math.max(1, opts.checkpointEvery ?? 1000);
    this.commitWindowMs = Math.max(0, opts.commitWindowMs ?? 0);
    this.events = opts.events ?? {};
    this.rev = opts.loaded.rev;
    this.storedCheckpoint = opts.loaded.durable.checkpoint.pos;
    this.engine_ = new RoomEngine(
      opts.machine,
      // settleLater: enqueue sends the tentative logs, then runs the ops (LOG-RUN-AFTER-SEND).
      {
        ackTimeoutMs: opts.ackTimeoutMs,
        authorize: opts.authorize,
        readersPresence: opts.readersPresence,
        presenceEveryMs: opts.presenceEveryMs,
        settleLater: true,
      },
      opts.loaded.fresh ? undefined : opts.loaded.durable,
    );
    this.emptySince = this.clock.now();
    // A room migrated as it loaded (REC-MIGRATE-ONCE) appends its migration entry now, before any
    // input, not with the first input's output: until then the host would say it is settled
    // with an entry its store does not have (found by the simulator: a cluster node that loaded
    // the room for a connection gone meanwhile).
    const d = opts.loaded.durable;
    if (!opts.loaded.fresh && this.engine_.head() > d.checkpoint.pos + d.suffix.length) this.tick();
  }

  // ---------------------------------------------------------------- reads

  /** The engine, to read (positions, members): feeding it directly would bypass the pipeline. */
  get engine(): RoomEngine<any> {
    return this.engine_;
  }
  get machine(): Machine<any, any> {
    return this.engine_.machine;
  }
  get state(): RoomHostState {
    return this.state_;
  }
  get memberCount(): number {
    return this.members_.size;
  }
  /** When each commit not yet passed by the send queue was asked for and confirmed (OutputPath). */
  private readonly commitTimes = new Map<number, { asked: number; done: number }>();
  /** Outputs waiting for their commit (or behind one that does). */
  get waiting(): number {
    return this.queue.length - this.queueHead;
  }
  hasMember(id: string): boolean {
    return this.members_.has(id);
  }
  /** Appends made and not yet confirmed, and writes not yet appended: the store is behind the engine. */
  get settled(): boolean {
    return this.issued === this.confirmed && this.stage.entries.length === 0 && Object.keys(this.stage.clients).length === 0 && !this.checkpointing;
  }

  // ---------------------------------------------------------------- inputs

  /** A connection joins (it said hello and was admitted): it is opened in the engine. */
  join(member: RoomMember, principal: Principal = {}): void {
    if (this.state_ !== 'serving') {
      member.close(1011, 'room unavailable', 'storage-failed');
      return;
    }
    this.members_.set(member.id, member);
    const now = this.clock.now();
    this.run('open', () => this.engine_.open(member.id, now, principal), now);
  }

  /**
   * A frame from a member (decoded, untrusted). Throws only on a bug in the engine; the caller
   * closes that member (the room goes on).
   */
  receive(memberId: string, frame: unknown): void {
    if (this.state_ !== 'serving' || !this.members_.has(memberId)) return;
    const now = this.clock.now();
    this.enqueue(this.engine_.message(memberId, frame, now), now);
  }

  /**
   * An op from the server's own API (RoomEngine.submitAsServer): resolves once it is committed
   * (and sent to the members), with its position; rejects with `unknown-op`/`bad-argument` for
   * an op that could never be ordered, or `storage-failed` if the room failed before the commit.
   */
  submit(author: string, name: string, args: unknown, key?: string): Promise<ServerSubmitResult> {
    if (this.state_ !== 'serving')
      return Promise.reject(new HerculesError('storage-failed', `room ${this.name} is not serving (it failed or was unloaded); try again`));
    const now = this.clock.now();
    if (this.members_.size === 0) this.emptySince = now; // activity: an idle room is not unloaded under it
    let r: ReturnType<RoomEngine<any>['submitAsServer']>;
    try {
      r = this.engine_.submitAsServer(author, name, args, key, now);
    } catch (e) {
      if (e instanceof HerculesError && (e.code === 'unknown-op' || e.code === 'bad-argument')) return Promise.reject(e);
      this.fail('submit', e, reconnectToResume(`the server failed in room ${this.name} (submit)`));
      return Promise.reject(e);
    }
    return new Promise((resolve, reject) => this.enqueue(r.out, now, (e) => (e ? reject(e) : resolve(r.result))));
  }

  /** A member's connection closed. */
  leave(memberId: string): void {
    if (!this.members_.delete(memberId)) return;
    if (this.members_.size === 0) this.emptySince = this.clock.now();
    if (this.state_ !== 'serving') return;
    const now = this.clock.now();
    this.run('close', () => this.engine_.close(memberId, now), now);
  }

  /** Keep time (ack timeouts); call it every ackTimeout / 20 or so. */
  tick(): void {
    if (this.state_ !== 'serving') return;
    const now = this.clock.now();
    const heard = (id: string) => this.members_.get(id)?.heardUntil?.() ?? now;
    this.run('tick', () => this.engine_.tick(now, heard), now);
  }

  /**
   * Stop serving and hand the room back to the store: append what is gathered, write the latest
   * checkpoint, wait for every append to settle, then `store.release`. Members still joined are
   * closed (1001). Rejects if a write failed (the room then reloads from what the store has).
   */
  async release(): Promise<void> {
    if (this.state_ === 'serving') {
      this.commit();
      if (this.latestCheckpoint && this.latestCheckpoint.pos > this.storedCheckpoint && !this.checkpointing) this.writeCheckpoint();
      this.state_ = 'released';
      this.cancelTimers();
      for (const m of this.members_.values()) m.close(1001, 'room unloaded');
      this.members_.clear();
    }
    await this.tail;
    // Outputs never sent (no one to send them to now): a submit waiting on one learns its fate.
    const unsent = this.queue.slice(this.queueHead);
    this.queue = [];
    this.queueHead = 0;
    this.queuedFor.clear();
    this.unconfirmed.clear();
    for (const q of unsent)
      q.done?.(
        q.needs <= this.confirmed ? undefined : new HerculesError('storage-failed', `room ${this.name} was unloaded before the write was confirmed; try again`),
      );
    await this.store.release(this.name);
  }

  // ---------------------------------------------------------------- the pipeline

  /** An engine call that must not throw: if it does (a bug), the room cannot be trusted and fails. */
  private run(stage: string, call: () => RoomOutput, now: number): void {
    let out: RoomOutput;
    try {
      out = call();
    } catch (e) {
      this.fail(stage, e, reconnectToResume(`the server failed in room ${this.name} (${stage})`));
      return;
    }
    this.enqueue(out, now);
  }

  private enqueue(out: RoomOutput, at: number, done?: (error?: Error) => void): void {
    const made = this.clock.now();
    if (this.events.warning) for (const w of out.warnings) this.events.warning(w);
    if (this.state_ !== 'serving') {
      done?.(new HerculesError('storage-failed', `room ${this.name} stopped serving; try again`));
      return;
    }
    // An output that appends or claims waits for the commit its writes go into.
    const needs = out.sendFirst ? 0 : this.issued + 1;
    // LOG-RUN-AFTER-SEND: the other members' copies of its ops leave first, then the ops run here
    // (settle), before anything of the output is staged or queued: a thrown op's error is then
    // in its entry, its author's Notify-Auth and record.
    const early = needs > this.confirmed ? this.sendTentative(out) : undefined;
    const sent = this.clock.now();
    try {
      this.engine_.settle(out);
    } catch (e) {
      this.fail('settle', e, reconnectToResume(`the server failed in room ${this.name} (running ops)`));
      done?.(e as Error);
      return;
    }
    const p = out.persist;
    let writes = p.appended.length > 0;
    if (writes) for (const e of p.appended) this.stage.entries.push(e);
    for (const c in p.clients) {
      this.stage.clients[c] = p.clients[c];
      writes = true;
    }
    if (writes) this.scheduleCommit();
    if (p.checkpoint) {
      this.latestCheckpoint = p.checkpoint;
      this.scheduleCheckpoint();
    }
    // An output that appends entries holds back the outputs after it until its commit, even with
    // nothing to send itself (a migration entry staged when the room loaded goes out with the
    // first output, a join's): else a later bookkeeping output (sendFirst) would overtake it, and
    // a welcome announce the migrated checkpoint before the migration is stored (AUTH-STORED).
    if (out.send.length === 0 && out.close.length === 0 && !done && p.appended.length === 0) return;
    for (const { conn } of out.send) this.queuedFor.set(conn, (this.queuedFor.get(conn) ?? 0) + 1);
    this.queue.push({ out, at, made, sent, settled: this.clock.now(), needs, ...(done ? { done } : {}), ...(early ? { early } : {}) });
    this.sendReady();
  }

  /**
   * LOG-TENTATIVE: send the logs the engine listed as tentative (other clients' entries, to
   * protocol-4 members) now, marked so, ahead of the commit they wait for, to each member that
   * has nothing queued before them; the rest go after the commit as stored logs. Returns who got
   * them early.
   */
  private sendTentative(out: RoomOutput): { conn: string; pos: number }[] | undefined {
    if (!out.tentative?.length) return undefined;
    const listed = new Set(out.tentative);
    let early: { conn: string; pos: number }[] | undefined;
    /** Members with a message of this output that stays queued, before the one at hand. */
    let held: Set<string> | undefined;
    let kept = 0;
    for (let i = 0; i < out.send.length; i++) {
      const item = out.send[i];
      const { conn, msg } = item;
      const m = listed.has(i) && msg.t === 'log' ? this.members_.get(conn) : undefined;
      if (m && msg.t === 'log' && !held?.has(conn) && !this.queuedFor.get(conn) && !this.outbox.has(conn)) {
        const committed = this.unconfirmed.get(conn);
        if (committed !== undefined) this.unconfirmed.delete(conn);
        m.send({ t: 'log', from: msg.from, entries: msg.entries, tentative: true, ...(committed !== undefined ? { committed } : {}) });
        (early ??= []).push({ conn, pos: msg.from + msg.entries.length - 1 });
        continue;
      }
      (held ??= new Set()).add(conn);
      out.send[kept++] = item;
    }
    out.send.length = kept;
    out.tentative = undefined; // (its indices were into the list before the filtering)
    return early;
  }

  /**
   * With no commit window, the writes of the current task (an input callback, a round of turns)
   * are appended as it ends (`clock.defer`, a microtask on the system clock): then every room's append of that task is queued
   * before the store's group commit of this event-loop turn runs. A 0 ms timer would append one
   * turn later, and the commit and its sends one turn later again (measured: R3 0.85x).
   */
  private scheduleCommit(): void {
    if (this.commitWindowMs > 0) {
      if (this.commitTimer === undefined) this.commitTimer = this.clock.after(this.commitWindowMs, () => this.commit());
      return;
    }
    if (this.commitQueued) return;
    this.commitQueued = true;
    this.clock.defer(() => {
      if (this.commitQueued) this.commit();
    });
  }

  /** Append the gathered writes: one fenced append per commit window. */
  private commit(): void {
    this.commitQueued = false;
    if (this.commitTimer !== undefined) {
      this.commitTimer();
      this.commitTimer = undefined;
    }
    if (this.state_ !== 'serving') return;
    const { entries, clients } = this.stage;
    if (entries.length === 0 && Object.keys(clients).length === 0) return;
    this.stage = { entries: [], clients: {} };
    const commit = ++this.issued;
    const asked = this.clock.now();
    this.commitTimes.set(commit, { asked, done: asked });
    this.append('commit', { after: this.rev++, ...(entries.length ? { entries } : {}), clients }, () => {
      this.confirmed = Math.max(this.confirmed, commit);
      const done = this.clock.now();
      const times = this.commitTimes.get(commit);
      if (times) times.done = done;
      this.events.committed?.(entries.length, done - asked);
      if (entries.length) this.events.committedEntries?.(entries);
      this.sendReady();
    });
  }

  /** Send the outputs at the front of the queue whose writes the store confirmed, in order. */
  private sendReady(): void {
    const q = this.queue;
    if (this.queueHead === q.length || q[this.queueHead].needs > this.confirmed) return;
    const start = this.clock.now();
    /** The outputs of this pass, for `delivered` once their frames are written. */
    const passed: Queued[] = [];
    try {
      while (this.queueHead < q.length && this.state_ === 'serving') {
        const next = q[this.queueHead];
        if (next.needs > this.confirmed) break;
        q[this.queueHead++] = undefined as unknown as Queued;
        // The last output of a pass with nothing staged (the usual case: one per pass) goes out directly.
        const last = this.queueHead === q.length || q[this.queueHead].needs > this.confirmed;
        this.deliver(next, last && this.outbox.size === 0);
        passed.push(next);
      }
      this.flushOutbox();
    } catch (e) {
      // A bug while sending: some member may have missed a message, a gap in its log.
      this.outbox.clear();
      this.fail('deliver', e, reconnectToResume(`the server failed while sending room ${this.name}'s changes`));
    }
    if (this.events.delivered) {
      const now = this.clock.now();
      for (const { out, at, made, sent, settled, needs } of passed) {
        const c = needs > 0 ? this.commitTimes.get(needs) : undefined;
        const first = { engine: made - at, tentative: sent - made, apply: settled - sent };
        const path: OutputPath = c ? { ...first, commitWait: c.asked - settled, commit: c.done - c.asked, send: now - start } : { ...first, send: now - start };
        this.events.delivered(out, at, now, path);
      }
    }
    // What is still queued waits for a later commit (or none): the times of confirmed ones are done with.
    for (const k of this.commitTimes.keys()) {
      if (k > this.confirmed) break;
      this.commitTimes.delete(k);
    }
    if (this.queueHead === q.length) {
      this.queue = [];
      this.queueHead = 0;
    } else if (this.queueHead > 1024 && this.queueHead * 2 > q.length) {
      this.queue = q.slice(this.queueHead);
      this.queueHead = 0;
    }
  }

  /**
   * Stage an output's messages in the outbox (or, `direct`, send them: the pass's last output with
   * nothing staged) and carry out its closes. A member's staged messages of one pass go out
   * together at its end (flushOutbox), in order, its consecutive log messages as one
   * (LOG-COALESCE): a commit that confirms the ops of many input frames sends each member one
   * frame, not one per input frame, so the member decodes and rebases once.
   */
  private deliver({ out, done, early }: Queued, direct: boolean): void {
    done?.();
    /** Fatal errors the engine sent, by connection: the reason a close below is given. */
    let fatal: Map<string, ErrorCode> | undefined;
    // Those sent the entries ahead of the commit hear that it is stored before anything else of
    // it or after it (a stable frontier of this output may cover the entries): held to the turn's
    // end, or to a tentative log that carries it, unless something else is due to them first.
    if (early) {
      for (const { conn, pos } of early) if (this.members_.has(conn)) this.unconfirmed.set(conn, Math.max(pos, this.unconfirmed.get(conn) ?? 0));
      this.confirmTimer ??= this.clock.after(0, () => this.sendConfirmations());
    }
    for (const { conn, msg } of out.send) {
      const n = (this.queuedFor.get(conn) ?? 1) - 1;
      if (n > 0) this.queuedFor.set(conn, n);
      else this.queuedFor.delete(conn);
      const m = this.members_.get(conn);
      if (!m) continue;
      this.confirmFirst(conn, m, direct, msg);
      if (msg.t === 'error' && msg.fatal) (fatal ??= new Map()).set(conn, msg.code);
      if (direct) m.send(msg);
      else this.stageMessage(m, msg);
    }
    for (const { conn, reason } of out.close) {
      const m = this.members_.get(conn);
      if (!m) continue;
      // What it was sent goes before its close.
      this.flushMember(conn);
      this.members_.delete(conn);
      if (this.members_.size === 0) this.emptySince = this.clock.now();
      const why = fatal?.get(conn);
      m.close(4000, why ?? reason, why);
    }
  }

  /**
   * A member's held confirmation goes before anything else it is sent (`direct`, or staged in
   * order). A stable frontier that covers it confirms it instead, to a protocol-5 member (a
   * frontier goes out only after every entry ordered before it is stored: see the header).
   */
  private confirmFirst(conn: string, m: RoomMember, direct: boolean, next: ServerMessage): void {
    const pos = this.unconfirmed.get(conn);
    if (pos === undefined) return;
    this.unconfirmed.delete(conn);
    if (next.t === 'stable' && next.pos >= pos && this.engine_.protocolOf(conn) >= 5) return;
    if (direct) m.send({ t: 'committed', pos });
    else this.stageMessage(m, { t: 'committed', pos });
  }

  /** The turn is over: confirmations no tentative log carried go on their own. */
  private sendConfirmations(): void {
    this.confirmTimer = undefined;
    if (this.state_ !== 'serving') return;
    for (const [conn, pos] of this.unconfirmed) this.members_.get(conn)?.send({ t: 'committed', pos });
    this.unconfirmed.clear();
  }

  private stageMessage(m: RoomMember, msg: ServerMessage): void {
    const staged = this.outbox.get(m.id);
    if (!staged) {
      this.outbox.set(m.id, { member: m, msgs: [msg], ownEntries: undefined });
      return;
    }
    const last = staged.msgs[staged.msgs.length - 1];
    if (msg.t === 'log' && last.t === 'log' && msg.from === last.from + last.entries.length) {
      // A message may be shared by several members: the merged one gets an entries array of its own.
      if (staged.ownEntries === undefined) {
        staged.ownEntries = last.entries.slice();
        staged.msgs[staged.msgs.length - 1] = { t: 'log', from: last.from, entries: staged.ownEntries };
      }
      for (const e of msg.entries) staged.ownEntries.push(e);
      return;
    }
    staged.msgs.push(msg);
    staged.ownEntries = undefined;
  }

  private flushMember(id: string): void {
    const staged = this.outbox.get(id);
    if (!staged) return;
    this.outbox.delete(id);
    for (const msg of staged.msgs) staged.member.send(msg);
  }

  private flushOutbox(): void {
    for (const id of this.outbox.keys()) this.flushMember(id);
  }

  private scheduleCheckpoint(): void {
    if (this.checkpointing || this.checkpointTimer !== undefined || this.state_ !== 'serving') return;
    if (!this.latestCheckpoint || this.latestCheckpoint.pos - this.storedCheckpoint < this.checkpointEvery) return;
    // A turn of its own, after the commits of this one: its write never delays theirs.
    this.checkpointTimer = this.clock.after(0, () => {
      this.checkpointTimer = undefined;
      if (this.state_ === 'serving') this.writeCheckpoint();
    });
  }

  private writeCheckpoint(): void {
    const cp = this.latestCheckpoint;
    if (!cp) return;
    // The entries it covers must be appended before it (appends take effect in call order).
    this.commit();
    if (this.state_ === 'failed') return;
    this.checkpointing = true;
    this.append('checkpoint', { after: this.rev++, checkpoint: cp }, () => {
      this.checkpointing = false;
      this.storedCheckpoint = Math.max(this.storedCheckpoint, cp.pos);
      this.events.checkpointed?.(cp.pos);
      this.scheduleCheckpoint();
    });
  }

  private append(stage: string, write: Parameters<RoomStore['append']>[1], done: () => void): void {
    let p: Promise<unknown>;
    try {
      p = this.store.append(this.name, write);
    } catch (e) {
      p = Promise.reject(e);
    }
    const settled = p.then(
      () => {
        if (this.state_ === 'failed') return;
        try {
          done();
        } catch (e) {
          this.fail(stage, e, reconnectToResume(`the server failed in room ${this.name} after a write (${stage})`));
        }
      },
      (e: unknown) => this.fail(stage, e, this.whyAppendFailed(e)),
    );
    this.tail = Promise.all([this.tail, settled]);
  }

  /** What the members are told when an append failed. */
  private whyAppendFailed(e: unknown): string {
    if (e instanceof FencedError) return reconnectToResume(`room ${this.name} is now served elsewhere (another writer appended to its store)`);
    if (e instanceof StorageError && e.kind === 'value')
      return reconnectToResume(`the server could not store a change in room ${this.name} (${(e as Error).message.slice(0, 200)}); it was dropped`);
    return STORAGE_FAILED;
  }

  /**
   * Stop serving: the room's memory may be ahead of its store, or a member may have missed a
   * message. Nothing more of it is sent; members are told and closed; the owner reloads it.
   */
  fail(stage: string, error: unknown, why: string, notice: { code: ErrorCode; fatal: boolean } = { code: 'storage-failed', fatal: false }): void {
    if (this.state_ === 'failed') return;
    this.state_ = 'failed';
    this.cancelTimers();
    const unsent = this.queue.slice(this.queueHead);
    this.queue = [];
    this.queueHead = 0;
    this.queuedFor.clear();
    this.unconfirmed.clear();
    const lost = new HerculesError('storage-failed', why);
    for (const q of unsent) q.done?.(lost);
    this.stage = { entries: [], clients: {} };
    this.checkpointing = false;
    for (const m of this.members_.values()) {
      try {
        m.send({ t: 'error', code: notice.code, message: why, fatal: notice.fatal });
        m.close(1011, why, notice.code);
      } catch {
        /* a member that cannot be told is closed by its connection's own failure */
      }
    }
    this.members_.clear();
    this.events.failed?.(stage, error, why);
  }

  private cancelTimers(): void {
    this.commitQueued = false;
    if (this.commitTimer !== undefined) this.commitTimer();
    if (this.checkpointTimer !== undefined) this.checkpointTimer();
    if (this.confirmTimer !== undefined) this.confirmTimer();
    this.commitTimer = this.checkpointTimer = this.confirmTimer = undefined;
  }
}
