/**
 * Character ids across a crash (docs/spec.md, TEXT-ID-ONCE): a client process restarted from a
 * store that lacks inserts its earlier process sent (under reserved seqs, before its write
 * finished) must not give its own inserts their ids, or an op anchored on its own character
 * lands on the other one. The clients run the real driver on a hand-driven store (driver-net.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '@hercules/test-utils';
import {
  applyOp,
  ClientRoom,
  compactText,
  createText,
  defineMachine,
  insertArgs,
  textClockFloor,
  textOps,
  textToString,
  TEXT_CLOCKS_PER_SEQ,
  PROTOCOL_VERSION,
  type ClientRestore,
  type OpHandle,
  type OpRecord,
  type Text,
  type TextInsertArgs,
} from '../src/index.ts';
import { HandStore, Net, driverClient } from './driver-net.ts';

const notes = defineMachine({
  name: 'text-restart',
  version: 1,
  initial: { doc: createText(''), title: '' },
  ops: {
    ...textOps(),
    title(s, a: { t: string }) {
      s.title = String(a.t);
    },
  },
});

const ids = (t: Text) => compactText(t).chunks.flatMap((c) => c.runs.map((r) => [r[1], r[2]]));

// spec: TEXT-ID-ONCE
test('a client restarted after a crash takes clocks past every one its earlier process may have sent: what it typed, and what it typed after that, lands where it typed it', () => {
  const clock = new FakeClock();
  const net = new Net(clock, notes);
  const store = new HandStore(true);
  const a = driverClient(notes, 'a', clock, { seqBlock: 10, store });
  store.confirmReserve(); // seqs 1..10
  const conn = net.open(a);
  net.flush();
  a.room.text('doc').insert(0, 'abc');
  clock.settle();
  net.flush(); // sent under the reservation and ordered; the process dies before its disk has it
  assert.deepEqual(store.held, [], 'the insert never reached the store');
  assert.equal(textToString(net.server.headSnapshot().doc), 'abc');
  net.drop(conn);

  const restore: ClientRestore = { lastSeq: 0, durable: store.held, reservedSeq: store.reservedSeq };
  const b = driverClient(notes, 'a', clock, { seqBlock: 10, restore, store: new HandStore(true) });
  assert.equal(b.room.textClockFloor(), textClockFloor(10), 'seqs up to 10 may be on the server: clocks start past theirs');
  // Offline, on a view without "abc": "xyz", then "!" after its own "z".
  const text = b.room.text('doc');
  const typed = [text.insert(0, 'xyz')!, text.insert(3, '!')!];
  assert.equal(text.toString(), 'xyz!');
  clock.settle();
  b.store.confirm();
  net.open(b);
  net.flush();
  assert.deepEqual(
    typed.map((h) => [h.stage, h.error]),
    [
      ['visible', undefined],
      ['visible', undefined],
    ],
    'neither is rejected (without the floor, "xyz" took the clocks of "abc" and was refused)',
  );
  const doc = net.server.headSnapshot().doc;
  // Without the floor, "!" named "z" by the id the server gives "c": "abc!", and "xyz" is lost.
  assert.equal(textToString(doc), 'abcxyz!');
  assert.deepEqual(ids(doc), [
    [0, 'abc'],
    [textClockFloor(10), 'xyz!'],
  ]);
  assert.deepEqual(b.room.getState('submitted'), net.server.headSnapshot());
  assert.equal(b.room.textClockFloor(), textClockFloor(10) + 4, 'and past what it typed since');
});

// spec: TEXT-ID-ONCE
test("a client restarted with an insert its store holds but its view cannot run yet (its anchor is another client's character, and it has no base) takes clocks past that insert", () => {
  const clock = new FakeClock();
  const net = new Net(clock, notes);
  const b = driverClient(notes, 'b', clock);
  const a = driverClient(notes, 'a', clock);
  net.open(b);
  const conn = net.open(a);
  net.flush();
  b.room.text('doc').insert(0, 'B');
  clock.settle();
  b.store.confirm();
  net.flush();
  a.room.text('doc').insert(1, 'x'); // after b's "B"
  clock.settle();
  a.store.confirm(); // durable, then sent and ordered; no base is saved before the crash
  net.flush();
  assert.equal(textToString(net.server.headSnapshot().doc), 'Bx');
  net.drop(conn);

  const a2 = driverClient(notes, 'a', clock, { restore: { lastSeq: 1, durable: a.store.held } });
  const text = a2.room.text('doc');
  assert.equal(text.toString(), '', 'offline, without "B", its insert of "x" fails in its view');
  assert.equal(a2.room.textClockFloor(), 1, 'past the clock of the insert it holds');
  const typed = [text.insert(0, 'y')!, text.insert(1, '!')!];
  clock.settle();
  a2.store.confirm();
  net.open(a2);
  net.flush();
  assert.deepEqual(
    typed.map((h) => h.error),
    [undefined, undefined],
  );
  // Without the floor, "y" took clock 0 again and was refused, and "!" went after "x".
  assert.equal(textToString(net.server.headSnapshot().doc), 'Bxy!');
  assert.deepEqual(a2.room.getState('submitted'), net.server.headSnapshot());
  assert.equal(a2.room.textClockFloor(), 3, 'and past what it typed since');
});

/** A title op of client `a` with seq `seq`, as a store holds it. */
const held = (seq: number, after?: number): OpRecord => ({ client: 'a', seq, name: 'title', args: { t: `#${seq}` }, ...(after ? { after } : {}) });

