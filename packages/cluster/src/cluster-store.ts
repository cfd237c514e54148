/**
 * A `RoomStore` on a replicated log (`ShardLog`, e.g. NATS JetStream), for one node of a
 * cluster. Rooms hash to shards; each shard has one stream and at most one owner node at a time,
 * which holds the shard's lease and is the stream's only writer. The owner runs the rooms of
 * its shards (through the same RoomHost as the embedded server); this store is how it reads and
 * writes them.
 *
 * The subjects of shard k (headers in RECORD_HEADERS):
 *   <p>.k.claim          {node}: an owner took (or re-synchronised) the shard
 *   <p>.k.log.<room>     one record per append: {entries, clients, stable}, in parts under the message size
 *   <p>.k.ckpt.<room>    a checkpoint record: {pos, state, suffix, clients, stable, meta, lastActivity}, and its
 *                        confirmation; or a deletion (a tombstone): the room's records before it count for nothing
 *
 * Safety does not rest on the lease. Every message is published with the stream-wide
 * expectation of the last sequence the owner predicts (it is the only writer), so a message of
 * an owner that lost the shard is refused once another owner's claim is in the stream; and
 * readers apply the replay rule: walking a room's messages in stream order, a message counts
 * only if it was sent under the last claim before it (a claim in between fences it, whoever made
 * it), and a record counts only if it continues the room's chain (rev = previous rev + 1; its
 * entries follow the head). An append is confirmed only when its ack came back at the predicted
 * sequence and so did every earlier one since the owner's claim (an unbroken run): then no claim
 * and no other message can lie between, and every reader counts it. A load starts from the newest
 * checkpoint that is confirmed the same way (its confirmation is a message of its own), so a
 * checkpoint never brings in an append that did not land.
 *
 * Any failure of a shard's pipeline (a refused expectation, a timeout, a lost connection) fails
 * every append in flight on that shard; their rooms' hosts reload the rooms. The shard is then
 * claimed again, which makes every message of ours still in flight count for nothing, and goes
 * on from the claim's sequence. If the lease
 * itself is lost (not renewed before its deadline, or taken), the shard is given up:
 * `onShardLost` tells the node, whose connections to those rooms must close.
 */
import { randomUUID } from 'node:crypto';
import type { ClientRecord, LogEntry } from '@hercules/core';
import { HerculesError, SYSTEM_CLIENT } from '@hercules/core';
import {
  type Appended,
  FencedError,
  type ListRoomsOptions,
  type LoadedRoom,
  type RoomAppend,
  type RoomExport,
  type RoomPeek,
  type StoredRoomInfo,
  type HistoryEntry,
  type HistoryQuery,
  type RetentionSetting,
  type RoomHistory,
  retentionFor,
  type RoomInit,
  type RoomMeta,
  type Clock,
  type RoomStore,
  StorageError,
  systemClock,
  checkAgainstHead,
  checkAppend,
  checkListRooms,
  checkRoomName,
  compareRoomNames,
  exportProblem,
  type CheckpointDigest,
  importedDigests,
  keepDigests,
  checkpointDigest,
} from '@hercules/server/pipeline';
import { LeaseConflictError, type LeaseTable, type LogMessage, type ShardLog, WrongLastSequenceError } from './shard-log.ts';

export interface ClusterStoreOptions {
  log: ShardLog;
  leases: LeaseTable;
  /** This node's id, written in its leases and claims. */
  nodeId: string;
  /** How many shards rooms hash to (fixed for the life of the cluster's data). Default 64. */
  shards?: number;
  /** The subject prefix of the shard streams (must match the log's streams). Default `hc`. */
  subjectPrefix?: string;
  /** Write a checkpoint's state once it is this many ops past the written one (and the log since is half its size). Default 1000. */
  checkpointEvery?: number;
  /** Stop writing this long before the lease would expire (clocks drift, renewals are slow). Default 500 ms, or a quarter of a shorter lease. */
  leaseMarginMs?: number;
  /**
   * Purge a room's messages before its previous checkpoint once a newer one is confirmed.
   * Default false: under repeated NATS stream-leader kills (nats-server 2.9.10) rooms were seen
   * with checkpoints and confirmed log records gone from the stream while purging was on, cause
   * not found yet. Without it a room's stream grows with its history (loads still start from
   * the newest checkpoint).
   */
  purge?: boolean;
  /**
   * How long an owner keeps trying to renew a lease it cannot reach (the lease table electing a
   * leader, a NATS server down) before it gives the shard up; writes pause meanwhile. Nobody else
   * can take the lease while the table is unreachable, and safety rests on the stream's fence,
   * not on the lease: giving up at the lease's ttl only made a second node wait out the same
   * election and load every room again. Default 15 s (a 2.9.10 Raft election takes 4-9 s).
   */
  leaseGraceMs?: number;
  /**
   * Time and timers (default the system clock): lease deadlines, renewals and retries go
   * through it, so a simulation can run the store on simulated time.
   */
  clock?: Clock;
  /** The wall clock for a room's creation time and its appends' commit times (default Date.now). */
  wallClock?: () => number;
  /**
   * How much history `history` reads behind the newest checkpoint (HistoryRetention), per store or
   * per machine. Default DEFAULT_RETENTION. The stream itself keeps it all while `purge` is off.
   */
  retention?: RetentionSetting;
  /**
   * Write a shard's log records of one event-loop turn as one message on the shard's batch
   * subject (`<p>.k.batch`), fenced as one. Default true. Turn it off for a rolling upgrade from
   * a version that does not read batches (a node that does not read them loads rooms short),
   * and on again once every node runs this one.
   */
  batchAppends?: boolean;
  /** This node gave up a shard (its lease was lost or taken): close the connections to its rooms. */
  onShardLost?: (shard: number, why: string) => void;
  /** Something worth logging happened (a re-claim, a refused append). */
  onWarning?: (message: string) => void;
  /** Counts and timings for metrics (the node wires them to Prometheus). */
  observer?: ClusterStoreObserver;
}

/** What a ClusterStore reports as it runs; every method is optional. */
export interface ClusterStoreObserver {
  /** A batch of messages was confirmed this many ms after it was published. */
  appendConfirmed?(ms: number): void;
  /** A shard's pipeline broke: `fenced` when the stream's last sequence was not the predicted one (another writer, or a lost ack), `failed` for any other error. */
  pipelineBroken?(cause: 'fenced' | 'failed'): void;
  /** The shard was claimed (taken, or claimed again after a break). */
  claimed?(shard: number): void;
  /** The shard was given up. */
  shardLost?(shard: number): void;
}

/** A room is served by another node (it holds the lease of the room's shard). */
export class NotOwnerError extends HerculesError {
  constructor(
    readonly shard: number,
    readonly owner: string | undefined,
    room: string,
  ) {
    super(
      'storage-failed',
      `room ${room} is in shard ${shard}, which ${owner ? `node ${owner} serves` : 'another node is taking over'}; connect through that node, or retry once its lease expires`,
    );
    this.name = 'NotOwnerError';
  }
}

/** FNV-1a of the room name's UTF-16 code units, mod `shards`: every node computes the same. */
export function shardOf(room: string, shards: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < room.length; i++) {
    h ^= room.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % shards;
}

/** The subject of a shard's claims (no room), or of a room's log or checkpoints. */
export function subjectOf(prefix: string, shard: number, kind: 'claim' | 'log' | 'ckpt' | 'batch', room?: string): string {
  return room === undefined ? `${prefix}.${shard}.${kind}` : `${prefix}.${shard}.${kind}.${roomToken(room)}`;
}

/** A room name as one subject token: base64url of its UTF-8 (any name, no dots or wildcards). */
export function roomToken(room: string): string {
  return Buffer.from(room, 'utf8').toString('base64url') || '_';
}

/** The body of a log record: one append. Its epoch and rev are in the headers of each part. */
export interface LogBody {
  entries: LogEntry[];
  clients: Record<string, ClientRecord>;
  stable: number;
  /** When the writer made the append (its wall clock, ms since the epoch): its entries' commit time. Absent in records from before it was recorded. */
  time?: number;
  /** The digest of the state of the append's checkpoint (RoomExport.digests); absent without one, and in records from before digests. */
  digest?: CheckpointDigest;
}

/** The body of a checkpoint record. */
export interface CkptBody {
  pos: number;
  state: unknown;
  /** The entries after `pos` up to the head at the record's rev. */
  suffix: LogEntry[];
  clients: Record<string, ClientRecord>;
  stable: number;
  meta: RoomMeta;
  /** When the room's last append with entries or client records was made (ms since the epoch, the writer's wall clock); absent in checkpoints from before it was recorded. */
  lastActivity?: number;
  /** The checkpoint digests from `pos` on (RoomExport.digests), so that they outlive the log records purged before it; absent in checkpoints from before digests. */
  digests?: CheckpointDigest[];
}

/** A record read back: its parts joined, counted by the replay rule. */
export interface Rec {
  /** The sequence of its last part. */
  seq: number;
  /** The sequence of the claim it was sent under (undefined: written by a store from before claim headers). */
  claim: number | undefined;
  epoch: number;
  rev: number;
  body: unknown;
  bytes: number;
  /** When the stream stored its last part (ms since the epoch, the NATS server's clock), if the log says. */
  time?: number;
  /** A deletion of the room (a tombstone), not a checkpoint. */
  deleted: boolean;
  /** The sequences of its parts, in order. */
  partSeqs: number[];
}

/**
 * The headers of a shard's messages. Every message carries the sequence of the claim it was sent
 * under (`claim`) and that claim's epoch; a record's parts carry its rev and their place (part i
 * of parts); a read barrier is marked (`mark`), and so is a checkpoint's confirmation, which also
 * names the sequence of the checkpoint's last part (`confirms`).
 */
export const RECORD_HEADERS = {
  claim: 'Hc-Claim',
  epoch: 'Hc-Epoch',
  rev: 'Hc-Rev',
  part: 'Hc-Part',
  parts: 'Hc-Parts',
  mark: 'Hc-Mark',
  confirms: 'Hc-Confirms',
  deleted: 'Hc-Deleted',
  batch: 'Hc-Batch',
} as const;
const {
  claim: H_CLAIM,
  epoch: H_EPOCH,
  rev: H_REV,
  part: H_PART,
  parts: H_PARTS,
  mark: H_MARK,
  confirms: H_CONFIRMS,
  deleted: H_DELETED,
  batch: H_BATCH,
} = RECORD_HEADERS;
/** Room for the headers and the protocol's own in a message. */
const HEADROOM = 1024;

