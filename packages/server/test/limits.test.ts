/**
 * Resource bounds of the server adapter (docs/security.md, "Limits and backpressure"): silent
 * connections, and every refusal counted and logged with its reason. Structural checks only
 * (counters, bounds, order of events), never timings.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { connect as netConnect } from 'node:net';
import pino from 'pino';
import { PROTOCOL_VERSION, type Machine } from '@hercules/core';
import { createServer, AuthError, type ServerOptions } from '../src/index.ts';
import { chat } from '../../../apps/machines.ts';
import { tempDir, until, rawConnection } from './helpers.ts';

async function server(t: { after: (fn: () => unknown) => void }, tag: string, extra: Partial<ServerOptions> = {}) {
  const { dir, cleanup } = tempDir(tag);
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l));
      done();
    },
  });
  const srv = await createServer({ port: 0, dataDir: dir, machines: [chat], log: pino({ level: 'info' }, sink), ...extra });
  t.after(async () => {
    await srv.close();
    cleanup();
  });
  return Object.assign(srv, { lines });
}

const value = async (srv: { metrics: any }, name: string, labels: Record<string, string> = {}) => {
  const v = srv.metrics[name] ? ((await srv.metrics[name].get()).values as { value: number; labels: Record<string, string> }[]) : [];
  return v.filter((x) => Object.entries(labels).every(([k, l]) => x.labels[k] === l)).reduce((a, x) => a + x.value, 0);
};
const says = (from: number, n: number, text = 'x') => ({
  t: 'ops' as const,
  ops: Array.from({ length: n }, (_, i) => ({ seq: from + i, name: 'say', args: { text } })),
});

// spec: SEC-LIMITS
test('connections that never say hello are closed after the hello timeout, counted and logged; one that says hello stays', async (t) => {
  const srv = await server(t, 'hello', { limits: { helloTimeoutMs: 300 }, heartbeatMs: 60_000 });
  const silent = await Promise.all(Array.from({ length: 40 }, () => rawConnection(srv.url, 'r')));
  // A connection that starts a frame and never finishes it says nothing either.
  const partial = netConnect(srv.port, '127.0.0.1');
  partial.on('error', () => {});
  partial.resume(); // read what the server sends, so its end is seen
  let partialClosed = false;
  partial.on('close', () => {
    partialClosed = true;
  });
  partial.write(
    'GET /?room=r HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
  );
  partial.write(Buffer.from([0x82, 0xfe, 0x01, 0x00, 1, 2, 3, 4, 0x93])); // binary, 256 bytes announced, 1 sent
  const ok = await rawConnection(srv.url, 'r');
  ok.hello('talker', chat);
  await until(() => silent.every((s) => s.closed()) && partialClosed, 10_000, 'silent connections closed');
  for (const s of silent) assert.equal(s.closed()!.code, 4010);
  const err = silent[0].msgs.find((m) => m.t === 'error');
  assert.ok(err && err.t === 'error' && err.code === 'hello-timeout' && /no hello within 300 ms/.test(err.message), JSON.stringify(err));
  assert.equal(await value(srv, 'refusedConnections', { reason: 'hello-timeout' }), 41);
  assert.equal(srv.lines.filter((l) => l.reason === 'hello-timeout').length, 41, 'each is logged with its reason');
  assert.equal(ok.closed(), undefined, 'a connection that said hello is not closed');
  assert.ok(ok.welcomed());
  ok.ws.close();
});

/** A raw TCP connection to the server that sends `bytes` (nothing, or part of a request) and reads what comes back. */
function tcp(port: number, bytes = '') {
  const socket = netConnect(port, '127.0.0.1');
  let received = '';
  let closed = false;
  socket.on('error', () => {});
  socket.on('data', (d) => {
    received += d.toString();
  });
  socket.on('close', () => {
    closed = true;
  });
  if (bytes) socket.write(bytes);
  return { socket, received: () => received, closed: () => closed };
}
const HALF_UPGRADE = 'GET /?room=r HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n';

