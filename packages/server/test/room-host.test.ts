/**
 * RoomHost on its own: a MemoryStore behind a gate (appends wait until the test lets them
 * through, in order), fake members that record what they are sent, and a manual clock. So each
 * test decides exactly when the store confirms, and checks what went out before and after.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import { PROTOCOL_VERSION, defineMachine, type ErrorCode, type Machine, type ServerMessage } from '@hercules/core';
import { MemoryStore, RoomHost, RoomRegistry, type Appended, type RoomAppend, type RoomMember, type RoomStore } from '../src/pipeline.ts';
import { FakeClock } from '@hercules/test-utils';
import { chat } from '../../../apps/machines.ts';
import { watchRuns } from '@hercules/test-utils';

/** A store whose appends wait for `pass()`; they then take effect in call order, as the contract says. */
class GatedStore implements RoomStore {
  readonly inner = new MemoryStore();
  readonly calls: RoomAppend[] = [];
  private held: { room: string; write: RoomAppend; resolve: (a: Appended) => void; reject: (e: unknown) => void }[] = [];
  open = this.inner.open.bind(this.inner) as RoomStore['open'];
  rooms = () => this.inner.rooms();
  release = (room: string) => this.inner.release(room);
  close = () => this.inner.close();
  append(room: string, write: RoomAppend): Promise<Appended> {
    this.calls.push(write);
    return new Promise((resolve, reject) => this.held.push({ room, write, resolve, reject }));
  }
  get waiting(): number {
    return this.held.length;
  }
  /**
   * Let the first `n` held appends through (default all) and wait for the host to react. The
   * host appends what a task gathered when the task ends (a microtask), so that comes first.
   */
  async pass(n?: number): Promise<void> {
    await Promise.resolve();
    for (const h of this.held.splice(0, n ?? this.held.length)) await this.inner.append(h.room, h.write).then(h.resolve, h.reject);
    await settle();
  }
}

const settle = () => new Promise<void>((r) => setImmediate(r));
/** The current task ends (the host appends what it gathered, in a microtask), then 0 ms timers run. */
async function endOfTask(clock: FakeClock): Promise<void> {
  await Promise.resolve();
  clock.advance(0);
}

interface FakeMember extends RoomMember {
  got: ServerMessage[];
  closed?: { code: number; reason: string; refused?: ErrorCode };
}
function member(id: string, onSend?: (m: ServerMessage) => void): FakeMember {
  const m: FakeMember = {
    id,
    got: [],
    send(msg) {
      onSend?.(msg);
      m.got.push(msg);
    },
    close(code, reason, refused) {
      m.closed = { code, reason, refused };
    },
  };
  return m;
}

const hello = (client: string, machine: Machine<any, any> = chat, have = 0, v = PROTOCOL_VERSION) => ({
  t: 'hello',
  v,
  client,
  machine: { name: machine.name, version: machine.version },
  have,
});
const say = (seq: number, text: string) => ({ t: 'ops', ops: [{ seq, name: 'say', args: { text } }] });

async function hostOver(store: RoomStore, clock: FakeClock, extra: Partial<ConstructorParameters<typeof RoomHost>[0]> = {}) {
  const loaded = await store.open('r', { machine: chat.name, version: chat.version, initial: chat.initial });
  return new RoomHost({ name: 'r', machine: chat, loaded, store, clock, ...extra });
}

/** Join `m` as client `client` and let its claim through, so it is welcomed. */
async function welcomed(host: RoomHost, store: GatedStore, clock: FakeClock, m: FakeMember, client: string, v = PROTOCOL_VERSION): Promise<void> {
  host.join(m);
  host.receive(m.id, hello(client, chat, 0, v));
  await endOfTask(clock);
  await store.pass();
  assert.ok(
    m.got.some((x) => x.t === 'welcome'),
    'welcomed',
  );
}

/** A host over a GatedStore with members a and b welcomed, in that order. */
async function hostOfTwo() {
  const store = new GatedStore();
  const clock = new FakeClock({ microtasks: true });
  const host = await hostOver(store, clock);
  const a = member('a');
  const b = member('b');
  await welcomed(host, store, clock, a, 'a');
  await welcomed(host, store, clock, b, 'b');
  return { store, clock, host, a, b };
}

