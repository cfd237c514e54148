/**
 * The client driver on a fake clock and a hand-driven store, against a real RoomEngine: what
 * it writes, when it reports ops durable, what it sends, and when.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ClientDriver,
  ClientRoom,
  HerculesError,
  RoomEngine,
  type BaseSnapshot,
  type Batching,
  type ClientMessage,
  type DriverStore,
  type OpRecord,
  type RoomOutput,
} from '../src/index.ts';
import { FakeClock } from '@hercules/test-utils';
import { room as machine } from './fixtures.ts';

/** A store whose writes finish only when the test says, successfully or not. */
class HandStore implements DriverStore {
  appends: { ops: OpRecord[]; done: (e?: unknown) => void }[] = [];
  bases: { base: BaseSnapshot; done: (e?: unknown) => void }[] = [];
  held: OpRecord[] = [];
  append(ops: readonly OpRecord[], done: (e?: unknown) => void): void {
    this.appends.push({
      ops: [...ops],
      done: (e) => {
        if (e === undefined) this.held.push(...ops);
        done(e);
      },
    });
  }
  saveBase(base: BaseSnapshot, done: (e?: unknown) => void): void {
    this.bases.push({ base, done });
  }
  /** Confirm the oldest write not yet finished. */
  confirm(error?: unknown): OpRecord[] {
    const w = this.appends.shift();
    assert.ok(w, 'a write is under way');
    w.done(error);
    return w.ops;
  }
}

/** A client (room + driver) with its own clock and store, and the frames it sent per connection. */
function client(id: string, clock: FakeClock, opts: { batching?: Batching; baseEveryMs?: number } = {}) {
  const store = new HandStore();
  const errors: Error[] = [];
  const room = new ClientRoom(machine, { clientId: id, now: clock.now, batching: opts.batching, notify: 'sync' });
  const driver = new ClientDriver(room, { store, clock, baseEveryMs: opts.baseEveryMs, report: (e) => errors.push(e) });
  const sent: ClientMessage[] = [];
  const opsSent = () => sent.flatMap((m) => (m.t === 'ops' ? m.ops.map((o) => o.seq) : []));
  return { room, driver, store, errors, sent, opsSent };
}
type Client = ReturnType<typeof client>;

/** A RoomEngine and connections between it and clients; frames travel when `flush()` says. */
class Net {
  readonly server = new RoomEngine(machine, { ackTimeoutMs: 10_000 });
  private conns = new Map<string, Client>();
  private n = 0;
  private up: { conn: string; msg: ClientMessage }[] = [];
  constructor(readonly clock: FakeClock) {}
  open(c: Client): string {
    const conn = `${c.room.clientId}#${++this.n}`;
    this.conns.set(conn, c);
    this.out(this.server.open(conn, this.clock.t));
    c.driver.opened({
      send: (msg) => {
        c.sent.push(msg);
        if (this.conns.get(conn) === c) this.up.push({ conn, msg: structuredClone(msg) });
      },
    });
    return conn;
  }
  /** Break the connection: what is in flight on it is lost. */
  drop(conn: string): void {
    const c = this.conns.get(conn);
    if (!c) return;
    this.conns.delete(conn);
    this.up = this.up.filter((f) => f.conn !== conn);
    c.driver.closed();
    this.out(this.server.close(conn, this.clock.t));
  }
  /** Deliver everything in flight, both ways, until quiet. */
  flush(): void {
    for (let i = 0; i < 100; i++) {
      this.clock.settle();
      const f = this.up.shift();
      if (!f) return;
      this.out(this.server.message(f.conn, f.msg, this.clock.t));
    }
  }
  private out(o: RoomOutput): void {
    for (const { conn, msg } of o.send) this.conns.get(conn)?.driver.received(structuredClone(msg));
  }
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
test('a failed write keeps its ops Submitted and unsent, is reported, and is retried with backoff ahead of later ops', () => {
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
  assert.match(e.message, /could not persist ops 1\.\.1: ENOSPC.*retrying in 50 ms/);
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
  assert.match(a.errors[1].message, /retrying in 100 ms/, 'the backoff doubles');
  clock.advance(100);
  a.store.confirm();
  assert.equal(h1.stage, 'durable');
  assert.equal(h2.stage, 'durable');
  assert.deepEqual(a.opsSent(), [1, 2]);
  net.flush();
  assert.deepEqual(net.server.headSnapshot().notes, ['a@1: one', 'a@2: two']);
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
