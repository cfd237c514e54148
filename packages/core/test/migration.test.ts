/**
 * Machine versions in the pure core (docs/migrations.md): the migrateFrom chain, op translation,
 * and a room engine restored from a store of an older version, which migrates once.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  HerculesError,
  MIGRATE_OP,
  RoomEngine,
  SYSTEM_CLIENT,
  applyOp,
  defineMachine,
  machineVersions,
  translateOp,
  type LogEntry,
  type RoomDurableState,
  type RoomOutput,
} from '../src/index.ts';

// spec: REC-MIGRATE-ONCE

const v1 = defineMachine({
  name: 'count',
  version: 1,
  initial: { n: 0 },
  ops: {
    add(s, by: number) {
      s.n += by;
    },
    reset(s) {
      s.n = 0;
    },
  },
});
const v2 = defineMachine({
  name: 'count',
  version: 2,
  initial: { total: 0 },
  ops: {
    add(s, a: { by: number }) {
      s.total += a.by;
    },
  },
  migrateFrom: {
    machine: v1,
    state: (s) => ({ total: s.n }),
    op: (op) => (op.name === 'add' ? { name: 'add', args: { by: op.args } } : { refuse: 'reset is gone' }),
  },
});
const v3 = defineMachine({
  name: 'count',
  version: 3,
  initial: { total: 0, ops: 0 },
  ops: {
    add(s, a: { by: number }) {
      s.total += a.by;
      s.ops++;
    },
  },
  migrateFrom: { machine: v2, state: (s) => ({ total: s.total, ops: 0 }) },
});

const entry = (pos: number, seq: number, name: string, args: unknown): LogEntry => ({ pos, client: 'a', seq, name, args, author: 'a' });
const hello = (e: RoomEngine<any>, conn: string, version: number, now = 0) =>
  e.message(conn, { t: 'hello', v: 2, client: conn, machine: { name: 'count', version }, have: 0 }, now);

test('defineMachine checks migrateFrom: same name, lower version, functions', () => {
  const bad = (migrateFrom: unknown) =>
    assert.throws(
      () => defineMachine({ name: 'count', version: 2, initial: {}, ops: {}, migrateFrom: migrateFrom as never }),
      (e: unknown) => e instanceof HerculesError && e.code === 'bad-machine',
    );
  bad({ machine: {}, state: (s: unknown) => s });
  bad({ machine: v2, state: (s: unknown) => s }); // not lower
  bad({ machine: defineMachine({ name: 'other', version: 1, initial: {}, ops: {} }), state: (s: unknown) => s });
  bad({ machine: v1 }); // no state function
  bad({ machine: v1, state: (s: unknown) => s, op: 'x' });
  assert.deepEqual(
    machineVersions(v3).map((m) => m.version),
    [3, 2, 1],
  );
});

test('translateOp walks the chain; a refusal or a throw refuses with its reason', () => {
  assert.deepEqual(translateOp(v3, 1, 'add', 5), { name: 'add', args: { by: 5 } });
  assert.deepEqual(translateOp(v3, 1, 'reset', undefined), { refuse: 'reset is gone' });
  assert.deepEqual(translateOp(v3, 3, 'add', { by: 1 }), { name: 'add', args: { by: 1 } });
  assert.match((translateOp(v3, 0, 'add', 1) as { refuse: string }).refuse, /cannot translate from/);
  const throwing = defineMachine({
    name: 'count',
    version: 2,
    initial: {},
    ops: {},
    migrateFrom: {
      machine: v1,
      state: () => ({}),
      op: () => {
        throw new Error('nope');
      },
    },
  });
  assert.match((translateOp(throwing, 1, 'add', 1) as { refuse: string }).refuse, /failed: nope/);
  // applyOp translates an op tagged with an older version, and refuses with the reason.
  assert.deepEqual(applyOp(v2, { total: 1 }, { client: 'a', seq: 1, name: 'add', args: 2, author: 'a', v: 1 }, 1).state, { total: 3 });
  assert.equal(applyOp(v2, { total: 1 }, { client: 'a', seq: 1, name: 'reset', args: null, author: 'a', v: 1 }, 1).error, 'reset is gone');
});

/** Apply an engine output to a stored room, as a store would. */
function store(d: RoomDurableState, o: RoomOutput): RoomDurableState {
  const suffix = [...d.suffix, ...o.persist.appended];
  const cp = o.persist.checkpoint ?? d.checkpoint;
  return {
    ...d,
    checkpoint: cp,
    suffix: suffix.filter((e) => e.pos > cp.pos),
    clients: { ...d.clients, ...o.persist.clients },
    stable: Math.max(d.stable, cp.pos),
  };
}

