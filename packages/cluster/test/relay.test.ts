/**
 * The relay's owner side over an in-memory stand-in for a NATS connection (no server): what a
 * relayed connection tells the room service when its edge goes silent while the owner is still
 * taking the room's shard.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { Relay } from '../src/relay.ts';

/** Subscriptions by subject; publishes recorded; no requests. */
class FakeNats {
  readonly subs = new Map<string, (err: Error | null, m: Msg) => void>();
  readonly published: string[] = [];
  subscribe(subject: string, opts: { callback: (err: Error | null, m: Msg) => void }) {
    this.subs.set(subject, opts.callback);
    return { unsubscribe: () => this.subs.delete(subject) };
  }
  publish(subject: string): void {
    this.published.push(subject);
  }
  /** Deliver a relay open request to the owner. */
  open(owner: string, body: object): Promise<unknown> {
    return new Promise((resolve) =>
      this.subs.get(`hc.relay.${owner}.open`)!(null, {
        subject: `hc.relay.${owner}.open`,
        json: () => body,
        respond: (s: string) => resolve(JSON.parse(s)),
      } as unknown as Msg),
    );
  }
}

test('a relayed connection whose edge went silent while the owner took the shard tells the service it closed, once it listens', async () => {
  const nc = new FakeNats();
  let release!: () => void;
  const taken = new Promise<void>((r) => {
    release = r;
  });
  let closes = 0;
  const owner = new Relay({
    nc: nc as unknown as NatsConnection,
    nodeId: 'owner',
    beatMs: 10,
    // As the node's: take the shard (held here until `release`), then hand the connection to the service, which listens.
    async accept(conn) {
      await taken;
      conn.listen({ message() {}, close: () => closes++ });
      return { ok: true };
    },
  });
  try {
    // The edge never beats: the owner ends the connection at its next heartbeat round, while the take is pending.
    const answer = nc.open('owner', { id: 'edge/1', edge: 'edge', room: 'r', headers: {}, remote: '?' });
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(owner.counts(), { edge: 0, owner: 0 });
    release();
    assert.deepEqual(await answer, { ok: true });
    await new Promise((r) => setTimeout(r, 10));
    // Without it the service's session waits for a close that already happened: it is never dropped.
    assert.equal(closes, 1);
  } finally {
    owner.close();
  }
});
