/**
 * Issue 40's input bounds (docs/security.md, "Limits and backpressure"): a frame that would
 * decode past the bound is refused before it is decoded, and the budget counts what frames
 * decode to. Structural checks (verdicts, counters, what arrives),
 * never timings; the figures are from bench/src/flood.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type ServerOptions } from '../src/index.ts';
import { chat } from '../../../apps/machines.ts';
import { tempDir, until, rawConnection } from './helpers.ts';

async function server(t: { after: (fn: () => unknown) => void }, tag: string, extra: Partial<ServerOptions> = {}) {
  const { dir, cleanup } = tempDir(tag);
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: 'silent', heartbeatMs: 60_000, ...extra });
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
