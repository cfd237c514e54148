/**
 * The WebSocket transport on a fake clock and fake sockets: the connect timeout, the backoff
 * between attempts, the watchdog, and what it tells its user.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PROTOCOL_VERSION, ServerCodec, type ServerMessage } from '@hercules/core';
import { FakeClock } from '@hercules/test-utils';
import { WebSocketTransport, type ConnectionStatus, type TransportEvents, type WebSocketLike } from '../src/index.ts';

const WELCOME: ServerMessage = {
  t: 'welcome',
  v: PROTOCOL_VERSION,
  client: 'c',
  author: 'c',
  from: 1,
  entries: [],
  highWater: 0,
  visibleSeq: 0,
  rejected: [],
  stable: 0,
  members: ['c'],
};

/** A socket the test opens, feeds and closes; `close()` reports onclose on the next turn, as browsers do. */
function fakeSockets(clock: FakeClock) {
  const all: FakeSocket[] = [];
  class FakeSocket implements WebSocketLike {
    binaryType = '';
    readyState = 0;
    sent: Uint8Array[] = [];
    closedWith: { code?: number; reason?: string } | undefined;
    onopen: ((ev: unknown) => void) | null = null;
    onclose: ((ev: { code: number; reason: string }) => void) | null = null;
    onerror: ((ev: unknown) => void) | null = null;
    onmessage: ((ev: { data: unknown }) => void) | null = null;
    readonly codec = new ServerCodec();
    readonly openedAt = clock.t;
    constructor(readonly url: string) {
      all.push(this);
    }
    send(data: Uint8Array): void {
      this.sent.push(data);
    }
    close(code?: number, reason?: string): void {
      if (this.closedWith) return;
      this.closedWith = { code, reason };
      this.readyState = 3;
      clock.defer(() => this.onclose?.({ code: code ?? 1005, reason: reason ?? '' }));
    }
    // --- the server's side
    open(): void {
      this.readyState = 1;
      this.onopen?.({});
    }
    deliver(msg: ServerMessage): void {
      this.onmessage?.({ data: this.codec.encode(msg) });
    }
    refuse(code: string): void {
      this.onerror?.({ error: { code, message: code } });
      this.readyState = 3;
      this.onclose?.({ code: 1006, reason: '' });
    }
  }
  /** A socket on a dead link (in a browser): close() starts a closing handshake that never ends. */
  class DeadLinkSocket extends FakeSocket {
    override close(code?: number, reason?: string): void {
      this.closedWith ??= { code, reason };
      this.readyState = 2;
    }
  }
  /** The same in Node's `ws`, which can also drop the socket at once. */
  class TerminableSocket extends DeadLinkSocket {
    terminated = false;
    terminate(): void {
      this.terminated = true;
      this.readyState = 3;
      clock.defer(() => this.onclose?.({ code: 1006, reason: '' }));
    }
  }
  return { all, FakeSocket, DeadLinkSocket, TerminableSocket };
}

function setup(
  opts: { url?: string | string[]; connectTimeoutMs?: number; watchdogMs?: number; backoff?: { minMs?: number; maxMs?: number } } = {},
  socket: 'fake' | 'dead-link' | 'terminable' = 'fake',
) {
  const clock = new FakeClock();
  const sockets = fakeSockets(clock);
  const all = sockets.all;
  const FakeSocket = { fake: sockets.FakeSocket, 'dead-link': sockets.DeadLinkSocket, terminable: sockets.TerminableSocket }[socket];
  const log: string[] = [];
  const statuses: ConnectionStatus[] = [];
  const errors: Error[] = [];
  const events: TransportEvents = {
    opened: () => log.push('opened'),
    message: (m) => log.push(`message ${m.t}`),
    lost: () => log.push('lost'),
    status: (s) => statuses.push(s),
    error: (e) => errors.push(e),
  };
  const transport = new WebSocketTransport({
    url: 'ws://example.test:8787',
    room: 'r',
    WebSocket: FakeSocket,
    clock,
    random: () => 0.5,
    ...opts,
  });
  transport.start(events);
  return { clock, all, transport, log, statuses, errors };
}

