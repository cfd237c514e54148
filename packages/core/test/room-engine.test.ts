import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  GENESIS_DIGEST,
  MAX_PRESENCE_BYTES,
  MAX_PRESENCE_KEYS,
  MIN_PROTOCOL_VERSION,
  PROTOCOL_VERSION,
  RoomEngine,
  ViewEngine,
  domainBytes,
  parseClientMessage,
  scanOp,
  type HerculesError,
  type RoomOutput,
  type ServerMessage,
} from '../src/index.ts';
import { watchRuns } from '@hercules/test-utils';
import { room } from './fixtures.ts';

const hello = (client: string, have = 0) => ({ t: 'hello', v: PROTOCOL_VERSION, client, machine: { name: 'test-room', version: 1 }, have });
const to = (o: RoomOutput, conn: string) => o.send.filter((s) => s.conn === conn).map((s) => s.msg);
const ofType = <T extends ServerMessage['t']>(msgs: ServerMessage[], t: T) => msgs.filter((m) => m.t === t) as Extract<ServerMessage, { t: T }>[];
const note = (seq: number, text = `n${seq}`) => ({ seq, name: 'note', args: { text } });

function join(r: RoomEngine<any>, conn: string, client: string, now = 0): RoomOutput {
  r.open(conn, now);
  const o = r.message(conn, hello(client), now);
  return o;
}

// spec: VIS-DELIVERED
test('hello gets a welcome; a client alone in the room sees its ops visible at once', () => {
  const r = new RoomEngine(room);
  const w = ofType(to(join(r, 'k1', 'a'), 'k1'), 'welcome')[0];
  assert.equal(w.client, 'a');
  assert.equal(w.highWater, 0);
  assert.deepEqual(w.entries, []);
  const o = r.message('k1', { t: 'ops', ops: [note(1)] }, 1);
  assert.deepEqual(
    o.persist.appended.map((e) => [e.pos, e.client, e.seq, e.author]),
    [[1, 'a', 1, 'a']],
  );
  const msgs = to(o, 'k1');
  assert.deepEqual(ofType(msgs, 'log')[0], { t: 'log', from: 1, entries: [{ k: 'own', seq: 1 }] });
  assert.deepEqual(ofType(msgs, 'visible'), [{ t: 'visible', seq: 1 }]);
});

// spec: LOG-EXACTLY-ONCE, LOG-CLIENT-ORDER
test('exactly once: a resent seq is ignored; a gap is refused with a clear error', () => {
  const r = new RoomEngine(room);
  join(r, 'k1', 'a');
  r.message('k1', { t: 'ops', ops: [note(1), note(2)] }, 1);
  const dup = r.message('k1', { t: 'ops', ops: [note(1), note(2), note(3)] }, 2);
  assert.deepEqual(
    dup.persist.appended.map((e) => e.seq),
    [3],
  );
  assert.equal(r.head(), 3);
  assert.equal(r.stats.duplicates, 2);
  const gap = r.message('k1', { t: 'ops', ops: [note(5)] }, 3);
  const err = ofType(to(gap, 'k1'), 'error')[0];
  assert.equal(err.code, 'seq-gap');
  assert.match(err.message, /op seq 5 follows 3.*resend from 4/);
  assert.equal(r.head(), 3);
});

// spec: VIS-DELIVERED, STABLE-RECEIVED, STABLE-CHECKPOINT
test('Notify-Visible waits for every other member; acks are cumulative', () => {
  const r = new RoomEngine(room);
  join(r, 'ka', 'a');
  join(r, 'kb', 'b');
  join(r, 'kc', 'c');
  const o = r.message('ka', { t: 'ops', ops: [note(1), note(2)] }, 1);
  // b and c get the full ops; a gets compact Notify-Auth
  const lb = ofType(to(o, 'kb'), 'log')[0];
  assert.equal(lb.entries[0].k, 'op');
  assert.equal(ofType(to(o, 'ka'), 'visible').length, 0);
  assert.equal(ofType(to(r.message('kb', { t: 'ack', pos: 2 }, 2), 'ka'), 'visible').length, 0, 'c has not acked');
  const v = ofType(to(r.message('kc', { t: 'ack', pos: 1 }, 3), 'ka'), 'visible');
  assert.deepEqual(v, [{ t: 'visible', seq: 1 }], 'only up to what c acked');
  const v2 = r.message('kc', { t: 'ack', pos: 2 }, 4);
  assert.deepEqual(ofType(to(v2, 'ka'), 'visible'), [{ t: 'visible', seq: 2 }]);
  assert.equal(r.stableFrontier(), 0, 'a itself has not acked its own ops yet');
  const s = r.message('ka', { t: 'ack', pos: 2 }, 5);
  assert.equal(r.stableFrontier(), 2);
  assert.deepEqual(ofType(to(s, 'kb'), 'stable'), [{ t: 'stable', pos: 2 }]);
  assert.equal(r.suffixLength(), 0, 'checkpoint advanced to the stable frontier; suffix pruned');
});

// spec: VIS-DROP-DEAD, VIS-JOIN-GATE
test('a member whose ack is outstanding past the timeout is deregistered; its op blockers clear', () => {
  const r = new RoomEngine(room, { ackTimeoutMs: 2000 });
  join(r, 'ka', 'a');
  join(r, 'kb', 'b');
  r.message('ka', { t: 'ops', ops: [note(1)] }, 0);
  r.message('ka', { t: 'ack', pos: 1 }, 5); // a has its own op; b never acks
  assert.equal(ofType(to(r.tick(1999), 'ka'), 'visible').length, 0);
  const o = r.tick(2001);
  assert.deepEqual(ofType(to(o, 'kb'), 'deregister').length, 1);
  assert.deepEqual(ofType(to(o, 'ka'), 'members').at(-1)!.members, ['a']);
  // a acked its op, so the stable frontier that b's leaving moves says it is visible (VIS-BY-STABLE).
  assert.deepEqual(ofType(to(o, 'ka'), 'visible'), []);
  assert.deepEqual(ofType(to(o, 'ka'), 'stable'), [{ t: 'stable', pos: 1 }]);
  assert.deepEqual(r.members(), ['a']);
  // b registers again; it rejoins only once it holds what was promised visible.
  r.message('kb', { t: 'register' }, 2100);
  assert.deepEqual(r.members(), ['a']);
  const back = r.message('kb', { t: 'ack', pos: 1 }, 2200);
  assert.deepEqual(r.members(), ['a', 'b']);
  assert.deepEqual(ofType(to(back, 'ka'), 'members').at(-1)!.members, ['a', 'b']);
});

// spec: VIS-DROP-DEAD
test('an ack that may wait in the input the server has not handled is not late, for at most one more timeout', () => {
  const setUp = () => {
    const r = new RoomEngine(room, { ackTimeoutMs: 2000 });
    join(r, 'ka', 'a');
    join(r, 'kb', 'b');
    r.message('ka', { t: 'ops', ops: [note(1)] }, 0);
    r.message('ka', { t: 'ack', pos: 1 }, 5);
    return r;
  };
  const deregistered = (o: RoomOutput) => ofType(to(o, 'kb'), 'deregister').length;
  // b's input has waited unhandled since 1,500 ms: what it sent by then came in time.
  let r = setUp();
  const waitingSince = (conn: string) => (conn === 'kb' ? 1500 : 3000);
  assert.equal(deregistered(r.tick(3000, waitingSince)), 0, 'its ack may be in the waiting input');
  assert.equal(deregistered(r.tick(3900, waitingSince)), 0);
  assert.deepEqual(r.members(), ['a', 'b']);
  // At most one timeout more: past 2 x 2,000 ms it goes, however long its input waits.
  assert.equal(deregistered(r.tick(4001, waitingSince)), 1);
  assert.deepEqual(r.members(), ['a']);
  // Input that waits since after the deadline does not hold b.
  r = setUp();
  assert.equal(deregistered(r.tick(2500, () => 2001)), 1);
  // Nothing waiting (heard until now): the timeout as before.
  r = setUp();
  assert.equal(deregistered(r.tick(2001, (c) => (c === 'kb' ? 2001 : 0))), 1);
});

