/**
 * A shard handed over by placement (a drain, a node joining), told to the node it goes to, so
 * that node takes it at once instead of at its clients' next request (issue 42: "a drain: no op
 * waits longer than 500 ms more than at idle"). Before this, the new owner claimed the shard and
 * loaded its rooms only when a reconnecting client asked for one: in a drain at load 13-15 a
 * moved room's client waited 1.4-1.9 s (idle max 0.2-0.6 s), of which the take (the lease, the
 * claim and its read-back) was 350-450 ms and the room's load 350-600 ms, one after the other
 * after the client's reconnect; and a client that reconnected while the old owner was still
 * writing its checkpoints was refused and routed again 100 ms later.
 *
 *   <p>.handoff.<to>   old owner -> new owner   {shard, phase: 'start'}, before its rooms close
 *                                               {shard, phase: 'released', rooms}, once the lease is released
 *                                               {shard, phase: 'cancel'}, if it did not hand the shard over after all
 *
 * On `start` the new owner holds connections for the shard (`wait`) until `released` (or
 * `waitMs`), instead of refusing them; on `released` it takes the shard and loads the rooms the
 * old owner had loaded, while their clients reconnect. Core NATS delivers at most once: a lost
 * message only leaves things as they were before this (the take at the next request).
 * Safety does not rest on it: the take is the one a client's request makes (claims fence).
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';

export interface HandoffOptions {
  nc: NatsConnection;
  prefix: string;
  nodeId: string;
  /** Take the shard and load these rooms (the new owner's side). */
  take(shard: number, rooms: string[]): Promise<void>;
  /** How long an announced handover holds connections at most, ms (default 1000: a handover took 0.2-0.3 s at load 15). */
  waitMs?: number;
  onWarning?(message: string): void;
}

type Message = { shard: number; phase: 'start' | 'cancel' } | { shard: number; phase: 'released'; rooms: string[] };

export class Handoffs {
  private readonly sub: Subscription;
  private readonly pending = new Map<number, { done: Promise<void>; resolve: () => void }>();

  constructor(private readonly opts: HandoffOptions) {
    this.sub = opts.nc.subscribe(`${opts.prefix}.handoff.${opts.nodeId}`, {
      callback: (err, m) => {
        if (err) return;
        try {
          this.receive(m.json<Message>());
        } catch (e) {
          opts.onWarning?.(`handoff: a malformed message: ${(e as Error).message}`);
        }
      },
    });
  }

  private receive(m: Message): void {
    if (!Number.isInteger(m.shard)) return;
    if (m.phase === 'start') {
      if (this.pending.has(m.shard)) return;
      let resolve!: () => void;
      const done = new Promise<void>((r) => (resolve = r));
      const timer = setTimeout(() => this.settle(m.shard), this.opts.waitMs ?? 1000);
      timer.unref?.();
      this.pending.set(m.shard, { done: done.then(() => clearTimeout(timer)), resolve });
      return;
    }
    if (m.phase === 'cancel') return this.settle(m.shard);
    if (m.phase !== 'released') return;
    this.settle(m.shard);
    const rooms = Array.isArray(m.rooms) ? m.rooms.filter((r): r is string => typeof r === 'string') : [];
    this.opts.take(m.shard, rooms).catch((e) => this.opts.onWarning?.(`shard ${m.shard}: taking it when it was handed over failed: ${(e as Error).message}`));
  }

  private settle(shard: number): void {
    this.pending.get(shard)?.resolve();
    this.pending.delete(shard);
  }

  /** Resolves once an announced handover of `shard` to this node has released the lease (or at once if none is announced). */
  wait(shard: number): Promise<void> {
    return this.pending.get(shard)?.done ?? Promise.resolve();
  }

  /** The old owner's side: a handover of `shard` to `to` starts; it released the lease, with these rooms loaded. */
  start(to: string, shard: number): void {
    this.send(to, { shard, phase: 'start' });
  }
  released(to: string, shard: number, rooms: string[]): void {
    this.send(to, { shard, phase: 'released', rooms });
  }
  /** The handover announced did not happen (the shard was lost or given up meanwhile): `to` stops holding its connections. */
  cancel(to: string, shard: number): void {
    this.send(to, { shard, phase: 'cancel' });
  }

  private send(to: string, m: Message): void {
    try {
      this.opts.nc.publish(`${this.opts.prefix}.handoff.${to}`, JSON.stringify(m));
    } catch {
      /* the connection is closing: the new owner takes the shard at its next request */
    }
  }

  close(): void {
    this.sub.unsubscribe();
    for (const k of [...this.pending.keys()]) this.settle(k);
  }
}
