/**
 * A flood inside the limits (issue 17, item 4; docs/security.md, "Memory and fairness under a
 * flood"): rooms take turns, so a flooded room does not starve another; a connection's input
 * waits in TCP, not in the server's memory; the server's connections are bounded. Structural
 * checks (order of events, bounds, counters), never timings. The measured figures are from
 * bench/src/flood.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defineMachine } from '@hercules/core';
import { createServer, type ServerOptions } from '../src/index.ts';
import { FairQueue } from '../src/fair-queue.ts';
import { chat } from '../../../apps/machines.ts';
import { tempDir, until, rawConnection } from './helpers.ts';

/** An op that costs real CPU, like an app's op over a large state. */
const heavy = defineMachine({
  name: 'heavy',
  version: 1,
  initial: { n: 0, x: 0 },
  ops: {
    burn(s, a: { loops: number }) {
      let x = s.x;
      for (let i = 0; i < a.loops; i++) x = (x * 31 + i) % 1_000_003;
      s.x = x;
      s.n++;
    },
  },
});

async function server(t: { after: (fn: () => unknown) => void }, tag: string, extra: Partial<ServerOptions> = {}) {
  const { dir, cleanup } = tempDir(tag);
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat, heavy], log: 'silent', ...extra });
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  return srv;
}

test("FairQueue: round robin over groups, then over each group's members; add is idempotent; delete forgets", () => {
  const q = new FairQueue<string, string>();
  for (const [g, m] of [
    ['A', 'a1'],
    ['A', 'a2'],
    ['A', 'a3'],
    ['B', 'b1'],
    ['A', 'a1'],
    ['C', 'c1'],
  ])
    q.add(g, m);
  assert.equal(q.size, 5, 'a1 added twice waits once');
  assert.equal(q.groups, 3);
  const order: string[] = [];
  for (let n = q.take(); n; n = q.take()) {
    order.push(n.member);
    if (n.member === 'b1' && order.length < 5) q.add('B', 'b1'); // B has more to do: it goes to the back
  }
  // A, B, C take turns; A's three members do not get three turns in a row.
  assert.deepEqual(order, ['a1', 'b1', 'c1', 'a2', 'b1', 'a3']);
  q.add('A', 'a1');
  q.add('B', 'b1');
  q.add('A', 'a2');
  q.delete('A', 'a1');
  q.delete('A', 'a2');
  assert.equal(q.size, 1);
  assert.deepEqual(q.take(), { group: 'B', member: 'b1' });
  assert.equal(q.take(), undefined);
});

// spec: SEC-FAIR
test('a room flooded with costly ops does not starve another: its op is ordered while the flood is still being handled', async (t) => {
  // No rate limit: only the server's turns stand between the flood and the other room.
  const srv = await server(t, 'fair', { limits: { opsPerSecond: 1e9, opsBurst: 1e9, bytesPerSecond: 1e12, bytesBurst: 1e12 } });
  const flooder = await rawConnection(srv.url, 'flooded');
  flooder.hello('flooder', heavy);
  const other = await rawConnection(srv.url, 'quiet');
  other.hello('other', heavy);
  await until(() => flooder.welcomed() && other.welcomed(), 5000, 'welcomes');
  const N = 3000;
  flooder.send({ t: 'ops', ops: Array.from({ length: N }, (_, i) => ({ seq: i + 1, name: 'burn', args: { loops: 100_000 } })) });
  // The flood has started: some of it is ordered. Only now does the other room send its op.
  await until(() => flooder.verdicts() > 0, 20_000, 'the flood under way');
  other.send({ t: 'ops', ops: [{ seq: 1, name: 'burn', args: { loops: 1 } }] });
  await until(() => other.verdicts() === 1, 20_000, "the other room's op ordered");
  const floodDoneThen = flooder.verdicts();
  // Before the server took turns, the whole frame was ordered in one go, and the other room's
  // op only after it: floodDoneThen was N.
  assert.ok(floodDoneThen < N / 2, `the other room waited for ${floodDoneThen} of the flood's ${N} ops`);
  await until(() => flooder.verdicts() === N, 60_000, 'the whole flood ordered');
  flooder.ws.terminate();
  other.ws.terminate();
});

