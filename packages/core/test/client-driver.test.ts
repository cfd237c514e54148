/**
 * The client driver on a fake clock and a hand-driven store, against a real RoomEngine: what
 * it writes, when it reports ops durable, what it sends, and when.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HerculesError, RoomEngine, type ClientRestore, type RoomOutput, type ServerMessage, PROTOCOL_VERSION, RECENT_DIGESTS } from '../src/index.ts';
import { FakeClock } from '@hercules/test-utils';
import { room as machine } from './fixtures.ts';
import { HandStore, Net, driverClient } from './driver-net.ts';

/** A client of the fixture machine (driver-net.ts). */
function client(id: string, clock: FakeClock, opts: Parameters<typeof driverClient>[3] = {}) {
  return driverClient(machine, id, clock, opts);
}

/** Client a with a stored block of `seqBlock` seqs, connected to a fresh server and welcomed. */
function onlineWithBlock(seqBlock: number) {
  const clock = new FakeClock();
  const net = new Net(clock);
  const a = client('a', clock, { seqBlock });
  a.store.confirmReserve();
  net.open(a);
  net.flush();
  return { clock, net, a };
}

// spec: DUR-BEFORE-SEND
test('the driver sends an op only after the store confirmed it, and reports it durable only then', () => {
  const clock = new FakeClock();
  const net = new Net(clock);
  const a = client('a', clock);
  net.open(a);
  net.flush();
  assert.equal(a.room.connection(), 'ready');
  const h = a.room.ops.add({ id: 'x', x: 1, y: 1 });
  clock.settle();
  assert.equal(a.store.appends.length, 1, 'one write, begun once the submitting turn ended');
  clock.advance(60_000);
  assert.equal(h.stage, 'submitted', 'an unconfirmed write leaves the op Submitted, however long it takes');
  assert.deepEqual(a.opsSent(), [], 'and nothing is sent');
  assert.equal(a.room.positions().durable, 0);
  a.store.confirm();
  assert.equal(h.stage, 'durable');
  assert.deepEqual(a.opsSent(), [1], 'sent right after the confirmation');
  net.flush();
  assert.equal(h.position, 1);
  assert.equal(h.stage, 'visible', 'ordered, and alone in the room visible at once');
});

// spec: DUR-BEFORE-SEND
test('with a store that reserves seqs, an op goes out while it is being persisted, never past the stored reservation', () => {
  const clock = new FakeClock();
  const net = new Net(clock);
  const a = client('a', clock, { seqBlock: 4 });
  assert.deepEqual(
    a.store.reserves.map((r) => r.through),
    [4],
    'the first block is reserved at start, before any op',
  );
  net.open(a);
  net.flush();
  const h1 = a.room.ops.note({ text: 'one' });
  clock.settle();
  net.flush();
  assert.deepEqual(a.opsSent(), [], 'no op goes out before a reservation is stored');
  a.store.confirmReserve(); // op 1 goes out while its own write is under way
  assert.deepEqual(a.opsSent(), [1]);
  assert.deepEqual(
    a.store.appends.map((w) => w.ops.map((o) => o.seq)),
    [[1]],
  );
  net.flush();
  assert.equal(h1.stage, 'visible', 'ordered before the local write completed');
  assert.ok(h1.times.durable !== undefined && h1.times.durable <= h1.times.authoritative!, 'Durable is reached with Authoritative (on the server)');
  const p = a.room.positions();
  assert.equal(p.durable, 1, 'an op ordered is in the Durable log, local write or not');
  assert.equal(a.room.getState('durable'), a.room.getState('submitted'), 'the views share one snapshot again');
  assert.equal(a.room.getState('authoritative'), a.room.getState('submitted'));
  a.store.confirm();
  assert.equal(h1.stage, 'visible', 'the late local confirmation changes nothing');
  // Ops 2..4 fit the block; the write that holds them also reserves the next, since half is used.
  a.room.ops.note({ text: 'two' });
  a.room.ops.note({ text: 'three' });
  clock.settle();
  assert.deepEqual(a.opsSent(), [1, 2, 3], 'sent with no write confirmed');
  assert.deepEqual(
    a.store.reserves.map((r) => r.through),
    [7],
    'half the block is used: the next is reserved',
  );
  a.room.ops.note({ text: 'four' });
  a.room.ops.note({ text: 'five' });
  clock.settle();
  assert.deepEqual(a.opsSent(), [1, 2, 3], 'op 5 is past the stored reservation: the turn waits, whole');
  a.store.confirmReserve();
  assert.deepEqual(a.opsSent(), [1, 2, 3, 4, 5], 'the new block is stored: op 5 goes');
  assert.deepEqual(
    a.store.reserves.map((r) => r.through),
    [],
    'half of that block is left: no other yet',
  );
  net.flush();
  assert.deepEqual(net.server.headSnapshot().notes, ['a@1: one', 'a@2: two', 'a@3: three', 'a@4: four', 'a@5: five']);
  assert.deepEqual(a.errors, []);
});

