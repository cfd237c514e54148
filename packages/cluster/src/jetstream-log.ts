/**
 * `ShardLog` and `LeaseTable` on NATS JetStream (the official @nats-io clients).
 *
 * One stream per shard, `<prefix>_<k>` on subjects `<subjects>.<k>.>`, file storage, R3 by
 * default, a 2-minute duplicate window, direct get off (a direct get may be answered by a replica
 * that is behind: reads go to the leader). Leases are a KV bucket whose entries expire `ttlMs`
 * after their last write.
 */
import { HerculesError } from '@hercules/core';
import {
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
  type MsgRequest,
  type NextMsgRequest,
  type StoredMsg,
} from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import { type MsgHdrs, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { type Ack, type Lease, LeaseConflictError, type LeaseTable, type LogMessage, type ShardLog, WrongLastSequenceError } from './shard-log.ts';

export interface JetStreamLogOptions {
  /** Stream names are `<streamPrefix>_<shard>` (default `HC`). */
  streamPrefix?: string;
  /** Subjects are `<subjectPrefix>.<shard>.…` (default `hc`). */
  subjectPrefix?: string;
  /** Replicas per stream (default 3; 1 on a single server). */
  replicas?: number;
  /** How long a publish waits for its ack (default 5 s). */
  timeoutMs?: number;
  /** How long a read waits for a consumer to be created before reading message by message (default 1 s). */
  consumerSetupTimeoutMs?: number;
  /**
   * The streams' duplicate window (a message id seen within it is answered as a duplicate),
   * for streams this creates. Default 2 minutes. Exactly-once does not rest on it (the room
   * engine drops an op it has by client and seq); it only makes a retried publish cheaper.
   */
  duplicateWindowMs?: number;
}

/** A read past the start tries this many single gets before it sets up a consumer (`read`). */
const FEW_BY_GET = 2;

/** A version string's numbers, e.g. "2.9.10" -> [2, 9, 10]. */
function versionOf(v: string): number[] {
  return (/(\d+)\.(\d+)\.(\d+)/.exec(v) ?? ['', '0', '0', '0']).slice(1).map(Number);
}

/** Whether nats-server `version` is at least `min` ("2.9.18"). */
export function natsAtLeast(version: string, min: string): boolean {
  const a = versionOf(version),
    b = versionOf(min);
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] > b[i];
  return true;
}

/**
 * What a nats-server version lacks that a Hercules cluster cares about (empty: nothing). Debian
 * bookworm ships 2.9.10, which lacks all three.
 */
export function natsShortcomings(version: string): string[] {
  const out: string[] = [];
  if (!natsAtLeast(version, '2.9.18'))
    out.push(
      'a server that restarts replays a filtered purge as a full one (nats-server#4196, fixed in 2.9.18): Hercules never purges on it, so streams keep every message',
    );
  if (!natsAtLeast(version, '2.10.0'))
    out.push(
      'no `sync_interval: always` (2.10): an acknowledged append is in the page cache of a majority, not on disk, so a power loss of the majority can lose Authoritative ops',
    );
  if (!natsAtLeast(version, '2.11.0'))
    out.push('a new stream leader may answer before applying its log (fixed in 2.11): Hercules reads up to barriers it appended, so it copes');
  return out;
}

export class JetStreamShardLog implements ShardLog {
  readonly maxPayload: number;
  /** The version of the server this connection is on (the cluster's should all run one). */
  readonly serverVersion: string;
  private readonly js: JetStreamClient;
  /** For reads: a short timeout on creating a consumer, after which a read goes on by single gets. */
  private readonly readJs: JetStreamClient;
  private readonly streamPrefix: string;
  private readonly subjectPrefix: string;
  private readonly replicas: number;
  private readonly timeoutMs: number;
  private readonly duplicateWindowMs: number;
  private readonly ensured = new Map<number, Promise<void>>();
  /** Reads so far, and how many of them went on message by message (a consumer could not be set up); header-only reads, and how many of them read whole messages instead; requests asked again after a "temporarily unavailable". */
  readonly readStats = { reads: 0, byGet: 0, headerReads: 0, headerReadsWhole: 0, retriedUnavailable: 0 };

  private constructor(
    readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    opts: JetStreamLogOptions,
  ) {
    this.js = jetstream(nc);
    this.timeoutMs = opts.timeoutMs ?? 5000;
    this.duplicateWindowMs = opts.duplicateWindowMs ?? 120_000;
    this.readJs = jetstream(nc, { timeout: Math.min(this.timeoutMs, opts.consumerSetupTimeoutMs ?? 1000) });
    this.streamPrefix = opts.streamPrefix ?? 'HC';
    this.subjectPrefix = opts.subjectPrefix ?? 'hc';
    this.replicas = opts.replicas ?? 3;
    this.maxPayload = nc.info?.max_payload ?? 1024 * 1024;
    this.serverVersion = nc.info?.version ?? '0.0.0';
  }