// spec: LOG-TENTATIVE
test("the engine lists another client's log for a protocol-4 member as tentative, never the author's own nor a protocol-3 member's", () => {
  const r = new RoomEngine(room);
  join(r, 'ka', 'a');
  r.open('kb', 0);
  r.message('kb', { ...hello('b'), v: 3 }, 0);
  join(r, 'kc', 'c');
  const o = r.message('ka', { t: 'ops', ops: [note(1)] }, 1);
  const listed = (o.tentative ?? []).map((i) => o.send[i]);
  assert.deepEqual(
    listed.map((x) => x.conn),
    ['kc'],
  );
  assert.ok(listed.every((x) => x.msg.t === 'log' && x.msg.entries.every((w) => w.k === 'op')));
  assert.ok(!o.sendFirst, 'the output still waits for its commit; the host decides what goes ahead');
  // Bookkeeping lists nothing.
  assert.equal(r.message('kc', { t: 'ack', pos: 1 }, 2).tentative, undefined);
});

// spec: LOG-RUN-AFTER-SEND, OP-VERDICT
test('with settleLater an input orders and fans out its ops without running them; settle runs them and puts each verdict in the output', () => {
  let runs = 0;
  const counting = watchRuns(room, () => runs++);
  const later = new RoomEngine(counting, { settleLater: true });
  join(later, 'ka', 'a');
  join(later, 'kb', 'b');
  const bad = { seq: 2, name: 'move', args: { id: 'nope', x: 0, y: 0 } };
  const o = later.message('ka', { t: 'ops', ops: [note(1), bad] }, 1);
  assert.equal(runs, 0, 'nothing ran yet');
  const toB = (o.tentative ?? []).map((i) => o.send[i]);
  assert.deepEqual(
    toB.map((x) => x.conn),
    ['kb'],
  );
  assert.deepEqual(
    o.persist.appended.map((e) => e.error),
    [undefined, undefined],
    'no verdict before the ops run',
  );
  later.settle(o);
  assert.ok(runs > 0, 'settle ran them');
  // The verdict lands in what the output holds: the stored entries, the log still queued for b
  // (the same entry objects), a's Notify-Auth and a's record, as if the ops had run in the input.
  assert.deepEqual(
    o.persist.appended.map((e) => e.error),
    [undefined, 'no item nope'],
  );
  const logB = toB[0].msg as Extract<ServerMessage, { t: 'log' }>;
  assert.equal(logB.entries[1].k === 'op' && logB.entries[1].e.error, 'no item nope');
  assert.deepEqual(ofType(to(o, 'ka'), 'log')[0].entries, [
    { k: 'own', seq: 1 },
    { k: 'own', seq: 2, error: 'no item nope' },
  ]);
  assert.deepEqual(o.persist.clients.a.rejected, [{ seq: 2, pos: 2, error: 'no item nope' }]);
  // The same input on an engine that runs ops at once gives the same output.
  const now = new RoomEngine(room);
  join(now, 'ka', 'a');
  join(now, 'kb', 'b');
  const o2 = now.message('ka', { t: 'ops', ops: [note(1), bad] }, 1);
  assert.deepEqual(structuredClone(o.send), structuredClone(o2.send));
  assert.deepEqual(o.persist, o2.persist);
  assert.deepEqual(later.headSnapshot(), now.headSnapshot());
  // Not settled by the host: the next input (or read) runs them first, and its output carries
  // the record.
  const o3 = later.message('ka', { t: 'ops', ops: [{ ...bad, seq: 3 }] }, 2);
  assert.equal(o3.persist.appended[0].error, undefined);
  const o4 = later.message('kb', { t: 'ack', pos: 3 }, 3);
  assert.equal(o3.persist.appended[0].error, 'no item nope');
  assert.equal(o4.persist.appended.length, 0);
  assert.deepEqual(
    o4.persist.clients.a.rejected?.map((x) => x.seq),
    [2, 3],
  );
  assert.equal(later.durableState().suffix.at(-1)?.error, 'no item nope');
});

// spec: LOG-RUN-AFTER-SEND, STABLE-CHECKPOINT
test('with settleLater, the ops of a room with no members (stable to its head at once) run before the checkpoint passes them', () => {
  const run = (settleLater: boolean) => {
    const r = new RoomEngine(room, { ackTimeoutMs: 2000, settleLater });
    join(r, 'ka', 'a');
    r.message('ka', { t: 'ops', ops: [note(1)] }, 0);
    r.tick(2001); // a never acked: deregistered, and the room has no members
    assert.deepEqual(r.members(), []);
    const o = r.message('ka', { t: 'ops', ops: [note(2)] }, 2100);
    r.settle(o);
    return { r, o };
  };
  const later = run(true);
  const now = run(false);
  assert.equal(later.r.stableFrontier(), 2);
  assert.deepEqual(later.o.persist.checkpoint, now.o.persist.checkpoint);
  assert.deepEqual(later.o.persist.checkpoint?.state, { items: {}, notes: ['a@1: n1', 'a@2: n2'] });
  assert.deepEqual(later.r.durableState(), now.r.durableState());
});

// spec: VIS-BY-STABLE
test('a stable frontier stands for the Notify-Visible it covers, for protocol-3 members only', () => {
  const r = new RoomEngine(room);
  join(r, 'ka', 'a');
  r.open('kb', 0);
  r.message('kb', { ...hello('b'), v: 2 }, 0); // an older client: protocol 2
  join(r, 'kc', 'c');
  r.message('ka', { t: 'ops', ops: [note(1)] }, 1);
  r.message('kb', { t: 'ops', ops: [note(1)] }, 1);
  r.message('kc', { t: 'ops', ops: [note(1)] }, 1);
  r.message('ka', { t: 'ack', pos: 3 }, 2);
  r.message('kb', { t: 'ack', pos: 3 }, 2);
  const o = r.message('kc', { t: 'ack', pos: 3 }, 3);
  // The last ack makes all three ops visible and moves the stable frontier past them.
  for (const k of ['ka', 'kb', 'kc']) assert.deepEqual(ofType(to(o, k), 'stable'), [{ t: 'stable', pos: 3 }], k);
  assert.deepEqual(ofType(to(o, 'ka'), 'visible'), [], 'protocol 3: the frontier says it');
  assert.deepEqual(ofType(to(o, 'kc'), 'visible'), [], 'protocol 3: the frontier says it');
  assert.deepEqual(
    to(o, 'kb'),
    [
      { t: 'visible', seq: 1 },
      { t: 'stable', pos: 3 },
    ],
    'protocol 2: Notify-Visible, then the frontier',
  );
  // Visible without the frontier moving (c has not acked a's next op): Notify-Visible, for anyone.
  r.message('ka', { t: 'ops', ops: [note(2)] }, 4);
  r.message('kb', { t: 'ack', pos: 4 }, 5);
  const v = r.message('kc', { t: 'ack', pos: 4 }, 6);
  assert.deepEqual(to(v, 'ka'), [{ t: 'visible', seq: 2 }]);
});