// spec: DUR-BEFORE-SEND
test('ops run at most RECENT_DIGESTS ahead of the store, so a restart can verify its last persisted op; a clean close gives the block back', async () => {
  const { clock, net, a } = onlineWithBlock(1000);
  for (let i = 0; i < RECENT_DIGESTS + 4; i++) a.room.ops.note({ text: `n${i}` });
  clock.settle();
  assert.deepEqual(a.opsSent(), [], 'a burst past the window waits for its write, whole');
  a.store.confirm();
  assert.equal(a.opsSent().length, RECENT_DIGESTS + 4, 'and goes once it is durable');
  assert.equal(a.sent.filter((m) => m.t === 'ops').length, 1, 'in one frame');
  for (let i = 0; i < RECENT_DIGESTS; i++) a.room.ops.note({ text: `m${i}` });
  clock.settle();
  assert.equal(a.opsSent().length, 2 * RECENT_DIGESTS + 4, 'a burst within the window goes at once');
  a.store.confirm();
  net.flush();
  const closed = a.driver.close();
  await Promise.resolve();
  assert.deepEqual(
    a.store.reserves.map((r) => r.through),
    [2 * RECENT_DIGESTS + 4],
    'everything sent is persisted: the rest of the block is given back',
  );
  a.store.confirmReserve();
  await closed;
  assert.equal(a.store.reservedSeq, 2 * RECENT_DIGESTS + 4);
});

// spec: DUR-BEFORE-SEND, LOG-CLIENT-ORDER, LOG-EXACTLY-ONCE, DUR-DELIVERED, LOG-ONE-HISTORY
test('a client restarted after a crash never reuses a reserved seq: its next op declares the gap, and the server takes it', () => {
  const clock = new FakeClock();
  const net = new Net(clock);
  const store = new HandStore(true);
  const a = client('a', clock, { seqBlock: 10, store });
  store.confirmReserve(); // reserves 1..10
  const conn = net.open(a);
  net.flush();
  a.room.ops.note({ text: 'one' });
  clock.settle();
  store.confirm(); // op 1 durable
  a.room.ops.note({ text: 'two' });
  a.room.ops.note({ text: 'three' });
  clock.settle();
  net.flush(); // ops 2 and 3 are ordered, but the process dies before its disk has them
  assert.deepEqual(net.server.headSnapshot().notes, ['a@1: one', 'a@2: two', 'a@3: three']);
  net.drop(conn);
  a.driver.close();
  const restore: ClientRestore = { lastSeq: 1, lastDigest: store.held[0].digest, durable: store.held, reservedSeq: store.reservedSeq };
  assert.equal(restore.reservedSeq, 10);
  // The restarted process: offline at first, it submits; the op gets seq 11, after op 1.
  const b = client('a', clock, { seqBlock: 10, restore, store: new HandStore(true) });
  const h = b.room.ops.note({ text: 'eleven' });
  clock.settle();
  assert.deepEqual(
    b.store.appends.map((w) => w.ops.map((o) => [o.seq, o.after])),
    [[[11, 1]]],
    'persisted with its declared gap',
  );
  assert.deepEqual(
    b.store.reserves.map((r) => r.through),
    [20],
    'a new block, past the old one',
  );
  b.store.confirm();
  const b2 = net.open(b);
  net.flush();
  assert.deepEqual(b.errors, []);
  assert.equal(b.room.connection(), 'ready', 'the server holding seqs 2 and 3 this client lost is no ownership conflict');
  const sent = b.sent.find((m) => m.t === 'ops');
  assert.deepEqual(sent && sent.t === 'ops' ? sent.ops.map((o) => [o.seq, o.after]) : [], [[11, 1]]);
  assert.equal(h.stage, 'visible');
  assert.equal(h.position, 4);
  assert.deepEqual(net.server.headSnapshot().notes, ['a@1: one', 'a@2: two', 'a@3: three', 'a@4: eleven']);
  assert.deepEqual(b.room.getState('submitted'), net.server.headSnapshot(), 'the lost ops came back as authoritative entries');
  // The op after a gap starts a new digest chain on both sides: a client restarted with op 11
  // durable but not known ordered checks the server's chain against its own, and they agree.
  net.drop(b2);
  const c = client('a', clock, {
    restore: { lastSeq: 11, lastDigest: b.store.held[0].digest, durable: b.store.held, reservedSeq: 20 },
    store: new HandStore(true),
    seqBlock: 10,
  });
  net.open(c);
  net.flush();
  assert.equal(c.room.connection(), 'ready');
  assert.deepEqual(c.errors, []);
  assert.deepEqual(c.room.getState('submitted'), net.server.headSnapshot());
  assert.equal(c.room.pending().length, 0);
});

