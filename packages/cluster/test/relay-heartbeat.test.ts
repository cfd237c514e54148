/**
 * The room service's heartbeat across the relay (relay.ts): two Relays, an edge and an owner,
 * over an in-memory stand-in for core NATS. The service drops a connection that sent no frame
 * and no pong for a heartbeat; only the edge sees its client's WebSocket pongs, so the owner's
 * ping travels to the edge and the pong back. Without it, a relayed client with nothing to send
 * was dropped after two heartbeats (2 s on a cluster node, whose heartbeat is 1 s).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Connection } from '@hercules/server/core';
import { Relay, type EdgeSocket } from '../src/relay.ts';
import { Bus } from './fake-bus.ts';

const BEAT = 200;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(cond: () => boolean, what: string): Promise<void> {
  for (const end = Date.now() + 5000; !cond() && Date.now() < end; ) await sleep(5);
  assert.ok(cond(), what);
}

// spec: LIVE-DEAD-LINK
test("the owner's ping reaches the relayed client's socket, and its pong reaches the owner's service as proof of life", async () => {
  const bus = new Bus();
  let conn!: Connection;
  let pongs = 0;
  const owner = new Relay({
    nc: bus.connection(),
    nodeId: 'owner',
    beatMs: BEAT,
    async accept(c) {
      conn = c;
      c.listen({ message() {}, close() {}, pong: () => pongs++ });
      return { ok: true };
    },
  });
  const edge = new Relay({ nc: bus.connection(), nodeId: 'edge', beatMs: BEAT, accept: async () => ({ ok: false, message: 'not here' }) });
  try {
    await sleep(2 * BEAT);
    let pinged = 0;
    const socket: EdgeSocket = { send() {}, close() {}, ping: () => pinged++ };
    const link = await edge.open('owner', 'r', { url: '/?room=r', headers: {} }, socket);
    assert.equal(typeof conn.ping, 'function', 'a relayed connection can be pinged, as a WebSocket one');
    conn.ping!();
    await until(() => pinged === 1, "the ping reached the client's socket on the edge");
    link.pong();
    await until(() => pongs === 1, "the client's pong reached the service on the owner");
  } finally {
    owner.close();
    edge.close();
  }
});