/** What the store keeps of a room it has open. */
interface OpenRoom {
  name: string;
  shard: number;
  meta: RoomMeta;
  rev: number;
  head: number;
  stable: number;
  clients: Record<string, ClientRecord>;
  /** Entries after the newest checkpoint position given, for the next checkpoint's suffix. */
  tail: LogEntry[];
  /** The checkpoint position whose state is in the log, and the newest one given (by reference). */
  writtenPos: number;
  writtenBytes: number;
  logBytesSince: number;
  latest: { pos: number; state: unknown; rev: number } | undefined;
  /** Appends of this room published and not settled. */
  inFlight: Set<Promise<unknown>>;
  /** The first sequence of the last checkpoint confirmed since the room was loaded: purges stop before it. */
  prevCkptSeq?: number;
  /** The checkpoints confirmed since the room was loaded, oldest first: purges also keep those history keeps (HistoryRetention). */
  confirmedCkpts?: { first: number; pos: number; lastActivity: number }[];
  /** When its last append with entries or client records was made (StoredRoomInfo.lastActivity). */
  lastActivity: number;
  /** The digest of each checkpoint given, from its written checkpoint's on (state-digest.ts). */
  digests: CheckpointDigest[];
}

/** A room as read apart from its writer: as a load would build it, its checkpoint's state, the bytes read. */
interface Inspected {
  r: OpenRoom;
  state: unknown;
  bytes: number;
}

/** What `listRooms` says of a room read apart from its writer. */
function infoOf(name: string, x: Inspected): StoredRoomInfo {
  const r = x.r;
  const migrated = r.clients[SYSTEM_CLIENT]?.highWater;
  return {
    name,
    machine: r.meta.machine,
    version: Number.isSafeInteger(migrated) ? migrated : r.meta.version,
    head: r.head,
    checkpoint: r.writtenPos,
    stable: r.stable,
    bytes: x.bytes + Buffer.byteLength(name, 'utf8'),
    created: r.meta.created ?? 0,
    lastActivity: r.lastActivity,
  };
}

/** A failure to read the log, as a StorageError (a HerculesError passes as it is). */
function asStorageError(e: unknown, what: string): HerculesError {
  if (e instanceof HerculesError) return e;
  return new StorageError(`${what}: ${(e as Error)?.message ?? String(e)}`, e);
}

type ShardState = 'idle' | 'owned';

type OutMsg = { subject: string; data: Uint8Array; headers: Record<string, string> };

/** A room's append waiting for its shard's flush: its log record, the checkpoint's messages that follow it, its caller. */
interface PendingAppend {
  room: string;
  rev: number;
  body: Uint8Array;
  claim: Record<string, string>;
  ckpt: OutMsg[];
  /** Too large for a batch: its parts on the room's subject, in the flush's order. */
  parts?: OutMsg[];
  resolve: (ckptSeqs: number[]) => void;
  reject: (e: unknown) => void;
}

/** One shard as this node sees it: its lease, its claim, the pipeline's predicted sequence. */
class Shard {
  state: ShardState = 'idle';
  epoch = 0;
  leaseRev = 0;
  /** The lease holds until here (monotonic ms): the last renewal that succeeded was sent at deadline - ttl + margin. */
  deadline = 0;
  /** The sequence the next message is expected to follow. */
  expect = 0;
  /** The sequence of this node's current claim: every message names it, and counts only while no claim follows it. */
  claimSeq = 0;
  /** Messages published under the current claim (for msg ids). */
  n = 0;
  /** Claims in the stream: (seq, epoch), in order. */
  claims: { seq: number; epoch: number }[] = [];
  /** The pipeline broke: the acks of this generation no longer confirm anything. */
  generation = 0;
  /** The last publish of the pipeline (acks are handled in order). */
  tail: Promise<unknown> = Promise.resolve([]);
  acquiring: Promise<void> | undefined;
  resync: Promise<void> | undefined;
  renewTimer: (() => void) | undefined;
  /** When the last lease write that succeeded was sent. */
  leaseSent = 0;
  /** A lease write in flight. */
  refreshing: Promise<void> | undefined;
  /** Publishes held while the deadline has passed and a lease write is awaited. */
  paused: { go: () => void; fail: (e: unknown) => void }[] = [];
  /** The join barrier in flight (confirmWriter), and the one that follows it for the joins that came after it was sent. */
  barrier: Promise<void> | undefined;
  nextBarrier: Promise<void> | undefined;
  /** Being handed over to this node (handOver): its rooms are not opened here meanwhile. */
  leaving: string | undefined;
  /** Log records of this turn, not yet published: one batch message at the turn's end (batchAppends). */
  pending: PendingAppend[] = [];
  constructor(readonly k: number) {}
}

const enc = new TextEncoder();
const dec = new TextDecoder();

export class ClusterStore implements RoomStore {
  readonly nodeId: string;
  readonly shards: number;
  private readonly log: ShardLog;
  private readonly leases: LeaseTable;
  private readonly prefix: string;
  private readonly checkpointEvery: number;
  private readonly purge: boolean;
  private readonly marginMs: number;
  private readonly graceMs: number;
  private readonly clock: Clock;
  private readonly wallClock: () => number;
  private readonly opts: ClusterStoreOptions;
  private readonly batchAppends: boolean;
  /** This store instance in message ids: unique across nodes and restarts (JetStream drops a repeated id within its window). */
  private readonly instance = randomUUID();
  private claimAttempts = 0;
  private readonly shardState = new Map<number, Shard>();
  private readonly rooms_ = new Map<string, OpenRoom>();
  private readonly locks = new Map<string, Promise<unknown>>();
  /** Purges in flight (close waits for them: they are best effort, but not cut off). */
  private readonly purges = new Set<Promise<unknown>>();
  private closed = false;

  constructor(opts: ClusterStoreOptions) {
    this.opts = opts;
    this.log = opts.log;
    this.leases = opts.leases;
    this.nodeId = opts.nodeId;
    this.shards = opts.shards ?? 64;
    if (!Number.isInteger(this.shards) || this.shards < 1) throw new HerculesError('bad-argument', `shards must be a positive integer, got ${this.shards}`);
    this.prefix = opts.subjectPrefix ?? 'hc';
    this.checkpointEvery = Math.max(1, opts.checkpointEvery ?? 1000);
    this.purge = opts.purge ?? false;
    this.batchAppends = opts.batchAppends ?? true;
    this.marginMs = opts.leaseMarginMs ?? Math.min(500, Math.floor(this.leases.ttlMs / 4));
    if (this.marginMs >= this.leases.ttlMs / 2)
      throw new HerculesError('bad-argument', `the lease margin (${this.marginMs} ms) must be under half the lease (${this.leases.ttlMs} ms)`);
    this.graceMs = Math.max(this.leases.ttlMs, opts.leaseGraceMs ?? 15_000);
    this.clock = opts.clock ?? systemClock;
    this.wallClock = opts.wallClock ?? Date.now;
    if (typeof opts.retention !== 'function') retentionFor(opts.retention, 'any'); // checked now
  }

  shardOf(room: string): number {
    return shardOf(room, this.shards);
  }

  private now(): number {
    return this.clock.now();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((r) => this.clock.after(ms, r));
  }

  /** The shards this node owns now. */
  owned(): number[] {
    return [...this.shardState.values()].filter((s) => s.state === 'owned' && this.now() < s.deadline).map((s) => s.k);
  }

  /** Whether this node owns the shard and is not handing it over. */
  owns(shard: number): boolean {
    const s = this.shardState.get(shard);
    return s?.state === 'owned' && !s.leaving && !s.acquiring;
  }

  /**
   * Give the shard to node `to`, as a clean close does (placement.ts decides when): from now on
   * its rooms are refused here (NotOwnerError naming `to`); `before` runs then (the service
   * fails the shard's rooms, so their members reconnect), the rooms loaded here write their
   * checkpoints, and the lease is released for `to` to take. Nothing in flight is cut off: the
   * next owner's claim fences whatever this node still had on the way.
   */
  async handOver(shard: number, to: string, before?: () => void): Promise<boolean> {
    const s = this.shardState.get(shard);
    if (!s || s.state !== 'owned' || s.leaving || s.acquiring || this.closed) return false;
    s.leaving = to;
    try {
      before?.();
      for (const [name, r] of [...this.rooms_]) if (r.shard === shard) await this.locked(name, () => this.releaseNow(name)).catch(() => {});
      if (s.renewTimer) s.renewTimer();
      s.renewTimer = undefined;
      if (s.refreshing) await s.refreshing.catch(() => {});
      if (s.state !== 'owned') return false;
      s.state = 'idle';
      s.generation++;
      await this.leases.release(this.leaseKey(shard), s.leaseRev).catch(() => {});
      this.opts.observer?.shardLost?.(shard);
      return true;
    } finally {
      s.leaving = undefined;
    }
  }

  /** This node's claim on a shard it owns: the claim's sequence in the stream and its epoch (undefined if it does not own the shard). */
  claimOf(shard: number): { seq: number; epoch: number } | undefined {
    const s = this.shardState.get(shard);
    return s?.state === 'owned' && !s.acquiring ? { seq: s.claimSeq, epoch: s.epoch } : undefined;
  }

  /** For each owned shard, ms since the last lease write that succeeded was sent (renewals run every third of the ttl). */
  leaseAges(): { shard: number; ms: number }[] {
    return [...this.shardState.values()].filter((s) => s.state === 'owned').map((s) => ({ shard: s.k, ms: this.now() - s.leaseSent }));
  }

  /** Who holds a shard's lease, if anyone (this node included). */
  async ownerOf(shard: number): Promise<string | undefined> {
    const l = await this.leases.get(this.leaseKey(shard));
    return l ? (JSON.parse(l.value) as { node: string }).node : undefined;
  }

  private subject(shard: number, kind: 'claim' | 'log' | 'ckpt' | 'batch', room?: string): string {
    return subjectOf(this.prefix, shard, kind, room);
  }

  // ---------------------------------------------------------------- ownership

  /** Own the shard (take its lease if free, claim it in its stream), or throw NotOwnerError. */
  async acquire(k: number): Promise<Shard> {
    let s = this.shardState.get(k);
    if (!s) this.shardState.set(k, (s = new Shard(k)));
    // A take in progress holds the lease before its claim has landed: nothing may be published
    // for the shard until then (it would go out under the previous claim's epoch and sequence).
    if (s.acquiring) await s.acquiring;
    if (s.leaving) throw new NotOwnerError(k, s.leaving, `(shard ${k})`);
    if (s.state === 'owned') {
      if (this.now() >= s.deadline) await this.refresh(s);
      if (s.resync) await s.resync;
      if (s.state === 'owned') return s;
    }
    if (!s.acquiring) {
      const shard = s;
      s.acquiring = this.take(shard).finally(() => {
        shard.acquiring = undefined;
      });
    }
    await s.acquiring;
    return s;
  }