// spec: SEC-LIMITS
test('connections that never finish their upgrade request are closed at the upgrade timeout, counted and logged: silent ones and half-sent headers', async (t) => {
  const srv = await server(t, 'upgrade-timeout', { limits: { upgradeTimeoutMs: 300, helloTimeoutMs: 60_000 }, heartbeatMs: 60_000 });
  const silent = Array.from({ length: 30 }, () => tcp(srv.port));
  const half = Array.from({ length: 20 }, () => tcp(srv.port, HALF_UPGRADE));
  // A client that completes its upgrade (and then says nothing) is the hello timeout's, not this bound's.
  const upgraded = await rawConnection(srv.url, 'r');
  t.after(() => {
    for (const c of [...silent, ...half]) c.socket.destroy(); // before the server's close, which waits for them
  });
  await until(() => [...silent, ...half].every((c) => c.closed()), 10_000, 'every unfinished connection closed');
  assert.equal(await value(srv, 'refusedConnections', { reason: 'upgrade-timeout' }), 50);
  assert.equal(srv.lines.filter((l) => l.reason === 'upgrade-timeout').length, 50, 'each is logged with its reason');
  for (const c of half) assert.match(c.received(), /^HTTP\/1\.1 408 /, 'a peer that sent part of a request is told');
  for (const c of silent) assert.equal(c.received(), '', 'a peer that sent nothing is not');
  assert.equal(await value(srv, 'pendingConnections'), 0);
  assert.equal(upgraded.closed(), undefined, 'an upgraded connection is not closed by this bound');
  // Plain HTTP requests are not cut either: their first request ends the wait.
  assert.equal((await fetch(`http://127.0.0.1:${srv.port}/healthz`)).status, 200);
  upgraded.ws.close();
});

// spec: SEC-LIMITS
test('past maxPendingConnections the oldest connection without a request is closed (server-full); upgrades go on', async (t) => {
  const srv = await server(t, 'pending-cap', { limits: { upgradeTimeoutMs: 60_000, maxPendingConnections: 5 }, heartbeatMs: 60_000 });
  const conns: ReturnType<typeof tcp>[] = [];
  t.after(() => {
    for (const c of conns) c.socket.destroy();
  });
  for (let i = 0; i < 5; i++) {
    conns.push(tcp(srv.port, i === 0 ? HALF_UPGRADE : ''));
    await until(async () => (await value(srv, 'pendingConnections')) === i + 1, 5000, `connection ${i} pending`);
  }
  for (let i = 0; i < 3; i++) conns.push(tcp(srv.port));
  await until(() => conns.filter((c) => c.closed()).length === 3, 5000, 'three closed');
  assert.deepEqual(
    conns.map((c) => c.closed()),
    [true, true, true, false, false, false, false, false],
    'the oldest three',
  );
  assert.match(conns[0].received(), /^HTTP\/1\.1 503 /);
  assert.equal(await value(srv, 'refusedConnections', { reason: 'server-full' }), 3);
  assert.equal(await value(srv, 'pendingConnections'), 5);
  const ok = await rawConnection(srv.url, 'r');
  ok.hello('talker', chat);
  await until(() => ok.welcomed(), 5000, 'a WebSocket client still gets in');
  ok.ws.close();
});