// spec: LOG-RUN-AFTER-SEND, OP-VERDICT, AUTH-STORED
test("an op runs on the server after its tentative log went to the other members; a thrown op's verdict is stored and told its author", async () => {
  /** b's message count whenever the server runs an op. */
  const seenByB: number[] = [];
  let b: FakeMember | undefined;
  const watched = watchRuns(chat, () => seenByB.push(b!.got.length));
  const store = new GatedStore();
  const clock = new FakeClock({ microtasks: true });
  const host = await hostOver(store, clock, { machine: watched });
  const a = member('a');
  b = member('b');
  await welcomed(host, store, clock, a, 'a');
  await welcomed(host, store, clock, b, 'b');
  const before = b.got.length;
  host.receive('a', say(1, 'one'));
  assert.deepEqual(seenByB, [before + 1], 'b had its tentative log when the op ran');
  const sent = b.got.at(-1);
  assert.equal(sent?.t === 'log' && sent.tentative, true, 'and it was the tentative log');
  await endOfTask(clock);
  await store.pass();
  clock.advance(0);
  const n = a.got.length;
  host.receive('a', say(2, ' '));
  await endOfTask(clock);
  assert.equal(store.calls.at(-1)!.entries![0].error, 'empty message', 'the verdict is in the stored entry');
  assert.deepEqual(store.calls.at(-1)!.clients?.a?.rejected, [{ seq: 2, pos: 2, error: 'empty message' }], "and in its author's record, in the same append");
  await store.pass();
  assert.deepEqual(
    a.got.slice(n).find((m) => m.t === 'log'),
    { t: 'log', from: 2, entries: [{ k: 'own', seq: 2, error: 'empty message' }] },
  );
  assert.deepEqual(
    host.engine.headSnapshot().messages.map((m: { text: string }) => m.text),
    ['one'],
  );
});

// spec: AUTH-STORED
test('an op is announced only once the store confirmed its entry, and the welcome only once the claim is stored', async () => {
  const store = new GatedStore();
  const clock = new FakeClock({ microtasks: true });
  const host = await hostOver(store, clock);
  const disk = () => store.inner.disk.rooms.get('r')!;
  // Whenever the host sends a log entry, the store must hold it already.
  const a = member('a', (m) => {
    if (m.t === 'log') assert.ok(disk().checkpoint.pos + disk().log.length >= m.from + m.entries.length - 1, `log up to ${m.from} sent before it was stored`);
  });
  host.join(a);
  host.receive('a', hello('a'));
  await endOfTask(clock);
  assert.equal(store.waiting, 1, 'the client record (claim) is being appended');
  assert.deepEqual(
    a.got.map((m) => m.t),
    [],
    'no welcome before the claim is stored',
  );
  await store.pass();
  assert.ok(a.got.some((m) => m.t === 'welcome'));

  const before = a.got.length;
  host.receive('a', say(1, 'hi'));
  await endOfTask(clock);
  assert.equal(store.waiting, 1);
  assert.equal(a.got.length, before, 'nothing about the op before its commit');
  assert.equal(host.settled, false);
  await store.pass();
  const log = a.got.slice(before).find((m) => m.t === 'log');
  assert.ok(log && log.t === 'log' && log.from === 1, JSON.stringify(a.got.slice(before)));
  assert.equal(host.settled, true);
});

// spec: AUTH-STORED
test('outputs go out in engine order: a bookkeeping output waits behind an op still being stored', async () => {
  const { store, clock, host, a } = await hostOfTwo();
  host.receive('a', say(1, 'one'));
  await endOfTask(clock);
  await store.pass();
  // b acks position 1 (bookkeeping: sendFirst), but first a's next op is in flight.
  host.receive('a', say(2, 'two'));
  host.receive('b', { t: 'ack', pos: 1 });
  host.receive('a', { t: 'ack', pos: 1 });
  const sentToA = a.got.length;
  await endOfTask(clock);
  assert.equal(a.got.length, sentToA, 'the visible for op 1 waits behind the log of op 2, which waits for its commit');
  await store.pass();
  const after = a.got.slice(sentToA).map((m) => m.t);
  assert.ok(after.indexOf('log') >= 0 && after.indexOf('log') < after.indexOf('visible'), `order: ${after.join(', ')}`);
});