// spec: VIS-BY-STABLE
test('a joiner is told visibility in a Notify-Visible even when the frontier moves past its op', () => {
  const r = new RoomEngine(room);
  join(r, 'ka', 'a');
  r.message('ka', { t: 'ops', ops: [note(1), note(2)] }, 1);
  // b joins while a holds none of its own ops yet: b waits to catch up (joining, not a member).
  const w = ofType(to(join(r, 'kb', 'b', 2), 'kb'), 'welcome')[0];
  assert.equal(w.v, PROTOCOL_VERSION);
  r.message('kb', { t: 'ops', ops: [note(1)] }, 3);
  assert.deepEqual(r.members(), ['a']);
  // a's ack moves the frontier to 3 (a is the only member) past b's op at 3: b, still joining, hears it in a Notify-Visible.
  const o = r.message('ka', { t: 'ack', pos: 3 }, 4);
  assert.deepEqual(ofType(to(o, 'kb'), 'visible'), [{ t: 'visible', seq: 1 }]);
  assert.deepEqual(ofType(to(o, 'kb'), 'stable'), [{ t: 'stable', pos: 3 }]);
});

// spec: VIS-ACK-WITH-OPS
test('an ack carried by an ops message counts first, exactly as the message it stands for', () => {
  const r = new RoomEngine(room);
  join(r, 'ka', 'a');
  join(r, 'kb', 'b');
  r.message('ka', { t: 'ops', ops: [note(1)] }, 1);
  r.message('ka', { t: 'ack', pos: 1 }, 2);
  // b acks a's op in the frame that carries its own: a's op becomes visible and stable, then b's op is ordered.
  const o = r.message('kb', { t: 'ops', ops: [note(1)], ack: { pos: 1, durable: 1 } }, 3);
  assert.equal(r.stableFrontier(), 1);
  assert.deepEqual(ofType(to(o, 'ka'), 'stable'), [{ t: 'stable', pos: 1 }]);
  assert.deepEqual(
    o.persist.appended.map((e) => [e.pos, e.client]),
    [[2, 'b']],
  );
  // An ack past the log's end is refused with its own error; the ops still count.
  const bad = r.message('kb', { t: 'ops', ops: [note(2)], ack: { pos: 99 } }, 4);
  assert.match(ofType(to(bad, 'kb'), 'error')[0].message, /ack for position 99 but the log ends at 2/);
  assert.deepEqual(
    bad.persist.appended.map((e) => [e.pos, e.client, e.seq]),
    [[3, 'b', 2]],
  );
  // A malformed ack makes the whole frame malformed: nothing of it counts.
  const worse = r.message('kb', { t: 'ops', ops: [note(3)], ack: 7 }, 5);
  assert.match(ofType(to(worse, 'kb'), 'error')[0].message, /ops\.ack must be an object/);
  assert.equal(r.head(), 3);
});

// spec: SEC-PROTOCOL-RANGE
test('the server speaks protocols 2 and 3, each client in its own, and refuses others by name', () => {
  for (const v of [MIN_PROTOCOL_VERSION, PROTOCOL_VERSION]) {
    const r = new RoomEngine(room);
    r.open('k', 0);
    const w = ofType(to(r.message('k', { ...hello('a'), v }, 0), 'k'), 'welcome');
    assert.equal(w[0]?.v, v);
  }
  for (const v of [MIN_PROTOCOL_VERSION - 1, PROTOCOL_VERSION + 1]) {
    const r = new RoomEngine(room);
    r.open('k', 0);
    const e = ofType(to(r.message('k', { ...hello('a'), v }, 0), 'k'), 'error')[0];
    assert.equal(e.code, 'protocol-version');
    assert.equal(e.fatal, true);
    assert.match(e.message, new RegExp(`speaks protocol ${MIN_PROTOCOL_VERSION} to ${PROTOCOL_VERSION}, the client ${v}; upgrade the older side`));
  }
});

// spec: VIS-DROP-DEAD
test('a closed connection leaves the visibility set at once', () => {
  const r = new RoomEngine(room);
  join(r, 'ka', 'a');
  join(r, 'kb', 'b');
  r.message('ka', { t: 'ops', ops: [note(1)] }, 0);
  const o = r.close('kb', 10);
  assert.deepEqual(ofType(to(o, 'ka'), 'visible'), [{ t: 'visible', seq: 1 }]);
  assert.deepEqual(r.members(), ['a']);
});

// spec: REC-CATCHUP
test('catch-up: a client behind the checkpoint gets checkpoint + suffix + its last visible seq', () => {
  const r = new RoomEngine(room);
  join(r, 'ka', 'a');
  join(r, 'kb', 'b');
  r.message('ka', { t: 'ops', ops: [note(1), note(2)] }, 0);
  r.message('ka', { t: 'ack', pos: 2 }, 1);
  r.message('kb', { t: 'ack', pos: 2 }, 1);
  assert.equal(r.stableFrontier(), 2);
  r.message('ka', { t: 'ops', ops: [note(3)] }, 2);
  r.close('ka', 3);
  r.open('ka2', 4);
  const w = ofType(to(r.message('ka2', hello('a', 0), 4), 'ka2'), 'welcome')[0];
  assert.equal(w.checkpoint!.pos, 2);
  assert.deepEqual((w.checkpoint!.state as { notes: string[] }).notes, ['a@1: n1', 'a@2: n2']);
  assert.deepEqual(
    w.entries.map((e) => e.pos),
    [3],
  );
  assert.equal(w.highWater, 3);
  assert.equal(w.visibleSeq, 2, 'op 3 still waits for b');
  assert.deepEqual(w.members, ['b']);
});

// spec: REC-CATCHUP
test('a client that holds enough resumes without a checkpoint', () => {
  const r = new RoomEngine(room);
  join(r, 'ka', 'a');
  join(r, 'kb', 'b');
  r.message('ka', { t: 'ops', ops: [note(1), note(2), note(3)] }, 0);
  r.message('kb', { t: 'ack', pos: 1 }, 0);
  r.close('ka', 1);
  assert.equal(r.stableFrontier(), 1, 'b holds only 1');
  r.open('ka2', 2);
  const w = ofType(to(r.message('ka2', hello('a', 2), 2), 'ka2'), 'welcome')[0];
  assert.equal(w.checkpoint, undefined);
  assert.equal(w.from, 3);
  assert.deepEqual(
    w.entries.map((e) => e.seq),
    [3],
  );
});

// spec: SEC-MEMORY
test('memory stays bounded under steady load: the suffix is pruned as acks arrive', () => {
  const r = new RoomEngine(room);
  join(r, 'ka', 'a');
  join(r, 'kb', 'b');
  let seq = 0;
  for (let i = 0; i < 2000; i++) {
    r.message('ka', { t: 'ops', ops: [note(++seq)] }, i);
    r.message('ka', { t: 'ack', pos: r.head() }, i);
    r.message('kb', { t: 'ack', pos: r.head() }, i);
  }
  assert.equal(r.head(), 2000);
  assert.equal(r.suffixLength(), 0);
  assert.equal(r.durableState().suffix.length, 0);
});

// spec: LOG-EXACTLY-ONCE, OP-VERDICT, REC-RESTORE
test('high-water marks and verdicts survive compaction and a restart', () => {
  const r = new RoomEngine(room);
  join(r, 'ka', 'a');
  r.message('ka', { t: 'ops', ops: [note(1), { seq: 2, name: 'move', args: { id: 'nope', x: 0, y: 0 } }] }, 0);
  r.close('ka', 1); // a leaves before it learns the verdict; alone, everything becomes stable
  assert.equal(r.stableFrontier(), 2);
  assert.equal(r.suffixLength(), 0, 'suffix compacted into the checkpoint');
  const restarted = new RoomEngine(room, {}, structuredClone(r.durableState()));
  restarted.open('k2', 0);
  const w = ofType(to(restarted.message('k2', hello('a', 0), 0), 'k2'), 'welcome')[0];
  assert.equal(w.highWater, 2);
  assert.deepEqual(w.rejected, [{ seq: 2, error: 'no item nope' }], 'the verdict outlived its compacted entry');
  assert.equal(restarted.message('k2', { t: 'ops', ops: [note(1), note(2)] }, 1).persist.appended.length, 0, 'no duplicates after restart');
});

