/**
 * Audit a room's history in its shard stream, read-only: the claims, every checkpoint and log
 * record, the replay rule applied as a load applies it, and the chain walked from the oldest
 * checkpoint kept. `hercules audit --nats ... --room NAME` prints it.
 *
 * A problem is anything a correct cluster never writes: a log without a checkpoint, a chain
 * that does not reach a checkpoint it has, checkpoints going back, or one op, by (client, seq),
 * in the room twice. Messages a stale owner wrote, and records off the chain, are counted, not
 * problems: the replay rule is there to ignore them.
 */
import type { LogEntry } from '@hercules/core';
import { type CkptBody, H_EPOCH, type LogBody, shardOf, subjectOf, validRecords } from './cluster-store.ts';
import type { ShardLog } from './shard-log.ts';

export interface RoomAudit {
  room: string;
  shard: number;
  /** Claims in the shard's stream, and the highest epoch among them. */
  claims: number;
  maxEpoch: number;
  /** Checkpoints that pass the replay rule, oldest first: the rev each was written at and its position. */
  checkpoints: { seq: number; rev: number; pos: number }[];
  /** Log records that pass the replay rule's epoch test; how many of them continue the chain. */
  records: number;
  counted: number;
  /** Messages of the room left out: under an epoch below an earlier claim (a stale owner), or valid but off the chain. */
  ignored: { staleEpoch: number; offChain: number };
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
  const claims = claimMsgs.map((m) => ({ seq: m.seq, epoch: Number(m.headers[H_EPOCH]) }));
  const ckptMsgs = (await log.read(shard, subject('ckpt'))).filter((m) => !m.headers['Hc-Mark']);
  const logMsgs = (await log.read(shard, subject('log'))).filter((m) => !m.headers['Hc-Mark']);
  const ckpts = validRecords(claims, ckptMsgs);
  const recs = validRecords(claims, logMsgs);
  const problems: string[] = [];
  const out: RoomAudit = {
    room,
    shard,
    claims: claims.length,
    maxEpoch: claims.reduce((e, c) => Math.max(e, c.epoch), 0),
    checkpoints: ckpts.map((c) => ({ seq: c.seq, rev: c.rev, pos: (c.body as CkptBody).pos })),
    records: recs.length,
    counted: 0,
    ignored: { staleEpoch: 0, offChain: 0 },
    rev: 0,
    head: 0,
    ops: 0,
    problems,
  };
  // Messages left out by the epoch test: those of no valid record's (epoch, rev).
  const kept = new Set<string>();
  for (const r of [...recs, ...ckpts]) kept.add(`${r.epoch}/${r.rev}`);
  for (const m of [...logMsgs, ...ckptMsgs]) if (!kept.has(`${m.headers[H_EPOCH]}/${m.headers['Hc-Rev']}`)) out.ignored.staleEpoch++;

  if (ckpts.length === 0) {
    if (recs.length > 0) problems.push(`${recs.length} log records but no valid checkpoint (the room cannot load)`);
    return out;
  }
  for (let i = 1; i < ckpts.length; i++) {
    const a = ckpts[i - 1].body as CkptBody,
      b = ckpts[i].body as CkptBody;
    if (b.pos < a.pos) problems.push(`checkpoint at seq ${ckpts[i].seq} (pos ${b.pos}) goes back from the one at seq ${ckpts[i - 1].seq} (pos ${a.pos})`);
  }
  // The chain from the oldest checkpoint kept, as a load from it would walk it.
  const first = ckpts[0];
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
  for (const c of ckpts.slice(1)) {
    const body = c.body as CkptBody;
    const at = revHead.get(c.rev);
    if (at === undefined) problems.push(`checkpoint at seq ${c.seq} is at rev ${c.rev}, which the chain (rev ${first.rev} to ${rev}) does not reach`);
    else if (body.pos + body.suffix.length !== at)
      problems.push(`checkpoint at seq ${c.seq} says head ${body.pos + body.suffix.length} at rev ${c.rev}; the chain has ${at}`);
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