/** The code a socket was closed with (a function, so an earlier assertion does not narrow it). */
const closeCode = (s: { closedWith?: { code?: number } }) => s.closedWith?.code;

/** Let the async start of an attempt (the token step) run. */
const turn = () => new Promise((r) => setImmediate(r));

// spec: LIVE-CONVERGE
test('an attempt not welcomed within connectTimeoutMs is given up, named, and retried after a backoff', async () => {
  const { clock, all, transport, errors, statuses } = setup({ connectTimeoutMs: 1000, backoff: { minMs: 100, maxMs: 1000 } });
  await turn();
  assert.equal(all.length, 1);
  assert.match(all[0].url, /^ws:\/\/example\.test:8787\/\?room=r$/);
  all[0].open(); // TCP and WebSocket up, but the server never says welcome
  clock.advance(999);
  assert.equal(closeCode(all[0]), undefined);
  clock.advance(1);
  assert.equal(all[0].closedWith?.code, 4103);
  assert.equal(errors.length, 1);
  assert.match(errors[0].message, /no welcome from ws:\/\/example\.test:8787 within 1000 ms/);
  assert.equal((errors[0] as { code?: string }).code, 'unreachable');
  assert.equal(transport.status(), 'offline');
  assert.equal(transport.lastFailure(), errors[0]);
  // Full jitter: random() 0.5 of the first cap, 100 ms.
  clock.advance(49);
  await turn();
  assert.equal(all.length, 1);
  clock.advance(1);
  await turn();
  assert.equal(all.length, 2, 'a new attempt after the backoff');
  assert.deepEqual(statuses, ['offline', 'connecting']);
});

// spec: LIVE-CONVERGE
test('backoff doubles per failed attempt up to its cap, a run of the same failure is reported once, and a connection welcomed that held for the cap resets it', async () => {
  const { clock, all, transport, errors, statuses } = setup({ backoff: { minMs: 100, maxMs: 1000 } });
  const gaps: number[] = [];
  for (let i = 0; i < 6; i++) {
    await turn();
    const s = all[all.length - 1];
    if (i > 0) gaps.push(s.openedAt - all[all.length - 2].openedAt);
    s.refuse('ECONNREFUSED');
    // Move to the next attempt's time (at most the cap).
    for (let t = 0; t < 1000 && all.length === i + 1; t += 10) {
      clock.advance(10);
      await turn();
    }
  }
  assert.deepEqual(gaps, [50, 100, 200, 400, 500], 'half of 100, 200, 400, 800, then the 1000 cap');
  assert.equal(errors.length, 1, 'one report for the whole run of refusals');
  assert.match(errors[0].message, /connection refused by example\.test:8787/);
  await turn();
  const s = all[all.length - 1];
  s.open();
  s.deliver(WELCOME);
  assert.equal(transport.status(), 'online');
  assert.equal(transport.lastFailure(), undefined);
  clock.advance(1000);
  s.close(1001, 'server going away');
  clock.settle();
  const before = all.length;
  clock.advance(50);
  await turn();
  assert.equal(all.length, before + 1, 'after a connection that held for the cap, the backoff starts again from minMs');
  assert.ok(statuses.includes('online'));
});

// spec: LIVE-CONVERGE
test('connections welcomed and then closed at once by a refusal that recurs back off as failed attempts do, not every 50 ms', async () => {
  const { clock, all, statuses } = setup({ backoff: { minMs: 100, maxMs: 1000 } });
  const gaps: number[] = [];
  for (let i = 0; i < 6; i++) {
    await turn();
    const s = all[all.length - 1];
    if (i > 0) gaps.push(s.openedAt - all[all.length - 2].openedAt);
    s.open();
    s.deliver(WELCOME);
    // The server refuses something at once, every time (a non-fatal error, then a close).
    s.close(4000, 'refused again');
    for (let t = 0; t < 1000 && all.length === i + 1; t += 10) {
      clock.advance(10);
      await turn();
    }
  }
  assert.deepEqual(gaps, [50, 100, 200, 400, 500], 'half of 100, 200, 400, 800, then the 1000 cap, as for refused attempts');
  assert.equal(statuses.filter((x) => x === 'online').length, 6, 'each attempt was welcomed');
});