// spec: LOG-COALESCE
test('the ops of many frames released by one commit reach each member as one log message, in order, whoever sent them', async () => {
  const store = new GatedStore();
  const clock = new FakeClock({ microtasks: true });
  const host = await hostOver(store, clock);
  const a = member('a');
  const b = member('b');
  const c = member('c');
  // Protocol 3: every log goes after its commit (a protocol-4 member gets others' ops ahead of
  // it, LOG-TENTATIVE, and only what was held behind something is coalesced).
  for (const [m, id] of [
    [a, 'a'],
    [b, 'b'],
    [c, 'c'],
  ] as const)
    await welcomed(host, store, clock, m, id, 3);
  const [fromA, fromB, fromC] = [a.got.length, b.got.length, c.got.length];
  // Three frames in one task: one commit holds them all.
  host.receive('a', say(1, 'one'));
  host.receive('b', say(1, 'two'));
  host.receive('a', say(2, 'three'));
  await endOfTask(clock);
  assert.equal(store.waiting, 1, 'one commit for the three frames');
  await store.pass();
  const logs = (got: ServerMessage[]) => got.filter((m) => m.t === 'log');
  // c submitted nothing: one message with the three ops as Remote-Operation, in log order.
  const toC = logs(c.got.slice(fromC));
  assert.equal(toC.length, 1, JSON.stringify(toC));
  assert.ok(toC[0].t === 'log');
  assert.equal(toC[0].from, store.inner.disk.rooms.get('r')!.log.length - 2);
  assert.deepEqual(
    toC[0].entries.map((w) => (w.k === 'op' ? `${w.e.client}:${w.e.seq}@${w.e.pos}` : 'own')),
    [`a:1@${toC[0].from}`, `b:1@${toC[0].from + 1}`, `a:2@${toC[0].from + 2}`],
  );
  // a: its own two as Notify-Auth around b's op; b: its own between a's two.
  const toA = logs(a.got.slice(fromA));
  assert.equal(toA.length, 1);
  assert.ok(toA[0].t === 'log');
  assert.deepEqual(
    toA[0].entries.map((w) => w.k),
    ['own', 'op', 'own'],
  );
  const toB = logs(b.got.slice(fromB));
  assert.equal(toB.length, 1);
  assert.ok(toB[0].t === 'log');
  assert.deepEqual(
    toB[0].entries.map((w) => w.k),
    ['op', 'own', 'op'],
  );
  // The merged messages are each member's own: what one member was sent is not another's array.
  assert.notEqual(toA[0].entries, toC[0].entries);
  // A later commit of one frame sends one message as before.
  host.receive('c', say(1, 'four'));
  await endOfTask(clock);
  await store.pass();
  const last = logs(a.got).at(-1)!;
  assert.ok(last.t === 'log' && last.entries.length === 1 && last.from === toC[0].from + 3);
});

