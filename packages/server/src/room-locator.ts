/**
 * The room locator: where a room is served, below the room service (issue 36, item 2; Fluid's
 * local-or-proxy orderer is the model). `locate(room)` answers "here" (this process's registry
 * hosts it) or "at node X"; for a room elsewhere, `remote` carries what the front door needs to
 * reach it: a client's connection relayed, a backend call (the admin API's) forwarded, a call
 * every node answers. The embedded server's locator answers "here" for every room; a cluster
 * node's (@hercules/cluster) routes a room to its shard's owner.
 */
import type { ConnectionRequest } from './admission.ts';
import type { RoomFile, RoomsQuery } from './backend-api.ts';

export type RoomLocation = { here: true } | { here: false; node: string };

export interface RoomLocator {
  /** Where `room` is served now. Rejects when no node can serve it now (the client or caller retries). */
  locate(room: string): Promise<RoomLocation>;
  /** How rooms served elsewhere are reached; absent when every room is served here. */
  readonly remote?: RemoteRooms;
}

/** A client's socket on this node, as a relay to another node writes to it. */
export interface EdgeSocket {
  send(frame: Uint8Array): void;
  close(code: number, reason: string): void;
  /** Bytes sent and not yet written out (the WebSocket's bufferedAmount): the relay reports it to the owner, whose bounds act on it. */
  readonly bufferedAmount?: number;
  /** Stop and start reading the client's frames (the owner's input bound, across the relay). */
  pause?(): void;
  resume?(): void;
  /** Ask the client for a WebSocket pong (the owner's heartbeat, across the relay); `RelayLink.pong` when it answers. */
  ping?(): void;
}

/** The relayed side of a client's connection: its frames go to the node serving the room. */
export interface RelayLink {
  send(frame: Uint8Array): void;
  close(code: number, reason: string): void;
  /** The client answered a ping (`EdgeSocket.ping`): proof of life for the owner's heartbeat. */
  pong?(): void;
}

/** A backend call (what the admin HTTP API calls) as it travels to the node serving its room: JSON. */
export type BackendCall =
  | { call: 'submit'; room: string; machine?: string; op: string; args?: unknown; author: string; key?: string }
  | { call: 'state'; room: string; machine?: string }
  | { call: 'stateAt'; room: string; position: number }
  | { call: 'log'; room: string; from?: number; to?: number }
  | { call: 'export'; room: string }
  | { call: 'delete'; room: string }
  | { call: 'import'; room: string; file: RoomFile }
  | { call: 'rooms'; query: RoomsQuery }
  | { call: 'revoke'; user: string; room?: string; reason?: string };

export interface RemoteRooms {
  /** Relay a client's connection to `node`; rejects if that node does not serve the room (route it again). */
  relay(node: string, room: string, request: ConnectionRequest, socket: EdgeSocket): Promise<RelayLink>;
  /**
   * Run `call` at `node` and resolve with its answer; rejects with the HerculesError it threw
   * there (same code and message), or `unreachable` if the node did not answer.
   */
  call(node: string, call: BackendCall): Promise<unknown>;
  /** The other nodes alive now: those a call for every node (`rooms`, `revoke`) goes to. */
  peers(): string[];
  /** How long a connection whose relay was refused is routed again, ms: the room may be moving between nodes. */
  readonly rerouteMs: number;
}

const HERE: RoomLocation = { here: true };

/** The embedded server's locator: its registry hosts every room. */
export function hereLocator(): RoomLocator {
  return { locate: () => Promise.resolve(HERE) };
}
