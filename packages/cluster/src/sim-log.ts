/**
 * A `ShardLog` and a `LeaseTable` in memory, with the faults the failover benchmark met on a
 * real nats-server 2.9.10 cluster, under the control of a random source (a test's seeded Rng of @hercules/test-utils), for simulating
 * `ClusterStore` without NATS:
 *   - elections: a shard's stream, or the lease table, answers every call with an error for a while;
 *   - publishes that fail before they land, and publishes that land but whose ack is lost;
 *   - reads from a server that is behind (a just-elected leader, a replica): without an upper
 *     bound they come back short, with one they fail until the server has it;
 *   - a lease table whose revisions go back, and whose create lets two writers win.
 * Acks come back after a random delay on `schedule` (default `setTimeout`, which a test can mock;
 * the simulator gives its own event queue).
 * Appends are applied in call order, as one connection's publishes reach a stream leader.
 */
import { HerculesError } from '@hercules/core';
import { type Ack, type Lease, LeaseConflictError, type LeaseTable, type LogMessage, type ShardLog, WrongLastSequenceError } from './shard-log.ts';

export interface SimFaults {
  /** A publish fails before it lands. */
  failBeforeLanding?: number;
  /** A publish lands but its ack is lost (the caller sees a timeout). */
  loseAck?: number;
  /** A read (or lastSeq) is served by a server up to `maxLag` messages behind. */
  staleRead?: number;
  maxLag?: number;
  /** The longest an ack takes, ms. */
  maxAckMs?: number;
}

class Unavailable extends Error {
  constructor(what: string) {
    super(`no responders: ${what} (simulated election)`);
    this.name = 'Unavailable';
  }
}

/** Run `fn` after `ms` (simulated) milliseconds. */
export type Schedule = (fn: () => void, ms: number) => void;
const timers: Schedule = (fn, ms) => {
  setTimeout(fn, ms);
};

export class SimShardLog implements ShardLog {
  readonly maxPayload: number;
  private readonly streams = new Map<number, { msgs: LogMessage[]; last: number; ids: Map<string, number>; downUntil: number }>();
  /** Publishes, landed messages, acks lost, stale reads served: for a test to see its faults happened. */
  readonly stats = { publishes: 0, landed: 0, lostAcks: 0, failedBeforeLanding: 0, staleReads: 0, refusedDown: 0 };

  constructor(
    private readonly rng: () => number,
    private readonly now: () => number,
    private faults: SimFaults = {},
    opts: { subjectPrefix?: string; maxPayload?: number; schedule?: Schedule; onLanded?: (shard: number, m: LogMessage) => void } = {},
  ) {
    this.subjectPrefix = opts.subjectPrefix ?? 'hc';
    this.maxPayload = opts.maxPayload ?? 64 * 1024;
    this.schedule = opts.schedule ?? timers;
    this.onLanded = opts.onLanded;
  }
  private readonly subjectPrefix: string;
  private readonly schedule: Schedule;
  /** Told of every message as it lands, in stream order (before any purge): a checker's view of the stream. */
  private readonly onLanded?: (shard: number, m: LogMessage) => void;

  private sleep(ms: number): Promise<void> {
    return new Promise((r) => this.schedule(r, ms));
  }

  subject(shard: number, rest: string): string {
    return `${this.subjectPrefix}.${shard}.${rest}`;
  }

  private stream(shard: number) {
    let s = this.streams.get(shard);
    if (!s) this.streams.set(shard, (s = { msgs: [], last: 0, ids: new Map(), downUntil: 0 }));
    return s;
  }

  /** The shard's stream answers nothing for `ms` (its leader died; a new one is being elected). */
  elect(shard: number, ms: number): void {
    this.stream(shard).downUntil = this.now() + ms;
  }

  /** The faults stop: no more lost acks, failed publishes, stale reads or elections. */
  heal(): void {
    this.faults = { maxAckMs: this.faults.maxAckMs };
    for (const s of this.streams.values()) s.downUntil = 0;
  }

  /**
   * The stream loses every message before `beforeSeq`, of every subject: what a nats-server
   * before 2.9.18 does to a replica that replays a filtered purge after a restart (nats-server#4196).
   */
  loseHead(shard: number, beforeSeq: number): void {
    const s = this.stream(shard);
    s.msgs = s.msgs.filter((m) => m.seq >= beforeSeq);
  }

