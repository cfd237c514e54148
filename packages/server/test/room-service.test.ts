/**
 * The room service mounted in an app's own HTTP server, and driven over a Connection that is
 * not a WebSocket: the seams createServer is built from, used without it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from '@hercules/client';
import { ClientCodec, PROTOCOL_VERSION, type ServerMessage } from '@hercules/core';
import { createRoomService, MemoryStore, delayedConnection, type Connection, type ConnectionEvents, type RoomInit } from '../src/index.ts';
import { FakeClock } from '@hercules/test-utils';
import { chat } from '../../../apps/machines.ts';
import { online, until } from './helpers.ts';

test('the room service mounts on a plain node:http server that serves its own routes too', async (t) => {
  const store = new MemoryStore();
  const service = createRoomService({ store, machines: [chat], log: 'silent' });
  const http = createHttpServer((req, res) => {
    if (req.url === '/app/hello') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('hello from the app\n');
      return;
    }
    res.writeHead(404);
    res.end();
  });
  http.on('upgrade', (req, socket, head) => service.handleUpgrade(req, socket, head));
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', () => r()));
  t.after(async () => {
    await service.close();
    await store.close();
    await new Promise<void>((r) => http.close(() => r()));
  });
  const { port } = http.address() as AddressInfo;

  const res = await fetch(`http://127.0.0.1:${port}/app/hello`);
  assert.equal(await res.text(), 'hello from the app\n');

  const a = await connect({ url: `ws://127.0.0.1:${port}`, room: 'mounted', machine: chat });
  const b = await connect({ url: `ws://127.0.0.1:${port}`, room: 'mounted', machine: chat });
  await online(a);
  await online(b);
  await a.ops.say({ text: 'from a mounted service' }).visible;
  await until(() => b.getState('authoritative').messages.length === 1, 5000, 'b got it');
  assert.deepEqual(service.loadedRooms(), ['mounted']);
  assert.equal((await store.open('mounted'))?.durable.suffix.length ?? 0, 1, 'stored in the given store');
  await a.close();
  await b.close();
});

/** A Connection in memory: what the service sends is decoded into `got`. */
function memoryConnection() {
  const codec = new ClientCodec();
  let events: ConnectionEvents | undefined;
  const got: ServerMessage[] = [];
  const state = { open: true, closed: undefined as { code: number; reason: string } | undefined, paused: false };
  const conn: Connection = {
    remote: 'memory',
    get isOpen() {
      return state.open;
    },
    bufferedAmount: 0,
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
      conn.close(1006, 'terminated');
    },
    pause() {
      state.paused = true;
    },
    resume() {
      state.paused = false;
    },
  };
  return { conn, got, state, deliver: (m: object) => events!.message(codec.encode(m as never), true) };
}

test('handleConnection serves any Connection, and refuses one whose request names no room', async (t) => {
  const store = new MemoryStore();
  const service = createRoomService({ store, machines: [chat], log: 'silent' });
  t.after(async () => {
    await service.close();
    await store.close();
  });
  const bad = memoryConnection();
  await service.handleConnection(bad.conn, { url: '/?room=', headers: {} });
  assert.equal(bad.got[0]?.t, 'error');
  assert.equal((bad.got[0] as { code: string }).code, 'bad-room');
  assert.equal(bad.state.closed?.code, 4003);

  const m = memoryConnection();
  await service.handleConnection(m.conn, { url: '/?room=mem', headers: {} });
  m.deliver({ t: 'hello', v: PROTOCOL_VERSION, client: 'x', machine: { name: chat.name, version: chat.version }, have: 0 });
  await until(() => m.got.some((x) => x.t === 'welcome'), 5000, 'welcome');
  m.deliver({ t: 'ops', ops: [{ seq: 1, name: 'say', args: { text: 'over memory' } }] });
  await until(() => m.got.some((x) => x.t === 'log'), 5000, 'verdict');
  assert.equal(service.connectionCount(), 1);
  m.conn.close(1000, 'bye');
  await until(() => service.connectionCount() === 0, 5000, 'closed');
});

test('delayedConnection delays frames both ways and the close after them, counting delayed bytes as buffered', () => {
  const clock = new FakeClock({ microtasks: true });
  const sent: string[] = [];
  const heard: string[] = [];
  let events: ConnectionEvents | undefined;
  const inner: Connection = {
    remote: 'x',
    isOpen: true,
    bufferedAmount: 0,
    listen: (e) => {
      events = e;
    },
    send: (f) => sent.push(`frame ${f.length}`),
    close: (code) => sent.push(`close ${code}`),
    terminate: () => {},
    pause: () => {},
    resume: () => {},
  };
  const d = delayedConnection(inner, 50, clock);
  d.listen({ message: (data) => heard.push(`in ${data.length}`), close: () => heard.push('closed') });
  d.send(new Uint8Array(3));
  d.close(1000, 'bye');
  assert.equal(d.bufferedAmount, 3);
  events!.message(new Uint8Array(2), true);
  clock.advance(49);
  assert.deepEqual([sent, heard], [[], []]);
  clock.advance(1);
  assert.deepEqual([sent, heard], [['frame 3'], ['in 2']]);
  assert.equal(d.bufferedAmount, 0);
  clock.advance(1);
  assert.deepEqual(sent, ['frame 3', 'close 1000']);
});

test('a room the store cannot load now is refused as storage-failed, not fatal: the client retries and joins once the store answers', async (t) => {
  const inner = new MemoryStore();
  let failures = 2;
  const flaky = Object.create(inner) as MemoryStore;
  flaky.open = ((room: string, init?: RoomInit) => {
    if (failures > 0) {
      failures--;
      return Promise.reject(new Error('the store is electing a leader (simulated)'));
    }
    return init ? inner.open(room, init) : inner.open(room);
  }) as MemoryStore['open'];
  const service = createRoomService({ store: flaky, machines: [chat], log: 'silent' });
  const http = createHttpServer();
  http.on('upgrade', (req, socket, head) => service.handleUpgrade(req, socket, head));
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', () => r()));
  t.after(async () => {
    await service.close();
    await inner.close();
    await new Promise<void>((r) => http.close(() => r()));
  });
  const { port } = http.address() as AddressInfo;
  const errors: Error[] = [];
  const a = await connect({ url: `ws://127.0.0.1:${port}`, room: 'flaky', machine: chat, onError: (e) => errors.push(e), backoff: { minMs: 10, maxMs: 50 } });
  await online(a);
  assert.equal(failures, 0, 'both failed loads were retried');
  assert.ok(
    errors.some((e) => /cannot load room flaky now: the store is electing a leader/.test(e.message)),
    errors.map((e) => e.message).join('\n'),
  );
  await a.ops.say({ text: 'after the store came back' }).visible;
  await a.close();
});