  private async take(s: Shard): Promise<void> {
    await this.log.ensure(s.k);
    const sent = this.now();
    const rev = await this.takeLease(s.k);
    s.leaseRev = rev;
    s.leaseSent = sent;
    s.deadline = sent + this.leases.ttlMs - this.marginMs;
    s.state = 'owned';
    try {
      s.claims = [];
      await this.claim(s);
    } catch (e) {
      this.lose(s, `claiming it failed: ${(e as Error).message}`);
      await this.leases.release(this.leaseKey(s.k), s.leaseRev).catch(() => {});
      throw e;
    }
    this.scheduleRenew(s);
  }

  /**
   * Create the shard's lease, or take back one held in this node's name by its revision: a lease
   * this node gave up (or whose renewal's answer it lost) that the bucket has not expired yet.
   * Whatever an earlier claim of ours still had in flight is fenced by the next claim.
   */
  private async takeLease(k: number, attempt = 1): Promise<number> {
    const value = JSON.stringify({ node: this.nodeId });
    try {
      return await this.leases.create(this.leaseKey(k), value);
    } catch (e) {
      if (!(e instanceof LeaseConflictError)) throw e;
      const held = await this.leases.get(this.leaseKey(k)).catch(() => undefined);
      // A create refused while the read after it finds no lease: the lease was released (or
      // expired) between the two, or the create read a replica behind the release (seen twice on
      // loaded cores: a node reopening right after its own clean close was refused its own
      // shard). Nobody holds it, so create again, a few times, 50 ms apart, before calling it taken.
      if (!held && attempt < 4) {
        await this.sleep(50 * attempt);
        return this.takeLease(k, attempt + 1);
      }
      const holder = held && (JSON.parse(held.value) as { node?: string }).node;
      if (!held || holder !== this.nodeId) throw new NotOwnerError(k, holder, `(shard ${k})`);
      try {
        return await this.leases.update(this.leaseKey(k), value, held.rev);
      } catch (e2) {
        if (e2 instanceof LeaseConflictError) throw new NotOwnerError(k, await this.ownerOf(k).catch(() => undefined), `(shard ${k})`);
        throw e2;
      }
    }
  }

  /**
   * Claim the shard: a claim message without an expectation, whose ack at C proves the leader
   * holds everything before C; the pipeline goes on from C, and every message names C. The
   * claims up to C are read back (complete: the server that answers has C): the replay rule
   * needs them. Its epoch is one above every claim before it (if another claim there has one as
   * high, a node claiming at the same time, it claims again higher): owners in order, for
   * operators and the audit. The epoch is not the lease's revision: on nats-server 2.9.10 the
   * lease bucket was seen to go back in revisions after a leader kill.
   */
  private async claim(s: Shard): Promise<void> {
    // The claims so far, as far as a read shows (it may come back short: then this claim is
    // outbid below and made again higher); without them a first claim would be of epoch 1.
    if (s.claims.length === 0)
      for (const m of await this.log.read(s.k, this.subject(s.k, 'claim'))) s.claims.push({ seq: m.seq, epoch: Number(m.headers[H_EPOCH]) });
    for (;;) {
      const epoch = s.claims.reduce((e, c) => Math.max(e, c.epoch), 0) + 1;
      const ack = await this.log.publish(s.k, this.subject(s.k, 'claim'), enc.encode(JSON.stringify({ node: this.nodeId })), {
        // A new id per attempt: an attempt that timed out may have landed, and its retry must not
        // be answered as its duplicate (two claims of one epoch by one node are harmless).
        msgId: `${this.instance}/${s.k}/${epoch}/claim/${++this.claimAttempts}`,
        headers: { [H_EPOCH]: String(epoch) },
      });
      if (ack.duplicate) throw new StorageError(`shard ${s.k}: claim ${epoch} was answered as a duplicate (seq ${ack.seq})`);
      const from = s.claims.length > 0 ? s.claims[s.claims.length - 1].seq + 1 : 1;
      const read = await this.log.read(s.k, this.subject(s.k, 'claim'), from, ack.seq);
      for (const m of read) s.claims.push({ seq: m.seq, epoch: Number(m.headers[H_EPOCH]) });
      if (s.claims[s.claims.length - 1]?.seq !== ack.seq) throw new StorageError(`shard ${s.k}: claim ${epoch} at seq ${ack.seq} was not read back`);
      // The stream's first message is a claim (a shard is claimed before anything is written to
      // it) and claims are never purged: a first claim past seq 1 means the stream lost messages.
      // Its rooms would load short or be created again over their history: refuse the shard.
      const first = s.claims[0].seq;
      if (first !== 1) {
        s.claims = [];
        throw new StorageError(
          `shard ${s.k}: its stream has lost messages (its first claim is at seq ${first}, not 1): a NATS server's data was lost or purged (nats-server before 2.9.18 replays a filtered purge as a full one after a restart). The shard is not served, so nothing is created over its history; restore the stream before serving it again`,
        );
      }
      if (s.claims.some((c) => c.seq < ack.seq && c.epoch >= epoch)) continue; // outbid before it landed: claim higher
      s.epoch = epoch;
      s.claimSeq = ack.seq;
      s.expect = ack.seq;
      s.n = 0;
      s.generation++;
      s.tail = Promise.resolve([]);
      this.opts.observer?.claimed?.(s.k);
      return;
    }
  }

  /** Renew a third of the lease after the last renewal was sent (not after it returned: under load one can take hundreds of ms). */
  private scheduleRenew(s: Shard): void {
    if (s.renewTimer) s.renewTimer();
    if (this.closed) return;
    s.renewTimer = this.clock.after(Math.max(10, s.leaseSent + this.leases.ttlMs / 3 - this.now()), () => {
      s.renewTimer = undefined;
      this.refresh(s).catch(() => {});
    });
  }

  /**
   * Write the shard's lease again, one write at a time: its revision grows and the deadline moves
   * to when the write was sent + ttl - margin. A write that succeeds proves nobody took the lease
   * in between, however late it answers; so a slow one is waited for (writes pause meanwhile)
   * and retried, and the shard is given up only when the lease was taken or surely expired.
   */
  private refresh(s: Shard): Promise<void> {
    if (s.refreshing) return s.refreshing;
    const run = async () => {
      for (let attempt = 0; ; attempt++) {
        if (s.state !== 'owned' || this.closed) throw new StorageError(`shard ${s.k} is not owned by this node`);
        const sent = this.now();
        try {
          s.leaseRev = await this.leases.update(this.leaseKey(s.k), JSON.stringify({ node: this.nodeId }), s.leaseRev);
          // Sent after the lease had expired: another node may have held it in between (a lease
          // table whose revisions went back lets the update through), so check the stream.
          const lapsed = sent >= s.leaseSent + this.leases.ttlMs;
          s.leaseSent = sent;
          s.deadline = sent + this.leases.ttlMs - this.marginMs;
          if (lapsed) await this.checkNobodyWrote(s);
          return;
        } catch (e) {
          if (s.state !== 'owned') throw e;
          if (e instanceof LeaseConflictError) {
            // Taken by another node, or gone from the bucket (it expired while the table was
            // unreachable): then take it again, unless someone else did first.
            const rev = await this.takeLease(s.k).catch(() => undefined);
            if (rev !== undefined && s.state === 'owned') {
              s.leaseRev = rev;
              s.leaseSent = sent;
              s.deadline = sent + this.leases.ttlMs - this.marginMs;
              // Another node may have held it, claimed the shard and written since.
              await this.checkNobodyWrote(s);
              return;
            }
            this.lose(s, `its lease was lost: ${(e as Error).message}`);
            throw e;
          }
          if (this.now() - s.leaseSent >= this.graceMs) {
            this.lose(s, `its lease could not be renewed for ${Math.round(this.now() - s.leaseSent)} ms: ${(e as Error).message}`);
            throw e;
          }
          // Once, then every 2 s: a NATS election makes every 100 ms retry fail for seconds.
          if (attempt % 20 === 0) this.opts.onWarning?.(`shard ${s.k}: renewing its lease failed (${(e as Error).message}); retrying every 100 ms`);
          await this.sleep(100);
        }
      }
    };
    const p = run().finally(() => {
      s.refreshing = undefined;
      if (s.state === 'owned') {
        this.scheduleRenew(s);
        this.resume(s);
      }
    });
    s.refreshing = p;
    p.catch(() => {});
    return p;
  }

  /**
   * After a lease this node got back (taken again, or renewed after it lapsed): if the stream
   * holds messages past what this node predicted, another node claimed the shard and wrote
   * meanwhile, and this node's rooms are stale (they would serve joiners an old log, found by the
   * cluster simulator): give the shard up, so its rooms reload under a new claim. A stream that
   * cannot be read to check is given up too.
   */
  private async checkNobodyWrote(s: Shard): Promise<void> {
    let last: number;
    try {
      last = await this.log.lastSeq(s.k);
    } catch (e) {
      this.lose(s, `its lease lapsed and the stream could not be read to check it: ${(e as Error).message}`);
      throw e;
    }
    if (last > s.expect) {
      const why = `its lease lapsed and another node wrote to the shard meanwhile (stream at ${last}, this node expected ${s.expect})`;
      this.lose(s, why);
      throw new StorageError(`shard ${s.k} was given up (${why}); reload the room`);
    }
  }

  /** Publishes held while the lease's verdict was awaited go out, in order. */
  private resume(s: Shard): void {
    if (this.now() >= s.deadline || s.paused.length === 0) return;
    const held = s.paused;
    s.paused = [];
    for (const h of held) h.go();
  }

  private lose(s: Shard, why: string): void {
    if (s.state !== 'owned') return;
    s.state = 'idle';
    s.generation++;
    if (s.renewTimer) s.renewTimer();
    s.renewTimer = undefined;
    for (const [name, r] of this.rooms_) if (r.shard === s.k) this.rooms_.delete(name);
    const held = s.paused;
    s.paused = [];
    for (const h of held) h.fail(new StorageError(`shard ${s.k} was given up (${why}); reload the room`));
    this.opts.observer?.shardLost?.(s.k);
    this.opts.onShardLost?.(s.k, why);
  }

