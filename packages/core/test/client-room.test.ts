import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ClientRoom,
  FRAME_BUDGET_BYTES,
  MAX_OP_BYTES,
  OpRejectedError,
  PROTOCOL_VERSION,
  VIEWS,
  ViewEngine,
  defineMachine,
  type ClientMessage,
  type ViewName,
} from '../src/index.ts';
import { Loopback } from './harness.ts';
import { room } from './fixtures.ts';

// spec: VIEW-SUBMIT-NOW, HANDLE-STAGES, VIS-DELIVERED
test('an op walks submitted -> durable -> authoritative -> visible, with a time per stage', async () => {
  const net = new Loopback(room);
  const a = net.client('a');
  net.client('b');
  net.connect('a');
  net.connect('b');
  await net.settle();
  net.now = 100;
  const h = a.ops.add({ id: 'chair', x: 1, y: 2 });
  assert.equal(h.stage, 'submitted');
  assert.equal(h.id, 'a:1');
  assert.deepEqual(a.getState('submitted').items.chair, { x: 1, y: 2 });
  assert.equal(a.getState('durable').items.chair, undefined, 'not durable yet');
  await new Promise((r) => setImmediate(r)); // storage confirms
  assert.equal(h.stage, 'durable');
  assert.deepEqual(a.getState('durable').items.chair, { x: 1, y: 2 });
  net.now = 130;
  net.up(); // server orders it
  net.down('a'); // Notify-Auth reaches a
  assert.equal(h.stage, 'authoritative');
  assert.equal(h.position, 1);
  assert.deepEqual(a.getState('authoritative').items.chair, { x: 1, y: 2 });
  assert.equal(a.getState('visible').items.chair, undefined, 'b has not acked');
  net.down('b');
  net.now = 170;
  net.up(); // b's ack
  net.down('a'); // Notify-Visible
  assert.equal(h.stage, 'visible');
  assert.deepEqual(a.getState('visible').items.chair, { x: 1, y: 2 });
  assert.equal(await h.visible, h);
  // b's ack makes it visible and, both members having it, stable.
  assert.equal(await h.stable, h);
  assert.deepEqual(h.times, { submitted: 100, durable: 100, authoritative: 130, visible: 170, stable: 170 });
  assert.deepEqual(h.delays, { durable: 0, authoritative: 30, visible: 70, stable: 70 });
  await net.settle();
  for (const v of VIEWS) assert.deepEqual(a.getState(v).items.chair, { x: 1, y: 2 }, v);
});

// spec: OP-VERDICT, HANDLE-STAGES
test('a rejected op leaves every view and its promises reject with the reason', async () => {
  const net = new Loopback(room);
  const a = net.client('a');
  const b = net.client('b');
  net.connect('a');
  net.connect('b');
  await net.settle();
  a.ops.add({ id: 'x', x: 0, y: 0 });
  await net.settle();
  // Both move concurrently; b deletes... here: b adds 'y', a adds 'y' too: the second add throws.
  const hb = b.ops.add({ id: 'y', x: 1, y: 1 });
  await new Promise((r) => setImmediate(r));
  net.up(); // b's add is ordered first
  const ha = a.ops.add({ id: 'y', x: 9, y: 9 });
  assert.deepEqual(a.getState('submitted').items.y, { x: 9, y: 9 }, 'speculatively applied');
  await net.settle();
  assert.equal(hb.stage, 'visible');
  assert.equal(ha.stage, 'rejected');
  assert.equal(ha.error, 'item y exists');
  await assert.rejects(
    ha.authoritative,
    (e: unknown) => e instanceof OpRejectedError && !e.refused && /a:2 was rejected: item y exists/.test((e as Error).message),
  );
  assert.equal(ha.refused, false, 'it threw at its place in the order: rejected, not refused');
  await assert.rejects(ha.visible, OpRejectedError);
  assert.equal(await ha.durable, ha);
  for (const v of VIEWS) assert.deepEqual(a.getState(v).items.y, { x: 1, y: 1 }, `${v} shows b's item`);
});

