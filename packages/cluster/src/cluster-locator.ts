/**
 * The cluster's room locator (the server's `RoomLocator`, room-locator.ts): a room is served here
 * if this node owns its shard or can take it, else at the shard's live owner (routing.ts); a
 * client's connection is relayed there (relay.ts) and a backend call forwarded
 * (backend-calls.ts). What a cluster node's front door runs; the parts that reach NATS are
 * given, so a test drives it with doubles.
 */
import { systemClock, type Clock } from '@hercules/server/pipeline';
import type { RemoteRooms, RoomLocator } from '@hercules/server/core';
import { routeRoom, type RouteOptions } from './routing.ts';

export interface ClusterLocatorOptions extends Pick<RemoteRooms, 'relay' | 'call' | 'peers' | 'rerouteMs'> {
  store: RouteOptions['store'];
  nodeId: string;
  /** Whether a node is alive (its heartbeats arrive). */
  alive(node: string): boolean;
  /** How long `locate` waits for a shard without a live owner, ms: the lease plus a NATS election. */
  waitMs: number;
  clock?: Pick<Clock, 'now' | 'after'>;
  preferred?: RouteOptions['preferred'];
}

export function clusterLocator(o: ClusterLocatorOptions): RoomLocator & { remote: RemoteRooms } {
  const route: RouteOptions = { store: o.store, nodeId: o.nodeId, alive: o.alive, clock: o.clock ?? systemClock, waitMs: o.waitMs, preferred: o.preferred };
  return {
    async locate(room) {
      const r = await routeRoom(room, route);
      return r.local ? { here: true } : { here: false, node: r.owner };
    },
    remote: { relay: o.relay, call: o.call, peers: o.peers, rerouteMs: o.rerouteMs },
  };
}