// spec: LOG-TENTATIVE
test("another client's ops reach a protocol-4 member ahead of their commit, marked tentative, confirmed once stored; never past what it is due before them; nothing of a failed commit is confirmed", async () => {
  const { store, clock, host, a, b } = await hostOfTwo();
  const old = member('old');
  await welcomed(host, store, clock, old, 'old', 3);
  const n = { a: a.got.length, b: b.got.length, old: old.got.length };
  host.receive('a', say(1, 'one'));
  await endOfTask(clock);
  assert.equal(store.waiting, 1, 'the commit is in flight');
  assert.deepEqual(
    b.got.slice(n.b),
    [{ t: 'log', from: 1, entries: [{ k: 'op', e: store.calls.at(-1)!.entries![0] }], tentative: true }],
    'b has it before the commit',
  );
  assert.deepEqual(a.got.slice(n.a), [], 'the author hears only once it is stored (AUTH-STORED)');
  assert.deepEqual(old.got.slice(n.old), [], 'a protocol-3 member gets nothing ahead of the commit');
  await store.pass();
  assert.deepEqual(
    b.got.slice(n.b).map((m) => m.t),
    ['log'],
    'the confirmation is held to the end of the turn, for a tentative log to carry',
  );
  clock.advance(0);
  assert.deepEqual(
    b.got.slice(n.b).map((m) => m.t),
    ['log', 'committed'],
    'none came: it goes on its own',
  );
  assert.deepEqual(b.got.at(-1), { t: 'committed', pos: 1 });
  assert.ok(a.got.slice(n.a).some((m) => m.t === 'log' && m.entries[0].k === 'own'));
  assert.deepEqual(
    old.got.slice(n.old).map((m) => m.t + (m.t === 'log' && m.tentative ? ' tentative' : '')),
    ['log'],
  );
  // b's own op is queued behind its commit (its Notify-Auth); a's next op, ordered after it, may
  // not overtake that: it goes to b after the commit, as a stored log, with no committed of its own.
  n.b = b.got.length;
  host.receive('b', say(1, 'two'));
  host.receive('a', say(2, 'three'));
  await endOfTask(clock);
  assert.deepEqual(b.got.slice(n.b), [], 'nothing ahead of its own Notify-Auth');
  const toA = a.got.slice(n.a).filter((m) => m.t === 'log' && m.tentative);
  assert.equal(toA.length, 1, "a is due nothing before b's op: it gets it ahead of the commit");
  await store.pass();
  const after = b.got.slice(n.b);
  assert.ok(after.every((m) => m.t !== 'log' || !m.tentative) && !after.some((m) => m.t === 'committed'), JSON.stringify(after));
  assert.deepEqual(
    after.filter((m) => m.t === 'log').flatMap((m) => (m.t === 'log' ? m.entries.map((w) => `${w.k}@${m.from}`) : [])),
    ['own@2', 'op@2'],
    "its Notify-Auth, then a's op, as one stored log (LOG-COALESCE)",
  );
  // A confirmation held at the end of a commit rides on the next tentative log, if one comes first.
  n.b = b.got.length;
  clock.advance(0);
  host.receive('a', say(3, 'four'));
  await endOfTask(clock);
  await store.pass();
  host.receive('a', say(4, 'five'));
  await endOfTask(clock);
  const carried = b.got.slice(n.b).filter((m) => m.t === 'log' || m.t === 'committed');
  assert.deepEqual(
    carried.map((m) =>
      m.t === 'log' ? `log ${m.from}${m.tentative ? ' tentative' : ''}${m.committed ? ` committed ${m.committed}` : ''}` : `committed ${m.pos}`,
    ),
    ['log 4 tentative', 'log 5 tentative committed 4'],
  );
  await store.pass();
  clock.advance(0);
  assert.deepEqual(b.got.at(-1), { t: 'committed', pos: 5 });
  // A commit that fails: what went ahead of it is never confirmed, and the members are closed.
  n.b = b.got.length;
  store.inner.failAppend({ stage: 'during' });
  host.receive('a', say(5, 'lost'));
  await endOfTask(clock);
  assert.ok(
    b.got.slice(n.b).some((m) => m.t === 'log' && m.tentative),
    'sent ahead',
  );
  await store.pass();
  assert.equal(host.state, 'failed');
  assert.ok(!b.got.slice(n.b).some((m) => m.t === 'committed'), 'never confirmed');
  assert.deepEqual(b.closed && [b.closed.code, b.closed.refused], [1011, 'storage-failed']);
});