// spec: LOG-ONE-HISTORY
test('a copy of a store restarted past its reservation takes the ops in its gap for its own only if the server proves its last persisted op', () => {
  const clock = new FakeClock();
  const net = new Net(clock);
  const a = client('a', clock);
  net.open(a);
  net.flush();
  a.room.ops.note({ text: 'one' });
  a.room.ops.note({ text: 'two' });
  clock.settle();
  a.store.confirm();
  net.flush();
  // A copy of a's store from before: one op of its own under seq 1, and a reservation past it.
  const copy = client('a', clock, {
    seqBlock: 10,
    restore: { lastSeq: 1, durable: [{ client: 'a', seq: 1, name: 'note', args: { text: 'not one' }, digest: 12345 }], lastDigest: 12345, reservedSeq: 10 },
    store: new HandStore(true),
  });
  const [h] = copy.room.pending();
  let failure: unknown;
  h.visible.catch((e) => {
    failure = e;
  });
  net.open(copy);
  net.flush();
  return Promise.resolve().then(() => {
    assert.ok(failure instanceof HerculesError && failure.code === 'client-id-conflict', String(failure));
    assert.match((failure as Error).message, /past this client's last persisted op 1, and its history there is not this client's/);
    assert.deepEqual(net.server.headSnapshot().notes, ['a@1: one', 'a@2: two']);
  });
});

// spec: DUR-BEFORE-SEND, LOG-ONE-HISTORY
test('a faithful copy of a store, started beside its original, cannot jump past the ops the original said were saved', () => {
  const clock = new FakeClock();
  const net = new Net(clock);
  const store = new HandStore(true);
  const replaced: string[] = [];
  // As connect() does: 'replaced' is not the end, the client reconnects (patiently) and the digests decide.
  const fatal = (code: string) => {
    if (code !== 'replaced') return true;
    replaced.push(code);
    return false;
  };
  const a = client('a', clock, { seqBlock: 10, store, fatal });
  store.confirmReserve(); // reserves 1..10
  const aConn = net.open(a);
  net.flush();
  a.room.ops.note({ text: 'one' });
  clock.settle();
  store.confirm();
  const backup: ClientRestore = { lastSeq: 1, lastDigest: store.held[0].digest, durable: [...store.held], reservedSeq: 10 }; // the copy, taken now
  a.room.ops.note({ text: 'two' });
  clock.settle();
  store.confirm(); // op 2 saved before its log entry comes back: the ack says so
  net.flush();
  const acks = a.sent.filter((m) => m.t === 'ack');
  assert.ok(
    acks.some((m) => m.t === 'ack' && m.durable === 2),
    `an ack told the server ops up to 2 are saved: ${JSON.stringify(acks)}`,
  );
  // The copy restarts past the reservation it shares with the original: its op declares a gap
  // after op 1. Its history up to 1 is the original's, so verification alone cannot tell.
  const copy = client('a', clock, { seqBlock: 10, restore: backup, store: new HandStore(true) });
  const [h] = [copy.room.ops.note({ text: 'from the copy' })];
  clock.settle();
  copy.store.confirmReserve();
  copy.store.confirm();
  let failure: unknown;
  h.visible.catch((e) => {
    failure = e;
  });
  net.open(copy);
  net.flush();
  return Promise.resolve().then(() => {
    assert.ok(failure instanceof HerculesError && failure.code === 'client-id-conflict', String(failure));
    assert.match((failure as Error).message, /said its ops up to 2 were saved on its device: this store is an older copy/);
    assert.deepEqual(net.server.headSnapshot().notes, ['a@1: one', 'a@2: two'], 'nothing of the copy was ordered');
    assert.deepEqual(replaced, ['replaced'], "the copy's connection replaced the original's for a moment");
    // The original, replaced for a moment by the copy's connection, comes back and goes on.
    net.drop(aConn);
    net.open(a);
    a.room.ops.note({ text: 'three' });
    clock.settle();
    store.confirm();
    net.flush();
    assert.deepEqual(net.server.headSnapshot().notes, ['a@1: one', 'a@2: two', 'a@3: three']);
    assert.deepEqual(
      a.errors.map((e) => (e as HerculesError).code),
      [],
      'the original never hit a conflict',
    );
  });
});

