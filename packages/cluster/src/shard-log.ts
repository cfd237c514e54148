/**
 * What the cluster store needs from a replicated log, and nothing more: per shard, an ordered
 * stream of messages on subjects, appends fenced by the stream-wide last sequence, reads from
 * the leader, purges; and a table of leases that expire. `JetStreamShardLog` implements it on
 * NATS JetStream; a simulated one can implement the same semantics on a simulated clock.
 *
 * Why the stream-wide fence and not a per-subject one: on nats-server 2.9.10 a clustered stream
 * checks `Nats-Expected-Last-Subject-Sequence` only on the leader before proposing, so two
 * writers of one subject can both be accepted; `Nats-Expected-Last-Sequence` is checked by every
 * replica when the entry is applied, in log order (see docs/deployment.md and the design note).
 */

export interface LogMessage {
  /** The stream sequence: the message's place in its shard's total order. */
  seq: number;
  subject: string;
  data: Uint8Array;
  /** The headers it was published with (names as given). */
  headers: Record<string, string>;
  /** When the stream stored it, in ms since the epoch by the server's clock (undefined: a log that does not say). */
  time?: number;
  /** Read by `readHeaders`: `data` is empty and this is the size of its body, in bytes. */
  size?: number;
}

export interface Ack {
  seq: number;
  /** The stream already held a message with this id (a retry of one that landed): `seq` is that message's. */
  duplicate: boolean;
}

/** An append was refused because the stream's last sequence was not the one expected. */
export class WrongLastSequenceError extends Error {
  constructor(
    readonly shard: number,
    readonly expected: number,
    message: string,
  ) {
    super(message);
    this.name = 'WrongLastSequenceError';
  }
}

/** A lease could not be taken (someone holds it) or renewed (someone else took it since). */
export class LeaseConflictError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LeaseConflictError';
  }
}

export interface ShardLog {
  /** Create the shard's stream if it does not exist. */
  ensure(shard: number): Promise<void>;
  /**
   * Append to the shard's stream. With `expectLastSeq`, the append is refused
   * (`WrongLastSequenceError`) unless the stream's last sequence is exactly that when it is
   * applied. `msgId` makes a retry of a message that landed answer `duplicate` with its seq.
   */
  publish(shard: number, subject: string, data: Uint8Array, opts: { msgId: string; expectLastSeq?: number; headers?: Record<string, string> }): Promise<Ack>;
  /**
   * Every message on `subject` (exact) with seq >= fromSeq: with `untilSeq` (the sequence of a
   * message on this subject), up to and including it, whichever replica serves the read; without,
   * up to the subject's last message as the leader knows it when called.
   */
  read(shard: number, subject: string, fromSeq?: number, untilSeq?: number): Promise<LogMessage[]>;
  /**
   * Like `read` without `untilSeq`, but the messages' headers only: `data` empty, `size` the
   * body's bytes. Optional: a reader that finds it missing reads whole messages.
   */
  readHeaders?(shard: number, subject: string, fromSeq?: number): Promise<LogMessage[]>;
  /** The messages at these sequences, in the order given (each must exist: else it throws). Optional, with `readHeaders`. */
  readAt?(shard: number, seqs: readonly number[]): Promise<LogMessage[]>;
  /** The last message on `subject` (exact), as the stream's leader knows it; undefined if it has none (or the stream does not exist). */
  last(shard: number, subject: string): Promise<LogMessage | undefined>;
  /** The stream's last sequence, as its leader knows it. */
  lastSeq(shard: number): Promise<number>;
  /** The subjects of the shard's stream that match `filter` (a wildcard such as `hc.3.ckpt.*`) and hold messages. */
  subjects(shard: number, filter: string): Promise<string[]>;
  /** Remove the messages on `subject` with seq < `beforeSeq`. The stream's last sequence does not move. */
  purge(shard: number, subject: string, beforeSeq: number): Promise<void>;
  /** The largest message the log takes, in bytes, headers included. */
  readonly maxPayload: number;
}

export interface Lease {
  value: string;
  /** The entry's revision: `update` must name it. Grows with every write of any key. */
  rev: number;
}

/** Keys that expire `ttlMs` after their last write. */
export interface LeaseTable {
  readonly ttlMs: number;
  /** Write a key that does not exist (or expired): its revision. `LeaseConflictError` if it exists. */
  create(key: string, value: string): Promise<number>;
  /** Rewrite a key at revision `rev`: the new revision. `LeaseConflictError` if it changed or expired. */
  update(key: string, value: string, rev: number): Promise<number>;
  get(key: string): Promise<Lease | undefined>;
  /** Delete a key if it is still at `rev` (giving a lease back). */
  release(key: string, rev: number): Promise<void>;
}