// spec: OP-VERDICT-KEPT
test('a rejection is kept past the ack until the client says its store holds it (protocol 6); an older client forgets it at the ack', () => {
  const reject = { seq: 2, name: 'move', args: { id: 'nope', x: 0, y: 0 } };
  const welcomeAfter = (r: RoomEngine<any>, conn: string, v: number) => {
    r.open(conn, 9);
    return ofType(to(r.message(conn, { ...hello('a', 2), v }, 9), conn), 'welcome')[0];
  };
  for (const v of [6, 5]) {
    const r = new RoomEngine(room);
    r.open('ka', 0);
    r.message('ka', { ...hello('a'), v }, 0);
    r.message('ka', { t: 'ops', ops: [note(1), reject] }, 1);
    r.message('ka', { t: 'ack', pos: 2 }, 2); // received and applied: not yet in the store's base
    assert.equal(r.suffixLength(), 0, 'the entry is compacted into the checkpoint');
    r.close('ka', 3);
    const kept = v >= 6 ? [{ seq: 2, error: 'no item nope' }] : [];
    assert.deepEqual(welcomeAfter(r, 'kb', v).rejected, kept, `protocol ${v}`);
    if (v < 6) continue;
    const o = r.message('kb', { t: 'settled', seq: 1 }, 10);
    assert.equal(o.persist.clients.a, undefined, 'settled below the rejection: nothing to forget');
    const forgot = r.message('kb', { t: 'settled', seq: 2 }, 11);
    assert.equal(forgot.persist.clients.a.rejected, undefined, 'the record is written without it');
    r.close('kb', 12);
    assert.deepEqual(welcomeAfter(r, 'kc', v).rejected, [], 'forgotten once the store holds it');
  }
});

// spec: STABLE-CHECKPOINT, REC-RESTORE
// A store may keep a checkpoint older than its stable position (the cluster's writes them
// lazily): the restored engine compacts to the frontier, as it was before it was stored.
test('restored with a stable frontier past its checkpoint, the room compacts to the frontier', () => {
  const r = new RoomEngine(room);
  join(r, 'ka', 'a');
  r.message('ka', { t: 'ops', ops: [note(1), note(2), note(3)] }, 0);
  const lazy = structuredClone(r.durableState());
  // The state at 0 and all three entries after it, with a stable position of 2.
  const restarted = new RoomEngine(room, {}, { checkpoint: { pos: 0, state: room.initial }, suffix: lazy.suffix, clients: lazy.clients, stable: 2 });
  const ds = restarted.durableState();
  assert.equal(restarted.stableFrontier(), 2);
  assert.equal(ds.checkpoint.pos, 2, 'the checkpoint is at the frontier');
  assert.deepEqual(
    ds.suffix.map((e) => e.pos),
    [3],
  );
  assert.deepEqual(restarted.headSnapshot(), r.headSnapshot());
  // The state at 2 is what applying the first two entries gives.
  const two = new RoomEngine(room);
  join(two, 'kx', 'a');
  two.message('kx', { t: 'ops', ops: [note(1), note(2)] }, 0);
  assert.deepEqual(ds.checkpoint.state, two.headSnapshot());
});

// spec: SEC-MALFORMED
test('bad input gets a clear error and the room goes on', () => {
  const r = new RoomEngine(room);
  r.open('k', 0);
  const cases: [unknown, RegExp][] = [
    [null, /expected an object/],
    [{ t: 'nope' }, /unknown message type "nope"/],
    [{ t: 'ops', ops: [] }, /1\.\.10000 ops/],
    [{ t: 'ops', ops: [{ seq: -1, name: 'x' }] }, /seq must be a positive integer/],
    [{ t: 'ack', pos: 'x' }, /ack.pos/],
    [{ t: 'hello', v: 1, client: '', machine: { name: 'x', version: 1 }, have: 0 }, /hello.client/],
  ];
  for (const [frame, re] of cases) {
    const e = ofType(to(r.message('k', frame, 0), 'k'), 'error')[0];
    assert.equal(e.code, 'malformed-frame');
    assert.match(e.message, re);
    assert.equal(e.fatal, false);
  }
  const early = ofType(to(r.message('k', { t: 'ack', pos: 0 }, 0), 'k'), 'error')[0];
  assert.equal(early.code, 'not-ready');
  r.open('k2', 0);
  const v = r.message('k2', { ...hello('z'), v: 99 }, 0);
  assert.equal(ofType(to(v, 'k2'), 'error')[0].code, 'protocol-version');
  assert.deepEqual(
    v.close.map((c) => c.conn),
    ['k2'],
  );
  r.open('k3', 0);
  const m = r.message('k3', { ...hello('z'), machine: { name: 'other', version: 1 } }, 0);
  assert.match(ofType(to(m, 'k3'), 'error')[0].message, /runs test-room@1, the client other@1/);
  // Unknown op names are ordered as rejected: the submitter learns why, the log stays contiguous.
  join(r, 'k4', 'a');
  const u = r.message('k4', { t: 'ops', ops: [{ seq: 1, name: 'fly', args: {} }] }, 0);
  assert.match(u.persist.appended[0].error!, /unknown op "fly"/);
  assert.equal(r.head(), 1);
});

test('a client id connecting again replaces its old connection', () => {
  const r = new RoomEngine(room);
  join(r, 'k1', 'a');
  r.open('k2', 1);
  const o = r.message('k2', hello('a'), 1);
  assert.equal(ofType(to(o, 'k1'), 'error')[0].code, 'replaced');
  assert.ok(o.close.some((c) => c.conn === 'k1'));
  assert.equal(r.connections(), 1);
});

// spec: LIVE-HONEST
// Found by the cluster simulator: a client's connection waited at a node for the room's owner
// (a lease to expire) while the client moved on to another connection; the stale hello came in
// last, replaced the live connection, and the live client was told `replaced` for good.
test('newer by when the client opened it: a hello held up on the way does not replace the connection the client opened after it', () => {
  const r = new RoomEngine(room);
  r.open('new', 0);
  const w = to(r.message('new', { ...hello('a'), at: 2_000 }, 0), 'new');
  assert.equal(ofType(w, 'welcome').length, 1);
  // The connection opened at 1,000 says hello last: it is the one refused, the live one stays.
  r.open('stale', 1);
  const o = r.message('stale', { ...hello('a'), at: 1_000 }, 1);
  assert.equal(ofType(to(o, 'stale'), 'error')[0].code, 'replaced');
  assert.match(ofType(to(o, 'stale'), 'error')[0].message, /a newer connection of this client id is open/);
  assert.deepEqual(to(o, 'new'), []);
  assert.ok(o.close.some((c) => c.conn === 'stale') && !o.close.some((c) => c.conn === 'new'));
  assert.equal(r.connections(), 1);
  assert.deepEqual(r.members(), ['a']);
  // A newer one still replaces it; a hello that does not say when (an older client) wins as before.
  r.open('newer', 2);
  assert.equal(ofType(to(r.message('newer', { ...hello('a'), at: 3_000 }, 2), 'new'), 'error')[0].code, 'replaced');
  r.open('undated', 3);
  assert.equal(ofType(to(r.message('undated', hello('a'), 3), 'newer'), 'error')[0].code, 'replaced');
  // A malformed time is a malformed frame.
  r.open('bad', 4);
  assert.equal(ofType(to(r.message('bad', { ...hello('b'), at: -1 }, 4), 'bad'), 'error')[0].code, 'malformed-frame');
});