// spec: LOG-CLIENT-ORDER
test('a gap declared after ops the server has not ordered is refused: no durable op is skipped', () => {
  const server = new RoomEngine(machine, { ackTimeoutMs: 10_000 });
  const clock = new FakeClock();
  const out: RoomOutput[] = [server.open('c#1', clock.t)];
  out.push(
    server.message('c#1', { t: 'hello', v: PROTOCOL_VERSION, client: 'c', machine: { name: machine.name, version: machine.version }, have: 0 }, clock.t),
  );
  out.push(server.message('c#1', { t: 'ops', ops: [{ seq: 1, name: 'note', args: { text: 'one' } }] }, clock.t));
  out.push(server.message('c#1', { t: 'ops', ops: [{ seq: 9, name: 'note', args: { text: 'nine' }, after: 2 }] }, clock.t));
  const errors = out.flatMap((o) => o.send.map((s) => s.msg)).filter((m) => m.t === 'error');
  assert.equal(errors.length, 1);
  assert.equal(errors[0].t === 'error' && errors[0].code, 'seq-gap');
  assert.deepEqual(server.headSnapshot().notes, ['c@1: one']);
});

// spec: DUR-BEFORE-SEND, LOG-CLIENT-ORDER
test('one write at a time, in seq order: ops of one turn go in one write, later ones wait for it', () => {
  const clock = new FakeClock();
  const a = client('a', clock);
  a.room.ops.note({ text: '1' });
  a.room.ops.note({ text: '2' });
  clock.settle();
  a.room.ops.note({ text: '3' });
  a.room.ops.note({ text: '4' });
  clock.settle();
  assert.deepEqual(
    a.store.appends.map((w) => w.ops.map((o) => o.seq)),
    [[1, 2]],
    'the second turn waits for the write under way',
  );
  a.store.confirm();
  assert.equal(a.room.positions().durable, 2);
  assert.deepEqual(
    a.store.appends.map((w) => w.ops.map((o) => o.seq)),
    [[3, 4]],
  );
  a.store.confirm();
  assert.equal(a.room.positions().durable, 4);
  assert.deepEqual(
    a.store.held.map((o) => o.seq),
    [1, 2, 3, 4],
  );
});

// spec: DUR-BEFORE-SEND
test('a failed write keeps its ops Submitted and unsent, is reported once, and is retried with backoff ahead of later ops', () => {
  const clock = new FakeClock();
  const net = new Net(clock);
  const a = client('a', clock);
  net.open(a);
  net.flush();
  const h1 = a.room.ops.note({ text: 'one' });
  clock.settle();
  a.store.confirm(new Error('ENOSPC: no space left on device'));
  assert.equal(h1.stage, 'submitted');
  assert.deepEqual(a.opsSent(), []);
  assert.equal(a.errors.length, 1);
  const e = a.errors[0] as HerculesError;
  assert.ok(e instanceof HerculesError && e.code === 'storage-failed', String(e));
  assert.match(e.message, /could not persist ops 1\.\.1: ENOSPC.*retrying in 50 ms, then with backoff/);
  const h2 = a.room.ops.note({ text: 'two' });
  clock.advance(49);
  assert.equal(a.store.appends.length, 0, 'no write before the backoff, not even of the newer op');
  clock.advance(1);
  assert.deepEqual(
    a.store.appends.map((w) => w.ops.map((o) => o.seq)),
    [[1, 2]],
    'the failed ops first, the newer one behind them',
  );
  a.store.confirm(new Error('EIO'));
  assert.equal(a.errors.length, 1, 'one report for the run of failures');
  clock.advance(99);
  assert.equal(a.store.appends.length, 0, 'the backoff doubles');
  clock.advance(1);
  a.store.confirm();
  assert.equal(h1.stage, 'durable');
  assert.equal(h2.stage, 'durable');
  assert.deepEqual(a.opsSent(), [1, 2]);
  net.flush();
  assert.deepEqual(net.server.headSnapshot().notes, ['a@1: one', 'a@2: two']);
});

