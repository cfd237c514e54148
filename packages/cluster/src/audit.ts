/**
 * Audit a room's history in its shard stream, read-only: the claims, every checkpoint and log
 * record, the replay rule applied as a load applies it, and the chain walked from the oldest
 * checkpoint kept. `hercules audit --nats ... --room NAME` prints it.
 *
 * A problem is anything a correct cluster never writes: a log without a checkpoint, a chain
 * that does not reach a confirmed checkpoint, confirmed checkpoints going back, or one op, by
 * (client, seq), in the room twice. Messages a stale owner wrote, records off the chain, and
 * unconfirmed checkpoints the chain does not reach (an owner's pipeline broke before it) are
 * counted, not problems: the replay rule is there to ignore them.
 */
import type { LogEntry } from '@hercules/core';
import { type CkptBody, confirmedCheckpoints, type LogBody, RECORD_HEADERS as H, readRoomLog, shardOf, subjectOf, validRecords } from './cluster-store.ts';
import type { ShardLog } from './shard-log.ts';

export interface RoomAudit {
  room: string;
  shard: number;
  /** Claims in the shard's stream, the highest epoch among them, and the sequence of the last one (what the owner's messages name now). */
  claims: number;
  maxEpoch: number;
  lastClaim: number;
  /** Checkpoints that pass the replay rule, oldest first: the rev each was written at, its position, and whether a load may start from it. */
  checkpoints: { seq: number; rev: number; pos: number; confirmed: boolean }[];
  /** Log records that pass the replay rule's epoch test; how many of them continue the chain. */
  records: number;
  counted: number;
  /**
   * Messages of the room left out: sent under a claim that another one followed (a stale owner,
   * or from before a re-claim), records valid but off the chain, unconfirmed checkpoints the
   * chain does not reach.
   */
  ignored: { stale: number; offChain: number; unconfirmedCheckpoints: number };
  /** The sequence of the room's last deletion that counts (0: none): the audit covers what follows it. */
  deletedAt: number;
  /** The room as a load finds it: its rev and head. */
  rev: number;
  head: number;
  /** Ops in the room from the oldest checkpoint kept (its suffix and the chain after it). */
  ops: number;
  problems: string[];
}

