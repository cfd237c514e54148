/**
 * Guarantees an independent harness broke (issue 17), each against a real server on loopback:
 * one argument domain for every replica, op arguments checked by the server before ordering, a
 * client that resynchronises after a gap, and ops under a client id that are not the client's.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Packr } from 'msgpackr';
import { WebSocket } from 'ws';
import { connect, memoryStorage } from '@hercules/client';
import { ClientCodec, HerculesError, PROTOCOL_VERSION, ServerCodec, defineMachine, type ClientMessage, type ServerMessage } from '@hercules/core';
import { createServer } from '../src/index.ts';
import { tempDir, until, online } from './helpers.ts';

/** Keeps whatever it is given: any value outside the domain would show in the state. */
const box = defineMachine({
  name: 'box',
  version: 1,
  initial: { v: {} as Record<string, unknown> },
  ops: {
    put(s, a: { k: string; v: unknown }) {
      s.v[a.k] = a.v;
    },
  },
});

async function server(t: { after: (fn: () => unknown) => void }, tag: string) {
  const { dir, cleanup } = tempDir(tag);
  const srv = await createServer({ port: 0, dataDir: dir, machines: [box], log: 'silent', ackTimeoutMs: 500 });
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  return { srv, dir };
}

/** The client codec's framing, but MessagePack that carries whatever it is given. */
const anyPackr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false });

/** A hand-driven connection: says hello, then sends ops frames with any arguments. */
async function raw(url: string, room: string, client: string) {
  const ws = new WebSocket(`${url}/?room=${room}`);
  const codec = new ClientCodec();
  const msgs: ServerMessage[] = [];
  ws.on('message', (d: Buffer) => msgs.push(codec.decode(new Uint8Array(d))));
  ws.on('error', () => {});
  await new Promise<void>((res) => ws.once('open', () => res()));
  const send = (m: ClientMessage) => ws.send(codec.encode(m));
  send({ t: 'hello', v: PROTOCOL_VERSION, client, machine: { name: box.name, version: box.version }, have: 0 });
  await until(() => msgs.some((m) => m.t === 'welcome'), 5000, 'welcome');
  let seq = 0;
  return {
    msgs,
    /** One op with these arguments, framed as ClientCodec frames ops ([1, firstSeq, name, args]). */
    put: (args: unknown) => ws.send(anyPackr.pack([1, ++seq, 'put', args])),
    /** put({ k: 'x', v: [[[...1...]]] }) nested `depth` arrays deep, as bytes (a packer's recursion would overflow first). */
    putDeep: (depth: number) =>
      ws.send(
        Buffer.concat([
          Buffer.from([0x94, 0x01, ++seq, 0xa3, ...Buffer.from('put'), 0x82, 0xa1, 0x6b, 0xa1, 0x78, 0xa1, 0x76]),
          Buffer.alloc(depth, 0x91),
          Buffer.from([0x01]),
        ]),
      ),
    close: () => ws.close(),
  };
}
const verdicts = (msgs: ServerMessage[]) =>
  msgs.flatMap((m) => (m.t === 'log' ? m.entries.filter((e) => e.k === 'own') : [])) as { seq: number; error?: string; refused?: true }[];

/** A JSON-like print that tells -0, NaN, undefined, Dates and bytes apart. */
const exact = (v: unknown) =>
  JSON.stringify(v, function (k, x) {
    const raw = (this as Record<string, unknown>)[k];
    if (Object.is(raw, -0)) return '«-0»';
    if (typeof raw === 'number' && !Number.isFinite(raw)) return `«${raw}»`;
    if (raw === undefined && k !== '') return '«undefined»';
    if (raw instanceof Date) return `«Date ${raw.getTime()}»`;
    if (raw instanceof Uint8Array) return `«bytes ${raw.length}»`;
    return x;
  });