// spec: SEC-AUTHOR, SEC-CLIENT-OWNER, SEC-ACCESS, OP-REFUSED
test('principals: the author is the user; a client id belongs to its first user; read-only and authorize refusals are no-ops without args', () => {
  const r = new RoomEngine(room, {
    authorize: (op, ctx) => (ctx.user === 'eve' && (op.args as { text: string }).text === 'secret' ? 'eve may not say that' : true),
  });
  r.open('k1', 0, { user: 'alice' });
  const w = ofType(to(r.message('k1', hello('laptop'), 0), 'k1'), 'welcome')[0];
  assert.equal(w.author, 'alice');
  assert.equal(w.access, undefined, 'write access is the default and is not spelled out');
  const o = r.message('k1', { t: 'ops', ops: [note(1)] }, 1);
  assert.equal(o.persist.appended[0].author, 'alice');
  assert.equal(r.clientRecord('laptop')!.owner, 'alice');
  // Another user cannot take the id over; the owner keeps its connection.
  r.open('k2', 2, { user: 'mallory' });
  const m = r.message('k2', hello('laptop'), 2);
  assert.equal(ofType(to(m, 'k2'), 'error')[0].code, 'forbidden');
  assert.deepEqual(
    m.close.map((c) => c.conn),
    ['k2'],
  );
  assert.equal(to(m, 'k1').length, 0);
  // Read-only: welcomed as such; its ops keep their seq but enter the log as refused no-ops.
  r.open('k3', 3, { user: 'bob', access: 'read' });
  assert.equal(ofType(to(r.message('k3', hello('tablet'), 3), 'k3'), 'welcome')[0].access, 'read');
  const ro = r.message('k3', { t: 'ops', ops: [note(1, 'hi'), note(2, 'again')] }, 4);
  assert.deepEqual(
    ro.persist.appended.map((e) => [e.seq, e.args, e.refused, /^read-only access/.test(e.error ?? '')]),
    [
      [1, null, true, true],
      [2, null, true, true],
    ],
  );
  assert.deepEqual(
    ofType(to(ro, 'k3'), 'log')[0].entries.map((e) => e.k === 'own' && e.refused),
    [true, true],
    'the submitter learns they were refused',
  );
  assert.equal(r.clientRecord('tablet')!.highWater, 2, 'refused ops still advance the exactly-once mark');
  const seenByAlice = ofType(to(ro, 'k1'), 'log')[0].entries;
  assert.ok(
    seenByAlice.every((e) => e.k === 'op' && e.e.args === null && e.e.refused === true && e.e.error?.startsWith('read-only')),
    'others never see refused arguments',
  );
  // authorize: refuses with the hook's reason; other ops of the same frame go through.
  r.open('k4', 5, { user: 'eve' });
  r.message('k4', hello('phone'), 5);
  const a = r.message('k4', { t: 'ops', ops: [note(1, 'secret'), note(2, 'fine')] }, 6);
  assert.equal(a.persist.appended[0].error, 'not authorized: eve may not say that');
  assert.equal(a.persist.appended[0].refused, true);
  assert.equal(a.persist.appended[1].error, undefined);
  assert.equal(a.persist.appended[1].refused, undefined);
  // Unknown op names are refused the same way: named, without their arguments.
  const u = r.message('k4', { t: 'ops', ops: [{ seq: 3, name: 'fly', args: { secret: 1 } }] }, 7);
  assert.match(u.persist.appended[0].error!, /^unknown op "fly" for machine test-room@1; known ops: /);
  assert.equal(u.persist.appended[0].refused, true);
  assert.equal(u.persist.appended[0].args, null);
  assert.equal(r.stats.refused, 4);
});

test('an op that throws at its place is rejected, not refused: its args stay in the log', () => {
  const r = new RoomEngine(room);
  join(r, 'k1', 'a');
  r.message('k1', { t: 'ops', ops: [{ seq: 1, name: 'add', args: { id: 'x', x: 0, y: 0 } }] }, 1);
  const o = r.message('k1', { t: 'ops', ops: [{ seq: 2, name: 'add', args: { id: 'x', x: 1, y: 1 } }] }, 2);
  assert.deepEqual(o.persist.appended[0], { pos: 2, client: 'a', seq: 2, name: 'add', args: { id: 'x', x: 1, y: 1 }, author: 'a', error: 'item x exists' });
  assert.deepEqual(ofType(to(o, 'k1'), 'log')[0].entries, [{ k: 'own', seq: 2, error: 'item x exists' }]);
  assert.deepEqual(r.clientRecord('a')!.rejected, [{ seq: 2, pos: 2, error: 'item x exists' }]);
});

// spec: OP-VERDICT
test('a frame of ops applied in one draft gives the verdicts, log and state of ops applied one by one', () => {
  // With no authorize hook the room applies a frame's ops together; with one, op by op (the
  // hook reads the state before each op). Throwers, refusals and duplicates mixed in one frame.
  const frame = [
    { seq: 1, name: 'add', args: { id: 'x', x: 0, y: 0 } },
    { seq: 2, name: 'add', args: { id: 'x', x: 1, y: 1 } }, // throws: x exists
    { seq: 3, name: 'fly', args: {} }, // refused: unknown op
    { seq: 1, name: 'add', args: { id: 'x', x: 0, y: 0 } }, // a duplicate, ignored
    { seq: 4, name: 'move', args: { id: 'x', x: 5, y: 5 } },
    { seq: 5, name: 'move', args: { id: 'nope', x: 1, y: 1 } }, // throws: no item
    { seq: 6, name: 'note', args: { text: 'hi' } },
  ];
  const run = (authorize?: () => true) => {
    const r = new RoomEngine(room, authorize ? { authorize } : {});
    join(r, 'k1', 'a');
    join(r, 'k2', 'b');
    const o = r.message('k1', { t: 'ops', ops: frame }, 1);
    return { r, o };
  };
  const together = run();
  const oneByOne = run(() => true);
  assert.deepEqual(together.o.persist.appended, oneByOne.o.persist.appended);
  assert.deepEqual(
    together.o.persist.appended.map((e) => [e.seq, e.error ?? 'ok']),
    [
      [1, 'ok'],
      [2, 'item x exists'],
      [3, together.o.persist.appended[2].error],
      [4, 'ok'],
      [5, 'no item nope'],
      [6, 'ok'],
    ],
  );
  assert.match(together.o.persist.appended[2].error!, /unknown op "fly"/);
  assert.deepEqual(together.r.headSnapshot(), oneByOne.r.headSnapshot());
  assert.deepEqual(together.r.headSnapshot().items, { x: { x: 5, y: 5 } });
  assert.deepEqual(together.r.clientRecord('a'), oneByOne.r.clientRecord('a'));
  assert.deepEqual(
    together.r.clientRecord('a')!.rejected!.map((x) => x.seq),
    [2, 3, 5],
  );
  assert.deepEqual(to(together.o, 'k2'), to(oneByOne.o, 'k2'));
  assert.deepEqual(to(together.o, 'k1'), to(oneByOne.o, 'k1'));
  assert.equal(together.r.stats.rejected, oneByOne.r.stats.rejected);
  assert.equal(together.r.stats.duplicates, 1);
});

