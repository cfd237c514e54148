/**
 * Issue 40's input bounds (docs/security.md, "Limits and backpressure"): a frame that would
 * decode past the bound is refused before it is decoded, the budget counts what frames decode
 * to, presence is in the same per-connection and per-user budget as ops, and a slow reader is
 * held at most one presence value per peer. Structural checks (verdicts, counters, what arrives),
 * never timings; the figures are from bench/src/flood.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defineMachine, type ServerMessage } from '@hercules/core';
import { createServer, type ServerOptions } from '../src/index.ts';
import { chat } from '../../../apps/machines.ts';
import { tempDir, until, rawConnection } from './helpers.ts';

/** A machine without a presence schema: any value in the domain is a presence. */
const board = defineMachine({ name: 'board', version: 1, initial: { n: 0 }, ops: { bump: (s) => void s.n++ } });

async function server(t: { after: (fn: () => unknown) => void }, tag: string, extra: Partial<ServerOptions> = {}) {
  const { dir, cleanup } = tempDir(tag);
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat, board], log: 'silent', heartbeatMs: 60_000, ...extra });
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  return srv;
}

/** An ops frame [1, seq, 'say', args] whose args are `n` empty maps, a byte each (the harness's frame). */
function emptyMapsOp(seq: number, n: number): Uint8Array {
  const f = new Uint8Array(8 + 5 + n).fill(0x80);
  f.set([0x94, 0x01, 0xcc, seq, 0xa3, 0x73, 0x61, 0x79, 0xdd]);
  new DataView(f.buffer).setUint32(9, n);
  return f;
}
const refusedCount = async (srv: { metrics: any }, reason: string) =>
  ((await srv.metrics.refusedConnections.get()).values as { value: number; labels: { reason: string } }[])
    .filter((v) => v.labels.reason === reason)
    .reduce((a, v) => a + v.value, 0);
const presenceOf = (msgs: ServerMessage[], client: string) =>
  msgs.flatMap((m) => (m.t === 'presence' ? m.peers.filter((p) => p.client === client).map((p) => p.value) : []));

// spec: SEC-LIMITS
test('a frame under the size limit that would decode past the bound is refused before decoding: too-large, fatal, close 1009', async (t) => {
  const srv = await server(t, 'amplify');
  const bad = await rawConnection(srv.url, 'r');
  bad.hello('amplifier', chat);
  await until(() => bad.welcomed(), 5000, 'welcome');
  const frame = emptyMapsOp(1, 1_000_000); // 1,000,013 bytes: under 1 MiB; ~60 MB decoded
  assert.ok(frame.length < 1 << 20, 'under the default maxFrameBytes');
  bad.ws.send(frame);
  await until(() => bad.closed(), 5000, 'closed');
  assert.equal(bad.closed()!.code, 1009);
  const err = bad.msgs.find((m) => m.t === 'error');
  assert.ok(err && err.t === 'error' && err.code === 'too-large' && err.fatal, JSON.stringify(err));
  assert.match(err.message, /would decode to more than/);
  assert.equal(bad.verdicts(), 0, 'nothing of it was decoded or ordered');
  assert.equal(await refusedCount(srv, 'too-large'), 1);
  // The room goes on.
  const good = await rawConnection(srv.url, 'r');
  good.hello('honest', chat);
  good.send({ t: 'ops', ops: [{ seq: 1, name: 'say', args: { text: 'still here' } }] });
  await until(() => good.verdicts() === 1, 5000, 'verdict');
  good.ws.terminate();
});

// spec: SEC-LIMITS
test('the byte budget counts the heap a frame decodes to, not its bytes on the wire', async (t) => {
  // 20,000 empty maps: 20 KB on the wire, ~1.4 MB decoded. With 2 MiB of burst and 64 KiB a
  // second, two such frames go at once and the third waits ~15 s; by wire bytes all 20 would.
  const srv = await server(t, 'heap-budget', { limits: { bytesBurst: 2 << 20, bytesPerSecond: 64 << 10 } });
  const c = await rawConnection(srv.url, 'r');
  c.hello('amplifier', chat);
  await until(() => c.welcomed(), 5000, 'welcome');
  for (let seq = 1; seq <= 20; seq++) c.ws.send(emptyMapsOp(seq, 20_000));
  await until(() => c.verdicts() >= 2, 5000, 'the first verdicts');
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(c.verdicts(), 2, 'only what the budget of decoded heap allows is handled');
  assert.ok(((await srv.metrics.rateLimited.get()).values[0]?.value ?? 0) > 0, 'the connection waits for its rate');
  assert.equal(c.closed(), undefined, 'paused, not cut');
  c.ws.terminate();
});