  /** The pipeline broke: what is in flight counts for nothing; claim again under a higher epoch. */
  private breakPipeline(s: Shard, why: string): void {
    const gen = s.generation;
    if (s.resync) return;
    s.generation++;
    this.opts.onWarning?.(`shard ${s.k}: ${why}; claiming it again`);
    // Its rooms reload from the log (their hosts failed with the appends).
    for (const [name, r] of this.rooms_) if (r.shard === s.k) this.rooms_.delete(name);
    s.resync = (async () => {
      // Until it works or the lease is gone: a stream electing a leader refuses appends for seconds.
      for (let attempt = 0; ; attempt++) {
        if (s.state !== 'owned' || this.closed) return;
        try {
          // A lease write must say the shard is still ours first: an owner that was paused or cut
          // off must not claim back a shard another node took. (The new claim's epoch is above
          // every claim before it, ours included: what is in flight counts for nothing.)
          await this.refresh(s);
          await this.claim(s);
          return;
        } catch (e) {
          if (s.state !== 'owned' || this.closed) return; // the lease was lost: refresh gave the shard up
          if (attempt % 10 === 0) this.opts.onWarning?.(`shard ${s.k}: claiming it again after generation ${gen} failed (${(e as Error).message}); retrying`);
          await this.sleep(200);
        }
      }
    })().finally(() => {
      s.resync = undefined;
    });
  }

  // ---------------------------------------------------------------- the pipeline

  /**
   * Publish messages of one shard at consecutive predicted sequences, without waiting for
   * earlier ones (a pipeline). Resolves with their sequences once every ack came back as
   * predicted and every earlier message of the pipeline was confirmed: an unbroken run.
   */
  private publish(s: Shard, msgs: { subject: string; data: Uint8Array; headers: Record<string, string> }[]): Promise<number[]> {
    if (s.state !== 'owned') return Promise.reject(new StorageError(`shard ${s.k} is not owned by this node now; reload the room`));
    if (s.resync) return Promise.reject(new StorageError(`shard ${s.k} is being claimed again after a failed append; reload the room`));
    // Every message names the claim it is sent under: one built under an earlier claim (held
    // while the lease's verdict was awaited, across a re-claim) would be confirmed here and
    // ignored by every reader. Found by the failover benchmark: such a checkpoint, confirmed,
    // purged the valid ones before it.
    if (msgs.some((m) => m.headers[H_CLAIM] !== String(s.claimSeq)))
      return Promise.reject(new StorageError(`shard ${s.k} was claimed again since this append was made; reload the room`));
    if (this.now() >= s.deadline || s.paused.length > 0) {
      // Past the lease's deadline nothing is written until a lease write says it is still ours.
      this.refresh(s).catch(() => {});
      return new Promise((resolve, reject) => s.paused.push({ go: () => this.publish(s, msgs).then(resolve, reject), fail: reject }));
    }
    const gen = s.generation;
    const sentAt = this.now();
    const sends = msgs.map((m) => {
      const expect = s.expect++;
      const msgId = `${this.instance}/${s.k}/${s.claimSeq}/${s.n++}`;
      return this.log.publish(s.k, m.subject, m.data, { msgId, expectLastSeq: expect, headers: m.headers }).then((ack) => {
        // A duplicate answer names another message's sequence (ids are unique per claim, so it is never ours).
        if (ack.seq !== expect + 1 || ack.duplicate)
          throw new WrongLastSequenceError(s.k, expect, `acked at ${ack.seq}, not ${expect + 1}${ack.duplicate ? ' (a duplicate)' : ''}`);
        return ack.seq;
      });
    });
    const before = s.tail;
    const done = (async () => {
      let seqs: number[];
      try {
        seqs = await Promise.all(sends);
      } catch (e) {
        if (s.generation === gen) {
          this.opts.observer?.pipelineBroken?.(e instanceof WrongLastSequenceError ? 'fenced' : 'failed');
          this.breakPipeline(s, `an append failed: ${(e as Error).message}`);
        }
        throw e;
      }
      // In order: if an earlier message failed, this one is not confirmed either (the run broke before it).
      await before;
      if (s.state !== 'owned') throw new StorageError(`shard ${s.k} was given up; reload the room`);
      this.opts.observer?.appendConfirmed?.(this.now() - sentAt);
      return seqs;
    })();
    s.tail = done;
    done.catch(() => {}); // observed through the returned promise and the next in line
    return done.catch((e) => {
      if (e instanceof HerculesError) throw e;
      throw new StorageError(`shard ${s.k}: the append was not confirmed: ${(e as Error).message}; reload the room`, e);
    });
  }

  /**
   * A room's log record (rev `rev`) and the checkpoint messages that follow it (`ckpt`): with
   * batchAppends, queued for the shard's batch at the end of this event-loop turn (a record too
   * large for one goes in parts on the room's subject, as without). Resolves with the sequences
   * of `ckpt` (its last is the checkpoint's last part) once the whole flush is confirmed.
   */
  private sendRecord(s: Shard, room: string, rev: number, body: Uint8Array, ckpt: OutMsg[]): Promise<number[]> {
    if (!this.batchAppends) return this.publish(s, [...this.record(s, this.subject(s.k, 'log', room), rev, body), ...ckpt]);
    // A large record waits its turn in the queue all the same: published ahead of records queued
    // before it, it would break their room's chain (found by the cluster simulator, seed 12).
    const parts = batchCost(room, body) > this.batchLimit() ? this.record(s, this.subject(s.k, 'log', room), rev, body) : undefined;
    return new Promise((resolve, reject) => {
      s.pending.push({ room, rev, body, claim: this.claimHeaders(s), ckpt, ...(parts ? { parts } : {}), resolve, reject });
      // A 0 ms timer (setImmediate on the system clock): after every room host's commit of this
      // turn (microtasks) and the other I/O callbacks of this loop iteration, as SQLite's group commit.
      if (s.pending.length === 1) this.clock.after(0, () => this.flush(s));
    });
  }

  /** The most bytes of records in one batch message. */
  private batchLimit(): number {
    return Math.max(256, this.log.maxPayload - HEADROOM);
  }

  /**
   * The shard's queued records as batch messages, in order, each under the size limit; a
   * record's checkpoint closes its batch and follows it (a load reads the log after its
   * checkpoint: a later record of the room must not come before it). One fenced publish: the
   * pipeline confirms all of it or none.
   */
  private flush(s: Shard): void {
    const items = s.pending;
    s.pending = [];
    if (items.length === 0) return;
    const msgs: OutMsg[] = [];
    const ckptAt: number[] = [];
    let batch: PendingAppend[] = [];
    let size = 0;
    const close = () => {
      if (batch.length > 0) msgs.push(batchMessage(this.subject(s.k, 'batch'), batch));
      batch = [];
      size = 0;
    };
    for (const it of items) {
      if (it.parts) {
        close();
        ckptAt.push(msgs.length + it.parts.length);
        msgs.push(...it.parts, ...it.ckpt);
        continue;
      }
      const cost = batchCost(it.room, it.body);
      if (size + cost > this.batchLimit() || (batch.length > 0 && batch[0].claim[H_CLAIM] !== it.claim[H_CLAIM])) close();
      batch.push(it);
      size += cost;
      if (it.ckpt.length > 0) close();
      ckptAt.push(msgs.length);
      msgs.push(...it.ckpt);
    }
    close();
    this.publish(s, msgs).then(
      (seqs) => {
        for (const [i, it] of items.entries()) it.resolve(seqs.slice(ckptAt[i], ckptAt[i] + it.ckpt.length));
      },
      (e) => {
        for (const it of items) it.reject(e);
      },
    );
  }

  /** A room's log messages from `from` on: its own subject's and its records in the shard's batches, in stream order (`until`: read each up to a message of its own). */
  private readLog(k: number, room: string, from: number, until?: { log: number; batch: number }): Promise<LogMessage[]> {
    return readRoomLog(this.log, this.prefix, k, room, from, until);
  }

  // ---------------------------------------------------------------- records

  /** A record as messages: its body's bytes in parts under the log's size limit, epoch and rev in the headers. */
  private record(shard: Shard, subject: string, rev: number, body: Uint8Array): { subject: string; data: Uint8Array; headers: Record<string, string> }[] {
    const limit = Math.max(256, this.log.maxPayload - HEADROOM);
    const parts = Math.max(1, Math.ceil(body.length / limit));
    return Array.from({ length: parts }, (_, i) => ({
      subject,
      data: body.subarray(i * limit, (i + 1) * limit),
      headers: { ...this.claimHeaders(shard), [H_REV]: String(rev), [H_PART]: String(i), [H_PARTS]: String(parts) },
    }));
  }

  /** A read barrier on a subject: an empty message that records() skips. */
  private marker(s: Shard, subject: string): { subject: string; data: Uint8Array; headers: Record<string, string> } {
    return { subject, data: new Uint8Array(0), headers: { ...this.claimHeaders(s), [H_MARK]: '1' } };
  }

  /** A checkpoint is confirmed (its ack came back in an unbroken run): a load may start from it. */
  private confirmation(s: Shard, subject: string, ckptSeq: number): { subject: string; data: Uint8Array; headers: Record<string, string> } {
    return { subject, data: new Uint8Array(0), headers: { ...this.claimHeaders(s), [H_MARK]: '1', [H_CONFIRMS]: String(ckptSeq) } };
  }

  private claimHeaders(s: Shard): Record<string, string> {
    return { [H_CLAIM]: String(s.claimSeq), [H_EPOCH]: String(s.epoch) };
  }

  private records(s: Shard, msgs: LogMessage[]): Rec[] {
    return validRecords(s.claims, msgs);
  }

  // ---------------------------------------------------------------- RoomStore

  open(room: string, init: RoomInit): Promise<LoadedRoom>;
  open(room: string): Promise<LoadedRoom | undefined>;
  async open(room: string, init?: RoomInit): Promise<LoadedRoom | undefined> {
    this.checkOpen(`open room ${String(room)}`);
    checkRoomName(room);
    return this.locked(room, async () => {
      this.checkOpen(`open room ${room}`);
      const k = this.shardOf(room);
      let s = await this.acquire(k);
      // Appends of an earlier writer of this room settle first: the load must include or exclude them for good.
      const prev = this.rooms_.get(room);
      if (prev) await Promise.allSettled([...prev.inFlight]);
      if (s.resync) await s.resync;
      s = await this.acquire(k);
      let loaded = await this.read(s, room, !init);
      let fresh = false;
      if (!loaded) {
        if (!init) return undefined;
        const meta: RoomMeta = { machine: init.machine, version: init.version, created: this.wallClock() };
        const digests = [{ pos: 0, digest: checkpointDigest(room, 0, init.initial) }];
        const ck: CkptBody = { pos: 0, state: init.initial, suffix: [], clients: {}, stable: 0, meta, lastActivity: meta.created, digests };
        const body = encode(ck, `room ${room}: its initial state`);
        await this.publish(s, this.record(s, this.subject(k, 'ckpt', room), 0, body));
        loaded = { r: this.fromCheckpoint(room, k, 0, ck, body.length), state: ck.state };
        fresh = true;
      }
      const r = loaded.r;
      this.rooms_.set(room, r);
      return {
        meta: { ...r.meta },
        rev: r.rev,
        fresh,
        durable: {
          checkpoint: { pos: r.writtenPos, state: loaded.state },
          suffix: r.tail.filter((e) => e.pos > r.writtenPos),
          clients: { ...r.clients },
          stable: r.stable,
        },
      };
    });
  }

