/**
 * The replay rule and the claims, each case forced exactly: a ClusterStore over the in-memory
 * log (`sim-log.ts`, no random faults), with the interleaving a test needs planted in between.
 * What the cluster simulator found: a checkpoint that landed while the append before it did not
 * (another message took that append's place in the stream), loaded as the room's state; and a
 * node's first claim made under epoch 1, which fenced nothing under the epoch rule.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LogEntry } from '@hercules/core';
import { batchRecords, ClusterStore, confirmedCheckpoints, counts, RECORD_HEADERS as H, readRoomLog, roomToken, validRecords } from '../src/cluster-store.ts';
import type { LogMessage, ShardLog } from '../src/shard-log.ts';
import { Rng } from '@hercules/test-utils';
import { SimLeaseTable, SimShardLog } from '../src/sim-log.ts';

const INIT = { machine: 'm', version: 1, initial: { n: 0 } };
const entry = (pos: number): LogEntry => ({ pos, client: 'c1', seq: pos, name: 'add', args: {}, author: 'c1' }) as LogEntry;
const LOG = `hc.0.log.${roomToken('r')}`;
const CKPT = `hc.0.ckpt.${roomToken('r')}`;

function world() {
  const rng = new Rng(1).source();
  const log = new SimShardLog(rng, () => performance.now(), {}, { subjectPrefix: 'hc' });
  const leases = new SimLeaseTable(2000, rng, () => performance.now());
  return { log, leases };
}

/** A log that hands every publish to `before` first (which may publish something itself). */
function intercepted(log: ShardLog, before: (subject: string, headers: Record<string, string>, data: Uint8Array) => Promise<void>): ShardLog {
  return new Proxy(log, {
    get: (target, prop, receiver) =>
      prop === 'publish'
        ? async (...args: Parameters<ShardLog['publish']>) => {
            await before(args[1], args[3].headers ?? {}, args[2]);
            return log.publish(...args);
          }
        : Reflect.get(target, prop, receiver),
  });
}

const store = (log: ShardLog, leases: SimLeaseTable, nodeId: string, batchAppends = true) =>
  new ClusterStore({ log, leases, nodeId, shards: 1, subjectPrefix: 'hc', checkpointEvery: 1, batchAppends });

/** Whether a message is the room's log record of `rev`: on its subject, or in a batch. */
const isRecord = (subject: string, headers: Record<string, string>, data: Uint8Array, rev: number) =>
  subject === LOG
    ? headers[H.rev] === String(rev)
    : subject === 'hc.0.batch' && !headers[H.mark] && batchRecords({ seq: 0, subject, data, headers }).some((r) => r.room === 'r' && r.rev === rev);

const tags = (loaded: Awaited<ReturnType<ClusterStore['open']>>) => {
  const d = loaded!.durable;
  return { head: d.checkpoint.pos + d.suffix.length, pos: d.checkpoint.pos, state: d.checkpoint.state };
};

// spec: CLUSTER-CHAIN
for (const batched of [true, false])
  test(`a checkpoint that landed while the append before it did not is not where a load starts (${batched ? 'batched appends' : 'one message an append'})`, async () => {
    const { log, leases } = world();
    let intrude = false;
    // Right before the log record of rev 2 goes out, another writer's message (a stale owner's:
    // under no current claim) takes its place in the stream: the record is refused, and the
    // checkpoint sent behind it finds the stream at the sequence it expected and lands.
    const planted = intercepted(log, async (subject, headers, data) => {
      if (intrude && isRecord(subject, headers, data, 2)) {
        intrude = false;
        await log.publish(0, LOG, new Uint8Array(0), { msgId: 'stale', headers: { [H.claim]: '0', [H.epoch]: '0', [H.mark]: '1' } });
      }
    });
    const a = store(planted, leases, 'a', batched);
    await a.open('r', INIT);
    await a.append('r', { after: 0, entries: [entry(1)], checkpoint: { pos: 1, state: { n: 1 } } });
    intrude = true;
    await assert.rejects(a.append('r', { after: 1, entries: [entry(2)], checkpoint: { pos: 2, state: { n: 2 } } }), /not confirmed|wrong last sequence/);
    // The checkpoint at rev 2 is in the stream and counts by the claim rule, but nobody confirmed it.
    const ckpts = await log.read(0, CKPT);
    const claims = (await log.read(0, 'hc.0.claim')).map((m) => ({ seq: m.seq, epoch: Number(m.headers[H.epoch]) }));
    const rev2 = validRecords(claims, ckpts).find((r) => r.rev === 2);
    assert.ok(rev2, 'the checkpoint of rev 2 landed and counts');
    assert.ok(!confirmedCheckpoints(claims, ckpts).has(rev2.seq), 'and is not confirmed');
    assert.ok(
      (await readRoomLog(log, 'hc', 0, 'r')).every((m) => m.headers[H.rev] !== '2'),
      'the log record of rev 2 never landed',
    );
    await a.close();
    // A load starts from the confirmed checkpoint of rev 1: the room is at 1, not at the unlanded 2.
    const b = store(log, leases, 'b');
    const loaded = await b.open('r');
    assert.equal(loaded!.rev, 1);
    assert.deepEqual(tags(loaded), { head: 1, pos: 1, state: { n: 1 } });
    await b.close();
  });