// spec: LIVE-CONVERGE
test('the watchdog closes a link that has gone quiet for watchdogMs; any frame, a ping too, keeps it open', async () => {
  const { clock, all, log, transport } = setup({ watchdogMs: 1000 });
  await turn();
  const s = all[0];
  s.open();
  s.deliver(WELCOME);
  assert.deepEqual(log, ['opened', 'message welcome']);
  clock.advance(900);
  s.deliver({ t: 'ping' });
  assert.deepEqual(log, ['opened', 'message welcome'], 'pings are the transport’s own');
  clock.advance(900);
  assert.equal(closeCode(s), undefined, '1800 ms after open, but only 900 since the last frame');
  clock.advance(100);
  assert.equal(s.closedWith?.code, 4100);
  assert.deepEqual(log, ['opened', 'message welcome', 'lost']);
  assert.equal(transport.status(), 'offline');
});

// spec: LIVE-DEAD-LINK
test('without watchdogMs, the watchdog is twice the heartbeat the server announces in its pings (at least 2 s); 15 s until then; the app’s choice wins', async () => {
  const quietUntilClosed = async (opts: { watchdogMs?: number }, every: number | undefined) => {
    const { clock, all } = setup(opts);
    await turn();
    const s = all[0];
    s.open();
    s.deliver(WELCOME);
    s.deliver(every === undefined ? { t: 'ping' } : { t: 'ping', every });
    let ms = 0;
    while (closeCode(s) === undefined && ms < 60_000) {
      clock.advance(100);
      ms += 100;
    }
    assert.equal(closeCode(s), 4100);
    return ms;
  };
  assert.equal(await quietUntilClosed({}, 1000), 2000, 'a cluster node pinging every second: 2 s');
  assert.equal(await quietUntilClosed({}, 5000), 10_000);
  assert.equal(await quietUntilClosed({}, 200), 2000, 'not under the 2 s floor');
  assert.equal(await quietUntilClosed({}, undefined), 15_000, 'a server that does not say');
  assert.equal(await quietUntilClosed({}, -5), 15_000, 'nor a nonsense value');
  assert.equal(await quietUntilClosed({ watchdogMs: 4000 }, 1000), 4000, 'the app chose');
});

// spec: LIVE-DEAD-LINK
test('a connection waiting for its welcome (the server locating and loading the room) is bounded by the connect timeout, not by the watchdog', async () => {
  const { clock, all, transport } = setup({ connectTimeoutMs: 10_000, backoff: { minMs: 100, maxMs: 100 } });
  await turn();
  all[0].open();
  all[0].deliver(WELCOME);
  all[0].deliver({ t: 'ping', every: 1000 }); // the watchdog is 2 s from now on
  clock.advance(2000);
  assert.equal(closeCode(all[0]), 4100, 'a silent welcomed link is left after 2 s');
  clock.advance(100);
  await turn();
  const s = all[1];
  s.open();
  clock.advance(6000);
  assert.equal(closeCode(s), undefined, '6 s without a frame before the welcome: still waiting');
  s.deliver(WELCOME);
  assert.equal(transport.status(), 'online');
  clock.advance(1900);
  assert.equal(closeCode(s), undefined);
  clock.advance(100);
  assert.equal(closeCode(s), 4100, 'welcomed, the watchdog applies');
});