// spec: VIEW-NOTIFY, VIEW-SHARED
test('subscribe calls back once per batch with the current snapshot, and views share identity when quiet', async () => {
  const net = new Loopback(room);
  const a = net.client('a');
  const b = net.client('b', { autoDurable: false });
  net.connect('a');
  net.connect('b');
  await net.settle();
  const calls: Record<ViewName, unknown[]> = { submitted: [], durable: [], authoritative: [], visible: [], stable: [] };
  for (const v of VIEWS) a.subscribe(v, (s) => calls[v].push(s));
  // One frame from the server carrying three remote ops is one batch: one call per view.
  b.ops.add({ id: 'p', x: 0, y: 0 });
  b.ops.add({ id: 'q', x: 0, y: 0 });
  b.ops.add({ id: 'r', x: 0, y: 0 });
  b.durable(3); // one group commit -> one Deliver-Operation frame -> one Remote-Operation frame
  net.up();
  const before = calls.authoritative.length;
  net.down('a');
  assert.equal(calls.authoritative.length, before + 1);
  assert.equal(calls.authoritative.at(-1), a.getState('authoritative'));
  assert.equal(Object.keys(a.getState('authoritative').items).length, 3);
  await net.settle();
  // Quiet: every view is the very same snapshot object.
  const s = a.getState('stable');
  for (const v of VIEWS) assert.equal(a.getState(v), s, `${v} shares the snapshot`);
  // A later op changes only what it touched: untouched items keep their identity.
  a.ops.move({ id: 'p', x: 5, y: 5 });
  const sub = a.getState('submitted');
  assert.notEqual(sub.items.p, s.items.p);
  assert.equal(sub.items.q, s.items.q);
  assert.equal(a.getState('authoritative'), s, 'authoritative unchanged by a local submit');
});

// spec: VIEW-NOTIFY
test('microtask mode coalesces many submits into one notification', async () => {
  const { ClientRoom } = await import('../src/index.ts');
  const r = new ClientRoom(room, { clientId: 'solo', now: () => 0 });
  let n = 0;
  r.subscribe('submitted', () => n++);
  for (let i = 0; i < 10; i++) r.ops.note({ text: String(i) });
  assert.equal(n, 0, 'not yet: notifications wait for the microtask');
  await Promise.resolve();
  assert.equal(n, 1);
  assert.equal(r.getState('submitted').notes.length, 10);
  assert.throws(() => r.subscribe('latest' as ViewName, () => {}), /unknown view "latest"/);
});

// spec: VIEW-OFFLINE, LOG-EXACTLY-ONCE
test('offline: submits and reads keep working; ops flush on reconnect exactly once', async () => {
  const net = new Loopback(room);
  const a = net.client('a');
  net.client('b');
  net.connect('b');
  const h1 = a.ops.add({ id: 'k', x: 1, y: 1 });
  const h2 = a.ops.move({ id: 'k', x: 2, y: 2 });
  await new Promise((r) => setImmediate(r));
  assert.equal(h2.stage, 'durable');
  assert.deepEqual(a.getState('durable').items.k, { x: 2, y: 2 });
  net.connect('a');
  await net.settle();
  assert.equal(h1.stage, 'visible');
  assert.equal(h2.stage, 'visible');
  assert.equal(net.server.head(), 2);
  // Drop the connection with ops in flight, then reconnect: the server deduplicates.
  const h3 = a.ops.note({ text: 'once' });
  await new Promise((r) => setImmediate(r));
  net.up(); // ordered...
  net.disconnect('a'); // ...but the Notify-Auth is lost with the connection
  assert.equal(h3.stage, 'durable');
  net.connect('a');
  await net.settle();
  assert.equal(h3.stage, 'visible');
  assert.equal(net.server.head(), 3, 'the resent op was not ordered twice');
  assert.deepEqual(net.rooms.get('b')!.getState('visible').notes, ['a@3: once']);
});

// spec: SEC-LIMITS
test('the client splits what it sends into frames the server accepts, and refuses an op that could never fit', () => {
  const e = new ViewEngine(room, { clientId: 'me', now: () => 0 });
  e.connected();
  e.receive({
    t: 'welcome',
    v: PROTOCOL_VERSION,
    client: 'me',
    author: 'me',
    from: 1,
    entries: [],
    highWater: 0,
    visibleSeq: 0,
    rejected: [],
    stable: 0,
    members: ['me'],
  });
  e.drain();
  const text = 'x'.repeat(100 * 1024);
  for (let i = 0; i < 12; i++) e.submit('note', { text });
  assert.throws(() => e.submit('note', { text: 'y'.repeat(MAX_OP_BYTES) }), /exceed the \d+-byte limit per op/);
  e.durable(12);
  const frames = e.drain().send.filter((f): f is Extract<ClientMessage, { t: 'ops' }> => f.t === 'ops');
  assert.ok(frames.length >= 3, `1.2 MB of ops went out in ${frames.length} frame(s)`);
  for (const f of frames) assert.ok(JSON.stringify(f.ops.map((o) => o.args)).length <= FRAME_BUDGET_BYTES, 'every frame within the budget');
  assert.deepEqual(
    frames.flatMap((f) => f.ops.map((o) => o.seq)),
    Array.from({ length: 12 }, (_, i) => i + 1),
    'all ops, once, in order',
  );
});