// spec: SEC-LIMITS
test('every refused or cut connection is counted and logged with its reason', async (t) => {
  const srv = await server(t, 'reasons', {
    authenticate: (req) => {
      const token = new URL(req.url ?? '/', 'http://x').searchParams.get('token');
      if (token === 'bad') throw new AuthError('bad signature');
      return { user: token ?? 'anon' };
    },
    access: (id) => (id?.user === 'nobody' ? 'none' : 'write'),
    limits: { maxClientsPerRoom: 1, helloTimeoutMs: 300 },
    heartbeatMs: 60_000,
  });
  const first = await rawConnection(srv.url, 'full');
  first.hello('first', chat);
  await until(() => first.welcomed(), 5000, 'welcome');
  const cases: [string, () => Promise<{ closed: () => unknown }>][] = [
    ['unauthenticated', () => rawConnection(srv.url, 'r', '&token=bad')],
    ['forbidden', () => rawConnection(srv.url, 'r', '&token=nobody')],
    ['bad-room', () => rawConnection(srv.url, '')],
    [
      'room-full',
      async () => {
        const c = await rawConnection(srv.url, 'full');
        c.hello('second', chat);
        return c;
      },
    ],
    [
      'machine-mismatch',
      async () => {
        const c = await rawConnection(srv.url, 'r');
        c.hello('m', { ...chat, name: 'no-such-machine' } as Machine<any, any>);
        return c;
      },
    ],
    [
      'server-too-old',
      async () => {
        const c = await rawConnection(srv.url, 'r');
        c.hello('n', { ...chat, version: 99 } as Machine<any, any>);
        return c;
      },
    ],
    [
      'client-too-old',
      async () => {
        const c = await rawConnection(srv.url, 'r');
        c.hello('o', { ...chat, version: chat.version - 1 } as Machine<any, any>);
        return c;
      },
    ],
    [
      'protocol-version',
      async () => {
        const c = await rawConnection(srv.url, 'r');
        c.hello('p', chat, { protocol: PROTOCOL_VERSION + 1 });
        return c;
      },
    ],
    [
      'malformed-frame',
      async () => {
        const c = await rawConnection(srv.url, 'r');
        c.ws.send(new Uint8Array([0xc1, 0xc1]));
        return c;
      },
    ],
    [
      'not-ready',
      async () => {
        const c = await rawConnection(srv.url, 'r');
        c.send({ t: 'ack', pos: 0 });
        return c;
      },
    ],
    ['hello-timeout', () => rawConnection(srv.url, 'r')],
    [
      'seq-gap',
      async () => {
        const c = await rawConnection(srv.url, 'r');
        c.hello('g', chat);
        c.send(says(5, 1));
        return c;
      },
    ],
  ];
  for (const [reason, open] of cases) {
    const c = await open();
    await until(() => c.closed(), 5000, `${reason}: closed`);
    assert.equal(await value(srv, 'refusedConnections', { reason }), 1, `${reason} counted`);
    assert.ok(
      srv.lines.some((l) => l.reason === reason),
      `${reason} logged`,
    );
  }
  first.ws.close();
});

test('the CLI takes --hello-timeout and --upgrade-timeout', async (t) => {
  const { dir, cleanup } = tempDir('cli-hello');
  const { spawn } = await import('node:child_process');
  const { createInterface } = await import('node:readline');
  const bin = new URL('../bin/hercules.js', import.meta.url).pathname;
  const machines = new URL('../../../apps/machines.ts', import.meta.url).pathname;
  const p = spawn(
    process.execPath,
    [bin, 'serve', '--machines', machines, '--port', '0', '--data-dir', dir, '--hello-timeout', '200', '--upgrade-timeout', '200'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  t.after(() => {
    p.kill('SIGKILL');
    cleanup();
  });
  let url = '';
  const logged: Record<string, unknown>[] = [];
  createInterface({ input: p.stdout! }).on('line', (l) => {
    try {
      const o = JSON.parse(l);
      logged.push(o);
      if (o.url) url = o.url;
    } catch {
      /* not a log line */
    }
  });
  await until(() => url, 30_000, 'the CLI listening');
  const silent = await rawConnection(url, 'r');
  await until(() => silent.closed(), 5000, 'closed');
  assert.equal(silent.closed()!.code, 4010);
  await until(() => logged.some((l) => l.reason === 'hello-timeout'), 5000, 'logged');
  const port = Number(new URL(url.replace('ws:', 'http:')).port);
  const idle = tcp(port);
  t.after(() => idle.socket.destroy());
  await until(() => idle.closed(), 5000, 'a connection without a request closed');
  await until(() => logged.some((l) => l.reason === 'upgrade-timeout'), 5000, 'logged');
});