// spec: SEC-FAIR
test('a connection whose input waits is still read, up to its queue bound: small frames are not left in TCP one per turn', async (t) => {
  // One op a second: after the first op, every frame waits for tokens, so the connection always has input waiting.
  // ackTimeoutMs 500: the gauges are refreshed every 25 ms.
  const srv = await server(t, 'read-ahead', { ackTimeoutMs: 500, limits: { opsPerSecond: 1, opsBurst: 1 } });
  const c = await rawConnection(srv.url, 'r');
  c.hello('steady', chat);
  await until(() => c.welcomed(), 5000, 'welcome');
  const samples: number[] = [];
  const sampler = setInterval(async () => samples.push((await srv.metrics.inputQueued.get()).values[0]?.value ?? 0), 10);
  const FRAMES = 40;
  // A frame every 50 ms, each in a socket read of its own (a busy client's ops and acks).
  for (let i = 1; i <= FRAMES; i++) {
    c.send({ t: 'ops', ops: [{ seq: i, name: 'say', args: { text: `message ${i}` } }] });
    await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((r) => setTimeout(r, 100));
  clearInterval(sampler);
  const one = samples.find((q) => q > 0) ?? 0,
    most = Math.max(...samples);
  // The server used to stop reading a connection as soon as one frame of it waited: the rest
  // stayed in TCP and were read about one a turn, so a connection that sends small frames faster
  // than it gets turns (three members of a busy room next to a flooded one) fell behind for
  // good, its delays growing without end. Now it is read until its queue nears maxQueuedBytes.
  assert.ok(one > 0, 'a frame was seen waiting (the gauge is live)');
  assert.ok(most >= 10 * one, `the server held ${most} bytes of input after ${FRAMES} frames, ${one} after the first waiting ones`);
  assert.equal(c.closed(), undefined, 'the connection is not cut');
  c.ws.terminate();
});

// spec: SEC-LIMITS
test('a client sending far over its rate is paused, not cut: its input waits in TCP, the server holds at most maxQueuedBytes of it', async (t) => {
  const maxFrameBytes = 64 << 10;
  const srv = await server(t, 'bound', { ackTimeoutMs: 500, limits: { maxFrameBytes, opsPerSecond: 200, opsBurst: 200 } });
  const bound = 2 * maxFrameBytes + (64 << 10); // the default maxQueuedBytes for this frame size
  const c = await rawConnection(srv.url, 'r');
  c.hello('pusher', chat);
  await until(() => c.welcomed(), 5000, 'welcome');
  // 200 frames of 100 ops of ~400 bytes (~40 KB each, 8 MB in all): 20,000 ops, 100 s at 200/s.
  const text = 'z'.repeat(400);
  for (let f = 0; f < 200; f++) c.send({ t: 'ops', ops: Array.from({ length: 100 }, (_, i) => ({ seq: f * 100 + i + 1, name: 'say', args: { text } })) });
  let maxQueued = 0;
  for (let i = 0; i < 30; i++) {
    await new Promise((r) => setTimeout(r, 50));
    maxQueued = Math.max(maxQueued, (await srv.metrics.inputQueued.get()).values[0]?.value ?? 0);
  }
  assert.equal(c.closed(), undefined, 'the connection is not cut');
  assert.ok(((await srv.metrics.rateLimited.get()).values[0]?.value ?? 0) > 0, 'it was paused for its rate');
  assert.ok(maxQueued > 0, 'input was seen waiting (the gauge is live)');
  assert.ok(maxQueued <= bound, `the server held ${maxQueued} bytes of its input, over ${bound}`);
  assert.ok(c.ws.bufferedAmount > 1_000_000, `the rest waits on the client's side (${c.ws.bufferedAmount} bytes unsent there)`);
  assert.ok(c.verdicts() < 2000, `only what the rate allows is ordered (${c.verdicts()})`);
  c.ws.terminate();
});

// spec: SEC-LIMITS
test('connections past limits.maxConnections are refused with server-full (non-fatal, close 4011); a freed place is taken again', async (t) => {
  const srv = await server(t, 'full', { limits: { maxConnections: 3 } });
  const open = await Promise.all([1, 2, 3].map(() => rawConnection(srv.url, 'r')));
  const fourth = await rawConnection(srv.url, 'r');
  await until(() => fourth.closed(), 5000, 'refusal');
  assert.equal(fourth.closed()!.code, 4011);
  const err = fourth.msgs.find((m) => m.t === 'error');
  assert.ok(err && err.t === 'error' && err.code === 'server-full' && !err.fatal, JSON.stringify(err));
  assert.equal((await srv.metrics.refusedConnections.get()).values.find((v) => v.labels.reason === 'server-full')?.value, 1);
  open[0].ws.close();
  await until(async () => ((await srv.metrics.connections.get()).values[0]?.value ?? 0) === 2, 5000, 'a place freed');
  const fifth = await rawConnection(srv.url, 'r');
  fifth.hello('fifth', chat);
  await until(() => fifth.welcomed(), 5000, 'welcome');
  for (const c of [...open, fifth]) c.ws.terminate();
});

test('limits are checked when the server is created: an unknown limit or a queue bound below one frame is refused', async () => {
  const { dir, cleanup } = tempDir('lim');
  try {
    await assert.rejects(
      createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent', limits: { maxQueuedFrames: 64 } as never }),
      /unknown limit limits\.maxQueuedFrames/,
    );
    await assert.rejects(
      createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent', limits: { maxFrameBytes: 1 << 20, maxQueuedBytes: 1 << 20 } }),
      /maxQueuedBytes .* must be at least/,
    );
  } finally {
    cleanup();
  }
});
