/**
 * The cluster simulator's seed 1064 (LIVE-CONVERGE), in relay.ts: an owner that ended a relayed
 * connection because it stopped hearing the edge node (the edge paused, or cut off) had not told
 * the edge, whose client then waited on a connection nobody served. The owner now answers a
 * frame for a connection it no longer serves with a close, and tells the edge of the connections
 * it ended once it hears the edge again (fixed in c773af8; the seed's draws no longer meet the
 * case, so it is met here directly). Two Relays over an in-memory bus.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Relay, type EdgeSocket } from '../src/relay.ts';
import { Bus } from './fake-bus.ts';

const BEAT = 50;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Wait until `cond` holds (timers run late on a loaded machine), at most 5 s; then assert it. */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (const end = Date.now() + 5000; !cond() && Date.now() < end; ) await sleep(5);
  assert.ok(cond(), what);
}

class Socket implements EdgeSocket {
  closed: number | undefined;
  send(): void {}
  close(code: number): void {
    this.closed = code;
  }
}

async function relayed(bus: Bus) {
  let served = 0;
  const owner = new Relay({
    nc: bus.connection(),
    nodeId: 'owner',
    beatMs: BEAT,
    async accept(c) {
      c.listen({ message: () => served++, close() {} });
      return { ok: true };
    },
  });
  const edge = new Relay({ nc: bus.connection(), nodeId: 'edge', beatMs: BEAT, accept: async () => ({ ok: false, message: 'not here' }) });
  await sleep(2 * BEAT);
  const socket = new Socket();
  const link = await edge.open('owner', 'r', { url: '/?room=r', headers: {} }, socket);
  return { owner, edge, socket, link, served: () => served };
}

test('seed 1064: a frame for a relayed connection the owner ended while it could not hear the edge is answered with a close', async () => {
  const bus = new Bus();
  const { owner, edge, socket, link, served } = await relayed(bus);
  try {
    bus.drop.add('hc.node.edge.beat'); // the owner stops hearing the edge (its beats lost), the edge hears the owner
    await until(() => owner.counts().owner === 0, 'the owner ended the relayed connection');
    assert.equal(socket.closed, undefined, 'and the edge was not told');
    link.send(new Uint8Array([1]));
    await until(() => socket.closed === 1012, 'the client is closed, so it reconnects');
    assert.equal(served(), 0);
  } finally {
    owner.close();
    edge.close();
  }
});

test('seed 1064: an owner tells the edge of the relayed connections it ended once it hears the edge again', async () => {
  const bus = new Bus();
  const { owner, edge, socket } = await relayed(bus);
  try {
    bus.drop.add('hc.node.edge.beat');
    await until(() => owner.counts().owner === 0, 'the owner ended the relayed connection');
    await sleep(2 * BEAT);
    assert.equal(socket.closed, undefined, 'while it cannot hear the edge it does not tell it');
    bus.drop.delete('hc.node.edge.beat');
    await until(() => socket.closed === 1012, 'told once heard again');
  } finally {
    owner.close();
    edge.close();
  }
});