  private fromCheckpoint(room: string, shard: number, rev: number, ck: CkptBody, bytes: number): OpenRoom {
    return {
      name: room,
      shard,
      meta: ck.meta,
      rev,
      head: ck.pos + ck.suffix.length,
      stable: Math.max(ck.stable, ck.pos),
      clients: { ...ck.clients },
      tail: [...ck.suffix],
      writtenPos: ck.pos,
      writtenBytes: bytes,
      logBytesSince: 0,
      latest: undefined,
      inFlight: new Set(),
      lastActivity: ck.lastActivity ?? ck.meta.created ?? 0,
      digests: ck.digests ?? [],
    };
  }

  /** Load a room from the stream by the replay rule; undefined if it has no valid checkpoint (never created). */
  private async read(s: Shard, room: string, lookup: boolean): Promise<{ r: OpenRoom; state: unknown } | undefined> {
    const ckptSubject = this.subject(s.k, 'ckpt', room),
      logSubject = this.subject(s.k, 'log', room);
    // A lookup (no room to create) writes nothing for a room the stream has never heard of: its
    // barriers would make `rooms()` list it, and removing them takes a purge, which this store
    // does not risk (nats-server < 2.9.18 replays a filtered purge as a full one on a restart,
    // nats-server#4196: it wiped three of four shard streams in the cluster soak). (The leader
    // answers; one just elected may be behind, so a lookup may miss a room: nothing is written.)
    // A room deleted last (its subject ends with a tombstone that counts) is not there either.
    if (lookup) {
      const last = await this.log.last(s.k, ckptSubject);
      if (!last || (last.headers[H_DELETED] !== undefined && counts(s.claims, last))) return undefined;
    }
    // Barriers first: a marker appended to each of the room's subjects, acknowledged at its
    // predicted sequence, then each subject read up to its marker. A NATS leader just elected
    // (or a replica serving the read) may be behind its log (nats-server < 2.11); a read that
    // stops at what it happens to have misses records, and the room reloads short: measured
    // under stream-leader kills, as a room recreated empty and as confirmed ops lost.
    const batchSubject = this.subject(s.k, 'batch');
    const [ckptMark, logMark, batchMark] = await this.publish(s, [this.marker(s, ckptSubject), this.marker(s, logSubject), this.marker(s, batchSubject)]);
    const until = { log: logMark, batch: batchMark };
    const ckptMsgs = await this.log.read(s.k, ckptSubject, 1, ckptMark);
    const { base, after, ckpts } = chainBase(s.claims, ckptMsgs);
    if (!base && ckpts > 0)
      throw new StorageError(
        `room ${room} has ${ckpts} checkpoints in stream ${s.k} but none confirmed and no first one; it cannot be loaded safely. Check the stream (an operator's purge?)`,
      );
    if (!base) {
      // Never created (or deleted), as far as a complete read shows. Defence in depth: no log record of it since either.
      if (this.records(s, await this.readLog(s.k, room, after + 1, until)).length > 0)
        throw new StorageError(`room ${room} has log records but no valid checkpoint; it is not created again. Check the stream ${s.k} (an operator's purge?)`);
      return undefined;
    }
    const ck = base.body as CkptBody;
    const r = this.fromCheckpoint(room, s.k, base.rev, ck, base.bytes);
    follow(r, this.records(s, await this.readLog(s.k, room, base.seq + 1, until)));
    return { r, state: ck.state };
  }

  append(room: string, write: RoomAppend): Promise<Appended> {
    if (this.closed) return Promise.reject(closedError(`append to room ${String(room)}`));
    let r: OpenRoom | undefined;
    let s: Shard | undefined;
    let msgs: OutMsg[];
    let bytes: Uint8Array;
    let head: number;
    let ckpt: { body: CkptBody; bytes: number } | undefined;
    try {
      const checked = checkAppend(room, write);
      r = this.rooms_.get(room);
      s = r && this.shardState.get(r.shard);
      // Not open here (never created, released, or dropped when its shard's pipeline broke): this writer holds no rev of it.
      if (!r || !s) throw new FencedError(room, write.after, undefined);
      if (r.rev !== write.after) throw new FencedError(room, write.after, r.rev);
      head = checkAgainstHead(room, checked, r.head);
      // Taken now: what the caller changes after the call does not change what is written.
      const body: LogBody = {
        entries: copy([...(write.entries ?? [])], room),
        clients: copy(write.clients ?? {}, room),
        stable: write.checkpoint?.pos ?? 0,
        time: this.wallClock(),
      };
      if (write.checkpoint) body.digest = { pos: write.checkpoint.pos, digest: checkpointDigest(room, write.checkpoint.pos, write.checkpoint.state) };
      bytes = encode(body, `room ${room}: an append`);
      msgs = [];
      // The room moves now (appends take effect in call order); a failure fails every later one too (the shard re-claims).
      r.rev++;
      r.head = head;
      for (const e of body.entries) r.tail.push(e);
      Object.assign(r.clients, body.clients);
      r.stable = Math.max(r.stable, body.stable);
      r.logBytesSince += bytes.length;
      if (body.digest) r.digests = keepDigests(r.digests, body.digest, r.writtenPos);
      if (body.entries.length > 0 || Object.keys(body.clients).length > 0) r.lastActivity = this.wallClock();
      if (write.checkpoint) {
        const cp = write.checkpoint;
        if (!r.latest || cp.pos > r.latest.pos) r.latest = { pos: cp.pos, state: cp.state, rev: r.rev };
        if (cp.pos - r.writtenPos >= this.checkpointEvery && r.logBytesSince >= r.writtenBytes / 2) {
          const c = this.checkpointOf(r);
          const data = c && tryEncode(c);
          if (c && data) {
            ckpt = { body: c, bytes: data.length };
            msgs.push(...this.record(s, this.subject(r.shard, 'ckpt', room), r.rev, data));
          }
        }
      }
    } catch (e) {
      return Promise.reject(e);
    }
    const open = r;
    const shard = s;
    const claim = String(s.claimSeq);
    const p = this.sendRecord(s, room, r.rev, bytes, msgs).then((seqs) => {
      if (ckpt) void this.checkpointed(open, shard, ckpt.body, seqs[seqs.length - 1], ckpt.bytes, claim);
      return { rev: write.after + 1, head };
    });
    open.inFlight.add(p);
    const drop = () => open.inFlight.delete(p);
    p.then(drop, drop);
    return p;
  }

  /** A checkpoint of the room now: the newest state given, the entries after it, every client record. */
  private checkpointOf(r: OpenRoom): CkptBody | undefined {
    const cp = r.latest;
    if (!cp) return undefined;
    return {
      pos: cp.pos,
      state: cp.state,
      suffix: r.tail.filter((e) => e.pos > cp.pos),
      clients: { ...r.clients },
      stable: r.stable,
      meta: r.meta,
      lastActivity: r.lastActivity,
      digests: keepDigests(r.digests, undefined, cp.pos),
    };
  }

  /**
   * A checkpoint's ack came back in an unbroken run: publish its confirmation (from then on a load
   * may start from it), and once that is acked too, purge what the previous confirmed checkpoint
   * makes unneeded. `claim`: the claim the checkpoint was sent under (its confirmation must be too).
   */
  private checkpointed(r: OpenRoom, s: Shard, ck: CkptBody, seq: number, bytes: number, claim: string | undefined): Promise<void> {
    if (ck.pos > r.writtenPos) {
      r.writtenPos = ck.pos;
      r.writtenBytes = bytes;
      r.logBytesSince = 0;
      r.tail = r.tail.filter((e) => e.pos > ck.pos);
    }
    if (s.state !== 'owned' || String(s.claimSeq) !== claim) return Promise.resolve();
    const first = seq - Math.max(0, Math.ceil(bytes / Math.max(256, this.log.maxPayload - HEADROOM)) - 1);
    return this.publish(s, [this.confirmation(s, this.subject(r.shard, 'ckpt', r.name), seq)]).then(
      () => this.confirmed(r, s, first, ck),
      () => {}, // the pipeline broke: loads start from an older confirmed checkpoint and walk the log
    );
  }

  /** A checkpoint's confirmation was acked: the room's messages before the previous confirmed checkpoint are not needed any more. */
  private confirmed(r: OpenRoom, s: Shard, first: number, ck: CkptBody): void {
    // Only inside the unbroken run and before the deadline: then no claim can precede this checkpoint.
    if (s.state !== 'owned' || this.now() >= s.deadline) return;
    // Keep the previous confirmed checkpoint too (and the log after it): purge only before it,
    // and before the oldest checkpoint history keeps (none known: nothing is purged).
    const prev = r.prevCkptSeq;
    r.prevCkptSeq = first;
    const kept = (r.confirmedCkpts ??= []);
    kept.push({ first, pos: ck.pos, lastActivity: ck.lastActivity ?? 0 });
    const start = this.historyStart(r.meta.machine, kept);
    if (start < 0) return;
    kept.splice(0, start);
    const before = prev === undefined ? undefined : Math.min(prev, kept[0].first);
    if (before === undefined || !this.purge) return;
    for (const kind of ['log', 'ckpt'] as const) {
      const p = this.log
        .purge(r.shard, this.subject(r.shard, kind, r.name), before)
        .catch((e) => this.opts.onWarning?.(`room ${r.name}: purging its ${kind} failed: ${(e as Error).message}`));
      this.purges.add(p);
      p.finally(() => this.purges.delete(p));
    }
  }

  /**
   * The index in `ckpts` (oldest first, the newest last) of the oldest checkpoint history keeps:
   * walking back from the newest, the first at or before the retention's cut; -1 if none is.
   */
  private historyStart(machine: string, ckpts: readonly { pos: number; lastActivity: number }[]): number {
    const policy = retentionFor(this.opts.retention, machine);
    const newest = ckpts[ckpts.length - 1].pos;
    for (let i = ckpts.length - 1; i >= 0; i--) {
      const byOps = policy.ops !== undefined && ckpts[i].pos <= newest - policy.ops;
      const byDays = policy.days !== undefined && ckpts[i].lastActivity < this.wallClock() - policy.days * 86_400_000;
      if (byOps || byDays) return i;
    }
    return -1;
  }