// spec: LOG-TENTATIVE, AUTH-STORED
test('protocol 5: members ack what they were sent ahead of its commit; what counts those acks goes out only after the commit, and a stable frontier that covers them confirms them instead of a committed message', async () => {
  const { store, clock, host, a, b } = await hostOfTwo();
  // An op of a: b acks it while its commit is in flight; a hears it is Authoritative, then Visible.
  let n = { a: a.got.length, b: b.got.length };
  host.receive('a', say(1, 'one'));
  await endOfTask(clock);
  assert.ok(b.got.slice(n.b).some((m) => m.t === 'log' && m.tentative));
  host.receive('b', { t: 'ack', pos: 1 });
  await endOfTask(clock);
  assert.deepEqual(a.got.slice(n.a), [], "nothing to a before the commit: b's ack counts an entry not yet stored");
  await store.pass();
  assert.deepEqual(
    a.got.slice(n.a).map((m) => m.t),
    ['log', 'visible'],
    'its Notify-Auth, then at once its Notify-Visible (b acked before the commit)',
  );
  clock.advance(0);
  assert.deepEqual(b.got.at(-1), { t: 'committed', pos: 1 }, 'no stable frontier yet (a has not acked): b is confirmed on its own');
  host.receive('a', { t: 'ack', pos: 1 });
  await endOfTask(clock);
  // An op of the server's API goes ahead to both members; both ack before its commit: the stable
  // frontier that goes out after it confirms them, no committed message.
  n = { a: a.got.length, b: b.got.length };
  const done = host.submit('api', 'say', { text: 'from the backend' });
  await endOfTask(clock);
  for (const m of [a, b]) {
    assert.ok(m.got.slice(n[m.id as 'a' | 'b']).some((x) => x.t === 'log' && x.tentative));
    host.receive(m.id, { t: 'ack', pos: 2 });
  }
  await endOfTask(clock);
  assert.ok(!a.got.slice(n.a).some((x) => x.t === 'stable'), 'no frontier before the commit');
  await store.pass();
  await done;
  clock.advance(0);
  for (const m of [a, b]) {
    const after = m.got.slice(n[m.id as 'a' | 'b']).filter((x) => x.t !== 'log');
    assert.deepEqual(after, [{ t: 'stable', pos: 2 }], `${m.id}: the frontier confirms it`);
  }
  // A protocol-4 member acks only what it is confirmed, and is confirmed by a committed message.
  const old = member('old');
  await welcomed(host, store, clock, old, 'old', 4);
  const from = old.got.length;
  host.receive('a', say(2, 'three'));
  await endOfTask(clock);
  await store.pass();
  clock.advance(0);
  assert.deepEqual(
    old.got.slice(from).map((m) => m.t + (m.t === 'log' && m.tentative ? ' tentative' : '')),
    ['log tentative', 'committed'],
  );
});

// spec: SEC-CONTAINED
test('a failed append poisons the room: nothing later of it is sent, members are told and closed, and the room reloads from the store', async () => {
  const store = new GatedStore();
  const clock = new FakeClock({ microtasks: true });
  const failures: string[] = [];
  const registry = new RoomRegistry({ store, clock, events: { failed: (_h, stage) => failures.push(stage) } });
  const host = (await registry.acquire('r', chat)) as RoomHost;
  const a = member('a');
  const b = member('b');
  await welcomed(host, store, clock, a, 'a', 3);
  await welcomed(host, store, clock, b, 'b', 3);
  host.receive('a', say(1, 'stored'));
  await endOfTask(clock);
  await store.pass();
  const sent = { a: a.got.length, b: b.got.length };

  store.inner.failAppend({ stage: 'during' });
  host.receive('a', say(2, 'lost'));
  await endOfTask(clock);
  // An op after the failed one: it must never be announced either.
  host.receive('b', say(1, 'after'));
  await endOfTask(clock);
  await store.pass();
  assert.equal(host.state, 'failed');
  assert.deepEqual(failures, ['commit']);
  for (const [m, n] of [
    [a, sent.a],
    [b, sent.b],
  ] as const) {
    const later = m.got.slice(n);
    assert.deepEqual(
      later.map((x) => x.t),
      ['error'],
      `${m.id} got only the error: ${JSON.stringify(later)}`,
    );
    assert.equal((later[0] as { code: string }).code, 'storage-failed');
    assert.deepEqual(m.closed && [m.closed.code, m.closed.refused], [1011, 'storage-failed']);
  }
  assert.equal(registry.get('r'), undefined, 'dropped from memory');
  // Later input to the failed host is ignored.
  host.receive('b', say(2, 'ignored'));
  await endOfTask(clock);
  assert.equal(store.waiting, 0);

  const again = (await registry.acquire('r', chat)) as RoomHost;
  assert.notEqual(again, host);
  assert.equal(again.engine.head(), 1, 'reloaded with what the store holds: the first op only');
  const c = member('c');
  await welcomed(again, store, clock, c, 'a');
  const w = c.got.find((m) => m.t === 'welcome');
  assert.ok(w && w.t === 'welcome' && w.highWater === 1, 'the client resends seq 2');
});