test('a room stored before protocol 2 (refusals marked by a "refused: " prefix) reads as refused entries and verdicts', () => {
  // What a version-1 server wrote: a read-only client's refused op, an op that threw, and the
  // refused op's verdict, not yet acked, in its client record.
  const r = new RoomEngine(
    room,
    {},
    {
      checkpoint: { pos: 0, state: room.initial },
      suffix: [
        {
          pos: 1,
          client: 'ro',
          seq: 1,
          name: 'note',
          args: null,
          author: 'ro',
          error: 'refused: read-only access; this client may not submit ops to the room',
        },
        { pos: 2, client: 'w', seq: 1, name: 'add', args: { id: 'x', x: 0, y: 0 }, author: 'w' },
        { pos: 3, client: 'w', seq: 2, name: 'add', args: { id: 'x', x: 1, y: 1 }, author: 'w', error: 'item x exists' },
      ],
      clients: {
        ro: { highWater: 1, visibleSeq: 0, rejected: [{ seq: 1, pos: 1, error: 'refused: read-only access; this client may not submit ops to the room' }] },
        w: { highWater: 2, visibleSeq: 0 },
      },
      stable: 0,
    },
  );
  const refused = {
    pos: 1,
    client: 'ro',
    seq: 1,
    name: 'note',
    args: null,
    author: 'ro',
    error: 'read-only access; this client may not submit ops to the room',
    refused: true,
  };
  const d = r.durableState();
  assert.deepEqual(d.suffix[0], refused);
  assert.equal(d.suffix[2].error, 'item x exists', 'an op that threw is left as it was');
  assert.equal(d.suffix[2].refused, undefined);
  assert.deepEqual(d.clients.ro.rejected, [{ seq: 1, pos: 1, error: 'read-only access; this client may not submit ops to the room', refused: true }]);
  // What the refused client hears when it comes back (its entry is compacted by then, nobody
  // else being in the room): the verdict with the flag, not the prefix.
  r.open('k1', 0, { access: 'read' });
  const w = ofType(to(r.message('k1', hello('ro'), 0), 'k1'), 'welcome')[0];
  assert.deepEqual(w.rejected, [{ seq: 1, error: 'read-only access; this client may not submit ops to the room', refused: true }]);
});

// spec: AUTH-STORED
test('sendFirst: only outputs of pure bookkeeping may be sent before they are on disk', () => {
  const r = new RoomEngine(room);
  assert.equal(join(r, 'ka', 'a').sendFirst, false, 'a new client record is claimed: on disk before the welcome');
  assert.equal(join(r, 'kb', 'b').sendFirst, false);
  const ops = r.message('ka', { t: 'ops', ops: [note(1)] }, 1);
  assert.equal(ops.sendFirst, false, 'new log entries are written before anyone hears of them');
  const ack = r.message('kb', { t: 'ack', pos: 1 }, 2);
  assert.deepEqual(ofType(to(ack, 'ka'), 'visible'), [{ t: 'visible', seq: 1 }]);
  assert.ok(Object.keys(ack.persist.clients).length > 0, 'the ack still has writes to make');
  assert.equal(ack.sendFirst, true, 'Notify-Visible need not wait for them');
  r.close('kb', 3);
  r.open('kb2', 4);
  assert.equal(r.message('kb2', hello('b', 1), 4).sendFirst, true, 'a known client resuming claims nothing');
});

// What sendFirst relies on: acks lost in a crash cannot let a joiner count too early, because a
// restarted room has no members, so its stable frontier is its whole log.
// spec: VIS-JOIN-GATE
test('after a restart, a joiner counts for visibility only once it holds the whole log on disk', () => {
  const r = new RoomEngine(room);
  join(r, 'ka', 'a');
  join(r, 'kb', 'b');
  r.message('ka', { t: 'ops', ops: [note(1), note(2)] }, 1);
  r.message('kb', { t: 'ack', pos: 2 }, 2); // a was told 1 and 2 are visible...
  // ...but the disk kept the records from before that ack (it was sent before its commit).
  const disk = r.durableState();
  disk.clients.a.visibleSeq = 0;
  const r2 = new RoomEngine(room, {}, disk);
  join(r2, 'kc', 'c');
  r2.message('kc', { t: 'ack', pos: 1 }, 3);
  assert.deepEqual(r2.members(), [], "c holds 1 of 2: a member now would make a's Visible view a lie");
  r2.message('kc', { t: 'ack', pos: 2 }, 4);
  assert.deepEqual(r2.members(), ['c']);
});

// spec: SEC-MEMORY, STABLE-CHECKPOINT
test('a long unstable suffix keeps a bounded number of states; compaction anywhere gives the state a replay gives', () => {
  const r = new RoomEngine(room);
  join(r, 'ka', 'a');
  join(r, 'kb', 'b');
  r.message('kb', { t: 'ack', pos: 0 }, 0);
  // 200 steps of 1-3 ops (some throw: `move` of a missing item) while b acks nothing.
  let seq = 0;
  const all: { seq: number; name: string; args: unknown }[] = [];
  for (let step = 0; step < 200; step++) {
    const ops = Array.from({ length: 1 + (step % 3) }, (_, i) => {
      seq++;
      return seq % 7 === 0 ? { seq, name: 'move', args: { id: 'ghost', x: 0, y: 0 } } : note(seq, `s${step}.${i}`);
    });
    all.push(...ops);
    r.message('ka', { t: 'ops', ops }, 1);
  }
  const kept = r as unknown as { kept: number[]; suffix: { after?: unknown }[] };
  assert.ok(kept.kept.length <= 32, `${kept.kept.length} states kept`);
  assert.equal(kept.suffix.filter((i) => i.after !== undefined).length, kept.kept.length);
  // Reference: each prefix applied op by op on a fresh room.
  const ref = new RoomEngine(room);
  join(ref, 'ka', 'a');
  const states = [ref.headSnapshot()];
  for (const op of all) {
    ref.message('ka', { t: 'ops', ops: [op] }, 1);
    states.push(ref.headSnapshot());
  }
  // Acks at positions inside steps, at step ends and at kept states alike.
  for (const pos of [1, 2, 5, 37, 38, 120, 121, 250, 333, 399, seq]) {
    r.message('kb', { t: 'ack', pos }, 2);
    r.message('ka', { t: 'ack', pos: seq }, 2);
    assert.equal(r.stableFrontier(), pos);
    assert.deepEqual(r.durableState().checkpoint, { pos, state: states[pos] }, `checkpoint at ${pos}`);
  }
  assert.deepEqual(r.headSnapshot(), states[seq]);
});

// spec: PRESENCE-EPHEMERAL
test('presence: sent at once to the others, never persisted; a joiner gets everyone current; gone when its connection closes', () => {
  const r = new RoomEngine(room);
  join(r, 'k1', 'a');
  join(r, 'k2', 'b');
  const set = r.message('k1', { t: 'presence', value: { cursor: [3, 4], name: 'Ada' } }, 1);
  assert.deepEqual(set.persist, { appended: [], clients: {} }, 'nothing of it is stored');
  assert.equal(set.sendFirst, true, 'and nothing waits for a commit');
  assert.deepEqual(ofType(to(set, 'k2'), 'presence'), [{ t: 'presence', peers: [{ client: 'a', value: { cursor: [3, 4], name: 'Ada' } }] }]);
  assert.deepEqual(to(set, 'k1'), [], 'not echoed to its sender');
  assert.equal(r.head(), 0, 'no log entry');
  assert.equal(r.durableState().suffix.length, 0);
  assert.equal(JSON.stringify(r.durableState()).includes('Ada'), false, 'in nothing a store writes');
  // Latest wins; a joiner's welcome carries it.
  r.message('k1', { t: 'presence', value: { cursor: [5, 6] } }, 2);
  const w = ofType(to(join(r, 'k3', 'c'), 'k3'), 'welcome')[0];
  assert.deepEqual(w.presence, [{ client: 'a', value: { cursor: [5, 6] } }]);
  // Refused: too large, or out of the argument domain; nothing changes for anyone.
  const big = r.message('k2', { t: 'presence', value: { blob: 'x'.repeat(5000) } }, 3);
  assert.deepEqual(
    to(big, 'k2').map((m) => m.t === 'error' && [m.code, m.fatal]),
    [['too-large', false]],
  );
  assert.deepEqual(to(big, 'k1'), []);
  const nan = r.message('k2', { t: 'presence', value: { x: Number.NaN } }, 3);
  assert.deepEqual(
    ofType(to(nan, 'k2'), 'error').map((m) => m.code),
    ['too-large'],
  );
  // Its connection closes: gone for everyone left.
  const gone = r.close('k1', 4);
  assert.deepEqual(ofType(to(gone, 'k2'), 'presence'), [{ t: 'presence', peers: [{ client: 'a', value: null }] }]);
  assert.deepEqual(ofType(to(gone, 'k3'), 'presence'), [{ t: 'presence', peers: [{ client: 'a', value: null }] }]);
  const w2 = ofType(to(join(r, 'k4', 'd'), 'k4'), 'welcome')[0];
  assert.equal(w2.presence, undefined, 'no one left with presence');
});