  /**
   * Before a join is welcomed from a room this node loaded earlier: resolves once a barrier (an
   * empty marker, fenced at the predicted sequence like every append) sent after this call was
   * confirmed in an unbroken run since this node's claim, so no other node had claimed the shard
   * when it landed; rejects if it was refused or cannot be sent, or if the room was dropped here
   * meanwhile (the caller reloads the room). The lease cannot vouch for that: a node paused or cut
   * off may still be within its deadline by its own clock while the lease table let another node
   * take the shard, claim it and write (the bucket on nats-server 2.9.10 let two creates win; the
   * cluster simulator's seeds 692 and 5375: a welcome from memory handed a client a log older than
   * the one it had seen at the other node). Joins that arrive while a barrier is in flight share
   * the next one; rooms of the shard share it.
   */
  async confirmWriter(room: string): Promise<void> {
    this.checkOpen(`confirm the writer of room ${String(room)}`);
    const r = this.rooms_.get(room);
    const s = r && this.shardState.get(r.shard);
    if (!r || !s) throw new StorageError(`room ${room} is no longer open on this node (its shard was given up or claimed again); reload the room`);
    await this.barrier(s, this.subject(s.k, 'log', room));
    if (this.rooms_.get(room) !== r) throw new StorageError(`room ${room} was dropped on this node while its writer was confirmed; reload the room`);
  }

  /** A barrier on the shard sent after this call (see confirmWriter). */
  private barrier(s: Shard, subject: string): Promise<void> {
    if (s.nextBarrier) return s.nextBarrier;
    const start = (): Promise<void> => {
      const p: Promise<void> = this.publish(s, [this.marker(s, subject)])
        .then(() => {})
        .finally(() => {
          if (s.barrier === p) s.barrier = undefined;
        });
      s.barrier = p;
      return p;
    };
    if (!s.barrier) return start();
    // The one in flight was sent before this call: it proves nothing about now.
    const next = s.barrier
      .catch(() => {})
      .then(() => {
        s.nextBarrier = undefined;
        return start();
      });
    s.nextBarrier = next;
    return next;
  }

  async release(room: string): Promise<void> {
    this.checkOpen(`release room ${String(room)}`);
    checkRoomName(room);
    await this.locked(room, () => this.releaseNow(room));
  }

  private async releaseNow(room: string): Promise<void> {
    const r = this.rooms_.get(room);
    if (!r) return;
    await Promise.allSettled([...r.inFlight]);
    try {
      const s = this.shardState.get(r.shard);
      if (r.latest && r.latest.pos > r.writtenPos && s && this.rooms_.get(room) === r) {
        const ck = this.checkpointOf(r)!;
        const data = encode(ck, `room ${room}: its checkpoint`);
        const msgs = this.record(s, this.subject(r.shard, 'ckpt', room), r.rev, data);
        const seqs = await this.publish(s, msgs);
        // Confirmed before the room is let go, so its next load starts from here.
        await this.checkpointed(r, s, ck, seqs[seqs.length - 1], data.length, msgs[0].headers[H_CLAIM]);
      }
    } catch (e) {
      throw new StorageError(
        `room ${room}: cannot write its checkpoint on release: ${(e as Error).message}. The log is intact; the room loads from an older checkpoint.`,
        e,
      );
    } finally {
      if (this.rooms_.get(room) === r) this.rooms_.delete(room);
    }
  }

  /**
   * Every room stored, in every shard: a stream info per shard (the subjects of its checkpoints),
   * then the last message of each room's checkpoint subject (a direct get per room), to leave out
   * the rooms deleted last (plus a read of the shard's claims if any was).
   */
  async rooms(): Promise<string[]> {
    this.checkOpen('list its rooms');
    const names = new Set<string>();
    try {
      for (let k = 0; k < this.shards; k++) for (const name of await this.roomsIn(k)) names.add(name);
    } catch (e) {
      throw asStorageError(e, 'cannot list the rooms');
    }
    for (const name of this.rooms_.keys()) names.add(name);
    return [...names];
  }

  /** The rooms stored in shard k: those with a checkpoint subject, less those whose last message there is a deletion that counts. */
  private async roomsIn(k: number): Promise<string[]> {
    let claims: Promise<Claims> | undefined;
    const subjects = await this.log.subjects(k, `${this.subject(k, 'ckpt', undefined)}.*`);
    const kept = await mapLimit(subjects, 32, async (subject) => {
      const last = await this.log.last(k, subject);
      if (!last) return undefined;
      if (last.headers[H_DELETED] !== undefined) {
        claims ??= this.claimsOf(k);
        if (counts(await claims, last)) return undefined;
      }
      return roomOfSubject(subject);
    });
    return kept.filter((n): n is string => n !== undefined);
  }

  // ---------------------------------------------------------------- reads and writes apart from a room's writer

  /** The claims in shard k's stream from sequence `from` on (as its leader knows them). */
  private async claimsOf(k: number, from = 1): Promise<{ seq: number; epoch: number }[]> {
    return (await this.log.read(k, this.subject(k, 'claim'), from)).map((m) => ({ seq: m.seq, epoch: Number(m.headers[H_EPOCH]) }));
  }

  /**
   * Read shard k's messages by the replay rule without owning it: the claims first, then `fn`
   * reads what it needs, then the claims once more. A claim that landed meanwhile (another node
   * took the shard, or its owner claimed it again) can change what counts of what `fn` read, so
   * `fn` runs again under every claim. (No barrier is written: a NATS leader just elected may
   * answer from behind its log, so a read may miss the newest messages; it never counts a
   * message the replay rule would not.)
   */
  private async underClaims<T>(k: number, fn: (claims: Claims) => Promise<T>): Promise<T> {
    let claims = await this.claimsOf(k);
    for (let attempt = 0; ; attempt++) {
      const out = await fn(claims);
      const more = await this.claimsOf(k, (claims.at(-1)?.seq ?? 0) + 1);
      if (more.length === 0) return out;
      if (attempt >= 3) throw new StorageError(`shard ${k} was claimed ${attempt + 1} times while it was being read; retry`);
      claims = [...claims, ...more];
    }
  }

  /**
   * The room's confirmed checkpoints (bases a load could start from), oldest first, read by their
   * headers alone where the log can (the replay rule needs no body): `withBody` fetches a base's
   * parts when it is needed. `ckpts`: how many checkpoint messages the subject holds.
   */
  private async confirmedBases(k: number, room: string, claims: Claims): Promise<{ bases: Rec[]; ckpts: number }> {
    const ckptSubject = this.subject(k, 'ckpt', room);
    const { readHeaders, readAt } = this.log;
    const headersOnly = readHeaders !== undefined && readAt !== undefined;
    const msgs = headersOnly ? await readHeaders.call(this.log, k, ckptSubject) : await this.log.read(k, ckptSubject);
    return chainBase(claims, msgs, headersOnly);
  }

  /** The base with its body: read from its parts if only its headers were read, each part checked to be the same checkpoint still. */
  private async withBody(k: number, room: string, c: Rec): Promise<Rec> {
    const { readAt } = this.log;
    if (c.body !== undefined || readAt === undefined) return c;
    const ckptSubject = this.subject(k, 'ckpt', room);
    const parts = await readAt.call(this.log, k, c.partSeqs);
    for (const p of parts)
      if (p.subject !== ckptSubject || p.headers[H_CLAIM] !== String(c.claim ?? p.headers[H_CLAIM]) || Number(p.headers[H_REV]) !== c.rev)
        throw new StorageError(`room ${room}: its checkpoint at seq ${p.seq} in stream ${k} changed while it was read (a purge?); retry`);
    c.body = joinBody(parts);
    return c;
  }

  /**
   * A room as stored, read from its shard's stream as a load would (the same base checkpoint, the
   * same chain after it) but without barriers, the shard's lease or this store's cache; `log`
   * false: the checkpoint alone. Undefined: no such room (never created, or deleted).
   */
  private async inspectWith(k: number, room: string, claims: Claims, log: boolean, upTo?: number): Promise<Inspected | undefined> {
    const { bases, ckpts } = await this.confirmedBases(k, room, claims);
    let base = bases.at(-1);
    // `upTo` (a peek after that position): the newest base at or before it, if the stream still has one (entries before the newest are kept while purge is off).
    for (let i = bases.length - 1; i >= 0; i--) {
      const c = await this.withBody(k, room, bases[i]);
      base = c;
      if (upTo === undefined || (c.body as CkptBody).pos <= upTo) break;
    }
    if (!base) {
      if (ckpts > 0)
        throw new StorageError(
          `room ${room} has ${ckpts} checkpoints in stream ${k} but none confirmed and no first one; it cannot be read safely. Check the stream (an operator's purge?)`,
        );
      return undefined;
    }
    const ck = base.body as CkptBody;
    const r = this.fromCheckpoint(room, k, base.rev, ck, base.bytes);
    if (log) follow(r, validRecords(claims, await this.readLog(k, room, base.seq + 1)));
    return { r, state: ck.state, bytes: base.bytes + r.logBytesSince };
  }

  private async inspect(room: string, log: boolean, what: string, upTo?: number): Promise<Inspected | undefined> {
    const k = this.shardOf(room);
    try {
      // A room the stream has never heard of costs one request.
      if (!(await this.log.last(k, this.subject(k, 'ckpt', room)))) return undefined;
      return await this.underClaims(k, (claims) => this.inspectWith(k, room, claims, log, upTo));
    } catch (e) {
      throw asStorageError(e, `room ${room}: cannot read it from stream ${k} for ${what}`);
    }
  }

  /**
   * The room's meta and up to `max` entries after `after`, as stored: read from the stream (any
   * node, the shard's owner or not), from the newest checkpoint a load could start from at or
   * before `after` (an older confirmed one when `after` is behind the newest: a webhook that lags
   * gets the entries since, while the stream keeps them), else the oldest there is (`from` then
   * says where the entries start). Appends not yet acknowledged are not in it. Costs a read of the shard's claims, of the room's checkpoint
   * subject and (with `max` > 0) of its log after the checkpoint, and one more request for the
   * claims.
   */
  async peek(room: string, after: number, max: number): Promise<RoomPeek | undefined> {
    this.checkOpen(`peek at room ${String(room)}`);
    checkRoomName(room);
    const got = await this.inspect(room, max > 0, 'a peek', max > 0 ? after : undefined);
    if (!got) return undefined;
    const meta = { ...got.r.meta };
    if (max <= 0) return { meta, from: after + 1, entries: [] };
    const entries: LogEntry[] = [];
    let first: number | undefined;
    for (const e of got.r.tail) {
      if (e.pos <= after) continue;
      first ??= e.pos;
      if (entries.length >= max) break;
      entries.push(e);
    }
    return { meta, from: first ?? Math.max(after + 1, got.r.writtenPos + 1), entries };
  }