// spec: OP-ARG-DOMAIN
test('op arguments outside the JSON domain are refused by the server before ordering, so every replica holds the same state', async (t) => {
  const { srv } = await server(t, 'domain');
  const member = await connect({ url: srv.url, room: 'd', machine: box, clientId: 'member', onError: () => {} });
  t.after(() => member.close());
  await online(member);
  const rogue = await raw(srv.url, 'd', 'rogue');
  const bad: [string, unknown][] = [
    ['NaN', NaN],
    ['Infinity', Infinity],
    ['-Infinity', -Infinity],
    ['Date', new Date(0)],
    // (A lone surrogate and -0 cannot cross MessagePack: they arrive as U+FFFD and 0, the same
    // for every receiver; the stubs refuse the one and normalise the other for the submitter.)
    ['undefined', undefined],
    ['bytes', new Uint8Array([1, 2, 3])],
    ['nested 300 deep', 300],
    ['nested 3,000 deep', 3000],
  ];
  for (const [what, v] of bad) {
    if (what.startsWith('nested')) rogue.putDeep(v as number);
    else rogue.put({ k: 'x', v });
  }
  rogue.put({ k: 'ok', v: [1, 'two', { three: 3 }, null, true, -0] }); // MessagePack carries -0 as the integer 0
  await until(() => verdicts(rogue.msgs).length === bad.length + 1, 5000, 'verdicts');
  const vs = verdicts(rogue.msgs);
  bad.forEach(([what], i) => {
    assert.equal(vs[i].refused, true, `${what} is refused before ordering: ${vs[i].error}`);
    assert.match(vs[i].error ?? '(accepted)', /^args\.v.*(JSON|nested deeper|-0|Unicode)/, `${what} is refused with the reason: ${vs[i].error}`);
  });
  assert.equal(vs[bad.length].error, undefined, 'JSON data is ordered');
  await until(() => member.getState('authoritative').v.ok !== undefined, 5000, 'the good op at the member');
  const live = exact(member.getState('authoritative'));
  assert.equal(live, exact({ v: { ok: [1, 'two', { three: 3 }, null, true, 0] } }), 'the live member applied only the op in the domain');
  // A fresh client (catch-up from the server's memory) and, after a restart, from the store.
  const fresh = await connect({ url: srv.url, room: 'd', machine: box, clientId: 'fresh', onError: () => {} });
  await online(fresh);
  assert.equal(exact(fresh.getState('authoritative')), live, 'a fresh client holds the same state');
  await fresh.close();
  rogue.close();
});

// spec: OP-ARG-DOMAIN
test('the op stubs keep arguments in the domain: -0 becomes 0 as JSON would make it, anything else is refused at once', async (t) => {
  const { srv } = await server(t, 'stubs');
  const a = await connect({ url: srv.url, room: 's', machine: box, clientId: 'a', onError: () => {} });
  const b = await connect({ url: srv.url, room: 's', machine: box, clientId: 'b', onError: () => {} });
  t.after(async () => {
    await a.close();
    await b.close();
  });
  await online(a);
  await online(b);
  for (const v of [NaN, Infinity, new Date(0), new Uint8Array(2), 'x\uDC00', { u: undefined }]) {
    assert.throws(
      () => a.ops.put({ k: 'x', v }),
      (e: unknown) => e instanceof HerculesError && e.code === 'bad-argument' && /args\.v/.test(e.message),
    );
  }
  const h = a.ops.put({ k: 'z', v: { n: -0, list: [-0] } });
  assert.ok(Object.is((a.getState('submitted').v.z as { n: number }).n, 0), 'the submitter applies 0 at once, like everyone else will');
  await h.visible;
  await until(() => b.getState('authoritative').v.z !== undefined, 5000, 'delivery');
  assert.equal(exact(b.getState('authoritative')), exact(a.getState('authoritative')));
});