// spec: DUR-BEFORE-SEND
test('on a full disk a failed reservation is retried with backoff, not by each op, and the app hears of the run of failures once', () => {
  const clock = new FakeClock();
  const net = new Net(clock);
  const a = client('a', clock, { seqBlock: 10 });
  net.open(a);
  net.flush();
  const full = new Error('ENOSPC: no space left on device');
  const tries: string[] = [];
  /** The disk is full: every store call under way fails, noted with the time it was made. */
  const failAll = () => {
    for (; a.store.reserves.length > 0; a.store.confirmReserve(full)) tries.push(`reserve@${clock.t}`);
    for (; a.store.appends.length > 0; a.store.confirm(full)) tries.push(`append@${clock.t}`);
  };
  const handles = [];
  for (let t = 0; t < 1000; t++) {
    if (t % 10 === 0) handles.push(a.room.ops.note({ text: `n${t}` }));
    clock.advance(1);
    failAll();
  }
  assert.equal(handles.length, 100);
  assert.deepEqual(
    tries.filter((x) => x.startsWith('reserve')),
    ['reserve@1', 'reserve@51', 'reserve@151', 'reserve@351', 'reserve@751'],
    'the reservation is retried 50, 100, 200, 400 ms after each failure (retry: min 50 ms, doubling)',
  );
  assert.deepEqual(
    tries.filter((x) => x.startsWith('append')),
    ['append@1', 'append@51', 'append@151', 'append@351', 'append@751'],
    'and so is the write',
  );
  assert.equal(a.errors.length, 1, `one report for 100 ops on a full disk: ${a.errors.map((e) => e.message).join(' | ')}`);
  assert.match(a.errors[0].message, /could not reserve seqs through 10: ENOSPC.*retrying in 50 ms, then with backoff/);
  assert.deepEqual(a.opsSent(), [], 'nothing reserved, nothing durable: nothing sent');
  // Space again: the next retries (800 ms on) work, and every op goes, once.
  clock.advance(550);
  assert.deepEqual([a.store.reserves.length, a.store.appends.length], [0, 0]);
  clock.advance(1);
  assert.deepEqual([a.store.reserves.length, a.store.appends.length], [1, 1], 'both retries, at 1551');
  a.store.confirmReserve();
  assert.equal(a.store.confirm().length, 100);
  net.flush();
  assert.ok(
    handles.every((h) => h.stage === 'visible'),
    'every op durable, sent and ordered',
  );
  assert.equal(net.server.headSnapshot().notes.length, 100);
  assert.equal(a.errors.length, 1, 'recovery is not an error: the durable promises say it');
  // A failure after a success starts a new run, which is reported.
  a.room.ops.note({ text: 'later' });
  clock.settle();
  a.store.confirm(new Error('EIO'));
  assert.equal(a.errors.length, 2);
  assert.match(a.errors[1].message, /could not persist ops 101\.\.101: EIO/);
});

// spec: DUR-DELIVERED, LOG-EXACTLY-ONCE
test('after a reconnect the driver resends what the server lacks, and only that', () => {
  const clock = new FakeClock();
  const net = new Net(clock);
  const a = client('a', clock);
  let conn = net.open(a);
  net.flush();
  // Op 1 reaches the server; op 2 is lost with the connection.
  a.room.ops.note({ text: 'one' });
  clock.settle();
  a.store.confirm();
  net.flush();
  a.room.ops.note({ text: 'two' });
  clock.settle();
  a.store.confirm();
  assert.deepEqual(a.opsSent(), [1, 2]);
  net.drop(conn);
  assert.equal(a.room.connection(), 'offline');
  // Offline: op 3 becomes durable and waits.
  const h3 = a.room.ops.note({ text: 'three' });
  clock.settle();
  a.store.confirm();
  assert.equal(h3.stage, 'durable');
  assert.deepEqual(a.opsSent(), [1, 2], 'nothing sent while offline');
  a.sent.length = 0;
  conn = net.open(a);
  net.flush();
  assert.deepEqual(a.opsSent(), [2, 3], 'the welcome said the server has op 1: ops 2 and 3 are resent');
  assert.deepEqual(net.server.headSnapshot().notes, ['a@1: one', 'a@2: two', 'a@3: three']);
  assert.equal(h3.position, 3);
});

