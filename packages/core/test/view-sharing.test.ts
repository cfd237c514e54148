/**
 * How often a client runs each op (issue 43, docs/benchmarks.md "A big keyedMap beside Yjs"):
 * Visible and Stable are prefixes of Authoritative, so they should take the Authoritative
 * snapshots the client already computed, not run the ops again. In bench:keys (4 writers, each
 * submitting an op a turn, every client taking what it was sent each turn) a client ran its own
 * op on Submitted, the turn's 4 ops on Authoritative, and then the ops before its own a second
 * time for Visible (which stops before our op until every other member holds it). Now
 * Authoritative runs the ops before our op in a draft of their own, and Visible's move is a
 * lookup. The wiring is the bench's: RoomEngine, ClientRoom and ClientDriver in memory.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClientDriver, ClientRoom, RoomEngine, defineMachine, keyedMap, type RoomOutput, type ServerMessage } from '../src/index.ts';

function benchClock() {
  const deferred: (() => void)[] = [];
  let timers: { at: number; fn: () => void }[] = [];
  let t = 0;
  return {
    now: () => t,
    after: (ms: number, fn: () => void) => {
      const timer = { at: t + ms, fn };
      timers.push(timer);
      return () => void (timers = timers.filter((x) => x !== timer));
    },
    defer: (fn: () => void) => void deferred.push(fn),
    settle: () => {
      while (deferred.length) deferred.shift()!();
    },
    tick: () => {
      t += 1;
      const due = timers.filter((x) => x.at <= t);
      timers = timers.filter((x) => x.at > t);
      for (const x of due) x.fn();
    },
  };
}

test('a client runs each op once on Authoritative and its own once more on Submitted: Visible and Stable reuse those snapshots', () => {
  let runs = 0;
  const m = defineMachine({
    name: 'kv',
    version: 1,
    initial: { cells: keyedMap.empty<number>() },
    ops: {
      set(s, a: { key: string; value: number }) {
        runs++;
        keyedMap.set(s.cells, a.key, a.value);
      },
    },
  });
  const clock = benchClock();
  const server = new RoomEngine(m, { ackTimeoutMs: 1e9 });
  const inbox: ServerMessage[][] = [];
  const rooms: ClientRoom<typeof m>[] = [];
  const drivers: ClientDriver<typeof m>[] = [];
  const deliver = (out: RoomOutput) => {
    for (const { conn, msg } of out.send) inbox[Number(conn)].push(msg);
  };
  const W = 4;
  for (let w = 0; w < W; w++) {
    inbox.push([]);
    const room = new ClientRoom(m, { clientId: `w${w}`, now: clock.now, notify: 'sync', undo: false });
    const driver = new ClientDriver(room, { store: { append: (_ops, done) => done(), saveBase: (_b, done) => done() }, clock });
    deliver(server.open(String(w), 0));
    driver.opened({ send: (msg) => deliver(server.message(String(w), structuredClone(msg), 0)) });
    rooms.push(room);
    drivers.push(driver);
  }
  const turn = (t: number) => {
    for (let w = 0; w < W; w++) rooms[w].submit('set', { key: `k${(t * 7 + w) % 50}`, value: t });
    clock.settle();
    for (let w = 0; w < W; w++) {
      const frames = inbox[w];
      inbox[w] = [];
      for (const f of frames) drivers[w].received(f);
      clock.settle();
    }
    clock.tick();
  };
  for (let t = 0; t < 10; t++) turn(t);
  runs = 0;
  const turns = 40;
  for (let t = 10; t < 10 + turns; t++) turn(t);
  // The server runs each op once (4 a turn), each client its own op on Submitted (4) and the
  // turn's 4 ops on Authoritative (16): 24. Visible's second runs made it 32.
  assert.equal(runs / turns, 24, 'op runs per turn: server 4, each client 1 on Submitted and 4 on Authoritative');
  for (const r of rooms) {
    assert.ok(r.positions().authoritative >= (10 + turns - 2) * W, 'the ops were delivered');
    assert.deepEqual(keyedMap.toObject(r.getState('authoritative').cells), keyedMap.toObject(rooms[0].getState('authoritative').cells));
  }
});
