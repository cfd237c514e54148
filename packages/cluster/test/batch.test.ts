/**
 * Batched appends (ClusterStore `batchAppends`): a shard's log records of one event-loop turn go
 * out as one message on the shard's batch subject, fenced as one; a reader takes each room's
 * records out of the batches as if they were on the room's subject. Over the in-memory log
 * (`sim-log.ts`, no random faults).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LogEntry } from '@hercules/core';
import { auditRoom } from '../src/audit.ts';
import { ClusterStore, RECORD_HEADERS as H, readRoomLog } from '../src/cluster-store.ts';
import type { ShardLog } from '../src/shard-log.ts';
import { Rng } from '@hercules/test-utils';
import { SimLeaseTable, SimShardLog } from '../src/sim-log.ts';

const INIT = { machine: 'm', version: 1, initial: { n: 0 } };
const entry = (pos: number, client = 'c1'): LogEntry => ({ pos, client, seq: pos, name: 'add', args: {}, author: client }) as LogEntry;

function world() {
  const rng = new Rng(1).source();
  const log = new SimShardLog(rng, () => performance.now(), { maxAckMs: 2 }, { subjectPrefix: 'hc' });
  const leases = new SimLeaseTable(2000, rng, () => performance.now());
  return { log, leases };
}

const store = (log: ShardLog, leases: SimLeaseTable, nodeId: string, batchAppends = true) =>
  new ClusterStore({ log, leases, nodeId, shards: 1, subjectPrefix: 'hc', checkpointEvery: 1, batchAppends });

const settle = () => new Promise((r) => setTimeout(r, 30));
const ROOMS = Array.from({ length: 8 }, (_, i) => `room-${i}`);

/** The room's head and rev as a fresh node loads it. */
async function loadedBy(s: ClusterStore, room: string) {
  const l = await s.open(room);
  assert.ok(l, `${room} loads`);
  return { rev: l.rev, head: l.durable.checkpoint.pos + l.durable.suffix.length };
}

test("a shard's appends of one turn are one message, and another node loads each room whole (records of one room twice in a batch, a checkpoint between them)", async () => {
  const { log, leases } = world();
  const a = store(log, leases, 'a');
  for (const room of ROOMS) await a.open(room, INIT);
  // One turn: every room appends twice; the first append carries a checkpoint (checkpointEvery 1),
  // which must land before the room's second record or a load from it would miss that record.
  const done = ROOMS.flatMap((room) => [
    a.append(room, { after: 0, entries: [entry(1)], checkpoint: { pos: 1, state: { n: 1 } } }),
    a.append(room, { after: 1, entries: [entry(2)] }),
  ]);
  await Promise.all(done);
  // Each checkpoint closes a batch: room 0's first record alone, then a room's second record with
  // the next room's first (7 of them), then room 7's second record. No record on a room's subject.
  const batches = (await log.read(0, 'hc.0.batch')).filter((m) => !m.headers[H.mark]);
  assert.deepEqual(
    batches.map((m) => m.headers[H.batch]),
    ['1', ...ROOMS.slice(1).map(() => '2'), '1'],
  );
  for (const room of ROOMS) assert.equal((await readRoomLog(log, 'hc', 0, room)).filter((m) => !m.headers[H.mark]).length, 2);
  await settle(); // the checkpoints' confirmations
  await a.close();
  const b = store(log, leases, 'b');
  for (const room of ROOMS) assert.deepEqual(await loadedBy(b, room), { rev: 2, head: 2 }, room);
  for (const room of ROOMS) assert.deepEqual((await auditRoom(log, room, { shards: 1 })).problems, [], room);
  await b.close();
});

test('appends without checkpoints: one message for the whole turn, however many rooms', async () => {
  const { log, leases } = world();
  const a = store(log, leases, 'a');
  for (const room of ROOMS) await a.open(room, INIT);
  const before = log.stats.publishes;
  await Promise.all(ROOMS.map((room) => a.append(room, { after: 0, entries: [entry(1), entry(2)] })));
  assert.equal(log.stats.publishes - before, 1);
  await a.close();
  const b = store(log, leases, 'b');
  for (const room of ROOMS) assert.deepEqual(await loadedBy(b, room), { rev: 1, head: 2 }, room);
  await b.close();
});

test('a stream written one message an append (an older version), then in batches, then one message an append again: a load reads it all in order', async () => {
  const { log, leases } = world();
  let pos = 0;
  for (const [i, batched] of [false, true, false, true].entries()) {
    const s = store(log, leases, `n${i}`, batched);
    await s.open('r', INIT);
    for (let k = 0; k < 3; k++) await s.append('r', { after: i * 3 + k, entries: [entry(++pos)] });
    await s.close();
  }
  const reader = store(log, leases, 'reader');
  assert.deepEqual(await loadedBy(reader, 'r'), { rev: 12, head: 12 });
  await reader.close();
  const audit = await auditRoom(log, 'r', { shards: 1 });
  assert.deepEqual(audit.problems, []);
  assert.equal(audit.ops, 12);
});

test("a batch refused by the stream's fence is refused whole: none of its rooms' appends is confirmed or read", async () => {
  const { log, leases } = world();
  let intrude = false;
  // A stale owner's message takes the batch's place in the stream: the batch's expectation fails.
  const planted = new Proxy(log, {
    get: (target, prop, receiver) =>
      prop === 'publish'
        ? async (...args: Parameters<ShardLog['publish']>) => {
            if (intrude && args[1] === 'hc.0.batch' && !args[3].headers?.[H.mark]) {
              intrude = false;
              await log.publish(0, 'hc.0.batch', new Uint8Array(0), { msgId: 'stale', headers: { [H.claim]: '0', [H.epoch]: '0', [H.mark]: '1' } });
            }
            return log.publish(...args);
          }
        : Reflect.get(target, prop, receiver),
  }) as ShardLog;
  const a = store(planted, leases, 'a');
  for (const room of ROOMS) await a.open(room, INIT);
  intrude = true;
  const results = await Promise.allSettled(ROOMS.map((room) => a.append(room, { after: 0, entries: [entry(1)] })));
  assert.deepEqual(
    results.map((r) => r.status),
    ROOMS.map(() => 'rejected'),
  );
  await settle();
  await a.close();
  const b = store(log, leases, 'b');
  for (const room of ROOMS) assert.deepEqual(await loadedBy(b, room), { rev: 0, head: 0 }, room);
  await b.close();
});

test('a record too large for a batch goes in parts on its room subject, in its turn: after the records queued before it, before those after', async () => {
  const rng = new Rng(1).source();
  const log = new SimShardLog(rng, () => performance.now(), { maxAckMs: 2 }, { subjectPrefix: 'hc', maxPayload: 2048 });
  const leases = new SimLeaseTable(2000, rng, () => performance.now());
  const a = store(log, leases, 'a');
  await a.open('r', INIT);
  const big = { ...entry(2), args: { text: 'x'.repeat(3000) } } as LogEntry;
  // One turn: a small record, a large one (parts on hc.0.log.<r>), a small one.
  await Promise.all([
    a.append('r', { after: 0, entries: [entry(1)] }),
    a.append('r', { after: 1, entries: [big] }),
    a.append('r', { after: 2, entries: [entry(3)] }),
  ]);
  await a.close();
  const b = store(log, leases, 'b');
  assert.deepEqual(await loadedBy(b, 'r'), { rev: 3, head: 3 });
  await b.close();
});