// spec: LOG-FIFO
test('a client that sees a gap in the log reconnects and catches up instead of ignoring every later frame', async (t) => {
  const { srv } = await server(t, 'gap');
  const warnings: string[] = [];
  // a's sockets, so the test can hand it a frame as if the server had sent it.
  let aSocket: WebSocket | undefined;
  class Tapped extends WebSocket {
    constructor(url: string) {
      super(url);
      aSocket = this;
    }
  }
  const a = await connect({ url: srv.url, room: 'g', machine: box, clientId: 'a', WebSocket: Tapped, onError: (e) => warnings.push(e.message) });
  const b = await connect({ url: srv.url, room: 'g', machine: box, clientId: 'b', onError: () => {} });
  t.after(async () => {
    await a.close();
    await b.close();
  });
  await online(a);
  await online(b);
  await b.ops.put({ k: 'one', v: 1 }).visible;
  // (Visible to b once a holds it, maybe before a heard it is stored: LOG-TENTATIVE, protocol 5.)
  await until(() => a.getState('authoritative').v.one === 1, 5000, 'a holds it as stored');
  // A frame that skips positions, as a server bug or a lost frame would: the engine must not
  // sit on it while pings keep the link looking healthy.
  const gap = new ServerCodec().encode({ t: 'log', from: a.positions().authoritative + 5, entries: [] });
  aSocket!.onmessage!({ data: gap } as WebSocket.MessageEvent);
  await until(() => warnings.some((w) => /log gap.*reconnecting/.test(w)), 5000, 'resync warning');
  await online(a);
  await b.ops.put({ k: 'two', v: 2 }).visible;
  await until(() => a.getState('authoritative').v.two === 2, 5000, 'the frame after the gap reaches a');
  assert.deepEqual(a.getState('authoritative'), b.getState('authoritative'));
});

// spec: LOG-ONE-HISTORY, OP-KEPT-AFTER-FATAL
test('two clients under one id: the ops of the second are refused loudly and never reported visible; the first goes on', async (t) => {
  const { srv } = await server(t, 'dup-id');
  const first = await connect({ url: srv.url, room: 'c', machine: box, clientId: 'same', onError: () => {} });
  await online(first);
  for (let i = 0; i < 3; i++) await first.ops.put({ k: `first-${i}`, v: i }).visible;
  await first.close(); // the first client's store keeps its record; the id is in use

  const errors: HerculesError[] = [];
  const second = await connect({
    url: srv.url,
    room: 'c',
    machine: box,
    clientId: 'same',
    onError: (e) => errors.push(e as HerculesError),
    backoff: { minMs: 10_000, maxMs: 10_000 },
  });
  t.after(() => second.close());
  // Offline-made ops under seqs 1..3, which the server already holds from the first client.
  const hs = [0, 1, 2, 3].map((i) => second.ops.put({ k: `second-${i}`, v: i }));
  const settled = await Promise.allSettled(hs.map((h) => h.visible));
  assert.ok(
    settled.every((s) => s.status === 'rejected' && (s.reason as HerculesError).code === 'client-id-conflict'),
    `every pending op rejects with client-id-conflict: ${JSON.stringify(settled.map((s) => s.status))}`,
  );
  assert.equal(second.status(), 'failed');
  assert.ok(
    errors.some((e) => e.code === 'client-id-conflict'),
    'reported through onError',
  );
  assert.throws(
    () => second.ops.put({ k: 'later', v: 0 }),
    (e: unknown) => e instanceof HerculesError && e.code === 'client-id-conflict',
    'a room stopped by a conflicting id refuses new ops with the reason: its store can deliver nothing',
  );

  const watcher = await connect({ url: srv.url, room: 'c', machine: box, clientId: 'watcher', onError: () => {} });
  t.after(() => watcher.close());
  await online(watcher);
  const keys = Object.keys(watcher.getState('authoritative').v);
  assert.deepEqual(keys.sort(), ['first-0', 'first-1', 'first-2'], "none of the second client's ops is in the room");
});