// spec: TEXT-ID-ONCE
test('the floor: past the highest seq of ours the store lacks (a reserved one, or one in an earlier gap) and past the inserts it holds; 0 for a new client', () => {
  const floor = (restore: ClientRestore) => new ClientRoom(notes, { clientId: 'a', now: () => 0, restore }).textClockFloor();
  assert.equal(floor({ lastSeq: 3, durable: [held(1), held(2), held(3)], reservedSeq: 3 }), 0, 'a clean close gives the rest of its block back');
  assert.equal(floor({ lastSeq: 3, durable: [held(3)], base: { pos: 2, state: notes.initial, ownSeq: 2 } }), 0, 'ops up to 2 are in the base');
  assert.equal(floor({ lastSeq: 3, durable: [held(1), held(2), held(3)], reservedSeq: 20 }), textClockFloor(20), 'a crash: seqs 4..20 reserved');
  // The crash before left a gap (2..10), whose ops came back from the server after this store's
  // base was saved: this process does not hold them either.
  assert.equal(
    floor({ lastSeq: 12, durable: [held(11, 1), held(12)], reservedSeq: 12, base: { pos: 1, state: notes.initial, ownSeq: 1 } }),
    textClockFloor(10),
  );
  assert.equal(floor({ lastSeq: 0, durable: [] }), 0, 'a new client');
  const insert: OpRecord = { client: 'a', seq: 4, name: 'textInsert', args: { p: 'doc', l: null, r: null, k: 7, t: 'abc' } };
  assert.equal(floor({ lastSeq: 4, durable: [held(3), insert], base: { pos: 2, state: notes.initial, ownSeq: 2 } }), 10, 'past the inserts it holds');
});

// spec: TEXT-ID-ONCE
test('an insert below the floor is refused at submit; the text handle and insertArgs with the floor take clocks above it', () => {
  const room = new ClientRoom(notes, { clientId: 'a', now: () => 0, restore: { lastSeq: 0, durable: [], reservedSeq: 5 } });
  const f = room.textClockFloor();
  assert.equal(f, 6 * TEXT_CLOCKS_PER_SEQ);
  const doc = room.getState('submitted').doc;
  assert.throws(() => room.submit('textInsert', insertArgs(doc, 'doc', 'a', 0, 'x')), { code: 'bad-argument', message: /clock 0 is below/ });
  assert.equal(room.pending().length, 0, 'nothing submitted');
  room.submit('textInsert', insertArgs(doc, 'doc', 'a', 0, 'x', f));
  room.text('doc').insert(1, 'y');
  assert.deepEqual(ids(room.getState('submitted').doc), [[f, 'xy']]);
});

// spec: TEXT-ID-ONCE
test('the op with seq s takes clocks below (s + 1) * TEXT_CLOCKS_PER_SEQ: the bound every floor rests on, on every replica', () => {
  const at = (seq: number, k: number) =>
    applyOp(notes, notes.initial, { client: 'a', seq, author: 'a', name: 'textInsert', args: { p: 'doc', l: null, r: null, k, t: 'xy' } }, 1).error;
  assert.equal(at(1, 2 * TEXT_CLOCKS_PER_SEQ - 2), undefined);
  assert.match(at(1, 2 * TEXT_CLOCKS_PER_SEQ - 1) ?? '', /past those of op seq 1/);
});

// spec: TEXT-ID-ONCE
test("no crash of ours: an insert anchored on another client's tentative character, which a server that crashed before its commit lost, leaves our views after its welcome; the next insert still takes clocks past it", () => {
  const room = new ClientRoom(notes, { clientId: 'a', now: () => 0, notify: 'sync' });
  const welcome = { t: 'welcome' as const, v: PROTOCOL_VERSION, client: 'a', author: 'a', highWater: 0, visibleSeq: 0, rejected: [], members: ['a', 'x'] };
  const xs: OpRecord & { pos: number; author: string } = {
    pos: 1,
    client: 'x',
    seq: 1,
    author: 'x',
    name: 'textInsert',
    args: { p: 'doc', l: null, r: null, k: 0, t: 'X' },
  };
  room.connected();
  room.receive({ ...welcome, from: 1, entries: [], stable: 0 });
  // x's "X", sent ahead of its commit (LOG-TENTATIVE); "ab" is typed after it.
  room.receive({ t: 'log', from: 1, entries: [{ k: 'op', e: xs }], tentative: true });
  const ab = room.text('doc').insert(1, 'ab')!;
  assert.equal(room.text('doc').toString(), 'Xab');
  // The server crashes before it stores "X"; the next one welcomes us with an empty log.
  room.disconnected();
  room.connected();
  room.receive({ ...welcome, from: 1, entries: [], stable: 0 });
  assert.equal(room.text('doc').toString(), '', '"ab" fails in our views without "X"');
  const c = room.text('doc').insert(0, 'c')!;
  /** The op as this client submitted it (and sends it). */
  const sent = (h: OpHandle) => room.engine.pending().find((o) => o.seq === h.seq)!;
  assert.equal((sent(c).args as TextInsertArgs).k, 2, 'past "ab" (taken from the view alone, it was 0: "ab"\'s first clock)');
  assert.equal(room.textClockFloor(), 3);
  // x sends "X" again; the server orders it, then "ab", then "c": none is refused.
  let s = notes.initial;
  const order = [xs, ...[ab, c].map((h) => ({ client: 'a', seq: h.seq, author: 'a', name: 'textInsert', args: sent(h).args }))];
  for (const [i, op] of order.entries()) {
    const r = applyOp(notes, s, op, i + 1);
    assert.equal(r.error, undefined, `${op.client}:${op.seq}`);
    s = r.state;
  }
  assert.equal(textToString(s.doc), 'Xabc', 'every character once, under its own id');
});