test('a room stored under v1 migrates on load with one entry stored with its record, and a reload does not migrate again', () => {
  const stored: RoomDurableState = {
    checkpoint: { pos: 1, state: { n: 1 } },
    suffix: [entry(2, 2, 'add', 2), entry(3, 3, 'reset', null), entry(4, 4, 'add', 4)],
    clients: { a: { highWater: 4, visibleSeq: 1 } },
    stable: 1,
    version: 1,
  };
  const e = new RoomEngine(v3, {}, stored);
  assert.deepEqual(e.headSnapshot(), { total: 4, ops: 0 });
  assert.equal(e.head(), 5);
  const out = e.open('c1', 0);
  assert.equal(out.sendFirst, false, 'the migration is stored before anything is sent');
  assert.deepEqual(out.persist.appended, [{ pos: 5, client: SYSTEM_CLIENT, seq: 3, name: MIGRATE_OP, args: { from: 1, to: 3 }, author: SYSTEM_CLIENT }]);
  assert.deepEqual(out.persist.clients[SYSTEM_CLIENT], { highWater: 3, visibleSeq: 3 });
  assert.equal(out.persist.clients.a?.visibleSeq, 4, 'ops folded into the checkpoint are visible');
  assert.deepEqual(out.persist.checkpoint, { pos: 5, state: { total: 4, ops: 0 } });
  // A v3 client's welcome carries the migrated checkpoint, never v1 state or entries.
  const w = hello(e, 'c1', 3).send.find((m) => m.msg.t === 'welcome')!.msg;
  assert.ok(w.t === 'welcome');
  assert.deepEqual(w.checkpoint, { pos: 5, state: { total: 4, ops: 0 } });
  assert.deepEqual(w.entries, []);

  const again = new RoomEngine(v3, {}, store(stored, out));
  assert.deepEqual(again.headSnapshot(), { total: 4, ops: 0 });
  const out2 = again.open('c2', 0);
  assert.deepEqual(out2.persist.appended, [], 'no second migration');
  assert.equal(again.head(), 5);
});

test('a store that kept its checkpoint from before the migration is read across it, with each version its ops', () => {
  // As a lazily checkpointing store may hold it: v1 checkpoint, v1 ops, the migration, v2 ops.
  const stored: RoomDurableState = {
    checkpoint: { pos: 0, state: { n: 0 } },
    suffix: [
      entry(1, 1, 'add', 5),
      { pos: 2, client: SYSTEM_CLIENT, seq: 2, name: MIGRATE_OP, args: { from: 1, to: 2 }, author: SYSTEM_CLIENT },
      entry(3, 2, 'add', { by: 1 }),
    ],
    clients: { a: { highWater: 2, visibleSeq: 2 }, [SYSTEM_CLIENT]: { highWater: 2, visibleSeq: 2 } },
    stable: 0,
    version: 1,
  };
  const e = new RoomEngine(v2, {}, stored);
  assert.deepEqual(e.headSnapshot(), { total: 6 });
  assert.equal(e.head(), 3);
  assert.deepEqual(e.open('c', 0).persist.appended, [], 'already migrated: the record says so');
  // A server whose newest is older than the room's version refuses it.
  assert.throws(
    () => new RoomEngine(v1, {}, stored),
    (x: unknown) => x instanceof HerculesError && x.code === 'server-too-old',
  );
});

test('a hello of an older version gets client-too-old, of a newer server-too-old; the reserved id is refused; tagged ops are translated where ordered', () => {
  const e = new RoomEngine(v2);
  e.open('old', 0);
  const o1 = hello(e, 'old', 1);
  assert.deepEqual(
    o1.send.map((s) => s.msg.t === 'error' && [s.msg.code, s.msg.fatal]),
    [['client-too-old', true]],
  );
  e.open('new', 0);
  assert.deepEqual(
    hello(e, 'new', 3).send.map((s) => s.msg.t === 'error' && s.msg.code),
    ['server-too-old'],
  );
  e.open('sys', 0);
  assert.deepEqual(
    e
      .message('sys', { t: 'hello', v: 2, client: SYSTEM_CLIENT, machine: { name: 'count', version: 2 }, have: 0 }, 0)
      .send.map((s) => s.msg.t === 'error' && s.msg.code),
    ['forbidden'],
  );
  e.open('a', 0);
  hello(e, 'a', 2);
  const out = e.message(
    'a',
    {
      t: 'ops',
      ops: [
        { seq: 1, name: 'add', args: 2, v: 1 },
        { seq: 2, name: 'reset', args: null, v: 1 },
        { seq: 3, name: 'add', args: { by: 1 } },
      ],
    },
    1,
  );
  assert.deepEqual(
    out.persist.appended.map((x) => [x.name, x.args, x.error ?? null, x.refused ?? false]),
    [
      ['add', { by: 2 }, null, false],
      ['reset', null, 'reset is gone', true],
      ['add', { by: 1 }, null, false],
    ],
  );
  assert.deepEqual(e.headSnapshot(), { total: 3 });
  // A retransmission of the translated op is a duplicate, not a conflict.
  const dup = e.message('a', { t: 'ops', ops: [{ seq: 1, name: 'add', args: 2, v: 1 }] }, 2);
  assert.deepEqual(dup.persist.appended, []);
  assert.ok(!dup.send.some((s) => s.msg.t === 'error'));
});
