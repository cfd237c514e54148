/**
 * A session on its own (one of the room service's named parts, issue 36 item 1): a Connection in
 * memory, a manual clock, a silent logger, and an "input" that records what the session hands to
 * the scheduler. The service around it is room-service.test.ts's and limits.test.ts's.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { ClientCodec, type ServerMessage } from '@hercules/core';
import { FakeClock } from '@hercules/test-utils';
import type { Connection, ConnectionEvents } from '../src/connection.ts';
import { createMetrics } from '../src/metrics.ts';
import { resolveLimits } from '../src/room-service.ts';
import { PRESENCE_BACKLOG_BYTES, Session, UserBuckets, type SessionContext } from '../src/session.ts';

function memoryConnection() {
  const codec = new ClientCodec();
  let events: ConnectionEvents | undefined;
  const got: ServerMessage[] = [];
  const state = { open: true, closed: undefined as { code: number; reason: string } | undefined, paused: false, buffered: 0, terminated: false };
  const conn: Connection = {
    remote: 'memory',
    get isOpen() {
      return state.open;
    },
    get bufferedAmount() {
      return state.buffered;
    },
    listen(e) {
      events = e;
    },
    send(frame) {
      got.push(codec.decode(frame));
    },
    close(code, reason) {
      if (!state.open) return;
      state.open = false;
      state.closed = { code, reason };
      events?.close();
    },
    terminate() {
      state.terminated = true;
      conn.close(1006, 'terminated');
    },
    pause() {
      state.paused = true;
    },
    resume() {
      state.paused = false;
    },
  };
  return { conn, got, state, frame: (m: object) => events!.message(codec.encode(m as never), true), events: () => events! };
}

function setup(limits: Parameters<typeof resolveLimits>[1]['limits'] = {}) {
  const clock = new FakeClock({ start: 0, microtasks: true });
  const metrics = createMetrics();
  const ready: Session[] = [];
  const dropped: Session[] = [];
  const gone: Session[] = [];
  const ctx: SessionContext = {
    clock,
    limits: resolveLimits('test', { limits }),
    metrics,
    log: pino({ level: 'silent' }),
    userBuckets: new UserBuckets(clock, 100),
    input: { ready: (s) => ready.push(s), drop: (s) => dropped.push(s) },
    guard: (_stage, fn) => fn(),
    closing: () => false,
    closed: (s) => gone.push(s),
  };
  const open = (identity?: { user: string; expiresAt?: number }) => {
    const m = memoryConnection();
    const s = new Session(ctx, 'k1', m.conn, { room: 'r', access: 'write', ...(identity ? { identity } : {}) }, 5);
    s.open();
    return { s, ...m };
  };
  return { clock, ctx, ready, dropped, gone, open };
}

test('a session that sends nothing by helloTimeoutMs is cut (hello-timeout, 4010, not fatal); a first frame disarms the timer', () => {
  const { clock, open } = setup({ helloTimeoutMs: 100 });
  const silent = open();
  clock.advance(99);
  assert.equal(silent.state.closed, undefined);
  clock.advance(1);
  assert.deepEqual(silent.state.closed, { code: 4010, reason: 'hello timeout' });
  assert.equal(silent.got[0].t, 'error');
  assert.equal((silent.got[0] as { code: string; fatal: boolean }).code, 'hello-timeout');
  assert.equal((silent.got[0] as { fatal: boolean }).fatal, false);

  const talker = open();
  talker.frame({ t: 'ping' });
  clock.advance(1000);
  assert.equal(talker.state.closed, undefined);
});

test("a frame is queued with its size and handed to the scheduler; the session's close drops its input and tells the service once", () => {
  const { ready, dropped, gone, open } = setup();
  const { s, frame, conn } = open();
  frame({ t: 'ping' });
  assert.equal(s.inbox.length, 1);
  assert.equal(s.queuedBytes, 256, 'a small frame counts FRAME_OVERHEAD_BYTES');
  assert.deepEqual(ready, [s]);
  conn.close(1000, 'bye');
  assert.ok(s.closed);
  assert.ok(dropped.includes(s));
  assert.deepEqual(gone, [s]);
});

test('a peer that ignores backpressure past maxQueuedBytes is cut (rate-limited, 4008)', () => {
  const { open, dropped } = setup({ maxFrameBytes: 1024, maxQueuedBytes: 1024 + (64 << 10) });
  const { s, frame, state } = open();
  const big = { t: 'presence', state: 'x'.repeat(30_000) }; // the scheduler (a recorder here) never takes them
  frame(big);
  frame(big);
  assert.equal(state.closed, undefined, '60 KB queued: under the bound');
  assert.equal(s.inbox.length, 2);
  frame(big);
  assert.deepEqual(state.closed, { code: 4008, reason: 'rate limited' });
  assert.ok(dropped.includes(s), 'its input is dropped (by the scheduler)');
});

test('flow: the connection is paused once its waiting input reaches the mark, and resumed when it drains', () => {
  const { open } = setup();
  const { s, frame, state } = open();
  frame({ t: 'ping' });
  s.flow(1000);
  assert.equal(state.paused, false, 'under the mark: still read');
  s.flow(256);
  assert.equal(state.paused, true);
  s.inbox.length = 0;
  s.flow(256);
  assert.equal(state.paused, false);
});

test('a credential already expired cuts the session at once (unauthenticated, 4401, fatal); one expiring later cuts it then', () => {
  const { open, clock } = setup();
  const expired = open({ user: 'u', expiresAt: Date.now() - 1 });
  assert.deepEqual(expired.state.closed, { code: 4401, reason: 'unauthenticated' });
  assert.equal((expired.got[0] as { fatal: boolean }).fatal, true);
  const later = open({ user: 'v', expiresAt: Date.now() + 50 });
  later.frame({ t: 'ping' }); // past the hello timer
  assert.equal(later.state.closed, undefined);
  const until = Date.now() + 60;
  while (Date.now() < until) {
    // the expiry is wall-clock time: wait it out, then let the timer fire
  }
  clock.advance(50);
  assert.deepEqual(later.state.closed, { code: 4401, reason: 'unauthenticated' });
});

test('output past maxSendBufferBytes makes a slow consumer: terminated, counted', async () => {
  const { open, ctx } = setup({ maxSendBufferBytes: 1000 });
  const { s, state } = open();
  s.send({ t: 'ping' });
  assert.equal(state.terminated, false, 'nothing buffered: it goes out');
  state.buffered = 999;
  s.send({ t: 'error', code: 'internal', message: 'x'.repeat(100), fatal: false });
  assert.equal(state.terminated, true);
  assert.ok(s.closed);
  const v = (await ctx.metrics.slowConsumers.get()).values[0].value;
  assert.equal(v, 1);
});

test('presence for a reader behind on its output is held, the latest per peer, and goes out in one frame when it drains', () => {
  const { open } = setup();
  const { s, state, got } = open();
  state.buffered = PRESENCE_BACKLOG_BYTES + 1;
  s.send({ t: 'presence', peers: [{ client: 'a', value: 1 }] });
  s.send({ t: 'presence', peers: [{ client: 'b', value: 1 }] });
  s.send({ t: 'presence', peers: [{ client: 'a', value: 2 }] });
  assert.equal(got.length, 0);
  s.releaseHeldPresence();
  assert.equal(got.length, 0, 'still behind: still held');
  state.buffered = 0;
  s.releaseHeldPresence();
  assert.equal(got.length, 1);
  assert.deepEqual((got[0] as { peers: unknown }).peers, [
    { client: 'b', value: 1 },
    { client: 'a', value: 2 },
  ]);
});

test("a user's sessions share one op bucket; the last to close drops it", () => {
  const { open, ctx } = setup();
  const a = open({ user: 'u' });
  const b = open({ user: 'u' });
  assert.ok(a.s.userBucket && a.s.userBucket === b.s.userBucket);
  a.s.chargeOps(30);
  assert.equal(b.s.userBucket!.tokens, 70);
  assert.equal(a.s.tokens, ctx.limits.opsBurst - 30);
  a.conn.close(1000, 'bye');
  assert.equal(ctx.userBuckets.size, 1);
  b.conn.close(1000, 'bye');
  assert.equal(ctx.userBuckets.size, 0);
});

test('heartbeat: a silent session is dropped, a paused one is not (its silence is ours)', () => {
  const { open } = setup();
  const quiet = open();
  quiet.s.heartbeat(5000); // alive since it opened: now it must answer
  assert.equal(quiet.state.terminated, false);
  quiet.s.heartbeat(5000);
  assert.equal(quiet.state.terminated, true);
  const paused = open();
  paused.s.heartbeat(5000);
  paused.s.paused = true;
  paused.s.heartbeat(5000);
  assert.equal(paused.state.terminated, false);
});