// spec: LIVE-DEAD-LINK
test('on a dead link whose close never completes (a browser), the watchdog lets the socket go at once: offline, lost, a new attempt; the old one is no longer heard', async () => {
  const { clock, all, log, transport, statuses } = setup({ watchdogMs: 1000, backoff: { minMs: 100, maxMs: 100 } }, 'dead-link');
  await turn();
  const s = all[0];
  s.open();
  s.deliver(WELCOME);
  clock.advance(1000);
  assert.equal(closeCode(s), 4100, 'asked to close, in the background');
  assert.equal(transport.status(), 'offline', 'not online while the closing handshake waits');
  assert.deepEqual(log, ['opened', 'message welcome', 'lost']);
  assert.equal(s.onmessage, null, 'its handlers are detached');
  clock.advance(50); // full jitter: half of 100
  await turn();
  assert.equal(all.length, 2, 'reconnecting without waiting for the old socket');
  assert.deepEqual(statuses, ['online', 'offline', 'connecting']);
  all[1].open();
  all[1].deliver(WELCOME);
  s.onclose?.({ code: 1006, reason: '' }); // the old one closes at last: nothing happens
  assert.equal(transport.status(), 'online');
  assert.deepEqual(log, ['opened', 'message welcome', 'lost', 'opened', 'message welcome']);
});

// spec: LIVE-DEAD-LINK
test("with Node's ws, the watchdog and the connect timeout terminate the socket rather than wait for a closing handshake", async () => {
  const { clock, all, transport } = setup({ watchdogMs: 1000, connectTimeoutMs: 500, backoff: { minMs: 100, maxMs: 1000 } }, 'terminable');
  await turn();
  const s = all[0] as unknown as { terminated: boolean } & (typeof all)[number];
  s.open();
  s.deliver(WELCOME);
  clock.advance(1000);
  assert.equal(s.terminated, true);
  assert.equal(closeCode(s), undefined, 'no closing handshake begun');
  assert.equal(transport.status(), 'offline');
  clock.advance(50);
  await turn();
  const t = all[1] as unknown as { terminated: boolean } & (typeof all)[number];
  t.open(); // never welcomed
  s.deliver(WELCOME); // the old socket, were it heard, would claim online
  assert.equal(transport.status(), 'connecting');
  assert.equal(t.terminated, false);
  clock.advance(500);
  assert.equal(t.terminated, true, 'the connect timeout terminates too');
  assert.equal(transport.status(), 'offline');
});

test('stop: closed lets go at once and reports lost; failed keeps the status failed and never reconnects', async () => {
  const a = setup();
  await turn();
  a.all[0].open();
  a.all[0].deliver(WELCOME);
  a.transport.stop('closed');
  assert.deepEqual(a.log, ['opened', 'message welcome', 'lost']);
  assert.equal(a.transport.status(), 'closed');
  assert.equal(a.all[0].closedWith?.code, 1000);

  const b = setup({ backoff: { minMs: 10, maxMs: 10 } });
  await turn();
  b.all[0].open();
  b.transport.stop('failed', 'machine-mismatch: no such machine');
  b.clock.advance(10_000);
  await turn();
  assert.equal(b.transport.status(), 'failed');
  assert.equal(b.all.length, 1, 'no new attempt');
  assert.deepEqual(b.log, ['opened', 'lost']);
});

test('a frame that does not decode is reported and the connection replaced', async () => {
  const { clock, all, errors } = setup({ backoff: { minMs: 10, maxMs: 10 } });
  await turn();
  all[0].open();
  all[0].onmessage?.({ data: new Uint8Array([0xc1]) });
  assert.match(errors[0].message, /bad frame from the server/);
  assert.equal(all[0].closedWith?.code, 4101);
  clock.advance(10);
  await turn();
  assert.equal(all.length, 2);
});