  /**
   * The room's retained history (RoomStore.history), read from the stream like `peek` (any node):
   * the confirmed checkpoints from the newest back to the first at or before the retention's cut
   * (HistoryRetention, by position, or by the checkpoint's last append time for `days`), and the
   * chain of log records after the oldest of them. Entries carried in a checkpoint's suffix take
   * that checkpoint's last append time. The stream keeps older history while `purge` is off; it
   * is not read.
   */
  async history(room: string, q: HistoryQuery): Promise<RoomHistory | undefined> {
    this.checkOpen(`read the history of room ${String(room)}`);
    checkRoomName(room);
    const k = this.shardOf(room);
    try {
      if (!(await this.log.last(k, this.subject(k, 'ckpt', room)))) return undefined;
      return await this.underClaims(k, (claims) => this.historyWith(k, room, claims, q));
    } catch (e) {
      throw asStorageError(e, `room ${room}: cannot read its history from stream ${k}`);
    }
  }

  private async historyWith(k: number, room: string, claims: Claims, q: HistoryQuery): Promise<RoomHistory | undefined> {
    const kept = await this.keptBases(k, room, claims);
    if (!kept) return undefined;
    const oldest = kept[0];
    const ck0 = oldest.body as CkptBody;
    const r = this.fromCheckpoint(room, k, oldest.rev, ck0, oldest.bytes);
    const timed: HistoryEntry[] = ck0.suffix.map((e) => ({ ...e, time: ck0.lastActivity ?? 0 }));
    const recs = validRecords(claims, await this.readLog(k, room, oldest.seq + 1));
    for (const rec of recs) {
      const rev = r.rev;
      follow(r, [rec]);
      if (r.rev !== rev) for (const e of (rec.body as LogBody).entries) timed.push({ ...e, time: (rec.body as LogBody).time ?? rec.time ?? 0 });
    }
    const start = ck0.pos;
    const head = r.head;
    const meta = { ...r.meta };
    const range = (from: number, to: number) => timed.filter((e) => e.pos >= Math.max(from, start + 1) && e.pos <= Math.min(to, head));
    if (!('stateAt' in q)) return { meta, start, head, entries: range(q.from, q.to) };
    const p = q.stateAt;
    if (!(p >= start && p <= head)) return { meta, start, head, entries: [] };
    const base = kept.findLast((c) => (c.body as CkptBody).pos <= p)!.body as CkptBody;
    return { meta, start, head, base: { pos: base.pos, state: base.state }, entries: range(base.pos + 1, p) };
  }

  /**
   * The checkpoints history keeps, oldest first, with their bodies: from the newest one a load
   * could start from back to the first at or before the retention's cut. Undefined: no such room.
   */
  private async keptBases(k: number, room: string, claims: Claims): Promise<Rec[] | undefined> {
    const { bases } = await this.confirmedBases(k, room, claims);
    const kept: Rec[] = [];
    const seen: { pos: number; lastActivity: number }[] = [];
    for (let i = bases.length - 1; i >= 0; i--) {
      const c = await this.withBody(k, room, bases[i]);
      const ck = c.body as CkptBody;
      kept.unshift(c);
      seen.unshift({ pos: ck.pos, lastActivity: ck.lastActivity ?? 0 });
      if (this.historyStart(ck.meta.machine, seen) === 0) break;
    }
    return kept.length > 0 ? kept : undefined;
  }

  /** The room as stored (the checkpoint a load would start from, the log after it, the client records): read like `peek`. */
  async exportRoom(room: string): Promise<RoomExport | undefined> {
    this.checkOpen(`export room ${String(room)}`);
    checkRoomName(room);
    const got = await this.inspect(room, true, 'an export');
    if (!got) return undefined;
    const r = got.r;
    return {
      meta: { machine: r.meta.machine, version: r.meta.version },
      durable: {
        checkpoint: { pos: r.writtenPos, state: got.state },
        suffix: r.tail.filter((e) => e.pos > r.writtenPos),
        clients: { ...r.clients },
        stable: r.stable,
      },
      digests: keepDigests(r.digests, undefined, r.writtenPos),
    };
  }

  /** Own the shard of `room` for a write apart from its writer (import, delete), or throw NotOwnerError naming the node that serves it. */
  private async owning(room: string): Promise<Shard> {
    const k = this.shardOf(room);
    try {
      const s = await this.acquire(k);
      if (s.resync) await s.resync;
      return await this.acquire(k);
    } catch (e) {
      if (e instanceof NotOwnerError) throw new NotOwnerError(k, e.owner, room);
      throw e;
    }
  }

  /**
   * Create `room` from an export: one checkpoint record of rev 0 (the export's checkpoint, the
   * log after it and the client records), published through the shard's fenced pipeline like a
   * room's creation, so all or nothing. Only the shard's owner writes: this node takes the
   * shard's lease if it is free, else `NotOwnerError` names the node to send the import to.
   */
  async importRoom(room: string, data: RoomExport): Promise<void> {
    this.checkOpen(`import room ${String(room)}`);
    checkRoomName(room);
    const problem = exportProblem(data);
    if (problem) throw new HerculesError('bad-argument', `import room ${room}: ${problem}`);
    const d = data.durable;
    const now = this.wallClock();
    const ck: CkptBody = {
      pos: d.checkpoint.pos,
      state: d.checkpoint.state,
      suffix: d.suffix,
      clients: d.clients,
      stable: d.stable,
      meta: { machine: data.meta.machine, version: data.meta.version, created: now },
      lastActivity: now,
      digests: importedDigests(data),
    };
    const body = encode(ck, `import room ${room}`);
    await this.locked(room, async () => {
      this.checkOpen(`import room ${room}`);
      const s = await this.owning(room);
      if (this.rooms_.has(room) || (await this.read(s, room, true)))
        throw new HerculesError('bad-argument', `import room ${room}: it exists; delete it first or import under another name`);
      await this.publish(s, this.record(s, this.subject(s.k, 'ckpt', room), 0, body));
    });
  }

  /**
   * Delete `room`: a deletion record (a tombstone) on its checkpoint subject, published through
   * the shard's fenced pipeline; loads, reads and listings count nothing of the room before it,
   * so a room created again under the name starts empty. The stream keeps the room's messages
   * (a filtered purge replays as a full one on nats-server before 2.9.18, nats-server#4196);
   * with `purge` on, they are purged once the deletion is acknowledged, best effort. Only the
   * shard's owner writes (as `importRoom`); a room loaded on this node must be released first.
   */
  async deleteRoom(room: string): Promise<boolean> {
    this.checkOpen(`delete room ${String(room)}`);
    checkRoomName(room);
    return this.locked(room, async () => {
      this.checkOpen(`delete room ${room}`);
      if (this.rooms_.has(room)) throw new HerculesError('bad-argument', `delete room ${room}: it is loaded on this node; release it (unload the room) first`);
      const s = await this.owning(room);
      const found = await this.read(s, room, true);
      if (!found) return false;
      const msgs = this.record(s, this.subject(s.k, 'ckpt', room), found.r.rev + 1, enc.encode(JSON.stringify({ deleted: true })));
      for (const m of msgs) m.headers[H_DELETED] = '1';
      const [seq] = await this.publish(s, msgs);
      if (this.purge) {
        for (const kind of ['log', 'ckpt'] as const) {
          const p = this.log
            .purge(s.k, this.subject(s.k, kind, room), seq)
            .catch((e) => this.opts.onWarning?.(`room ${room}: purging its ${kind} after its deletion failed: ${(e as Error).message}`));
          this.purges.add(p);
          p.finally(() => this.purges.delete(p));
        }
      }
      return true;
    });
  }