// spec: LIVE-CONVERGE
test('batching: a remote op waits for its deadline, and the driver ticks the room at it without other input', () => {
  const clock = new FakeClock();
  const net = new Net(clock);
  const a = client('a', clock, { batching: { intervalMs: 30 } });
  const b = client('b', clock);
  net.open(a);
  net.open(b);
  net.flush();
  clock.advance(100);
  b.room.ops.note({ text: 'from b' });
  clock.settle();
  b.store.confirm();
  net.flush();
  assert.deepEqual(a.room.getState('authoritative').notes, [], 'held until the deadline');
  assert.equal(a.room.nextDeadline(), 130);
  clock.advance(29);
  assert.deepEqual(a.room.getState('authoritative').notes, []);
  clock.advance(1);
  assert.deepEqual(a.room.getState('authoritative').notes, ['b@1: from b'], 'applied at the deadline by the driver');
  assert.equal(a.room.nextDeadline(), Infinity);
});

/**
 * Client a with two ops of its own pending (its store never confirms them) and the frames that
 * bring b's three ops, one op per server turn, caught before a's driver hears them.
 */
function pendingBehindThreeFrames() {
  const clock = new FakeClock();
  const net = new Net(clock);
  const a = client('a', clock);
  const b = client('b', clock);
  net.open(a);
  net.open(b);
  net.flush();
  a.room.ops.note({ text: 'a1' });
  a.room.ops.note({ text: 'a2' });
  clock.settle();
  const caught: ServerMessage[] = [];
  const hear = a.driver.received.bind(a.driver);
  a.driver.received = (msg) => void caught.push(msg);
  for (const text of ['b1', 'b2', 'b3']) {
    b.room.ops.note({ text });
    clock.settle();
    b.store.confirm();
    net.flush();
  }
  a.driver.received = hear;
  assert.ok(caught.filter((m) => m.t === 'log').length >= 3, 'one log frame per op of b');
  return { clock, a, caught, hear };
}

test('frames that arrive in one turn are one step: our pending ops are rebased once for all of them, with the same views', () => {
  const want = ['b@1: b1', 'b@2: b2', 'b@3: b3', 'a@4: a1', 'a@5: a2'];
  // One frame per turn: a rebase per frame that brings remote ops.
  const one = pendingBehindThreeFrames();
  const before1 = one.a.room.engine.stats.rebases;
  for (const m of one.caught) {
    one.hear(m);
    one.clock.settle();
  }
  const perFrame = one.a.room.engine.stats.rebases - before1;
  assert.ok(perFrame >= 3, `a rebase per frame: ${perFrame}`);
  assert.deepEqual(one.a.room.getState('submitted').notes, want);
  // The same frames in one turn (one socket read): they wait for its end, then one step.
  const all = pendingBehindThreeFrames();
  const before = all.a.room.engine.stats.rebases;
  for (const m of all.caught) all.hear(m);
  assert.deepEqual(all.a.room.getState('authoritative').notes, [], 'log frames wait for the end of the turn');
  all.clock.settle();
  assert.equal(all.a.room.engine.stats.rebases - before, 1, 'one rebase for the batch');
  assert.deepEqual(all.a.room.getState('submitted').notes, want, 'the same Submitted view');
  for (const v of ['authoritative', 'visible', 'stable', 'durable'] as const)
    assert.deepEqual(all.a.room.getState(v), one.a.room.getState(v), `the same ${v} view`);
  assert.deepEqual(all.a.room.positions(), one.a.room.positions());
});