// spec: VIEW-PREFIX
test('positions() gives each view’s log length, one object until a length changes; onProgress reports every step, stage changes included', async () => {
  const net = new Loopback(room);
  const a = net.client('a', { autoDurable: false });
  const b = net.client('b');
  net.connect('a');
  net.connect('b');
  await net.settle();
  const seen: { stable: number; visible: number; authoritative: number; durable: number; submitted: number }[] = [];
  const off = a.onProgress((p) => seen.push(p));
  const p0 = a.positions();
  assert.deepEqual(p0, { stable: 0, visible: 0, authoritative: 0, durable: 0, submitted: 0 });
  assert.equal(a.positions(), p0, 'the same object while nothing changed');
  assert.ok(Object.isFrozen(p0));
  a.ops.note({ text: 'one' });
  assert.deepEqual(a.positions(), { stable: 0, visible: 0, authoritative: 0, durable: 0, submitted: 1 });
  a.durable(1);
  assert.equal(a.positions().durable, 1);
  await net.settle();
  const end = a.positions();
  assert.deepEqual(end, { stable: 1, visible: 1, authoritative: 1, durable: 1, submitted: 1 });
  // 'sync' notify: one call per step that moved something, each with the positions of the time.
  assert.deepEqual(seen[0], { stable: 0, visible: 0, authoritative: 0, durable: 0, submitted: 1 });
  assert.deepEqual(seen[1], { stable: 0, visible: 0, authoritative: 0, durable: 1, submitted: 1 });
  assert.equal(seen.at(-1), end);
  for (let i = 1; i < seen.length; i++)
    for (const v of VIEWS) assert.ok(seen[i][v] >= seen[i - 1][v], `${v} never goes back while connected (${JSON.stringify(seen)})`);
  // An op of b that changes no state (it throws) still moves a's Authoritative: progress, no snapshot change.
  const n = seen.length;
  const before = a.getState('authoritative');
  b.ops.move({ id: 'nothing', x: 0, y: 0 });
  await net.settle();
  assert.equal(a.getState('authoritative'), before);
  assert.equal(a.positions().authoritative, 2);
  assert.ok(seen.length > n, 'reported');
  off();
  b.ops.note({ text: 'later' });
  await net.settle();
  assert.equal(seen.length > n && seen.at(-1)!.authoritative, 2, 'not after off()');
});