// spec: SEC-LIMITS
test('presence frames take from the same op budget as ops, per connection and per user', async (t) => {
  const srv = await server(t, 'presence-budget', {
    presenceEveryMs: 0, // the room's own pacing off: every accepted value is fanned out at once
    authenticate: (req) => ({ user: new URL(req.url ?? '/', 'http://x').searchParams.get('token') ?? 'nobody' }),
    limits: { opsPerSecond: 1, opsBurst: 5, userOpsPerSecond: 1, userOpsBurst: 8 },
  });
  const watcher = await rawConnection(srv.url, 'p', '&token=watcher');
  watcher.hello('watcher', board);
  const a = await rawConnection(srv.url, 'p', '&token=mallory');
  const b = await rawConnection(srv.url, 'p', '&token=mallory');
  a.hello('a', board);
  b.hello('b', board);
  await until(() => watcher.welcomed() && a.welcomed() && b.welcomed(), 5000, 'welcomes');
  for (let i = 0; i < 30; i++) {
    a.send({ t: 'presence', value: { i } });
    b.send({ t: 'presence', value: { i } });
  }
  await until(() => presenceOf(watcher.msgs, 'a').length + presenceOf(watcher.msgs, 'b').length >= 8, 5000, 'presence seen');
  await new Promise((r) => setTimeout(r, 1000));
  const seenA = presenceOf(watcher.msgs, 'a').length,
    seenB = presenceOf(watcher.msgs, 'b').length;
  // Each connection's burst is 5 (plus its one frame past zero), the user's 8 for both: 60 sent.
  assert.ok(seenA <= 6 && seenB <= 6, `per connection: ${seenA} and ${seenB} of 30 each went out`);
  assert.ok(seenA + seenB <= 10, `per user: ${seenA + seenB} of 60 went out`);
  assert.ok(((await srv.metrics.rateLimited.get()).values[0]?.value ?? 0) > 0, 'they wait for their rate');
  for (const c of [watcher, a, b]) c.ws.terminate();
});

// spec: SEC-LIMITS, PRESENCE-EPHEMERAL
test('a reader that does not read is held the latest presence of each peer, not every update', async (t) => {
  const srv = await server(t, 'presence-slow', {
    presenceEveryMs: 0,
    limits: { opsPerSecond: 1e6, opsBurst: 1e6, bytesPerSecond: 1 << 30, bytesBurst: 1 << 30, maxSendBufferBytes: 1 << 20 },
  });
  const deaf = await rawConnection(srv.url, 'p');
  deaf.hello('deaf', board);
  const writer = await rawConnection(srv.url, 'p');
  writer.hello('writer', board);
  await until(() => deaf.welcomed() && writer.welcomed(), 5000, 'welcomes');
  (deaf.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
  // 5,000 values of ~4 KB (20 MB): far past what the kernel's buffers and maxSendBufferBytes hold.
  const N = 5000;
  for (let i = 1; i <= N; i++) writer.send({ t: 'presence', value: { i, pad: 'x'.repeat(4000) } });
  writer.send({ t: 'presence', value: { i: 'last' } });
  await until(async () => (await srv.metrics.framesIn.get()).values[0]?.value >= N + 3, 20_000, 'every value handled');
  await new Promise((r) => setTimeout(r, 300)); // ticks: the held value is tried again
  assert.equal((await srv.metrics.slowConsumers.get()).values[0]?.value ?? 0, 0, 'the slow reader was not cut');
  (deaf.ws as unknown as { _socket: { resume(): void } })._socket.resume();
  await until(() => presenceOf(deaf.msgs, 'writer').some((v) => (v as { i: unknown }).i === 'last'), 10_000, 'the latest value arrives');
  const got = presenceOf(deaf.msgs, 'writer');
  assert.ok(got.length < N / 2, `${got.length} of ${N + 1} values went to the slow reader: the rest were replaced while it was behind`);
  for (const c of [deaf, writer]) c.ws.terminate();
});
