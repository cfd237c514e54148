/**
 * Where a node serves a client of a room: here, if this node owns the room's shard or can take
 * it; at the shard's owner (relayed) if that node is alive; otherwise nowhere yet, so wait: a
 * dead owner's lease expires soon, and a NATS stream or lease bucket electing a leader answers
 * again soon. The node runs this on every WebSocket; the simulator runs it on its nodes.
 */
import type { Clock } from '@hercules/server/pipeline';
import { NotOwnerError } from './cluster-store.ts';

export type Route = { local: true } | { local: false; owner: string };

export interface RouteOptions {
  /** The node's store (a `ClusterStore`): the shard of a room, and taking a shard. */
  store: { shardOf(room: string): number; acquire(shard: number): Promise<unknown>; owns?(shard: number): boolean };
  /**
   * The node that should own a shard (placement.ts), if placement is on: a shard this node does
   * not hold goes there while that node is alive, instead of being taken here.
   */
  preferred?(shard: number): string | undefined;
  nodeId: string;
  /** Whether a node is alive (its heartbeats arrive). */
  alive(node: string): boolean;
  clock: Pick<Clock, 'now' | 'after'>;
  /** Give up after this long, ms: the lease plus a NATS election (4-9 s on 2.9). */
  waitMs: number;
  /** Between attempts, ms (default 100). */
  retryMs?: number;
}

/** Route a room's connection; rejects with the last refusal once `waitMs` passed. */
export async function routeRoom(room: string, opts: RouteOptions): Promise<Route> {
  const k = opts.store.shardOf(room);
  const deadline = opts.clock.now() + opts.waitMs;
  const p = opts.preferred?.(k);
  if (p !== undefined && p !== opts.nodeId && opts.alive(p) && !opts.store.owns?.(k)) return { local: false, owner: p };
  for (;;) {
    try {
      await opts.store.acquire(k);
      return { local: true };
    } catch (e) {
      if (e instanceof NotOwnerError && e.owner && e.owner !== opts.nodeId && opts.alive(e.owner)) return { local: false, owner: e.owner };
      if (opts.clock.now() > deadline) throw e;
      await new Promise<void>((r) => opts.clock.after(opts.retryMs ?? 100, r));
    }
  }
}