  /** Every message of the shard's stream, as stored (for a checker). */
  all(shard: number): readonly LogMessage[] {
    return this.stream(shard).msgs;
  }

  private async up(shard: number, what: string) {
    await this.sleep(Math.floor(this.rng() * ((this.faults.maxAckMs ?? 2) + 1)));
    const s = this.stream(shard);
    if (this.now() < s.downUntil) {
      this.stats.refusedDown++;
      throw new Unavailable(what);
    }
    return s;
  }

  private view(s: { last: number }): number {
    if (this.rng() < (this.faults.staleRead ?? 0)) {
      this.stats.staleReads++;
      return Math.max(0, s.last - 1 - Math.floor(this.rng() * (this.faults.maxLag ?? 5)));
    }
    return s.last;
  }

  async ensure(shard: number): Promise<void> {
    await this.up(shard, 'ensure');
  }

  publish(shard: number, subject: string, data: Uint8Array, opts: { msgId: string; expectLastSeq?: number; headers?: Record<string, string> }): Promise<Ack> {
    this.stats.publishes++;
    const s = this.stream(shard);
    // Applied now, in call order (one connection's publishes reach the leader in order); answered later.
    let outcome: () => Ack;
    if (this.now() < s.downUntil) {
      this.stats.refusedDown++;
      outcome = () => {
        throw new Unavailable(`publish to ${subject}`);
      };
    } else if (this.rng() < (this.faults.failBeforeLanding ?? 0)) {
      this.stats.failedBeforeLanding++;
      outcome = () => {
        throw new HerculesError('timeout', 'timeout (simulated: the publish never reached the leader); publish again with the same id');
      };
    } else {
      const dup = s.ids.get(opts.msgId);
      if (dup !== undefined) outcome = () => ({ seq: dup, duplicate: true });
      else if (opts.expectLastSeq !== undefined && opts.expectLastSeq !== s.last) {
        const last = s.last;
        outcome = () => {
          throw new WrongLastSequenceError(shard, opts.expectLastSeq!, `wrong last sequence: ${last}`);
        };
      } else {
        const seq = ++s.last;
        const m = { seq, subject, data: data.slice(), headers: { ...(opts.headers ?? {}) }, time: this.now() };
        s.msgs.push(m);
        s.ids.set(opts.msgId, seq);
        this.stats.landed++;
        this.onLanded?.(shard, { ...m, data: m.data.slice(), headers: { ...m.headers } });
        if (this.rng() < (this.faults.loseAck ?? 0)) {
          this.stats.lostAcks++;
          outcome = () => {
            throw new HerculesError('timeout', 'timeout (simulated: the ack was lost); publish again with the same id');
          };
        } else outcome = () => ({ seq, duplicate: false });
      }
    }
    return this.sleep(Math.floor(this.rng() * ((this.faults.maxAckMs ?? 2) + 1))).then(outcome);
  }

  async read(shard: number, subject: string, fromSeq = 1, untilSeq?: number): Promise<LogMessage[]> {
    const s = await this.up(shard, `read ${subject}`);
    const view = this.view(s);
    if (untilSeq !== undefined && view < untilSeq)
      throw new HerculesError('storage-failed', `the server has no message ${untilSeq} yet (simulated lag); try again`);
    const last = untilSeq ?? view;
    return s.msgs
      .filter((m) => m.subject === subject && m.seq >= fromSeq && m.seq <= last)
      .map((m) => ({ seq: m.seq, subject: m.subject, data: m.data.slice(), headers: { ...m.headers }, time: m.time }));
  }

  async readHeaders(shard: number, subject: string, fromSeq = 1): Promise<LogMessage[]> {
    return (await this.read(shard, subject, fromSeq)).map((m) => ({ ...m, data: new Uint8Array(0), size: m.data.length }));
  }

  async readAt(shard: number, seqs: readonly number[]): Promise<LogMessage[]> {
    const s = await this.up(shard, 'readAt');
    return seqs.map((seq) => {
      const m = s.msgs.find((x) => x.seq === seq);
      if (!m) throw new HerculesError('storage-failed', `stream ${shard} has no message ${seq}: the stream lost it or it was purged`);
      return { seq: m.seq, subject: m.subject, data: m.data.slice(), headers: { ...m.headers }, time: m.time };
    });
  }