  /**
   * A page of the stored rooms by name (code point order), each read like `peek` (its base
   * checkpoint and the log after it, by the replay rule), without loading it. Costs a stream
   * info per shard (every room's name), then per room listed a read of its checkpoint subject
   * and one of its log after the checkpoint, and per shard in the page two reads of its claims.
   * Deleted rooms whose subjects the stream keeps are read and skipped.
   */
  async listRooms(opts: ListRoomsOptions): Promise<StoredRoomInfo[]> {
    this.checkOpen('list its rooms');
    const { after, limit } = checkListRooms(opts);
    try {
      const names: string[] = [];
      for (let k = 0; k < this.shards; k++)
        for (const subject of await this.log.subjects(k, `${this.subject(k, 'ckpt', undefined)}.*`)) names.push(roomOfSubject(subject));
      names.sort(compareRoomNames);
      const todo = after === undefined ? names : names.filter((n) => compareRoomNames(n, after) > 0);
      const out: StoredRoomInfo[] = [];
      for (let i = 0; i < todo.length && out.length < limit; ) {
        const chunk = todo.slice(i, i + limit - out.length);
        i += chunk.length;
        const byShard = new Map<number, string[]>();
        for (const n of chunk) {
          const k = this.shardOf(n);
          byShard.set(k, [...(byShard.get(k) ?? []), n]);
        }
        const got = new Map<string, Inspected | undefined>();
        await mapLimit([...byShard], 8, async ([k, rooms]) => {
          const read = await this.underClaims(k, (claims) => mapLimit(rooms, 16, (n) => this.inspectWith(k, n, claims, true)));
          for (let j = 0; j < rooms.length; j++) got.set(rooms[j], read[j]);
        });
        for (const n of chunk) {
          const x = got.get(n);
          if (x) out.push(infoOf(n, x));
        }
      }
      return out;
    } catch (e) {
      throw asStorageError(e, 'cannot list the rooms');
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    for (const name of [...this.rooms_.keys()]) await this.locked(name, () => this.releaseNow(name)).catch(() => {});
    this.closed = true;
    await Promise.allSettled([...this.purges]);
    for (const s of this.shardState.values()) {
      if (s.renewTimer) s.renewTimer();
      if (s.refreshing) await s.refreshing.catch(() => {});
      if (s.state === 'owned') await this.leases.release(this.leaseKey(s.k), s.leaseRev).catch(() => {});
      s.state = 'idle';
    }
  }

  private checkOpen(what: string): void {
    if (this.closed) throw closedError(what);
  }

  private locked<T>(room: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(room) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const settled = next.catch(() => {});
    this.locks.set(room, settled);
    settled.then(() => {
      if (this.locks.get(room) === settled) this.locks.delete(room);
    });
    return next;
  }

  private leaseKey(shard: number): string {
    return `${this.prefix}_${shard}`;
  }
}

function closedError(what: string): HerculesError {
  return new HerculesError('closed', `the room store is closed, so it cannot ${what}; open a new one`);
}

function encode(v: unknown, what: string): Uint8Array {
  // JSON.stringify drops undefined and turns NaN into null silently; a BigInt or a cycle throws.
  try {
    return enc.encode(JSON.stringify(v));
  } catch (e) {
    throw new StorageError(`${what} cannot be stored: ${(e as Error).message}`, e, 'value');
  }
}

/** A copy of what the caller gave (it may change it after the call); a value that cannot be copied cannot be stored. */
function copy<T>(v: T, room: string): T {
  try {
    return structuredClone(v);
  } catch (e) {
    throw new StorageError(`room ${room}: an append cannot be stored: ${(e as Error).message}`, e, 'value');
  }
}

function tryEncode(v: unknown): Uint8Array | undefined {
  try {
    return enc.encode(JSON.stringify(v));
  } catch {
    return undefined;
  }
}

/** A shard's claims, in stream order: its sequence and epoch. */
export type Claims = readonly { seq: number; epoch: number }[];

/**
 * The replay rule, for one message: it counts only if it was sent under the last claim before it
 * in the stream. A claim in between (another node's, or this node's own re-claim) fences
 * everything sent before it, whatever its epoch: a stale owner's pipelined message that happened
 * to find the stream at the sequence it expected is not counted, nor is anything of the writer's
 * from before its re-claim. Messages written before claims were named in headers fall back to
 * the epoch test: an epoch at least that of every claim before it.
 */
export function counts(claims: Claims, m: LogMessage): boolean {
  let last: { seq: number; epoch: number } | undefined;
  let maxEpoch = 0;
  for (const c of claims) {
    if (c.seq >= m.seq) break;
    last = c;
    if (c.epoch > maxEpoch) maxEpoch = c.epoch;
  }
  const claim = m.headers[H_CLAIM];
  if (claim !== undefined) return last !== undefined && Number(claim) === last.seq;
  return Number(m.headers[H_EPOCH]) >= maxEpoch;
}

/** The checkpoints (by the sequence of their last part) that a counted confirmation names. */
export function confirmedCheckpoints(claims: Claims, msgs: readonly LogMessage[]): Set<number> {
  const out = new Set<number>();
  for (const m of msgs) if (m.headers[H_CONFIRMS] !== undefined && counts(claims, m)) out.add(Number(m.headers[H_CONFIRMS]));
  return out;
}

/**
 * The complete records among a subject's messages, in stream order, that the replay rule counts
 * (`counts`), their parts consecutive and of one claim. Read barriers and confirmations are not
 * records (and do not break a record's parts: those are published together).
 */
export function validRecords(claims: Claims, msgs: readonly LogMessage[], headersOnly = false): Rec[] {
  const out: Rec[] = [];
  let parts: LogMessage[] = [];
  for (const m of msgs) {
    if (m.headers[H_MARK]) continue;
    const rev = Number(m.headers[H_REV]),
      part = Number(m.headers[H_PART]),
      n = Number(m.headers[H_PARTS]);
    if (!counts(claims, m)) {
      parts = [];
      continue;
    }
    const first = parts[0];
    const continues =
      first !== undefined &&
      part === parts.length &&
      first.headers[H_REV] === m.headers[H_REV] &&
      first.headers[H_CLAIM] === m.headers[H_CLAIM] &&
      first.headers[H_EPOCH] === m.headers[H_EPOCH];
    if (!continues) parts = part === 0 ? [m] : [];
    else parts.push(m);
    if (parts.length === 0 || parts.length < n) continue;
    const bytes = parts.reduce((a, p) => a + (headersOnly ? (p.size ?? 0) : p.data.length), 0);
    const claim = m.headers[H_CLAIM];
    out.push({
      seq: m.seq,
      claim: claim === undefined ? undefined : Number(claim),
      epoch: Number(m.headers[H_EPOCH]),
      rev,
      body: headersOnly ? undefined : joinBody(parts),
      bytes,
      partSeqs: parts.map((p) => p.seq),
      time: m.time,
      deleted: m.headers[H_DELETED] !== undefined,
    });
    parts = [];
  }
  return out;
}

/**
 * Where a load of a room starts, from the messages of its checkpoint subject: after the last
 * deletion that counts (`after`: its sequence, 0 if none; what came before it counts for
 * nothing), the newest checkpoint known to be on the chain: the room's first (rev 0: created or
 * imported), one whose confirmation counts (its ack came back in an unbroken run, so every
 * append before it landed), or one written before confirmations existed. A checkpoint that
 * landed while an append before it did not (another writer's message took that append's place
 * in the stream) would otherwise bring in entries the log never got: found by the cluster
 * simulator. `ckpts`: how many checkpoints follow the deletion (some and no base: unreadable).
 */
export function chainBase(
  claims: Claims,
  ckptMsgs: readonly LogMessage[],
  headersOnly = false,
): { base: Rec | undefined; after: number; ckpts: number; bases: Rec[] } {
  const recs = validRecords(claims, ckptMsgs, headersOnly);
  const del = recs.findLastIndex((c) => c.deleted);
  const live = recs.slice(del + 1);
  const confirmed = confirmedCheckpoints(claims, ckptMsgs);
  // Every checkpoint a load could start from, oldest first (`peek` may start from an older one to give older entries).
  const bases = live.filter((c) => c.rev === 0 || c.claim === undefined || confirmed.has(c.seq));
  return { base: bases.at(-1), after: del >= 0 ? recs[del].seq : 0, ckpts: live.length, bases };
}

/** The chain after a room's checkpoint, onto `r`: records of rev r.rev + 1 whose entries follow the head; anything else is a stale writer's. */
function follow(r: OpenRoom, recs: readonly Rec[]): void {
  for (const rec of recs) {
    const b = rec.body as LogBody;
    if (rec.rev !== r.rev + 1) continue;
    if (b.entries.length > 0 && b.entries[0].pos !== r.head + 1) continue;
    Object.assign(r.clients, b.clients);
    r.stable = Math.max(r.stable, b.stable);
    r.logBytesSince += rec.bytes;
    for (const e of b.entries) r.tail.push(e);
    r.head += b.entries.length;
    r.rev++;
    if (b.digest) r.digests = keepDigests(r.digests, b.digest, r.writtenPos);
    if ((b.entries.length > 0 || Object.keys(b.clients).length > 0) && rec.time !== undefined) r.lastActivity = Math.max(r.lastActivity, rec.time);
  }
}

/** A record's body from its parts. */
function joinBody(parts: readonly LogMessage[]): unknown {
  const joined = new Uint8Array(parts.reduce((a, p) => a + p.data.length, 0));
  let at = 0;
  for (const p of parts) {
    joined.set(p.data, at);
    at += p.data.length;
  }
  return JSON.parse(dec.decode(joined));
}

/** What a record takes of a batch message: its body and its entry in the batch's index. */
function batchCost(room: string, body: Uint8Array): number {
  return body.length + Buffer.byteLength(room, 'utf8') + 32;
}

/**
 * One message of several rooms' log records (headers: the claim's, `Hc-Batch` the count): a
 * 4-byte big-endian length, an index of that length (JSON `[[room, rev, bytes], ...]`), then
 * the records' bodies one after another, as the index says. A reader takes its room's records
 * without parsing the others'.
 */
function batchMessage(subject: string, items: readonly PendingAppend[]): OutMsg {
  const index = enc.encode(JSON.stringify(items.map((it) => [it.room, it.rev, it.body.length])));
  const data = new Uint8Array(4 + index.length + items.reduce((a, it) => a + it.body.length, 0));
  new DataView(data.buffer).setUint32(0, index.length);
  data.set(index, 4);
  let at = 4 + index.length;
  for (const it of items) {
    data.set(it.body, at);
    at += it.body.length;
  }
  return { subject, data, headers: { ...items[0].claim, [H_BATCH]: String(items.length) } };
}

/** A batch message's records, in order: room, rev and body bytes. A message that is not a whole batch throws (StorageError). */
export function batchRecords(m: LogMessage): { room: string; rev: number; body: Uint8Array }[] {
  try {
    const view = new DataView(m.data.buffer, m.data.byteOffset, m.data.byteLength);
    const n = view.getUint32(0);
    const index = JSON.parse(dec.decode(m.data.subarray(4, 4 + n))) as [string, number, number][];
    let at = 4 + n;
    const out = index.map(([room, rev, len]) => {
      const body = m.data.subarray(at, at + len);
      at += len;
      return { room, rev, body };
    });
    if (at !== m.data.length || out.length !== Number(m.headers[H_BATCH])) throw new Error(`${at} bytes of ${m.data.length} indexed`);
    return out;
  } catch (e) {
    throw new StorageError(`the batch at seq ${m.seq} (${m.subject}) cannot be read: ${(e as Error).message}. Check the stream`, e);
  }
}

/**
 * A room's records in batch messages as messages of the room's log subject: the batch's
 * sequence and claim headers, the record's rev, one part. `validRecords` reads them as any record.
 */
export function fromBatches(msgs: readonly LogMessage[], room: string, logSubject: string): LogMessage[] {
  const out: LogMessage[] = [];
  for (const m of msgs) {
    if (m.headers[H_MARK] || m.headers[H_BATCH] === undefined) continue;
    const { [H_BATCH]: _, ...headers } = m.headers;
    for (const r of batchRecords(m))
      if (r.room === room)
        out.push({
          seq: m.seq,
          subject: logSubject,
          data: r.body,
          time: m.time,
          headers: { ...headers, [H_REV]: String(r.rev), [H_PART]: '0', [H_PARTS]: '1' },
        });
  }
  return out;
}

/**
 * A room's log messages with seq >= `from`: those of its own subject and its records in the
 * shard's batch messages, merged in stream order. `until`: read each subject up to that message
 * of its own (a read barrier), else up to its last.
 */
export async function readRoomLog(
  log: ShardLog,
  prefix: string,
  k: number,
  room: string,
  from = 1,
  until?: { log: number; batch: number },
): Promise<LogMessage[]> {
  const logSubject = subjectOf(prefix, k, 'log', room);
  const [own, batches] = await Promise.all([log.read(k, logSubject, from, until?.log), log.read(k, subjectOf(prefix, k, 'batch'), from, until?.batch)]);
  const mine = fromBatches(batches, room, logSubject);
  if (mine.length === 0) return own;
  const out: LogMessage[] = [];
  let i = 0;
  for (const m of mine) {
    while (i < own.length && own[i].seq < m.seq) out.push(own[i++]);
    out.push(m);
  }
  while (i < own.length) out.push(own[i++]);
  return out;
}

/** A room's name from one of its subjects (its last token). */
function roomOfSubject(subject: string): string {
  return Buffer.from(subject.slice(subject.lastIndexOf('.') + 1), 'base64url').toString('utf8');
}

/** `fn` over `items`, at most `n` at a time, results in order. */
async function mapLimit<T, U>(items: readonly T[], n: number, fn: (t: T) => Promise<U>): Promise<U[]> {
  const out: U[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}