// spec: PRESENCE-PER-KEY
test('presence per key (protocol 8): each key of a connection is a peer of its own; a protocol-7 peer sees the latest set, one per connection', () => {
  const r = new RoomEngine(room, { presenceEveryMs: 0 });
  join(r, 'k1', 'a'); // the shared client of two tabs
  join(r, 'k2', 'b');
  r.open('k7', 0);
  r.message('k7', { ...hello('old'), v: 7 }, 0);
  const peers = (o: RoomOutput, conn: string) => ofType(to(o, conn), 'presence').flatMap((m) => m.peers);
  const t1 = r.message('k1', { t: 'presence', key: 'tab1', value: { x: 1 } }, 1);
  assert.deepEqual(peers(t1, 'k2'), [{ client: 'a', key: 'tab1', value: { x: 1 } }]);
  assert.deepEqual(peers(t1, 'k7'), [{ client: 'a', value: { x: 1 } }], 'an old peer: no key');
  const t2 = r.message('k1', { t: 'presence', key: 'tab2', value: { x: 2 } }, 2);
  assert.deepEqual(peers(t2, 'k2'), [{ client: 'a', key: 'tab2', value: { x: 2 } }]);
  assert.deepEqual(peers(t2, 'k7'), [{ client: 'a', value: { x: 2 } }]);
  // A joiner of protocol 8 gets both; one of protocol 7 the latest set.
  assert.deepEqual(ofType(to(join(r, 'k3', 'c'), 'k3'), 'welcome')[0].presence, [
    { client: 'a', key: 'tab1', value: { x: 1 } },
    { client: 'a', key: 'tab2', value: { x: 2 } },
  ]);
  r.open('k8', 0);
  const old = r.message('k8', { ...hello('old2'), v: 7 }, 0);
  assert.deepEqual(ofType(to(old, 'k8'), 'welcome')[0].presence, [{ client: 'a', value: { x: 2 } }]);
  // A tab clears its own (it closed): the other stays, for an old peer too.
  const c2 = r.message('k1', { t: 'presence', key: 'tab2', value: null }, 3);
  assert.deepEqual(peers(c2, 'k2'), [{ client: 'a', key: 'tab2', value: null }]);
  assert.deepEqual(peers(c2, 'k7'), [{ client: 'a', value: { x: 1 } }], 'the old peer keeps the one left');
  assert.deepEqual(peers(r.message('k1', { t: 'presence', key: 'tab2', value: null }, 3), 'k2'), [], 'clearing twice says nothing');
  // An unkeyed presence is the connection's own, as before, beside the keys.
  assert.deepEqual(peers(r.message('k2', { t: 'presence', value: { x: 9 } }, 4), 'k1'), [{ client: 'b', value: { x: 9 } }]);
  // At most MAX_PRESENCE_KEYS keys: past it a clear too-large, nothing set.
  for (let i = 2; i <= MAX_PRESENCE_KEYS; i++) r.message('k1', { t: 'presence', key: `t${i}`, value: { x: i } }, 5);
  const over = r.message('k1', { t: 'presence', key: 'one-too-many', value: { x: 0 } }, 5);
  assert.deepEqual(
    ofType(to(over, 'k1'), 'error').map((m) => m.code),
    ['too-large'],
  );
  assert.deepEqual(peers(over, 'k2'), []);
  // A protocol-7 connection's key is ignored: its presence is its own.
  assert.deepEqual(peers(r.message('k7', { t: 'presence', key: 'x', value: { x: 7 } }, 6), 'k2'), [{ client: 'old', value: { x: 7 } }]);
  // The connection closes: every key gone for everyone, one null for an old peer.
  const gone = r.close('k1', 7);
  assert.equal(peers(gone, 'k2').filter((p) => p.client === 'a' && p.value === null).length, MAX_PRESENCE_KEYS);
  assert.deepEqual(peers(gone, 'k7'), [{ client: 'a', value: null }]);
});

// spec: PRESENCE-PER-KEY
test('presence per key: a connection faster than presenceEveryMs is coalesced per key, each key its latest', () => {
  const r = new RoomEngine(room, { presenceEveryMs: 10 });
  join(r, 'k1', 'a');
  join(r, 'k2', 'b');
  const seen: unknown[] = [];
  const take = (o: RoomOutput) => seen.push(...ofType(to(o, 'k2'), 'presence').flatMap((m) => m.peers.map((p) => [p.key, p.value])));
  for (let x = 0; x < 10; x++) for (const key of ['t1', 't2']) take(r.message('k1', { t: 'presence', key, value: { x } }, 100));
  take(r.tick(200));
  const last = new Map(seen.map((kv) => kv as [string, unknown]));
  assert.deepEqual(
    [...last],
    [
      ['t1', { x: 9 }],
      ['t2', { x: 9 }],
    ],
    'each key ends at its latest',
  );
  assert.ok(seen.length < 20, `coalesced (${seen.length} forwarded of 20)`);
});