  async last(shard: number, subject: string): Promise<LogMessage | undefined> {
    const s = await this.up(shard, `last ${subject}`);
    const view = this.view(s);
    const m = s.msgs.findLast((x) => x.subject === subject && x.seq <= view);
    return m && { seq: m.seq, subject: m.subject, data: m.data.slice(), headers: { ...m.headers }, time: m.time };
  }

  async lastSeq(shard: number): Promise<number> {
    return this.view(await this.up(shard, 'lastSeq'));
  }

  async subjects(shard: number, filter: string): Promise<string[]> {
    const s = await this.up(shard, 'subjects');
    const view = this.view(s);
    const re = new RegExp(
      `^${filter
        .split('.')
        .map((t) => (t === '*' ? '[^.]+' : t === '>' ? '.+' : t.replace(/[^\w-]/g, '\\$&')))
        .join('\\.')}$`,
    );
    return [...new Set(s.msgs.filter((m) => m.seq <= view && re.test(m.subject)).map((m) => m.subject))];
  }

  async purge(shard: number, subject: string, beforeSeq: number): Promise<void> {
    const s = await this.up(shard, 'purge');
    s.msgs = s.msgs.filter((m) => m.subject !== subject || m.seq >= beforeSeq);
  }
}

export interface SimLeaseFaults {
  /** A write answers a revision below the last one (the bucket lost its recent history). */
  goBack?: number;
  /** A create of a key that exists succeeds anyway (a per-subject compare-and-set race). */
  doubleCreate?: number;
}

export class SimLeaseTable implements LeaseTable {
  private rev = 0;
  private readonly keys = new Map<string, { value: string; rev: number; at: number }>();
  private downUntil = 0;
  readonly stats = { wentBack: 0, doubleCreates: 0, refusedDown: 0 };

  constructor(
    readonly ttlMs: number,
    private readonly rng: () => number,
    private readonly now: () => number,
    private faults: SimLeaseFaults = {},
    private readonly schedule: Schedule = timers,
  ) {}

  /** The faults stop: revisions no longer go back, creates no longer double, no election. */
  heal(): void {
    this.faults = {};
    this.downUntil = 0;
  }

  /** The table answers nothing for `ms`. */
  elect(ms: number): void {
    this.downUntil = this.now() + ms;
  }

  private async up(what: string): Promise<void> {
    await new Promise<void>((r) => this.schedule(r, Math.floor(this.rng() * 3)));
    if (this.now() < this.downUntil) {
      this.stats.refusedDown++;
      throw new Unavailable(what);
    }
    for (const [k, e] of this.keys) if (this.now() - e.at >= this.ttlMs) this.keys.delete(k);
  }

  private nextRev(): number {
    if (this.rng() < (this.faults.goBack ?? 0) && this.rev > 3) {
      this.stats.wentBack++;
      this.rev -= 1 + Math.floor(this.rng() * Math.min(10, this.rev - 2));
    }
    return ++this.rev;
  }

  async create(key: string, value: string): Promise<number> {
    await this.up(`create ${key}`);
    if (this.keys.has(key)) {
      if (!(this.rng() < (this.faults.doubleCreate ?? 0))) throw new LeaseConflictError(`lease ${key} exists`);
      this.stats.doubleCreates++;
    }
    const rev = this.nextRev();
    this.keys.set(key, { value, rev, at: this.now() });
    return rev;
  }

  async update(key: string, value: string, rev: number): Promise<number> {
    await this.up(`update ${key}`);
    const e = this.keys.get(key);
    if (!e || e.rev !== rev) throw new LeaseConflictError(`lease ${key} changed since revision ${rev}`);
    const next = this.nextRev();
    this.keys.set(key, { value, rev: next, at: this.now() });
    return next;
  }

  async get(key: string): Promise<Lease | undefined> {
    await this.up(`get ${key}`);
    const e = this.keys.get(key);
    return e && { value: e.value, rev: e.rev };
  }

  async release(key: string, rev: number): Promise<void> {
    await this.up(`release ${key}`);
    if (this.keys.get(key)?.rev === rev) this.keys.delete(key);
  }
}