test('with several URLs (a cluster without a load balancer), each reconnect after a lost or failed connection tries the next', async () => {
  const { clock, all } = setup({ url: ['ws://a.test:1', 'ws://b.test:2', 'ws://c.test:3'], backoff: { minMs: 100, maxMs: 100 } });
  await turn();
  assert.match(all[0].url, /^ws:\/\/a\.test:1\//);
  all[0].refuse('ECONNREFUSED'); // a: down
  clock.advance(100);
  await turn();
  assert.match(all[1].url, /^ws:\/\/b\.test:2\//);
  all[1].open();
  all[1].deliver(WELCOME); // b serves; then it goes away
  all[1].close(1001, 'server shutting down');
  clock.advance(1);
  clock.advance(100);
  await turn();
  assert.match(all[2].url, /^ws:\/\/c\.test:3\/\?room=r$/);
  all[2].refuse('ECONNREFUSED');
  clock.advance(100);
  await turn();
  assert.match(all[3].url, /^ws:\/\/a\.test:1\//, 'and round again');
});

test('with several URLs, a live server that closes a welcomed connection asking the client back (1012) is tried again first; a room failed there (1011) or a silent server is left', async () => {
  const { clock, all } = setup({ url: ['ws://a.test:1', 'ws://b.test:2', 'ws://c.test:3'], backoff: { minMs: 100, maxMs: 100 }, watchdogMs: 2000 });
  const next = async () => {
    clock.advance(1);
    clock.advance(100);
    await turn();
    return all[all.length - 1];
  };
  await turn();
  all[0].open();
  all[0].deliver(WELCOME);
  // a relayed the room to its owner, which stopped answering: a cuts the relay and asks the
  // client back (it serves any room; the next URL may be the frozen owner itself).
  all[0].close(1012, 'node n1, which served this room, stopped answering; reconnect');
  let s = await next();
  assert.match(s.url, /^ws:\/\/a\.test:1\//);
  // Not welcomed (a refusal before the welcome): another node may serve it.
  s.open();
  s.close(1012, 'room moved, reconnect');
  s = await next();
  assert.match(s.url, /^ws:\/\/b\.test:2\//);
  // b failed the room (a node cut off from NATS does so, and can serve none): the next one.
  s.open();
  s.deliver(WELCOME);
  s.close(1011, 'the room moved to another server; reconnect to resume');
  s = await next();
  assert.match(s.url, /^ws:\/\/c\.test:3\//);
  s.open();
  s.deliver(WELCOME);
  s.close(1012, 'room moved, reconnect');
  s = await next();
  assert.match(s.url, /^ws:\/\/c\.test:3\//, 'c, alive, asked the client back');
  // c goes silent (frozen): the watchdog leaves it for the next URL.
  s.open();
  s.deliver(WELCOME);
  clock.advance(2000);
  s = await next();
  assert.match(s.url, /^ws:\/\/a\.test:1\//);
});

// spec: LIVE-DEAD-LINK
test('once the watchdog follows a short heartbeat, a socket that does not open (a frozen server: its kernel accepts, it never answers the upgrade) is left after max(watchdog, 3 s), not the 10 s connect timeout', async () => {
  const { clock, all, errors } = setup({ url: ['ws://a.test:1', 'ws://b.test:2'], connectTimeoutMs: 10_000, backoff: { minMs: 100, maxMs: 100 } });
  await turn();
  // A first attempt knows no heartbeat yet: the connect timeout alone (its open is not hurried).
  clock.advance(5000);
  assert.equal(closeCode(all[0]), undefined, 'a fresh client waits for the connect timeout');
  all[0].open();
  all[0].deliver(WELCOME);
  all[0].deliver({ t: 'ping', every: 1000 }); // the watchdog is 2 s from now on
  clock.advance(2000);
  assert.equal(closeCode(all[0]), 4100, 'the frozen node is left after 2 s');
  clock.advance(100);
  await turn();
  const s = all[1];
  assert.match(s.url, /^ws:\/\/b\.test:2\//);
  clock.advance(2900);
  assert.equal(closeCode(s), undefined);
  clock.advance(100);
  assert.equal(closeCode(s), 4103, 'no answer to the upgrade within 3 s: given up');
  assert.match(errors[errors.length - 1].message, /no answer from ws:\/\/b\.test:2 within 3000 ms/);
  clock.advance(100);
  await turn();
  // An attempt that opened (the server answered) waits for its welcome up to the connect timeout.
  const t = all[2];
  t.open();
  clock.advance(9000);
  assert.equal(closeCode(t), undefined, 'open, waiting for the room to load');
  t.deliver(WELCOME);
});