// spec: STABLE-MONOTONIC
test('a welcome whose log ends before what a server announced to this client is refused as a stale server: the views stay, the client reconnects', () => {
  const e = new ViewEngine(room, { clientId: 'me', now: () => 0 });
  const note = (pos: number) => ({ pos, client: 'x', seq: pos, name: 'note', args: { text: `n${pos}` }, author: 'x' });
  const welcome = { t: 'welcome' as const, v: PROTOCOL_VERSION, client: 'me', author: 'me', highWater: 0, visibleSeq: 0, rejected: [], members: ['me'] };
  e.connected();
  e.receive({ ...welcome, from: 1, entries: [note(1), note(2), note(3)], stable: 3 });
  e.drain();
  assert.deepEqual(e.getState('stable').notes, ['x@1: n1', 'x@2: n2', 'x@3: n3']);
  e.disconnected();
  // A cluster node that lost the room without knowing it: its copy ends at 2.
  e.connected();
  e.receive({ ...welcome, checkpoint: { pos: 1, state: { items: {}, notes: ['x@1: n1'] } }, from: 2, entries: [note(2)], stable: 1 });
  const out = e.drain();
  assert.match(out.resync ?? '', /stale server: its welcome's log ends at 2, before position 3/);
  assert.equal(e.positions().stable, 3);
  assert.equal(e.positions().authoritative, 3);
  assert.deepEqual(e.getState('stable').notes, ['x@1: n1', 'x@2: n2', 'x@3: n3']);
  // The server that holds the room welcomes it again (resuming after 3): adopted.
  e.disconnected();
  e.connected();
  e.receive({ ...welcome, from: 4, entries: [note(4)], stable: 4 });
  assert.equal(e.drain().resync, undefined);
  assert.equal(e.positions().stable, 4);
});

// spec: VIS-ACK-AFTER-NOTIFY
test('a room acks what it received after its subscribers heard of it, the acks of one turn as one; a new connection drops an ack the old one did not send', async () => {
  const sent: ClientMessage[] = [];
  const order: string[] = [];
  const driver = {
    send(m: ClientMessage) {
      sent.push(m);
      order.push(m.t === 'ack' ? `ack ${m.pos}` : m.t);
    },
    persist() {},
  };
  const r = new ClientRoom(room, { clientId: 'me', now: () => 0 }, driver);
  r.subscribe('authoritative', (s) => order.push(`notified ${s.notes.length}`));
  const note = (pos: number) => ({ pos, client: 'x', seq: pos, name: 'note', args: { text: `n${pos}` }, author: 'x' });
  const welcome = { t: 'welcome' as const, v: PROTOCOL_VERSION, client: 'me', author: 'me', highWater: 0, visibleSeq: 0, rejected: [], members: ['me', 'x'] };
  r.connected();
  r.receive({ ...welcome, from: 1, entries: [note(1)], stable: 0 });
  // Two frames in one turn: nothing acked until the notification round has run.
  r.receive({ t: 'log', from: 2, entries: [{ k: 'op', e: note(2) }] });
  r.receive({ t: 'log', from: 3, entries: [{ k: 'op', e: note(3) }] });
  assert.deepEqual(order, ['hello'], 'no ack before the subscribers heard');
  await Promise.resolve();
  assert.deepEqual(order, ['hello', 'notified 3', 'ack 3'], 'one ack, for the last position, after the round');
  // An ack still held when the connection drops goes with it.
  order.length = 0;
  r.receive({ t: 'log', from: 4, entries: [{ k: 'op', e: note(4) }] });
  r.disconnected();
  r.connected();
  await Promise.resolve();
  assert.ok(!order.includes('ack 4'), `the old connection's ack is not sent on the new one: ${order.join(', ')}`);
  assert.equal(order.indexOf('hello'), 0, 'the new connection starts with its hello');
  // In 'sync' mode the ack goes at once, as before.
  const syncSent: ClientMessage[] = [];
  const rs = new ClientRoom(room, { clientId: 'me', now: () => 0, notify: 'sync' }, { send: (m: ClientMessage) => syncSent.push(m), persist() {} });
  rs.connected();
  rs.receive({ ...welcome, from: 1, entries: [note(1)], stable: 0 });
  rs.receive({ t: 'log', from: 2, entries: [{ k: 'op', e: note(2) }] });
  assert.deepEqual(
    syncSent.filter((m) => m.t === 'ack').map((m) => (m as { pos: number }).pos),
    [1, 2],
  );
});

// spec: VIS-ACK-WITH-OPS
test('a held ack rides on the ops a subscriber submits in the same turn: one frame; with nothing to send it goes alone', async () => {
  const sent: ClientMessage[] = [];
  let r!: ClientRoom<typeof room>;
  // Like ClientDriver: a reservation lets ops go before they are durable, at the turn's end.
  let flushScheduled = false;
  const driver = {
    send: (m: ClientMessage) => sent.push(m),
    persist() {
      if (flushScheduled) return;
      flushScheduled = true;
      queueMicrotask(() => {
        flushScheduled = false;
        r.flushSends();
      });
    },
  };
  r = new ClientRoom(room, { clientId: 'me', now: () => 0 }, driver);
  r.reserved(100);
  const note = (pos: number) => ({ pos, client: 'x', seq: pos, name: 'note', args: { text: `n${pos}` }, author: 'x' });
  const welcome = { t: 'welcome' as const, v: PROTOCOL_VERSION, client: 'me', author: 'me', highWater: 0, visibleSeq: 0, rejected: [], members: ['me', 'x'] };
  r.connected();
  r.receive({ ...welcome, from: 1, entries: [note(1)], stable: 0 });
  await new Promise((res) => setImmediate(res));
  sent.length = 0;
  // A subscriber answers a remote op with an op of its own: the ack and the op leave as one message.
  const off = r.subscribe('authoritative', (s) => {
    if (s.notes.length === 2) r.ops.note({ text: 'reply' });
  });
  r.receive({ t: 'log', from: 2, entries: [{ k: 'op', e: note(2) }] });
  await new Promise((res) => setImmediate(res));
  assert.deepEqual(sent, [{ t: 'ops', ops: [{ seq: 1, name: 'note', args: { text: 'reply' } }], ack: { pos: 2 } }]);
  off();
  // Nothing submitted: the ack goes alone, after the round.
  sent.length = 0;
  r.receive({ t: 'log', from: 3, entries: [{ k: 'op', e: note(3) }] });
  await new Promise((res) => setImmediate(res));
  assert.deepEqual(sent, [{ t: 'ack', pos: 3 }]);
  // Only an ack that goes before ops rides on them (the room handles it first): a welcome makes
  // the room send its ops again, then ack, and those stay two messages.
  const syncSent: ClientMessage[] = [];
  const rs = new ClientRoom(room, { clientId: 'me', now: () => 0, notify: 'sync' }, { send: (m: ClientMessage) => syncSent.push(m), persist() {} });
  rs.ops.note({ text: 'offline' });
  rs.durable(1);
  rs.connected();
  rs.receive({ ...welcome, from: 1, entries: [note(1)], stable: 0 });
  assert.deepEqual(syncSent.slice(1), [
    { t: 'ops', ops: [{ seq: 1, name: 'note', args: { text: 'offline' } }] },
    { t: 'ack', pos: 1, durable: 1 },
  ]);
});

// spec: VIEW-SUBMIT-NOW
test('a submitted op goes on the wire before it runs; a read of Submitted runs it at once; listeners hear of it after the send', async () => {
  const events: string[] = [];
  // (An op with a side effect, to see when it runs: never do this in an app.)
  const counted = defineMachine({
    name: 'counted',
    version: 1,
    initial: { n: 0 },
    ops: {
      inc(s, a: { by: number }) {
        events.push(`run ${a.by}`);
        s.n += a.by;
      },
    },
  });
  const turn = () => new Promise((res) => setImmediate(res));
  const driverFor = (get: () => ClientRoom<typeof counted>) => {
    let flushScheduled = false;
    return {
      send: (m: ClientMessage) => events.push(`send ${m.t}`),
      persist() {
        if (flushScheduled) return;
        flushScheduled = true;
        queueMicrotask(() => {
          flushScheduled = false;
          get().flushSends();
        });
      },
    };
  };
  const welcome = {
    t: 'welcome' as const,
    v: PROTOCOL_VERSION,
    client: 'me',
    author: 'me',
    highWater: 0,
    visibleSeq: 0,
    rejected: [],
    members: ['me'],
    from: 1,
    entries: [],
    stable: 0,
  };
  const r: ClientRoom<typeof counted> = new ClientRoom(
    counted,
    { clientId: 'me', now: () => 0 },
    driverFor(() => r),
  );
  r.reserved(100);
  r.connected();
  r.receive(welcome);
  r.subscribe('submitted', (s) => events.push(`notify ${s.n}`));
  await turn();
  events.length = 0;
  r.ops.inc({ by: 1 });
  r.ops.inc({ by: 2 });
  assert.equal(events.length, 0, 'nothing has run or gone yet');
  await turn();
  assert.deepEqual(events, ['send ops', 'run 1', 'run 2', 'notify 3'], "the turn's ops go in one frame, then run, then the listeners hear");
  // A read of Submitted right after the submit runs the op then: the view holds it at once.
  events.length = 0;
  r.ops.inc({ by: 4 });
  assert.equal(r.getState('submitted').n, 7);
  assert.deepEqual(events, ['run 4']);
  await turn();
  assert.deepEqual(events, ['run 4', 'send ops', 'notify 7'], 'run once');
  // 'sync' mode notifies inside the call, so the op runs there.
  events.length = 0;
  const s: ClientRoom<typeof counted> = new ClientRoom(
    counted,
    { clientId: 'me', now: () => 0, notify: 'sync' },
    driverFor(() => s),
  );
  s.reserved(100);
  s.connected();
  s.receive(welcome);
  s.subscribe('submitted', (st) => events.push(`notify ${st.n}`));
  events.length = 0;
  s.ops.inc({ by: 5 });
  assert.deepEqual(events, ['run 5', 'notify 5']);
  await turn();
  assert.deepEqual(events, ['run 5', 'notify 5', 'send ops']);
});

// spec: VIS-BY-STABLE
test('a stable frontier past an own op makes it visible, with no Notify-Visible; one short of it does not', async () => {
  const r = new ClientRoom(room, { clientId: 'me', now: () => 0, notify: 'sync' }, { send() {}, persist() {} });
  const welcome = { t: 'welcome' as const, v: PROTOCOL_VERSION, client: 'me', author: 'me', highWater: 0, visibleSeq: 0, rejected: [], members: ['me', 'x'] };
  r.connected();
  r.receive({ ...welcome, from: 1, entries: [], stable: 0 });
  const h1 = r.ops.note({ text: 'one' });
  const h2 = r.ops.note({ text: 'two' });
  r.durable(2);
  const other = { pos: 2, client: 'x', seq: 1, name: 'note', args: { text: 'x1' }, author: 'x' };
  r.receive({
    t: 'log',
    from: 1,
    entries: [
      { k: 'own', seq: 1 },
      { k: 'op', e: other },
      { k: 'own', seq: 2 },
    ],
  });
  assert.equal(h2.stage, 'authoritative');
  r.receive({ t: 'stable', pos: 2 });
  assert.equal(h1.stage, 'visible');
  assert.equal(h2.stage, 'authoritative', 'its position, 3, is past the frontier');
  assert.deepEqual(r.positions(), { ...r.positions(), stable: 2, visible: 2, authoritative: 3 });
  assert.deepEqual(r.getState('visible').notes, ['me@1: one', 'x@2: x1']);
  r.receive({ t: 'stable', pos: 3 });
  assert.equal(h2.stage, 'visible');
  assert.equal(await h2.stable, h2);
  assert.equal(r.positions().visible, 3);
});

// spec: VIEW-TENTATIVE, LOG-RUN-AFTER-SEND
test('a tentative entry is in Durable and Submitted at once, Authoritative only once committed; it is acked at once (protocol 5); a welcome drops it; a stored log before its confirmation, or an own op sent as tentative, resyncs', () => {
  const e = new ViewEngine(room, { clientId: 'me', now: () => 0 });
  const note = (pos: number) => ({ pos, client: 'x', seq: pos, name: 'note', args: { text: `n${pos}` }, author: 'x' });
  const welcome = { t: 'welcome' as const, v: PROTOCOL_VERSION, client: 'me', author: 'me', highWater: 0, visibleSeq: 0, rejected: [], members: ['me', 'x'] };
  /** Others' entries at 2 and 3, sent ahead of their commit. */
  const tentative23 = { t: 'log' as const, from: 2, entries: [2, 3].map((p) => ({ k: 'op' as const, e: note(p) })), tentative: true as const };
  e.connected();
  e.receive({ ...welcome, from: 1, entries: [note(1)], stable: 0 });
  e.drain();
  // Our own op, submitted before the tentative entry arrives, is folded after it.
  e.submit('note', { text: 'mine' });
  e.receive(tentative23);
  let out = e.drain();
  assert.deepEqual(
    e.getState('submitted').notes,
    ['x@1: n1', 'x@2: n2', 'x@3: n3', 'me@4: mine'],
    'the tentative entries, then our op at the position after them',
  );
  assert.deepEqual(e.getState('authoritative').notes, ['x@1: n1']);
  assert.deepEqual(e.positions(), { stable: 0, visible: 1, authoritative: 1, durable: 3, submitted: 4 });
  assert.deepEqual(
    out.send.filter((m) => m.t === 'ack').map((m) => (m as { pos: number }).pos),
    [3],
    'tentative entries are acked as held: the server keeps Stable and visibility within what it stored',
  );
  assert.deepEqual(
    e.tentativeEntries().map((x) => x.pos),
    [2, 3],
  );
  // The commit of the first of them.
  e.receive({ t: 'committed', pos: 2 });
  out = e.drain();
  assert.deepEqual(e.getState('authoritative').notes, ['x@1: n1', 'x@2: n2']);
  assert.deepEqual(
    out.send.filter((m) => m.t === 'ack'),
    [],
    'acked when it came: its confirmation changes nothing the server hears',
  );
  assert.ok(!out.changed.has('submitted') && !out.changed.has('durable'), 'the speculative logs did not change: no new snapshot');
  // The rest: with no own op durable, Durable rests on Authoritative again, one snapshot.
  e.durable(1);
  e.drain();
  const durableBefore = e.getState('durable');
  e.receive({ t: 'committed', pos: 3 });
  out = e.drain();
  assert.deepEqual(e.getState('authoritative').notes, ['x@1: n1', 'x@2: n2', 'x@3: n3']);
  assert.equal(e.getState('durable'), durableBefore, 'Durable keeps its snapshot');
  assert.deepEqual(e.tentativeEntries(), []);
  // A welcome forgets tentative entries: the stored log it brings replaces them.
  e.receive({ t: 'log', from: 4, entries: [{ k: 'own', seq: 1 }] });
  e.receive({ t: 'log', from: 5, entries: [{ k: 'op', e: note(5) }], tentative: true });
  e.drain();
  assert.deepEqual(e.getState('submitted').notes.at(-1), 'x@5: n5');
  e.disconnected();
  assert.deepEqual(e.getState('submitted').notes.at(-1), 'x@5: n5', 'offline, it still shows them');
  e.connected();
  e.receive({ ...welcome, highWater: 1, visibleSeq: 1, from: 5, entries: [], stable: 4 });
  e.drain();
  assert.deepEqual(e.tentativeEntries(), []);
  assert.deepEqual(e.getState('submitted').notes, ['x@1: n1', 'x@2: n2', 'x@3: n3', 'me@4: mine']);
  // Out of step: a stored log while entries are tentative; our own op marked tentative.
  e.receive({ t: 'log', from: 5, entries: [{ k: 'op', e: note(5) }], tentative: true });
  e.receive({ t: 'log', from: 6, entries: [{ k: 'op', e: note(6) }] });
  assert.match(e.drain().resync ?? '', /log at 6 while entries from 5 are still tentative/);
  const f = new ViewEngine(room, { clientId: 'me', now: () => 0 });
  f.connected();
  f.receive({ ...welcome, from: 1, entries: [], stable: 0 });
  f.receive({ t: 'log', from: 1, entries: [{ k: 'op', e: { ...note(1), client: 'me', author: 'me' } }], tentative: true });
  assert.match(f.drain().resync ?? '', /our own op came as tentative at 1/);
  // A stable frontier is never past what the server stored: it confirms the tentative entries up
  // to it (protocol 5), and a committed message after it changes nothing.
  const g = new ViewEngine(room, { clientId: 'me', now: () => 0 });
  g.connected();
  g.receive({ ...welcome, from: 1, entries: [note(1)], stable: 1 });
  g.receive(tentative23);
  g.receive({ t: 'stable', pos: 2 });
  assert.deepEqual(g.positions(), { stable: 2, visible: 2, authoritative: 2, durable: 3, submitted: 3 });
  assert.deepEqual(g.getState('stable').notes, ['x@1: n1', 'x@2: n2']);
  assert.deepEqual(
    g.tentativeEntries().map((x) => x.pos),
    [3],
    'the one past the frontier stays tentative',
  );
  g.receive({ t: 'committed', pos: 2 });
  g.receive({ t: 'committed', pos: 3 });
  assert.deepEqual(g.positions(), { stable: 2, visible: 3, authoritative: 3, durable: 3, submitted: 3 });
  // A confirmation carried by the next tentative log: the earlier entries are promoted first.
  g.receive({ t: 'log', from: 4, entries: [{ k: 'op', e: note(4) }], tentative: true });
  g.receive({ t: 'log', from: 5, entries: [{ k: 'op', e: note(5) }], tentative: true, committed: 4 });
  assert.equal(g.positions().authoritative, 4);
  assert.deepEqual(
    g.tentativeEntries().map((x) => x.pos),
    [5],
  );
  assert.deepEqual(g.getState('submitted').notes.at(-1), 'x@5: n5');
  // LOG-RUN-AFTER-SEND: the server sends a tentative entry before it runs the op, so one that
  // throws here is that op's verdict, kept on this copy: no divergence, and once promoted it is
  // skipped, not run again.
  const throwing = { pos: 6, client: 'x', seq: 6, name: 'move', args: { id: 'nowhere', x: 0, y: 0 }, author: 'x' };
  g.receive({ t: 'log', from: 6, entries: [{ k: 'op', e: throwing }], tentative: true });
  const beforeCommit = g.getState('submitted');
  assert.deepEqual(g.drain().warnings, []);
  assert.deepEqual(
    g.tentativeEntries().map((x) => [x.pos, x.error]),
    [
      [5, undefined],
      [6, 'no item nowhere'],
    ],
  );
  g.receive({ t: 'committed', pos: 6 });
  assert.equal(g.positions().authoritative, 6);
  assert.equal(g.getState('authoritative'), beforeCommit, 'the promoted entries adopt the tentative state');
  assert.deepEqual(g.drain().warnings, []);
  assert.equal(g.stats.divergences, 0);
  // A stored entry the server accepted that throws here (not deterministic) is reported when it arrives.
  g.receive({ t: 'log', from: 7, entries: [{ k: 'op', e: { ...throwing, pos: 7, seq: 7 } }] });
  assert.match(g.drain().warnings.join('\n'), /op x:7 \(move\) threw here but not on the server: no item nowhere/);
  assert.equal(g.stats.divergences, 1);
});

// spec: LOG-OWN-HOLE
test('a welcome finds a hole in our own ops (the store lost one): fatal seq-gap naming it and nothing sent; a declared gap or none is sent', () => {
  const note = (seq: number, after?: number) => ({ client: 'me', seq, name: 'note', args: { text: `n${seq}` }, ...(after !== undefined ? { after } : {}) });
  const welcome = {
    t: 'welcome' as const,
    v: PROTOCOL_VERSION,
    client: 'me',
    author: 'me',
    from: 1,
    entries: [],
    visibleSeq: 0,
    rejected: [],
    members: ['me'],
    stable: 0,
  };
  const sentSeqs = (durable: ReturnType<typeof note>[], highWater: number) => {
    const e = new ViewEngine(room, { clientId: 'me', now: () => 0 }, { lastSeq: 0, durable });
    e.connected();
    e.drain();
    e.receive({ ...welcome, highWater });
    const out = e.drain();
    const seqs = out.send.flatMap((m) => (m.t === 'ops' ? m.ops.map((o) => o.seq) : []));
    return { seqs, fatal: out.fatal };
  };
  // The hole past the server's high-water mark, and one between two held ops.
  for (const [durable, hw, missing] of [
    [[note(3), note(4)], 1, 'not seq 2,'],
    [[note(2), note(3), note(6)], 1, 'not seqs 4 to 5,'],
  ] as const) {
    const r = sentSeqs([...durable], hw);
    assert.equal(r.fatal?.code, 'seq-gap');
    assert.ok(r.fatal!.message.includes(missing), r.fatal!.message);
    assert.match(r.fatal!.message, /reconnecting cannot change that/);
    assert.deepEqual(r.seqs, [], 'nothing sent: not even the ops before an inner hole, which would only hold the room up to it');
  }
  assert.deepEqual(sentSeqs([note(2), note(5, 2), note(6)], 1), { seqs: [2, 5, 6], fatal: undefined }, 'a declared gap is no hole');
  assert.deepEqual(sentSeqs([note(3), note(4)], 2), { seqs: [3, 4], fatal: undefined }, 'no hole once the server holds seq 2');
});

// spec: VIEW-TENTATIVE, VIEW-SPECULATIVE
test("others' entries run once each at a client: their promotion, Visible and Stable start from the tentative frames' states (Fig. 14: 1.7 runs per op delivered at 32 clients before)", () => {
  const runs: string[] = [];
  const counter = defineMachine({
    name: 'run-counter',
    version: 1,
    initial: { sum: 0 },
    ops: {
      add(s, a: { id: string; by: number }) {
        runs.push(a.id);
        s.sum += a.by;
      },
    },
  });
  const e = new ViewEngine(counter, { clientId: 'me', now: () => 0 });
  const theirs = (pos: number) => ({ pos, client: 'x', seq: pos, name: 'add', args: { id: `x${pos}`, by: pos }, author: 'x' });
  const tent = (pos: number, committed?: number) => ({
    t: 'log' as const,
    from: pos,
    entries: [{ k: 'op' as const, e: theirs(pos) }],
    tentative: true as const,
    ...(committed !== undefined ? { committed } : {}),
  });
  e.connected();
  e.receive({
    t: 'welcome',
    v: PROTOCOL_VERSION,
    client: 'me',
    author: 'me',
    highWater: 0,
    visibleSeq: 0,
    rejected: [],
    members: ['me', 'x'],
    from: 1,
    entries: [],
    stable: 0,
  });
  e.submit('add', { id: 'mine', by: 100 });
  e.drain();
  e.durable(1);
  e.receive(tent(1));
  e.receive(tent(2, 1));
  // One socket read: the commit of 2, then our op, stored at 3.
  e.receiveAll([
    { t: 'committed', pos: 2 },
    { t: 'log', from: 3, entries: [{ k: 'own', seq: 1 }] },
  ]);
  e.receive(tent(4));
  e.receive(tent(5, 4));
  e.receive({ t: 'committed', pos: 5 });
  assert.deepEqual(e.positions(), { stable: 0, visible: 2, authoritative: 5, durable: 5, submitted: 5 });
  e.receive({ t: 'visible', seq: 1 });
  e.receive({ t: 'stable', pos: 4 });
  e.receive({ t: 'stable', pos: 5 });
  e.drain();
  assert.deepEqual(e.positions(), { stable: 5, visible: 5, authoritative: 5, durable: 5, submitted: 5 });
  for (const v of VIEWS) assert.equal(e.getState(v).sum, 112, v);
  assert.deepEqual(
    ['x1', 'x2', 'x4', 'x5'].map((id) => runs.filter((r) => r === id).length),
    [1, 1, 1, 1],
    `each of their entries ran once (runs: ${runs.join(' ')})`,
  );
});