// spec: PRESENCE-EPHEMERAL
test('presence: the 4 KiB bound counts the value alone, strings by their UTF-8 bytes + 5, the same on client and server', () => {
  // Issue 40: ~4,075 ASCII characters were refused where the docs said 4 KiB (the op name
  // "presence" and an op's 8 bytes were counted too), and a character outside the BMP counted 6.
  const r = new RoomEngine(room);
  join(r, 'k1', 'a');
  join(r, 'k2', 'b');
  const client = new ViewEngine(room, { clientId: 'me', now: () => 0 });
  const fits = ['x'.repeat(4091), 'é'.repeat(2045), '😀'.repeat(1022), { text: 'y'.repeat(4077) }]; // 4096, 4095, 4093, 5 + 9 + 4082
  for (const value of fits) {
    assert.equal((domainBytes(value) as number) <= MAX_PRESENCE_BYTES, true, JSON.stringify(value).slice(0, 20));
    assert.deepEqual(ofType(to(r.message('k1', { t: 'presence', value }, 1), 'k1'), 'error'), [], 'the room takes it');
    assert.doesNotThrow(() => client.setPresence(value), 'the client takes it');
  }
  for (const value of ['x'.repeat(4092), { text: 'y'.repeat(4078) }]) {
    const errs = ofType(to(r.message('k1', { t: 'presence', value }, 1), 'k1'), 'error');
    assert.deepEqual(
      errs.map((e) => e.code),
      ['too-large'],
    );
    assert.match(errs[0].message, /4097 bytes as the argument domain counts them \(a string's UTF-8 bytes \+ 5/);
    assert.throws(
      () => client.setPresence(value),
      (e: HerculesError) => e.code === 'too-large' && /4097 bytes as the argument domain/.test(e.message),
    );
  }
});

// spec: PRESENCE-EPHEMERAL
test('presence: a read-only connection may set it only if the room allows readers to', () => {
  for (const readersPresence of [false, true]) {
    const r = new RoomEngine(room, { readersPresence });
    join(r, 'k1', 'a');
    r.open('k2', 0, { access: 'read', user: 'rita' });
    r.message('k2', hello('reader'), 0);
    const o = r.message('k2', { t: 'presence', value: { cursor: 1 } }, 1);
    if (readersPresence)
      assert.deepEqual(ofType(to(o, 'k1'), 'presence'), [{ t: 'presence', peers: [{ client: 'reader', user: 'rita', value: { cursor: 1 } }] }]);
    else {
      assert.deepEqual(ofType(to(o, 'k1'), 'presence'), []);
      assert.deepEqual(
        ofType(to(o, 'k2'), 'error').map((m) => m.code),
        ['forbidden'],
      );
    }
  }
});

// spec: PRESENCE-EPHEMERAL
test('presence: a connection faster than presenceEveryMs is coalesced, the latest winning; a paced one is never held', () => {
  const r = new RoomEngine(room, { presenceEveryMs: 10 });
  join(r, 'k1', 'a');
  join(r, 'k2', 'b');
  const seen = (o: RoomOutput) => ofType(to(o, 'k2'), 'presence').map((m) => (m.peers[0].value as { x: number }).x);
  // A burst at one instant: the first PRESENCE_BURST go at once, the rest wait, each replacing the last.
  const burst = Array.from({ length: 20 }, (_, x) => seen(r.message('k1', { t: 'presence', value: { x } }, 100)));
  assert.deepEqual(burst.flat(), [0, 1, 2, 3, 4]);
  assert.deepEqual(seen(r.tick(104)), [], 'not yet: less than presenceEveryMs since');
  assert.deepEqual(seen(r.tick(110)), [19], 'then only the latest');
  assert.deepEqual(seen(r.tick(200)), [], 'and nothing twice');
  // A joiner sees the latest at once, held or not.
  r.message('k1', { t: 'presence', value: { x: 20 } }, 200);
  r.message('k1', { t: 'presence', value: { x: 21 } }, 200);
  const w = ofType(to(join(r, 'k3', 'c', 200), 'k3'), 'welcome')[0];
  assert.deepEqual(w.presence, [{ client: 'a', value: { x: 21 } }]);
  // Paced at 16 ms, even with jitter (one 4 ms after the last), every update goes at once.
  const paced = [300, 316, 320, 336, 352, 368, 372, 388].map((t, x) => seen(r.message('k1', { t: 'presence', value: { x: 100 + x } }, t)));
  assert.deepEqual(paced.flat(), [100, 101, 102, 103, 104, 105, 106, 107]);
  // A held value of a connection that closes is not sent after it: the others hear it gone.
  for (let x = 0; x < 10; x++) r.message('k1', { t: 'presence', value: { x: 500 + x } }, 400);
  const gone = r.close('k1', 401);
  assert.deepEqual(ofType(to(gone, 'k2'), 'presence'), [{ t: 'presence', peers: [{ client: 'a', value: null }] }]);
  assert.throws(() => new RoomEngine(room, { presenceEveryMs: -1 }), /presenceEveryMs must be a non-negative number/);
});

// spec: LOG-ONE-HISTORY
test('an op that declares a gap starts its client’s digest chain again, as the client does, even when the server holds every seq in the gap', () => {
  const r = new RoomEngine(room);
  join(r, 'k1', 'a');
  // The process before sent 2 and 3 under its reservation and crashed before saving them: its
  // restart declares a gap after 1 and starts a new chain; the server has 2 and 3 all the same.
  r.message('k1', { t: 'ops', ops: [note(1), note(2), note(3)] }, 1);
  r.message('k1', { t: 'ops', ops: [{ ...note(4), after: 1 }] }, 2);
  const chain = scanOp(GENESIS_DIGEST, 'note', { text: 'n4' });
  assert.ok('digest' in chain);
  assert.equal(r.clientRecord('a')!.highWater, 4);
  assert.equal(r.clientRecord('a')!.digest, chain.digest, 'the chain the client holds for op 4');
  // The op after it extends that chain.
  r.message('k1', { t: 'ops', ops: [note(5)] }, 3);
  const next = scanOp(chain.digest, 'note', { text: 'n5' });
  assert.ok('digest' in next);
  assert.equal(r.clientRecord('a')!.digest, next.digest);
});

// spec: RECEIPT-TRUE, RECEIPT-LIVE
test('delivery receipts: only a connection that asked gets acks, every member once asked, then what moved, one message a turn', () => {
  const r = new RoomEngine(room);
  for (const [k, c] of [
    ['ka', 'a'],
    ['kb', 'b'],
    ['kc', 'c'],
  ]) {
    join(r, k, c);
    r.message(k, { t: 'ack', pos: 0 }, 0);
  }
  const ops = r.message('ka', { t: 'ops', ops: [note(1), note(2)] }, 1);
  assert.deepEqual(
    ofType(
      ops.send.map((s) => s.msg),
      'acks',
    ),
    [],
    'no one asked: no acks',
  );
  assert.equal(ofType(to(r.message('kb', { t: 'ack', pos: 2 }, 2), 'ka'), 'acks').length, 0, 'not asked yet');
  // Asking: every other member's position at once (b holds 2, c nothing yet).
  const asked = r.message('ka', { t: 'receipts', on: true }, 3);
  assert.deepEqual(ofType(to(asked, 'ka'), 'acks'), [
    {
      t: 'acks',
      acks: [
        { client: 'b', pos: 2 },
        { client: 'c', pos: 0 },
      ],
    },
  ]);
  assert.equal(asked.persist.appended.length + Object.keys(asked.persist.clients).length, 0, 'asking writes nothing');
  // c acks: a hears it; b (which did not ask) hears nothing; nothing is written for it.
  const acked = r.message('kc', { t: 'ack', pos: 1 }, 4);
  assert.deepEqual(ofType(to(acked, 'ka'), 'acks'), [{ t: 'acks', acks: [{ client: 'c', pos: 1 }] }]);
  assert.deepEqual(ofType(to(acked, 'kb'), 'acks'), []);
  assert.deepEqual(acked.persist.appended, []);
  // An ack that does not move (or is the asker's own) sends nothing.
  assert.deepEqual(ofType(to(r.message('kc', { t: 'ack', pos: 1 }, 5), 'ka'), 'acks'), []);
  assert.deepEqual(ofType(to(r.message('ka', { t: 'ack', pos: 2 }, 5), 'ka'), 'acks'), []);
  // An ack with ops: one turn, one acks message.
  const withOps = r.message('kc', { t: 'ops', ops: [note(1)], ack: { pos: 2 } }, 6);
  assert.deepEqual(ofType(to(withOps, 'ka'), 'acks'), [{ t: 'acks', acks: [{ client: 'c', pos: 2 }] }]);
  // A new member is told when it joins; off stops them.
  join(r, 'kd', 'd');
  const joined = r.message('kd', { t: 'ack', pos: 3 }, 7);
  assert.deepEqual(ofType(to(joined, 'ka'), 'acks'), [{ t: 'acks', acks: [{ client: 'd', pos: 3 }] }]);
  r.message('ka', { t: 'receipts', on: false }, 8);
  assert.deepEqual(ofType(to(r.message('kb', { t: 'ack', pos: 3 }, 9), 'ka'), 'acks'), []);
});

test('delivery receipts need protocol 7: an older connection that asks gets a clear, non-fatal error', () => {
  const r = new RoomEngine(room);
  r.open('ka', 0);
  r.message('ka', { ...hello('a'), v: 6 }, 0);
  const o = r.message('ka', { t: 'receipts', on: true }, 1);
  const err = ofType(to(o, 'ka'), 'error')[0];
  assert.equal(err.code, 'malformed-frame');
  assert.equal(err.fatal, false);
  assert.match(err.message, /receipts need protocol 7/);
  assert.throws(() => parseClientMessage({ t: 'receipts', on: 'yes' }), /receipts\.on must be a boolean/);
});
