/**
 * The one TCP fault proxy (the soak's and the tests'): it forwards both ways, with backpressure,
 * and cuts all its links, some of them, or silences them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { faultProxy } from '../src/fault-proxy.ts';
import { until } from '../src/index.ts';

async function echoServer(): Promise<{ port: number; close: () => void }> {
  const server = createServer((s) => s.pipe(s));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { port: (server.address() as { port: number }).port, close: () => server.close() };
}

async function client(port: number): Promise<Socket> {
  const s = connect(port, '127.0.0.1');
  await once(s, 'connect');
  return s;
}

/** Send `bytes` through `s` and wait until as many came back. */
async function roundTrip(s: Socket, bytes: number): Promise<number> {
  let got = 0;
  const done = new Promise<void>((resolve) =>
    s.on('data', (c: Buffer) => {
      got += c.length;
      if (got >= bytes) resolve();
    }),
  );
  s.write(Buffer.alloc(bytes, 7));
  await done;
  s.removeAllListeners('data');
  return got;
}

test('forwards both ways, 8 MiB through an echo (the proxy pauses a writer its reader cannot keep up with)', async () => {
  const echo = await echoServer();
  const proxy = await faultProxy(echo.port);
  const s = await client(proxy.port);
  assert.equal(await roundTrip(s, 8 << 20), 8 << 20);
  s.destroy();
  await proxy.close();
  echo.close();
});

test('cutSome closes the links chosen and leaves the others forwarding; cut closes all and refuses until heal', async () => {
  const echo = await echoServer();
  const proxy = await faultProxy(echo.port);
  const clients = await Promise.all([0, 1, 2, 3].map(() => client(proxy.port)));
  await until(() => proxy.links() === 4, 5000, 'four links');
  const closed = clients.map((s) => once(s, 'close').then(() => true));
  let i = 0;
  assert.equal(
    proxy.cutSome(() => i++ % 2 === 0),
    2,
  );
  assert.equal(proxy.links(), 2);
  assert.deepEqual(await Promise.all([closed[0], closed[2]]), [true, true]);
  assert.equal(await roundTrip(clients[1]!, 1000), 1000);
  assert.equal(await roundTrip(clients[3]!, 1000), 1000);
  proxy.cut();
  await Promise.all([closed[1], closed[3]]);
  assert.equal(proxy.links(), 0);
  const refused = connect(proxy.port, '127.0.0.1');
  await once(refused, 'close');
  proxy.heal();
  const again = await client(proxy.port);
  assert.equal(await roundTrip(again, 10), 10);
  again.destroy();
  await proxy.close();
  echo.close();
});

test('with rttMs (and jitter) each direction waits half the round trip, and chunks keep their order', async () => {
  const echo = await echoServer();
  const proxy = await faultProxy(echo.port, { rttMs: 60, jitterMs: 20, seed: 7 });
  const s = await client(proxy.port);
  const got: number[] = [];
  const all = new Promise<void>((resolve) =>
    s.on('data', (c: Buffer) => {
      got.push(...c);
      if (got.length >= 50) resolve();
    }),
  );
  const t0 = performance.now();
  // 50 writes of one byte each, some milliseconds apart: each is its own chunk, each with its own jitter.
  for (let i = 0; i < 50; i++) {
    s.write(Buffer.from([i]));
    if (i % 10 === 9) await new Promise((r) => setTimeout(r, 3));
  }
  await all;
  // Timers may fire up to a millisecond early (libuv keeps whole milliseconds): one per direction.
  assert.ok(performance.now() - t0 >= 60 - 2, `the echo came back after ${performance.now() - t0} ms, under the 60 ms round trip`);
  assert.deepEqual(
    got,
    Array.from({ length: 50 }, (_, i) => i),
  );
  s.destroy();
  await proxy.close();
  echo.close();
});