test('a frame that is not a log or progress frame goes at once, after the frames waiting, and a close takes those first', () => {
  const { clock, a, caught, hear } = pendingBehindThreeFrames();
  for (const m of caught) hear(m);
  hear({ t: 'error', code: 'rate-limited', message: 'slow down', fatal: false });
  assert.deepEqual(a.room.getState('authoritative').notes, ['b@1: b1', 'b@2: b2', 'b@3: b3'], 'the waiting frames went first, in order');
  assert.ok(
    a.errors.some((e) => /rate-limited/.test(e.message)),
    'then the error, at once',
  );
  const again = pendingBehindThreeFrames();
  for (const m of again.caught) again.hear(m);
  again.a.driver.closed();
  assert.deepEqual(again.a.room.getState('authoritative').notes, ['b@1: b1', 'b@2: b2', 'b@3: b3'], 'frames a connection brought before it closed are taken');
  assert.equal(again.a.room.connection(), 'offline');
  clock.settle();
});

// spec: DUR-SURVIVES-RESTART
test('the base is saved baseEveryMs after Stable moves, one write at a time, and a failed one is reported', () => {
  const clock = new FakeClock();
  const net = new Net(clock);
  const a = client('a', clock, { baseEveryMs: 500 });
  net.open(a);
  net.flush();
  a.room.ops.note({ text: 'one' });
  clock.settle();
  a.store.confirm();
  net.flush();
  clock.advance(10);
  net.flush();
  assert.equal(a.room.positions().stable, 1, 'alone in the room, the op is stable once acked');
  assert.equal(a.store.bases.length, 0, 'not before baseEveryMs');
  clock.advance(500);
  assert.equal(a.store.bases.length, 1);
  assert.deepEqual(a.store.bases[0].base.pos, 1);
  assert.equal(a.store.bases[0].base.ownSeq, 1, 'op 1 is inside it: the store may delete it with the base');
  a.store.bases.shift()!.done(new Error('disk full'));
  assert.match(a.errors.at(-1)!.message, /could not save the base at position 1: disk full/);
  a.room.ops.note({ text: 'two' });
  clock.settle();
  a.store.confirm();
  net.flush();
  clock.advance(10);
  net.flush();
  clock.advance(500);
  assert.equal(a.store.bases.length, 1, 'tried again after the next move of Stable');
  assert.equal(a.store.bases[0].base.pos, 2);
});

// spec: OP-VERDICT-KEPT
test('a rejected op that reaches Stable is saved into a base though no snapshot changed; then the client says so and the server forgets the rejection', () => {
  const clock = new FakeClock();
  const net = new Net(clock);
  const a = client('a', clock, { baseEveryMs: 500 });
  net.open(a);
  net.flush();
  const h = a.room.ops.move({ id: 'nope', x: 0, y: 0 }); // no such item: it throws where ordered
  clock.settle();
  a.store.confirm();
  net.flush();
  clock.advance(10);
  net.flush();
  assert.equal(h.stage, 'rejected');
  assert.equal(a.room.positions().stable, 1, 'alone in the room, the rejected entry is stable once acked');
  assert.deepEqual(
    net.server.clientRecord('a')!.rejected?.map((r) => r.seq),
    [1],
    'acked, but not yet in the store: the server keeps the verdict',
  );
  clock.advance(500);
  assert.equal(a.store.bases.length, 1, 'a base, though Stable kept its snapshot');
  assert.equal(a.store.bases[0].base.ownSeq, 1, 'it holds the rejected op: a restart will not restore it');
  assert.equal(
    a.sent.some((m) => m.t === 'settled'),
    false,
    'nothing said before the store confirms',
  );
  a.store.bases.shift()!.done();
  net.flush();
  assert.deepEqual(
    a.sent.filter((m) => m.t === 'settled'),
    [{ t: 'settled', seq: 1 }],
  );
  assert.equal(net.server.clientRecord('a')!.rejected, undefined, 'forgotten once the store holds it');
  a.room.ops.note({ text: 'fine' });
  clock.settle();
  a.store.confirm();
  net.flush();
  clock.advance(600);
  a.store.bases.shift()?.done();
  net.flush();
  assert.equal(a.sent.filter((m) => m.t === 'settled').length, 1, 'no settled message without a rejection to forget');
});

