/**
 * Flow control across the relay (relay.ts): two Relays, an edge and an owner, over an in-memory
 * stand-in for core NATS (no server). A slow client behind the edge, or an edge that stops
 * reporting (frozen, a slow link), shows in the relayed connection's `bufferedAmount`, on which
 * the room service's bounds act as on a direct connection (its slow-consumer cut at
 * maxSendBufferBytes, its presence holding); the service's input pause reaches the client's socket.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Connection } from '@hercules/server/core';
import { Relay, type EdgeSocket } from '../src/relay.ts';
import { Bus } from './fake-bus.ts';

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

const BEAT = 200; // a peer is dead after 3 silent beats: 150 ms gaps were seen at a load average of 28
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Wait until `cond` holds (timers run late on a loaded machine), at most 5 s; then assert it. */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (const end = Date.now() + 5000; !cond() && Date.now() < end; ) await sleep(5);
  assert.ok(cond(), what);
}

async function relayed(bus: Bus) {
  let conn!: Connection;
  const got: Uint8Array[] = [];
  const owner = new Relay({
    nc: bus.connection(),
    nodeId: 'owner',
    beatMs: BEAT,
    async accept(c) {
      conn = c;
      c.listen({ message: (f) => got.push(f), close() {} });
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
    got,
    close: () => {
      owner.close();
      edge.close();
    },
  };
}

test("a slow client behind the edge: the owner's relayed connection shows its unsent bytes, and drops them once the socket drains", async () => {
  const bus = new Bus();
  const { socket, conn, link, got, close } = await relayed(bus);
  try {
    link.send(new Uint8Array([7])); // the client's frames still reach the service beside the reports
    await until(() => got.length === 1, 'the client frame reached the owner');
    const frame = new Uint8Array(10 << 10);
    for (let i = 0; i < 40; i++) conn.send(frame);
    // Delivered, then reported (every 64 KiB and every heartbeat). Without flow control the owner
    // saw 0, and the service's bounds never acted on a relayed client.
    await until(() => socket.bufferedAmount === 400 << 10 && conn.bufferedAmount === 400 << 10, `the owner sees 400 KiB unsent (${conn.bufferedAmount})`);
    socket.bufferedAmount = 0; // the client read it all
    await until(() => conn.bufferedAmount === 0, `the owner sees it drained (${conn.bufferedAmount})`);
  } finally {
    close();
  }
});

test('an edge that stops reporting (frozen, or a slow link): what the owner sent since counts as unsent', async () => {
  const bus = new Bus();
  const { conn, owner, close } = await relayed(bus);
  try {
    bus.drop.add('hc.relay.edge.out'); // nothing reaches the edge any more
    const frame = new Uint8Array(1000);
    for (let i = 0; i < 300; i++) conn.send(frame);
    await sleep(2 * BEAT);
    assert.equal(conn.bufferedAmount, 300_000);
    assert.equal(owner.counts().owner, 1, 'the edge is alive (its heartbeats arrive): the connection is not ended for that');
  } finally {
    close();
  }
});

test("the service's input pause reaches the client's socket, is repeated while it holds, and a lost resume lifts within 3 heartbeats", async () => {
  const bus = new Bus();
  const { socket, conn, close } = await relayed(bus);
  try {
    conn.pause();
    await until(() => socket.paused === 1, 'paused');
    await sleep(4 * BEAT); // repeated pauses keep it paused (and do not pause it twice)
    assert.deepEqual([socket.paused, socket.resumed], [1, 0]);
    conn.resume();
    await until(() => socket.resumed === 1, 'resumed');
    conn.pause();
    await until(() => socket.paused === 2, 'paused again');
    bus.drop.add('hc.relay.edge.out'); // the resume (and every repeat of the pause) is lost
    conn.resume();
    await until(() => socket.resumed === 2, 'resumed by the edge itself');
    assert.equal(socket.paused, 2);
  } finally {
    close();
  }
});