// spec: LOG-ONE-HISTORY
test('a store copied from a backup, behind what the server holds under its id: its stale ops are refused, not reported visible', async (t) => {
  const { srv } = await server(t, 'backup');
  const a = await connect({ url: srv.url, room: 'b', machine: box, clientId: 'c1', onError: () => {} });
  await online(a);
  await a.ops.put({ k: 'a1', v: 1 }).visible;
  await a.ops.put({ k: 'a2', v: 2 }).visible;
  await a.close();
  // An old copy of c1's store: it made one op offline that never reached the server.
  const backup = memoryStorage();
  const offline = await connect({
    url: 'ws://127.0.0.1:1',
    room: 'b',
    machine: box,
    clientId: 'c1',
    storage: backup,
    onError: () => {},
    backoff: { minMs: 10_000, maxMs: 10_000 },
  });
  await offline.ops.put({ k: 'from-backup', v: 1 }).durable;
  await offline.close();
  const restored = await connect({ url: srv.url, room: 'b', machine: box, storage: backup, onError: () => {} });
  t.after(() => restored.close());
  assert.equal(restored.clientId, 'c1');
  const [h] = restored.pending();
  await assert.rejects(
    h.visible,
    (e: unknown) => e instanceof HerculesError && e.code === 'client-id-conflict' && /only ever wrote up to seq 1/.test(e.message),
  );
  const watcher = await connect({ url: srv.url, room: 'b', machine: box, clientId: 'w', onError: () => {} });
  t.after(() => watcher.close());
  await online(watcher);
  assert.deepEqual(Object.keys(watcher.getState('authoritative').v).sort(), ['a1', 'a2']);
});

// spec: LOG-ONE-HISTORY
test("a clone connecting under a live client's id is refused; the original, replaced for a moment, goes on", async (t) => {
  const { srv } = await server(t, 'clone');
  const errors: string[] = [];
  const original = await connect({
    url: srv.url,
    room: 'o',
    machine: box,
    clientId: 'id-1',
    backoff: { minMs: 10, maxMs: 200 },
    onError: (e) => errors.push(`${(e as HerculesError).code}: ${e.message}`),
  });
  t.after(() => original.close());
  await online(original);
  for (let i = 0; i < 3; i++) await original.ops.put({ k: `o${i}`, v: i }).visible;
  // The clone has its own store, with an op under seq 1, made offline.
  const store = memoryStorage();
  const offline = await connect({
    url: 'ws://127.0.0.1:1',
    room: 'o',
    machine: box,
    clientId: 'id-1',
    storage: store,
    onError: () => {},
    backoff: { minMs: 10_000, maxMs: 10_000 },
  });
  await offline.ops.put({ k: 'clone', v: 1 }).durable;
  await offline.close();
  const clone = await connect({ url: srv.url, room: 'o', machine: box, storage: store, onError: () => {} });
  t.after(() => clone.close());
  await assert.rejects(clone.pending()[0].visible, (e: unknown) => e instanceof HerculesError && e.code === 'client-id-conflict');
  await until(() => errors.some((e) => e.startsWith('replaced')), 5000, 'the original was told it was replaced');
  await online(original);
  assert.notEqual(original.status(), 'failed');
  await original.ops.put({ k: 'o3', v: 3 }).visible;
  assert.deepEqual(Object.keys(original.getState('authoritative').v).sort(), ['o0', 'o1', 'o2', 'o3']);
});

// spec: LIVE-HONEST
test('a client whose clock went back an hour takes its id over from its dead connection at once: the server, not the hello, says which is newer', async (t) => {
  const { srv } = await server(t, 'clock-back');
  const { rawConnection } = await import('./helpers.ts');
  const hello = (at: number): ClientMessage => ({
    t: 'hello',
    v: PROTOCOL_VERSION,
    client: 'skewed',
    machine: { name: box.name, version: box.version },
    have: 0,
    at,
  });
  // The first connection, opened by a good clock; the server does not know it is dead yet.
  const before = await rawConnection(srv.url, 'k');
  t.after(() => before.ws.terminate());
  before.send(hello(Date.now()));
  await until(() => before.welcomed(), 5000, 'first welcome');
  // The client's clock went back an hour, and it connects again.
  const after = await rawConnection(srv.url, 'k');
  t.after(() => after.ws.terminate());
  after.send(hello(Date.now() - 3_600_000));
  await until(() => after.welcomed() || after.msgs.some((m) => m.t === 'error'), 5000, 'an answer');
  assert.deepEqual(
    after.msgs.filter((m) => m.t === 'error'),
    [],
    'the new connection is not refused',
  );
  await until(() => before.msgs.some((m) => m.t === 'error' && m.code === 'replaced'), 5000, 'the old one told it was replaced');
});