test('close() finishes the write under way, does not retry one that fails, and leaves no timer behind', async () => {
  const clock = new FakeClock();
  const a = client('a', clock, { batching: { intervalMs: 30 } });
  const h = a.room.ops.note({ text: 'one' });
  const closing = a.driver.close();
  assert.equal(a.store.appends.length, 1, 'close writes what is queued at once');
  a.store.confirm();
  await closing;
  assert.equal(h.stage, 'durable');
  await a.driver.flushed();

  const b = client('b', clock);
  b.room.ops.note({ text: 'one' });
  clock.settle();
  const closingB = b.driver.close();
  b.store.confirm(new Error('EIO'));
  await closingB;
  assert.match(b.errors[0].message, /not retried: the room is closing/);
  clock.advance(10_000);
  assert.equal(b.store.appends.length, 0);
  assert.equal(clock.pending(), 0);
});

// spec: HANDLE-DURABLE-AFTER-FATAL, OP-KEPT-AFTER-FATAL
test('a fatal error read while an op is being written rejects its other promises at once; its durable promise waits for the store', async () => {
  const { clock, a } = onlineWithBlock(10);
  const one = a.room.ops.note({ text: 'one' });
  const two = a.room.ops.note({ text: 'two' });
  clock.settle();
  assert.deepEqual(a.opsSent(), [1, 2], 'both went out ahead of their write');
  assert.equal(a.store.appends.length, 1, 'and their write is under way');
  const seen: string[] = [];
  const watch = (name: string, p: Promise<unknown>) =>
    p.then(
      () => seen.push(`${name} resolved`),
      (e: unknown) => seen.push(`${name} rejected ${(e as HerculesError).code}`),
    );
  for (const [name, h] of [
    ['one', one],
    ['two', two],
  ] as const) {
    watch(`${name}.durable`, h.durable);
    watch(`${name}.authoritative`, h.authoritative);
  }
  // The server refuses the connection for good before the write completes (server.revoke, say).
  a.driver.received({ t: 'error', code: 'revoked', message: 'access revoked', fatal: true });
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(seen.sort(), ['one.authoritative rejected revoked', 'two.authoritative rejected revoked'], 'durable is still open for both');
  a.store.confirm(); // both ops are on the device now
  await new Promise((r) => setImmediate(r));
  assert.equal(one.stage, 'durable');
  assert.equal(two.stage, 'durable');
  assert.deepEqual(seen.sort(), ['one.authoritative rejected revoked', 'one.durable resolved', 'two.authoritative rejected revoked', 'two.durable resolved']);
  // OP-KEPT-AFTER-FATAL: an op submitted after it is kept: in Submitted, then in the store
  // (for the next connect() to send), its server stages failed at once.
  const after = a.room.ops.note({ text: 'after' });
  await assert.rejects(after.authoritative, (e: unknown) => e instanceof HerculesError && e.code === 'revoked' && /kept on this device/.test(e.message));
  assert.deepEqual((a.room.getState('submitted') as { notes: string[] }).notes.slice(-1), ['a@3: after']);
  clock.settle();
  assert.deepEqual(
    a.store.confirm().map((o) => o.seq),
    [3],
    'written to the store like any op',
  );
  assert.equal(await after.durable, after, 'durable once the store has it');
});

// spec: HANDLE-DURABLE-AFTER-FATAL
test('an op its store never confirmed has its durable promise rejected when the room closes, after a fatal error or not', async () => {
  for (const fatal of [true, false]) {
    const { clock, a } = onlineWithBlock(10);
    const h = a.room.ops.note({ text: 'never stored' });
    clock.settle();
    if (fatal) a.driver.received({ t: 'error', code: 'revoked', message: 'access revoked', fatal: true });
    const durable: { now: unknown } = { now: 'pending' };
    h.durable.then(
      () => {
        durable.now = 'resolved';
      },
      (e: unknown) => {
        durable.now = e;
      },
    );
    const closing = a.driver.close();
    a.store.confirm(new Error('disk full')); // the last write fails; a closing driver does not retry it
    await closing;
    await new Promise((r) => setImmediate(r));
    assert.equal(durable.now, 'pending', `${fatal ? 'after a fatal error' : 'in a plain close'}: the driver's close alone settles nothing`);
    a.room.close();
    await new Promise((r) => setImmediate(r));
    const after: unknown = durable.now;
    assert.ok(after instanceof HerculesError && after.code === 'closed', String(after));
    assert.match(after.message, /closed before this device's store confirmed op 1 \(note\); it is not durable here/);
    await assert.rejects(h.authoritative, (e: unknown) => e instanceof HerculesError && e.code === (fatal ? 'revoked' : 'closed'));
  }
});
