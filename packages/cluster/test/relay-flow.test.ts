/**
 * Flow control across the relay (relay.ts): two Relays, an edge and an owner, over an in-memory
 * stand-in for core NATS (no server). A slow client behind the edge, or an edge that stops
 * reporting (frozen, a slow link), shows in the relayed connection's `bufferedAmount`, on which
 * the room service's bounds act as on a direct connection (its slow-consumer cut at
 * maxSendBufferBytes, its presence holding); the service's input pause reaches the client's socket.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import type { Connection } from '@hercules/server/core';
import { Relay, type EdgeSocket } from '../src/relay.ts';

type Handler = (err: Error | null, m: Msg) => void;

/** Core NATS in memory: exact subjects and `a.*.c` wildcards, delivery on a microtask, a switch to drop what one subject receives. */
class Bus {
  private readonly subs: { subject: string; fn: Handler }[] = [];
  readonly drop = new Set<string>();
  connection(): NatsConnection {
    return {
      subscribe: (subject: string, opts: { callback: Handler }) => {
        const sub = { subject, fn: opts.callback };
        this.subs.push(sub);
        return { unsubscribe: () => this.subs.splice(this.subs.indexOf(sub), 1) };
      },
      publish: (subject: string, data?: Uint8Array | string, opts?: { headers?: Msg['headers'] }) => this.deliver(subject, data, opts?.headers),
      request: (subject: string, data: string) =>
        new Promise((resolve) => this.deliver(subject, data, undefined, (s: string) => resolve({ json: () => JSON.parse(s) }))),
    } as unknown as NatsConnection;
  }
  private deliver(subject: string, data: Uint8Array | string | undefined, headers: Msg['headers'], respond?: (s: string) => void): void {
    if (this.drop.has(subject)) return;
    const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : (data ?? new Uint8Array(0));
    const m = { subject, data: bytes, headers, json: () => JSON.parse(new TextDecoder().decode(bytes)), respond } as unknown as Msg;
    for (const s of [...this.subs]) if (matches(s.subject, subject)) queueMicrotask(() => s.fn(null, m));
  }
}

function matches(pattern: string, subject: string): boolean {
  const p = pattern.split('.'),
    s = subject.split('.');
  return p.length === s.length && p.every((t, i) => t === '*' || t === s[i]);
}

/** A client socket on the edge that writes nothing out until told (a slow reader). */
class SlowSocket implements EdgeSocket {
  bufferedAmount = 0;
  paused = 0;
  resumed = 0;
  closed: number | undefined;
  send(frame: Uint8Array): void {
    this.bufferedAmount += frame.length;
  }
  close(code: number): void {
    this.closed = code;
  }
  pause(): void {
    this.paused++;
  }
  resume(): void {
    this.resumed++;
  }
}

const BEAT = 20;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function relayed(bus: Bus) {
  let conn!: Connection;
  const owner = new Relay({
    nc: bus.connection(),
    nodeId: 'owner',
    beatMs: BEAT,
    async accept(c) {
      conn = c;
      c.listen({ message() {}, close() {} });
      return { ok: true };
    },
  });
  const edge = new Relay({ nc: bus.connection(), nodeId: 'edge', beatMs: BEAT, accept: async () => ({ ok: false, message: 'not here' }) });
  await sleep(2 * BEAT); // each hears the other's heartbeat
  const socket = new SlowSocket();
  const link = await edge.open('owner', 'r', { url: '/?room=r', headers: {} }, socket);
  return {
    owner,
    edge,
    socket,
    link,
    conn,
    close: () => {
      owner.close();
      edge.close();
    },
  };
}

test("a slow client behind the edge: the owner's relayed connection shows its unsent bytes, and drops them once the socket drains", async () => {
  const bus = new Bus();
  const { socket, conn, close } = await relayed(bus);
  try {
    const frame = new Uint8Array(10 << 10);
    for (let i = 0; i < 40; i++) conn.send(frame);
    await sleep(2 * BEAT); // delivered, then reported (every 64 KiB and every heartbeat)
    assert.equal(socket.bufferedAmount, 400 << 10);
    // Without flow control the owner saw 0, and the service's bounds never acted on a relayed client.
    assert.equal(conn.bufferedAmount, 400 << 10);
    socket.bufferedAmount = 0; // the client read it all
    await sleep(2 * BEAT);
    assert.equal(conn.bufferedAmount, 0);
  } finally {
    close();
  }
});

test('an edge that stops reporting (frozen, or a slow link): what the owner sent since counts as unsent', async () => {
  const bus = new Bus();
  const { conn, close } = await relayed(bus);
  try {
    bus.drop.add('hc.relay.edge.out'); // nothing reaches the edge any more
    const frame = new Uint8Array(1000);
    for (let i = 0; i < 300; i++) conn.send(frame);
    await sleep(2 * BEAT);
    assert.equal(conn.bufferedAmount, 300_000);
  } finally {
    close();
  }
});

test("the service's input pause reaches the client's socket, is repeated while it holds, and a lost resume lifts within 3 heartbeats", async () => {
  const bus = new Bus();
  const { socket, conn, close } = await relayed(bus);
  try {
    conn.pause();
    await sleep(BEAT / 2);
    assert.equal(socket.paused, 1);
    await sleep(4 * BEAT); // repeated pauses keep it paused (and do not pause it twice)
    assert.deepEqual([socket.paused, socket.resumed], [1, 0]);
    conn.resume();
    await sleep(BEAT / 2);
    assert.deepEqual([socket.paused, socket.resumed], [1, 1]);
    conn.pause();
    await sleep(BEAT / 2);
    bus.drop.add('hc.relay.edge.out'); // the resume (and every repeat of the pause) is lost
    conn.resume();
    await sleep(5 * BEAT);
    assert.deepEqual([socket.paused, socket.resumed], [2, 2]);
  } finally {
    close();
  }
});