// spec: CLUSTER-CHAIN
test('the replay rule: a message counts only under the last claim before it, whatever the epochs; older messages by their epoch', () => {
  const msg = (seq: number, headers: Record<string, string>): LogMessage => ({ seq, subject: LOG, data: new Uint8Array(0), headers });
  const claims = [
    { seq: 5, epoch: 3 },
    { seq: 9, epoch: 1 }, // under too low an epoch (its node read the claims short): it fences all the same
  ];
  assert.equal(counts(claims, msg(7, { [H.claim]: '5', [H.epoch]: '3' })), true, 'under the last claim before it');
  assert.equal(counts(claims, msg(10, { [H.claim]: '5', [H.epoch]: '3' })), false, 'a claim followed it');
  assert.equal(counts(claims, msg(10, { [H.claim]: '9', [H.epoch]: '1' })), true);
  assert.equal(counts(claims, msg(4, { [H.claim]: '5', [H.epoch]: '3' })), false, 'before its own claim: forged or misread');
  // A store from before claim headers: the epoch test.
  assert.equal(counts(claims, msg(10, { [H.epoch]: '3' })), true);
  assert.equal(counts(claims, msg(10, { [H.epoch]: '2' })), false);
});

test("a node's first claim on a stream is one above every claim there, and nothing of it goes out before its claim", async () => {
  const { log, leases } = world();
  const a = store(log, leases, 'a');
  await a.open('r', INIT);
  await a.append('r', { after: 0, entries: [entry(1)] });
  await a.close(); // gives its lease back
  const sent: string[] = [];
  const watched = intercepted(log, async (subject) => {
    sent.push(subject.split('.')[2]);
  });
  const b = store(watched, leases, 'b');
  // Two loads at once while the shard is being taken: both wait for the claim.
  const [x, y] = await Promise.all([b.open('r'), b.open('r')]);
  assert.equal(x!.rev, 1);
  assert.equal(y!.rev, 1);
  assert.equal(sent[0], 'claim', `the first message of b is its claim: ${sent.join(', ')}`);
  assert.equal(sent.filter((k) => k === 'claim').length, 1, `one claim: ${sent.join(', ')}`);
  const claims = await log.read(0, 'hc.0.claim');
  assert.deepEqual(
    claims.map((m) => Number(m.headers[H.epoch])),
    [1, 2],
    'a claimed under 1, b under 2: no claim under an epoch already taken',
  );
  assert.deepEqual(b.claimOf(0), { seq: claims[1].seq, epoch: 2 });
  await b.close();
});

test('a shard whose stream lost its first messages is refused: no room is created over its history', async () => {
  const { log, leases } = world();
  const a = store(log, leases, 'a');
  await a.open('r', INIT);
  for (let i = 1; i <= 3; i++) await a.append('r', { after: i - 1, entries: [entry(i)] });
  await a.close();
  const last = await log.lastSeq(0);
  // A NATS server's data lost: everything before the last message, the claims and the room's first checkpoint with it.
  log.loseHead(0, last);
  const b = store(log, leases, 'b');
  await assert.rejects(b.open('r', INIT), /shard 0: its stream has lost messages \(its first claim is at seq \d+, not 1\)/);
  await assert.rejects(b.open('r'), /lost messages/);
  const ckpts = (await log.read(0, CKPT)).filter((m) => !m.headers[H.mark]);
  assert.deepEqual(ckpts, [], 'no first checkpoint written over it');
  await b.close();
});

test('a room written before claim headers and confirmations (epochs only) still loads, from its newest checkpoint', async () => {
  const { log, leases } = world();
  const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
  const meta = { machine: 'm', version: 1, created: 0 };
  await log.publish(0, 'hc.0.claim', enc({ node: 'old' }), { msgId: 'c', headers: { [H.epoch]: '1' } });
  const rec = (rev: number) => ({ [H.epoch]: '1', [H.rev]: String(rev), [H.part]: '0', [H.parts]: '1' });
  await log.publish(0, CKPT, enc({ pos: 0, state: { n: 0 }, suffix: [], clients: {}, stable: 0, meta }), { msgId: 'k0', headers: rec(0) });
  await log.publish(0, LOG, enc({ entries: [entry(1)], clients: {}, stable: 0 }), { msgId: 'l1', headers: rec(1) });
  await log.publish(0, LOG, enc({ entries: [entry(2)], clients: {}, stable: 1 }), { msgId: 'l2', headers: rec(2) });
  await log.publish(0, CKPT, enc({ pos: 1, state: { n: 1 }, suffix: [entry(2)], clients: {}, stable: 1, meta }), { msgId: 'k2', headers: rec(2) });
  await log.publish(0, LOG, enc({ entries: [entry(3)], clients: {}, stable: 1 }), { msgId: 'l3', headers: rec(3) });
  const b = store(log, leases, 'b');
  const loaded = await b.open('r');
  assert.equal(loaded!.rev, 3);
  assert.deepEqual(tags(loaded), { head: 3, pos: 1, state: { n: 1 } });
  await b.close();
});