  static async open(nc: NatsConnection, opts: JetStreamLogOptions = {}): Promise<JetStreamShardLog> {
    return new JetStreamShardLog(nc, await jetstreamManager(nc, { timeout: opts.timeoutMs ?? 5000 }), opts);
  }

  stream(shard: number): string {
    return `${this.streamPrefix}_${shard}`;
  }

  /** The subject of `rest` in a shard: `<prefix>.<shard>.<rest>`. */
  subject(shard: number, rest: string): string {
    return `${this.subjectPrefix}.${shard}.${rest}`;
  }

  ensure(shard: number): Promise<void> {
    let p = this.ensured.get(shard);
    if (!p) {
      p = this.create(shard);
      this.ensured.set(shard, p);
      p.catch(() => this.ensured.delete(shard));
    }
    return p;
  }

  private async create(shard: number): Promise<void> {
    const name = this.stream(shard);
    try {
      await this.jsm.streams.info(name);
      return;
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    try {
      await this.jsm.streams.add({
        name,
        subjects: [`${this.subjectPrefix}.${shard}.>`],
        storage: 'file' as never,
        num_replicas: this.replicas,
        duplicate_window: this.duplicateWindowMs * 1_000_000, // ns
        allow_direct: false,
        deny_delete: false,
        deny_purge: false,
      });
    } catch (e) {
      // Another node created it first: fine if it is there now.
      await this.jsm.streams.info(name).catch(() => {
        throw e;
      });
    }
  }

  async publish(
    shard: number,
    subject: string,
    data: Uint8Array,
    opts: { msgId: string; expectLastSeq?: number; headers?: Record<string, string> },
  ): Promise<Ack> {
    let h: ReturnType<typeof natsHeaders> | undefined;
    if (opts.headers) {
      h = natsHeaders();
      for (const [k, v] of Object.entries(opts.headers)) h.set(k, v);
    }
    try {
      const ack = await this.js.publish(subject, data, {
        msgID: opts.msgId,
        timeout: this.timeoutMs,
        ...(h ? { headers: h } : {}),
        ...(opts.expectLastSeq !== undefined ? { expect: { lastSequence: opts.expectLastSeq } } : {}),
      });
      return { seq: ack.seq, duplicate: ack.duplicate };
    } catch (e) {
      if (isWrongLastSequence(e)) throw new WrongLastSequenceError(shard, opts.expectLastSeq ?? -1, (e as Error).message);
      throw e;
    }
  }

  async read(shard: number, subject: string, fromSeq = 1, untilSeq?: number): Promise<LogMessage[]> {
    const stream = this.stream(shard);
    // Read until a known message of the subject: then nothing before it was missed, even from a
    // replica or a leader just elected that is behind (it waits until it has that message).
    const last = untilSeq ?? (await this.lastSeqOf(stream, subject));
    if (last === undefined || last < fromSeq) return [];
    const out: LogMessage[] = [];
    this.readStats.reads++;
    // A read past the start (a room's log after its checkpoint, the claims after the last one
    // known) often holds one or two messages: the marker a load just wrote, the claim just made.
    // Single gets take one request each where a consumer takes three (create, fetch, delete);
    // on a shard handed over, the new owner's take and loads made five such reads one after
    // the other while the moved rooms' clients waited (the drain, issue 42).
    if (fromSeq > 1 && (await this.readByGet(stream, subject, fromSeq, last, out, FEW_BY_GET).catch(() => false))) return out;
    try {
      await this.readByConsumer(stream, subject, out.length > 0 ? out[out.length - 1].seq + 1 : fromSeq, last, out);
    } catch {
      this.readStats.byGet++;
      // A consumer is placed on one of the stream's peers: while a peer is down (a NATS server
      // killed, not yet back), creating one times out about one time in three (measured on 2.9.10,
      // for 15-20 s after the stream had a new leader). The leader answers single gets meanwhile.
    }
    await this.readByGet(stream, subject, out.length > 0 ? out[out.length - 1].seq + 1 : fromSeq, last, out);
    return out;
  }

  /** The stream sequence of the subject's last message (undefined: it has none). */
  private async lastSeqOf(stream: string, subject: string): Promise<number | undefined> {
    try {
      return (await this.whileUnavailable(() => this.jsm.streams.getMessage(stream, { last_by_subj: subject })))?.seq;
    } catch (e) {
      if (isNoMessage(e)) return undefined;
      throw e;
    }
  }

  /**
   * The headers of the subject's messages up to its last (an ordered consumer with
   * `headers_only`: the bodies are not sent; `size` from its `Nats-Msg-Size`). If no consumer
   * can be set up, whole messages one by one (`read`).
   */
  async readHeaders(shard: number, subject: string, fromSeq = 1): Promise<LogMessage[]> {
    const stream = this.stream(shard);
    const last = await this.lastSeqOf(stream, subject);
    if (last === undefined || last < fromSeq) return [];
    const out: LogMessage[] = [];
    this.readStats.headerReads++;
    try {
      await this.readByConsumer(stream, subject, fromSeq, last, out, true);
      return out.map((m) => ({ ...m, size: Number(m.headers['Nats-Msg-Size'] ?? m.data.length) }));
    } catch {
      this.readStats.headerReadsWhole++;
      return (await this.read(shard, subject, fromSeq, last)).map((m) => ({ ...m, size: m.data.length }));
    }
  }

  async readAt(shard: number, seqs: readonly number[]): Promise<LogMessage[]> {
    const stream = this.stream(shard);
    return Promise.all(
      seqs.map(async (seq) => {
        const m = await this.jsm.streams.getMessage(stream, { seq });
        if (!m)
          throw new HerculesError(
            'storage-failed',
            `${stream} has no message ${seq}: the stream lost it or it was purged; check the NATS stream (nats stream info)`,
          );
        return { seq: m.seq, subject: m.subject, data: m.data, headers: headersOf(m.header), time: m.time.getTime() };
      }),
    );
  }

  /** Bulk read through an ordered consumer (about 30 us per message on loopback). */
  private async readByConsumer(stream: string, subject: string, fromSeq: number, last: number, out: LogMessage[], headersOnly = false): Promise<void> {
    const consumer = await this.readJs.consumers.get(stream, {
      filter_subjects: subject,
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: Math.max(1, fromSeq),
      ...(headersOnly ? { headers_only: true } : {}),
    });
    const deadline = Date.now() + this.timeoutMs * 4;
    try {
      while (out.length === 0 || out[out.length - 1].seq < last) {
        if (Date.now() > deadline)
          throw new HerculesError(
            'timeout',
            `reading ${subject} from ${stream}: timed out before seq ${last}; check that the stream's leader answers, then try again`,
          );
        const batch = await consumer.fetch({ max_messages: 1000, expires: 2000 });
        for await (const m of batch) {
          out.push({ seq: m.seq, subject: m.subject, data: m.data, headers: headersOf(m.headers), time: Math.floor(m.info.timestampNanos / 1e6) });
          if (m.seq >= last) break;
        }
      }
    } finally {
      await consumer.delete().catch(() => {});
    }
  }

  /**
   * `request`, again while JetStream answers "temporarily unavailable" (503, err_code 10008: a
   * stream peer down or a leader being elected), for up to four request timeouts.
   */
  private async whileUnavailable<T>(request: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.timeoutMs * 4;
    for (let wait = 50; ; wait = Math.min(wait * 2, 1000)) {
      try {
        return await request();
      } catch (e) {
        if (!isUnavailable(e) || Date.now() + wait > deadline) throw e;
        this.readStats.retriedUnavailable++;
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  /**
   * One message at a time from the stream leader (about 0.8 ms each on loopback), up to `last`,
   * a message of the subject known to exist: an answer past it, or none, means the server that
   * answered is behind, and the read fails rather than come back short.
   */
  private async readByGet(stream: string, subject: string, fromSeq: number, last: number, out: LogMessage[], max = Number.POSITIVE_INFINITY): Promise<boolean> {
    for (let seq = fromSeq, n = 0; seq <= last; n++) {
      if (n >= max) return false;
      let m: StoredMsg | null = null;
      try {
        // STREAM.MSG.GET takes next_by_subj (nats-server >= 2.9); the client's type omits it.
        const next: NextMsgRequest = { seq, next_by_subj: subject };
        m = await this.whileUnavailable(() => this.jsm.streams.getMessage(stream, next as unknown as MsgRequest));
      } catch (e) {
        if (!isNoMessage(e)) throw e;
      }
      if (!m || m.seq > last)
        throw new HerculesError(
          'storage-failed',
          `reading ${subject} from ${stream}: the server has no message ${last} yet (a replica behind its leader); try again`,
        );
      out.push({ seq: m.seq, subject: m.subject, data: m.data, headers: headersOf(m.header), time: m.time.getTime() });
      seq = m.seq + 1;
    }
    return true;
  }

  async last(shard: number, subject: string): Promise<LogMessage | undefined> {
    try {
      const m = await this.jsm.streams.getMessage(this.stream(shard), { last_by_subj: subject });
      return m ? { seq: m.seq, subject: m.subject, data: m.data, headers: headersOf(m.header), time: m.time.getTime() } : undefined;
    } catch (e) {
      if (isNoMessage(e) || isNotFound(e)) return undefined;
      throw e;
    }
  }

  /** Whether JetStream answers: an account info request, answered by the meta leader (readiness.ts). */
  async probe(): Promise<void> {
    await this.jsm.getAccountInfo();
  }

  async lastSeq(shard: number): Promise<number> {
    return (await this.jsm.streams.info(this.stream(shard))).state.last_seq;
  }

  async subjects(shard: number, filter: string): Promise<string[]> {
    try {
      const info = await this.jsm.streams.info(this.stream(shard), { subjects_filter: filter });
      return Object.keys(info.state.subjects ?? {});
    } catch (e) {
      if (isNotFound(e)) return [];
      throw e;
    }
  }

  async purge(shard: number, subject: string, beforeSeq: number): Promise<void> {
    // On a server before 2.9.18 a replica that restarts replays this as a purge of every subject
    // up to beforeSeq (nats-server#4196): the shard's claims and every other room would go.
    if (!natsAtLeast(this.serverVersion, '2.9.18'))
      throw new HerculesError(
        'storage-failed',
        `refusing to purge ${subject}: nats-server ${this.serverVersion} replays a filtered purge as a full one when a server restarts (nats-server#4196, fixed in 2.9.18); upgrade NATS to purge, the streams keep every message meanwhile`,
      );
    await this.jsm.streams.purge(this.stream(shard), { filter: subject, seq: beforeSeq });
  }
}

/** Leases as a KV bucket (R3 by default) whose entries expire `ttlMs` after their last write. */
export class JetStreamLeases implements LeaseTable {
  private constructor(
    private readonly kv: KV,
    readonly ttlMs: number,
  ) {}

  static async open(nc: NatsConnection, opts: { bucket?: string; ttlMs?: number; replicas?: number } = {}): Promise<JetStreamLeases> {
    const ttlMs = opts.ttlMs ?? 2000;
    const kv = await new Kvm(nc).create(opts.bucket ?? 'hc_owners', { replicas: opts.replicas ?? 3, ttl: ttlMs, history: 1 });
    return new JetStreamLeases(kv, ttlMs);
  }

  async create(key: string, value: string): Promise<number> {
    try {
      return await this.kv.create(key, value);
    } catch (e) {
      if (isWrongLastSequence(e) || /exists/i.test(String((e as Error)?.message)))
        throw new LeaseConflictError(`lease ${key} is held: ${(e as Error).message}`);
      throw e;
    }
  }

  async update(key: string, value: string, rev: number): Promise<number> {
    try {
      return await this.kv.update(key, value, rev);
    } catch (e) {
      if (isWrongLastSequence(e)) throw new LeaseConflictError(`lease ${key} changed since revision ${rev}: ${(e as Error).message}`);
      throw e;
    }
  }

  async get(key: string): Promise<Lease | undefined> {
    const e = await this.kv.get(key);
    if (!e || e.operation !== 'PUT') return undefined;
    return { value: e.string(), rev: e.revision };
  }

  /** Whether the bucket takes a write, as a renewal does (needs its stream's quorum): `key` is written, and expires with the ttl (readiness.ts). */
  async probe(key: string): Promise<void> {
    await this.kv.put(key, '');
  }

  async release(key: string, rev: number): Promise<void> {
    await this.kv.delete(key, { previousSeq: rev }).catch(() => {});
  }
}

function headersOf(h: MsgHdrs | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (h) for (const [k] of h) out[k] = h.get(k);
  return out;
}

function apiCode(e: unknown): number | undefined {
  const x = e as { code?: unknown; apiError?: () => { err_code?: number } };
  try {
    return x?.apiError?.().err_code ?? (typeof x?.code === 'number' ? x.code : undefined);
  } catch {
    return undefined;
  }
}

function isWrongLastSequence(e: unknown): boolean {
  return apiCode(e) === 10071 || /wrong last sequence/i.test(String((e as Error)?.message));
}

function isNotFound(e: unknown): boolean {
  return apiCode(e) === 10059 || /stream not found/i.test(String((e as Error)?.message));
}

function isUnavailable(e: unknown): boolean {
  return apiCode(e) === 10008 || /temporarily unavailable/i.test(String((e as Error)?.message));
}

function isNoMessage(e: unknown): boolean {
  return apiCode(e) === 10037 || /no message found/i.test(String((e as Error)?.message));
}