// spec: STABLE-CHECKPOINT
test('checkpoints are written apart from commits, after them, and no output waits for one', async () => {
  const store = new GatedStore();
  const clock = new FakeClock({ microtasks: true });
  const checkpointed: number[] = [];
  const host = await hostOver(store, clock, { checkpointEvery: 2, events: { checkpointed: (p) => checkpointed.push(p) } });
  const a = member('a');
  await welcomed(host, store, clock, a, 'a');
  for (let seq = 1; seq <= 2; seq++) {
    host.receive('a', say(seq, `m${seq}`));
    await endOfTask(clock);
    await store.pass();
    host.receive('a', { t: 'ack', pos: seq });
    await endOfTask(clock);
  }
  // The stable frontier reached 2: the checkpoint is appended in a turn of its own, and the
  // stable message that made it due went out while it is still held.
  assert.equal(store.waiting, 1);
  assert.deepEqual(store.calls.at(-1)?.checkpoint?.pos, 2);
  assert.ok(a.got.some((m) => m.t === 'stable' && m.pos === 2));
  // Commit appends carry entries and client records, never a checkpoint; checkpoint appends nothing else.
  for (const w of store.calls) assert.ok(!(w.checkpoint && (w.entries?.length || Object.keys(w.clients ?? {}).length)), JSON.stringify(w));
  // An op after it is sequenced and, once stored, announced: the checkpoint never held it up.
  host.receive('a', say(3, 'm3'));
  await endOfTask(clock);
  await store.pass();
  assert.ok(a.got.some((m) => m.t === 'log' && m.from === 3));
  assert.deepEqual(checkpointed, [2]);
  assert.equal(store.inner.disk.rooms.get('r')!.checkpoint.pos, 2, 'the store holds the checkpoint');
  host.receive('a', { t: 'ack', pos: 3 });
  await endOfTask(clock);
  await store.pass();
  // Released, the host writes the latest checkpoint.
  const released = host.release();
  await endOfTask(clock);
  await store.pass();
  await released;
  assert.equal(store.inner.disk.rooms.get('r')!.checkpoint.pos, 3);
});

// spec: LOG-CONTIGUOUS
test('two hosts of one room: the second to append loses (fenced) and stops serving; the first goes on', async () => {
  const store = new GatedStore();
  const clock = new FakeClock({ microtasks: true });
  const failed: unknown[] = [];
  const first = await hostOver(store, clock);
  const second = await hostOver(store, clock, { events: { failed: (_s, e) => failed.push(e) } });
  const a = member('a');
  const b = member('b');
  await welcomed(first, store, clock, a, 'a');
  // The second host's claim names the rev both loaded: the first moved past it.
  second.join(b);
  second.receive('b', hello('b'));
  await endOfTask(clock);
  await store.pass();
  assert.equal(second.state, 'failed');
  assert.equal((failed[0] as { code?: string }).code, 'fenced');
  assert.ok(!b.got.some((m) => m.t === 'welcome'), 'the loser announced nothing');
  assert.equal(b.closed?.refused, 'storage-failed');
  first.receive('a', say(1, 'still here'));
  await endOfTask(clock);
  await store.pass();
  assert.equal(first.state, 'serving');
  assert.ok(a.got.some((m) => m.t === 'log'));
  assert.equal(store.inner.disk.rooms.get('r')!.log.length, 1);
});