export async function auditRoom(log: ShardLog, room: string, opts: { subjectPrefix?: string; shards?: number } = {}): Promise<RoomAudit> {
  const prefix = opts.subjectPrefix ?? 'hc';
  const shard = shardOf(room, opts.shards ?? 64);
  const subject = (kind: 'claim' | 'log' | 'ckpt') => subjectOf(prefix, shard, kind, kind === 'claim' ? undefined : room);
  const claimMsgs = await log.read(shard, subject('claim'));
  const claims = claimMsgs.map((m) => ({ seq: m.seq, epoch: Number(m.headers[H.epoch]) }));
  const ckptSubjectMsgs = await log.read(shard, subject('ckpt'));
  const confirmed = confirmedCheckpoints(claims, ckptSubjectMsgs);
  const ckptMsgs = ckptSubjectMsgs.filter((m) => !m.headers[H.mark]);
  const logMsgs = (await readRoomLog(log, prefix, shard, room)).filter((m) => !m.headers[H.mark]);
  // A deletion that counts (a tombstone on the checkpoint subject) ends the room's history: what follows it is a room created again.
  const allCkpts = validRecords(claims, ckptMsgs);
  const allRecs = validRecords(claims, logMsgs);
  const deletedAt = allCkpts.findLast((c) => c.deleted)?.seq ?? 0;
  const ckpts = allCkpts.filter((c) => c.seq > deletedAt);
  const recs = allRecs.filter((r) => r.seq > deletedAt);
  // A load starts from the first checkpoint, a confirmed one, or one of a store from before confirmations.
  const trusted = (c: (typeof ckpts)[number]) => c.rev === 0 || c.claim === undefined || confirmed.has(c.seq);
  const problems: string[] = [];
  const out: RoomAudit = {
    room,
    shard,
    claims: claims.length,
    maxEpoch: claims.reduce((e, c) => Math.max(e, c.epoch), 0),
    lastClaim: claims[claims.length - 1]?.seq ?? 0,
    checkpoints: ckpts.map((c) => ({ seq: c.seq, rev: c.rev, pos: (c.body as CkptBody).pos, confirmed: trusted(c) })),
    deletedAt,
    records: recs.length,
    counted: 0,
    ignored: { stale: 0, offChain: 0, unconfirmedCheckpoints: 0 },
    rev: 0,
    head: 0,
    ops: 0,
    problems,
  };
  // Messages the replay rule left out: those of no counted record's (claim, epoch, rev).
  const kept = new Set<string>();
  for (const r of [...allRecs, ...allCkpts]) kept.add(`${r.claim}/${r.epoch}/${r.rev}`);
  for (const m of [...logMsgs, ...ckptMsgs]) if (!kept.has(`${m.headers[H.claim]}/${m.headers[H.epoch]}/${m.headers[H.rev]}`)) out.ignored.stale++;

  if (ckpts.length === 0) {
    if (recs.length > 0) problems.push(`${recs.length} log records but no valid checkpoint (the room cannot load)`);
    return out;
  }
  const bases = ckpts.filter(trusted);
  if (bases.length === 0) {
    problems.push(`${ckpts.length} checkpoints but none a load can start from (none confirmed, no first one)`);
    return out;
  }
  for (let i = 1; i < bases.length; i++) {
    const a = bases[i - 1].body as CkptBody,
      b = bases[i].body as CkptBody;
    if (b.pos < a.pos) problems.push(`checkpoint at seq ${bases[i].seq} (pos ${b.pos}) goes back from the one at seq ${bases[i - 1].seq} (pos ${a.pos})`);
  }
  // The chain from the oldest checkpoint kept, as a load from it would walk it.
  const first = bases[0];
  const ck = first.body as CkptBody;
  let rev = first.rev;
  let head = ck.pos + ck.suffix.length;
  const ops: LogEntry[] = [...ck.suffix];
  const revHead = new Map<number, number>([[rev, head]]);
  for (const r of recs) {
    if (r.seq < first.seq) continue;
    const b = r.body as LogBody;
    if (r.rev !== rev + 1 || (b.entries.length > 0 && b.entries[0].pos !== head + 1)) {
      out.ignored.offChain++;
      continue;
    }
    out.counted++;
    rev++;
    head += b.entries.length;
    ops.push(...b.entries);
    revHead.set(rev, head);
  }
  out.rev = rev;
  out.head = head;
  out.ops = ops.length;
  for (const c of ckpts) {
    if (c.seq <= first.seq) continue;
    const body = c.body as CkptBody;
    const at = revHead.get(c.rev);
    const onChain = at !== undefined && body.pos + body.suffix.length === at;
    if (onChain) continue;
    // A checkpoint whose ack never came back in an unbroken run (its pipeline broke): no load starts from it.
    if (!trusted(c)) {
      out.ignored.unconfirmedCheckpoints++;
      continue;
    }
    if (at === undefined) problems.push(`confirmed checkpoint at seq ${c.seq} is at rev ${c.rev}, which the chain (rev ${first.rev} to ${rev}) does not reach`);
    else problems.push(`confirmed checkpoint at seq ${c.seq} says head ${body.pos + body.suffix.length} at rev ${c.rev}; the chain has ${at}`);
  }
  const seen = new Map<string, number>();
  for (const e of ops) {
    const key = `${e.client}#${e.seq}`;
    const was = seen.get(key);
    if (was !== undefined) problems.push(`op ${key} is in the room twice: at ${was} and at ${e.pos}`);
    else seen.set(key, e.pos);
  }
  return out;
}