test('an idle room is unloaded and reloads from the store on the next join', async () => {
  const store = new GatedStore();
  const clock = new FakeClock({ microtasks: true });
  const registry = new RoomRegistry({ store, clock, idleUnloadMs: 1000 });
  const host = (await registry.acquire('r', chat)) as RoomHost;
  const a = member('a');
  await welcomed(host, store, clock, a, 'a');
  host.receive('a', say(1, 'x'));
  await endOfTask(clock);
  await store.pass();
  host.leave('a');
  await endOfTask(clock);
  await store.pass();
  clock.advance(1001);
  registry.tick();
  assert.deepEqual(registry.names(), []);
  assert.equal(host.state, 'released');
  // A join while it is being handed back waits for that, then loads what was stored.
  const next = registry.acquire('r', chat);
  await endOfTask(clock);
  await store.pass();
  const again = (await next) as RoomHost;
  assert.notEqual(again, host);
  assert.equal(again.engine.head(), 1);
  assert.equal(typeof (await registry.acquire('r', { ...chat, version: chat.version + 1 } as Machine<any, any>)), 'string', 'another machine is refused');
});

const countV1 = defineMachine({
  name: 'count',
  version: 1,
  initial: { n: 0 },
  ops: {
    add(s, by: number) {
      s.n += by;
    },
  },
});
const countV2 = defineMachine({
  name: 'count',
  version: 2,
  initial: { total: 0 },
  ops: {
    add(s, a: { by: number }) {
      s.total += a.by;
    },
  },
  migrateFrom: { machine: countV1, state: (s1) => ({ total: s1.n }), op: (op) => ({ name: 'add', args: { by: op.args } }) },
});

// spec: AUTH-STORED, REC-MIGRATE-ONCE
test('a room migrated on load appends the migration before any input, and announces nothing of it before it is stored: the welcome of a known client waits for its commit', async () => {
  // Found by the simulator (an upgrade mid-run): the join's output carried the migration entry
  // and nothing to send, so it was not queued, and the welcome that followed (bookkeeping, as
  // the client's record was stored) went out with the migrated checkpoint before the append.
  const store = new GatedStore();
  const clock = new FakeClock({ microtasks: true });
  // Under v1: client a is known to the room and one of its ops is stored.
  const loaded1 = await store.inner.open('r', { machine: countV1.name, version: countV1.version, initial: countV1.initial });
  const v1 = new RoomHost({ name: 'r', machine: countV1, loaded: loaded1, store: store.inner, clock });
  const a1 = member('a1');
  v1.join(a1);
  v1.receive('a1', hello('a', countV1));
  await endOfTask(clock);
  await settle();
  v1.receive('a1', { t: 'ops', ops: [{ seq: 1, name: 'add', args: 2 }] });
  await endOfTask(clock);
  await settle();
  await v1.release();
  // The server restarts on v2: the room migrates as it loads; a (upgraded too) reconnects.
  const loaded2 = await store.open('r', { machine: countV2.name, version: countV2.version, initial: countV2.initial });
  loaded2.durable.version = loaded2.meta.version; // as RoomRegistry does
  const disk = () => store.inner.disk.rooms.get('r')!;
  const held = () => disk().checkpoint.pos + disk().log.length;
  const v2 = new RoomHost({ name: 'r', machine: countV2, loaded: loaded2, store, clock });
  assert.equal(v2.engine.head(), 2, 'the migration entry follows the op');
  // It is appended as the room loads, before any input (and the host is not settled until it lands).
  await endOfTask(clock);
  assert.equal(store.waiting, 1, 'the migration is being appended');
  assert.equal(v2.settled, false);
  const a = member('a2', (m) => {
    if (m.t === 'welcome')
      assert.ok(
        Math.max(m.checkpoint?.pos ?? 0, m.from - 1 + m.entries.length) <= held(),
        `welcome up to ${m.checkpoint?.pos} sent while the store holds ${held()}`,
      );
  });
  v2.join(a);
  v2.receive('a2', hello('a', countV2, 1));
  await endOfTask(clock);
  assert.deepEqual(
    a.got.map((m) => m.t),
    [],
    'no welcome before the migration is stored',
  );
  await store.pass();
  const w = a.got.find((m) => m.t === 'welcome');
  assert.ok(w && w.t === 'welcome' && w.checkpoint?.pos === 2 && isDeepStrictEqual(w.checkpoint.state, { total: 2 }), JSON.stringify(a.got));
});
